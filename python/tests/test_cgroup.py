from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import need
from dnscost.cgroup import (
    Cgroup,
    find_mounts,
    parse_flat_keyed,
    parse_mountinfo,
    parse_percpu,
    parse_proc_cgroup,
    tasks_percpu_file,
)
from dnscost.proc import Child


def test_v1_mounts_and_paths(fixtures: Path) -> None:
    m = parse_mountinfo((fixtures / "cgroup/mountinfo-v1.txt").read_text())
    assert m.version == 1
    assert m.v1["cpuacct"] == Path("/sys/fs/cgroup/cpuacct")
    assert m.v1["memory"] == Path("/sys/fs/cgroup/memory")
    own = parse_proc_cgroup((fixtures / "cgroup/proc-cgroup-v1.txt").read_text())
    assert own["memory"].startswith("/")
    assert own["cpuacct"] == "/"


def test_v2_mounts_and_paths(fixtures: Path) -> None:
    m = parse_mountinfo((fixtures / "cgroup/mountinfo-v2.txt").read_text())
    assert (m.version, m.unified) == (2, Path("/sys/fs/cgroup"))
    assert parse_proc_cgroup((fixtures / "cgroup/proc-cgroup-v2.txt").read_text()) == {
        "": "/system.slice/dnscost.service"
    }


def test_v2_readers_on_a_fake_tree(fixtures: Path, tmp_path: Path) -> None:
    (tmp_path / "memory.stat").write_text((fixtures / "cgroup/memory.stat-v2.txt").read_text())
    (tmp_path / "cpu.stat").write_text((fixtures / "cgroup/cpu.stat-v2.txt").read_text())
    (tmp_path / "memory.current").write_text("8192000\n")
    cg = Cgroup(2, {"unified": tmp_path})
    cpu = cg.cpu()
    assert (cpu.user_us, cpu.system_us, cpu.total_us) == (1_000_000, 500_000, 1_500_000)
    mem = cg.memory()
    assert (mem.usage_bytes, mem.anon_bytes, mem.kernel_bytes, mem.tcp_bytes, mem.slab_bytes) == (
        8_192_000,
        4_096_000,
        2_490_368,
        1_536_000,
        1_900_000,
    )


def test_flat_keyed_parser(fixtures: Path) -> None:
    stat = parse_flat_keyed((fixtures / "cgroup/memory.stat-v1.txt").read_text())
    assert "rss" in stat and all(isinstance(v, int) for v in stat.values())
    assert parse_flat_keyed("a 1\nb x\nc -2\n") == {"a": 1, "c": -2}


def test_live_cgroup_holds_a_pinned_child_and_meters_it(root: None, tmp_path: Path) -> None:
    cg = Cgroup.create(f"dnscost-test-{os.getpid()}")
    # 0.3 s of CPU, then 64 MiB written once a page: 16 384 pages the kernel faults in.
    burn = (
        "import time\nt=time.time()\nwhile time.time()-t<0.3: pass\n"
        f"b=bytearray(64<<20)\nb[::4096]=bytes([1])*16384\nopen({str(tmp_path / 'touched')!r},'w').close()\n"
        "time.sleep(30)"
    )
    child = Child("burner", ["python3", "-c", burn], log=tmp_path / "burn.log", cpus=[0], cgroup_procs=cg.procs_files())
    try:
        deadline = time.monotonic() + 5
        while cg.cpu().total_us < 200_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.pid in cg.pids()
        assert os.sched_getaffinity(child.pid) == {0}
        assert cg.cpu().total_us >= 200_000
        assert cg.memory().usage_bytes > 1_000_000
        while not (tmp_path / "touched").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        faults = cg.memory().page_faults
        assert faults is not None and faults >= 16_384, faults
    finally:
        child.stop()
        cg.remove()
    assert not child.alive()
    assert all(not d.exists() for d in cg.dirs.values())


@pytest.mark.load_timing
def test_the_run_time_of_every_task_on_a_core_covers_a_part_time_target(root: None, tmp_path: Path) -> None:
    """A process busy half the time on CPU 0 (10 ms on, 10 ms off): the run time of all tasks on
    CPU 0 (``tasks_percpu_file``, what the summary judges a core's busy time by) holds all of
    its cgroup's exact CPU time, and not much more on a machine where the test runs alone."""
    tasks_file = tasks_percpu_file()
    need(tasks_file is not None, "no v1 cpuacct hierarchy mounted")
    assert tasks_file is not None
    cg = Cgroup.create(f"dnscost-test-{os.getpid()}")
    duty = (
        "import time\nend=time.time()+1.5\n"
        "while time.time()<end:\n t=time.time()\n while time.time()-t<0.01: pass\n time.sleep(0.01)\n"
        "time.sleep(30)"
    )
    child = Child("duty", ["python3", "-c", duty], log=tmp_path / "duty.log", cpus=[0], cgroup_procs=cg.procs_files())
    try:
        time.sleep(0.2)
        wall0, tasks0, cg0 = (
            time.monotonic(),
            parse_percpu(tasks_file.read_text()),
            int((cg.dirs["cpuacct"] / "cpuacct.usage").read_text()) // 1000,
        )
        time.sleep(1.0)
        wall1, tasks1, cg1 = (
            time.monotonic(),
            parse_percpu(tasks_file.read_text()),
            int((cg.dirs["cpuacct"] / "cpuacct.usage").read_text()) // 1000,
        )
    finally:
        child.stop()
        cg.remove()
    wall_us = (wall1 - wall0) * 1e6
    on_core, burned = tasks1[0] - tasks0[0], cg1 - cg0
    assert 0.3 * wall_us < burned < 0.8 * wall_us, (burned, wall_us)
    assert burned * 0.99 <= on_core <= burned + 0.2 * wall_us, (on_core, burned, wall_us)


def test_parse_percpu() -> None:
    assert parse_percpu("1000 2500000 \n") == {0: 1, 1: 2500}


def test_stop_kills_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    code = "import signal,time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up',flush=True)\ntime.sleep(60)"
    child = Child("stubborn", ["python3", "-c", code], log=tmp_path / "s.log")
    child.wait_for(lambda: "up" in (tmp_path / "s.log").read_text(), 5, "starting")
    started = time.monotonic()
    child.stop(timeout=0.5)
    assert not child.alive() and time.monotonic() - started < 3


def _start_target(workdir: Path) -> tuple[subprocess.Popen[str], int]:
    """``dnscost target start builtin``, once it serves; returns it and the target's PID."""
    p = subprocess.Popen(
        [sys.executable, "-m", "dnscost.cli", "target", "start", "builtin", "--names", "100", "--dir", str(workdir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    lines: list[str] = []
    while not lines or lines[-1] != "}":
        line = p.stdout.readline()
        assert line, p.stderr.read() if p.stderr else ""
        lines.append(line.rstrip("\n"))
    return p, int(json.loads("\n".join(lines))["pid"])


def _cgroup_dirs(pid: int) -> list[Path]:
    """Where the kernel says ``pid`` is, in the hierarchies dnscost uses."""
    mounts = find_mounts()
    paths = parse_proc_cgroup(Path(f"/proc/{pid}/cgroup").read_text())
    if mounts.version == 1:
        return [mounts.v1[c] / paths[c].lstrip("/") for c in ("cpuacct", "memory")]
    assert mounts.unified is not None
    return [mounts.unified / paths[""].lstrip("/")]


def test_what_a_killed_dnscost_left_is_removed_by_the_next(root: None, tmp_path: Path) -> None:
    """kill -9 of ``dnscost target start`` leaves its target's cgroups (and a killed cluster
    worker its directory); the next ``target start`` removes them, one line each, and leaves
    those of a dnscost still running."""
    live, live_pid = _start_target(tmp_path / "live")
    killed, killed_pid = _start_target(tmp_path / "killed")
    worker = subprocess.Popen(
        [sys.executable, "-c", "import tempfile\nfrom dnscost.proc import owner_tag\n"
         "print(tempfile.mkdtemp(prefix=f'dnscost-w1-{owner_tag()}-'), flush=True)\nimport time\ntime.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert worker.stdout is not None
        workdir = Path(worker.stdout.readline().strip())
        left, kept = _cgroup_dirs(killed_pid), _cgroup_dirs(live_pid)
        assert all(d.name.startswith("dnscost-builtin-") for d in left + kept) and set(left).isdisjoint(kept)
        for p in (killed, worker):
            p.kill()  # SIGKILL: nothing of dnscost runs to clean up
            p.wait()
        deadline = time.monotonic() + 10
        while Path(f"/proc/{killed_pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # the target dies with dnscost (PR_SET_PDEATHSIG)
        assert not Path(f"/proc/{killed_pid}").exists()
        assert all(d.is_dir() for d in left) and workdir.is_dir()  # what the defect left
        nxt, _ = _start_target(tmp_path / "next")
        nxt.send_signal(signal.SIGINT)
        _, err = nxt.communicate(timeout=30)
        assert not any(d.exists() for d in left) and not workdir.exists()
        assert all(d.is_dir() for d in kept) and Path(f"/proc/{live_pid}").exists()
        said = [line for line in err.splitlines() if line.startswith("dnscost: removed ")]
        assert f"dnscost: removed {workdir}, left by PID {worker.pid}, gone" in said
        (line,) = [s for s in said if "cgroup" in s]
        assert line.startswith(f"dnscost: removed cgroup {left[0].name} (") and line.endswith(
            f"), left by PID {killed.pid}, gone"
        )
    finally:
        for p in (killed, worker):
            if p.poll() is None:
                p.kill()
                p.wait()
        live.send_signal(signal.SIGINT)
        live.wait(30)
