"""BIND 9.18 (``named``) forwarding to dnscost's authoritative upstream, serving udp, tcp, dot
(``listen-on ... tls``) and doh (``listen-on ... tls ... http``). Counters come from its
statistics channel (JSON, ``/json/v1/server``) on a free loopback port."""

from __future__ import annotations

import json
from typing import Any

from dnscost.engine import Endpoint
from dnscost.errors import MachineError, TargetError, UsageError
from dnscost.targets._util import (
    IDLE_TIMEOUT_S,
    LISTEN_BACKLOG,
    fd_limit,
    http_get,
    int_items,
    sum_of,
)
from dnscost.targets.base import Counters, Target, free_port

__all__ = ["Bind9", "parse_bind_stats"]


def parse_bind_stats(text: str, view: str = "_default") -> Counters:
    """``/json/v1/server``: queries are the requests received (``nsstats`` ``Requestv4`` +
    ``Requestv6``, every transport), answers ``nsstats.Response``, cache hits and misses the
    per-query ``QueryHits`` and ``QueryMisses`` of the view's resolver cache (``CacheHits`` and
    ``CacheMisses`` count database look-ups, several per query)."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as e:
        raise TargetError(f"bind9: unreadable statistics: {e}") from e
    if not isinstance(data, dict):
        raise TargetError("bind9: statistics are not a JSON object")
    raw: dict[str, int] = {}
    for section in ("opcodes", "rcodes", "nsstats"):
        raw.update(int_items((data.get(section) or {}).items(), f"{section}."))
    resolver = ((data.get("views") or {}).get(view) or {}).get("resolver") or {}
    raw.update(int_items((resolver.get("stats") or {}).items(), "resolver."))
    raw.update(int_items((resolver.get("cachestats") or {}).items(), "cachestats."))
    return Counters(
        queries=sum_of(raw, ("nsstats.Requestv4", "nsstats.Requestv6")),
        answers=raw.get("nsstats.Response"),
        cache_hits=raw.get("cachestats.QueryHits"),
        cache_misses=raw.get("cachestats.QueryMisses"),
        raw=raw,
    )


class Bind9(Target):
    """BIND 9.18 as a forwarding-only recursive resolver: ``forward only`` to the upstream for
    every name, so neither root priming nor anything else can leave the machine (checked with
    strace: the upstream is the only address it sends to); ``dnssec-validation no`` (no trust
    anchor maintenance); no rndc control channel. One worker thread per CPU (``named -n``).

    Defaults changed for connection experiments: ``tcp-clients`` (150) and the DoH
    ``listener-clients`` (300) are raised to the open-files limit less a margin;
    ``tcp-listen-queue`` (10) to ``LISTEN_BACKLOG``; ``tcp-initial-timeout``,
    ``tcp-idle-timeout`` and ``tcp-keepalive-timeout`` (30 s each) to their maximum, 120 s;
    ``recursive-clients`` (1 000) to 20 000; DoH ``streams-per-connection`` (100) to 1 000.

    DNS cookies (RFC 7873) are answered as named answers them by default (``answer-cookie
    yes``, SipHash-2-4 server cookies of RFC 9018), with one fixed ``cookie-secret``
    (:attr:`COOKIE_SECRET`) instead of one drawn at each start: a server cookie a client learnt
    from one trial's named stays valid (an hour, named's window) in the next one's, as it would
    across an anycast set's servers sharing a secret (docs/edns-options.md)."""

    name = "bind9"
    package = "bind9"
    binary = "named"
    transports = ("udp", "tcp", "dot", "doh")
    version_flags = ("-v",)
    version_pattern = r"BIND (\S+)"
    identity = b"named.conf"

    _stats_port = 0

    COOKIE_SECRET = "d7cf3a8ec8b3f6d2a1b0e5c4d3f2e1a0"
    """named's ``cookie-secret`` (128 bits, as SipHash-2-4 takes)."""

    def configure(self) -> list[str]:
        if self.upstream is None:
            raise UsageError("bind9 needs an upstream (the authoritative dnscost-engine serve)")
        exe = self.executable()
        threads = max(1, len(self.cpus))
        clients = max(150, fd_limit() - 2000)
        timeout = min(1200, IDLE_TIMEOUT_S * 10)  # units of 100 ms, at most 1200
        self._stats_port = free_port()
        dns_port = free_port()
        # Without listen-on, named would listen on port 53 of every address.
        listen = [f"    listen-on port {dns_port} {{ {self.host}; }};  // udp and tcp"]
        for t in ("udp", "tcp"):
            if t in self.wanted:
                self.endpoints[t] = Endpoint(t, self.host, dns_port)
        blocks: list[str] = []
        if {"dot", "doh"} & set(self.wanted):
            blocks.append(f'tls dnscost {{ cert-file "{self.tls.cert}"; key-file "{self.tls.key}"; }};')
        if "dot" in self.wanted:
            port = free_port()
            listen.append(f"    listen-on port {port} tls dnscost {{ {self.host}; }};")
            self.endpoints["dot"] = Endpoint("dot", self.host, port)
        if "doh" in self.wanted:
            port = free_port()
            listen.append(f"    listen-on port {port} tls dnscost http dnscost {{ {self.host}; }};")
            blocks.append(
                f'http dnscost {{ endpoints {{ "/dns-query"; }}; listener-clients {clients}; '
                "streams-per-connection 1000; };"
            )
            self.endpoints["doh"] = Endpoint("doh", self.host, port, "/dns-query")
        up = self.upstream
        conf = f"""// named configuration written by dnscost for one trial.
// Run in the foreground, logging to stderr: {exe} -g -n {threads} -c THIS
options {{
    directory "{self.workdir}";
    pid-file none;
    session-keyfile "{self.workdir / "session.key"}";
    managed-keys-directory "{self.workdir}";
{chr(10).join(listen)}
    listen-on-v6 {{ none; }};
    recursion yes;
    allow-query {{ 127.0.0.0/8; 198.18.0.0/15; }};      // 198.18/15: the generator's side of a veth pair
    allow-recursion {{ 127.0.0.0/8; 198.18.0.0/15; }};
    dnssec-validation no;
    // Every name goes to the upstream, and only there: no root priming, nothing leaves the machine.
    forward only;
    forwarders {{ {up.host} port {up.port}; }};
    tcp-clients {clients};              // default 150
    tcp-listen-queue {LISTEN_BACKLOG};            // default 10
    tcp-initial-timeout {timeout};          // default 300 (x 100 ms)
    tcp-idle-timeout {timeout};             // default 300
    tcp-keepalive-timeout {timeout};        // default 300
    tcp-advertised-timeout {timeout};       // default 300
    recursive-clients 20000;        // default 1000
    notify no;
    querylog no;
    version none;
    hostname none;
    server-id none;
    cookie-secret "{self.COOKIE_SECRET}";
}};
controls {{ }};                     // no rndc channel (default: 127.0.0.1#953 when rndc.key exists)
statistics-channels {{ inet {self.host} port {self._stats_port} allow {{ 127.0.0.1; 198.18.0.0/15; }}; }};
{chr(10).join(blocks)}
"""
        path = self.workdir / "named.conf"
        path.write_text(conf)
        return [exe, "-g", "-4", "-n", str(threads), "-c", str(path)]

    def counters(self) -> Counters:
        if not self._stats_port:
            raise TargetError("bind9: not started")
        url = f"http://{self.host}:{self._stats_port}/json/v1/server"
        text = http_get(url, self.name)
        if text.lstrip().startswith("<"):
            raise MachineError("bind9: this named was built without JSON statistics (json-c)")
        return parse_bind_stats(text)
