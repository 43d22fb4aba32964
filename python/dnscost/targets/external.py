"""A server dnscost did not start: the operator's own build (dnsdist with DoQ, a tuned
unbound, a resolver dnscost has no adapter for), loaded at the endpoints given and metered by
its PID or its cgroup. dnscost starts nothing and stops nothing of it.

Its settings are resolved once (:func:`resolve_external`, one-line :class:`UsageError` on bad
input) into an :class:`ExternalSettings`, recorded with the run. It keeps no counters that
dnscost can read, so the answer-count cross-check and the cache-hit check are not run; the
trial's ``validity.unchecked`` names them (``dnscost.validity.UNCHECKED``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from dnscost.certs import TlsFiles
from dnscost.cgroup import Cgroup, find_mounts
from dnscost.contract import EngineConfig
from dnscost.engine import Endpoint
from dnscost.errors import TargetError, UsageError
from dnscost.targets.base import Counters, Target, stopped_text
from dnscost.transports import DATAGRAM_TRANSPORTS, TLS_TRANSPORTS, TRANSPORTS

__all__ = ["EXTERNAL", "SCHEMES", "ExternalSettings", "ExternalTarget", "parse_endpoint", "resolve_external"]

EXTERNAL = "external"
"""The target's token."""

SCHEMES: dict[str, str] = {
    **{t: t for t in TRANSPORTS},
    "dns": "udp",
    "do53": "udp",
    "tls": "dot",
    "https": "doh",
    "quic": "doq",
    "h3": "doh3",
    "https3": "doh3",
}
"""URL scheme → transport: the engine's tokens and the names servers use for them."""

INSECURE = "insecure"
"""``--external-ca insecure``: certificates are not verified (said so in the record)."""


def parse_endpoint(url: str) -> Endpoint:
    """``SCHEME://ADDR:PORT[/path]`` as an :class:`Endpoint` (DoH and DoH/3 default to
    ``/dns-query``); a one-line :class:`UsageError` otherwise."""
    parts = urlsplit(url)
    transport = SCHEMES.get(parts.scheme.lower())
    if transport is None:
        raise UsageError(f"--external-endpoint {url}: unknown scheme {parts.scheme!r} (known: {', '.join(SCHEMES)})")
    try:
        host, port = parts.hostname, parts.port
    except ValueError as e:
        raise UsageError(f"--external-endpoint {url}: {e}") from None
    if not host or port is None:
        raise UsageError(f"--external-endpoint {url}: give ADDRESS:PORT")
    path = None
    if transport in ("doh", "doh3"):
        path = parts.path or "/dns-query"
    elif parts.path not in ("", "/"):
        raise UsageError(f"--external-endpoint {url}: a path is for doh and doh3 only")
    return Endpoint(transport, host, port, path)


@dataclass(frozen=True)
class ExternalSettings:
    """An external target, resolved: what to load, how to trust it and what to meter."""

    endpoints: tuple[str, ...]
    """One URL per transport, in the engine's tokens (``dot://127.0.0.1:853``)."""
    pid: int | None
    """Metered by this process (its threads included), or"""
    cgroup: str | None
    """by this cgroup directory (v2, or a v1 ``cpuacct`` directory; memory from the same path
    in the v1 ``memory`` hierarchy when there is one)."""
    ca: str | None
    """The CA file its certificates are checked against; None with ``insecure`` or no TLS."""
    insecure: bool
    sni: str | None
    version: str | None
    """As the operator gave it (dnscost cannot ask an unknown server)."""

    def parsed(self) -> dict[str, Endpoint]:
        eps = (parse_endpoint(u) for u in self.endpoints)
        return {e.transport: e for e in eps}

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "endpoints": list(self.endpoints)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExternalSettings:
        return cls(
            tuple(d["endpoints"]), d.get("pid"), d.get("cgroup"), d.get("ca"), bool(d.get("insecure")), d.get("sni"),
            d.get("version"),
        )  # fmt: skip


def resolve_external(
    endpoints: Sequence[str],
    *,
    pid: int | None = None,
    cgroup: Path | None = None,
    ca: str | None = None,
    sni: str | None = None,
    version: str | None = None,
) -> ExternalSettings:
    """Checks the command line's external settings once, before anything starts."""
    if not endpoints:
        raise UsageError("--target external needs at least one --external-endpoint URL")
    parsed: dict[str, Endpoint] = {}
    for url in endpoints:
        ep = parse_endpoint(url)
        if ep.transport in parsed:
            raise UsageError(f"--external-endpoint: {ep.transport} given twice")
        parsed[ep.transport] = ep
    if (pid is None) == (cgroup is None):
        raise UsageError("--target external: give either --external-pid or --external-cgroup (one of them)")
    if pid is not None and (pid <= 0 or not Path(f"/proc/{pid}/stat").exists()):
        raise UsageError(f"--external-pid {pid}: no such process")
    if cgroup is not None:
        if not (cgroup / "cgroup.procs").is_file():
            raise UsageError(f"--external-cgroup {cgroup}: not a cgroup directory")
        if not (cgroup / "cpu.stat").is_file() and not (cgroup / "cpuacct.usage").is_file():
            raise UsageError(f"--external-cgroup {cgroup}: no CPU accounting (neither cpu.stat nor cpuacct.usage)")
    insecure = ca == INSECURE
    if ca is not None and not insecure and not Path(ca).is_file():
        raise UsageError(f"--external-ca {ca}: no such file")
    if ca is None and set(parsed) & set(TLS_TRANSPORTS):
        raise UsageError("--target external over TLS: give --external-ca FILE (or --external-ca insecure)")
    return ExternalSettings(
        endpoints=tuple(e.url() for e in parsed.values()),
        pid=pid,
        cgroup=str(cgroup) if cgroup is not None else None,
        ca=None if insecure or ca is None else str(Path(ca).resolve()),
        insecure=insecure,
        sni=sni,
        version=version,
    )


def existing_cgroup(path: Path) -> Cgroup:
    """A :class:`Cgroup` over a directory someone else made: a v2 directory, or a v1
    ``cpuacct`` one (with the same path under the ``memory`` hierarchy when it exists)."""
    mounts = find_mounts()
    if (path / "cpu.stat").is_file() and not (path / "cpuacct.usage").is_file():
        return Cgroup(2, {"unified": path})
    dirs = {"cpuacct": path}
    root = mounts.v1.get("cpuacct")
    memory = mounts.v1.get("memory")
    if root is not None and memory is not None and path.is_relative_to(root):
        mem = memory / path.relative_to(root)
        if (mem / "memory.usage_in_bytes").is_file():
            dirs["memory"] = mem
    return Cgroup(1, dirs)


class ExternalTarget(Target):
    """The operator's running server: endpoints from :class:`ExternalSettings`, health checked
    with the same probe as every target, CPU and memory from its PID or cgroup. Never started,
    pinned, restarted or stopped by dnscost."""

    name = EXTERNAL
    package = None
    binary = ""
    transports = TRANSPORTS
    keeps_counters = False
    unchecked: ClassVar[tuple[str, ...]] = ("answer-count", "cache-hits")

    def __init__(
        self,
        workdir: Path,
        settings: ExternalSettings,
        *,
        cpus: Sequence[int],
        tls: TlsFiles,
        tld: str = "test",
        synthetic: int = 10_000,
    ) -> None:
        self.settings = settings
        super().__init__(
            workdir, cpus=cpus, tls=tls, upstream=None, transports=list(settings.parsed()), tld=tld, synthetic=synthetic
        )
        self.endpoints = settings.parsed()
        self.host = next(iter(self.endpoints.values())).host
        self.external_cgroup = existing_cgroup(Path(settings.cgroup)) if settings.cgroup else None

    @classmethod
    def locate(cls) -> str:
        return ""

    def configure(self) -> list[str]:
        return []

    def version(self) -> str:
        return self.settings.version or ""

    def counters(self) -> Counters:
        return Counters()

    def client_tls(self, transport: str) -> EngineConfig:
        if transport not in TLS_TRANSPORTS:
            return {}
        opts: EngineConfig = {"insecure": True} if self.settings.insecure else {"ca_file": self.settings.ca}
        if self.settings.sni:
            opts["sni"] = self.settings.sni
        return opts

    def meter_cgroup(self) -> Cgroup | None:
        return self.external_cgroup

    def meter_pids(self) -> list[int]:
        if self.settings.pid is not None:
            return [self.settings.pid] if _running(self.settings.pid) else []
        return self.external_cgroup.pids() if self.external_cgroup else []

    def start(self, health_timeout: float = 15.0) -> None:
        """Starts nothing: checks that the server is there and answers on every endpoint (given
        longer than a server dnscost starts: it may still be closing an earlier trial's
        thousands of connections, where dnscost would have started a fresh one)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.check_alive()
        for transport, ep in self.endpoints.items():
            deadline = time.monotonic() + health_timeout
            while not (probe := self.probe(transport)).answered:
                # A definite cause (refused, an untrusted certificate, no route) ends the wait
                # at once; only a server that is there but not answering yet is waited for.
                refused = "" if probe.definite else _datagram_refused(ep)
                if probe.definite or refused:
                    raise TargetError(f"external target on {ep.url()}: {probe.reason if probe.definite else refused}")
                if time.monotonic() > deadline:
                    # Names are zero-padded to the width of N - 1: a server of another N
                    # answers NXDOMAIN to all of them.
                    raise TargetError(
                        f"external target does not answer on {ep.url()} within {health_timeout:g} s: {probe.reason} "
                        f"(it must answer the {self.synthetic} names q<digits>.{self.tld}. of --names "
                        f"{self.synthetic}, as dnscost-engine serve --synthetic {self.synthetic} --tld {self.tld} does)"
                    )
                self.check_alive()
                time.sleep(0.2)

    def alive(self) -> bool:
        return bool(self.meter_pids()) and not self.stopped()

    def check_alive(self) -> None:
        if not self.meter_pids():
            what = f"PID {self.settings.pid}" if self.settings.pid is not None else f"cgroup {self.settings.cgroup}"
            raise TargetError(f"external target gone: {what} has no process")
        if stopped := self.stopped():
            raise TargetError(stopped_text("external target", stopped))

    def stop(self) -> None:
        """Stops nothing: the server is the operator's."""


def _datagram_refused(ep: Endpoint) -> str:
    """For an endpoint over UDP (udp, doq, doh3): "" unless a datagram sent to it is refused by
    the network (ICMP port unreachable: nothing listens), which the engine counts as a timeout.
    A silent network (ICMP filtered) says nothing either way."""
    if ep.transport not in DATAGRAM_TRANSPORTS:
        return ""
    try:
        infos = socket.getaddrinfo(ep.host, ep.port, type=socket.SOCK_DGRAM)
    except OSError:
        return ""
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.3)
        try:
            sock.connect(addr)
            sock.send(b"\0" * 12)  # a DNS header asking nothing; a QUIC server drops it
            sock.recv(64)
        except ConnectionRefusedError:
            return f"nothing listens on UDP port {ep.port} (ICMP port unreachable)"
        except OSError:
            return ""
    return ""


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def pid_affinity(pid: int) -> list[int]:
    """The CPUs the process may run on (recorded: its target CPUs are the operator's to set)."""
    try:
        return sorted(os.sched_getaffinity(pid))
    except OSError:
        return []
