"""Processes dnscost starts: pinned to CPUs, placed in a cgroup before they run a single
instruction of their own, logged to a file, and always stopped, by PID, also on Ctrl-C or a
failure. Nothing dnscost did not start is ever signalled.

Children die with dnscost: each asks the kernel for SIGKILL when its parent goes
(``PR_SET_PDEATHSIG``), so a ``kill -9`` of dnscost leaves no resolver, responder or engine
running on the target's cores. A run also keeps a :class:`Ledger` of what it started (PID with
its start time, cgroups), from which a resume stops a dead run's leftovers.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from dnscost.errors import MachineError, UsageError
from dnscost.jsonl import parse_lines, read_lines

__all__ = [
    "Child",
    "Ledger",
    "exit_text",
    "last_line",
    "owner_gone",
    "owner_tag",
    "parse_cpus",
    "process_state",
    "remove_orphan_dirs",
    "stop_all",
    "use_ledger",
]

_live: set[Child] = set()

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def start_time(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot), which tells a process from a later
    one that reuses its PID; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text.rpartition(")")[2].split()[19])


OWNED = re.compile(r"dnscost-.+-pid(\d+)-(\d+)-")
"""A name made with :func:`owner_tag`: its owner's PID and start time."""


def owner_tag() -> str:
    """``pidPID-START`` of this process, put in the names of what it leaves on the machine (its
    targets' cgroups, a cluster worker's directory) so that a later dnscost can tell when their
    owner is gone (:func:`owner_gone`): the start time tells it from a later process reusing
    the PID."""
    pid = os.getpid()
    return f"pid{pid}-{start_time(pid) or 0}"


def owner_gone(name: str) -> int | None:
    """The owner's PID when ``name`` carries an :func:`owner_tag` whose process no longer runs;
    None when it runs, or when the name carries no tag (never judged)."""
    found = OWNED.match(name)
    if found is None or start_time(int(found.group(1))) == int(found.group(2)):
        return None
    return int(found.group(1))


def remove_orphan_dirs(parent: Path | None = None) -> list[str]:
    """Removes the directories ``dnscost-*-pidPID-START-*`` under ``parent`` (the temporary
    directory) whose owner is gone: a cluster worker's, when a SIGKILL of ``dnscost load``
    took the worker with it. One line per directory removed."""
    lines = []
    for path in sorted((parent or Path(tempfile.gettempdir())).glob("dnscost-*")):
        pid = owner_gone(path.name)
        if pid is not None and path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            lines.append(f"removed {path}, left by PID {pid}, gone")
    return lines


class Ledger:
    """What one run started, one JSON line per process or cgroup, appended as it happens
    (``children.jsonl`` in the run directory). A resume reads it to stop what a dead run left."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, entry: dict[str, object]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(entry) + "\n")

    def entries(self) -> list[dict[str, object]]:
        return [line.record for line in parse_lines(read_lines(self.path)) if line.record is not None]

    def stop_leftovers(self, timeout: float = 5.0) -> list[str]:
        """Kills every recorded process still running (the same process: PID and start time
        match) with its process group, then removes the recorded cgroups. Returns what it
        stopped, one description each. The ledger is emptied."""
        stopped: list[str] = []
        entries = self.entries()
        for e in entries:
            pid, started = e.get("pid"), e.get("start_time")
            if not isinstance(pid, int) or started is None or start_time(pid) != started:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
            while start_time(pid) == started and time.monotonic() < deadline:
                time.sleep(0.05)
            stopped.append(f"{e.get('name')} (PID {pid})")
        for e in entries:
            dirs = e.get("cgroup_dirs")
            for d in dirs if isinstance(dirs, list) else []:
                path = Path(str(d))
                deadline = time.monotonic() + timeout
                while path.exists() and time.monotonic() < deadline:
                    try:
                        path.rmdir()
                        stopped.append(f"cgroup {path.name}")
                    except OSError:
                        time.sleep(0.05)
        self.path.unlink(missing_ok=True)
        return stopped


_ledger: Ledger | None = None


def use_ledger(ledger: Ledger | None) -> None:
    """Records every child started from now on (and every cgroup made for one) in ``ledger``."""
    global _ledger
    _ledger = ledger


def record_cgroup(dirs: Sequence[Path]) -> None:
    """Notes a cgroup made for a child in the current ledger, if any."""
    if _ledger is not None:
        _ledger.record({"cgroup_dirs": [str(d) for d in dirs]})


def parse_cpus(text: str) -> list[int]:
    """``0``, ``0,2`` or ``1-3`` into a list of CPU numbers."""
    cpus: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        a, sep, b = part.partition("-")
        if not a.isdigit() or (sep and not b.isdigit()):
            raise ValueError(f"{part!r} is not a CPU or a range of CPUs")
        cpus.extend(range(int(a), int(b) + 1) if sep else [int(a)])
    return cpus


class Child:
    """One process started by dnscost."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log: Path,
        cpus: Sequence[int] | None = None,
        cgroup_procs: Sequence[Path] = (),
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        stdout: int | IO[bytes] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = log.open("ab")
        procs = [str(p) for p in cgroup_procs]
        cpu_set = set(cpus) if cpus else None
        if cpu_set:
            usable = os.sched_getaffinity(0) | set(range(os.cpu_count() or 1))
            if not cpu_set <= usable:
                self._log_file.close()
                raise UsageError(f"{name}: CPUs {sorted(cpu_set - usable)} do not exist on this machine")
        parent = os.getpid()

        def enter() -> None:
            # Runs in the child between fork and exec: only system calls, no Python locks.
            # Die with dnscost (the kernel sends SIGKILL when the forking thread's process ends);
            # if dnscost is already gone, do not start at all.
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:
                os._exit(1)
            if cpu_set:
                os.sched_setaffinity(0, cpu_set)
            for path in procs:
                fd = os.open(path, os.O_WRONLY)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)

        try:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file if stdout is None else stdout,
                stderr=self._log_file,
                cwd=cwd,
                env=env,
                start_new_session=True,
                preexec_fn=enter,
            )
        except FileNotFoundError as e:
            self._log_file.close()
            raise MachineError(f"{name}: {self.argv[0]} not found (run scripts/setup)") from e
        except (OSError, subprocess.SubprocessError) as e:
            self._log_file.close()
            raise MachineError(f"{name}: cannot start {self.argv[0]}: {e}") from e
        _live.add(self)
        if _ledger is not None:
            _ledger.record({"name": name, "pid": self.popen.pid, "start_time": start_time(self.popen.pid)})

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])

    def last_words(self, *, first_error: bool = True) -> str:
        """How the process ended, in one line: its exit code or the signal that killed it and,
        unless a signal sent from outside killed it, a line of its log that is not a JSON record
        (its ``listening`` records, say), trimmed: the first that says ``error`` (the cause,
        where a server goes on to say that it gives up), else the last; with ``first_error``
        false always the last (the engine's last line is its reason)."""
        ended = exit_text(self.popen.returncode)
        code = self.popen.returncode
        if code is not None and code < 0 and -code in _OUTSIDE_SIGNALS:
            return ended  # a signal from outside: nothing the process wrote says why
        line = last_line(self.log, first_error=first_error)
        return f"{ended}: {line}" if line else ended

    def wait_for(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Polls ``ready`` until it is true; fails if the process exits or time runs out."""
        from dnscost.errors import TargetError

        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise TargetError(f"{self.name} ended {what}: {self.last_words()}")
            try:
                if ready():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TargetError(f"{self.name} not ready after {timeout:.0f} s {what}: {self.log_tail()}")
            time.sleep(0.05)

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL of the child's own process group after ``timeout``."""
        if self.alive():
            try:
                self.popen.send_signal(signal.SIGTERM)
                # A stopped process (SIGSTOP) takes SIGTERM only once continued.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGCONT)
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout)
        _live.discard(self)
        if not self._log_file.closed:
            self._log_file.close()
        return self.popen.returncode


_OUTSIDE_SIGNALS = {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}
"""Signals a process is sent by others (a user, the OOM killer, a supervisor): its log does not
say why it got them."""


def exit_text(code: int | None) -> str:
    """``exited with code 3``, ``killed by signal 9 (SIGKILL)``, or ``still running``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            return f"killed by signal {-code}"
        return f"killed by signal {-code} ({name})"
    return f"exited with code {code}"


def last_line(log: Path, width: int = 200, *, first_error: bool = False) -> str:
    """The last line of ``log`` that is neither empty nor a JSON record, at most ``width``
    characters ("" if none); with ``first_error``, the first such line that says ``error`` if
    there is one (unbound: "unbound.conf:2: error: unknown keyword …" before "fatal error: Could
    not read config file …")."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    texts = [t for line in lines if (t := line.strip().removeprefix("dnscost-engine: ")) and not t.startswith("{")]
    errors = [t for t in texts if _ERROR.search(t)] if first_error else []
    text = errors[0] if errors else texts[-1] if texts else ""
    return text if len(text) <= width else text[: width - 1] + "…"


_ERROR = re.compile(r"\berror\b", re.IGNORECASE)


def process_state(pid: int) -> str | None:
    """The state letter of ``/proc/PID/stat`` (R, S, D, T stopped, t traced, Z, ...), None
    when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[0] if fields else None


def stop_all() -> None:
    """Stops every child still running (at exit, on Ctrl-C, after a failure)."""
    for child in list(_live):
        child.stop(timeout=3.0)


atexit.register(stop_all)
