from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import IN_CI
from dnscost.argtypes import parse_duration_ms, parse_lifetime, parse_rate
from dnscost.cli import build_parser
from dnscost.commands.load import engine_settings
from dnscost.engine import generate


def test_durations_and_lifetimes_read_like_the_engine() -> None:
    assert [parse_duration_ms(x) for x in ("1.5s", "250ms", "2m", "3", "1h")] == [1500, 250, 120_000, 3000, 3_600_000]
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration_ms("soon")
    assert parse_lifetime("forever") == {"duration_ms": None, "queries": None}
    assert parse_lifetime("30s,100q") == {"duration_ms": 30_000, "queries": 100}
    assert parse_rate("max") == "max" and parse_rate("2000") == 2000.0


def test_load_flags_become_engine_fields() -> None:
    a = build_parser().parse_args(
        [
            "load",
            "--target",
            "dnsdist",
            "--transport",
            "dot",
            "--connections",
            "100",
            "--lifetime",
            "1q",
            "--resumption",
            "0.5",
            "--rate",
            "max",
            "--duration",
            "5s",
        ]
    )
    config = engine_settings(a)
    assert config == {
        "connections": 100,
        "lifetime": {"duration_ms": None, "queries": 1},
        "resumption": 0.5,
        "rate": "max",
        "duration_ms": 5000,
        "warmup_ms": 2000,
    }


def test_doctor_reports_a_ready_machine() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "dnscost.cli", "doctor"], capture_output=True, text=True, timeout=60, check=False
    )
    assert "dnscost-engine" in r.stdout and "cgroups" in r.stdout
    if IN_CI:
        assert r.returncode == 0 and r.stdout.rstrip().endswith("ready"), r.stdout


def test_target_start_serves_until_interrupted(root: None, tmp_path: Path) -> None:
    p = subprocess.Popen(
        [sys.executable, "-m", "dnscost.cli", "target", "start", "builtin", "--names", "100", "--dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        lines = []
        while not lines or lines[-1] != "}":
            line = p.stdout.readline()
            assert line, p.stderr.read() if p.stderr else ""
            lines.append(line.rstrip("\n"))
        info = json.loads("\n".join(lines))
        assert set(info["endpoints"]) == {"udp", "tcp", "dot", "doh", "doq", "doh3"}
        dot = info["endpoints"]["dot"].removeprefix("dot://")
        records = generate(
            {
                "transport": "dot",
                "target": dot,
                "ca_file": info["ca"],
                "sni": "localhost",
                "synthetic": 100,
                "rate": 100,
                "duration_ms": 500,
            },
            tmp_path / "probe",
        )
        assert records[-1]["total"]["queries"]["answered"] >= 45
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(30)
    assert p.returncode == 0
    assert not Path(f"/proc/{info['pid']}").exists()


SPEC = """
name = "shapes"
targets = ["builtin"]
[[group]]
name = "load"
transports = ["udp"]
connections = 4
rate = 1000
duration = "1s"
"""


def _stored_run(run_dir: Path, trial_json: str | None = None) -> Path:
    """A run directory of one planned trial of SPEC (failed, or with ``trial_json`` as its
    trial.json), as ``dnscost run`` writes it."""
    trial_id = "load-builtin-udp-r0"
    run = {
        "format_version": 2,
        "experiment": "shapes",
        "run_id": run_dir.name,
        "status": "failed",
        "spec": {"origin": str(run_dir / "shapes.toml"), "targets": ["builtin"], "only_targets": None},
        "spec_toml": SPEC,
        "machine": {"cpus": 2},
        "versions": {},
        "plan": [{"id": trial_id, "group": "load", "kind": "load", "target": "builtin", "transport": "udp"}],
        "trials": {trial_id: {"status": "failed", "error": "target died"}},
    }
    (run_dir / "trials" / trial_id).mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps(run))
    if trial_json is not None:
        (run_dir / "trials" / trial_id / "trial.json").write_text(trial_json)
    return run_dir


def _shaped(run_dir: Path, change: str) -> None:
    if change.startswith("plan="):
        doc = json.loads((run_dir / "run.json").read_text())
        doc["plan"] = json.loads(change.removeprefix("plan="))
        (run_dir / "run.json").write_text(json.dumps(doc))
    else:
        (run_dir / "run.json").write_text(change)


@pytest.mark.parametrize("command", ["report", "compare", "resume"])
@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("[]", "not a dnscost run (an array, not an object)"),
        ('"hello"', "not a dnscost run (a string, not an object)"),
        ('plan="load"', "plan is a string, not an array of trials"),
        ("plan=[1, 2]", "plan[0] is not a trial (an object with a string id)"),
    ],
)
def test_a_run_json_of_the_wrong_shape_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, change: str, says: str
) -> None:
    """Valid JSON that is not a run gave tracebacks (AttributeError, TypeError) in report,
    compare and run --resume: now one line naming run.json and what is wrong, nothing started."""
    from dnscost.cli import main

    good = _stored_run(tmp_path / "good")
    bad = _stored_run(tmp_path / "bad")
    _shaped(bad, change)
    argv = {"report": ["report", str(bad)], "compare": ["compare", str(good), str(bad)]}.get(
        command, ["run", "--resume", str(bad)]
    )
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"dnscost: {bad / 'run.json'}: {says}\n"
    assert not (bad / "lock").exists()  # run --resume refused it before taking it


@pytest.mark.parametrize("command", ["report", "compare", "resume"])
def test_a_run_json_nested_too_deeply_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """A run.json of 100 000 nested arrays gave a RecursionError traceback in report, compare
    and run --resume: now one line naming run.json, as any other malformed JSON, exit 2."""
    from dnscost.cli import main

    good = _stored_run(tmp_path / "good")
    bad = _stored_run(tmp_path / "bad")
    _shaped(bad, "[" * 100_000 + "]" * 100_000)
    argv = {"report": ["report", str(bad)], "compare": ["compare", str(good), str(bad)]}.get(
        command, ["run", "--resume", str(bad)]
    )
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dnscost: {bad / 'run.json'}: ") and err.count("\n") == 1, err
    assert "nested too deeply to read" in err, err
    assert not (bad / "lock").exists()


@pytest.mark.parametrize(
    ("trial_json", "says"),
    [
        ("[1, 2]", "not a trial record (an array, not an object)"),
        ('{"summary": "oops"}', "summary is a string, not an object or null"),
        (
            '{"status": "finished"}',
            "status is 'finished', not one of 'pending', 'running', 'done', 'failed', 'interrupted', "
            "'not-run', 'missing', 'unreadable'",
        ),
        ('{"rep": "1"}', "rep is a string, not a number"),
        ('{"status": "done", "summary": {"validity": "x"}}', "summary.validity is a string, not an object"),
        (
            "[" * 100_000 + "]" * 100_000,
            f"nested too deeply to read (more than about {sys.getrecursionlimit()} levels)",
        ),
    ],
)
def test_a_trial_json_of_the_wrong_shape_is_unreadable_as_broken_json_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], trial_json: str, says: str
) -> None:
    """A trial.json that is valid JSON but no trial record gave tracebacks in report, compare and
    run --resume. It is now what a trial.json of broken JSON is: an unreadable trial, kept as
    such, that report names in one line."""
    from dnscost.analysis.load import load_run
    from dnscost.cli import main
    from dnscost.results import Run
    from dnscost.runner import read_record, tally

    run_dir = _stored_run(tmp_path / "run", trial_json)
    trial = tmp_path / "run" / "trials" / "load-builtin-udp-r0" / "trial.json"
    (doc,) = load_run(run_dir)[1]
    assert (doc["status"], doc["error"]) == ("unreadable", f"trial.json: {says}")
    assert main(["report", str(run_dir)]) == 4  # nothing finished, so nothing to report
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"dnscost: {trial}: {says}; left out" and len(err) == 2, err
    # Nothing finished on either side: nothing to compare, said in one line (exit 2).
    assert main(["compare", str(_stored_run(tmp_path / "good")), str(run_dir), "--json"]) == 2
    # run --resume counts its trials by their records: a record of the wrong shape is none.
    assert read_record(trial.parent) is None
    run = Run(run_dir, json.loads((run_dir / "run.json").read_text()))
    run.doc["trials"]["load-builtin-udp-r0"] = {"status": "done"}
    assert tally(run, [SimpleNamespace(id="load-builtin-udp-r0")], "done").line() == "1 of 1 trials done, 0 failed"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--names", "-5"], "--names: -5 is out of range 1..=10000000"),
        (["--names", "0"], "--names: 0 is out of range 1..=10000000"),
        (["--names", "10000001"], "--names: 10000001 is out of range 1..=10000000"),
        (["--connections", "-1"], "dnscost load: --connections: invalid value: integer `-1`, expected u32"),
        (["--transport", "tcp", "--close", "bogus"], "dnscost load: --close: unknown variant `bogus`, expected one of"),
        (["--engine-config", "{}", "--connections", "0"], "dnscost load: --connections: 0 is out of range 1..=1000000"),
        (["--engine-config", '{"connections": -1}'], "dnscost load: {}: connections: invalid value: integer `-1`"),
        (["--engine-config", '{"transport": "tcp", "close": "x"}'], "dnscost load: {}: close: unknown variant `x`"),
        (["--engine-config", '{"bogus": 1}'], "dnscost load: {}: bogus: unknown field `bogus`, expected one of"),
        # Fields dnscost reads itself (connections, for the target's processes and the
        # generator's CPUs) are checked by the engine first: a wrong type was a traceback.
        (
            ["--engine-config", '{"connections": "four"}'],
            'dnscost load: {}: connections: invalid type: string "four", expected u32',
        ),
        (["--engine-config", '{"connections": [1]}'], "dnscost load: {}: connections: invalid type: sequence"),
    ],
)
def test_a_bad_load_setting_names_its_flag_or_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str], says: str
) -> None:
    """The engine's own message named neither ("configuration: invalid value: integer `-5`,
    expected u64 at line 1 column 102"): now the flag, or the --engine-config file and field,
    before anything starts."""
    import dnscost.commands.load
    from dnscost.cli import main

    def started(_: object) -> None:
        raise AssertionError("dnscost load went past its checks")

    monkeypatch.setattr(dnscost.commands.load, "pin_self", started)  # what a load does first once checked
    config = tmp_path / "engine.json"
    if "--engine-config" in args:
        k = args.index("--engine-config") + 1
        config.write_text(args[k])
        args = [*args[:k], str(config), *args[k + 1 :]]
    out = tmp_path / "o"
    argv = ["load", "--target", "builtin", "--transport", "udp", *args, "--output", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dnscost: {says.replace('{}', str(config))}") and err.count("\n") == 1, err
    assert " at line " not in err and not out.exists()
