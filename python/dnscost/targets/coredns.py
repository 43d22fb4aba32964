"""CoreDNS forwarding the synthetic TLD to dnscost's authoritative upstream, with its cache,
serving udp and tcp (``dns://``), dot (``tls://``) and doh (``https://``) from one server
block, doq (``quic://``) and doh3 (``https3://``) from blocks of their own. Counters come from
its ``prometheus`` plugin (the Prometheus text format on a free loopback port)."""

from __future__ import annotations

import math
import re
import socket
from typing import ClassVar

from dnscost.engine import Endpoint
from dnscost.errors import TargetError, UsageError
from dnscost.targets._util import IDLE_TIMEOUT_S, http_get, sum_of
from dnscost.targets.base import Counters, Target, free_port
from dnscost.transports import QUIC_TRANSPORTS, TLS_TRANSPORTS, TRANSPORTS

__all__ = ["Coredns", "parse_prometheus"]

SCHEMES = {"udp": "dns", "tcp": "dns", "dot": "tls", "doh": "https", "doq": "quic", "doh3": "https3"}
"""The scheme of each transport's server key (udp and tcp share one ``dns://`` key)."""

STREAMS = 1000
"""Concurrent streams per connection on doh, doq and doh3 (CoreDNS's defaults 250 and 256; 1 000
as unbound and bind9 are given)."""

CACHE_ENTRIES = 1_048_576
"""Entries in each of the cache's success and denial parts (default 9 984, fewer than the study's
10 000 names; eviction is random per shard, so a default cache would evict before it is full)."""

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


def _labels(text: str) -> str | None:
    """``a="x",b="y"`` sorted by name and written back the same way; None when unreadable."""
    pairs, pos = [], 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            return None
        pairs.append((m.group(1), m.group(2)))
        pos = m.end()
    return ",".join(f'{k}="{v}"' for k, v in sorted(pairs))


def parse_prometheus(text: str) -> Counters:
    """CoreDNS's ``/metrics`` (the Prometheus text format). ``raw`` holds every sample of its own
    counters and gauges (``coredns_*``) whose value is an integer, keyed ``name{label="v",...}``
    with labels sorted (per server key, transport, RCODE, cache type...). Queries are the sum
    of ``coredns_dns_requests_total``, answers of ``coredns_dns_responses_total`` (every RCODE),
    hits and misses of ``coredns_cache_hits_total`` and ``coredns_cache_misses_total``, over
    every server key. CoreDNS exports a labelled counter only once it has counted something,
    so in its output (recognised by ``coredns_build_info``) an absent counter is 0."""
    kinds: dict[str, str] = {}
    raw: dict[str, int] = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# TYPE "):
            _, _, name, *kind = line.split()
            kinds[name] = kind[0] if kind else ""
            continue
        m = _SAMPLE.match(line)
        if m is None or not m.group(1).startswith("coredns_") or kinds.get(m.group(1)) not in ("counter", "gauge"):
            continue
        labels = _labels(m.group(2) or "")
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if labels is None or not math.isfinite(value) or value != int(value):
            continue
        raw[f"{m.group(1)}{{{labels}}}" if labels else m.group(1)] = int(value)
    exported = any(k.startswith("coredns_build_info") for k in raw)

    def total(name: str) -> int | None:
        found = sum_of(raw, [k for k in raw if k == name or k.startswith(name + "{")])
        return 0 if found is None and exported else found

    return Counters(
        queries=total("coredns_dns_requests_total"),
        answers=total("coredns_dns_responses_total"),
        cache_hits=total("coredns_cache_hits_total"),
        cache_misses=total("coredns_cache_misses_total"),
        raw=raw,
    )


class Coredns(Target):
    """CoreDNS 1.15 (built by scripts/setup with Go) as a caching forwarder for the TLD only
    (names outside it are refused locally, so nothing else leaves the machine), ``forward`` to
    the upstream and ``cache``. udp, tcp, dot and doh are keys of one server block, so they share
    one set of plugins, hence one cache (a block's plugins are its own: the doq and doh3 blocks
    have caches of their own, filled like the others). One process; ``GOMAXPROCS`` = CPUs, and with more than one
    CPU ``multisocket`` opens one listener per CPU (``SO_REUSEPORT``).

    Defaults changed for connection experiments: the concurrent-connection caps of doh, doq and
    doh3 (200 each) are lifted (``max_connections 0``), their streams per connection (250, 256)
    raised to :data:`STREAMS`, the DoQ stream worker pool (1 024 across all connections) to
    65 536; the read timeout (3 s, a connection's first query) and idle timeout (10 s) of tcp,
    dot, doh and doq to ``IDLE_TIMEOUT_S``. Queries per tcp/dot connection are unlimited (the
    default). CoreDNS 1.15 applies a block's ``https``, ``quic`` and ``https3`` settings to the
    block's first key only (except ``https max_streams`` and ``quic max_connections``): https is
    the shared block's first key, and quic and https3 have blocks of their own.

    Its listen queue is the kernel's ``somaxconn`` (Go listens with it). It answers a tcp or dot
    connection's queries one after another (miekg/dns reads the next query once the last is
    answered), so pipelining does not add concurrency there; doh streams run concurrently.

    Its QUIC listeners (quic-go) queue at most 32 handshaken connections for CoreDNS to take
    (``protocol.MaxAcceptQueueSize``, not configurable) and refuse (CONNECTION_REFUSED) one
    whose handshake completes while the queue is full, after doing the handshake's work."""

    name = "coredns"
    package = None
    binary = "coredns"
    transports = TRANSPORTS
    version_flags = ("-version",)
    version_pattern = r"CoreDNS-(\S+)"
    identity = b"CoreDNS"
    accept_queues: ClassVar[dict[str, int]] = {"doq": 32, "doh3": 32}
    _metrics_port = 0

    def environment(self) -> dict[str, str]:
        return {"GOMAXPROCS": str(max(1, len(self.cpus)))}

    def configure(self) -> list[str]:
        if self.upstream is None:
            raise UsageError("coredns needs an upstream (the authoritative dnscost-engine serve)")
        exe = self.executable()
        n = max(1, len(self.cpus))
        self._metrics_port = free_port()
        # Do53 is always bound, also when only an encrypted transport is asked for.
        dns_port = free_port()
        listeners = {"dns": dns_port}
        for t in ("udp", "tcp"):
            if t in self.wanted:
                self.endpoints[t] = Endpoint(t, self.host, dns_port)
        for t in TLS_TRANSPORTS:
            if t not in self.wanted:
                continue
            port = free_port(socket.SOCK_DGRAM if t in QUIC_TRANSPORTS else socket.SOCK_STREAM)
            self.endpoints[t] = Endpoint(t, self.host, port, "/dns-query" if t in ("doh", "doh3") else None)
            listeners[SCHEMES[t]] = port
        tld = self.forwarded
        idle = f"{IDLE_TIMEOUT_S}s"

        def block(name: str, *settings: str) -> list[str]:
            return [f"    {name} {{", *(f"        {x}" for x in settings), "    }"]

        lines = [
            "# CoreDNS configuration written by dnscost for one trial.",
            f"# Run in the foreground: GOMAXPROCS={n} {exe} -conf THIS",
            "# What every server block holds; each block has its own instance of these plugins.",
            "(common) {",
            f"    bind {self.host}",
            *([f"    multisocket {n}  # one listener per CPU (SO_REUSEPORT)"] if n > 1 else []),
            f'    tls "{self.tls.cert}" "{self.tls.key}"  # unused by dns://',
            f"    forward . {self.upstream.address}",
            *block("cache 86400", f"success {CACHE_ENTRIES}  # default 9984", f"denial {CACHE_ENTRIES}"),
            *block(
                "timeouts", f"read {idle}  # default 3 s (a connection's first query)", f"idle {idle}  # default 10 s"
            ),
            f"    prometheus {self.host}:{self._metrics_port}",
            "    errors",
            "}",
            "# One block, one cache for udp, tcp, dot and doh. CoreDNS 1.15 gives a block's https,",
            "# quic and https3 settings to its first key only (but https max_streams and quic",
            "# max_connections): https comes first, quic and https3 have blocks of their own.",
        ]
        limits = {
            "https": ["max_connections 0  # default 200", f"max_streams {STREAMS}  # default 250"],
            "quic": [
                "max_connections 0  # default 200",
                f"max_streams {STREAMS}  # default 256",
                "worker_pool_size 65536  # default 1024, across all connections",
            ],
            "https3": ["max_connections 0  # default 200", f"max_streams {STREAMS}  # default 256"],
        }
        blocks: list[list[str]] = [[s for s in ("https", "dns", "tls") if s in listeners]]
        blocks += [[s] for s in ("quic", "https3") if s in listeners]
        for schemes in blocks:
            lines += [
                " ".join(f"{scheme}://{tld}:{listeners[scheme]}" for scheme in schemes) + " {",
                "    import common",
            ]
            if schemes[0] in limits:
                lines += block(schemes[0], *limits[schemes[0]])
            lines.append("}")
        conf = self.workdir / "Corefile"
        conf.write_text("\n".join(lines) + "\n")
        return [exe, "-conf", str(conf)]

    def counters(self) -> Counters:
        if not self._metrics_port:
            raise TargetError("coredns: not started")
        return parse_prometheus(http_get(f"http://{self.host}:{self._metrics_port}/metrics", self.name))
