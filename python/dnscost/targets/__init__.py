"""Target adapters: the DNS servers dnscost measures, started and configured by dnscost.

``TARGETS`` maps each adapter's name to its class. A target is named ``NAME`` (the host's
package), ``NAME@RELEASE`` (a Debian release root, :mod:`dnscost.targets.roots`) or ``NAME@PATH``
(an own build): :func:`target_name` parses such a name, :func:`adapter` gives its class,
:func:`make_target` builds one. See ``docs/targets.md`` for how each is configured and what it
serves.
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
from dnscost.targets.place import Build, Host, Place, Root, TargetName
from dnscost.targets.roots import root_of
from dnscost.targets.unbound import Unbound

__all__ = [
    "PACKAGED",
    "TARGETS",
    "Counters",
    "Target",
    "adapter",
    "build_of",
    "locate",
    "make_target",
    "place_of",
    "served",
    "server_file",
    "target_name",
]

TARGETS: dict[str, type[Target]] = {
    cls.name: cls for cls in (Dnsdist, KnotResolver, Unbound, Bind9, PdnsRecursor, Builtin, Coredns)
}

PACKAGED = tuple(name for name, cls in TARGETS.items() if cls.package)
"""The targets Debian packages, which release roots can hold."""


def target_name(text: str) -> TargetName:
    """``NAME``, ``NAME@RELEASE`` or ``NAME@PATH`` checked; one-line :class:`UsageError` otherwise."""
    name = TargetName.parse(text, tuple(TARGETS), PACKAGED)
    if name.build is not None and name.base == "builtin":
        raise UsageError(f"{text}: builtin is dnscost's own responder (no build of it to point at)")
    return name


def adapter(text: str) -> type[Target]:
    """The adapter class of the target named ``text``."""
    return TARGETS[target_name(text).base]


def served(text: str) -> tuple[str, ...]:
    """The transports the target named ``text`` serves: a build is asked (its binary's
    features); Debian's packages, at every release, serve their adapter's."""
    name = target_name(text)
    cls = TARGETS[name.base]
    return cls.served_in(build_of(name)) if name.build is not None else cls.transports


def place_of(text: str) -> Place:
    """Where the programs of the target named ``text`` come from (a missing release root: one
    line naming the command that makes it)."""
    name = target_name(text)
    if name.release is not None:
        return root_of(name, TARGETS[name.base].package or name.base)
    if name.build is not None:
        return build_of(name)
    return Host()


def build_of(name: TargetName) -> Build:
    """The own build ``name`` points at, checked to be the server it is named as (its binary
    executable, carrying the adapter's identity, reporting a version as the adapter reads one):
    a one-line :class:`UsageError` naming what the path is otherwise, so that a run is never
    labelled with a build it did not measure."""
    assert name.build is not None
    cls = TARGETS[name.base]
    build = Build.at(name.build, cls.binary)
    cls.check_build(build, str(name))
    return build


def locate(text: str) -> str:
    """The path of the server's binary of the target named ``text``, or one line saying how to
    get it."""
    name = target_name(text)
    cls = TARGETS[name.base]
    if name.release is None and name.build is None:
        return cls.locate()
    return place_of(text).find(cls.binary, str(name), cls.package)


def server_file(text: str) -> Path:
    """The server's binary of the target named ``text`` as a file on this machine (a release
    root's under the root's directory): what two targets are compared by, by content."""
    name = target_name(text)
    cls = TARGETS[name.base]
    place = place_of(text)
    if isinstance(place, Build):
        return place.server_path(str(name))
    if isinstance(place, Root):
        return place.path / place.find(cls.binary, str(name), cls.package).lstrip("/")
    return Path(cls.locate())


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
    any_name: bool = False,
    host: str = "127.0.0.1",
    exec_prefix: Sequence[str] = (),
    processes: int = 1,
) -> Target:
    """The adapter for the target named ``name`` (:func:`target_name`), not yet started."""
    parsed = target_name(name)
    cls = TARGETS[parsed.base]
    return cls(
        workdir,
        cpus=cpus,
        tls=tls,
        upstream=upstream,
        transports=transports,
        tld=tld,
        synthetic=synthetic,
        any_name=any_name,
        host=host,
        exec_prefix=exec_prefix,
        place=place_of(name),
        token=str(parsed),
        processes=processes,
    )
