"""The resolution loop that drives a stub client: one fresh name resolved through the system
resolver (``getaddrinfo``, IPv4 only, so one A query) every ``delay`` seconds, on a fixed
schedule (a slow resolution does not push the next one back), for ``duration`` seconds. It
runs inside the lab's client namespace, whose ``resolv.conf`` points at the stub.

One JSON line per resolution: when it was due and started (µs since the Unix epoch), the
name, whether it resolved, and how long it took.

    python -m dnscost.lab.resolve --delay 1 --duration 60 --names 100000 --out r.jsonl
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = ["lab_name", "main"]


def lab_name(index: int, names: int, tld: str = "test") -> str:
    """The ``index``-th synthetic name of a responder serving ``names`` names under ``tld``
    (``q<digits>.<tld>``, digits as wide as ``names - 1``: the engine's naming)."""
    width = len(str(max(names - 1, 0)))
    return f"q{index % names:0{width}d}.{tld}"


def _resolve(name: str, due_us: int, out: list[str], lock: threading.Lock) -> None:
    start = time.time_ns() // 1000
    t0 = time.monotonic_ns()
    try:
        socket.getaddrinfo(name, None, family=socket.AF_INET, type=socket.SOCK_DGRAM)
        error = None
    except OSError as e:
        error = str(e)
    ms = (time.monotonic_ns() - t0) / 1e6
    line = json.dumps(
        {"due_unix_us": due_us, "t_unix_us": start, "name": name, "ok": error is None, "ms": ms, "error": error}
    )
    with lock:
        out.append(line)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dnscost.lab.resolve")
    p.add_argument("--delay", type=float, required=True, help="seconds between resolutions")
    p.add_argument("--duration", type=float, required=True, help="seconds to run")
    p.add_argument("--names", type=int, default=100_000, help="synthetic names the responder serves")
    p.add_argument("--tld", default="test")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    if a.delay <= 0 or a.duration <= 0:
        p.error("--delay and --duration must be positive")
    lines: list[str] = []
    lock = threading.Lock()
    start = time.monotonic()
    wall = time.time_ns() // 1000
    count = int(a.duration / a.delay - 1e-9) + 1
    with a.out.open("w") as f, ThreadPoolExecutor(max_workers=32) as pool:
        for k in range(count):
            due = start + k * a.delay
            time.sleep(max(0.0, due - time.monotonic()))
            pool.submit(_resolve, lab_name(k, a.names, a.tld), wall + int(k * a.delay * 1e6), lines, lock)
            with lock:
                for line in lines:
                    f.write(line + "\n")
                lines.clear()
            f.flush()
        pool.shutdown(wait=True)
        for line in lines:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
