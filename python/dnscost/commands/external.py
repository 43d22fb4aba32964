"""The ``--external-*`` options of ``dnscost load``, ``run`` and ``reproduce``: a server the
operator started (``--target external``; docs/targets.md), its settings resolved once."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from dnscost.errors import UsageError

if TYPE_CHECKING:
    from dnscost.spec import Spec
    from dnscost.targets.external import ExternalSettings

__all__ = ["add_options", "external_settings", "spec_external"]


def add_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("external target (--target external: a server you started; docs/targets.md)")
    g.add_argument(
        "--external-endpoint",
        action="append",
        default=[],
        metavar="URL",
        help="udp|tcp|dot|tls|doh|https|doq|quic|doh3|h3://ADDR:PORT[/path], once per transport",
    )
    g.add_argument("--external-pid", type=int, metavar="PID", help="meter this process (and its threads)")
    g.add_argument("--external-cgroup", type=Path, metavar="DIR", help="meter this cgroup (v2, or v1 cpuacct)")
    g.add_argument("--external-ca", metavar="FILE", help="CA of its certificates, or 'insecure' (not verified)")
    g.add_argument("--external-sni", metavar="NAME", help="TLS server name (default: the engine's)")
    g.add_argument("--external-version", metavar="TEXT", help="its version, recorded as given")


def _given(a: argparse.Namespace) -> bool:
    """Whether any ``--external-*`` option was given."""
    options = (a.external_endpoint, a.external_pid, a.external_cgroup, a.external_ca, a.external_sni)
    return any(v for v in options) or bool(a.external_version)


def _resolved(a: argparse.Namespace) -> ExternalSettings:
    """The ``--external-*`` options, resolved once (one line on what is wrong with them)."""
    from dnscost.targets.external import resolve_external

    return resolve_external(
        a.external_endpoint,
        pid=a.external_pid,
        cgroup=a.external_cgroup,
        ca=a.external_ca,
        sni=a.external_sni,
        version=a.external_version,
    )


def spec_external(a: argparse.Namespace, spec: Spec, recorded: dict[str, object] | None = None) -> Spec:
    """``spec`` with the external target's settings it runs with: ``--external-*`` when given
    (they replace the spec's ``[external]`` table), else the table, else those ``recorded`` in
    the run being resumed. One line when the spec loads the external target without them, or
    when they are given for a spec that does not load it."""
    from dnscost.targets.external import EXTERNAL, ExternalSettings

    loads = EXTERNAL in spec.all_targets()
    settings: ExternalSettings | None
    if _given(a):
        if not loads:
            raise UsageError("--external-* options are for the external target: add --target external")
        settings = _resolved(a)
    elif spec.external is not None:
        settings = spec.external
    elif recorded is not None:
        settings = ExternalSettings.from_dict(recorded)
    else:
        settings = None
    if loads and settings is None:
        raise UsageError(
            f"{spec.origin}: target external needs --external-endpoint URL and --external-pid PID or "
            "--external-cgroup DIR (or the spec's [external] table)"
        )
    return dataclasses.replace(spec, external=settings if loads else None)


def external_settings(a: argparse.Namespace, target: str) -> ExternalSettings | None:
    """The external target's settings, resolved once; None for other targets (whose
    ``--external-*`` options are refused)."""
    from dnscost.targets.external import EXTERNAL

    if target != EXTERNAL:
        if _given(a):
            raise UsageError(f"--external-* options are for --target external, not {target}")
        return None
    return _resolved(a)
