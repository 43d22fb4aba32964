"""Response times per transport under emulated networks, as a stub or browser meets them.

For each network preset, a lab: the engine in the client namespace; a real resolver (any
target: builtin, unbound, knot-resolver, ...) in the server namespace, behind the preset's
emulated link; dnscost's authoritative responder on the client namespace's loopback
(:data:`~dnscost.lab.lab.UPSTREAM_ADDRESS`), which the resolver reaches through the link's
upstream split (its own preset, ``upstream`` by default). Per transport, a client asks at a low
rate with Poisson arrivals and the reuse a real client has (:func:`client_config`):

- ``udp``: retransmitting like glibc's stub (5 s per try, 2 tries);
- ``tcp``, ``dot``, ``doq``, ``doh3``: a connection kept while queries come, closed after 10 s
  idle (Stubby's default, as Hounsel et al. set their DoT stub), TLS resumed when reopened;
- ``doh``: the same (browsers keep their DoH connection far longer: at these rates the
  difference is the rare reconnection).

Two caches: **cold** first (the resolver freshly started, every name asked once from
:data:`NAMES`, so it asks the authoritative server across the upstream link), then **warm**
(every name filled beforehand from the server's own namespace, unshaped, and checked with the
resolver's counters). Transports run in a seeded shuffled order. Each run's latency histogram is
kept whole; :func:`rows` recomputes medians and CDFs from the engine records."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from dnscost.analysis.hdr import cdf, decode, quantile
from dnscost.certs import make_tls
from dnscost.contract import EngineConfig, Row, SummaryRecord, UdpRetry
from dnscost.engine import Responder, generate, summary_of
from dnscost.errors import DnscostError, UsageError
from dnscost.lab.lab import SERVER_ADDRESS, UPSTREAM_ADDRESS, Lab
from dnscost.lab.presets import Preset, PresetRecord
from dnscost.lab.resolve import lab_name
from dnscost.results import read_document, write_json
from dnscost.targets import TARGETS, make_target
from dnscost.targets.base import Counters
from dnscost.transports import TLS_TRANSPORTS
from dnscost.trial import fill_cache

__all__ = ["NAMES", "TimesDocument", "TimesSettings", "client_config", "read_times", "rows", "run_times"]

NAMES = 100_000
GLIBC_RETRY: UdpRetry = {"timeout_ms": 5000, "attempts": 2}
"""glibc's stub: ``options timeout:5 attempts:2`` (RES_TIMEOUT, RES_DFLRETRY), one nameserver."""


@dataclass(frozen=True)
class TimesSettings:
    target: str = "builtin"
    transports: tuple[str, ...] = ("udp", "tcp", "dot", "doh")
    qps: float = 4.0
    queries: int = 100
    idle_timeout_ms: int = 10_000
    caches: tuple[str, ...] = ("cold", "warm")
    seed: int = 1

    def to_dict(self) -> TimesSettingsRecord:
        return {
            "target": self.target,
            "transports": list(self.transports),
            "qps": self.qps,
            "queries": self.queries,
            "idle_timeout_ms": self.idle_timeout_ms,
            "caches": list(self.caches),
            "seed": self.seed,
        }


class TimesSettingsRecord(TypedDict):
    """:class:`TimesSettings` as times.json keeps it."""

    target: str
    transports: list[str]
    qps: float
    queries: int
    idle_timeout_ms: int
    caches: list[str]
    seed: int


class TimesDocument(TypedDict):
    """``times/<target>/times.json``: the settings, the presets and upstream link, a row per
    preset, cache and transport (with its whole-run histogram, ``hdr``), and each preset's link
    counters."""

    settings: TimesSettingsRecord
    presets: dict[str, PresetRecord]
    upstream: PresetRecord
    rows: list[Row]
    link: dict[str, object]
    target_version: NotRequired[str | None]
    """The resolver's, read when its first preset started it."""


def read_times(path: Path) -> TimesDocument:
    """A times.json, checked against :class:`TimesDocument`; a missing, unreadable or
    malformed one is one line."""
    return read_document(path, TimesDocument, "not a client run, or its part did not run")


def client_config(transport: str, s: TimesSettings, endpoint: str, ca: Path, seed: int) -> EngineConfig:
    """One transport's engine configuration (see the module's documentation)."""
    config: EngineConfig = {
        "transport": transport,
        "target": endpoint,
        "connections": 1,
        "rate": s.qps,
        "arrival": "poisson",
        "duration_ms": round(s.queries / s.qps * 1000),
        "timeout_ms": 12_000,
        "synthetic": NAMES,
        "tld": "test",
        "threads": 1,
        "seed": seed,
    }
    if transport == "udp":
        config["udp_retry"] = GLIBC_RETRY.copy()
    else:
        config["idle_timeout_ms"] = s.idle_timeout_ms
    if transport in TLS_TRANSPORTS:
        config.update({"ca_file": str(ca), "sni": "localhost", "resumption": 1.0})
    return config


def run_times(out: Path, presets: Sequence[Preset], upstream: Preset, s: TimesSettings) -> list[Row]:
    """Runs every (preset, cache, transport); writes ``times.json`` (settings, presets, the
    target's version, rows) and one directory of engine records per run; returns the rows."""

    if s.target not in TARGETS:
        raise UsageError(f"client times: unknown target {s.target!r} (known: {', '.join(TARGETS)})")
    served = TARGETS[s.target].transports
    missing = [t for t in s.transports if t not in served]
    if missing:
        raise UsageError(f"client times: {s.target} does not serve {', '.join(missing)}")
    out.mkdir(parents=True, exist_ok=True)
    tls = make_tls(out / "tls", addresses=[SERVER_ADDRESS])
    rng = random.Random(s.seed)
    result: list[Row] = []
    link: dict[str, object] = {}
    doc: TimesDocument = {
        "settings": s.to_dict(),
        "presets": {p.name: p.to_dict() for p in presets},
        "upstream": upstream.to_dict(),
        "rows": result,
        "link": link,
    }
    block = 0
    for preset in presets:
        cell = out / preset.name
        lab = Lab.create(preset, upstream=upstream, workdir=cell)
        try:
            auth = Responder(
                cell / "upstream",
                [f"udp://{UPSTREAM_ADDRESS}:53", f"tcp://{UPSTREAM_ADDRESS}:53"],
                synthetic=NAMES,
                name="upstream",
                exec_prefix=lab.exec_prefix("client"),
            )
            try:
                target = make_target(
                    s.target,
                    cell / "target",
                    cpus=[0],
                    tls=tls,
                    upstream=None if s.target == "builtin" else auth.endpoints["udp"],
                    transports=list(s.transports),
                    synthetic=NAMES,
                    host=SERVER_ADDRESS,
                    exec_prefix=["nsenter", f"--net=/run/netns/{lab.info.server_netns}", "--"],
                )
                target.start()
                doc.setdefault("target_version", target.version())
                try:
                    # An authoritative server has no cache to be cold.
                    for cache in s.caches if s.target != "builtin" else ("warm",):
                        if cache == "warm" and s.target != "builtin":
                            # One transport fills the cache every transport reads: udp if served.
                            fill = "udp" if "udp" in target.endpoints else s.transports[0]
                            fill_cache(target, cell / "fill", [1], NAMES, [fill], exec_prefix=lab.exec_prefix("server"))
                        order = list(s.transports)
                        rng.shuffle(order)
                        for transport in order:
                            before = _counters(target)
                            seed = rng.randrange(1 << 31)
                            ep = target.endpoints[transport]
                            config = client_config(transport, s, ep.address, tls.ca, seed)
                            if ep.path and transport in ("doh", "doh3"):
                                config["doh_path"] = ep.path
                            run_dir = cell / cache / transport
                            if cache == "cold":
                                # Names no earlier run asked: a block of its own per run.
                                config.pop("synthetic")
                                config["queries_file"] = str(_fresh_names(run_dir, 2 * s.queries, block))
                                block += 1
                            records = generate(config, run_dir, name="engine", exec_prefix=lab.exec_prefix("client"))
                            after = _counters(target)
                            row = _row(preset.name, cache, transport, summary_of(records), before, after)
                            result.append(row)
                            write_json(out / "times.json", doc)
                finally:
                    target.stop()
            finally:
                auth.stop()
        finally:
            lab.remove()
        link[preset.name] = lab.link_stats()
        write_json(out / "times.json", doc)
    return result


def _counters(target: Any) -> Any:
    """The resolver's counters, or none where they are out of reach from here (a target read
    over HTTP from the root namespace, dnsdist's and CoreDNS's, cannot be reached in a lab):
    the cache-hit column is then empty."""

    try:
        return target.counters()
    except DnscostError:
        return Counters()


def _fresh_names(directory: Path, count: int, block: int) -> Path:
    """A queries file (dnsperf's format) of ``count`` synthetic names from block ``block``."""

    start = NAMES // 2 + block * count  # clear of the first names, which health checks ask
    if start + count > NAMES:
        raise UsageError(f"client times: more cold runs than {NAMES} names allow")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "cold-names.txt"
    path.write_text("".join(f"{lab_name(start + i, NAMES)} A\n" for i in range(count)))
    return path


def _row(preset: str, cache: str, transport: str, summary: SummaryRecord, before: Any, after: Any) -> dict[str, object]:
    # The whole run: no warm-up, and a query answered after the schedule ended (a retransmission
    # 5 s later) is one of the run's response times.
    m = summary["total"]
    q = m["queries"]
    hits = None
    if before.cache_hits is not None and after.cache_hits is not None and after.queries and before.queries is not None:
        asked = after.queries - before.queries
        hits = (after.cache_hits - before.cache_hits) / asked if asked > 0 else None
    return {
        "preset": preset,
        "cache": cache,
        "transport": transport,
        "offered": q["offered"],
        "answered": q["answered"],
        "timed_out": q["timed_out"],
        "retransmitted": q.get("retransmitted", 0),
        "connections_opened": m["connections"]["opened"],
        "handshakes": m["handshakes"],
        "cache_hit_ratio": hits,
        "p50_ms": m["latency"]["p50_us"] / 1000,
        "p90_ms": m["latency"]["p90_us"] / 1000,
        "p99_ms": m["latency"]["p99_us"] / 1000,
        "hdr": m["latency"]["hdr"],
    }


def rows(doc: TimesDocument) -> list[Row]:
    """``times.json``'s rows with their CDFs and quantiles recomputed from the histograms."""
    out = []
    for r in doc["rows"]:
        buckets = decode(r["hdr"]) if r["answered"] else []
        out.append(
            {
                **{k: v for k, v in r.items() if k != "hdr"},
                "median_ms": quantile(buckets, 0.5) / 1000 if buckets else None,
                "cdf_ms": [(v / 1000, p) for v, p in _cdf(buckets)],
            }
        )
    return out


def _cdf(buckets: list[tuple[int, int]]) -> list[tuple[int, float]]:

    return cdf(buckets) if buckets else []
