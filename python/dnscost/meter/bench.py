"""What metering itself costs on this machine: ``python -m dnscost.meter.bench``.

Prints figures, asserts nothing (tests live in ``python/tests``):

- ``ss``: wall and CPU time of one :func:`~dnscost.meter.sockets.ss_sockets` call with
  ``--connections`` TCP connections open on 127.0.0.1 (each is two sockets, one of them matched
  by the port filter), opened by this process and closed at the end;
- the sampler: its own CPU time per second (both threads, and ``ss``), sampling one idle target
  process of ``--threads`` threads (every one's context switches and schedstat are read at
  every fast sample) for ``--seconds``.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dnscost.jsonl import read_records
from dnscost.meter.sampler import Sampler
from dnscost.meter.sockets import ss_sockets


def open_connections(n: int) -> tuple[socket.socket, list[socket.socket]]:
    """A listener on 127.0.0.1 and ``n`` accepted connections (2n sockets), bounded by the
    open-files limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * n + 64
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
        soft = min(need, hard)
    n = min(n, (soft - 64) // 2)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            c = socket.create_connection(listener.getsockname())
            s, _ = listener.accept()
            socks += [c, s]
    except OSError:
        for s in socks:
            s.close()
        listener.close()
        raise
    return listener, socks


def bench_ss(connections: int, runs: int = 10) -> None:
    listener, socks = open_connections(connections)
    try:
        port = listener.getsockname()[1]
        results = [ss_sockets([port]) for _ in range(runs)]
        matched = results[-1].memory.sockets
        wall = statistics.median(r.wall_us for r in results) / 1000
        cpu = statistics.median(r.cpu_us for r in results) / 1000
        print(
            f"ss: {len(socks) // 2} connections ({len(socks)} sockets, {matched} matched): "
            f"median {wall:.1f} ms wall, {cpu:.1f} ms CPU of ss per call ({runs} calls)"
        )
    finally:
        for s in socks:
            s.close()
        listener.close()


def bench_sampler(seconds: float, threads: int = 1) -> None:
    code = (
        "import socket,threading,time\n"
        f"[threading.Thread(target=time.sleep,args=(600,),daemon=True).start() for _ in range({threads - 1})]\n"
        "s=socket.socket();s.bind(('127.0.0.1',0));s.listen();print(s.getsockname()[1],flush=True)\n"
        "time.sleep(600)"
    )
    target = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout is not None
        port = int(target.stdout.readline())
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "meter.jsonl"
            sampler = Sampler(
                out,
                start_monotonic=time.monotonic(),
                target_cgroup=None,
                target_pids=lambda: [target.pid],
                target_ports=[port],
                target_cpus=[0],
                generator_pids=lambda: [],
            )
            cpu0 = time.process_time()
            sampler.start()
            time.sleep(seconds)
            end = sampler.stop()
            process_cpu = time.process_time() - cpu0
            records = read_records(out)
        fast = end["sampler_cpu_us"]["fast"] / 1000 / seconds
        slow = end["sampler_cpu_us"]["slow"] / 1000 / seconds
        ss = end["ss_cpu_us"] / 1000 / seconds
        print(
            f"sampler: a target of {threads} threads, {end['fast']} fast and {end['slow']} slow samples "
            f"in {seconds:.0f} s "
            f"({end['missed_fast']} missed, {end['errors']} errors); CPU per second: "
            f"fast thread {fast:.1f} ms, slow thread {slow:.1f} ms, ss {ss:.1f} ms "
            f"(whole Python process {process_cpu / seconds * 1000:.1f} ms); "
            f"{out.name}: {len(records)} records"
        )
    finally:
        target.kill()
        target.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connections", type=int, nargs="*", default=[2000], help="connection counts for the ss figure")
    p.add_argument("--seconds", type=float, default=10.0, help="how long to run the sampler")
    p.add_argument("--threads", type=int, default=1, help="threads of the idle target the sampler reads")
    args = p.parse_args()
    print(f"{os.cpu_count()} CPUs, {os.uname().release}")
    for n in args.connections:
        bench_ss(n)
    bench_sampler(args.seconds, args.threads)


if __name__ == "__main__":
    main()
