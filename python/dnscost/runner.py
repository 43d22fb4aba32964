"""Runs a plan: trials target by target, each target started once and its cache filled once
(idle trials get a fresh target each, so that memory freed by earlier trials cannot hide the
cost of new connections). Every trial's raw data and ``trial.json`` are written as it runs, and
run.json after each trial, so an interrupted run loses at most the trial in progress and
``--resume`` picks up where it stopped.

Before the first trial, :func:`preflight` checks every target the plan needs (installed,
starts, answers on every transport it will be loaded over), so a missing one stops the run in
seconds. A trial that fails (the target died, the engine failed) is recorded as failed and the
run goes on with a fresh target; a target that fails to start twice in a row has its remaining
trials skipped. A mistake of the user or the machine stops the run.

A trial at a share of capacity (a ``capacity_of`` group) takes its rate from its reference's
``trial.json`` on disk (so a reference run by an earlier invocation counts), records it as
``derived_rate``, and fails at once, with the reason, when the reference failed, was not run or
is invalid.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from dnscost.analysis.load import resummarize, trial_problem
from dnscost.cluster.shares import split_config
from dnscost.contract import EngineConfig, RunStatus, SearchStep, TrialRecord, TrialSummary, Validity
from dnscost.engine import check_config
from dnscost.errors import EngineError, MachineError, TargetError, UsageError
from dnscost.jsonl import loads
from dnscost.machine import check_generator
from dnscost.network import DEFAULT_NETWORK, Network
from dnscost.plan import TrialPlan, capacity_step, engine_knobs, estimate_s, population_replay, share_rate
from dnscost.results import Run, write_json
from dnscost.spec import Spec
from dnscost.targets import locate, served
from dnscost.targets.external import EXTERNAL
from dnscost.targets.place import label_of
from dnscost.transports import DEFAULT_KEY_TYPE, POPULATION
from dnscost.trial import LoadSettings, Testbed, cluster_network, describe_failure, measure, start_bed
from dnscost.validity import SATURATED

if TYPE_CHECKING:
    from dnscost.cluster import Cluster, ClusterSettings

__all__ = [
    "WRITE_ERRNOS",
    "Progress",
    "RunOutcome",
    "check_plan",
    "check_split",
    "default_cpus",
    "execute",
    "external_unserved",
    "open_run_cluster",
    "preflight",
    "run_plan",
    "search",
    "settings_for",
    "tally",
    "write_failure",
]

SHARE_PLACEHOLDER_QPS = 1000.0
"""The rate :func:`check_plan` validates a trial at a share of capacity with (its real rate is
derived when its reference has run)."""

START_ATTEMPTS = 2
"""A target that fails to start this many times in a row has its remaining trials skipped."""


@dataclass
class Progress:
    """Prints ``[k/n] trial ... (about m min left)`` lines to ``stream``."""

    total: int
    stream: Any = sys.stderr
    started: float = 0.0

    def trial(self, k: int, t: TrialPlan, remaining_estimate_s: float, spent_estimate_s: float) -> None:
        if not self.started:
            self.started = time.monotonic()
        elapsed = time.monotonic() - self.started
        scale = elapsed / spent_estimate_s if spent_estimate_s > 30 else 1.0
        left = remaining_estimate_s * max(scale, 0.5)
        print(f"[{k}/{self.total}] {t.id} (about {_minutes(left)} left)", file=self.stream, flush=True)

    def note(self, text: str) -> None:
        print(f"      {text}", file=self.stream, flush=True)


def _minutes(s: float) -> str:
    return f"{s / 60:.0f} min" if s >= 90 else f"{s:.0f} s"


def settings_for(
    spec: Spec,
    t: TrialPlan,
    target_cpus: Sequence[int],
    generator_cpus: Sequence[int],
    network: str = DEFAULT_NETWORK,
) -> LoadSettings:
    if t.kind == "capacity":  # its first step's: each step's settings are made as it comes
        t = capacity_step(t, t.params["start_qps"])
    engine = engine_knobs(t) if t.kind != "search" else {}
    if t.kind != "search":
        engine["threads"] = max(1, min(len(generator_cpus), engine.get("connections", len(generator_cpus))))
    population = None
    if t.transport == POPULATION:
        offered = spec.external.parsed() if t.target == EXTERNAL and spec.external is not None else None
        population = population_replay(spec, t, tuple(offered) if offered is not None else served(t.target))
    return LoadSettings(
        t.target,
        t.transport,
        engine,
        list(target_cpus),
        list(generator_cpus),
        spec.names,
        spec.tld,
        fill=t.kind != "idle",
        baseline_s=t.params["baseline_s"],
        cert_key=t.params.get("cert_key") or DEFAULT_KEY_TYPE,
        network=network,
        external=spec.external if t.target == EXTERNAL else None,
        population=population,
        target_processes=spec.target_processes,
    )


def check_plan(
    spec: Spec,
    plan: Sequence[TrialPlan],
    target_cpus: Sequence[int],
    generator_cpus: Sequence[int],
    network: str = DEFAULT_NETWORK,
    engines: int | None = 1,
) -> None:
    """Has the engine validate every trial's configuration before anything starts: a bad
    knob fails in a second with the spec, the group and the field named. ``engines``: how many
    engines each trial's load is split over (one without a cluster; None: not known yet)."""
    seen: set[str] = set()
    for t in plan:
        if t.reference is not None:  # its rate is known once its reference has run
            t = replace(t, params={**t.params, "rate": SHARE_PLACEHOLDER_QPS})
        s = settings_for(spec, t, target_cpus, generator_cpus, network)
        s.validate()
        if t.kind == "search":
            continue
        check_generator(int(s.engine.get("connections") or 0), engines, f"{spec.origin}: {t.id}")
        config: EngineConfig = {**s.engine, "transport": t.transport, "synthetic": s.names, "tld": s.tld}
        if s.population is not None:
            config = {**s.engine, "synthetic": s.names, "tld": s.tld, "classes": s.population.checkable()}
        key = repr(sorted(config.items()))
        if key not in seen:
            seen.add(key)
            check_config(config, f"{spec.origin}: group {t.group!r}")


def preflight(
    spec: Spec,
    plan: Sequence[TrialPlan],
    workdir: Path,
    *,
    target_cpus: Sequence[int],
    generator_cpus: Sequence[int],
    progress: Progress | None = None,
    network: str = DEFAULT_NETWORK,
) -> dict[str, str]:
    """Checks, before the first trial, every target ``plan`` needs: its binary is installed
    (:class:`MachineError` otherwise, at once), it starts in the ``network`` set-up, and it
    answers on every transport the plan loads it over (:class:`TargetError` otherwise).
    Returns each target's version."""

    needed: dict[str, set[str]] = {}
    for t in plan:
        if t.transport == POPULATION:  # its classes' transports, those the target serves
            needed.setdefault(t.target, set()).update(population_replay(spec, t, served(t.target)).transports())
        else:
            needed.setdefault(t.target, set()).add(t.transport)
    for name in needed:
        if name != EXTERNAL:
            locate(name)
    versions: dict[str, str] = {}
    for name, transports in needed.items():
        net = Network.create(network, target_cpus=target_cpus, generator_cpus=generator_cpus)
        try:
            bed = Testbed.create(
                name,
                workdir / label_of(name),
                target_cpus=target_cpus,
                upstream_cpus=generator_cpus,
                names=spec.names,
                tld=spec.tld,
                transports=sorted(transports),
                network=net,
                external=spec.external if name == EXTERNAL else None,
                processes=spec.target_processes,
            )
        except BaseException:
            net.remove()
            raise
        try:
            bed.target.start()
            versions[name] = bed.target.version()
        except TargetError as e:
            raise TargetError(f"pre-flight check: {describe_failure(e, bed)}") from None
        finally:
            bed.stop()
        if progress is not None:
            progress.note(f"pre-flight: {name} {versions[name]} answers over {', '.join(sorted(transports))}")
    return versions


def next_rate(rate: float, lo: float | None, hi: float | None, max_qps: float, precision: float) -> float | None:
    """A search's next rate after one at ``rate``, given the highest that passed (``lo``) and
    the lowest that failed (``hi``): doubled (up to ``max_qps``) until one fails, halved until
    one passes, then the bracket's middle; None when the search is over (``max_qps`` passed,
    nothing passed down to 1 qps, or the bracket is within ``precision``)."""
    if hi is None:
        return None if rate >= max_qps else min(rate * 2, max_qps)
    if lo is None:
        return hi / 2 if hi / 2 >= 1 else None
    return None if (hi - lo) / lo <= precision else (lo + hi) / 2


def search(
    bed: Testbed,
    s: LoadSettings,
    t: TrialPlan,
    trial_dir: Path,
    cache_hit_ratio: float | None,
    on_step: Callable[[SearchStep], None] = lambda _: None,
    cluster: Cluster | None = None,
) -> TrialRecord:
    """The highest offered UDP rate answered with loss below ``max_loss``: double from
    ``start_qps`` until a step fails, then bisect until the bracket is within ``precision``.
    A step in which the generator fell behind fails too (the generator could not offer that
    rate); when the lowest failed step is such a one, the result measures the generator, not
    the target, and is flagged ``generator-bound-search``."""
    p = t.params
    lo: float | None = None
    hi: float | None = None
    rate = float(p["start_qps"])
    steps: list[SearchStep] = []
    best: TrialRecord | None = None
    generator_bound = False
    for k in range(int(p["max_steps"])):
        engine: EngineConfig = {
            "connections": p["connections"],
            "in_flight": p["in_flight"],
            "rate": rate,
            "duration_ms": round(p["duration_s"] * 1000),
            "warmup_ms": round(p["warmup_s"] * 1000),
            "timeout_ms": round(p["timeout_s"] * 1000),
            "threads": max(1, min(len(s.generator_cpus), p["connections"])),
        }
        step = measure(
            bed,
            replace(s, engine=engine),
            trial_dir / "steps" / f"{k:02d}",
            cache_hit_ratio=cache_hit_ratio,
            **_with_cluster(cluster),
        )
        step_summary = step["summary"]
        assert step_summary is not None  # measure() always summarises
        v = step_summary["validity"]
        loss = v["loss"]
        ok = loss is not None and loss < p["max_loss"] and v["accounting_balanced"]
        behind = not v["generator_kept_up"]
        ok = ok and not behind
        steps.append(
            {"offered_qps": rate, "ok": ok, "loss": loss, "generator_behind": behind, "summary": step["summary"]}
        )
        on_step(steps[-1])
        if ok:
            lo, best = rate, step
        else:
            hi, generator_bound = rate, behind
        nxt = next_rate(rate, lo, hi, p["max_qps"], p["precision"])
        if nxt is None:
            break
        rate = float(round(nxt))
    out: TrialRecord = {
        "steps": steps,
        "search": {
            "max_qps": lo,
            "max_loss": p["max_loss"],
            "offered_qps": lo,
            "failed_qps": hi,
            "generator_bound": generator_bound,
        },
    }
    out["search"]["bracketed"] = hi is not None
    if best is not None:
        out["engine_config"] = best["engine_config"]
        out["summary"] = summary = best["summary"]
        assert summary is not None
        # Without a failing step above it, the result is only a lower bound.
        for flag, bad in (("generator-bound-search", generator_bound), ("search-unbounded", hi is None)):
            if bad:
                summary["validity"]["flags"].append(flag)
                summary["validity"]["valid"] = False
    return out


OBJECTIVE_FLAGS = ("loss", "generator-bound")
"""Flags a capacity step is judged on through its objectives, not as invalid."""
CAPACITY_MAX_STOLEN = 0.05
"""A capacity step that broke an objective with at least this share of a core's time (the
target's or the generator's) stolen by the hypervisor is measured again."""
STOLEN_ATTEMPTS = 3
"""How many times a capacity step is measured at most while its failures come with stolen time."""


def _stolen_share(summary: TrialSummary) -> float:
    """The largest share of the window the hypervisor took from any core of the machine (the
    meter's steal time per core: the target's and the generator's)."""
    seconds = summary.get("measured_s") or 0
    cores = summary.get("meter", {}).get("cores", {})
    steal = [float(c.get("steal_us", 0.0)) for c in cores.values()]
    return max(steal, default=0.0) / (seconds * 1e6) if seconds else 0.0


def _step_failure(v: Validity, p99: float | None, max_loss: float, max_p99_us: float) -> str | None:
    """Why a capacity step fails (None: it met the service level). The generator is the
    bottleneck when its own cores were saturated. Behind its schedule with cores to spare and
    answers slower than the objective, it waited for the target's answers to free the queries in
    flight (knot-resolver over TCP at 40 000 qps: p99 344 ms, the target 75 % busy, the generator
    43 %): the target's limit."""
    loss = v["loss"]
    bound = "generator-bound" in v["flags"]
    other = [f for f in v["flags"] if f not in OBJECTIVE_FLAGS]
    if bound and v["generator_saturated"]:
        return "generator"
    if loss is None or loss > max_loss:
        return "loss"
    if p99 is None or p99 > max_p99_us:
        return "p99"
    if bound:
        return "generator"
    if not v["generator_kept_up"]:  # the target answered too slowly for the queries in flight
        return "in-flight"
    return f"invalid: {','.join(other)}" if other else None


def _measure_again(why: str, stolen_share: float, v: Validity, attempts: int) -> bool:
    """Whether a failed step is measured again at the same rate, its failure maybe not the
    target's limit: one that broke an objective while the hypervisor took a core from the target
    or the generator (a descheduled vCPU adds its time to the answers waiting: 12 to 23 % stolen
    broke a 10 ms p99 at a third of a core, 1 % did not), up to STOLEN_ATTEMPTS times; once, one
    invalid for another reason (a cold cache), or one that broke an objective while the target's
    cores were not saturated (a transient: 14 ms in 2 s at half a core, then 4.5 ms at a higher
    rate). ``attempts``: the times this rate was measured."""
    objective = why in ("loss", "p99", "in-flight")
    stolen = objective and stolen_share >= CAPACITY_MAX_STOLEN
    transient = objective and v["target_busy_share"] < SATURATED
    return (stolen and attempts < STOLEN_ATTEMPTS) or ((why.startswith("invalid") or transient) and attempts < 2)


def capacity(
    bed: Testbed,
    settings_at: Callable[[TrialPlan], LoadSettings],
    t: TrialPlan,
    trial_dir: Path,
    cache_hit_ratio: float | None,
    on_step: Callable[[SearchStep], None] = lambda _: None,
    cluster: Cluster | None = None,
) -> TrialRecord:
    """The highest rate of ``t``'s transport or replayed profile at which the target meets the
    service level: loss at most ``max_loss`` and p99 latency at most ``max_p99_ms``, open loop.
    Doubles from ``start_qps`` until a step fails, then bisects until the bracket is within
    ``precision``. A step fails when the generator was the bottleneck (``generator``: its
    validity flag with its cores saturated, or with the objectives met; the result then
    measures the generator and is flagged ``generator-bound-search``), on the first objective
    it breaks (``loss``, ``p99``), when the
    target answered too slowly for the queries allowed in flight to keep to the schedule
    (``in-flight``), or when it is invalid for another reason (a stolen core, a cold cache:
    measured once more, then ``invalid: FLAGS``). A step that broke an objective while the
    target's cores were not saturated is measured once more too, and fails only if it breaks
    one again. For a profile, a step
    whose clients would need more connections than the group allows is ``capped``: the search
    stops there, a lower bound (``search-unbounded``)."""
    p = t.params
    max_p99_us = p["max_p99_ms"] * 1000
    lo: float | None = None
    hi: float | None = None
    rate = float(p["start_qps"])
    steps: list[SearchStep] = []
    best: TrialRecord | None = None
    failed_why: str | None = None
    attempts: dict[float, int] = {}
    k = 0
    while k < int(p["max_steps"]):
        step_t = capacity_step(t, rate)
        offered = float(step_t.params["rate"])  # type: ignore[arg-type]  # a number: set just above
        capped = offered < 0.99 * rate
        step = measure(
            bed, settings_at(step_t), trial_dir / "steps" / f"{k:02d}", cache_hit_ratio=cache_hit_ratio,
            **_with_cluster(cluster),
        )  # fmt: skip
        k += 1
        summary = step["summary"]
        assert summary is not None  # measure() always summarises
        v = summary["validity"]
        loss, p99 = v["loss"], summary["latency_us"]["p99_us"]
        why = _step_failure(v, p99, p["max_loss"], max_p99_us)
        steps.append(
            {
                "offered_qps": offered,
                "ok": why is None,
                "loss": loss,
                "p99_us": p99,
                "generator_behind": not v["generator_kept_up"],
                "clients": step_t.params.get("clients") if step_t.params.get("profile") else None,
                "failed": why,
                "stolen_share": _stolen_share(summary),
                "summary": summary,
            }
        )
        on_step(steps[-1])
        attempts[offered] = attempts.get(offered, 0) + 1
        if why is not None and _measure_again(why, steps[-1]["stolen_share"], v, attempts[offered]):
            continue
        if why is None:
            lo, best = offered, step
            if capped:
                failed_why = "capped"
                break
        else:
            hi, failed_why = offered, why
        nxt = next_rate(rate, lo, hi, p["max_qps"], p["precision"])
        if nxt is None:
            break
        rate = float(round(nxt, 3))
    out: TrialRecord = {
        "steps": steps,
        "search": {
            "max_qps": lo,
            "max_loss": p["max_loss"],
            "max_p99_ms": p["max_p99_ms"],
            "offered_qps": lo,
            "failed_qps": hi,
            "failed": failed_why,
            "generator_bound": failed_why == "generator",
            "bracketed": hi is not None,
            "clients": (best["engine_config"].get("clients") if best and t.params.get("profile") else None),
        },
    }
    if best is not None:
        out["engine_config"] = best["engine_config"]
        out["summary"] = summary = best["summary"]
        assert summary is not None
        for flag, bad in (("generator-bound-search", failed_why == "generator"), ("search-unbounded", hi is None)):
            if bad:
                summary["validity"]["flags"].append(flag)
                summary["validity"]["valid"] = False
    return out


@dataclass
class _Job:
    """One trial as the loop runs it: what every kind of trial is given."""

    spec: Spec
    plan: TrialPlan
    """The trial as the engine runs it (a share of capacity: at its derived rate)."""
    settings: LoadSettings
    trial_dir: Path
    progress: Progress
    cluster: Cluster | None
    target_cpus: Sequence[int]
    generator_cpus: Sequence[int]
    network: str


def _search_trial(job: _Job, bed: Testbed, info: TrialRecord) -> TrialRecord:
    """A search for the highest rate answered within the loss limit."""

    def step_note(st: SearchStep) -> None:
        loss = st["loss"]
        verdict = "ok" if st["ok"] else "generator behind" if st["generator_behind"] else "over"
        job.progress.note(f"{st['offered_qps']:,.0f} qps offered: loss {100 * (loss or 0):.2f} % ({verdict})")

    t = job.plan
    out = search(bed, job.settings, t, job.trial_dir, info.get("cache_hit_ratio"), step_note, cluster=job.cluster)
    if "summary" not in out:
        raise TargetError(f"{t.target}: no offered rate was answered with loss below the limit")
    return out


def _capacity_trial(job: _Job, bed: Testbed, info: TrialRecord) -> TrialRecord:
    """A search for the highest rate that meets the service level."""

    def capacity_note(st: SearchStep) -> None:
        p99 = st.get("p99_us")
        clients = f" ({st['clients']:,} clients)" if st.get("clients") else ""
        job.progress.note(
            f"{st['offered_qps']:,.0f} qps offered{clients}: loss {100 * (st['loss'] or 0):.2f} %, "
            f"p99 {(p99 or 0) / 1000:.1f} ms ({st.get('failed') or 'ok'})"
        )

    def settings_at(step: TrialPlan) -> LoadSettings:
        return settings_for(job.spec, step, job.target_cpus, job.generator_cpus, job.network)

    t = job.plan
    out = capacity(bed, settings_at, t, job.trial_dir, info.get("cache_hit_ratio"), capacity_note, cluster=job.cluster)
    if "summary" not in out:
        raise TargetError(
            f"{t.target}: no offered rate met the objective (loss at most "
            f"{t.params['max_loss']:.1%}, p99 at most {t.params['max_p99_ms']:g} ms)"
        )
    return out


def _measured_trial(job: _Job, bed: Testbed, info: TrialRecord) -> TrialRecord:
    """A load or idle trial: one measured window."""
    return measure(
        bed,
        job.settings,
        job.trial_dir,
        cache_hit_ratio=info.get("cache_hit_ratio"),
        backlog=info.get("listen_backlog"),
        **_with_cluster(job.cluster),
    )


KINDS: dict[str, Callable[[_Job, Testbed, TrialRecord], TrialRecord]] = {
    "search": _search_trial,
    "capacity": _capacity_trial,
    "load": _measured_trial,
    "idle": _measured_trial,
}
"""How each kind of trial runs, behind one signature: the trial, its bed and what is known of the
bed in, the trial record's measured fields out."""


@dataclass
class _Beds:
    """The beds a run's trials measure against: one shared by consecutive trials of a target and
    certificate key type, started at the first, restarted when either changes or its target died,
    stopped when the loop ends (``with``); and a bed of its own for a trial that must start cold
    (an idle trial, or one of a capture's own names, every name forwarded), stopped after it."""

    run: Run
    cluster: Cluster | None
    shared: Testbed | None = None
    shared_info: TrialRecord | None = None
    shared_key: tuple[str, str] = ("", "")
    started: int = 0

    def __enter__(self) -> _Beds:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop_shared()

    def stop_shared(self) -> None:
        if self.shared is not None:
            self.shared.stop()
            self.shared = None

    def drop_dead(self) -> None:
        """Stops the shared bed if its target died: the next trial starts a fresh one."""
        if self.shared is not None and not self.shared.target.alive():
            self.stop_shared()

    @contextmanager
    def for_trial(self, t: TrialPlan, s: LoadSettings, trial_dir: Path) -> Iterator[tuple[Testbed, TrialRecord]]:
        """The bed of trial ``t`` and what is known of it, started if need be."""
        if t.kind == "idle" or s.any_name():
            own, info = start_bed(s, trial_dir / "bed", fill=False, **bed_network(self.cluster))
            try:
                yield own, info
            finally:
                own.stop()
            return
        if self.shared is not None and (self.shared_key != (t.target, s.cert_key) or not self.shared.target.alive()):
            self.stop_shared()
        if self.shared is None or self.shared_info is None:
            self.started += 1
            name = f"{label_of(t.target)}-{self.started}"
            self.shared, self.shared_info = start_bed(s, self.run.dir / "beds" / name, **bed_network(self.cluster))
            self.shared_key = (t.target, s.cert_key)
            self.shared_info["bed"] = f"beds/{name}"
        yield self.shared, self.shared_info


def _not_to_run(run: Run, t: TrialPlan, progress: Progress, start_failures: dict[str, int]) -> str | None:
    """Why trial ``t`` is not run now (``skipped``: done already; ``not_run``: its target failed
    to start too often), recorded in ``run``; None: run it."""
    if run.done(t.id):
        return "skipped"
    if _done_on_disk(run.trial_dir(t.id)):
        # The run stopped between the trial's last write and run.json's (a disk that filled up,
        # a directory made unwritable): its records are whole, keep them.
        run.set_trial(t.id, "done")
        progress.note(f"{t.id}: done, as its trial.json says; not measured again")
        return "skipped"
    if start_failures.get(t.target, 0) >= START_ATTEMPTS:
        reason = f"not run: {t.target} failed to start {START_ATTEMPTS} times in a row"
        progress.note(f"{t.id}: {reason}")
        run.set_trial(t.id, "not-run", reason)
        return "not_run"
    return None


def _at_derived_rate(run: Run, t: TrialPlan, record: TrialRecord, progress: Progress) -> TrialPlan | None:
    """Trial ``t`` as the engine runs it: at a share of capacity, at the rate derived from its
    reference (read from disk: it may have run in an earlier invocation, ``--resume``) and
    recorded as ``derived_rate``; None, with the record not-run and why, when there is none."""
    if t.reference is None:
        return t
    try:
        record["derived_rate"] = share_rate(t, read_record(run.trial_dir(t.reference)))
    except ValueError as e:
        # Not a failure of this trial: its cell has no valid capacity to take a share of.
        record["status"], record["error"] = "not-run", f"no rate to derive: {e}"
        progress.note(f"not run: {record['error']}")
        return None
    derived = record["derived_rate"]
    progress.note(
        f"{derived['rate_qps']:,.0f} qps offered: {t.params['rate']} of "
        f"{derived['reference_answered_qps']:,.0f} qps answered by {t.reference}"
    )
    return replace(t, params={**t.params, "rate": derived["rate_qps"]})


def run_plan(
    run: Run,
    spec: Spec,
    plan: Sequence[TrialPlan],
    *,
    target_cpus: Sequence[int],
    generator_cpus: Sequence[int],
    progress: Progress | None = None,
    network: str = DEFAULT_NETWORK,
    cluster: Cluster | None = None,
) -> dict[str, int]:
    """Runs every trial of ``plan`` not yet done in ``run``; returns counts by status. With
    ``cluster``, every trial's load is split over its workers and the targets listen where they
    reach them."""
    progress = progress or Progress(len(plan))
    estimates = [estimate_s(t) for t in plan]
    counts = {"done": 0, "failed": 0, "skipped": 0, "not_run": 0}
    start_failures: dict[str, int] = {}
    spent = 0.0
    with _Beds(run, cluster) as beds:
        for k, t in enumerate(plan, 1):
            if (why := _not_to_run(run, t, progress, start_failures)) is not None:
                counts[why] += 1
                continue
            progress.trial(k, t, sum(estimates[k - 1 :]), spent)
            trial_dir = run.trial_dir(t.id)
            trial_dir.mkdir(parents=True, exist_ok=True)
            record: TrialRecord = {
                **t.to_dict(),
                "status": "running",
                "error": None,
                "target_cpus": list(target_cpus),
                "generator_cpus": list(generator_cpus),
            }
            engine_plan = _at_derived_rate(run, t, record, progress)
            if engine_plan is None:
                write_json(trial_dir / "trial.json", record)
                run.set_trial(t.id, "not-run", record["error"])
                counts["not_run"] += 1
                spent += estimates[k - 1]
                continue
            s = settings_for(spec, engine_plan, target_cpus, generator_cpus, network)
            s.validate()
            write_json(trial_dir / "trial.json", record)
            run.set_trial(t.id, "running")
            job = _Job(spec, engine_plan, s, trial_dir, progress, cluster, target_cpus, generator_cpus, network)
            counts[_run_trial(job, t, record, beds, start_failures)] += 1
            spent += estimates[k - 1]
    return counts


def _run_trial(job: _Job, t: TrialPlan, record: TrialRecord, beds: _Beds, start_failures: dict[str, int]) -> str:
    """Runs one trial on its bed and records it, whatever happens; returns ``done`` or
    ``failed``. A target, engine or machine failure while the bed starts counts against the
    target's starts; a failure of the target or the engine while it is measured fails the trial
    (the bed's last words in its error); a machine failure then stops the run with the trial
    still running (``--resume`` runs it again), anything else with it failed or interrupted."""
    starting = True
    try:
        with beds.for_trial(t, job.settings, job.trial_dir) as (bed, info):
            starting = False
            start_failures[t.target] = 0
            beds.run.doc["versions"][t.target] = info.get("target_version", "")
            record.update(info)
            record.pop("target_pid", None)
            write_json(job.trial_dir / "trial.json", record)
            try:
                record.update(KINDS[t.kind](job, bed, info))
            except (TargetError, EngineError) as e:
                record["status"], record["error"] = "failed", describe_failure(e, bed)
            except MachineError:
                raise  # the machine's, not the trial's: the run stops, the trial still running
            except BaseException as e:
                record["status"] = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
                record["error"] = describe_failure(e, bed)
                raise
            else:
                record["status"] = "done"
    except (TargetError, EngineError, MachineError) as e:
        if not starting:
            raise
        record["status"], record["error"] = "failed", describe_failure(e, None)
        start_failures[t.target] = start_failures.get(t.target, 0) + 1
    except BaseException as e:
        if starting:
            record["status"] = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
            record["error"] = describe_failure(e, None)
        raise
    finally:
        write_json(job.trial_dir / "trial.json", record)
        _compress(job.trial_dir / "engine-connections.jsonl", keep=t.kind != "idle")
        beds.run.set_trial(t.id, record["status"], record.get("error"))
    if record["status"] == "done":
        job.progress.note(_one_line(record))
        return "done"
    job.progress.note(f"failed: {record['error']}")
    beds.drop_dead()
    return "failed"


def check_split(
    spec: Spec,
    plan: Sequence[TrialPlan],
    workers: int,
    target_cpus: Sequence[int],
    generator_cpus: Sequence[int],
) -> None:
    """Fails before the first trial, with one line naming it, on a trial whose load cannot be
    split over ``workers`` cluster workers (:func:`dnscost.cluster.shares.split_config`)."""

    for t in plan:
        if t.kind == "search":
            continue
        if t.reference is not None:
            t = replace(t, params={**t.params, "rate": SHARE_PLACEHOLDER_QPS})
        s = settings_for(spec, t, target_cpus, generator_cpus)
        engine = s.engine if s.population is None else {**s.engine, "classes": s.population.checkable()}
        try:
            split_config(engine, workers)
        except UsageError as e:
            raise UsageError(f"{t.id}: {e}") from None
        check_generator(int(s.engine.get("connections") or 0), workers, t.id)


class ClusterArgument(TypedDict, total=False):
    cluster: Cluster


class NetworkArgument(TypedDict, total=False):
    network: Network


def _with_cluster(cluster: Cluster | None) -> ClusterArgument:
    """``measure``'s cluster argument, given only with a cluster (tests stand in for measure)."""
    return {"cluster": cluster} if cluster is not None else {}


def bed_network(cluster: Cluster | None) -> NetworkArgument:
    """``start_bed``'s network argument for a bed loaded by ``cluster``: the cluster's set-up,
    given only with a cluster (without one, the run's own; tests stand in for start_bed)."""
    return {"network": cluster_network(cluster.target_address)} if cluster is not None else {}


def _done_on_disk(trial_dir: Path) -> bool:
    """Whether the trial's own trial.json says it was measured to the end, with its summary."""
    record = read_record(trial_dir)
    return record is not None and record.get("status") == "done" and record.get("summary") is not None


def read_record(trial_dir: Path) -> TrialRecord | None:
    """A trial's ``trial.json``, or None when it was never written (or is unreadable, or not
    shaped as a trial record), with its summary computed again from its raw records, as
    ``dnscost report`` does: a rate derived from it follows the validity of today's analysis,
    not that of the code that measured it."""

    try:
        doc = loads((trial_dir / "trial.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if trial_problem(doc) is not None:
        return None
    record = cast(TrialRecord, doc)
    summary = resummarize(trial_dir, record)
    if summary is not None:
        record["summary"] = summary
    return record


def _compress(path: Path, *, keep: bool) -> None:
    """The per-connection log, gzipped (one query per connection writes tens of MB), or removed."""
    if not path.exists():
        return
    # Not results.write_atomic: the log (tens of MB) is streamed through gzip, not held in memory.
    if keep:  # written aside and renamed: an interrupt leaves the plain log, never a cut .gz
        partial = path.with_name(path.name + ".gz.partial")
        with path.open("rb") as src, gzip.open(partial, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
        partial.replace(path.with_name(path.name + ".gz"))
    path.unlink()


def _one_line(record: TrialRecord) -> str:
    s = record["summary"]
    assert s is not None  # a trial done has its summary
    v = s["validity"]
    parts = [f"{s['answered_qps']:,.0f} qps answered"]
    slots, asked = record.get("engine_config", {}).get("connections"), record.get("params", {}).get("connections")
    if slots and asked and slots < asked:
        parts.append(f"{slots} of {asked} slots (the target's accept queue)")
    if s.get("target_cpu_us_per_query") and record["kind"] != "idle":
        parts.append(f"{s['target_cpu_us_per_query']:.1f} CPU-µs/query")
    if record["kind"] == "idle":
        parts.append(f"{s['mean_active_connections']:,.0f} connections held")
    if (found := record.get("search")) and record["kind"] == "capacity":
        clients = f" ({found['clients']:,} clients)" if found.get("clients") else ""
        parts.insert(
            0,
            f"capacity {found['max_qps']:,.0f} qps{clients} with loss at most {found['max_loss']:.1%} and p99 at most "
            f"{found.get('max_p99_ms', 0):g} ms; the next step broke {found.get('failed') or 'none'}",
        )
    elif found:
        parts.insert(0, f"baseline {found['max_qps']:,.0f} qps")
    parts.append("valid" if v["valid"] else "INVALID: " + ", ".join(v["flags"]))
    return "; ".join(parts)


def default_cpus(
    target_cpus: Sequence[int] | None, generator_cpus: Sequence[int] | None
) -> tuple[list[int], list[int]]:
    """Target on CPU 0 (or as given), generator on every other CPU this process may use."""
    target = list(target_cpus) if target_cpus else [0]
    generator = list(generator_cpus) if generator_cpus else sorted(set(os.sched_getaffinity(0)) - set(target))
    return target, generator


# The run's life: from a planned run to its outcome.


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: the status run.json records, its trials counted, and the invalid ones
    as today's analysis judges their raw records (as ``dnscost report`` does), not as stored
    when measured. ``stopped_by``: the failed write that stopped it (a full or read-only disk,
    a file of the run directory)."""

    status: RunStatus
    planned: int
    done: int
    failed: int
    not_run: int
    invalid: int
    flags: tuple[tuple[str, int], ...]
    """Each validity flag with its count, the commonest first."""
    stopped_by: OSError | None = None

    @property
    def complete(self) -> bool:
        return self.status == "done"

    def line(self) -> str:
        """``60 of 60 trials done, 0 failed; 2 invalid (generator-bound 2)``."""
        text = f"{self.done} of {self.planned} trials done, {self.failed} failed"
        if self.not_run:
            text += f", {self.not_run} not run"
        if self.invalid:
            text += f"; {self.invalid} invalid ({', '.join(f'{f} {n}' for f, n in self.flags)})"
        return text


def tally(run: Run, plan: Sequence[TrialPlan], status: RunStatus, stopped_by: OSError | None = None) -> RunOutcome:
    """The :class:`RunOutcome` of ``run`` as it stands on disk."""
    counts = run.trial_counts()
    flags: Counter[str] = Counter()
    invalid = 0
    for t in plan:
        if not run.done(t.id):
            continue
        doc = read_record(run.trial_dir(t.id))
        summary = doc.get("summary") if doc is not None else None
        validity = summary.get("validity") if summary is not None else None
        if validity is not None and validity.get("valid") is False:
            invalid += 1
            flags.update(validity.get("flags") or [])
    return RunOutcome(
        status,
        len(plan),
        counts.get("done", 0),
        counts.get("failed", 0),
        counts.get("not-run", 0),
        invalid,
        tuple(flags.most_common()),
        stopped_by,
    )


def external_unserved(spec: Spec) -> list[str]:
    """The transports the spec loads the external target over that it has no endpoint for."""
    if spec.external is None:
        return []
    served = spec.external.parsed()
    wanted = {t for g in spec.groups if EXTERNAL in g.runs_on(spec.targets) for t in g.transports}
    return sorted(wanted - set(served))


def open_run_cluster(settings: ClusterSettings, run: Run, generator_cpus: Sequence[int]) -> Cluster:
    """Connects to (for netns:N, starts) the cluster and records its workers in run.json."""
    from dnscost.cluster import open_cluster  # Dask, only for a run with a cluster

    cluster = open_cluster(settings, run.dir / "cluster", cpus=generator_cpus)
    run.doc["cluster"] = dict(cluster.describe())
    return cluster


def execute(
    run: Run,
    spec: Spec,
    plan: Sequence[TrialPlan],
    *,
    target_cpus: Sequence[int],
    generator_cpus: Sequence[int],
    network: str,
    cluster_settings: ClusterSettings | None,
    command: str,
) -> RunOutcome:
    """Runs (or resumes) a planned run to its end: the cluster opened, every target checked
    (:func:`preflight`), the trials not yet done run (:func:`run_plan`), run.json finished.
    A failed write (:func:`write_failure`) ends it ``interrupted``, resumable, with the write
    named; an interrupt or any other error is recorded in run.json and raised. ``command``
    (``run``, ``reproduce``) is how a resume is said."""
    progress = Progress(len(plan))
    print(f"dnscost: {len(plan)} trials of {spec.name} into {run.dir}", file=sys.stderr)
    unserved = external_unserved(spec)
    if unserved:
        progress.note(f"external: no endpoint for {', '.join(unserved)}: their trials are left out")
    run.doc["status"] = "running"
    cluster = None
    try:
        if cluster_settings is not None:
            cluster = open_run_cluster(cluster_settings, run, generator_cpus)
            progress.note(f"cluster {cluster.address}: {len(cluster.workers)} workers, {cluster.generator_cores} cores")
            check_split(spec, plan, len(cluster.workers), target_cpus, generator_cpus)
        remaining = [t for t in plan if not run.done(t.id)]
        preflight(
            spec,
            remaining,
            run.dir / "preflight",
            target_cpus=target_cpus,
            generator_cpus=generator_cpus,
            progress=progress,
            network=network,
        )
        run_plan(
            run,
            spec,
            plan,
            target_cpus=target_cpus,
            generator_cpus=generator_cpus,
            progress=progress,
            network=network,
            cluster=cluster,
        )
    except BaseException as e:
        failed_write = write_failure(e, run.dir)
        if failed_write is not None:
            _stop_on_write_failure(run, failed_write, command)
            return tally(run, plan, "interrupted", failed_write)
        run.finish("interrupted" if isinstance(e, KeyboardInterrupt) else "failed")
        if isinstance(e, KeyboardInterrupt):
            print(f"dnscost: resume with: dnscost {command} --resume {run.dir}", file=sys.stderr)
        raise
    finally:
        if cluster is not None:
            cluster.close()
    counts = run.trial_counts()
    done = counts.get("done", 0)
    # A trial not run because its reference measured no valid capacity is no failure of the run.
    complete = done + counts.get("not-run", 0) == len(plan) and not counts.get("failed")
    status: RunStatus = "done" if complete else "failed" if done == 0 else "incomplete"
    run.finish(status)
    return tally(run, plan, status)


WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})
"""Errors of a write that stop a run wherever they are met: the disk is full or read-only."""


def write_failure(e: BaseException, run_dir: Path) -> OSError | None:
    """The write that stopped a run, when ``e`` is one: an :class:`OSError` on a file of the run
    directory or a full or read-only disk (:data:`WRITE_ERRNOS`). A failed write is often
    followed by another (the trial's record written on the way out): the first is the cause,
    named by the first of the chain that names a file with the same error (a failed ``write``
    names none). None for any other exception."""
    chain: list[OSError] = []
    x: BaseException | None = e
    while isinstance(x, OSError) and x not in chain:
        chain.append(x)
        x = x.__cause__ or (None if x.__suppress_context__ else x.__context__)
    chain.reverse()  # in the order raised
    if not chain:
        return None
    first = chain[0]
    named = next((c for c in chain if c.filename and c.errno == first.errno), None)
    inside = [c for c in chain if c.filename and Path(os.fsdecode(c.filename)).is_relative_to(run_dir)]
    if first.errno not in WRITE_ERRNOS and not inside:
        return None
    if first.filename is None and named is not None:
        return OSError(first.errno, first.strerror, named.filename)
    return first


def _stop_on_write_failure(run: Run, e: OSError, command: str) -> None:
    """Says which write stopped the run, marks the run (and the trial it was measuring)
    ``interrupted`` in run.json when run.json can still be written (says so when it cannot),
    and how to resume; the trials done stay as they are."""
    where = f"{os.fsdecode(e.filename)}: " if e.filename else f"{run.dir}: "
    print(f"dnscost: {where}{e.strerror or e}", file=sys.stderr)
    before = json.dumps(run.doc["trials"])
    for entry in run.doc["trials"].values():
        if entry["status"] == "running":
            entry["status"], entry["error"] = "interrupted", f"{where}{e.strerror or e}"
    try:
        run.finish("interrupted")
    except OSError as again:
        run.doc["trials"] = json.loads(before)
        why = again.strerror or again
        print(f"dnscost: {run.dir / 'run.json'} still says running: it could not be rewritten ({why})", file=sys.stderr)
    else:
        print(f"dnscost: {run.dir / 'run.json'}: the run is marked interrupted", file=sys.stderr)
    print(f"dnscost: resume with: dnscost {command} --resume {run.dir}", file=sys.stderr)
