"""Target adapters: the DNS servers dnscost measures, started and configured by dnscost.

``TARGETS`` maps each target's token to its adapter class; :func:`make_target` builds one by
name. See ``docs/targets.md`` for how each is configured and what it serves.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dnscost.certs import TlsFiles
from dnscost.engine import Endpoint
from dnscost.errors import UsageError
from dnscost.targets.base import Counters, Target
from dnscost.targets.bind9 import Bind9
from dnscost.targets.builtin import Builtin
from dnscost.targets.coredns import Coredns
from dnscost.targets.dnsdist import Dnsdist
from dnscost.targets.knot import KnotResolver
from dnscost.targets.pdns import PdnsRecursor
from dnscost.targets.unbound import Unbound

__all__ = ["TARGETS", "Counters", "Target", "make_target"]

TARGETS: dict[str, type[Target]] = {
    cls.name: cls for cls in (Dnsdist, KnotResolver, Unbound, Bind9, PdnsRecursor, Builtin, Coredns)
}


def make_target(
    name: str,
    workdir: Path,
    *,
    cpus: Sequence[int],
    tls: TlsFiles,
    upstream: Endpoint | None,
    transports: Sequence[str] | None = None,
    tld: str = "test",
    synthetic: int = 10_000,
    host: str = "127.0.0.1",
    exec_prefix: Sequence[str] = (),
) -> Target:
    """The adapter for ``name`` (a key of :data:`TARGETS`), not yet started."""
    cls = TARGETS.get(name)
    if cls is None:
        raise UsageError(f"unknown target {name} (known: {', '.join(TARGETS)})")
    return cls(
        workdir,
        cpus=cpus,
        tls=tls,
        upstream=upstream,
        transports=transports,
        tld=tld,
        synthetic=synthetic,
        host=host,
        exec_prefix=exec_prefix,
    )
