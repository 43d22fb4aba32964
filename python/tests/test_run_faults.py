"""What a new user meets first, and what must never go wrong silently: relative and default
output paths, the pre-flight check, a target that stops starting, a run directory written by
two processes, ``kill -9`` of dnscost, a dead target, and a generator that is the bottleneck.
Every command runs from a temporary working directory, as a user would run it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import need
from dnscost.proc import start_time
from test_load import installed

DNSCOST = [sys.executable, "-m", "dnscost.cli"]

SPEC = """
name = "paths"
targets = ["builtin", "dnsdist"]
names = 500
[defaults]
duration = "1s"
warmup = "0.3s"
baseline = "0.2s"
[[group]]
name = "establishment"
transports = ["udp", "dot"]
connections = 4
rate = 1000
"""


def _dnscost(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DNSCOST, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False, env=env)


def _trials(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(run_dir.glob("trials/*/trial.json"))]


@pytest.mark.resolver
def test_run_with_a_relative_output_from_anywhere(root: None, tmp_path: Path) -> None:
    need(installed("dnsdist"), "dnsdist is not installed")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "paths.toml").write_text(SPEC)
    r = _dnscost(tmp_path, "run", "specs/paths.toml", "--output", "runs/rel", "--no-report")
    assert r.returncode == 0, r.stderr
    run_dir = tmp_path / "runs" / "rel"
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "done" and len(run["plan"]) == 4
    assert "pre-flight: dnsdist" in r.stderr and "4 of 4 trials done, 0 failed" in r.stderr
    for trial in _trials(run_dir):
        summary = trial["summary"]
        assert isinstance(summary, dict)
        # The generator is metered by the kernel's accounting, beside the engine's own figure.
        assert summary["generator_cpu_us"] > 0 and summary["engine_cpu_us"] > 0, trial["id"]
        assert "no-generator-cpu" not in summary["validity"]["flags"]
        assert trial["summary_context"]["generator_cpus"] == run["spec"]["cpus"]["generator"]

    # The report follows from the raw records, not from the summary written at the time.
    path = run_dir / "trials" / "establishment-dnsdist-udp-r0" / "trial.json"
    doc = json.loads(path.read_text())
    truth = doc["summary"]["answered_qps"]
    doc["summary"]["answered_qps"] = 1.0
    path.write_text(json.dumps(doc))
    r = _dnscost(tmp_path, "report", "runs/rel")
    assert r.returncode == 0, r.stderr
    import csv

    rows = {row["id"]: row for row in csv.DictReader((run_dir / "tables" / "trials.csv").open())}
    assert float(rows["establishment-dnsdist-udp-r0"]["answered_qps"]) == pytest.approx(truth)
    assert "answer-mismatch" not in rows["establishment-dnsdist-udp-r0"]["flags"]

    # An edit of a raw record reaches the tables, the validity and the HTML: the engine's summary
    # record now claims half the answers dnsdist's own counters saw.
    raw = run_dir / "trials" / "establishment-dnsdist-udp-r0" / "engine.jsonl"
    records = [json.loads(line) for line in raw.read_text().splitlines()]
    for part in ("measured", "total"):
        records[-1][part]["queries"]["answered"] //= 2
    raw.write_text("".join(json.dumps(r) + "\n" for r in records))
    r = _dnscost(tmp_path, "report", "runs/rel")
    assert r.returncode == 0, r.stderr
    rows = {row["id"]: row for row in csv.DictReader((run_dir / "tables" / "trials.csv").open())}
    edited = rows["establishment-dnsdist-udp-r0"]
    assert float(edited["answered_qps"]) == pytest.approx(truth / 2, rel=0.01)
    assert edited["valid"] == "false" and "answer-mismatch" in edited["flags"]
    html = (run_dir / "report.html").read_text()
    # The validity table's trial cell: its id, linked to the trial's page over time.
    cell = html.index(">establishment-dnsdist-udp-r0</a></td>", html.index('id="validity"'))
    row = html[html.rindex("<tr", 0, cell) : html.index("</tr>", cell)]
    assert '<tr class="invalid">' in row and "answer-mismatch" in row


@pytest.mark.resolver
@pytest.mark.parametrize("target", ["builtin", "dnsdist"])
def test_load_with_the_default_output(root: None, tmp_path: Path, target: str) -> None:
    need(installed(target), f"{target} is not installed")
    r = _dnscost(
        tmp_path, "load", "--target", target, "--transport", "dot", "--rate", "500", "--duration", "1s",
        "--warmup", "0.3s", "--names", "200", "--connections", "20", "--open-first",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    runs = list((tmp_path / "results" / "load").iterdir())
    assert len(runs) == 1 and f"results         {runs[0]}" in r.stdout
    assert json.loads((runs[0] / "run.json").read_text())["status"] == "done"
    # --open-first: the 20 connections were open before the window (the engine's summary says
    # when), so the trial was measured once.
    (trial,) = (runs[0] / "trials").iterdir()
    summary = json.loads((trial / "engine.jsonl").read_text().splitlines()[-1])
    assert summary["opened_ms"] <= summary["measure_start_ms"], summary
    assert "warmup_extended" not in json.loads((trial / "trial.json").read_text())


def test_a_bad_engine_setting_fails_before_any_target_starts(root: None, tmp_path: Path) -> None:
    started = time.monotonic()
    r = _dnscost(tmp_path, "load", "--target", "builtin", "--transport", "tcp", "--close", "bogus")
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "dnscost load:" in r.stderr and "bogus" in r.stderr, r.stderr
    assert not (tmp_path / "results").exists()
    spec = tmp_path / "zero.toml"
    spec.write_text(SPEC.replace('duration = "1s"', 'duration = "0s"').replace('"builtin", "dnsdist"', '"builtin"'))
    r = _dnscost(tmp_path, "run", "zero.toml")
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "zero.toml: group 'establishment'" in r.stderr and "duration" in r.stderr
    assert not (tmp_path / "results").exists()
    assert time.monotonic() - started < 60  # a guard against a hang, not a measurement


@pytest.mark.resolver
def test_a_missing_target_stops_the_run_at_once(root: None, tmp_path: Path) -> None:
    (tmp_path / "paths.toml").write_text(SPEC)
    env = {**os.environ, "PATH": str(tmp_path / "bin")}  # no dnsdist, nor any sbin that has one
    (tmp_path / "bin").mkdir()
    code = (
        "import sys\nfrom dnscost.targets import _util\n_util._SBIN = ()\n"
        "from dnscost.cli import main\nsys.exit(main(sys.argv[1:]))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "run", "paths.toml", "--output", "out"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 3, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "dnscost: dnsdist: dnsdist not found: install the Debian package dnsdist (scripts/setup)"
    )
    assert not list((tmp_path / "out").glob("trials/*/trial.json"))


FAILS_AFTER_FIRST_START = """#!/bin/sh
# dnsdist that starts once (the pre-flight check) and then exits at every start.
case " $* " in *" -C "*)
  n=$(cat "{count}" 2>/dev/null || echo 0); echo $((n + 1)) > "{count}"
  [ "$n" -ge 1 ] && {{ echo "refusing to start ($n)" >&2; exit 1; }} ;;
esac
exec {real} "$@"
"""


@pytest.mark.resolver
def test_a_target_that_stops_starting_has_its_trials_skipped(root: None, tmp_path: Path) -> None:
    need(installed("dnsdist"), "dnsdist is not installed")
    import shutil

    real = shutil.which("dnsdist", path=os.pathsep.join([os.environ["PATH"], "/usr/sbin", "/usr/bin"]))
    assert real
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "dnsdist"
    wrapper.write_text(FAILS_AFTER_FIRST_START.format(count=tmp_path / "starts", real=real))
    wrapper.chmod(0o755)
    (tmp_path / "spec.toml").write_text(
        SPEC.replace('"builtin", "dnsdist"', '"dnsdist"').replace('"dot"]', '"tcp", "dot"]')
    )
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    r = _dnscost(tmp_path, "run", "spec.toml", "--output", "out", env=env)
    assert r.returncode == 4, r.stderr
    lines = r.stderr.strip().splitlines()
    assert sum("failed to start 2 times in a row" in line for line in lines) == 1, r.stderr
    assert "0 of 3 trials done, 2 failed, 1 not run" in r.stderr
    assert lines[-1].startswith("dnscost: no trial finished, so no report was made")
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["status"] == "failed"
    assert sorted(v["status"] for v in run["trials"].values()) == ["failed", "failed", "not-run"]
    assert not (tmp_path / "out" / "report.html").exists()
    r = _dnscost(tmp_path, "report", "out")
    assert r.returncode == 4 and r.stderr.endswith("nothing to report\n") and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "out" / "report.html").exists()


def _wait_for(path_glob: Path, pattern: str, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for p in path_glob.glob(pattern) if p.stat().st_size > 1000]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"nothing like {pattern} under {path_glob} in {timeout} s")


def test_kill_9_of_dnscost_leaves_nothing_running(root: None, tmp_path: Path) -> None:
    p = subprocess.Popen(
        [*DNSCOST, "load", "--target", "builtin", "--transport", "tcp", "--rate", "500", "--duration", "30s",
         "--names", "100", "--output", "out"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_for(tmp_path / "out", "trials/*/engine.jsonl")
    finally:
        p.kill()  # SIGKILL: dnscost gets no chance to stop anything itself
        p.wait()
    children = [json.loads(line) for line in (tmp_path / "out" / "children.jsonl").read_text().splitlines()]
    started = [(c["pid"], c["start_time"], c["name"]) for c in children if "pid" in c]
    assert {name for _, _, name in started} >= {"builtin", "engine"}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(start_time(pid) == t for pid, t, _ in started):
        time.sleep(0.1)
    alive = [name for pid, t, name in started if start_time(pid) == t]
    assert not alive, f"{alive} outlived dnscost"
    for c in children:  # the cgroups: removed by a resume; here, by the test
        for d in c.get("cgroup_dirs", []):
            deadline = time.monotonic() + 10
            while Path(d).exists() and time.monotonic() < deadline:
                try:
                    Path(d).rmdir()
                except OSError:
                    time.sleep(0.1)


TINY = """
name = "tiny"
targets = ["builtin"]
names = 200
[defaults]
duration = "4s"
warmup = "0.3s"
baseline = "0.2s"
[[group]]
name = "establishment"
transports = ["udp", "tcp"]
connections = 4
rate = 500
"""


def test_a_run_directory_has_one_writer(root: None, tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(TINY)
    p = subprocess.Popen(
        [*DNSCOST, "run", "tiny.toml", "--output", "out", "--no-report"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for(tmp_path / "out", "trials/*/engine.jsonl")
        r = _dnscost(tmp_path, "run", "--resume", "out")
        assert r.returncode == 2, r.stderr
        assert r.stderr == f"dnscost: {tmp_path / 'out'} is being written by another dnscost (PID {p.pid})\n"
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    # Once the first writer is gone the run can be resumed.
    r = _dnscost(tmp_path, "run", "--resume", "out", "--no-report")
    assert r.returncode == 0, r.stderr


def test_resume_stops_what_a_killed_run_left(root: None, tmp_path: Path) -> None:
    """A leftover that escaped (here: a process recorded in the run's ledger as if a killed
    run had started it) is stopped by the resume before it measures anything. The trial
    run.json calls interrupted while its own trial.json says done (the run stopped between the
    two writes) keeps its records; it used to be measured again, over them."""
    (tmp_path / "tiny.toml").write_text(TINY.replace('"udp", "tcp"', '"udp"').replace('"4s"', '"1s"'))
    r = _dnscost(tmp_path, "run", "tiny.toml", "--output", "out", "--no-report")
    assert r.returncode == 0, r.stderr
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    trial = next(iter(run["trials"]))
    run["trials"][trial]["status"] = "interrupted"
    (tmp_path / "out" / "run.json").write_text(json.dumps(run))
    orphan = subprocess.Popen(["sleep", "60"], start_new_session=True)
    with (tmp_path / "out" / "children.jsonl").open("a") as f:
        f.write(json.dumps({"name": "orphan", "pid": orphan.pid, "start_time": start_time(orphan.pid)}) + "\n")
    before = {p: p.read_bytes() for p in (tmp_path / "out" / "trials" / trial).iterdir() if p.is_file()}
    r = _dnscost(tmp_path, "run", "--resume", "out", "--no-report")
    assert r.returncode == 0, r.stderr
    assert f"dnscost: stopped orphan (PID {orphan.pid}), left running by the interrupted run" in r.stderr
    assert f"{trial}: done, as its trial.json says; not measured again" in r.stderr + r.stdout
    assert {p: p.read_bytes() for p in before} == before
    assert json.loads((tmp_path / "out" / "run.json").read_text())["trials"][trial]["status"] == "done"
    assert orphan.wait(timeout=10) == -signal.SIGKILL


def test_a_dead_target_stops_the_engine_at_once(root: None, tmp_path: Path) -> None:
    p = subprocess.Popen(
        [*DNSCOST, "load", "--target", "builtin", "--transport", "udp", "--rate", "500", "--duration", "30s",
         "--warmup", "0", "--names", "100", "--output", "out"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    engine_log = _wait_for(tmp_path / "out", "trials/*/engine.jsonl")
    trial = engine_log.parent
    os.kill(json.loads((trial / "trial.json").read_text())["target_pid"], signal.SIGKILL)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 4, err
    records = [json.loads(line) for line in engine_log.read_text().splitlines()]
    # The watchdog (200 ms) stopped the engine: it wrote its summary, interrupted, long
    # before the 30 s it was asked to run.
    assert records[-1]["type"] == "summary" and records[-1]["interrupted"] is True
    assert sum(r["type"] == "interval" for r in records) < 15
    # One line: how it died, not its listening records.
    assert _said(err) == ["dnscost: builtin died: killed by signal 9 (SIGKILL)"], err


def _said(err: str) -> list[str]:
    """dnscost's lines, less those about what an earlier, killed dnscost left."""
    return [line for line in err.splitlines() if not line.startswith(("dnscost: removed ", "dnscost: left "))]


def _children(run_dir: Path, name: str) -> list[dict[str, Any]]:
    lines = (run_dir / "children.jsonl").read_text().splitlines()
    return [c for c in map(json.loads, lines) if c.get("name") == name and "pid" in c]


def test_a_killed_engine_is_named_with_its_signal(root: None, tmp_path: Path) -> None:
    p = subprocess.Popen(
        [*DNSCOST, "load", "--target", "builtin", "--transport", "udp", "--rate", "500", "--duration", "30s",
         "--warmup", "0", "--names", "100", "--output", "out"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _wait_for(tmp_path / "out", "trials/*/engine.jsonl")
    os.kill(_children(tmp_path / "out", "engine")[-1]["pid"], signal.SIGKILL)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0
    assert _said(err) == ["dnscost: dnscost-engine killed by signal 9 (SIGKILL)"], err


def test_a_stopped_target_fails_its_trial_and_is_not_reused(root: None, tmp_path: Path) -> None:
    """SIGSTOP of the target during the first trial: that trial fails saying the target is
    stopped (not generator-bound, not loss), the stopped process is killed (as /proc shows) and
    the next trial runs on a fresh target."""
    (tmp_path / "tiny.toml").write_text(TINY)
    p = subprocess.Popen(
        [*DNSCOST, "run", "tiny.toml", "--output", "out", "--no-report"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        first = _wait_for(tmp_path / "out", "trials/*/engine.jsonl").parent
        target = _children(tmp_path / "out", "builtin")[-1]
        os.kill(target["pid"], signal.SIGSTOP)
        _, err = p.communicate(timeout=120)
    finally:
        if start_time(target["pid"]) == target["start_time"]:
            os.kill(target["pid"], signal.SIGKILL)  # only if dnscost left it: the test's failure
    assert start_time(target["pid"]) != target["start_time"], "the stopped target was left running"
    trials = {t["id"]: t for t in _trials(tmp_path / "out")}
    stopped = trials.pop(first.name)
    assert stopped["status"] == "failed", stopped
    assert str(stopped["error"]).startswith(f"builtin is stopped (PID {target['pid']} in state T"), stopped["error"]
    assert f"failed: builtin is stopped (PID {target['pid']}" in err
    (other,) = trials.values()
    assert other["status"] == "done", other.get("error")
    assert stopped["bed"] == "beds/builtin-1" and other["bed"] == "beds/builtin-2"  # a fresh target


@pytest.mark.load_timing
def test_a_generator_on_a_busy_core_is_flagged(root: None, tmp_path: Path) -> None:
    need(len(os.sched_getaffinity(0)) >= 2, "needs two CPUs")
    spinner = subprocess.Popen(
        [sys.executable, "-c", "import os\nos.sched_setaffinity(0, {1})\nwhile True: pass"],
        start_new_session=True,
    )
    try:
        r = _dnscost(
            tmp_path, "load", "--target", "builtin", "--transport", "udp", "--rate", "2000", "--duration", "2s",
            "--warmup", "0.5s", "--names", "200", "--target-cpus", "0", "--generator-cpus", "1", "--output", "out",
        )  # fmt: skip
    finally:
        spinner.kill()
        spinner.wait()
    assert r.returncode == 0, r.stderr
    trial = _trials(tmp_path / "out")[0]
    v = trial["summary"]["validity"]  # type: ignore[index]
    assert v["generator_saturated"] and not v["target_saturated"], v
    assert "generator-bound" in v["flags"] and v["valid"] is False


@pytest.mark.resolver
@pytest.mark.parametrize("target", ["knot-resolver", "pdns-recursor"])
def test_control_sockets_work_under_a_deep_run_directory(root: None, tmp_path: Path, target: str) -> None:
    """A run directory deep enough that a unix socket path in it is too long (as a fresh clone's
    results/<experiment>/<run>/trials/<id>/bed/target is): the counters are still read."""
    need(installed(target), f"{target} is not installed")
    from dnscost import trial

    deep = tmp_path.joinpath(*["d" * 30] * 4, "bed")
    bed = trial.Testbed.create(target, deep, target_cpus=[0], upstream_cpus=[1], names=100, tld="test")
    try:
        bed.target.start()
        assert bed.target.counters().queries is not None
    finally:
        bed.stop()


# A `dnscost load` whose trial fails at once, as when its target cannot start: nothing started.
FAILING_LOAD = """
import sys
from pathlib import Path
import dnscost.cli, dnscost.commands.load, dnscost.trial
from dnscost.errors import TargetError

def fails(settings, trial_dir, cluster=None):
    trial_dir.mkdir(parents=True, exist_ok=True)
    (trial_dir / "target.log").write_text("not found\\n")
    with (trial_dir.parent.parent / "attempts").open("a") as f:
        f.write("1")
    raise TargetError("dnsdist not found")

dnscost.trial.run_trial = fails
dnscost.commands.load.pin_self = lambda cpus: None
sys.exit(dnscost.cli.main(sys.argv[1:]))
"""


def test_a_load_that_measured_nothing_can_be_run_again_into_its_output(tmp_path: Path) -> None:
    """A load that failed before measuring anything left a failed run directory, and the same
    command again was refused ("already holds a run"). It now takes the directory again; one
    that holds measured data is never taken."""
    out = tmp_path / "out"
    argv = [sys.executable, "-c", FAILING_LOAD, "load", "--target", "builtin", "--transport", "udp", "--output", "out"]

    def load() -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)

    r = load()
    assert (r.returncode, r.stderr) == (4, "dnscost: dnsdist not found\n")
    assert json.loads((out / "run.json").read_text())["status"] == "failed"
    (out / "notes").write_text("the user's")
    r = load()
    assert (r.returncode, r.stderr) == (4, "dnscost: dnsdist not found\n")
    assert (out / "attempts").read_text() == "11" and (out / "notes").read_text() == "the user's"
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "failed" and list(run["trials"]) == ["load-builtin-udp"]
    # A trial cut short keeps what it measured: that directory is not taken.
    (out / "trials" / "load-builtin-udp" / "meter.jsonl").write_text('{"type": "header"}\n')
    r = load()
    assert (r.returncode, r.stderr) == (
        2,
        f"dnscost: {out} already holds a run with measured data: give another --output\n",
    )
    assert (out / "attempts").read_text() == "11" and (out / "trials" / "load-builtin-udp" / "meter.jsonl").exists()


def test_only_a_run_of_the_same_command_that_measured_nothing_is_replaced(tmp_path: Path) -> None:
    from dnscost.errors import UsageError
    from dnscost.results import Run

    def create(directory: Path, command: str = "load") -> Run:
        return Run.create(
            directory, "load", spec={"command": command}, spec_toml="", plan=[{"id": "t"}], facts={}, versions={},
            reuse_unmeasured=True,
        )  # fmt: skip

    def failed(directory: Path, command: str = "load") -> Run:
        run = create(directory, command)
        run.set_trial("t", "failed", "target did not start")
        run.finish("failed")
        run.unlock()
        return run

    failed(tmp_path / "a")
    (tmp_path / "a" / "trials" / "t" / "fill").mkdir(parents=True)
    (tmp_path / "a" / "trials" / "t" / "fill" / "fill-udp.jsonl").write_text("{}\n")  # a cache fill: no measurement
    again = create(tmp_path / "a")
    assert again.doc["trials"] == {} and not (tmp_path / "a" / "trials").exists()
    with pytest.raises(UsageError, match="is being written by another dnscost"):
        create(tmp_path / "a")  # the one just created holds it
    again.unlock()
    for where, measured in [("b", "engine.jsonl.gz"), ("c", "workers/0/engine.jsonl"), ("d", None)]:
        run = failed(tmp_path / where)
        if measured is None:
            run.doc["trials"]["t"] = {"status": "done"}
            run.save()
        else:
            (run.trial_dir("t") / measured).parent.mkdir(parents=True)
            (run.trial_dir("t") / measured).write_text("")
        with pytest.raises(UsageError, match="already holds a run with measured data"):
            create(tmp_path / where)
    failed(tmp_path / "e", command="run")
    with pytest.raises(UsageError, match=r"already holds a run: give another --output$"):
        create(tmp_path / "e")
