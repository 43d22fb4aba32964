"""A trial over time: one row per engine interval (a second of the run, warm-up, measured period
and drain alike), from the engine's interval records and the meter's samples of the same span.
Pure: the records come in, rows go out (:func:`dnscost.analysis.load.load_run` reads them).

Each row holds what the engine counted in its interval, per second (offered, answered, timed
out, connections opened, closed by the server, handshakes full, resumed and with 0-RTT data
taken), the latency percentiles of the answers that arrived in it, the connections open as it
ended, and the target's CPU (a share of one core), memory (its cgroup's usage, else its
processes' resident memory) and page faults per second over the same span on the meter's clock,
read as the trial's summary reads its window (:mod:`dnscost.meter.summary`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dnscost.contract import Row
from dnscost.meter import summary as meter_summary
from dnscost.trial_summary import SummaryContext

__all__ = ["SERIES_COLUMNS", "series_rows"]

SERIES_COLUMNS = [
    "trial",
    "index",
    "phase",
    "start_s",
    "end_s",
    "offered_qps",
    "answered_qps",
    "timed_out_qps",
    "failed_qps",
    "latency_p50_us",
    "latency_p99_us",
    "connections_open",
    "connections_opened_per_s",
    "closed_by_server_per_s",
    "handshakes_full_per_s",
    "handshakes_resumed_per_s",
    "zero_rtt_accepted_per_s",
    "target_cpu_share",
    "target_memory_bytes",
    "target_page_faults_per_s",
]
"""The ``series`` table's columns: times in seconds from the start of the measured period
(negative in the warm-up), rates per second of the interval."""


def _sum(counts: Mapping[str, Any] | None) -> int:
    return sum(int(v) for v in (counts or {}).values() if isinstance(v, int | float))


def series_rows(
    trial_id: str, records: Sequence[Mapping[str, Any]], samples: Sequence[meter_summary.Record], ctx: SummaryContext
) -> list[Row]:
    """The rows of one trial: ``records`` are its engine's (a cluster trial's merged), ``samples``
    its meter's, ``ctx`` its summary's context (where the sampler's clock started)."""
    start = next((r for r in records if r.get("type") == "start"), None)
    summary = records[-1] if records and records[-1].get("type") == "summary" else None
    if start is None or summary is None:
        return []
    intervals = [r for r in records if r.get("type") == "interval"]
    offset = float(start["started_unix_ms"]) - ctx.sampler_start_unix_ms
    zero = float(summary["measure_start_ms"])
    windows = [(offset + r["start_ms"], offset + r["end_ms"]) for r in intervals]
    # The target's CPU time as the summary reads it: its cgroup's exact total, else user and
    # system time (its cgroup's, else its processes').
    cpu = meter_summary.counter_over(samples, ("target", "cgroup_cpu_total_us"), windows)
    if all(v is None for v in cpu):
        for group in ("cgroup_cpu", "proc_cpu"):
            user = meter_summary.counter_over(samples, ("target", f"{group}_user_us"), windows)
            system = meter_summary.counter_over(samples, ("target", f"{group}_system_us"), windows)
            cpu = [u + y if u is not None and y is not None else None for u, y in zip(user, system, strict=True)]
            if any(v is not None for v in cpu):
                break
    memory = meter_summary.level_over(samples, ("target", "cgroup_usage_bytes"), windows)
    if all(v is None for v in memory):
        memory = meter_summary.level_over(samples, ("target", "rss_bytes"), windows)
    faults = meter_summary.counter_over(samples, ("target", "cgroup_page_faults"), windows)
    rows: list[Row] = []
    for k, r in enumerate(intervals):
        seconds = (r["end_ms"] - r["start_ms"]) / 1000
        if seconds <= 0:
            continue
        q, c, h, lat = r["queries"], r["connections"], r["handshakes"], r["latency"]
        rows.append(
            {
                "trial": trial_id,
                "index": r["index"],
                "phase": r["phase"],
                "start_s": (r["start_ms"] - zero) / 1000,
                "end_s": (r["end_ms"] - zero) / 1000,
                "offered_qps": q["offered"] / seconds,
                "answered_qps": q["answered"] / seconds,
                "timed_out_qps": q["timed_out"] / seconds,
                "failed_qps": q["failed_total"] / seconds,
                "latency_p50_us": lat["p50_us"] if lat["count"] else None,
                "latency_p99_us": lat["p99_us"] if lat["count"] else None,
                "connections_open": c["active"],
                "connections_opened_per_s": c["opened"] / seconds,
                "closed_by_server_per_s": _sum(c["closed_by_server"]) / seconds,
                "handshakes_full_per_s": h["full"] / seconds,
                "handshakes_resumed_per_s": h["resumed"] / seconds,
                "zero_rtt_accepted_per_s": h["zero_rtt_accepted"] / seconds,
                "target_cpu_share": cpu_us / (seconds * 1e6) if (cpu_us := cpu[k]) is not None else None,
                "target_memory_bytes": memory[k],
                "target_page_faults_per_s": faults[k] / seconds if faults[k] is not None else None,
            }
        )
    return rows
