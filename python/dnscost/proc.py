"""Processes dnscost starts: pinned to CPUs, placed in a cgroup before they run a single
instruction of their own, logged to a file, and always stopped, by PID, also on Ctrl-C or a
failure. Nothing dnscost did not start is ever signalled.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from dnscost.errors import MachineError

__all__ = ["Child", "parse_cpus", "stop_all"]

_live: set[Child] = set()


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

        def enter() -> None:
            # Runs in the child between fork and exec: only system calls, no Python locks.
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

    def wait_for(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Polls ``ready`` until it is true; fails if the process exits or time runs out."""
        from dnscost.errors import TargetError

        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise TargetError(f"{self.name} exited (code {self.popen.returncode}) {what}: {self.log_tail()}")
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
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout)
        _live.discard(self)
        if not self._log_file.closed:
            self._log_file.close()
        return self.popen.returncode


def stop_all() -> None:
    """Stops every child still running (at exit, on Ctrl-C, after a failure)."""
    for child in list(_live):
        child.stop(timeout=3.0)


atexit.register(stop_all)
