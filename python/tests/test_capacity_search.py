"""Capacity to a service level (``kind = "capacity"``, runner.capacity): the search's logic
against a simulated target, a spec's mistakes in one line, and one real search on the builtin
target whose every step is judged by its own stored summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dnscost import runner
from dnscost.errors import UsageError
from dnscost.plan import TrialPlan, capacity_step
from dnscost.spec import parse_spec
from dnscost.trial import LoadSettings

PROFILE = {"name": "p", "transport": "doh", "connections": 1, "query_interval_ms": 100, "queries_per_resolution": 2}
"""A client making 20 queries a second over one DoH connection."""


def _params(**over: Any) -> dict[str, Any]:
    params = {
        "connections": 16, "in_flight": 16, "lifetime": "forever", "resumption": 0.0, "duration_s": 1,
        "warmup_s": 0, "timeout_s": 1, "baseline_s": 0, "start_qps": 10_000, "max_qps": 2_000_000,
        "max_loss": 0.01, "precision": 0.05, "max_steps": 20, "max_p99_ms": 10.0, "rate": None,
    }  # fmt: skip
    return {**params, **over}


def _search(
    monkeypatch: pytest.MonkeyPatch,
    *,
    loss_above: float = 1e9,
    p99_above: float = 1e9,
    generator_above: float = 1e9,
    stolen_at: float | None = None,
    transient_at: float | None = None,
    descheduled_at: float | None = None,
    waiting_above: float | None = None,
    **over: Any,
) -> dict[str, Any]:
    """runner.capacity against a simulated target that loses queries above ``loss_above`` qps,
    answers slower than the objective above ``p99_above`` (its core saturated above the lower
    of the two), a generator behind above ``generator_above``, one step at ``stolen_at`` whose
    core was stolen and one at ``transient_at`` slower than the objective at half a core (each
    the first time only), and one at ``descheduled_at`` whose first two tries broke the p99 with
    a sixth of the generator's core stolen."""
    seen: list[float] = []

    def measure(bed: Any, s: LoadSettings, trial_dir: Path, *, cache_hit_ratio: float | None) -> dict[str, Any]:
        # A profile's rate is its clients' (20 queries a second each, PROFILE).
        rate = float(s.engine.get("rate") or 20 * s.engine["clients"])
        flags = []
        if rate > generator_above or (waiting_above is not None and rate > waiting_above):
            flags.append("generator-bound")
        if rate > loss_above:
            flags.append("loss")
        if stolen_at is not None and rate == stolen_at and rate not in seen:
            flags.append("cores-stolen")
        transient = transient_at is not None and rate == transient_at and rate not in seen
        # Behind with cores to spare: waiting for the target's answers (slower than the objective).
        waiting = waiting_above is not None and rate > waiting_above
        descheduled = descheduled_at is not None and rate == descheduled_at and seen.count(rate) < 2
        seen.append(rate)
        validity = {
            "loss": 0.05 if rate > loss_above else 0.0,
            "generator_kept_up": rate <= generator_above and not (waiting_above is not None and rate > waiting_above),
            "target_busy_share": 0.98 if rate > min(loss_above, p99_above) or descheduled else 0.5,
            "generator_saturated": rate > generator_above and not waiting,
            "flags": flags,
            "valid": not flags,
        }
        slow = rate > p99_above or transient or descheduled or (waiting_above is not None and rate > waiting_above)
        steal = 1_000_000 / 6 if descheduled else 0.0
        summary = {
            "validity": validity,
            "latency_us": {"p99_us": 50_000 if slow else 2_000},
            "measured_s": 1.0,
            "meter": {"cores": {"0": {"steal_us": 0.0}, "1": {"steal_us": steal}}},
        }
        return {"engine_config": s.engine, "summary": summary}

    monkeypatch.setattr(runner, "measure", measure)
    t = TrialPlan("c", "capacity", "capacity", "builtin", "dot", _params(**over), 0)  # type: ignore[arg-type]

    def settings_at(step: TrialPlan) -> LoadSettings:
        return LoadSettings("builtin", "dot", runner.engine_knobs(step))

    out = runner.capacity(None, settings_at, t, Path("/nonexistent"), None)  # type: ignore[arg-type]
    out["rates"] = seen
    return out


def test_the_search_finds_the_first_objective_broken(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _search(monkeypatch, loss_above=90_000, p99_above=60_000)
    found = out["search"]
    assert 0.95 * 60_000 <= found["max_qps"] <= 60_000 and found["failed"] == "p99" and found["bracketed"]
    assert out["summary"]["validity"]["flags"] == []
    out = _search(monkeypatch, loss_above=30_000, p99_above=60_000)
    assert 0.95 * 30_000 <= out["search"]["max_qps"] <= 30_000 and out["search"]["failed"] == "loss"


def test_a_search_the_generator_bounds_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _search(monkeypatch, loss_above=500_000, generator_above=100_000)
    assert out["search"]["failed"] == "generator" and out["search"]["generator_bound"]
    assert "generator-bound-search" in out["summary"]["validity"]["flags"]


def test_a_generator_waiting_for_slow_answers_is_the_target_s_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # Behind its schedule above 30 000 qps with its cores to spare, the answers late: p99.
    out = _search(monkeypatch, waiting_above=30_000)
    assert out["search"]["failed"] == "p99" and not out["search"]["generator_bound"]
    assert 0.95 * 30_000 <= out["search"]["max_qps"] <= 30_000
    assert out["summary"]["validity"]["flags"] == []


def test_a_stolen_step_is_measured_again_not_taken_as_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _search(monkeypatch, p99_above=60_000, stolen_at=20_000.0)
    assert out["rates"].count(20_000.0) == 2
    assert [s["failed"] for s in out["steps"] if s["offered_qps"] == 20_000.0] == ["invalid: cores-stolen", None]
    assert 0.95 * 60_000 <= out["search"]["max_qps"] <= 60_000


def test_a_failure_below_saturation_is_measured_again(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _search(monkeypatch, p99_above=60_000, transient_at=20_000.0)
    assert [s["failed"] for s in out["steps"] if s["offered_qps"] == 20_000.0] == ["p99", None]
    assert 0.95 * 60_000 <= out["search"]["max_qps"] <= 60_000
    # At saturation a failure is the target's: taken at once.
    assert all(out["rates"].count(r) == 1 for r in out["rates"] if r > 60_000)


def test_a_failure_with_a_core_stolen_is_measured_up_to_three_times(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _search(monkeypatch, p99_above=60_000, descheduled_at=40_000.0)
    tries = [s for s in out["steps"] if s["offered_qps"] == 40_000.0]
    assert [s["failed"] for s in tries] == ["p99", "p99", None]
    assert [round(s["stolen_share"], 3) for s in tries] == [0.167, 0.167, 0.0]
    assert 0.95 * 60_000 <= out["search"]["max_qps"] <= 60_000


def test_a_profile_s_search_counts_clients_and_stops_at_its_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    step = capacity_step(
        TrialPlan("c", "g", "capacity", "builtin", "doh", _params(profile=PROFILE, clients=1, max_connections=500), 0),  # type: ignore[arg-type]
        4_000,
    )
    assert step.kind == "load" and step.params["clients"] == 200 and step.params["rate"] == 4_000
    # 500 connections hold 500 such clients, 10 000 qps: the search stops there, a lower bound.
    out = _search(monkeypatch, profile=PROFILE, clients=1, max_connections=500, start_qps=4_000)
    assert out["search"]["max_qps"] == 10_000 and out["search"]["clients"] == 500
    assert out["search"]["failed"] == "capped" and "search-unbounded" in out["summary"]["validity"]["flags"]


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("rate = 1000", "searches the rate"),
        ("clients = 10", "clients"),
        ("start_qps = 5000\nmax_qps = 1000", "above max_qps"),
        ('max_p99 = "soon"', "max_p99"),
        # An objective no trial can meet: refused here, not searched until the search fails.
        ('max_p99 = "0ms"', "max_p99: '0ms': no query is answered that fast"),
        ('max_p99 = "0.0005ms"', "max_p99: '0.0005ms': no query is answered that fast"),
    ],
)
def test_a_capacity_group_s_mistakes_are_one_line(field: str, message: str) -> None:
    spec = (
        f'name = "c"\ntargets = ["builtin"]\n[[group]]\nname = "c"\nkind = "capacity"\ntransports = ["dot"]\n{field}\n'
    )
    with pytest.raises(UsageError, match=message) as e:
        parse_spec(spec)
    assert "\n" not in str(e.value)


@pytest.mark.root
def test_a_real_search_s_steps_are_judged_by_their_own_summaries(root: None, tmp_path: Path) -> None:
    spec = tmp_path / "capacity.toml"
    spec.write_text(
        'name = "capacity"\ntargets = ["builtin"]\n[defaults]\nwarmup = "0.5s"\nbaseline = "0.5s"\n'
        '[[group]]\nname = "capacity"\nkind = "capacity"\ntransports = ["dot"]\nconnections = 20\nin_flight = 4\n'
        'max_p99 = "200ms"\nstart_qps = 1000\nprecision = 0.25\nstep_duration = "1s"\nmax_steps = 6\n'
    )
    # In a process of its own: a run pins the process it runs in to the generator's cores.
    done = subprocess.run(
        [sys.executable, "-m", "dnscost.cli", "run", str(spec), "--output", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (trial,) = (tmp_path / "out" / "trials").iterdir()
    record = json.loads((trial / "trial.json").read_text())
    found, steps = record["search"], record["steps"]
    assert found["max_p99_ms"] == 200 and found["max_loss"] == 0.01 and 1 <= len(steps) <= 6
    for k, step in enumerate(steps):
        # Each step ran as a trial of its own, and its verdict is what its own summary says.
        assert (trial / "steps" / f"{k:02d}" / "engine.jsonl").is_file()
        s = step["summary"]
        p99, loss = s["latency_us"]["p99_us"], s["validity"]["loss"]
        if step["ok"]:
            assert p99 <= 200_000 and loss <= 0.01 and s["validity"]["generator_kept_up"]
        elif step["failed"] == "p99":
            assert p99 > 200_000
        elif step["failed"] == "loss":
            assert loss > 0.01
    if found["max_qps"] is not None:
        best = max(s["offered_qps"] for s in steps if s["ok"])
        assert found["max_qps"] == best
        if found["failed_qps"] is not None:
            assert found["failed_qps"] > best
    report = (tmp_path / "out" / "report.html").read_text()
    assert 'id="capacity"' in report and "Capacity to a service level" in report
