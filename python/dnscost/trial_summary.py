"""One trial's costs and validity from its raw records: the engine's JSON lines, the meter's
samples and the target's counters before and after. Pure (no process, no clock, no file):
measurement calls it as a trial ends, and ``dnscost report`` can call it again on the stored
raw data. Fields are described in ``docs/results.md``; validity thresholds live in
:mod:`dnscost.validity`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from dnscost import validity as V
from dnscost.contract import (
    ClassResult,
    CounterReading,
    MeterSummary,
    SummaryContextRecord,
    TransportAgreement,
    TrialSummary,
    Wire,
)
from dnscost.meter import summary as meter_summary
from dnscost.meter.energy import CpuPowerModel
from dnscost.transports import QUIC_TRANSPORTS

__all__ = [
    "SUMMARY_VERSION",
    "CounterDelta",
    "SummaryContext",
    "summarize_trial",
]

SUMMARY_VERSION = 7
"""Bumped whenever a field's definition changes, so stored summaries can be told apart."""


@dataclass(frozen=True)
class SummaryContext:
    """What a summary needs besides the raw records, stored with the trial
    (``trial.json`` ``summary_context``) so the summary can be recomputed."""

    sampler_start_unix_ms: float
    """Wall-clock time of the sampler's zero (its samples' ``t_ms`` count from it)."""
    baseline_s: float
    """Length of the idle baseline at the start of the samples."""
    cache_hit_ratio: float | None
    """The target's cache-hit ratio measured after the fill (None: not measured)."""
    target_cpus: tuple[int, ...] = (0,)
    generator_cpus: tuple[int, ...] = (1,)
    target_keeps_counters: bool = True
    """Whether the target reports counters (missing ones then invalidate the trial)."""
    meter_interval_s: float = 0.1
    cache_filled: bool = True
    """Whether the target's cache was filled for this trial: a trial that did not fill it (the
    memory trials: their one query per connection is not about answers) is not judged on it."""
    unchecked: tuple[str, ...] = ()
    """Validity checks this trial could not run (``validity.UNCHECKED``: an external target's)."""
    generator_cores: int | None = None
    """None: the generator ran on this host's ``generator_cpus``, metered by the kernel. A
    number: it ran on cluster workers (:mod:`dnscost.cluster`) with that many cores in all,
    beyond the meter: its CPU time is the engines' own accounting, its busy share that time
    over those cores."""
    transport_counters: Mapping[str, str] = field(default_factory=dict)
    """The target's counter (``raw`` name) of the queries it received on each transport, where
    it keeps one (``Target.transport_counters``): a population's classes are checked by it."""

    def to_dict(self) -> SummaryContextRecord:
        return {
            "sampler_start_unix_ms": self.sampler_start_unix_ms,
            "baseline_s": self.baseline_s,
            "cache_hit_ratio": self.cache_hit_ratio,
            "target_cpus": list(self.target_cpus),
            "generator_cpus": list(self.generator_cpus),
            "target_keeps_counters": self.target_keeps_counters,
            "meter_interval_s": self.meter_interval_s,
            "cache_filled": self.cache_filled,
            "unchecked": list(self.unchecked),
            "generator_cores": self.generator_cores,
            "transport_counters": dict(self.transport_counters),
        }

    @classmethod
    def from_dict(cls, d: SummaryContextRecord) -> SummaryContext:
        return cls(
            sampler_start_unix_ms=float(d["sampler_start_unix_ms"]),
            baseline_s=float(d["baseline_s"]),
            cache_hit_ratio=d.get("cache_hit_ratio"),
            target_cpus=tuple(d.get("target_cpus", (0,))),
            generator_cpus=tuple(d.get("generator_cpus", (1,))),
            target_keeps_counters=bool(d.get("target_keeps_counters", True)),
            meter_interval_s=float(d.get("meter_interval_s", 0.1)),
            cache_filled=bool(d.get("cache_filled", True)),
            unchecked=tuple(d.get("unchecked", ())),
            generator_cores=d.get("generator_cores"),
            transport_counters=dict(d.get("transport_counters", {})),
        )


@dataclass(frozen=True)
class CounterDelta:
    """The target's counters before and after the load (None where it has none)."""

    answers: tuple[int | None, int | None] = (None, None)
    queries: tuple[int | None, int | None] = (None, None)
    cache_hits: tuple[int | None, int | None] = (None, None)
    raw: tuple[Mapping[str, int], Mapping[str, int]] = ({}, {})
    """Everything the target reported, before and after."""

    @classmethod
    def from_counters(cls, before: CounterReading, after: CounterReading) -> CounterDelta:
        def pair(key: Literal["answers", "queries", "cache_hits"]) -> tuple[int | None, int | None]:
            return before.get(key), after.get(key)

        return cls(
            answers=pair("answers"),
            queries=pair("queries"),
            cache_hits=pair("cache_hits"),
            raw=(before.get("raw", {}), after.get("raw", {})),
        )

    def delta(self, which: str) -> int | None:
        a, b = getattr(self, which)
        return b - a if a is not None and b is not None else None

    def raw_delta(self, key: str) -> int | None:
        """The change of one of the target's own counters (None where it lacks it)."""
        a, b = self.raw[0].get(key), self.raw[1].get(key)
        return b - a if a is not None and b is not None else None


def core_time_source(window: MeterSummary, cpus: Sequence[int]) -> str:
    """Where the busy time of ``cpus`` comes from: ``tasks`` (the scheduler's exact run time
    of every task on them, v1 ``cpuacct``) when every one has it, else ``proc-stat``
    (``/proc/stat``, sampled at the tick: with ``NO_HZ`` idle it misses or invents whole ticks
    on a core busy part of the time: on the reference VM it said 0.3 % of a core whose target
    used 18 % of it, and 64 % of one whose target used 31 %, nothing else running there)."""
    return "tasks" if cpus and all("tasks_us" in window["cores"].get(str(c), {}) for c in cpus) else "proc-stat"


def _busy_us(window: MeterSummary, cpus: Sequence[int]) -> float:
    key = "tasks_us" if core_time_source(window, cpus) == "tasks" else "busy_us"
    return sum(window["cores"].get(str(c), {}).get(key, 0.0) for c in cpus)


def _forever(lifetime: Any) -> bool:
    return lifetime is None or (lifetime.get("duration_ms") is None and lifetime.get("queries") is None)


def summarize_trial(
    records: Sequence[Mapping[str, Any]],
    samples: Sequence[meter_summary.Record],
    counters: CounterDelta,
    ctx: SummaryContext,
) -> TrialSummary:
    """Per-unit costs of one trial over the engine's measured period, with validity flags.

    Saturation is judged per side on that side's own cores: the target when its cgroup or its
    cores were at least :data:`~dnscost.validity.SATURATED` busy, the generator when its cores
    were. A generator that fell behind its schedule, or whose cores were saturated, makes the
    trial ``generator-bound`` unless the target was saturated too (both saturated: what was
    measured is still the target's capacity, and ``both_saturated`` says so)."""
    start = next(r for r in records if r["type"] == "start")
    summ = records[-1]
    m = summ["measured"]
    config = start["config"]
    offset = start["started_unix_ms"] - ctx.sampler_start_unix_ms
    t0, t1 = offset + summ["measure_start_ms"], offset + summ["measure_end_ms"]
    seconds = max((t1 - t0) / 1000, 1e-9)
    window = meter_summary.summarize(samples, t0, t1)
    baseline = meter_summary.summarize(samples, 0, ctx.baseline_s * 1000)
    answered, established = m["queries"]["answered"], m["connections"]["established"]
    active = _mean_active(records)
    cpu_us = window["cpu_us"]
    generator_cpu_us, generator_seen, generator_cores = _generator_cpu(window, samples, (t0, t1), m, ctx)
    connections_held = _connections_held(window, baseline, config["transport"], active)
    loaded = config.get("rate") != "once"  # an idle trial measures memory, not CPU
    cpu_unresolved = loaded and _cpu_unresolved(samples, window)
    engine_answered, target_answers = summ["total"]["queries"]["answered"], counters.delta("answers")
    cache_hit_ratio = _cache_hit_ratio(counters, ctx)
    offered = m["queries"]["offered"]
    loss = _loss(records, m, config.get("rate") == "max")
    agreement = min(engine_answered, target_answers) / max(engine_answered, target_answers) if target_answers else None
    overflows, overflow_share = _overflows(window, m, config["transport"])
    capacity_us = seconds * 1e6
    cores = _Cores.of(window, ctx, cpu_us, generator_cpu_us or 0.0, generator_cores, capacity_us)
    scheduled, off_schedule = _scheduled(start, seconds, offered)
    generator_behind = not summ["generator_kept_up"] or off_schedule
    generator_bound = (generator_behind or cores.generator_saturated) and not cores.target_saturated
    classes, transports = _population(records, counters, ctx, seconds)
    flags = [
        flag
        for flag, bad in (
            ("generator-bound", generator_bound),
            ("loss", loss is not None and loss >= V.MAX_LOSS),
            (
                "listen-overflow",
                overflow_share is not None and overflow_share >= V.MAX_LOSS and not cores.target_saturated,
            ),
            ("unbalanced", not summ["accounting"]["balanced"]),
            ("cold-cache", ctx.cache_filled and cache_hit_ratio is not None and cache_hit_ratio < V.MIN_CACHE_HITS),
            ("answer-mismatch", _disagrees(agreement)),
            ("class-mismatch", any(_disagrees(a["agreement"]) for a in transports.values())),
            ("connections-short", _persistent(config) and active < V.MIN_CONNECTIONS * config["connections"]),
            ("no-cpu-data", cpu_us is None),
            ("cpu-unresolved", cpu_unresolved),
            ("no-generator-cpu", generator_cpu_us is None or not generator_seen),
            ("no-counters", ctx.target_keeps_counters and target_answers is None),
            ("meter-gaps", window["samples_fast"] < V.MIN_SAMPLES * (seconds / ctx.meter_interval_s)),
            ("target-core-shared", loaded and cores.foreign_share is not None and cores.foreign_share >= V.MAX_FOREIGN),
            ("cores-stolen", loaded and cores.stolen_share >= V.MAX_STOLEN),
        )
        if bad
    ]
    out: TrialSummary = {
        "summary_version": SUMMARY_VERSION,
        "measured_s": round(seconds, 3),
        "offered_qps": m["engine"]["offered_qps"],
        "answered_qps": answered / seconds,
        "queries_offered": offered,
        "queries_answered": answered,
        "connections_established": established,
        "handshakes_full": m["handshakes"]["full"],
        "handshakes_resumed": m["handshakes"]["resumed"],
        # Among the resumed: QUIC's 0-RTT, taken or refused (absent from engines before DoQ).
        "handshakes_zero_rtt_accepted": m["handshakes"].get("zero_rtt_accepted", 0),
        "handshakes_zero_rtt_rejected": m["handshakes"].get("zero_rtt_rejected", 0),
        "connection_seconds": active * seconds,
        "mean_active_connections": active,
        "connections_held": connections_held,
        "target_cpu_us": cpu_us,
        "target_cpu_us_per_query": cpu_us / answered if answered and cpu_us is not None else None,
        "target_page_faults_per_query": (
            faults / answered if answered and (faults := window.get("page_faults")) is not None else None
        ),
        "target_cpu_us_per_new_connection": cpu_us / established if established and cpu_us is not None else None,
        "target_cpu_share": cpu_us / capacity_us if cpu_us is not None else None,
        **_observers(window, ctx.target_cpus, answered, seconds),
        "engine_cpu_us": m["engine"]["cpu_user_us"] + m["engine"]["cpu_system_us"],
        "generator_cpu_us": generator_cpu_us,
        "generator_cpu_us_per_query": generator_cpu_us / answered if answered and generator_cpu_us else None,
        "generator_cpu_share": generator_cpu_us / capacity_us if generator_cpu_us is not None else None,
        **_memory(window, baseline, active),
        **_energy(window, baseline, seconds, None if cpu_unresolved else cpu_us, answered),
        "latency_us": {k: m["latency"][k] for k in QUANTILES},
        "setup_latency_us": {k: m["setup_latency"][k] for k in QUANTILES},
        "meter": window,
        "baseline_meter": baseline,
        "validity": {
            "generator_kept_up": summ["generator_kept_up"],
            "offered_of_scheduled": offered / scheduled if scheduled else None,
            **cores.shares(generator_behind, core_time_source(window, ctx.target_cpus)),
            "loss": loss,
            "accounting_balanced": summ["accounting"]["balanced"],
            "cache_hit_ratio": cache_hit_ratio,
            "engine_answered": engine_answered,
            "target_answered": target_answers,
            "answer_count_agreement": agreement,
            "listen_overflows": overflows,
            "listen_overflow_share": overflow_share,
            "meter_samples": window["samples_fast"],
            "flags": flags,
            "unchecked": list(ctx.unchecked),
            "valid": not flags,
        },
        "wire": _wire(summ["total"]),
        **_population_part(classes, transports),
    }
    return out


QUANTILES = ("p50_us", "p90_us", "p99_us", "p999_us", "max_us")
"""The latency quantiles a summary keeps of the engine's."""


class _CoreShares(TypedDict):
    target_saturated: bool
    generator_saturated: bool
    both_saturated: bool
    target_busy_share: float
    target_foreign_share: float | None
    target_stolen_share: float
    core_time_source: str
    generator_busy_share: float


class _Observers(TypedDict):
    wakeups_per_query: float | None
    runs_per_query: float | None
    softirq_us_per_query: float | None
    wakeups_per_s: float | None
    runs_per_s: float | None
    softirq_us_per_s: float | None


def _observers(window: MeterSummary, cpus: Sequence[int], answered: int, seconds: float) -> _Observers:
    """What explains a cost per query (``docs/metering.md``, "Wake-ups"): the target's
    wake-ups, scheduler runs and its cores' softirq time, per answered query and per second."""
    wakeups, runs, softirq_us = _wakeups(window, cpus)
    return {
        "wakeups_per_query": _per(wakeups, answered),
        "runs_per_query": _per(runs, answered),
        "softirq_us_per_query": _per(softirq_us, answered),
        "wakeups_per_s": _per(wakeups, seconds),
        "runs_per_s": _per(runs, seconds),
        "softirq_us_per_s": _per(softirq_us, seconds),
    }


class _PopulationPart(TypedDict, total=False):
    classes: list[ClassResult]
    transports: dict[str, TransportAgreement]


def _population_part(classes: list[ClassResult], transports: dict[str, TransportAgreement]) -> _PopulationPart:
    """A population's trial: each class apart and each transport's agreement; none otherwise."""
    return {"classes": classes, "transports": transports} if classes else {}


class _Memory(TypedDict):
    user_bytes_per_connection: float | None
    kernel_bytes_per_connection: float | None
    tcp_kernel_bytes_per_connection: float | None
    socket_buffer_bytes_per_connection: float | None


def _memory(window: MeterSummary, baseline: MeterSummary, active: float) -> _Memory:
    """Memory per open connection: user, kernel, TCP and socket buffers."""
    return {
        "user_bytes_per_connection": _per_connection(window, baseline, "rss_bytes_mean", active),
        "kernel_bytes_per_connection": _per_connection(window, baseline, "cgroup_kernel_bytes_mean", active),
        "tcp_kernel_bytes_per_connection": _per_connection(window, baseline, "tcp_bytes_mean", active),
        "socket_buffer_bytes_per_connection": _per_connection(window, baseline, "socket_buffer_bytes_mean", active),
    }


class _Energy(TypedDict):
    energy_j: float | None
    energy_source: str | None
    energy_marginal_j: float | None
    energy_j_per_1000_queries: float | None


def _energy(
    window: MeterSummary, baseline: MeterSummary, seconds: float, cpu_us: float | None, answered: int
) -> _Energy:
    """The window's energy as metered, its source, and above idle (``_energy_marginal``)."""
    energy_j = window["energy_j"]
    return {
        "energy_j": energy_j,
        "energy_source": window["energy_source"],
        "energy_marginal_j": _energy_marginal(window, baseline, seconds, cpu_us),
        "energy_j_per_1000_queries": energy_j * 1000 / answered if answered and energy_j is not None else None,
    }


@dataclass(frozen=True)
class _Cores:
    """Each side's busy time on its own cores over the window, as shares of their time."""

    target_busy_share: float
    foreign_share: float | None
    """Busy time of the target's cores not charged to it: another process shared them."""
    stolen_share: float
    """Time the hypervisor ran another machine on the target's cores (their steal time): the
    target could not run then, however busy it was."""
    generator_busy_share: float

    @property
    def target_saturated(self) -> bool:
        return self.target_busy_share >= V.SATURATED

    @property
    def generator_saturated(self) -> bool:
        return self.generator_busy_share >= V.SATURATED

    def shares(self, generator_behind: bool, source: str) -> _CoreShares:
        """The validity record's fields of the cores: saturation on each side (both: the target's
        capacity measured all the same), busy, foreign and stolen shares, the busy time's
        source."""
        return {
            "target_saturated": self.target_saturated,
            "generator_saturated": self.generator_saturated,
            "both_saturated": self.target_saturated and (generator_behind or self.generator_saturated),
            "target_busy_share": self.target_busy_share,
            "target_foreign_share": self.foreign_share,
            "target_stolen_share": self.stolen_share,
            "core_time_source": source,
            "generator_busy_share": self.generator_busy_share,
        }

    @staticmethod
    def of(
        window: MeterSummary,
        ctx: SummaryContext,
        cpu_us: float | None,
        generator_cpu_us: float,
        generator_cores: int,
        capacity_us: float,
    ) -> _Cores:
        """From the window's meter; on cluster workers the generator's is its engines' own
        accounting (``generator_cpu_us`` over ``generator_cores``)."""
        target = len(ctx.target_cpus) * capacity_us
        busy = _busy_us(window, ctx.target_cpus)
        generator_busy = _busy_us(window, ctx.generator_cpus) if ctx.generator_cores is None else generator_cpu_us
        return _Cores(
            target_busy_share=max(cpu_us or 0.0, busy) / target,
            foreign_share=(busy - cpu_us) / target if cpu_us is not None else None,
            stolen_share=sum(window["cores"].get(str(c), {}).get("steal_us", 0.0) for c in ctx.target_cpus) / target,
            generator_busy_share=generator_busy / (generator_cores * capacity_us),
        )


def _persistent(config: Mapping[str, Any]) -> bool:
    """Connections that live the whole run (a client closing idle ones holds fewer by design)."""
    return config["transport"] != "udp" and _forever(config.get("lifetime")) and config.get("idle_timeout_ms") is None


def _disagrees(agreement: float | None) -> bool:
    """The engine's and the target's counts of answers disagree (their ratio, smaller ÷ larger)."""
    return agreement is not None and agreement < V.MIN_ANSWER_AGREEMENT


def _mean_active(records: Sequence[Mapping[str, Any]]) -> float:
    """Open connections as each measured interval ends, on average; the last interval ends as
    slots close at the end of sending, so it is left out when there are others."""
    levels = [r["connections"]["active"] for r in records if r["type"] == "interval" and r["phase"] == "measure"]
    levels = levels[:-1] if len(levels) > 1 else levels
    return float(sum(levels) / max(len(levels), 1))


def _generator_cpu(
    window: MeterSummary,
    samples: Sequence[meter_summary.Record],
    span: tuple[float, float],
    m: Mapping[str, Any],
    ctx: SummaryContext,
) -> tuple[float | None, bool, int]:
    """The generator's CPU-µs over the window, whether the meter saw its process in the window
    (``span``; an idle generator may well use less than a clock tick: 0 µs is then a
    measurement, not a gap), and its cores; on cluster workers, the engines' own accounting."""
    if ctx.generator_cores is not None:
        return float(m["engine"]["cpu_user_us"] + m["engine"]["cpu_system_us"]), True, ctx.generator_cores
    user, system = window["generator_cpu_user_us"], window["generator_cpu_system_us"]
    seen = any(
        (meter_summary.value_at(r, ("generator", "processes")) or 0) > 0
        for r in samples
        if r.get("type") == "fast" and span[0] <= meter_summary.sample_time(r) <= span[1]
    )
    return (user + system if user is not None and system is not None else None), seen, len(ctx.generator_cpus)


def _connections_held(window: MeterSummary, baseline: MeterSummary, transport: str, active: float) -> float | None:
    """Connections the target held, counted on its side (its sockets on its ports, from ss in
    its namespace) less those it held idle (its listeners). A QUIC server keeps no socket per
    connection (one UDP socket holds them all): there, the engine's count of open connections."""
    if transport in QUIC_TRANSPORTS:
        return active
    now, idle = window["sockets_mean"], baseline["sockets_mean"]
    return now - idle if now is not None and idle is not None else None


def _per_connection(
    window: MeterSummary,
    baseline: MeterSummary,
    level: Literal["rss_bytes_mean", "cgroup_kernel_bytes_mean", "tcp_bytes_mean", "socket_buffer_bytes_mean"],
    active: float,
) -> float | None:
    """Memory per open connection: the window's mean above the idle baseline's."""
    now, idle = window[level], baseline[level]
    return (now - idle) / active if active >= 1 and now is not None and idle is not None else None


def _cpu_unresolved(samples: Sequence[meter_summary.Record], window: MeterSummary) -> bool:
    """A CPU time read in clock ticks (no cgroup total) that is a few ticks at most: below the
    meter's resolution (flagged, and no energy is modelled from it)."""
    clk_tck = next(
        (tck for r in samples if r.get("type") == "header" and (tck := meter_summary.value_at(r, ("clk_tck",)))), 100.0
    )
    cpu_us = window["cpu_us"]
    return cpu_us is not None and window["cgroup_cpu_total_us"] is None and cpu_us < V.MIN_CPU_TICKS * 1e6 / clk_tck


def _energy_marginal(
    window: MeterSummary, baseline: MeterSummary, seconds: float, cpu_us: float | None
) -> float | None:
    """Energy above idle over the window: RAPL's, less the baseline's power; else modelled from
    the target's CPU time (``cpu_us``: None when unresolved)."""
    energy_j, idle_j = window["energy_j"], baseline["energy_j"]
    if window["energy_source"] == "rapl" and energy_j is not None and idle_j is not None:
        idle_w = idle_j / baseline["duration_s"] if baseline["duration_s"] > 0 else 0.0
        return max(0.0, energy_j - idle_w * seconds)
    if cpu_us is not None:
        return CpuPowerModel(include_idle=False).energy_j(int(cpu_us), seconds, 0)
    return None


def _cache_hit_ratio(counters: CounterDelta, ctx: SummaryContext) -> float | None:
    """The target's own cache-hit ratio over the trial when it counted enough queries, else the
    one measured after the fill."""
    hits, queries = counters.delta("cache_hits"), counters.delta("queries")
    if hits is not None and queries is not None and queries >= V.MIN_HIT_QUERIES:
        return hits / queries
    return ctx.cache_hit_ratio


def _loss(records: Sequence[Mapping[str, Any]], m: Mapping[str, Any], closed_loop: bool) -> float | None:
    """The window's share of queries lost. What the window answered is what was in flight as it
    began (the engine's gauge at the end of the last warm-up interval) and what it offered, less
    what is still in flight as it ends, less what was lost. In an open loop, of those in flight
    at its end, the ones the drain answered were not lost; the others (timed out in the drain)
    were. (An open loop's queue growing in the window is not loss: the CI here once saw 30 of
    1 999 queries in flight at the end of unbound's window, all answered in the drain.) A closed
    loop keeps its earlier rule, every query in flight at the end not lost: its drain's timeouts
    are mostly the run's first burst, lost before the window. 16 UDP sockets x 64 queries sent at
    once to dnsdist 1.7.3: 830 timed out, each the timeout (2 s) after the run began, so sent in
    its first instant (with a 2 s run, in the drain or the window's last interval), and the
    kernel's RcvbufErrors in the bed's namespace rose by as many. The same 829-831 in every such
    reference of docs/versions-run whatever the target, none where the target sets a larger
    receive buffer (test_docs_numbers recomputes them); references now keep 8 outstanding per
    socket (plan.REFERENCE_KNOBS)."""
    offered, answered = m["queries"]["offered"], m["queries"]["answered"]
    if not offered:
        return None
    if closed_loop:
        return float(max(0.0, 1 - (answered + m["queries"].get("in_flight", 0)) / offered))
    phases = [r for r in records if r["type"] == "interval"]
    warmup = [r for r in phases if r["phase"] == "warmup"]
    before = warmup[-1]["queries"]["in_flight"] if warmup else 0
    drained = sum(r["queries"]["answered"] for r in phases if r["phase"] == "drain")
    late = min(m["queries"].get("in_flight", 0), drained)
    return float(max(0.0, (before + offered - late - answered) / offered))


def _overflows(window: MeterSummary, m: Mapping[str, Any], transport: str) -> tuple[int | None, float | None]:
    """Connection attempts the kernel dropped at the target's full accept queue in the window
    (its namespace's ListenOverflows, sampled by the meter), and their share of those the
    engine opened (connected transports)."""
    dropped = window["counters"].get("tcpext_listen_overflows")
    overflows = round(dropped) if dropped is not None else None
    opened = m["connections"].get("opened")
    if overflows is None or opened is None or transport == "udp":
        return overflows, None
    return overflows, overflows / max(opened, 1)


def _scheduled(start: Mapping[str, Any], seconds: float, offered: int) -> tuple[float | None, bool]:
    """The queries the schedule, as configured, had due in the window (an open loop's; a
    population's, its classes' rates summed when each is one), and whether the engine offered
    other than that: an observer of its own kept-up verdict. Offering more than scheduled is
    falling behind too: queries due before the window (held back by the in-flight limit while
    queries timed out, or while connections were still opening) were sent in it, so it carried
    more than its rate and their queueing. Poisson arrivals may stray by their own spread
    (``POISSON_SIGMAS`` standard deviations)."""
    config = start["config"]
    rate = config.get("rate")
    if start.get("classes"):
        rates = [c["config"].get("rate") for c in start["classes"]]
        rate = sum(rates) if all(isinstance(r, int | float) for r in rates) else None
    scheduled = rate * seconds if isinstance(rate, (int, float)) else None
    if scheduled is None:
        return None, False
    spread = V.POISSON_SIGMAS * scheduled**0.5 if config.get("arrival") == "poisson" else 0.0
    return scheduled, abs(offered - scheduled) > max(V.MAX_LOSS * scheduled, spread) + 1


def _wakeups(window: MeterSummary, cpus: Sequence[int]) -> tuple[float | None, float | None, float | None]:
    """What may explain a cost per query that falls with load, over the window as target CPU
    is read: the target's wake-ups (voluntary context switches), the times its threads ran,
    and the softirq time of its cores (``/proc/stat``; a core missing, none)
    (``docs/metering.md``, "Wake-ups")."""
    cores = [window["cores"].get(str(c), {}).get("softirq_us") for c in cpus]
    softirq_us = sum(c for c in cores if c is not None) if cores and None not in cores else None
    return window.get("voluntary_ctxt_switches"), window.get("sched_runs"), softirq_us


def _per(value: float | None, n: float) -> float | None:
    return value / n if value is not None and n else None


def _wire(total: Mapping[str, Any]) -> Wire | None:
    """The engine's whole-run traffic (:class:`Wire`), None when its record has none."""
    traffic, connections = total.get("traffic"), total.get("connections")
    if not isinstance(traffic, Mapping) or not isinstance(connections, Mapping):
        return None
    return {
        "queries_answered": int(total["queries"]["answered"]),
        "connections_established": int(connections["established"]),
        "packets_sent": int(traffic["packets_sent"]),
        "packets_received": int(traffic["packets_received"]),
        "bytes_sent": int(traffic["bytes_sent"]),
        "bytes_received": int(traffic["bytes_received"]),
    }


def _population(
    records: Sequence[Mapping[str, Any]],
    counters: CounterDelta,
    ctx: SummaryContext,
    seconds: float,
) -> tuple[list[ClassResult], dict[str, TransportAgreement]]:
    """A population's trial (the engine's ``classes``): each class as the engine counted it
    (its connection-seconds as the trial's: its open connections as each measured interval
    ends, the last left out), and each transport's answers over the whole run beside the
    target's own count of the queries it received on it (where it keeps one). Empty for a
    trial of one class."""
    start, summ = next(r for r in records if r["type"] == "start"), records[-1]
    configs = {c["name"]: c["config"] for c in start.get("classes", [])}
    levels: dict[str, list[int]] = {}
    for r in records:
        if r["type"] == "interval" and r["phase"] == "measure":
            for c in r.get("classes", []):
                levels.setdefault(c["name"], []).append(c["connections"]["active"])
    classes: list[ClassResult] = []
    answered: dict[str, int] = {}
    for c in summ.get("classes", []):
        m, config = c["measured"], configs.get(c["name"], {})
        held = levels.get(c["name"], [0])
        held = held[:-1] if len(held) > 1 else held
        rate = config.get("rate")
        classes.append(
            {
                "name": c["name"],
                "transport": c["transport"],
                "clients": config.get("clients"),
                "connections": int(config.get("connections", 0)),
                "rate_qps": float(rate) if isinstance(rate, int | float) else None,
                "answered_qps": m["queries"]["answered"] / seconds,
                "queries_offered": m["queries"]["offered"],
                "queries_answered": m["queries"]["answered"],
                "queries_answered_total": c["total"]["queries"]["answered"],
                "latency_p50_us": m["latency"]["p50_us"],
                "latency_p99_us": m["latency"]["p99_us"],
                "connections_opened": m["connections"]["opened"],
                "connections_established": m["connections"]["established"],
                "connection_seconds": sum(held) / len(held) * seconds,
                "handshakes_full": m["handshakes"]["full"],
                "handshakes_resumed": m["handshakes"]["resumed"],
                "engine_cpu_us": m["engine"]["cpu_user_us"] + m["engine"]["cpu_system_us"],
            }
        )
        answered[c["transport"]] = answered.get(c["transport"], 0) + c["total"]["queries"]["answered"]
    transports: dict[str, TransportAgreement] = {}
    for t, n in answered.items():
        key = ctx.transport_counters.get(t)
        target = counters.raw_delta(key) if key is not None else None
        agreement = min(n, target) / max(n, target) if target else None
        transports[t] = {"engine_answered": n, "target_queries": target, "agreement": agreement}
    return classes, transports
