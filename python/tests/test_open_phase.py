"""A trial whose connections were not all open when its window began is measured again with
a warm-up that covers its open phase (``dnscost.trial.measure``); the first attempt's files are
kept beside the trial's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dnscost import trial
from dnscost.trial import LoadSettings, warmup_for_late_accepts, warmup_for_open_phase


def test_the_warm_up_covers_the_open_phase_and_half_again() -> None:
    assert warmup_for_open_phase({"measure_start_ms": 1500}, 1500) is None  # no open-first gate
    assert warmup_for_open_phase({"measure_start_ms": 1500, "opened_ms": 1400}, 1500) is None
    assert warmup_for_open_phase({"measure_start_ms": 1500, "opened_ms": 2050}, 1500) == 3100
    assert warmup_for_open_phase({"measure_start_ms": 1000, "opened_ms": 1001}, 1000) == 1600


def test_a_spilled_open_phase_is_measured_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    warmups: list[int] = []

    def once(bed: Any, s: LoadSettings, trial_dir: Path, **_: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        warmups.append(s.engine["warmup_ms"])
        (trial_dir / "engine.jsonl").write_text(json.dumps({"attempt": len(warmups)}) + "\n")
        opened = 2050 if len(warmups) == 1 else 2100
        return {"engine_config": dict(s.engine)}, {"measure_start_ms": s.engine["warmup_ms"], "opened_ms": opened}

    monkeypatch.setattr(trial, "_measure_once", once)
    (tmp_path / "trial.json").write_text("{}")
    s = LoadSettings(target="knot-resolver", transport="dot", engine={"warmup_ms": 1500})
    got = trial.measure(None, s, tmp_path, cache_hit_ratio=None)  # type: ignore[arg-type]
    assert warmups == [1500, 3100]
    assert got["engine_config"]["warmup_ms"] == 3100
    first = {"warmup_ms": 1500, "opened_ms": 2050, "kernel_passive_opens": None}
    assert got["warmup_extended"] == {"by": "engine", "first": first, "warmup_ms": 3100, "kept": "open-phase-1",
                                       "target_restarted": False}  # fmt: skip
    assert json.loads((tmp_path / "open-phase-1" / "engine.jsonl").read_text()) == {"attempt": 1}
    assert json.loads((tmp_path / "engine.jsonl").read_text()) == {"attempt": 2}
    assert (tmp_path / "trial.json").read_text() == "{}" and not (tmp_path / "open-phase-1" / "trial.json").exists()


class _Target:
    """Says what was done to it, and what the meter would read from it: the memory the
    connections it held left behind until it is restarted."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.rss = 52

    def stop(self) -> None:
        self.calls.append("stop")

    def start(self) -> None:
        self.calls.append("start")
        self.rss = 52


class _Bed:
    def __init__(self) -> None:
        self.target = _Target()


def test_an_idle_trial_measured_again_gets_a_fresh_target(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The quick study of 2026-11-28: dnsdist's DoT at 2 000 idle connections spilled its open
    phase, was measured again on the same dnsdist, whose baseline then held the first attempt's
    connections (103 MB against 52): 88 bytes a connection, and DoT's fitted slope negative.
    An idle trial (no cache fill) is measured again on a restarted target."""
    baselines: list[int] = []

    def once(bed: Any, s: LoadSettings, trial_dir: Path, **_: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        baselines.append(bed.target.rss)
        bed.target.rss += 51  # 2 000 connections' worth, kept by the allocator after they close
        opened = 2050 if len(baselines) == 1 else 2100
        return {"engine_config": dict(s.engine)}, {"measure_start_ms": s.engine["warmup_ms"], "opened_ms": opened}

    monkeypatch.setattr(trial, "_measure_once", once)
    bed = _Bed()
    s = LoadSettings(target="dnsdist", transport="dot", engine={"warmup_ms": 1500}, fill=False)
    got = trial.measure(bed, s, tmp_path, cache_hit_ratio=None)  # type: ignore[arg-type]
    assert baselines == [52, 52] and bed.target.calls == ["stop", "start"]
    assert got["warmup_extended"]["target_restarted"] is True
    # A filled target (CPU trials share one) is not restarted: its cache would be lost.
    bed, baselines[:] = _Bed(), []
    got = trial.measure(bed, LoadSettings(target="dnsdist", transport="dot", engine={"warmup_ms": 1500}), tmp_path,
                        cache_hit_ratio=None)  # type: ignore[arg-type]  # fmt: skip
    assert baselines == [52, 103] and bed.target.calls == [] and got["warmup_extended"]["target_restarted"] is False


def _accepted(n: float) -> dict[str, Any]:
    return {"meter": {"counters": {"tcp_passive_opens": n}}}


def test_late_accepts_by_the_kernel_stretch_a_persistent_trial() -> None:
    """dnsdist's DoT at 4 000 idle connections (the full study of 2026-11-27): the engine had
    them all open before the window, its kernel accepted 687 in it; the warm-up then covers
    warm-up and window and half again. Only persistent trials over TCP are judged so."""
    dot = {"transport": "dot", "connections": 4000, "duration_ms": 3000, "rate": "once"}
    assert warmup_for_late_accepts(dot, _accepted(687.02), 3500) == 9800
    assert warmup_for_late_accepts(dot, _accepted(40 + 10), 3500) is None  # 1 % and the noise
    assert warmup_for_late_accepts(dot, _accepted(40 + 11), 3500) == 9800
    assert warmup_for_late_accepts(dot, {"meter": {"counters": {}}}, 3500) is None  # not counted
    assert (
        warmup_for_late_accepts({**dot, "lifetime": {"duration_ms": 30_000, "queries": None}}, _accepted(687), 3500)
        is None
    )
    assert (
        warmup_for_late_accepts({**dot, "lifetime": {"duration_ms": None, "queries": None}}, _accepted(687), 3500)
        == 9800
    )
    assert warmup_for_late_accepts({**dot, "idle_timeout_ms": 1000}, _accepted(687), 3500) is None
    assert warmup_for_late_accepts({**dot, "transport": "doq"}, _accepted(687), 3500) is None


def test_a_trial_the_kernel_saw_accepting_is_measured_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    warmups: list[int] = []

    def once(bed: Any, s: LoadSettings, trial_dir: Path, **_: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        warmups.append(s.engine["warmup_ms"])
        config = {**s.engine, "transport": s.transport}
        accepted = 687 if len(warmups) == 1 else 3
        return {"engine_config": config, "summary": _accepted(accepted)}, {"measure_start_ms": s.engine["warmup_ms"]}

    monkeypatch.setattr(trial, "_measure_once", once)
    engine = {"warmup_ms": 3500, "duration_ms": 3000, "connections": 4000}
    s = LoadSettings(target="dnsdist", transport="dot", engine=engine)
    got = trial.measure(None, s, tmp_path, cache_hit_ratio=None)  # type: ignore[arg-type]
    assert warmups == [3500, 9800]
    first = {"warmup_ms": 3500, "opened_ms": None, "kernel_passive_opens": 687}
    assert got["warmup_extended"] == {"by": "kernel", "first": first, "warmup_ms": 9800, "kept": "open-phase-1",
                                       "target_restarted": False}  # fmt: skip
    assert got["summary"]["meter"]["counters"]["tcp_passive_opens"] == 3
