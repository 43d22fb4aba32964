"""dnsdist (PowerDNS's DNS load balancer) in front of dnscost's authoritative upstream, with a
packet cache, serving udp, tcp, dot and doh, and doq and doh3 when built with quiche
(``scripts/build-target dnsdist-quic``: Debian builds it without). Counters come from its built-in web server's
JSON statistics (``/jsonstat?command=stats``), protected by an API key made for the run."""

from __future__ import annotations

import json
import secrets
import socket
from typing import ClassVar

from dnscost.engine import Endpoint
from dnscost.errors import TargetError, UsageError
from dnscost.targets._util import (
    IDLE_TIMEOUT_S,
    LISTEN_BACKLOG,
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


def parse_dnsdist_frontends(text: str) -> dict[str, int]:
    """``/api/v1/servers/localhost``'s ``frontends``: the queries each transport's frontends
    received, as ``frontend.<transport>.queries``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TargetError(f"dnsdist: unreadable server statistics: {e}") from e
    frontends = data.get("frontends") if isinstance(data, dict) else None
    if not isinstance(frontends, list):
        raise TargetError("dnsdist: server statistics without frontends")
    out: dict[str, int] = {}
    for f in frontends:
        kind, queries = (f.get("type"), f.get("queries")) if isinstance(f, dict) else (None, None)
        transport = next((t for name, t in FRONTEND_TYPES if isinstance(kind, str) and name in kind), None)
        if transport is not None and isinstance(queries, int):
            key = f"frontend.{transport}.queries"
            out[key] = out.get(key, 0) + queries
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
    drops connections when many arrive at once: open them at a bounded rate)."""

    name = "dnsdist"
    package = "dnsdist"
    binary = "dnsdist"
    transports = ("udp", "tcp", "dot", "doh")
    transport_counters: ClassVar[dict[str, str]] = {t: f"frontend.{t}.queries" for t in Transport}
    version_flags = ("--version",)
    version_pattern = r"dnsdist (\S+)"
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
    _web_port = 0

    def configure(self) -> list[str]:
        if self.upstream is None:
            raise UsageError("dnsdist needs an upstream (the authoritative dnscost-engine serve)")
        exe = self.executable()
        n = max(1, len(self.cpus))
        self._api_key = secrets.token_hex(16)
        self._web_port = free_port()
        dns_port = free_port()
        lines = [
            "-- dnsdist configuration written by dnscost for one trial.",
            f"-- Run in the foreground: {exe} --supervised --disable-syslog -C THIS",
            'setSecurityPollSuffix("")  -- no security-poll query (default: a TXT query to secpoll.powerdns.com)',
            'addACL("198.18.0.0/15")  -- the generator\'s side of a veth pair (--network veth)',
        ]

        def opts(extra: str = "", *, tcp: bool = True) -> str:
            reuse = "true" if n > 1 else "false"
            queue = f", tcpListenQueueSize={LISTEN_BACKLOG}" if tcp else ""
            return "{" + f"reusePort={reuse}" + queue + extra + "}"

        # Do53 is always bound, so that dnsdist never falls back to its default 127.0.0.1:53.
        lines.append(f'setLocal("{self.host}:{dns_port}", {opts()})')
        lines += [f'addLocal("{self.host}:{dns_port}", {opts()})' for _ in range(n - 1)]
        for t in ("udp", "tcp"):
            if t in self.wanted:
                self.endpoints[t] = Endpoint(t, self.host, dns_port)
        cert, key = lua_str(self.tls.cert), lua_str(self.tls.key)
        if "dot" in self.wanted:
            port = free_port()
            tls_opts = opts(', provider="openssl", minTLSVersion="tls1.2"')
            lines += [f'addTLSLocal("{self.host}:{port}", {cert}, {key}, {tls_opts})' for _ in range(n)]
            self.endpoints["dot"] = Endpoint("dot", self.host, port)
        if "doh" in self.wanted:
            port = free_port()
            doh_opts = opts(f', minTLSVersion="tls1.2", idleTimeout={IDLE_TIMEOUT_S}')
            lines += [f'addDOHLocal("{self.host}:{port}", {cert}, {key}, "/dns-query", {doh_opts})' for _ in range(n)]
            self.endpoints["doh"] = Endpoint("doh", self.host, port, "/dns-query")
        # QUIC listeners (a build with quiche): no listen queue, the idle timeout as for the
        # others; DoH3 answers on any path.
        quic_opts = opts(f", idleTimeout={IDLE_TIMEOUT_S}", tcp=False)
        for t, add in (("doq", "addDOQLocal"), ("doh3", "addDOH3Local")):
            if t in self.wanted:
                port = free_port(socket.SOCK_DGRAM)
                lines += [f'{add}("{self.host}:{port}", {cert}, {key}, {quic_opts})' for _ in range(n)]
                self.endpoints[t] = Endpoint(t, self.host, port, "/dns-query" if t == "doh3" else None)
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
            "-- Counters: the web server's JSON API on the listening address, with a key made for this run.",
            f'webserver("{self.host}:{self._web_port}")',
            f"setWebserverConfig({{apiKey={lua_str(self._api_key)}, password={lua_str(secrets.token_hex(16))}, "
            'acl="127.0.0.1/32, 198.18.0.0/15"})',
        ]
        conf = self.workdir / "dnsdist.conf"
        conf.write_text("\n".join(lines) + "\n")
        return [exe, "--supervised", "--disable-syslog", "-C", str(conf)]

    def counters(self) -> Counters:
        if not self._web_port:
            raise TargetError("dnsdist: not started")
        base, key = f"http://{self.host}:{self._web_port}", {"X-API-Key": self._api_key}
        counters = parse_dnsdist_stats(http_get(f"{base}/jsonstat?command=stats", self.name, key))
        counters.raw.update(parse_dnsdist_frontends(http_get(f"{base}/api/v1/servers/localhost", self.name, key)))
        return counters
