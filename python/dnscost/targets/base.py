"""What every target adapter provides, and what they share: ports, a cgroup, a pinned
process, health checks through the engine, and a clean stop.

An adapter subclasses :class:`Target` and implements :meth:`Target.configure` (write its
configuration into the trial directory and return the command line), :meth:`Target.version`
and :meth:`Target.counters`.
"""

from __future__ import annotations

import functools
import mmap
import os
import random
import re
import socket
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from dnscost.certs import TlsFiles
from dnscost.cgroup import Cgroup, cgroup_name, remove_orphans
from dnscost.contract import CounterReading, EngineConfig
from dnscost.engine import Endpoint, engine_path
from dnscost.errors import MachineError, TargetError, UsageError
from dnscost.jsonl import parse_lines, read_records, split_lines
from dnscost.proc import Child, process_state, remove_orphan_dirs
from dnscost.targets._util import find_binary, version_of, version_said
from dnscost.targets.place import Build, Host, Place
from dnscost.transports import DATAGRAM_TRANSPORTS, TLS_TRANSPORTS


def _is_script(path: Path) -> bool:
    """Whether the file at ``path`` is a script (``#!``)."""
    with path.open("rb") as f:
        return f.read(2) == b"#!"


def _carries(path: Path, marker: bytes) -> bool:
    """Whether the file at ``path`` holds the octets ``marker`` (read mapped, not run)."""
    with path.open("rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return False
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(marker) >= 0


__all__ = [
    "DEFINITE_FAILURES",
    "Counters",
    "Probe",
    "SessionLimits",
    "Target",
    "TicketKeys",
    "check_session_limits",
    "check_ticket_keys",
    "free_port",
]

DEFINITE_FAILURES = frozenset({"refused", "tls", "connect", "http_status"})
"""The engine's failure kinds that waiting does not change: nothing listens, the certificate
is not trusted or the TLS handshake refused, no route, an HTTP status other than 200."""


@dataclass(frozen=True)
class Probe:
    """One health probe: answered, or the engine's one-line reason and whether it is definite
    (one of :data:`DEFINITE_FAILURES`) rather than a server that may answer later."""

    answered: bool
    reason: str
    definite: bool


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out for outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port free on 127.0.0.1 for both TCP and UDP right now, taken below the kernel's
    ephemeral range where one exists: the generator's thousands of outgoing connections
    draw from that range and would take a port between this choice and the server's bind."""
    low = _ephemeral_low()
    for _ in range(100):
        if low > 11024:
            port = random.randrange(10000, low)
        else:
            with socket.socket(socket.AF_INET, kind) as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        other = socket.SOCK_DGRAM if kind == socket.SOCK_STREAM else socket.SOCK_STREAM
        with socket.socket(socket.AF_INET, other) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise MachineError("no free port on 127.0.0.1")


@dataclass(frozen=True)
class TicketKeys:
    """A target's session-ticket keys (STEKs) made anew every ``rotation_s`` seconds, the
    newest encrypting new tickets and the ``kept`` newest decrypting the tickets clients offer
    (None: the target's own number; dnsdist keeps 5 with OpenSSL, GnuTLS keeps one). A ticket
    sealed with a key no longer kept is refused: that client's next handshake is full."""

    rotation_s: float
    kept: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.rotation_s <= 86_400 or self.rotation_s != int(self.rotation_s):
            raise UsageError(f"ticket-key rotation: {self.rotation_s} s is not a whole number of seconds in 1..=86400")
        if self.kept is not None and not 1 <= self.kept <= 64:
            raise UsageError(f"ticket keys kept: {self.kept} is out of range 1..=64")


def check_ticket_keys(name: str, accepted: Sequence[str], transports: Sequence[str]) -> None:
    """One line when a target whose session-ticket keys dnscost can rotate over ``accepted``
    cannot for a load over ``transports`` (one of them without TLS tickets, or not one of
    ``accepted``)."""
    _check_tls_knob(
        name,
        accepted,
        transports,
        cannot="dnscost cannot have it rotate its session-ticket keys (dnsdist can)",
        done="session-ticket keys are rotated",
    )


def _check_tls_knob(name: str, accepted: Sequence[str], transports: Sequence[str], *, cannot: str, done: str) -> None:
    """One line when target ``name`` has a TLS knob over no transport (``cannot``), or over
    ``accepted`` only and the load is over others or none (what is ``done`` over which)."""
    if not accepted:
        raise UsageError(f"{name}: {cannot}")
    refused = [t for t in transports if t not in accepted]
    if refused or not transports:
        raise UsageError(
            f"{name}: {done} over {', '.join(accepted)} only, not {', '.join(refused) or 'a load without them'}"
        )


@dataclass(frozen=True)
class SessionLimits:
    """A target's per-client limit on new TLS sessions (full handshakes; resumptions are not
    counted): a client over ``new_per_s`` is refused new connections for ``ban_s`` seconds.
    dnsdist 2.0 and later: ``setMaxTLSNewSessionRatePerClient`` and
    ``setBanDurationForExceedingTCPTLSRate`` (a client is an IPv4 address, its /32)."""

    new_per_s: int
    ban_s: int = 10

    def __post_init__(self) -> None:
        if not 1 <= self.new_per_s <= 1_000_000:
            raise UsageError(f"new-session limit: {self.new_per_s} a second is out of range 1..=1000000")
        if not 1 <= self.ban_s <= 86_400:
            raise UsageError(f"ban: {self.ban_s} s is out of range 1..=86400")


def check_session_limits(name: str, accepted: Sequence[str], transports: Sequence[str]) -> None:
    """One line when ``name`` cannot be given a per-client new-session limit for a load over
    ``transports`` (dnscost can limit it only over ``accepted``)."""
    _check_tls_knob(
        name,
        accepted,
        transports,
        cannot="dnscost cannot give it a per-client new-session limit (dnsdist 2.0 and later can)",
        done="new TLS sessions are limited",
    )


@dataclass
class Counters:
    """A resolver's own counters, normalised where it has them (``None`` where it has not).
    ``raw`` keeps everything it reported."""

    queries: int | None = None
    """Queries received from clients, all transports."""
    answers: int | None = None
    """Responses sent to clients."""
    cache_hits: int | None = None
    cache_misses: int | None = None
    raw: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def total(readings: Sequence[Counters]) -> Counters:
        """The counts of several processes of one target summed (a field any process lacks is
        ``None``)."""

        def add(values: Sequence[int | None]) -> int | None:
            return None if any(v is None for v in values) else sum(v for v in values if v is not None)

        raw: dict[str, int] = {}
        for r in readings:
            for k, v in r.raw.items():
                raw[k] = raw.get(k, 0) + v
        return Counters(
            queries=add([r.queries for r in readings]),
            answers=add([r.answers for r in readings]),
            cache_hits=add([r.cache_hits for r in readings]),
            cache_misses=add([r.cache_misses for r in readings]),
            raw=raw,
        )

    def to_record(self) -> CounterReading:
        """As ``trial.json``'s ``counters`` store it."""
        return {
            "queries": self.queries,
            "answers": self.answers,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "raw": dict(self.raw),
        }


def proxy_v2_refusal(token: str, accepted: Sequence[str], refused: Sequence[str]) -> str:
    """The one line refusing PROXY v2 headers over ``refused`` for the target ``token``."""
    over = f"it does over {', '.join(accepted)}" if accepted else "it takes none over any transport"
    return f"{token} does not take PROXY v2 headers over {', '.join(refused)} as dnscost configures it ({over})"


class Target(ABC):
    """A DNS server under test, started by dnscost on chosen CPUs, in its own cgroup."""

    name: ClassVar[str]
    """The token used everywhere: ``dnsdist``, ``knot-resolver``, ``unbound``, ``bind9``,
    ``pdns-recursor``, ``coredns``, ``builtin``."""
    package: ClassVar[str | None]
    """The Debian package that provides it (None for builtin and for coredns, which scripts/setup
    builds)."""
    binary: ClassVar[str]
    transports: ClassVar[tuple[str, ...]]
    """Transports this adapter can serve."""
    version_flags: ClassVar[tuple[str, ...]] = ("--version",)
    """What makes the server print its version."""
    version_pattern: ClassVar[str] = r"(\S+)"
    """Where the version is in what it prints (the first group)."""
    identity: ClassVar[bytes] = b""
    """Octets its binary carries (its name as it prints it): an own build's binary without
    them is another program, and is not run (:meth:`check_build`)."""
    transport_counters: ClassVar[dict[str, str]] = {}
    """Per transport, the counter (a ``raw`` name of :meth:`counters`) of the queries the server
    received on it, where it keeps one: a population's classes are checked against it."""
    keeps_counters: ClassVar[bool] = True
    """Whether :meth:`counters` reports the server's own counts (a trial missing them is invalid)."""
    accept_queues: ClassVar[dict[str, int]] = {}
    """Per transport, the accept queue of a listener the kernel does not hold (a QUIC stack's
    own queue of handshaken connections waiting for the server to take them), where it is
    fixed in the server's code; a listener the kernel holds is read from it instead."""
    doh3_post_lost: ClassVar[str | None] = None
    """Why the server loses DoH/3 POST queries as dnscost's engine sends them, if it does: its
    DoH/3 is then probed and must be loaded with GET (a trial with POST is refused)."""
    unchecked: ClassVar[tuple[str, ...]] = ()
    """Validity checks its trials cannot run (``dnscost.validity.UNCHECKED``), recorded in each
    trial's ``validity.unchecked``."""
    splits: ClassVar[bool] = False
    """Whether it can run as several processes sharing its ports (SO_REUSEPORT, the kernel
    spreading connections over them), as operators deploy it past one process's open files:
    ``processes`` above 1 is refused for the others."""
    proxy_v2_transports: ClassVar[tuple[str, ...]] = ()
    """The transports over which it can be told to take a PROXY protocol v2 header ahead of
    every datagram or connection (:meth:`accept_proxy_v2`; the engine's ``proxy_v2``)."""
    proxy_v2: str | None = None
    """The network of clients the load claims in PROXY v2 headers, once :meth:`accept_proxy_v2`
    was called: every query to it (the load's, the fill's, the probes') then carries one."""
    proxy_v2_peers: tuple[str, ...] = ()
    """The addresses it takes PROXY v2 headers from (the load's), with :attr:`proxy_v2`."""
    acts_on_client_subnet: ClassVar[bool] = False
    """Whether dnscost can configure it to act on the EDNS Client Subnet option of the queries
    it is sent (use it toward its upstream and cache by the scope the answer gives:
    :attr:`client_subnet`); the others pass the option on or ignore it (docs/edns-options.md)."""
    client_subnet: bool = False
    """Act on the queries' EDNS Client Subnet options (set before :meth:`start`, only where
    :attr:`acts_on_client_subnet`)."""
    ticket_key_transports: ClassVar[tuple[str, ...]] = ()
    """The transports whose session-ticket keys dnscost can have it rotate on a schedule and
    keep a number of (:meth:`rotate_ticket_keys`)."""
    ticket_keys: TicketKeys | None = None
    """How it rotates its session-ticket keys, once :meth:`rotate_ticket_keys` was called."""
    session_limit_transports: ClassVar[tuple[str, ...]] = ()
    """The transports over which dnscost can give it a per-client limit on new TLS sessions
    (:meth:`limit_sessions`)."""
    session_limits: SessionLimits | None = None
    """Its per-client limit on new TLS sessions, once :meth:`limit_sessions` was called."""

    def __init__(
        self,
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
        place: Place | None = None,
        token: str | None = None,
        processes: int = 1,
    ) -> None:
        self.place: Place = place or Host()
        """Where its programs come from: the host, a release root or an own build."""
        self.token = token or self.name
        """The name the user gave (``dnsdist``, ``dnsdist@trixie``, ``dnsdist@/opt/dnsdist``)."""
        served = self.served_in(self.place)
        unsupported = set(transports or ()) - set(served)
        if unsupported:
            raise UsageError(
                f"{self.token} does not serve {', '.join(sorted(unsupported))} (it serves {', '.join(served)})"
            )
        if processes < 1:
            raise UsageError(f"{self.token}: processes must be at least 1, not {processes}")
        if processes > 1 and not self.splits:
            raise UsageError(f"{self.token} runs as one process (dnscost cannot split it): processes = 1 only")
        self.processes = processes
        """How many server processes share its ports, all pinned to ``cpus``, in one cgroup."""
        self.workdir = workdir
        self.cpus = list(cpus)
        self.tls = tls
        self.upstream = upstream
        self.wanted = tuple(transports or served)
        self.tld = tld
        self.synthetic = synthetic
        self.forwarded = "." if any_name else tld.rstrip(".") + "."
        """The zone a resolver forwards to its upstream: the synthetic TLD, or with ``any_name``
        every name (a capture's own names, answered by ``serve --outside answer``)."""
        self.host = host
        """The address it listens on (127.0.0.1, or its side of a veth pair)."""
        self.exec_prefix = list(exec_prefix)
        """A command prefix that starts it in its network namespace (see dnscost.network)."""
        self._major: int | None = None
        self.endpoints: dict[str, Endpoint] = {}
        self.cgroup: Cgroup | None = None
        self.children: list[Child] = []
        """Its processes, in the order started (one unless ``processes`` says more)."""

    @property
    def child(self) -> Child | None:
        """Its first process (None before it starts)."""
        return self.children[0] if self.children else None

    @abstractmethod
    def configure(self) -> list[str]:
        """Writes the configuration into ``self.workdir``, fills ``self.endpoints`` for every
        transport in ``self.wanted`` (free ports on ``self.host``) and returns the command line
        that runs the server in the foreground."""

    def instance(self, argv: list[str], i: int) -> list[str]:
        """The command line of its process ``i`` (counted from 0), given what
        :meth:`configure` returned: the same for every process unless an adapter makes each its
        own (a statistics port of its own)."""
        return argv

    def version(self) -> str:
        """The server's version, as its binary reports it (in its place)."""
        return self.version_in(self.place)

    def major_version(self) -> int:
        """The first number of :meth:`version` (0 when it has none): configurations that changed
        between releases branch on it."""
        if self._major is None:
            m = re.match(r"\D*(\d+)", self.version())
            self._major = int(m.group(1)) if m else 0
        return self._major

    @classmethod
    def served_in(cls, place: Place) -> tuple[str, ...]:
        """The transports the server in ``place`` serves: the adapter's, unless a build says it
        serves fewer or more (dnsdist built with quiche adds doq and doh3)."""
        return cls.transports

    @classmethod
    def version_in(cls, place: Place) -> str:
        """The version of the server's binary in ``place``, as it reports it."""
        exe = place.find(cls.binary, cls.name, cls.package)
        return version_of(place.wrap([exe, *cls.version_flags]), cls.version_pattern, cls.name)

    @classmethod
    def check_build(cls, build: Build, token: str) -> None:
        """Refuses, in one line naming what the binary is, an own build that is not this
        server: its binary must carry :attr:`identity` (checked before anything runs it: the
        flags of one server start another; a script, a wrapper that execs the server, is not
        searched) and print a version :attr:`version_pattern` reads."""
        exe = build.server_path(cls.name)
        if not _is_script(exe) and (not cls.identity or not _carries(exe, cls.identity)):
            raise UsageError(f"{token}: {exe} is not {cls.name} (its binary does not carry {cls.identity.decode()!r})")
        argv = build.wrap([build.find(cls.binary, cls.name, cls.package), *cls.version_flags])
        version, said = version_said(argv, cls.version_pattern, cls.name)
        if version is None:
            raise UsageError(f"{token}: {exe} is not {cls.name}: {' '.join(cls.version_flags)} printed {said!r}")

    @abstractmethod
    def counters(self) -> Counters:
        """Reads the server's own counters while it runs."""

    @classmethod
    def locate(cls) -> str:
        """The path of the server's binary, or a one-line :class:`MachineError` saying how to
        install it."""
        return find_binary(cls.binary, cls.name, cls.package)

    def executable(self, binary: str | None = None) -> str:
        """The path of ``binary`` (default: the server's) as the server's process sees it, in
        its place; a one-line :class:`MachineError` when it is missing."""
        return self.place.find(binary or self.binary, self.name, self.package)

    def shared_paths(self) -> list[Path]:
        """Host directories the server's configuration names (the trial directory and the TLS
        files), visible at the same paths wherever it runs."""
        return [self.workdir, self.tls.cert.parent, self.tls.key.parent]

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` (the server or one of its tools) made to run in the server's place and
        network namespace."""
        return [*self.exec_prefix, *self.place.wrap(argv, self.shared_paths())]

    def environment(self) -> dict[str, str]:
        """Variables the server is started with, beside dnscost's own environment."""
        return {}

    def start(self, health_timeout: float = 20.0) -> None:
        """Configures, starts the server pinned to ``self.cpus`` in a new cgroup, and waits
        until it answers on every wanted transport. A port taken by another process between
        its choice and the server's bind is chosen again (three tries)."""
        for attempt in range(3):
            try:
                return self._start(health_timeout)
            except TargetError as e:
                if "Address already in use" not in str(e) or attempt == 2:
                    raise

    def _start(self, health_timeout: float) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = self.configure()
        extra = self.environment()
        for line in remove_orphans() + remove_orphan_dirs():  # what a killed dnscost left
            print(f"dnscost: {line}", file=sys.stderr, flush=True)
        self.cgroup = Cgroup.create(cgroup_name(self.name, id(self)))
        self.children = []  # a target started again (an idle trial's second attempt) has new ones
        try:
            for i in range(self.processes):
                suffix = f".{i}" if self.processes > 1 else ""
                self.children.append(
                    Child(
                        self.name,
                        self.command(self.instance(argv, i)),
                        log=self.workdir / f"{self.name}{suffix}.log",
                        cpus=self.cpus,
                        cgroup_procs=self.cgroup.procs_files(),
                        cwd=self.workdir,
                        env={**os.environ, **extra} if extra else None,
                    )
                )
            first = self.children[0]
            for transport in self.wanted:
                first.wait_for(functools.partial(self.answers, transport), health_timeout, f"on {transport}")
            if self.processes > 1:
                first.wait_for(self._all_listening, health_timeout, f"until its {self.processes} processes listen")
        except BaseException:
            self.stop()  # leave no process or cgroup behind: ``with`` does not call __exit__ here
            raise

    def accept_proxy_v2(self, network: str, peers: Sequence[str]) -> None:
        """Configures it, before :meth:`start`, to take PROXY v2 headers from ``peers`` (the
        load's addresses) claiming clients of ``network``, on every wanted transport; one line
        when it cannot."""
        refused = [t for t in self.wanted if t not in self.proxy_v2_transports]
        if refused:
            raise UsageError(proxy_v2_refusal(self.token, self.proxy_v2_transports, refused))
        self.proxy_v2 = network
        self.proxy_v2_peers = tuple(dict.fromkeys(peers))

    def rotate_ticket_keys(self, keys: TicketKeys) -> None:
        """Configures it, before :meth:`start`, to rotate the session-ticket keys of its
        listeners over :attr:`ticket_key_transports` as ``keys`` says."""
        check_ticket_keys(self.token, self.ticket_key_transports, self.ticket_key_transports)
        self.ticket_keys = keys

    def limit_sessions(self, limits: SessionLimits) -> None:
        """Configures it, before :meth:`start`, to limit each client's new TLS sessions over
        :attr:`session_limit_transports` as ``limits`` says (a release without the limit fails
        :meth:`start` in one line)."""
        check_session_limits(self.token, self.session_limit_transports, self.session_limit_transports)
        self.session_limits = limits

    def fill_endpoints(self) -> list[dict[str, Endpoint]]:
        """Where its cache is filled: its endpoints, or with several processes that each keep a
        cache of their own, each one's own listeners (one set per process)."""
        return [self.endpoints]

    def client_tls(self, transport: str) -> EngineConfig:
        """The engine configuration fields that make a client trust this target over
        ``transport`` (the run's CA and its certificate's name; nothing without TLS)."""
        return {"ca_file": str(self.tls.ca), "sni": "localhost"} if transport in TLS_TRANSPORTS else {}

    def meter_cgroup(self) -> Cgroup | None:
        """The cgroup the meter reads its CPU and memory from (None: from procfs only)."""
        return self.cgroup

    def meter_pids(self) -> list[int]:
        """The processes the meter reads (``/proc/PID/stat``, ``smaps_rollup``)."""
        return self.cgroup.pids() if self.cgroup else []

    def answers(self, transport: str) -> bool:
        """Whether a query for a name of the synthetic set is answered over ``transport``
        (asked from the target's own namespace, where its address is always reachable)."""
        return self.probe(transport).answered

    def probe(self, transport: str) -> Probe:
        """One query for a name of the synthetic set over ``transport``, and if it was not
        answered, the engine's reason and whether waiting could change it."""
        ep = self.endpoints[transport]
        argv = [
            *self.exec_prefix,
            str(engine_path()),
            "generate",
            "--transport",
            transport,
            "--target",
            ep.address,
            "--rate",
            "max",
            "--in-flight",
            "1",
            "--duration",
            "150ms",
            "--timeout",
            "500ms",
            "--synthetic",
            str(self.synthetic),
            "--tld",
            self.tld,
            "--quiet",
            "--output",
            "/dev/stdout",
        ]
        tls = self.client_tls(transport)
        if "ca_file" in tls:
            argv += ["--ca", str(tls["ca_file"])]
        if tls.get("insecure"):
            argv.append("--insecure")
        if "sni" in tls:
            argv += ["--sni", str(tls["sni"])]
        if transport in ("doh", "doh3") and ep.path:
            argv += ["--doh-path", ep.path]
        if transport == "doh3" and self.doh3_post_lost:
            argv += ["--doh-method", "get"]
        if self.proxy_v2 is not None:
            argv += ["--proxy-v2", self.proxy_v2]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
        said = [line.strip() for line in out.stderr.splitlines() if line.strip()]
        reason = said[-1].removeprefix("dnscost-engine: ").removeprefix("no query was answered: ") if said else ""
        # The engine's records here are its stdout, not a file.
        summaries = [
            r for line in parse_lines(split_lines(out.stdout)) if (r := line.record) and r.get("type") == "summary"
        ]
        if not summaries:
            return Probe(False, reason or f"the engine exited with code {out.returncode}", False)
        total = summaries[-1]["total"]
        rcodes = total["queries"]["rcodes"]
        if int(rcodes.get("noerror", 0)) > 0:
            return Probe(True, "", False)
        if rcodes:
            reason = "answered " + ", ".join(f"{n} {rcode.upper()}" for rcode, n in sorted(rcodes.items()))
        kinds = {*total["connections"]["failed"], *total["queries"]["failed"]}
        return Probe(False, reason or "no answer", bool(kinds & DEFINITE_FAILURES))

    def _all_listening(self) -> bool:
        """Whether every process holds a listener on every TCP port of the target (the
        kernel's socket table, read in the first process's network namespace): before that, the
        kernel hands connections to the processes already listening only. A process that exited
        is one line."""
        for c in self.children:
            if not c.alive():
                raise TargetError(f"{self.name} process {c.pid} exited: {c.last_words()}")
        ports = {ep.port for t, ep in self.endpoints.items() if t not in DATAGRAM_TRANSPORTS}
        held = tcp_listeners(self.children[0].pid)
        return all(held.get(port, 0) >= self.processes for port in ports)

    def alive(self) -> bool:
        """Running and able to answer: not exited, and not stopped (:meth:`stopped`)."""
        return bool(self.children) and all(c.alive() for c in self.children) and not self.stopped()

    def stopped(self) -> list[int]:
        """The target's processes that are stopped (``/proc/PID/stat`` state T, by SIGSTOP, or
        t, traced): they answer nothing until continued. Read twice 100 ms apart, so that a
        process traced by strace, which stops at each traced call for a moment, is not taken
        for one."""
        pids = self.meter_pids() or [c.pid for c in self.children]
        found = [pid for pid in pids if process_state(pid) in ("T", "t")]
        if found:
            time.sleep(0.1)
            found = [pid for pid in found if process_state(pid) in ("T", "t")]
        return found

    def check_alive(self) -> None:
        """Raises :class:`TargetError` if the target died or was stopped (the trial's watchdog
        calls it every 200 ms, and once after the load)."""
        for c in self.children:
            if not c.alive():
                raise TargetError(f"{self.name} died: {c.last_words()}")
        if stopped := self.stopped():
            raise TargetError(stopped_text(self.name, stopped))

    def stop(self) -> None:
        """Stops the server (by PID) and removes its cgroup. Safe to call twice."""
        for c in self.children:
            c.stop()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        self.place.cleanup()

    def __enter__(self) -> Target:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stopped_text(name: str, pids: Sequence[int]) -> str:
    """One line for a target whose processes are stopped."""
    which = ", ".join(str(p) for p in pids)
    return (
        f"{name} is stopped (PID {which} in state T: SIGSTOP or a debugger), so it answers nothing: "
        "the trial is not measured"
    )


def tcp_listeners(pid: int) -> dict[int, int]:
    """Per local port, the TCP sockets listening in the network namespace of process ``pid``
    (``/proc/PID/net/tcp`` and ``tcp6``: state ``0A``); several on one port share it."""
    out: dict[int, int] = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A":
                port = int(fields[1].rpartition(":")[2], 16)
                out[port] = out.get(port, 0) + 1
    return out


def read_engine_summary(path: Path) -> dict[str, object] | None:
    records = read_records(path)
    return records[-1] if records and records[-1].get("type") == "summary" else None
