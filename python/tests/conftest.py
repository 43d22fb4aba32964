"""Shared fixtures. Tests that need root, a resolver or the engine say so, and are skipped
outside CI when what they need is missing (in CI, CI=true, they must run)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from stolen_cores import pytest_pyfunc_call, pytest_terminal_summary

__all__ = ["pytest_pyfunc_call", "pytest_terminal_summary"]  # hooks: see stolen_cores.py

FIXTURES = Path(__file__).parent / "fixtures"
IN_CI = os.environ.get("CI") == "true"


def need(condition: bool, reason: str) -> None:
    """Skips the test when `condition` is false, except in CI where that is a failure."""
    if not condition:
        if IN_CI:
            pytest.fail(f"CI must be able to run this test: {reason}")
        pytest.skip(reason)


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def root() -> None:
    need(os.geteuid() == 0, "needs root")


class Netns:
    """A network namespace of this test's own, with its loopback up; every process it starts
    there is stopped by PID, and the namespace removed."""

    def __init__(self, workdir: Path) -> None:
        self.name = f"dnscost-test-{os.getpid()}"
        self.workdir = workdir
        self.children: list[subprocess.Popen[bytes]] = []
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        subprocess.run(["ip", "netns", "exec", self.name, "ip", "link", "set", "lo", "up"], check=True)

    def start(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            child = subprocess.Popen(["ip", "netns", "exec", self.name, *argv], stdout=out, stderr=subprocess.STDOUT)
        self.children.append(child)
        return child

    def capture(self, pcap: Path, bpf: str, *, snaplen: int | None = None) -> subprocess.Popen[bytes]:
        """tcpdump on the namespace's loopback into ``pcap`` (filter ``bpf``), started and
        listening; stop it with SIGINT so that it writes what it holds."""
        log = pcap.with_suffix(".tcpdump.log")
        argv = ["tcpdump", "--immediate-mode", "-U", "-n", "-Z", "root", "-i", "lo"]
        argv += ["-s", str(snaplen)] if snaplen else []
        dump = self.start([*argv, "-w", str(pcap), bpf], log)
        wait_for(log, "listening on")
        return dump

    def run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.name, *argv], capture_output=True, text=True, timeout=timeout, check=False
        )

    def stop(self, child: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
        if child.poll() is None:
            child.send_signal(sig)
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(10)

    def close(self) -> None:
        for child in self.children:
            self.stop(child)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)


def wait_for(path: Path, text: str, count: int = 1, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text(errors="replace").count(text) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path.name}: no {text!r} after {timeout} s: {path.read_text(errors='replace')[-500:]}")
