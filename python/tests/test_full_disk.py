"""A run whose records can no longer be written: the disk fills up between two trials, or a
trial's directory cannot be written. dnscost stops at once, names the file it could not write,
marks run.json ``interrupted`` when run.json itself can still be written (and says when it
cannot), prints how to resume, and loses none of the trials done. What run.json says is read
from the filesystem, a real tmpfs of 30 MB mounted for the test."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import need

DNSCOST = [sys.executable, "-m", "dnscost.cli"]

SPEC = """
name = "tiny"
targets = ["builtin"]
names = 200
[defaults]
duration = "1s"
warmup = "0.3s"
baseline = "0.2s"
[[group]]
name = "establishment"
transports = ["udp"]
connections = 1
rate = 500
repetitions = 3
"""

TRIALS = [f"establishment-builtin-udp-r{k}" for k in range(3)]


@pytest.fixture
def disk(root: None, tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 30 MB, unmounted after the test."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=30m", "tmpfs", str(mnt)], check=False)
    need(mounted.returncode == 0, "cannot mount a tmpfs")
    try:
        yield mnt
    finally:
        subprocess.run(["chattr", "-R", "-i", str(mnt)], check=False, capture_output=True)
        if subprocess.run(["umount", str(mnt)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], check=False)


def _run_json(run: Path) -> dict[str, object]:
    doc: dict[str, object] = json.loads((run / "run.json").read_text())
    return doc


def _trial_statuses(run: Path) -> dict[str, str]:
    trials = _run_json(run)["trials"]
    assert isinstance(trials, dict)
    return {k: v["status"] for k, v in trials.items()}


def _fill(path: Path) -> None:
    """Writes zeros into ``path`` until the filesystem is full."""
    with path.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError as e:
            assert e.errno == 28, e  # ENOSPC


def test_a_full_disk_between_trials_stops_the_run_resumably(disk: Path, tmp_path: Path) -> None:
    """N10: it said "dnscost: No space left on device" (no file named), left run.json `running`
    without a word about it, and gave no --resume hint."""
    (tmp_path / "tiny.toml").write_text(SPEC)
    run = disk / "run"
    p = subprocess.Popen(
        [*DNSCOST, "run", "tiny.toml", "--output", str(run), "--no-report"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            try:
                if _trial_statuses(run).get(TRIALS[0]) == "done":
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)
        assert p.poll() is None, "the run ended before its first trial was seen done"
        done_first = (run / "trials" / TRIALS[0] / "trial.json").read_bytes()
        _fill(disk / "filler")
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 1, err
    lines = err.splitlines()
    assert "Traceback" not in err, err
    # The first write that failed, whichever it was (the meter's samples, the engine's
    # configuration, the trial's record), named.
    cause = next(line for line in lines if line.endswith(": No space left on device"))
    assert cause.startswith(f"dnscost: {run}/trials/{TRIALS[1]}/"), err
    assert (
        f"dnscost: {run / 'run.json'} still says running: it could not be rewritten (No space left on device)" in lines
    )
    assert lines[-1] == f"dnscost: resume with: dnscost run --resume {run}", err
    # The filesystem's word: run.json as it was after the first trial, nothing half written.
    assert _run_json(run)["status"] == "running"
    assert _trial_statuses(run)[TRIALS[0]] == "done"
    assert (run / "trials" / TRIALS[0] / "trial.json").read_bytes() == done_first
    assert not list(run.rglob("*.tmp"))

    (disk / "filler").unlink()
    r = subprocess.run(
        [*DNSCOST, "run", "--resume", str(run), "--no-report"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert _run_json(run)["status"] == "done"
    assert _trial_statuses(run) == dict.fromkeys(TRIALS, "done")
    assert (run / "trials" / TRIALS[0] / "trial.json").read_bytes() == done_first  # not measured again


def test_an_unwritable_trial_directory_marks_the_run_interrupted(disk: Path, tmp_path: Path) -> None:
    """N10: a run stopped by a write it could not make was `failed` (or left `running`)."""
    (tmp_path / "tiny.toml").write_text(SPEC)
    run = disk / "run"
    blocked = run / "trials" / TRIALS[1]
    blocked.mkdir(parents=True)
    subprocess.run(["chattr", "+i", str(blocked)], check=True)
    r = subprocess.run(
        [*DNSCOST, "run", "tiny.toml", "--output", str(run), "--no-report"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[-3:] == [
        f"dnscost: {blocked / 'trial.json'}: Operation not permitted",
        f"dnscost: {run / 'run.json'}: the run is marked interrupted",
        f"dnscost: resume with: dnscost run --resume {run}",
    ], r.stderr
    assert _run_json(run)["status"] == "interrupted"
    assert _trial_statuses(run) == {TRIALS[0]: "done"}


def test_the_meter_on_a_full_disk_stops_its_trial_naming_its_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sampling thread whose write failed died with a traceback on stderr mid-run; now
    sampling stops writing and ``stop`` raises the failure, naming the file (/dev/full: every
    write fails with ENOSPC)."""
    from dnscost.meter.energy import CpuPowerModel
    from dnscost.meter.sampler import Sampler

    died: list[object] = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    sampler = Sampler(
        Path("/dev/full"),
        start_monotonic=time.monotonic(),
        target_cgroup=None,
        target_pids=list,
        target_ports=[],
        target_cpus=[0],
        generator_pids=list,
        interval_s=0.02,
        energy=CpuPowerModel(),
    )
    sampler.start()
    time.sleep(0.1)
    with pytest.raises(OSError, match=r"No space left on device") as caught:
        sampler.stop()
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == "/dev/full"
    assert died == []


@pytest.mark.parametrize("data", ["text\n", b"bytes\n"])
def test_a_failed_atomic_write_leaves_no_partial_file_and_names_its_path(tmp_path: Path, data: str | bytes) -> None:
    """Every file dnscost rewrites in place (run.json, client.json, pageload.json, a root's
    manifest) goes through ``write_atomic``: the temporary copy is written, but moving it over
    ``path`` fails (``path`` is a directory), so the write raises an OSError naming ``path``,
    ``path`` is as it was and no ``.tmp`` is left beside it; a write that succeeds leaves the
    data, byte for byte, and no ``.tmp`` either."""
    from dnscost.results import write_atomic

    blocked = tmp_path / "run.json"
    (blocked / "inside").mkdir(parents=True)
    with pytest.raises(OSError) as caught:
        write_atomic(blocked, data)
    assert caught.value.filename == str(blocked)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"] and blocked.is_dir()
    done = tmp_path / "client.json"
    write_atomic(done, data)
    assert done.read_bytes() == (data.encode() if isinstance(data, str) else data)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["client.json", "run.json"]
