"""The validity policy as a unit: hand-made engine records and meter samples, each flag raised
by exactly the condition it names, and nothing missing ever taken as zero."""

from __future__ import annotations

from typing import Any

import pytest
from dnscost import validity as V
from dnscost.trial_summary import CounterDelta, SummaryContext, summarize_trial

SECONDS = 2.0
CTX = SummaryContext(
    sampler_start_unix_ms=0.0, baseline_s=0.5, cache_hit_ratio=1.0, target_cpus=(0,), generator_cpus=(1,)
)


def _records(
    *,
    answered: int = 20_000,
    offered: int = 20_000,
    kept_up: bool = True,
    rate: Any = "max",
    balanced: bool = True,
    in_flight: int = 0,
    drained: int | None = None,
    before: int = 0,
    arrival: str | None = None,
) -> list[dict[str, Any]]:
    """An engine run's records: ``in_flight`` queries outstanding as the window ends, of which
    the drain answers ``drained`` (all, by default), and ``before`` as it begins."""
    percentiles = {k: 100 for k in ("p50_us", "p90_us", "p99_us", "p999_us", "max_us")}
    measured = {
        "queries": {"answered": answered, "offered": offered, "in_flight": in_flight},
        "connections": {"established": 4},
        "handshakes": {"full": 0, "resumed": 0},
        "engine": {"offered_qps": offered / SECONDS, "cpu_user_us": 1_000_000, "cpu_system_us": 500_000},
        "latency": percentiles,
        "setup_latency": percentiles,
    }
    config = {"transport": "tcp", "connections": 4, "rate": rate, "lifetime": None}
    if arrival is not None:
        config["arrival"] = arrival
    interval = {"type": "interval", "phase": "measure", "connections": {"active": 4}}
    warmup = {"type": "interval", "phase": "warmup", "queries": {"in_flight": before}}
    drain = {"type": "interval", "phase": "drain", "queries": {"answered": in_flight if drained is None else drained}}
    return [
        {"type": "start", "config": config, "started_unix_ms": 1000.0},
        warmup,
        interval,
        interval,
        drain,
        {
            "type": "summary",
            "measured": measured,
            "measure_start_ms": 0,
            "measure_end_ms": int(SECONDS * 1000),
            "total": {"queries": {"answered": answered}},
            "generator_kept_up": kept_up,
            "accounting": {"balanced": balanced},
            "answered_qps": answered / SECONDS,
        },
    ]


def _samples(
    *,
    target_busy: float,
    generator_busy: float,
    target_cpu: bool = True,
    generator: bool = True,
    every_ms: int = 100,
    foreign: float = 0.0,
    tasks: tuple[float, float] | None = None,
    overflows_per_s: float | None = None,
    stolen: float = 0.0,
) -> list[dict[str, Any]]:
    """Fast samples from 0 to 3.5 s; the target's and the generator's cores busy the given
    shares of each interval, the target's cgroup using all of its core's busy time but
    ``foreign`` (another process's), and ``stolen`` of the target's core's time the
    hypervisor's (its steal time)."""
    out = []
    for t in range(0, 3501, every_ms):
        us = t * 1000
        cores = [
            {
                "cpu": 0,
                "user_us": us * target_busy,
                "idle_us": us * (1 - target_busy - stolen),
                "steal_us": us * stolen,
            },
            {"cpu": 1, "user_us": us * generator_busy, "idle_us": us * (1 - generator_busy)},
        ]
        if tasks is not None:  # the run time of every task on each core, as cpuacct gives it
            for core, share in zip(cores, tasks, strict=True):
                core["tasks_us"] = us * share
        target: dict[str, Any] = {"rss_bytes": 1e6}
        extra: dict[str, Any] = {}
        if overflows_per_s is not None:  # the kernel's ListenOverflows in the target's namespace
            extra["tcpext"] = {"ListenOverflows": 7_000 + round(overflows_per_s * t / 1000)}
        if target_cpu:
            target["cgroup_cpu_total_us"] = us * (target_busy - foreign)
        out.append(
            {
                "type": "fast",
                "t_ms": t,
                "target": target,
                "cores": cores,
                **extra,
                "generator": {
                    "cpu_user_us": us * generator_busy if generator else 0,
                    "cpu_system_us": 0,
                    "processes": 1 if generator else 0,
                },
            }
        )
    return out


COUNTERS = CounterDelta(answers=(0, 20_000), queries=(0, 20_000), cache_hits=(0, 20_000))


def _flags(records: list[dict[str, Any]], samples: list[dict[str, Any]], **kw: Any) -> list[str]:
    s = summarize_trial(records, samples, kw.pop("counters", COUNTERS), kw.pop("ctx", CTX))
    assert s["validity"]["valid"] == (not s["validity"]["flags"])
    return list(s["validity"]["flags"])


def test_a_clean_trial_is_valid_and_costs_what_was_metered() -> None:
    s = summarize_trial(_records(), _samples(target_busy=0.5, generator_busy=0.4), COUNTERS, CTX)
    assert s["validity"]["flags"] == []
    # 0.5 of a core for 2 s over 20 000 answers; the generator 0.4.
    assert s["target_cpu_us_per_query"] == pytest.approx(50.0)
    assert s["generator_cpu_us_per_query"] == pytest.approx(40.0)
    assert s["engine_cpu_us"] == 1_500_000


@pytest.mark.parametrize(
    ("kept_up", "target_busy", "generator_busy", "flagged", "both"),
    [
        (False, 0.5, 0.5, True, False),  # the engine fell behind, the target had headroom
        (True, 0.5, 0.95, True, False),  # the generator's core was saturated, the target's not
        (False, 0.95, 0.95, False, True),  # both saturated: the target's capacity was measured
        (True, 0.95, 0.5, False, False),  # the target saturated: its capacity
    ],
)
def test_generator_bound_is_judged_per_side(
    kept_up: bool, target_busy: float, generator_busy: float, flagged: bool, both: bool
) -> None:
    s = summarize_trial(
        _records(kept_up=kept_up), _samples(target_busy=target_busy, generator_busy=generator_busy), COUNTERS, CTX
    )
    assert ("generator-bound" in s["validity"]["flags"]) is flagged
    assert s["validity"]["both_saturated"] is both


def test_an_open_loop_shortfall_is_seen_whatever_the_engine_says() -> None:
    # 100 000 qps asked for 2 s, 20 000 offered: the engine claims it kept up.
    flags = _flags(_records(rate=100_000.0, kept_up=True), _samples(target_busy=0.3, generator_busy=0.3))
    assert "generator-bound" in flags
    assert _flags(_records(rate=10_000.0), _samples(target_busy=0.3, generator_busy=0.3)) == []
    # 8 000 qps asked, 10 000 offered: a backlog from before the window was sent in it.
    flags = _flags(_records(rate=8_000.0, kept_up=True), _samples(target_busy=0.3, generator_busy=0.3))
    assert "generator-bound" in flags
    assert _flags(_records(rate=9_950.0), _samples(target_busy=0.3, generator_busy=0.3)) == []


def test_poisson_arrivals_are_on_schedule_within_their_own_spread() -> None:
    """19 560 queries due in 2 s at 9 780 qps, 20 000 offered (2.2 %): 3.1 standard deviations
    of a Poisson count (140), the schedule kept; with constant arrivals the same 2.2 % is a
    missed schedule. 5 standard deviations off (19 300 due) is off schedule, Poisson or not."""
    samples = _samples(target_busy=0.3, generator_busy=0.3)
    assert _flags(_records(rate=9_780.0, arrival="poisson"), samples) == []
    assert "generator-bound" in _flags(_records(rate=9_780.0), samples)
    assert "generator-bound" in _flags(_records(rate=9_650.0, arrival="poisson"), samples)


def test_loss_at_the_threshold_invalidates() -> None:
    at = int(20_000 * (1 - V.MAX_LOSS))
    assert "loss" in _flags(_records(answered=at), _samples(target_busy=0.5, generator_busy=0.5))
    assert "loss" not in _flags(_records(answered=at + 2), _samples(target_busy=0.5, generator_busy=0.5))


def test_a_target_core_shared_with_another_process_invalidates_load_trials() -> None:
    shared = _samples(target_busy=1.0, generator_busy=0.5, foreign=0.3)
    s = summarize_trial(_records(), shared, COUNTERS, CTX)
    assert s["validity"]["flags"] == ["target-core-shared"]
    assert s["validity"]["target_foreign_share"] == pytest.approx(0.3, abs=0.01)
    assert "target-core-shared" not in _flags(_records(), _samples(target_busy=1.0, generator_busy=0.5, foreign=0.05))
    # An idle trial (one query per connection, then nothing) measures memory: not judged.
    idle = _records()
    idle[0]["config"]["rate"] = "once"
    assert "target-core-shared" not in _flags(idle, shared)


def test_a_target_core_the_hypervisor_took_invalidates_load_trials() -> None:
    # The host ran another machine on the target's core 40 % of the window: the target could
    # not run then, and what the trial measured was the host's contention.
    stolen = _samples(target_busy=0.5, generator_busy=0.5, stolen=0.4)
    v = summarize_trial(_records(), stolen, COUNTERS, CTX)["validity"]
    assert v["flags"] == ["cores-stolen"]
    assert v["target_stolen_share"] == pytest.approx(0.4, abs=0.01)
    assert _flags(_records(), _samples(target_busy=0.5, generator_busy=0.5, stolen=V.MAX_STOLEN - 0.05)) == []
    # An idle trial measures memory: not judged.
    idle = _records()
    idle[0]["config"]["rate"] = "once"
    assert "cores-stolen" not in _flags(idle, stolen)


def test_a_core_s_busy_time_is_its_tasks_run_time_where_the_kernel_gives_it() -> None:
    # /proc/stat says the target's core was 90 % busy, the target's cgroup used 50 % of it: the
    # tasks on that core ran 52 % of the time, so nothing else shared it and it was not saturated.
    part_time = _samples(target_busy=0.9, generator_busy=0.3, foreign=0.4, tasks=(0.52, 0.3))
    v = summarize_trial(_records(), part_time, COUNTERS, CTX)["validity"]
    assert v["flags"] == [] and v["core_time_source"] == "tasks"
    assert v["target_foreign_share"] == pytest.approx(0.02, abs=0.005)
    assert v["target_busy_share"] == pytest.approx(0.52, abs=0.01) and not v["target_saturated"]
    # Without it, /proc/stat is all there is.
    v = summarize_trial(_records(), _samples(target_busy=0.9, generator_busy=0.3, foreign=0.4), COUNTERS, CTX)[
        "validity"
    ]
    assert v["flags"] == ["target-core-shared"] and v["core_time_source"] == "proc-stat"
    # Another process on the target's core still shows, in the tasks' run time.
    shared = _samples(target_busy=0.9, generator_busy=0.3, foreign=0.4, tasks=(0.9, 0.3))
    assert _flags(_records(), shared) == ["target-core-shared"]


def test_queries_in_flight_as_a_closed_loop_window_ends_are_not_lost() -> None:
    # 1 % short of the offered queries, but as many still in flight when the window ended and
    # answered in the drain: not lost, in a closed loop or an open one (whose queue grew).
    samples = _samples(target_busy=0.5, generator_busy=0.5)
    assert "loss" not in _flags(_records(answered=19_790, in_flight=210), samples)
    assert "loss" not in _flags(_records(answered=19_790, in_flight=210, rate=20_000.0), samples)
    # Those in flight that the drain did not answer were lost; so were those never sent back.
    assert "loss" in _flags(_records(answered=19_790, in_flight=210, drained=0, rate=20_000.0), samples)
    assert "loss" in _flags(_records(answered=19_790, in_flight=10), samples)
    # Answers in the window to queries in flight as it began are not the window's offered ones.
    assert "loss" in _flags(_records(answered=20_000, before=210, rate=20_000.0), samples)
    assert "loss" not in _flags(_records(answered=20_000, before=0, rate=20_000.0), samples)
    # A closed loop keeps its rule: in flight at the end is not lost, drained or not.
    assert "loss" not in _flags(_records(answered=19_790, in_flight=210, drained=0), samples)


def test_missing_data_is_never_zero() -> None:
    s = summarize_trial(_records(), _samples(target_busy=0.5, generator_busy=0.5, target_cpu=False), COUNTERS, CTX)
    assert s["target_cpu_us"] is None and s["target_cpu_us_per_query"] is None
    assert "no-cpu-data" in s["validity"]["flags"]
    assert "no-generator-cpu" in _flags(_records(), _samples(target_busy=0.5, generator_busy=0.5, generator=False))
    # An idle generator that used no measurable CPU was still metered.
    assert "no-generator-cpu" not in _flags(_records(), _samples(target_busy=0.5, generator_busy=0.0))
    none = CounterDelta()
    assert "no-counters" in _flags(_records(), _samples(target_busy=0.5, generator_busy=0.5), counters=none)
    builtin = SummaryContext(**{**CTX.to_dict(), "target_keeps_counters": False})  # type: ignore[arg-type]
    assert _flags(_records(), _samples(target_busy=0.5, generator_busy=0.5), counters=none, ctx=builtin) == []


def test_gaps_in_the_meter_invalidate() -> None:
    assert "meter-gaps" in _flags(_records(), _samples(target_busy=0.5, generator_busy=0.5, every_ms=500))


def test_disagreeing_answer_counts_and_a_cold_cache_invalidate() -> None:
    mismatch = CounterDelta(answers=(0, 19_000), queries=(0, 20_000), cache_hits=(0, 20_000))
    assert "answer-mismatch" in _flags(_records(), _samples(target_busy=0.5, generator_busy=0.5), counters=mismatch)
    cold = CounterDelta(answers=(0, 20_000), queries=(0, 20_000), cache_hits=(0, 19_000))
    assert "cold-cache" in _flags(_records(), _samples(target_busy=0.5, generator_busy=0.5), counters=cold)
    # A memory trial does not fill the cache: its one query per connection is not judged on it.
    unfilled = SummaryContext(**{**CTX.to_dict(), "cache_filled": False})  # type: ignore[arg-type]
    assert _flags(_records(), _samples(target_busy=0.5, generator_busy=0.5), counters=cold, ctx=unfilled) == []


def test_connection_attempts_dropped_at_a_full_accept_queue_invalidate_an_unsaturated_trial() -> None:
    records = _records()
    records[-1]["measured"]["connections"]["opened"] = 1000  # in the 2 s window

    def flags(per_s: float, target_busy: float) -> list[str]:
        return _flags(records, _samples(target_busy=target_busy, generator_busy=0.5, overflows_per_s=per_s))

    assert flags(4, 0.5) == []  # 8 of 1000
    assert flags(5, 0.5) == ["listen-overflow"]  # 10 of 1000: the queue set the pace
    assert flags(200, 1.0) == []  # the target saturated: it could not accept more; a result
    v = summarize_trial(records, _samples(target_busy=1.0, generator_busy=0.5, overflows_per_s=200), COUNTERS, CTX)
    assert v["validity"]["listen_overflows"] == 400 and v["validity"]["listen_overflow_share"] == 0.4
    # Not sampled (an older record, a kernel without the counter): no judgement, never 0.
    assert _flags(records, _samples(target_busy=0.5, generator_busy=0.5)) == []


def test_every_flag_is_documented() -> None:
    from pathlib import Path

    docs = (Path(__file__).parents[2] / "docs" / "results.md").read_text()
    for flag in V.FLAGS:
        assert f"| `{flag}` |" in docs, flag


def _search(target_qps: float, generator_qps: float, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """runner.search against a simulated target that loses queries above ``target_qps`` and a
    generator that falls behind above ``generator_qps``."""
    from pathlib import Path

    from dnscost import runner
    from dnscost.plan import TrialPlan
    from dnscost.trial import LoadSettings

    def measure(bed: Any, s: LoadSettings, trial_dir: Path, *, cache_hit_ratio: float | None) -> dict[str, Any]:
        rate = s.engine["rate"]
        validity = {"loss": 0.0 if rate <= target_qps else 0.05, "accounting_balanced": True}
        validity["generator_kept_up"] = rate <= generator_qps
        return {"engine_config": s.engine, "summary": {"validity": {**validity, "flags": [], "valid": True}}}

    monkeypatch.setattr(runner, "measure", measure)
    params = {
        "connections": 16, "in_flight": 256, "duration_s": 1, "warmup_s": 0, "timeout_s": 1, "start_qps": 50_000,
        "max_qps": 2_000_000, "max_loss": 0.01, "precision": 0.05, "max_steps": 20,
    }  # fmt: skip
    t = TrialPlan("b", "baseline", "search", "builtin", "udp", params, 0)
    return runner.search(None, LoadSettings("builtin", "udp"), t, Path("/nonexistent"), None)  # type: ignore[arg-type]


def test_the_udp_search_finds_the_target_s_limit_below_the_generator_s(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _search(150_000, 400_000, monkeypatch)
    assert 0.95 * 150_000 <= out["search"]["max_qps"] <= 150_000
    assert not out["search"]["generator_bound"] and out["summary"]["validity"]["flags"] == []


def test_a_udp_search_limited_by_the_generator_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _search(400_000, 120_000, monkeypatch)
    # It still bisects to the highest rate the generator could offer, and says it measured that.
    assert 0.95 * 120_000 <= out["search"]["max_qps"] <= 120_000
    assert out["search"]["generator_bound"]
    assert "generator-bound-search" in out["summary"]["validity"]["flags"]


def _proc_samples(cpu_share: float, *, header: bool = True) -> list[dict[str, Any]]:
    """As :func:`_samples`, the target metered from ``/proc`` (no cgroup total): its CPU time
    ``cpu_share`` of a core, read as ``/proc/PID/stat`` gives it, in whole 10 ms ticks."""
    out: list[dict[str, Any]] = [{"type": "header", "clk_tck": 100}] if header else []
    for s in _samples(target_busy=0.5, generator_busy=0.5, target_cpu=False):
        ticks = int(s["t_ms"] * 1000 * cpu_share) // 10_000
        s["target"].update(proc_cpu_user_us=ticks * 10_000, proc_cpu_system_us=0)
        out.append(s)
    return out


def test_cpu_below_the_meter_s_ticks_is_unresolved_not_zero() -> None:
    # 100 qps on a server that spends 20 µs each: 4 ms in the 2 s window, under one tick.
    s = summarize_trial(_records(answered=200, offered=200, rate=100), _proc_samples(0.002), COUNTERS, CTX)
    assert s["meter"]["cpu_source"] == "proc" and s["target_cpu_us"] == 0
    assert "cpu-unresolved" in s["validity"]["flags"] and s["energy_marginal_j"] is None
    # 4 ticks in the window: still unresolved; 6 ticks: measured.
    assert "cpu-unresolved" in _flags(_records(), _proc_samples(0.02))
    assert "cpu-unresolved" not in _flags(_records(), _proc_samples(0.03))
    assert "cpu-unresolved" not in _flags(_records(), _proc_samples(0.03, header=False))  # USER_HZ 100
    # A cgroup's total has no tick: a small CPU time is measured; an idle trial measures memory.
    assert "cpu-unresolved" not in _flags(_records(), _samples(target_busy=0.001, generator_busy=0.5))
    assert "cpu-unresolved" not in _flags(_records(rate="once"), _proc_samples(0.0))


def test_a_quic_server_s_connections_are_the_engine_s_count() -> None:
    """A QUIC server holds every connection on one UDP socket, so the kernel's count of its
    sockets says nothing of them (an idle DoQ trial's memory fit had no connections to divide by):
    for doq and doh3 the connections held are those the engine kept open; for tcp the target's
    sockets (none in these samples: unknown, not zero)."""
    samples = _samples(target_busy=0.5, generator_busy=0.5)
    for transport, held in (("doq", 4), ("doh3", 4), ("tcp", None)):
        records = _records()
        records[0]["config"]["transport"] = transport
        assert summarize_trial(records, samples, COUNTERS, CTX)["connections_held"] == held, transport


def test_wake_ups_runs_and_softirq_time_per_query_and_per_second() -> None:
    """The target's voluntary context switches, schedstat runs and its cores' softirq time
    over the window, per answered query and per second; none where the meter did not sample
    them (a trial metered before they were), never zero."""
    samples = _samples(target_busy=0.5, generator_busy=0.4)
    for r in samples:
        seconds = r["t_ms"] / 1000
        r["target"].update(voluntary_ctxt_switches=7 + round(5_000 * seconds), sched_runs=round(6_000 * seconds))
        r["cores"][0]["softirq_us"] = 50_000 * seconds  # 5 % of the target's core
        r["cores"][1]["softirq_us"] = 900_000 * seconds  # the generator's: not the target's
    s = summarize_trial(_records(), samples, COUNTERS, CTX)
    # 2 s, 20 000 answers: 10 000 wake-ups, 12 000 runs, 100 ms of softirq on core 0
    assert s["wakeups_per_query"] == pytest.approx(0.5) and s["wakeups_per_s"] == pytest.approx(5_000)
    assert s["runs_per_query"] == pytest.approx(0.6) and s["runs_per_s"] == pytest.approx(6_000)
    assert s["softirq_us_per_query"] == pytest.approx(5.0) and s["softirq_us_per_s"] == pytest.approx(50_000)
    assert s["meter"]["voluntary_ctxt_switches"] == pytest.approx(10_000)
    old = summarize_trial(_records(), _samples(target_busy=0.5, generator_busy=0.4), COUNTERS, CTX)
    assert [old[k] for k in ("wakeups_per_query", "runs_per_s", "softirq_us_per_query")] == [None, None, None]
