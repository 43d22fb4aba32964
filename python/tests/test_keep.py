"""``dnscost keep``: a kept run recomputes every table of the run it was kept from, byte for
byte, and is smaller.

Fixtures: ``runs/quick`` and ``runs/synthetic`` (trial.json only: their stored summaries stand)
and ``runs/raw``, one ``dnscost load`` trial (dnsdist@trixie over DoH, 10 connections, 3 s) as
the reference VM wrote it, with its engine and meter records, cache fills, connections log and
engine configuration (its TLS files and the target's directory left out: ``target/`` is ignored
by git). Its summary is computed again from the records; the tests spoil the stored one first,
so that a kept run missing a record the summary needs gives other tables.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from dnscost.analysis import analyze, write_tables
from dnscost.cli import main
from dnscost.commands.keep import keep_run
from dnscost.errors import UsageError

RUNS = Path(__file__).parent / "fixtures" / "runs"
RAW_TRIAL = "load-dnsdist@trixie-doh"


def _tables(run_dir: Path, out: Path) -> dict[str, bytes]:
    """Every file ``write_tables`` writes for the run, by name."""
    return {p.name: p.read_bytes() for p in write_tables(analyze(run_dir), out)}


def _bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _raw_run(tmp_path: Path, *, cluster: bool = False) -> Path:
    """The raw fixture with its stored summary spoilt; with ``cluster``, as a trial of two
    cluster workers (each with the fixture's engine records)."""
    run = tmp_path / "raw"
    shutil.copytree(RUNS / "raw", run)
    trial = run / "trials" / RAW_TRIAL
    doc = json.loads((trial / "trial.json").read_text())
    doc["summary"] |= {"queries_answered": 1, "answered_qps": 1.0, "target_cpu_us": 1.0, "target_cpu_us_per_query": 1.0}
    if cluster:
        records = (trial / "engine.jsonl").read_text()
        for k in range(2):
            (trial / "workers" / str(k)).mkdir(parents=True)
            (trial / "workers" / str(k) / "engine.jsonl").write_text(records)
        start = json.loads(records.splitlines()[0])
        doc["engine_config"] = {**start["config"], "connections": 2 * start["config"]["connections"]}
        doc["cluster"] = {"workers": [{"dir": f"workers/{k}"} for k in range(2)]}
    (trial / "trial.json").write_text(json.dumps(doc))
    return run


@pytest.mark.parametrize("name", ["quick", "synthetic"])
def test_kept_fixture_runs_recompute_every_table(name: str, tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    keep_run(RUNS / name, kept)
    original, again = _tables(RUNS / name, tmp_path / "a"), _tables(kept, tmp_path / "b")
    assert len(original) == 2 * len(analyze(RUNS / name).tables) > 0
    assert again == original
    assert (tmp_path / "a" / "trials.csv").read_text().count("\n") > 50
    assert _bytes(kept) < _bytes(RUNS / name)


@pytest.mark.parametrize("cluster", [False, True], ids=["one-engine", "cluster"])
def test_kept_raw_run_recomputes_every_table_from_its_records(cluster: bool, tmp_path: Path) -> None:
    run = _raw_run(tmp_path, cluster=cluster)
    kept = tmp_path / "kept"
    result = keep_run(run, kept)
    original = _tables(run, tmp_path / "a")
    # The summary was computed again from the records, not read as stored.
    row = next(r for r in analyze(run).tables["trials"].rows if r["id"] == RAW_TRIAL)
    assert row["queries_answered"] > 1000
    assert _tables(kept, tmp_path / "b") == original

    trial = kept / "trials" / RAW_TRIAL
    engines = ["workers/0/engine.jsonl.gz", "workers/1/engine.jsonl.gz"] if cluster else ["engine.jsonl.gz"]
    kept_files = sorted(str(p.relative_to(kept)) for p in kept.rglob("*") if p.is_file())
    assert kept_files == sorted(
        ["kept.json", "run.json", *(f"trials/{RAW_TRIAL}/{n}" for n in ["trial.json", "meter.jsonl.gz", *engines])]
    )
    assert (trial / "trial.json").read_bytes() == (run / "trials" / RAW_TRIAL / "trial.json").read_bytes()
    assert result.trials == result.trials_with_records == 1
    assert result.kept_bytes == _bytes(kept) - (kept / "kept.json").stat().st_size
    assert result.run_bytes == _bytes(run)
    assert _bytes(kept) < _bytes(run) / 4

    # Each kept record file is needed: without it the stored (spoilt) summary stands.
    for name in ["meter.jsonl.gz", *engines]:
        partial = tmp_path / f"without-{name.replace('/', '-')}"
        shutil.copytree(kept, partial)
        (partial / "trials" / RAW_TRIAL / name).unlink()
        assert _tables(partial, tmp_path / f"t-{partial.name}") != original, name


def test_keeping_a_kept_run_writes_the_same_bytes(tmp_path: Path) -> None:
    run = _raw_run(tmp_path)
    keep_run(run, tmp_path / "once")
    keep_run(tmp_path / "once", tmp_path / "twice")
    for path in (tmp_path / "once").rglob("*"):
        if path.is_file() and path.name != "kept.json":
            assert (tmp_path / "twice" / path.relative_to(tmp_path / "once")).read_bytes() == path.read_bytes()


def test_keep_command_and_its_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _raw_run(tmp_path)
    assert main(["keep", str(run), str(tmp_path / "kept")]) == 0
    assert "kept 1 trials (1 with their records)" in capsys.readouterr().out

    (tmp_path / "not-a-run").mkdir()
    cases = [
        (tmp_path / "not-a-run", tmp_path / "x", "not a run directory (no run.json)"),
        (run, tmp_path / "kept", "already holds run.json"),
        (run, run / "kept", "inside the run it would keep"),
        (run, run, "inside the run it would keep"),
    ]
    for source, dest, says in cases:
        assert main(["keep", str(source), str(dest)]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err
    assert not (tmp_path / "x").exists() and not (run / "kept").exists()


def test_a_damaged_kept_record_is_one_line(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    keep_run(_raw_run(tmp_path), kept)
    meter = kept / "trials" / RAW_TRIAL / "meter.jsonl.gz"
    meter.write_bytes(meter.read_bytes()[: os.path.getsize(meter) // 2])
    with pytest.raises(UsageError, match=r"meter\.jsonl\.gz: unreadable"):
        analyze(kept)
