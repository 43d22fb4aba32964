"""dnsdist (PowerDNS's DNS load balancer) in front of dnscost's authoritative upstream, with a
packet cache, serving udp, tcp, dot and doh, and doq and doh3 when built with quiche
(``scripts/build-target dnsdist-quic``: Debian builds it without). Counters come from its built-in web server's
JSON statistics (``/jsonstat?command=stats``), protected by an API key made for the run."""

from __future__ import annotations

import json
import secrets
import socket
from pathlib import Path
from typing import ClassVar

from dnscost.engine import Endpoint
from dnscost.errors import TargetError, UsageError
from dnscost.targets._util import (
    IDLE_TIMEOUT_S,
    LISTEN_BACKLOG,
    host_network,
    http_get,
    int_items,
    lua_str,
    sum_of,
    version_of,
)
from dnscost.targets.base import Counters, Target, free_port
from dnscost.targets.place import Build, Place
from dnscost.transports import Transport

__all__ = ["Dnsdist", "parse_dnsdist_frontends", "parse_dnsdist_stats"]


def parse_dnsdist_stats(text: str) -> Counters:
    """``/jsonstat?command=stats``: a flat JSON object. ``queries`` counts every query received
    on every frontend; responses sent to clients are counted by RCODE in ``frontend-noerror``,
    ``frontend-nxdomain`` and ``frontend-servfail`` (dnsdist 1.7 counts no other RCODE)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TargetError(f"dnsdist: unreadable statistics: {e}") from e
    if not isinstance(data, dict):
        raise TargetError("dnsdist: statistics are not a JSON object")
    raw = int_items(data.items())
    return Counters(
        queries=raw.get("queries"),
        answers=sum_of(raw, ("frontend-noerror", "frontend-nxdomain", "frontend-servfail")),
        cache_hits=raw.get("cache-hits"),
        cache_misses=raw.get("cache-misses"),
        raw=raw,
    )


FRONTEND_TYPES = (
    ("HTTP/3", "doh3"),
    ("QUIC", "doq"),
    ("HTTPS", "doh"),
    ("TLS", "dot"),
    ("TCP", "tcp"),
    ("UDP", "udp"),
)
"""How dnsdist's API names a frontend's ``type`` (``UDP``, ``TCP``, ``TCP (DNS over TLS)``,
``TCP (DNS over HTTPS)``, and for QUIC ``UDP (DNS over QUIC)``, ``UDP (DNS over HTTP/3)``):
the first match of each, in this order, is its transport."""


FRONTEND_COUNTERS = ("queries", "tlsNewSessions", "tlsResumptions", "tlsUnknownTicketKey", "tlsInactiveTicketKey")
"""What is summed of each transport's frontends: queries received, and for DoT and DoH the TLS
sessions made new and resumed, and the tickets offered sealed with a key it no longer keeps
(the handshake is then full) or with one it keeps but no longer seals new tickets with."""


def parse_dnsdist_frontends(text: str) -> dict[str, int]:
    """``/api/v1/servers/localhost``'s ``frontends``: :data:`FRONTEND_COUNTERS` summed over each
    transport's frontends, as ``frontend.<transport>.<counter>``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TargetError(f"dnsdist: unreadable server statistics: {e}") from e
    frontends = data.get("frontends") if isinstance(data, dict) else None
    if not isinstance(frontends, list):
        raise TargetError("dnsdist: server statistics without frontends")
    out: dict[str, int] = {}
    for f in frontends:
        kind = f.get("type") if isinstance(f, dict) else None
        transport = next((t for name, t in FRONTEND_TYPES if isinstance(kind, str) and name in kind), None)
        if transport is None:
            continue
        for counter in FRONTEND_COUNTERS:
            value = f.get(counter)
            if isinstance(value, int | float) and not isinstance(value, bool):
                key = f"frontend.{transport}.{counter}"
                out[key] = out.get(key, 0) + int(value)
    return out


class Dnsdist(Target):
    """dnsdist (1.7 on the host; 1.9 in trixie's root, and with DoQ and DoH/3 when built with
    quiche): a caching proxy, so every query after the first for a name is answered from its
    packet cache without touching the upstream.

    Threads: one UDP listener and one DoT/DoH/DoQ/DoH3 acceptor per CPU (``reusePort``) and one TCP
    worker thread per CPU. Defaults changed for connection experiments: the TCP read timeout
    (2 s, which is also the idle timeout of tcp and dot connections) and the DoH idle timeout
    (30 s) are raised to ``IDLE_TIMEOUT_S``; the queue of accepted connections waiting for a
    TCP worker (1 000) to 10 000; per-client connection limits, queries per connection and
    connection duration are unlimited (0); the listen queue is ``LISTEN_BACKLOG`` (dnsdist 1.7
    drops connections when many arrive at once: open them at a bounded rate). Its DoT and DoH
    listeners rotate their session-ticket keys as :meth:`rotate_ticket_keys` says
    (docs/ticket-keys.md), else as dnsdist does by itself (every 12 h, 5 kept).

    Several processes (``processes``, past one process's open files) share every listening port
    (``reusePort``); each has its own packet cache and its own web server port, and
    :meth:`counters` sums them."""

    name = "dnsdist"
    package = "dnsdist"
    binary = "dnsdist"
    transports = ("udp", "tcp", "dot", "doh")
    transport_counters: ClassVar[dict[str, str]] = {t: f"frontend.{t}.queries" for t in Transport}
    version_flags = ("--version",)
    version_pattern = r"dnsdist (\S+)"
    identity = b"dnsdist "
    splits = True
    proxy_v2_transports = ("udp", "tcp")
    ticket_key_transports = ("dot", "doh")
    session_limit_transports = ("dot", "doh")
    """``ticketsKeysRotationDelay`` and ``numberOfTicketsKeys`` of its DoT and DoH listeners
    (the tickets' lifetime stays OpenSSL's 7 200 s: docs/ticket-keys.md)."""
    doh3_post_lost = (
        "dnsdist drops a POST whose stream ends in a packet after its body (docs/findings/dnsdist-doh3-post.md)"
    )
    quic_features: ClassVar[dict[str, str]] = {"doq": "dns-over-quic", "doh3": "dns-over-http3"}
    """What ``dnsdist --version`` lists among its enabled features when it was built with quiche
    (1.9 and later; Debian builds it without: ``scripts/build-target dnsdist-quic`` builds one)."""

    @classmethod
    def served_in(cls, place: Place) -> tuple[str, ...]:
        if not isinstance(place, Build):  # Debian's packages: no quiche in any release
            return cls.transports
        exe = place.find(cls.binary, cls.name, cls.package)
        features = version_of(place.wrap([exe, "--version"]), r"Enabled features:(.*)", cls.name).split()
        return cls.transports + tuple(t for t, f in cls.quic_features.items() if f in features)

    _api_key = ""
    _web_ports: tuple[int, ...] = ()
    _own: list[dict[str, Endpoint]]
    _own_lines: list[list[str]]

    def _ports(self) -> dict[str, int]:
        """A free port for each wanted transport (udp and tcp: one)."""
        dns = free_port()
        out: dict[str, int] = {}
        for t in self.wanted:
            out[t] = (
                dns
                if t in ("udp", "tcp")
                else free_port(socket.SOCK_DGRAM if t in ("doq", "doh3") else socket.SOCK_STREAM)
            )
        out.setdefault("udp", dns)  # Do53 is always bound, so that dnsdist never falls back to 127.0.0.1:53
        return out

    def _endpoints(self, ports: dict[str, int]) -> dict[str, Endpoint]:
        return {
            t: Endpoint(t, self.host, ports[t], "/dns-query" if t in ("doh", "doh3") else None) for t in self.wanted
        }

    def _listeners(self, ports: dict[str, int], *, copies: int, reuse: bool, first: bool) -> list[str]:
        """The listeners on ``ports``, each ``copies`` times (one per CPU: sharing the port)."""

        def opts(extra: str = "", *, tcp: bool = True) -> str:
            queue = f", tcpListenQueueSize={LISTEN_BACKLOG}" if tcp else ""
            return "{" + f"reusePort={'true' if reuse else 'false'}" + queue + extra + "}"

        host, cert, key = self.host, lua_str(self.tls.cert), lua_str(self.tls.key)
        stek = ""
        if self.ticket_keys is not None:  # dnsdist's default: rotated every 12 h, 5 kept
            stek = f", ticketsKeysRotationDelay={int(self.ticket_keys.rotation_s)}"
            stek += f", numberOfTicketsKeys={self.ticket_keys.kept}" if self.ticket_keys.kept is not None else ""
        out = [f'{"setLocal" if first else "addLocal"}("{host}:{ports["udp"]}", {opts()})']
        out += [f'addLocal("{host}:{ports["udp"]}", {opts()})' for _ in range(copies - 1)]
        if "dot" in ports:
            tls_opts = opts(f', provider="openssl", minTLSVersion="tls1.2"{stek}')
            out += [f'addTLSLocal("{host}:{ports["dot"]}", {cert}, {key}, {tls_opts})' for _ in range(copies)]
        if "doh" in ports:
            doh_opts = opts(f', minTLSVersion="tls1.2", idleTimeout={IDLE_TIMEOUT_S}{stek}')
            out += [
                f'addDOHLocal("{host}:{ports["doh"]}", {cert}, {key}, "/dns-query", {doh_opts})' for _ in range(copies)
            ]
        # QUIC listeners (a build with quiche): no listen queue, the idle timeout as for the
        # others; DoH3 answers on any path.
        quic_opts = opts(f", idleTimeout={IDLE_TIMEOUT_S}", tcp=False)
        for t, add in (("doq", "addDOQLocal"), ("doh3", "addDOH3Local")):
            if t in ports:
                out += [f'{add}("{host}:{ports[t]}", {cert}, {key}, {quic_opts})' for _ in range(copies)]
        return out

    def fill_endpoints(self) -> list[dict[str, Endpoint]]:
        """With several processes, each one's own listeners (each has its own packet cache)."""
        return self._own or [self.endpoints]

    def configure(self) -> list[str]:
        if self.upstream is None:
            raise UsageError("dnsdist needs an upstream (the authoritative dnscost-engine serve)")
        exe = self.executable()
        n = max(1, len(self.cpus))
        self._api_key = secrets.token_hex(16)
        self._web_ports = tuple(free_port() for _ in range(self.processes))
        self._own_lines = []
        lines = [
            "-- dnsdist configuration written by dnscost for one trial.",
            f"-- Run in the foreground: {exe} --supervised --disable-syslog -C THIS",
            'setSecurityPollSuffix("")  -- no security-poll query (default: a TXT query to secpoll.powerdns.com)',
            'addACL("198.18.0.0/15")  -- the generator\'s side of a veth pair (--network veth)',
        ]

        if self.session_limits is not None:
            if self.major_version() < 2:
                raise UsageError(
                    f"dnsdist {self.version()} has no per-client new-session limit "
                    "(setMaxTLSNewSessionRatePerClient came in dnsdist 2.0: dnsdist@sid)"
                )
            limits = self.session_limits
            lines += [
                "-- Per-client limit on new TLS sessions (full handshakes) a second; a client over it is refused",
                "-- new connections (reset at accept) for the ban.",
                f"setMaxTLSNewSessionRatePerClient({limits.new_per_s})",
                f"setBanDurationForExceedingTCPTLSRate({limits.ban_s})",
            ]

        if self.proxy_v2 is not None:
            lines += [
                "-- PROXY v2 headers from the load's addresses (every query from them must carry one: the others are",
                "-- dropped and counted in proxy-protocol-invalid), claiming clients the ACL lets in.",
                "setProxyProtocolACL({" + ", ".join(lua_str(host_network(a)) for a in self.proxy_v2_peers) + "})",
                f"addACL({lua_str(self.proxy_v2)})",
            ]

        shared = n > 1 or self.processes > 1
        # The listeners every process shares, and with several processes each one's own (no
        # port sharing): the cache is filled through each process's own (each has its cache).
        public = self._ports()
        lines += self._listeners(public, copies=n, reuse=shared, first=True)
        self.endpoints = self._endpoints(public)
        self._own = []
        for _ in range(self.processes if self.processes > 1 else 0):
            ports = self._ports()
            self._own.append(self._endpoints(ports))
            self._own_lines.append(self._listeners(ports, copies=1, reuse=False, first=False))
        up = self.upstream
        lines += [
            "-- The upstream answers the synthetic TLD; health-checked every second (REFUSED counts as up).",
            f'newServer({{address={lua_str(up.address)}, name="upstream", checkName={lua_str(self.tld + ".")}, '
            "checkInterval=1})",
            "pc = newPacketCache(1000000, {maxTTL=86400, minTTL=0, temporaryFailureTTL=1, staleTTL=60, dontAge=false})",
            'getPool(""):setCache(pc)',
            f"setMaxTCPClientThreads({n})        -- default 10",
            "setMaxTCPConnectionsPerClient(0)   -- 0 = unlimited (the default)",
            "setMaxTCPQueriesPerConnection(0)   -- 0 = unlimited (the default)",
            "setMaxTCPConnectionDuration(0)     -- 0 = unlimited (the default)",
            "setMaxTCPQueuedConnections(10000)  -- default 1000",
            f"setTCPRecvTimeout({IDLE_TIMEOUT_S})  -- default 2 s: the idle timeout of tcp and dot clients",
            "-- Counters: the web server's JSON API on the listening address, with a key made for this run",
            "-- (a port of its own for each process: dnscost sums them).",
            f"setWebserverConfig({{apiKey={lua_str(self._api_key)}, password={lua_str(secrets.token_hex(16))}, "
            'acl="127.0.0.1/32, 198.18.0.0/15"})',
        ]
        for i, port in enumerate(self._web_ports):
            own = self._own_lines[i] if self._own_lines else []
            self._conf(i).write_text("\n".join([*lines, *own, f'webserver("{self.host}:{port}")']) + "\n")
        return [exe, "--supervised", "--disable-syslog", "-C", str(self._conf(0))]

    def _conf(self, i: int) -> Path:
        return self.workdir / ("dnsdist.conf" if i == 0 else f"dnsdist.{i}.conf")

    def instance(self, argv: list[str], i: int) -> list[str]:
        return [*argv[:-1], str(self._conf(i))]

    def counters(self) -> Counters:
        """Every process's counters, summed."""
        if not self._web_ports:
            raise TargetError("dnsdist: not started")
        readings = []
        key = {"X-API-Key": self._api_key}
        for port in self._web_ports:
            base = f"http://{self.host}:{port}"
            counters = parse_dnsdist_stats(http_get(f"{base}/jsonstat?command=stats", self.name, key))
            counters.raw.update(parse_dnsdist_frontends(http_get(f"{base}/api/v1/servers/localhost", self.name, key)))
            readings.append(counters)
        return Counters.total(readings)
