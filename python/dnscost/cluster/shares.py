"""One trial's engine configuration split into workers' shares, and their records merged back
into the records of one engine. Pure (no process, no clock, no file): the orchestrator calls it
as a cluster trial ends, and ``dnscost report`` calls it again on the stored per-worker records
(:func:`dnscost.analysis.load.resummarize`).

Splitting: worker *i* of *n* gets ``connections // n`` connections (the first
``connections % n`` one more) and the rate of its connections (``rate * its connections /
connections``; likewise ``open_rate``), so every connection offers what it would have offered
on one host; ``"max"`` and ``"once"`` stay as they are (every connection runs its own closed loop,
or sends its one query). Per-connection knobs (lifetime, in-flight window, resumption, ...)
are unchanged. Worker *i* > 0 draws with ``seed + i``: the workers do not ask the same names in
the same order. The generator's CPUs, threads and source addresses are each worker's own, set
where it runs (:func:`dnscost.cluster.dask.run_share`).

A population (``classes``) splits class by class the same way: each class's clients (a
replay of a profile) or connections over the workers, its rate with them; a class smaller than
the cluster is on its first workers only.

Merging: counters sum, HDR histograms merge bucket by bucket (:func:`dnscost.analysis.hdr.merge`;
their percentiles are then computed as the engine computes them), and the merged trial kept up
only if every worker did. Each worker's times are its own clock's: the merged start is the mean
of the workers' starts, and the measured window runs from the mean of their window starts to the
mean of their window ends, so that the sum of the workers' counts over it is their summed rate.
A population's per-class records merge class by class, by name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from dnscost.analysis import hdr
from dnscost.contract import EngineRecord
from dnscost.errors import EngineError, UsageError

__all__ = ["HOST_KNOBS", "merge_records", "merge_totals", "split_config"]

HOST_KNOBS = ("cpus", "threads", "sources", "output", "connections_log")
"""Engine knobs that belong to the host that runs the engine: never split, set by each worker."""


def split_config(config: Mapping[str, Any], workers: int) -> list[dict[str, object]]:
    """``config`` (one trial's engine configuration) as ``workers`` shares; see the module's
    documentation. Raises UsageError when the trial cannot be split so."""
    if workers < 1:
        raise UsageError("a cluster trial needs at least one worker")
    if config.get("profile") is not None or config.get("clients") is not None:
        raise UsageError("a replay of client profiles cannot be split over cluster workers (not implemented)")
    if config.get("sources"):
        raise UsageError("engine sources are each cluster worker's own addresses: leave sources out of the trial")
    if config.get("classes"):
        return _split_classes(config, workers)
    connections = int(config.get("connections", 1))
    if connections < workers:
        raise UsageError(f"{connections} connections cannot be split over {workers} cluster workers")
    base = {k: v for k, v in config.items() if k not in HOST_KNOBS}
    shares = []
    for i in range(workers):
        own = connections // workers + (1 if i < connections % workers else 0)
        share = {**base, "connections": own}
        for key in ("rate", "open_rate"):
            value = config.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                share[key] = value * own / connections
        if i > 0:
            share["seed"] = int(config.get("seed", 1)) + i
        shares.append(share)
    return shares


def _split_classes(config: Mapping[str, Any], workers: int) -> list[dict[str, object]]:
    """A population's shares: every class split as one configuration is, by its clients (a
    replay of a profile) or its connections, its rate with them; a worker's share of a class
    with fewer clients than workers may be none (the class is then left out of that worker's
    configuration)."""
    base = {k: v for k, v in config.items() if k not in (*HOST_KNOBS, "classes")}
    shares: list[dict[str, object]] = [
        {**base, "classes": [], **({"seed": int(config.get("seed", 1)) + i} if i else {})} for i in range(workers)
    ]
    for c in config["classes"]:
        own_config: Mapping[str, Any] = c.get("config", {})
        unit = "clients" if own_config.get("profile") is not None else "connections"
        total = int(own_config.get(unit, 1))
        for i in range(workers):
            own = total // workers + (1 if i < total % workers else 0)
            if own == 0:
                continue
            part: dict[str, object] = {**own_config, unit: own}
            for key in ("rate", "open_rate"):
                value = own_config.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    part[key] = value * own / total
            cast(list[object], shares[i]["classes"]).append({"name": c["name"], "config": part})
    if any(not share["classes"] for share in shares):
        largest = max(int(c.get("config", {}).get("clients") or c.get("config", {}).get("connections") or 1)
                      for c in config["classes"])  # fmt: skip
        raise UsageError(
            f"a population whose largest class has {largest} clients or connections "
            f"cannot be split over {workers} cluster workers"
        )
    return shares


def _merge_classes(parts: Sequence[Sequence[Mapping[str, Any]]], keep: Sequence[str]) -> list[dict[str, object]]:
    """A population's per-class records of several workers merged class by class (a class a
    worker did not run is the others'), in the order of their first appearance: ``keep``'s
    fields taken from the first, the rest summed as totals."""
    return [
        {
            **{k: same[0][k] for k in keep},
            **merge_totals([{k: v for k, v in c.items() if k not in keep} for c in same]),
        }
        for same in _by_name(parts)
    ]


def _by_name(parts: Sequence[Sequence[Mapping[str, Any]]]) -> list[list[Mapping[str, Any]]]:
    """Items with a ``name`` from several workers, grouped by name in order of first appearance."""
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for items in parts:
        for c in items:
            by_name.setdefault(str(c["name"]), []).append(c)
    return list(by_name.values())


def _summed(configs: Iterable[Mapping[str, Any]]) -> dict[str, object]:
    """The split knobs of several workers' shares of one class, summed back."""
    parts = list(configs)
    out: dict[str, object] = {}
    for key in ("clients", "connections", "rate", "open_rate"):
        values = [p.get(key) for p in parts]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            out[key] = sum(cast(list[float], values))
    return out


def _merge_histograms(parts: Sequence[Mapping[str, Any]]) -> dict[str, object]:
    """HistogramSummary records merged: their HDR histograms summed, every figure recomputed
    as the engine's HdrHistogram computes it."""
    layout, buckets = hdr.merge([str(p["hdr"]) for p in parts])
    encoded = hdr.encode(layout, buckets)
    total = sum(c for _, c in buckets)
    if total == 0:
        return {
            "count": 0,
            "min_us": 0,
            "mean_us": 0.0,
            **{k: 0 for k in ("p50_us", "p90_us", "p99_us", "p999_us", "max_us")},
            "hdr": encoded,
        }

    def at(q: float) -> int:
        rank = max(1, math.ceil(q * total))
        seen = 0
        for value, count in buckets:
            seen += count
            if seen >= rank:
                return hdr.highest_equivalent(layout, value)
        return hdr.highest_equivalent(layout, buckets[-1][0])

    def median_equivalent(value: int) -> int:
        low = value
        return low + (hdr.highest_equivalent(layout, value) - low + 1) // 2

    mean = sum(median_equivalent(v) * c for v, c in buckets) / total
    return {
        "count": total,
        "min_us": min(int(p["min_us"]) for p in parts if p["count"]),
        "mean_us": round(mean * 10) / 10,
        "p50_us": at(0.5),
        "p90_us": at(0.9),
        "p99_us": at(0.99),
        "p999_us": at(0.999),
        "max_us": at(1.0),
        "hdr": encoded,
    }


def merge_totals(parts: Sequence[Mapping[str, Any]]) -> dict[str, object]:
    """Engine ``Totals`` (or any of their tables) summed key by key: numbers add, booleans hold
    when all do, histograms merge (:func:`_merge_histograms`)."""
    keys = list(dict.fromkeys(k for p in parts for k in p))
    out: dict[str, object] = {}
    for key in keys:
        values = [p[key] for p in parts if key in p]
        first = values[0]
        if isinstance(first, Mapping) and "hdr" in first:
            out[key] = _merge_histograms(values)
        elif isinstance(first, Mapping):
            out[key] = merge_totals(values)
        elif isinstance(first, bool):
            out[key] = all(values)
        elif isinstance(first, int | float):
            out[key] = sum(values)
        else:
            out[key] = first
    return out


def _merge_memory(parts: Sequence[Mapping[str, Any]]) -> dict[str, object]:
    """The workers' memory summed (the peak is the sum of their peaks, a bound on the whole's),
    with the octets per connection taken again from the sums."""
    out = merge_totals([{k: v for k, v in p.items() if k != "rss_per_connection_bytes"} for p in parts])
    connections = int(cast(int, out["connections"]))
    if connections > 0:
        grown = int(cast(int, out["rss_bytes"])) - int(cast(int, out["rss_start_bytes"]))
        out["rss_per_connection_bytes"] = round(max(grown, 0) / connections)
    return out


def merge_records(
    workers: Sequence[Sequence[Mapping[str, Any]]], config: Mapping[str, Any], *, max_skew_ms: float | None = None
) -> list[EngineRecord]:
    """The records of one engine run with ``config`` (the trial's whole configuration) from
    those of its workers' runs: a ``start``, the ``interval`` records all workers wrote
    (summed index by index), and a ``summary``. Raises EngineError when a worker wrote no
    summary, or when the workers started more than ``max_skew_ms`` apart."""
    if not workers:
        raise EngineError("no worker records to merge")
    starts: list[Mapping[str, Any]] = []
    summaries: list[Mapping[str, Any]] = []
    for k, records in enumerate(workers):
        first = next((r for r in records if r.get("type") == "start"), None)
        if first is None or not records or records[-1].get("type") != "summary":
            raise EngineError(f"cluster worker {k} wrote no start or no summary")
        starts.append(first)
        summaries.append(records[-1])
    started = [float(s["started_unix_ms"]) for s in starts]
    skew = max(started) - min(started)
    if max_skew_ms is not None and skew > max_skew_ms:
        raise EngineError(f"cluster workers started {skew:.0f} ms apart, more than {max_skew_ms:.0f} ms")
    t0 = round(sum(started) / len(started))

    def mean_time(values: Sequence[float]) -> int:
        return max(0, round(sum(values) / len(values) - t0))

    start: dict[str, object] = {**starts[0], "config": dict(config), "started_unix_ms": t0}
    if any("classes" in st for st in starts):
        # Each class as the whole trial ran it: its workers' clients, connections and rate summed.
        start["classes"] = [
            {**same[0], "config": {**same[0]["config"], **_summed(s["config"] for s in same)}}
            for same in _by_name([st.get("classes", []) for st in starts])
        ]
    intervals = [[r for r in records if r.get("type") == "interval"] for records in workers]
    merged: list[dict[str, object]] = [start]
    for same in zip(*intervals, strict=False):
        # An interval record is its totals, flattened, beside its index, phase and times.
        own = ("type", "index", "phase", "start_ms", "end_ms")
        merged.append(
            {
                **{k: same[0][k] for k in own[:3]},
                "start_ms": mean_time([s + r["start_ms"] for s, r in zip(started, same, strict=True)]),
                "end_ms": mean_time([s + r["end_ms"] for s, r in zip(started, same, strict=True)]),
                **merge_totals([{k: v for k, v in r.items() if k not in (*own, "classes")} for r in same]),
                **(
                    {"classes": _merge_classes([r.get("classes", []) for r in same], ("name", "transport"))}
                    if any("classes" in r for r in same)
                    else {}
                ),
            }
        )
    merged.append(
        {
            "type": "summary",
            "measure_start_ms": mean_time([s + r["measure_start_ms"] for s, r in zip(started, summaries, strict=True)]),
            "measure_end_ms": mean_time([s + r["measure_end_ms"] for s, r in zip(started, summaries, strict=True)]),
            # Every worker's connections open: the last worker's open phase (absent if one never opened).
            **(
                {
                    "opened_ms": max(
                        0, round(max(s + r["opened_ms"] for s, r in zip(started, summaries, strict=True)) - t0)
                    )
                }
                if all(r.get("opened_ms") is not None for r in summaries)
                else {}
            ),
            "interrupted": any(r["interrupted"] for r in summaries),
            "aborted": any(r["aborted"] for r in summaries),
            "answered_qps": sum(r["answered_qps"] for r in summaries),
            "generator_kept_up": all(r["generator_kept_up"] for r in summaries),
            "measured": merge_totals([r["measured"] for r in summaries]),
            "total": merge_totals([r["total"] for r in summaries]),
            "accounting": merge_totals([r["accounting"] for r in summaries]),
            **(
                {"classes": _merge_classes([r.get("classes", []) for r in summaries], ("name", "transport"))}
                if any("classes" in r for r in summaries)
                else {}
            ),
            **(
                {"memory": _merge_memory([r["memory"] for r in summaries])}
                if all("memory" in r for r in summaries)
                else {}
            ),
        }
    )
    # Built field by field from the workers' records, summed: the engine's own shape
    # (python/tests/test_cluster.py holds a merged run to one engine's).
    return cast(list[EngineRecord], merged)
