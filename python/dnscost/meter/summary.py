"""What the samples say about one window of a trial: pure functions over the sampler's records.

Counters (CPU times, drop counters, energy) are read at both edges of the window
``[t0_ms, t1_ms]`` by linear interpolation between the two nearest samples, and the window's
figure is their difference. Levels (memory, socket counts) are averaged over the window as a
time-weighted mean of the piecewise-linear curve through the samples (edges interpolated the
same way) and their maximum is taken over the samples inside the window and the two edge
values. An edge outside the sampled range takes the nearest sample's value and sets
``extrapolated``.

Field names carry their units. Per-query or per-connection figures are derived later, by the
analysis, from these and the engine's counts.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import cast

from dnscost.contract import MeterSummary

__all__ = ["LEVELS", "Record", "counter_over", "level_over", "sample_time", "summarize", "value_at"]

Series = list[tuple[float, float]]

LEVELS: dict[str, tuple[str, tuple[str, ...]]] = {
    # name in MeterSummary (without _mean/_max): (record type, path in the record)
    "rss_bytes": ("slow", ("target", "rss_bytes")),
    "pss_bytes": ("slow", ("target", "pss_bytes")),
    "uss_bytes": ("slow", ("target", "uss_bytes")),
    "cgroup_usage_bytes": ("fast", ("target", "cgroup_usage_bytes")),
    "cgroup_anon_bytes": ("fast", ("target", "cgroup_anon_bytes")),
    "cgroup_kernel_bytes": ("fast", ("target", "cgroup_kernel_bytes")),
    "tcp_bytes": ("fast", ("target", "cgroup_tcp_bytes")),
    "cgroup_slab_bytes": ("fast", ("target", "cgroup_slab_bytes")),
    "threads": ("fast", ("target", "threads")),
    "socket_buffer_bytes": ("slow", ("sockets", "buffer_bytes")),
    "socket_optmem_bytes": ("slow", ("sockets", "o_bytes")),
    "sockets": ("slow", ("sockets", "sockets")),
    "system_slab_bytes": ("fast", ("meminfo", "slab_bytes")),
    "system_sunreclaim_bytes": ("fast", ("meminfo", "sunreclaim_bytes")),
    "sockstat_tcp_mem_bytes": ("fast", ("sockstat", "tcp_mem_bytes")),
    "sockstat_udp_mem_bytes": ("fast", ("sockstat", "udp_mem_bytes")),
    "sockstat_tcp_inuse": ("fast", ("sockstat", "tcp_inuse")),
    "sockstat_tcp_tw": ("fast", ("sockstat", "tcp_tw")),
    "tcp_curr_estab": ("fast", ("tcp", "CurrEstab")),
}
"""Every level the summary reports as ``<name>_mean`` and ``<name>_max``, and where it is read."""

_CORE_FIELDS = ("user_us", "nice_us", "system_us", "idle_us", "iowait_us", "irq_us", "softirq_us", "steal_us")
_GAUGES = {"CurrEstab"}
_SCHED = ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches", "sched_runs", "sched_run_delay_us")
"""The target's threads' counters (``FastTarget``), each summarised under its own name."""


Record = Mapping[str, object]
"""One of the sampler's records (contract.MeterRecord) or a core's times with its sample's
``t_ms``: read by path, every value narrowed where it is read."""


def value_at(record: Record, path: Sequence[str]) -> float | None:
    value: object = record
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def sample_time(record: Record) -> float:
    """A sample's time (ms on the sampler's clock); NaN, outside every window, without one."""
    t = value_at(record, ("t_ms",))
    return float("nan") if t is None else t


def _items(record: Record, key: str) -> list[Record]:
    """The objects of the array ``key`` (a sample's ``cores``)."""
    value = record.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _keys(record: Record, key: str) -> list[str]:
    """The keys of the object ``key`` (a sample's ``udp``, ``tcp``, ``tcpext`` counters)."""
    value = record.get(key)
    return list(value) if isinstance(value, dict) else []


def _read_at(record: Record, path: Sequence[str], period_ms: float | None) -> float:
    """When the value at ``path`` of ``record`` was read: the sample's time, but for a slow
    sample's sockets whose ``ss`` run took longer than the sampler's period between them
    (``period_ms``, the header's ``socket_interval_ms``), the end of that run. ``ss`` walks the
    kernel's socket table over that span: at 100 000 connections a walk due just inside a window
    took 6.1 s and counted 64 055 sockets of 100 032, the engines' connections closing after the
    window ended. A shorter run is dated when it was due, within the sampler's resolution."""
    t = sample_time(record)
    wall = value_at(record, ("ss_wall_us",)) if path[:1] == ("sockets",) else None
    if wall is None or period_ms is None or wall / 1000 <= period_ms:
        return t
    return t + wall / 1000


def _series(records: Iterable[Record], path: Sequence[str], period_ms: float | None = None) -> Series:
    out = [(_read_at(r, path, period_ms), v) for r in records if (v := value_at(r, path)) is not None]
    out.sort(key=lambda p: p[0])
    return out


def _at(series: Series, t: float) -> tuple[float, bool]:
    """Value at ``t`` interpolated linearly; clamped (and flagged) outside the series."""
    times = [p[0] for p in series]
    i = bisect.bisect_left(times, t)
    if i < len(series) and times[i] == t:
        return series[i][1], False
    if i == 0:
        return series[0][1], True
    if i == len(series):
        return series[-1][1], True
    (ta, va), (tb, vb) = series[i - 1], series[i]
    return va + (vb - va) * (t - ta) / (tb - ta), False


class _Timeline:
    """Records in time order, for values at two instants without building a field's whole
    series: :meth:`delta` is ``_delta(_series(records, path), t0, t1)`` (the same values, the
    same arithmetic), reading only the samples next to ``t0`` and ``t1``. A trial's summary
    takes a hundred deltas over thousands of samples; each built its series from all of them."""

    def __init__(self, records: Sequence[Record]) -> None:
        times = [sample_time(r) for r in records]
        self.exact = any(t != t for t in times)  # a sample without a time: the series' own order
        order = sorted(range(len(records)), key=lambda i: times[i])
        self.records = [records[i] for i in order]
        self.times = [times[i] for i in order]
        self.source = records

    def _at(self, path: Sequence[str], t: float) -> tuple[float, bool] | None:
        i = bisect.bisect_left(self.times, t)
        nxt = next(
            (
                (self.times[j], v)
                for j in range(i, len(self.records))
                if (v := value_at(self.records[j], path)) is not None
            ),
            None,
        )
        if nxt is not None and nxt[0] == t:
            return nxt[1], False
        prev = next(
            ((self.times[j], v) for j in range(i - 1, -1, -1) if (v := value_at(self.records[j], path)) is not None),
            None,
        )
        if prev is None and nxt is None:
            return None
        if prev is None:
            return nxt[1], True  # type: ignore[index]
        if nxt is None:
            return prev[1], True
        (ta, va), (tb, vb) = prev, nxt
        return va + (vb - va) * (t - ta) / (tb - ta), False

    def delta(self, path: Sequence[str], t0: float, t1: float) -> tuple[float | None, bool]:
        if self.exact:
            return _delta(_series(self.source, path), t0, t1)
        a, b = self._at(path, t0), self._at(path, t1)
        if a is None or b is None:
            return None, False
        return b[0] - a[0], a[1] or b[1]


def _delta(series: Series, t0: float, t1: float) -> tuple[float | None, bool]:
    if not series:
        return None, False
    a, ea = _at(series, t0)
    b, eb = _at(series, t1)
    return b - a, ea or eb


def _mean_max(series: Series, t0: float, t1: float) -> tuple[float | None, float | None, bool]:
    """A level's time-weighted mean and its peak over the window. Levels change in steps (a
    thousand connections opened in a second), so when samples were taken inside the window the
    mean is over those alone: interpolating to the window's edges from a sample taken before
    the step would mix in a level the window never had. Only a window with no sample inside is
    interpolated (and flagged when it is extrapolated)."""
    if not series:
        return None, None, False
    inside = [p for p in series if t0 <= p[0] <= t1]
    if inside:
        peak = max(v for _, v in inside)
        if len(inside) == 1 or inside[-1][0] <= inside[0][0]:
            return inside[0][1], peak, False
        area = sum((tb - ta) * (va + vb) / 2 for (ta, va), (tb, vb) in itertools.pairwise(inside))
        return area / (inside[-1][0] - inside[0][0]), peak, False
    a, ea = _at(series, t0)
    b, eb = _at(series, t1)
    points = [(t0, a)] + [p for p in series if t0 < p[0] < t1] + [(t1, b)]
    peak = max(v for _, v in points)
    if t1 <= t0:
        return a, peak, ea or eb
    area = sum((tb - ta) * (va + vb) / 2 for (ta, va), (tb, vb) in itertools.pairwise(points))
    return area / (t1 - t0), peak, ea or eb


def counter_over(
    records: Iterable[Record], path: Sequence[str], windows: Sequence[tuple[float, float]]
) -> list[float | None]:
    """A counter's increase over each window (``(t0_ms, t1_ms)`` on the sampler's clock), read
    as :func:`summarize` reads it; None where the records never hold it."""
    series = _series(records, path)
    return [_delta(series, t0, t1)[0] for t0, t1 in windows]


def level_over(
    records: Iterable[Record], path: Sequence[str], windows: Sequence[tuple[float, float]]
) -> list[float | None]:
    """A level's time-weighted mean over each window, as :func:`summarize` averages it; None
    where the records never hold it."""
    series = _series(records, path)
    return [_mean_max(series, t0, t1)[0] for t0, t1 in windows]


def _snake(name: str) -> str:
    """``RcvbufErrors`` -> ``rcvbuf_errors``, ``TCPBacklogDrop`` -> ``tcp_backlog_drop``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _source(record: Record) -> str | None:
    source = record.get("energy_source")
    return source if isinstance(source, str) else None


def summarize(records: Sequence[Record], t0_ms: float, t1_ms: float) -> MeterSummary:
    """Summarises the sampler's ``records`` (all of a file: header, samples, end) over
    ``[t0_ms, t1_ms]`` (milliseconds on the sampler's clock, i.e. since ``start_monotonic``):
    one window of a trial (:class:`~dnscost.contract.MeterSummary` has each field's meaning),
    JSON-ready as trial.json stores it. ``None`` where nothing was sampled (no cgroup, no ports)."""
    if t1_ms < t0_ms:
        raise ValueError(f"window ends before it starts: [{t0_ms}, {t1_ms}]")
    fast = [r for r in records if r.get("type") == "fast"]
    slow = [r for r in records if r.get("type") == "slow"]
    period_ms = next((value_at(r, ("socket_interval_ms",)) for r in records if r.get("type") == "header"), None)
    extrapolated = False

    timelines: dict[int, _Timeline] = {}

    def delta(rs: Sequence[Record], *path: str) -> float | None:
        nonlocal extrapolated
        line = timelines.get(id(rs))
        if line is None or line.source is not rs:
            line = timelines[id(rs)] = _Timeline(rs)
        d, e = line.delta(path, t0_ms, t1_ms)
        extrapolated |= e
        return d

    cg_user, cg_sys = delta(fast, "target", "cgroup_cpu_user_us"), delta(fast, "target", "cgroup_cpu_system_us")
    pr_user, pr_sys = delta(fast, "target", "proc_cpu_user_us"), delta(fast, "target", "proc_cpu_system_us")
    source = "cgroup" if cg_user is not None else "proc" if pr_user is not None else None

    cores: dict[int, dict[str, float]] = {}
    for cpu in sorted({int(n) for r in fast for c in _items(r, "cores") if (n := value_at(c, ("cpu",))) is not None}):
        per = [
            {"t_ms": r.get("t_ms"), **next(c for c in _items(r, "cores") if value_at(c, ("cpu",)) == cpu)}
            for r in fast
            if any(value_at(c, ("cpu",)) == cpu for c in _items(r, "cores"))
        ]
        values = {k: delta(per, k) for k in (*_CORE_FIELDS, "tasks_us", "net_rx_softirqs", "net_tx_softirqs")}
        cores[cpu] = {k: v for k, v in values.items() if v is not None}
        cores[cpu]["busy_us"] = sum(
            cores[cpu].get(k, 0.0) for k in ("user_us", "nice_us", "system_us", "irq_us", "softirq_us")
        )

    counters: dict[str, float] = {}
    for group in ("udp", "tcp", "tcpext"):
        names = sorted({k for r in fast for k in _keys(r, group)} - _GAUGES)
        for name in names:
            d = delta(fast, group, name)
            if d is not None:
                counters[f"{group}_{_snake(name)}"] = d

    levels: dict[str, float | None] = {}
    for name, (kind, path) in LEVELS.items():
        mean, peak, e = _mean_max(_series(fast if kind == "fast" else slow, path, period_ms), t0_ms, t1_ms)
        extrapolated |= e and mean is not None
        levels[f"{name}_mean"], levels[f"{name}_max"] = mean, peak

    sources = {_source(r) for r in fast if t0_ms <= sample_time(r) <= t1_ms} or {_source(r) for r in fast}
    cgroup_total = delta(fast, "target", "cgroup_cpu_total_us")
    user, system = (cg_user, cg_sys) if source == "cgroup" else (pr_user, pr_sys)
    summary = dict(
        t0_ms=t0_ms,
        t1_ms=t1_ms,
        duration_s=(t1_ms - t0_ms) / 1000,
        samples_fast=sum(1 for r in fast if t0_ms <= sample_time(r) <= t1_ms),
        samples_slow=sum(1 for r in slow if t0_ms <= sample_time(r) <= t1_ms),
        extrapolated=extrapolated,
        cpu_source=source,
        cpu_user_us=user,
        cpu_system_us=system,
        cgroup_cpu_total_us=cgroup_total,
        cgroup_cpu_user_us=cg_user,
        cgroup_cpu_system_us=cg_sys,
        proc_cpu_user_us=pr_user,
        proc_cpu_system_us=pr_sys,
        generator_cpu_user_us=delta(fast, "generator", "cpu_user_us"),
        generator_cpu_system_us=delta(fast, "generator", "cpu_system_us"),
        page_faults=delta(fast, "target", "cgroup_page_faults"),
        **{k: delta(fast, "target", k) for k in _SCHED},
        energy_j=delta(fast, "energy_j"),
        energy_source=next(iter(sources)) if len(sources) == 1 else None,
        energy_model_j=delta(fast, "energy_model_j"),
        cores={str(k): v for k, v in cores.items()},
        counters=counters,
        # The exact total when there is one (the figure to divide by queries), else user + system.
        cpu_us=cgroup_total if cgroup_total is not None else None if user is None or system is None else user + system,
        **levels,
    )
    return cast(MeterSummary, summary)
