"""A stored run damaged after it was written: raw records cut short, corrupted or deleted, a
finished trial's trial.json deleted, and ``dnscost compare`` given a run that is not finished or
shares nothing with the other. Each is said in one line naming the file or the run; nothing is
silently taken as whole.

Fixtures: ``runs/raw`` (one ``dnscost load`` trial with its engine and meter records, whose
summary the analysis computes again from them) and ``runs/synthetic`` (trial.json only), copied.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from dnscost.analysis.load import damage_notes, load_run
from dnscost.cli import main

RUNS = Path(__file__).parent / "fixtures" / "runs"
RAW_TRIAL = "load-dnsdist@trixie-doh"
SYNTHETIC_TRIAL = "connections-dnsdist-doh-c100-r0"


def _copy(name: str, dest: Path) -> Path:
    shutil.copytree(RUNS / name, dest, ignore=shutil.ignore_patterns("golden"))
    return dest


def _raw_with_stored_summary_spoilt(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    """The raw fixture, its stored summary made different from what its records give (so which
    one the analysis used shows), and that stored summary."""
    run = _copy("raw", tmp_path / "raw")
    path = run / "trials" / RAW_TRIAL / "trial.json"
    doc = json.loads(path.read_text())
    doc["summary"] |= {"answered_qps": 1.0, "queries_answered": 1}
    path.write_text(json.dumps(doc))
    return run, doc["summary"]


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:5000])  # truncate -s 5000


def _corrupt_an_interval(path: Path) -> None:
    lines = path.read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if json.loads(line).get("type") == "interval")
    lines[k] = lines[k][:40] + "#"
    path.write_text("\n".join(lines) + "\n")


DAMAGE = {
    "engine-cut": ("engine.jsonl", _cut, "engine.jsonl is cut short (no summary record at its end, its line 3 cut)"),
    "engine-corrupt-interval": (
        "engine.jsonl",
        _corrupt_an_interval,
        "engine.jsonl is corrupt (line 2 of 8 not a JSON record)",
    ),
    "engine-deleted": ("engine.jsonl", Path.unlink, "engine.jsonl is missing"),
    "meter-deleted": ("meter.jsonl", Path.unlink, "meter.jsonl is missing"),
    "meter-cut": ("meter.jsonl", _cut, "meter.jsonl is corrupt"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_raw_records_are_named_and_the_stored_summary_is_used_unchecked(tmp_path: Path, damage: str) -> None:
    """D16a: such damage gave the same tables as the whole run and nothing said."""
    run, stored = _raw_with_stored_summary_spoilt(tmp_path)
    whole = load_run(run)[1][0]
    assert whole["summary"]["answered_qps"] > 1.0 and "records_problem" not in whole
    assert damage_notes(run, [whole]) == []

    name, spoil, says = DAMAGE[damage]
    spoil(run / "trials" / RAW_TRIAL / name)
    (trial,) = load_run(run)[1]
    assert trial["summary"] == stored  # what was measured is still reported, from trial.json
    (note,) = damage_notes(run, [trial])
    assert note.startswith(f"{run / 'trials' / RAW_TRIAL}/{says}"), note
    assert note.endswith("; its stored summary is used, unchecked")


def test_report_says_which_record_is_cut_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, _ = _raw_with_stored_summary_spoilt(tmp_path)
    _cut(run / "trials" / RAW_TRIAL / "engine.jsonl")
    assert main(["report", str(run)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"dnscost: {run / 'trials' / RAW_TRIAL}/engine.jsonl is cut short (no summary record at its end, its line 3 "
        "cut); its stored summary is used, unchecked"
    ]


def test_a_finished_trial_without_its_trial_json_is_said_missing(tmp_path: Path) -> None:
    """D16b: it showed as "done, no" with a dash for its reason in the report's trials table."""
    run = _copy("synthetic", tmp_path / "run")
    (run / "trials" / SYNTHETIC_TRIAL / "trial.json").unlink()
    trials = {t["id"]: t for t in load_run(run)[1]}
    trial = trials[SYNTHETIC_TRIAL]
    assert (trial["status"], trial["error"]) == ("missing", "trial.json is missing (run.json says the trial finished)")
    assert damage_notes(run, [trial]) == [
        f"{run / 'trials' / SYNTHETIC_TRIAL / 'trial.json'}: missing, though run.json says the trial finished; left out"
    ]
    # The fixture's trial that never wrote its trial.json (interrupted) is no damage.
    never = [t for t in trials.values() if t["status"] != "done" and t["id"] != SYNTHETIC_TRIAL]
    assert never and all(t["status"] != "missing" or "run.json says" not in t["error"] for t in never)


def _half_run(run: Path, *, keep: int, status: str, fail: bool = False) -> Path:
    """The synthetic run with only its first ``keep`` trials (all failed with ``fail``), as
    run.json ``status`` says."""
    doc = json.loads((run / "run.json").read_text())
    ids = [entry["id"] for entry in doc["plan"]]
    for trial_id in ids[keep:]:
        shutil.rmtree(run / "trials" / trial_id, ignore_errors=True)
        doc["trials"].pop(trial_id, None)
    if fail:
        for trial_id in ids[:keep]:
            path = run / "trials" / trial_id / "trial.json"
            path.write_text(json.dumps({**json.loads(path.read_text()), "status": "failed", "error": "died"}))
            doc["trials"][trial_id] = {"status": "failed", "error": "died"}
    doc["status"] = status
    (run / "run.json").write_text(json.dumps(doc))
    return run


def test_compare_says_a_side_is_not_finished(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """D16c: compare against a run still running gave rows of "-" and no remark."""
    done = _copy("synthetic", tmp_path / "done")
    doc = json.loads((done / "run.json").read_text())
    (done / "run.json").write_text(json.dumps({**doc, "status": "done"}))
    half = _half_run(_copy("synthetic", tmp_path / "half"), keep=3, status="running")
    assert main(["compare", str(done), str(half)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2] == f"B is running: 3 of {len(doc['plan'])} trials done", out[:4]
    assert not out[3].startswith("A ")
    assert main(["compare", str(done), str(half), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == [f"B is running: 3 of {len(doc['plan'])} trials done"]


def test_report_says_a_run_is_not_finished(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """D7/D16: report of a run still being written gave its tables and said nothing."""
    half = _half_run(_copy("synthetic", tmp_path / "half"), keep=3, status="running")
    plan = len(json.loads((half / "run.json").read_text())["plan"])
    assert main(["report", str(half)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"dnscost: {half} is running: 3 of {plan} trials done; the report covers those"], err


def test_compare_refuses_runs_with_nothing_in_common(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """D16c: a run whose trials all failed, or one of other targets, gave rc 0 and rows of "-"."""
    done = _copy("synthetic", tmp_path / "done")
    failed = _half_run(_copy("synthetic", tmp_path / "failed"), keep=3, status="failed", fail=True)
    assert main(["compare", str(done), str(failed)]) == 2
    plan = len(json.loads((done / "run.json").read_text())["plan"])
    assert capsys.readouterr().err == (
        f"dnscost: {done} and {failed} have no figure measured in both (no cell in common; "
        f"A is interrupted: {plan - 2} of {plan} trials done; B failed: 0 of {plan} trials done)\n"
    )
    other = _copy("raw", tmp_path / "raw")  # dnsdist@trixie over DoH alone, on another machine
    assert main(["compare", str(done), str(other), "--force"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dnscost: {done} and {other} have no figure measured in both (no cell in common"), err
    assert err.count("\n") == 1
