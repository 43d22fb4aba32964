"""The sampler: background threads that read the kernel's counters for the target, the
generator and the machine at a fixed rate and appends one JSON line per sample to a file.

Two kinds of sample, on two threads so that a slow ``ss`` never delays the fast ones:

``fast`` (every ``interval_s``, default 0.1 s)
    target CPU from its cgroup (the exact total, and the user/system split) and from
    ``/proc/PID/stat`` summed over its processes; cgroup
    memory (usage, anon, kernel, tcp, slab); thread count; its threads' wake-ups (context
    switches and schedstat runs, :class:`~dnscost.meter.procfs.TaskSched`, summed over every
    thread of every process, an exited thread's last reading kept); per-core CPU of every core
    (``/proc/stat``, and ``tasks_us``, the exact run time of every task on the core, where
    the v1 ``cpuacct`` hierarchy gives it: :func:`dnscost.cgroup.tasks_percpu_file`) and its
    NET_RX and NET_TX softirq counts (``/proc/softirqs``); the
    generator's CPU; UDP, TCP and TcpExt counters; system slab; ``/proc/net/sockstat``; energy.
``slow`` (every ``socket_interval_s``, default 1 s)
    RSS, PSS, USS and swap summed over the target's processes (``smaps_rollup`` walks every
    mapping: not free for a big resolver) and the memory of the target's sockets (``ss``). The
    slow thread also refreshes the lists of target and generator PIDs (``target_pids`` and
    ``generator_pids`` are called about once per ``socket_interval_s``, not at every sample)
    and of the target's threads.

Sample times are aligned on ``start_monotonic``: the fast samples fall on multiples of
``interval_s`` after it (``t_ms`` = 0, 100, 200, ... when on time), so with the engine started at
``start_monotonic`` they line up with its 1 s intervals. The first sample of each kind is taken
at once when started before that, and a last one by :meth:`Sampler.stop`, so that the whole
sampled span is covered. A slot that cannot be taken on time is skipped and counted
(``missed_fast``), never taken late in a burst; ``late_us`` records each sample's wake-up delay.

The file starts with a ``header`` record (format version, settings, energy source and model
coefficients) and ends with an ``end`` record (counts, errors, the sampler's own CPU time).
Every line is flushed when written: a crash keeps everything sampled until then.
:func:`dnscost.jsonl.read_records` reads the file back (a line cut short is skipped).

Cost, measured on the 2-vCPU development VM (``python -m dnscost.meter.bench``: one idle target
process with one listening port, no cgroup, 10 Hz fast and 1 Hz slow sampling, two runs): the
fast thread 5.2-5.6 ms of CPU per second (about 0.5 ms per sample; reading a v1 cgroup adds
0.2-0.4 ms per sample), the slow thread 1.6 ms per second, and the ``ss`` process 6-8 ms per
second (mostly its start-up), so about 1.5 % of one core in all. Each of the target's threads
adds about 20 µs per fast sample (its ``status`` and ``schedstat``), 0.2 ms per second. The
``/proc`` files read at every sample are kept open and re-read with ``pread`` (a quarter of the
cost of reopening them). The sampler runs wherever the calling process runs: pin that to the generator's cores, never to
the target's.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, cast

from dnscost.cgroup import Cgroup, parse_flat_keyed, parse_percpu, tasks_percpu_file
from dnscost.contract import CoreSample, FastSample, FastTarget, MeterEnd, MeterHeader, MeterRecord, SlowSample
from dnscost.errors import MachineError
from dnscost.meter import procfs
from dnscost.meter.energy import CpuPowerModel, RaplReader
from dnscost.meter.sockets import ss_sockets

__all__ = ["FORMAT_VERSION", "Sampler"]

FORMAT_VERSION = 1

_SLAB_KEYS = {"Slab": "slab_bytes", "SReclaimable": "sreclaimable_bytes", "SUnreclaim": "sunreclaim_bytes"}


def _cpu_sum(files: procfs.OpenFiles, pids: Sequence[int]) -> tuple[int, int, int, int]:
    """(user µs, system µs, processes, threads) summed over the live ones of ``pids``."""
    user = system = processes = threads = 0
    for pid in pids:
        text = files.read(f"/proc/{pid}/stat")
        if not text:
            continue
        st = procfs.parse_pid_stat(text)
        user += st.utime_us
        system += st.stime_us
        processes += 1
        threads += st.threads
    return user, system, processes, threads


class Sampler:
    """Samples a target (and the generator and the machine) into ``out``, one JSON line each.

    ``target_cgroup`` may be ``None`` (no cgroup: CPU and memory come from ``/proc`` only).
    ``target_ports`` are the target's listening ports (its sockets are those with one of them
    as local port). ``target_cpus`` are the cores it is pinned to (the energy model charges
    their idle power). ``energy``: a :class:`RaplReader` to measure, a :class:`CpuPowerModel`
    to estimate, or ``None`` for RAPL when readable and the default model otherwise. The model's
    estimate for the target is written in every case (``energy_model_j``), next to RAPL's when
    RAPL is read. ``net`` is the ``/proc/.../net`` directory of the target's network namespace
    and ``ss_prefix`` a command prefix to run ``ss`` in it.
    """

    def __init__(
        self,
        out: Path,
        *,
        start_monotonic: float,
        target_cgroup: Cgroup | None,
        target_pids: Callable[[], list[int]],
        target_ports: Sequence[int],
        target_cpus: Sequence[int],
        generator_pids: Callable[[], list[int]],
        interval_s: float = 0.1,
        socket_interval_s: float = 1.0,
        energy: RaplReader | CpuPowerModel | None = None,
        net: Path = Path("/proc/net"),
        ss_prefix: Sequence[str] = (),
    ) -> None:
        if interval_s <= 0 or socket_interval_s <= 0:
            raise ValueError("sampling intervals must be positive")
        self.out = out
        self.start_monotonic = start_monotonic
        self.cgroup = target_cgroup
        self._target_pids_fn = target_pids
        self._generator_pids_fn = generator_pids
        self.ports = list(target_ports)
        self.cpus = list(target_cpus)
        self.interval_s = interval_s
        self.socket_interval_s = socket_interval_s
        self.net = net
        self.ss_prefix = list(ss_prefix)
        tasks = tasks_percpu_file()
        self._tasks_file = str(tasks) if tasks is not None else None
        if energy is None:
            rapl = RaplReader()
            self.rapl: RaplReader | None = rapl if rapl.available() else None
            self.model = CpuPowerModel()
        elif isinstance(energy, RaplReader):
            if not energy.available():
                raise MachineError(f"RAPL is not readable under {energy.root} (needs root and powercap)")
            self.rapl, self.model = energy, CpuPowerModel()
        else:
            self.rapl, self.model = None, energy
        self.energy_source = "rapl" if self.rapl else "model"

        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._threads: list[threading.Thread] = []
        self._files = procfs.OpenFiles()  # used by the fast thread only
        self._target_pids: list[int] = []
        self._target_tasks: list[tuple[int, str, str]] = []
        """The target's threads: (TID, its status file, its schedstat file)."""
        self._tasks_seen: dict[int, tuple[str, str, procfs.TaskSched]] = {}
        """Every thread read so far that has not exited, by TID: its files and last reading."""
        self._tasks_gone = procfs.TaskSched(0, 0, 0, 0)
        self._schedstat = Path("/proc/self/schedstat").exists()
        self._generator_pids: list[int] = []
        self._generator_seen: dict[int, tuple[int, int]] = {}
        self._model_base: tuple[float, int] | None = None
        self.counts = {"fast": 0, "slow": 0, "missed_fast": 0, "missed_slow": 0, "errors": 0}
        self.first_error: str | None = None
        self.write_error: OSError | None = None
        """The first write of ``out`` that failed (a full disk): nothing more is written, and
        :meth:`stop` raises it."""
        self._cpu_ns = {"fast": 0, "slow": 0}
        self._ss_cpu_us = 0

    # --- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Writes the header and starts sampling."""
        if self._threads:
            raise RuntimeError("sampler already started")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.out.open("w")
        self._refresh_pids()
        self._write(self._header())
        self._threads = [
            threading.Thread(target=self._loop, args=("fast", self.interval_s, self._fast), daemon=True),
            threading.Thread(target=self._loop, args=("slow", self.socket_interval_s, self._slow), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def stop(self) -> MeterEnd:
        """Stops sampling, takes a last fast and slow sample (so that a window ending now is
        covered), writes the ``end`` record and returns it. Raises :attr:`write_error`, naming
        ``out``, when a record could not be written."""
        self._stop.set()
        for t in self._threads:
            t.join()
        if self._threads and self._file is not None:
            now = time.monotonic()
            self._take("fast", self._fast, now)
            self._take("slow", self._slow, now)
        end: MeterEnd = {
            "type": "end",
            "t_ms": self._t_ms(time.monotonic()),
            "fast": self.counts["fast"],
            "slow": self.counts["slow"],
            "missed_fast": self.counts["missed_fast"],
            "missed_slow": self.counts["missed_slow"],
            "errors": self.counts["errors"],
            "first_error": self.first_error,
            "sampler_cpu_us": {k: v // 1000 for k, v in self._cpu_ns.items()},
            "ss_cpu_us": self._ss_cpu_us,
        }
        if self._file is not None:
            self._write(end)
            with contextlib.suppress(OSError):  # what could not be written is write_error
                self._file.close()
            self._file = None
        self._files.close()
        if self.write_error is not None:
            raise self.write_error
        return end

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # --- internals -----------------------------------------------------------------------

    def _t_ms(self, now: float) -> int:
        return round((now - self.start_monotonic) * 1000)

    def _write(self, record: MeterRecord) -> None:
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self._lock:
            if self._file is not None and self.write_error is None:
                try:
                    self._file.write(line)
                    self._file.flush()
                except OSError as e:  # in a sampling thread too: kept for stop(), no traceback
                    self.write_error = OSError(e.errno, e.strerror or str(e), str(self.out))

    def _header(self) -> MeterHeader:
        return {
            "type": "header",
            "format": FORMAT_VERSION,
            "interval_ms": round(self.interval_s * 1000),
            "socket_interval_ms": round(self.socket_interval_s * 1000),
            "clk_tck": procfs.CLK_TCK,
            "page_size": procfs.PAGE_SIZE,
            "cpus_online": sorted(procfs.read_proc_stat()),
            "target_cpus": self.cpus,
            "target_ports": self.ports,
            "cgroup": None
            if self.cgroup is None
            else {"version": self.cgroup.version, "dirs": {k: str(v) for k, v in self.cgroup.dirs.items()}},
            "energy_source": self.energy_source,
            "energy": self.rapl.describe() if self.rapl else self.model.describe(),
            "energy_model": self.model.describe(),
        }

    def refresh_pids(self) -> None:
        """Reads the target's and the generator's PIDs now (call it right after starting a
        process to meter, rather than waiting for the next socket sample)."""
        self._refresh_pids()

    def _refresh_pids(self) -> None:
        self._target_pids = list(self._target_pids_fn())
        self._generator_pids = list(self._generator_pids_fn())
        self._target_tasks = [
            (tid, f"/proc/{pid}/task/{tid}/status", f"/proc/{pid}/task/{tid}/schedstat")
            for pid in self._target_pids
            for tid in procfs.thread_ids(pid)
        ]

    def _loop(self, kind: str, interval: float, take: Callable[[float], FastSample | SlowSample]) -> None:
        # The first sample is taken at once (so that a window starting now is covered), the
        # next ones on the grid start_monotonic + k * interval.
        now = time.monotonic()
        if now <= self.start_monotonic:
            due, next_k = self.start_monotonic, 1
        else:
            due, next_k = now, math.floor((now - self.start_monotonic) / interval) + 1
        while True:
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            self._take(kind, take, due)
            now_k = math.ceil((time.monotonic() - self.start_monotonic) / interval)
            if now_k > next_k:  # slots already past: skipped, not taken late
                self.counts[f"missed_{kind}"] += now_k - next_k
                next_k = now_k
            due = self.start_monotonic + next_k * interval
            next_k += 1

    def _take(self, kind: str, take: Callable[[float], FastSample | SlowSample], due: float) -> None:
        cpu0 = time.thread_time_ns()
        try:
            record: FastSample | SlowSample | None = take(due)
        except Exception as e:  # a sample must never kill the sampler; counted and reported
            with self._lock:
                self.counts["errors"] += 1
                if self.first_error is None:
                    self.first_error = f"{kind}: {type(e).__name__}: {e}"
            record = None
        self._cpu_ns[kind] += time.thread_time_ns() - cpu0
        if record is not None:
            record["sampler_cpu_us"] = self._cpu_ns[kind] // 1000
            self._write(record)
            self.counts[kind] += 1

    def _fast(self, due: float) -> FastSample:
        now = time.monotonic()
        target: dict[str, int | None] = {}  # FastTarget's fields, the cgroup's first
        cgroup_cpu: int | None = None
        mem = None
        if self.cgroup is not None:
            cpu = self.cgroup.cpu()
            cgroup_cpu = self._cgroup_cpu_total_us(self.cgroup)
            if cgroup_cpu is None:
                cgroup_cpu = cpu.total_us
            mem = self.cgroup.memory()
            target.update(
                cgroup_cpu_total_us=cgroup_cpu,
                cgroup_cpu_user_us=cpu.user_us,
                cgroup_cpu_system_us=cpu.system_us,
            )
        if self.cgroup is not None and mem is not None:
            target.update(
                cgroup_usage_bytes=mem.usage_bytes,
                cgroup_anon_bytes=mem.anon_bytes,
                cgroup_kernel_bytes=mem.kernel_bytes,
                cgroup_tcp_bytes=mem.tcp_bytes,
                cgroup_slab_bytes=mem.slab_bytes,
                cgroup_page_faults=mem.page_faults,
            )
        files = self._files
        target_pids, generator_pids, tasks = self._target_pids, self._generator_pids, self._target_tasks
        keep = {*self._fixed_files, *(f"/proc/{p}/stat" for p in (*target_pids, *generator_pids))}
        keep.update(path for _, *paths in tasks for path in paths)
        keep.update(path for *paths, _ in self._tasks_seen.values() for path in paths)
        if self.cgroup is not None:
            keep |= {str(d / f) for d in self.cgroup.dirs.values() for f in ("cpuacct.usage", "cpu.stat")}
        files.retain(keep)
        user, system, processes, threads = _cpu_sum(files, target_pids)
        target.update(proc_cpu_user_us=user, proc_cpu_system_us=system, processes=processes, threads=threads)
        sched = self._task_sched(files, tasks)
        target.update(voluntary_ctxt_switches=sched.voluntary, nonvoluntary_ctxt_switches=sched.involuntary)
        if self._schedstat:
            target.update(sched_runs=sched.runs, sched_run_delay_us=sched.run_delay_us)
        gprocesses = 0
        for pid in generator_pids:
            # Generator processes come and go within a trial; each one's last reading is kept
            # once it has exited, so the generator's CPU only ever grows.
            text = files.read(f"/proc/{pid}/stat")
            if text:
                st = procfs.parse_pid_stat(text)
                self._generator_seen[pid] = (st.utime_us, st.stime_us)
                gprocesses += 1
        guser = sum(u for u, _ in self._generator_seen.values())
        gsystem = sum(sy for _, sy in self._generator_seen.values())
        tasks_text = self._files.read(self._tasks_file) if self._tasks_file else None
        tasks_us = parse_percpu(tasks_text) if tasks_text else {}
        softirqs = procfs.parse_softirqs(self._must_read("/proc/softirqs"), ("NET_RX", "NET_TX"))
        net_rx, net_tx = softirqs.get("NET_RX", {}), softirqs.get("NET_TX", {})
        cores: list[CoreSample] = []
        for n, c in sorted(procfs.parse_proc_stat(self._must_read("/proc/stat")).items()):
            core: CoreSample = {
                "cpu": n,
                "user_us": c.user_us,
                "nice_us": c.nice_us,
                "system_us": c.system_us,
                "idle_us": c.idle_us,
                "iowait_us": c.iowait_us,
                "irq_us": c.irq_us,
                "softirq_us": c.softirq_us,
                "steal_us": c.steal_us,
            }
            if n in tasks_us:
                core["tasks_us"] = tasks_us[n]
            if n in net_rx and n in net_tx:
                core["net_rx_softirqs"], core["net_tx_softirqs"] = net_rx[n], net_tx[n]
            cores.append(core)
        protos = ("Udp", "Tcp", "TcpExt")
        net = procfs.parse_net_counters(self._must_read(f"{self.net}/snmp"), protos)
        net.update(procfs.parse_net_counters(self._must_read(f"{self.net}/netstat"), protos))
        meminfo = procfs.parse_meminfo(self._must_read("/proc/meminfo"), _SLAB_KEYS)
        sockstat = procfs.parse_sockstat(self._must_read(f"{self.net}/sockstat"))
        record: FastSample = {
            "type": "fast",
            "t_ms": self._t_ms(due),
            "late_us": round((now - due) * 1e6),
            "target": cast(FastTarget, target),
            "generator": {"cpu_user_us": guser, "cpu_system_us": gsystem, "processes": gprocesses},
            "cores": cores,
            "udp": procfs.select_counters(net, "Udp", procfs.UDP_KEYS),
            "tcp": procfs.select_counters(net, "Tcp", procfs.TCP_KEYS),
            "tcpext": procfs.select_counters(net, "TcpExt", procfs.TCPEXT_KEYS),
            "meminfo": {v: meminfo[k] for k, v in _SLAB_KEYS.items() if k in meminfo},
            "sockstat": {k: getattr(sockstat, k) for k in sockstat.__dataclass_fields__},
        }
        # Energy: the model's estimate for the target's CPU since the first sample, always;
        # RAPL's cumulative joules for the whole package when it is read.
        target_cpu = cgroup_cpu if cgroup_cpu is not None else user + system
        if self._model_base is None:
            self._model_base = (due, target_cpu)
        base_t, base_cpu = self._model_base
        model_j = self.model.energy_j(target_cpu - base_cpu, due - base_t, len(self.cpus))
        record["energy_model_j"] = round(model_j, 6)
        if self.rapl is not None:
            reading = self.rapl.read()
            record["energy_j"] = round(reading.energy_j, 6)
            record["energy_domains_j"] = {k: round(v, 6) for k, v in reading.domains_j.items()}
        else:
            record["energy_j"] = record["energy_model_j"]
        record["energy_source"] = self.energy_source
        return record

    def _task_sched(self, files: procfs.OpenFiles, tasks: Sequence[tuple[int, str, str]]) -> procfs.TaskSched:
        """The target's threads' context switches and schedstat, summed over the live ones
        and the last reading of every one seen that has exited since (a thread's counts leave
        ``/proc`` with it: without it the sum would fall). A thread read once is read until
        it exits, listed or not: its files, kept open, fail then and only then (a kept
        ``/proc`` file stays bound to its thread), so none is counted twice."""
        paths = {tid: (status_path, schedstat_path) for tid, status_path, schedstat_path in tasks}
        for tid, (status_path, schedstat_path, _) in self._tasks_seen.items():
            paths.setdefault(tid, (status_path, schedstat_path))
        live: dict[int, tuple[str, str, procfs.TaskSched]] = {}
        for tid, (status_path, schedstat_path) in paths.items():
            status = files.read(status_path)
            schedstat = files.read(schedstat_path) if self._schedstat else None
            if status and (schedstat or not self._schedstat):
                live[tid] = (status_path, schedstat_path, procfs.parse_task_sched(status, schedstat))
        for tid in self._tasks_seen.keys() - live.keys():
            self._tasks_gone += self._tasks_seen.pop(tid)[2]
        self._tasks_seen.update(live)
        return sum((reading for _, _, reading in live.values()), self._tasks_gone)

    def _cgroup_cpu_total_us(self, cgroup: Cgroup) -> int | None:
        """The cgroup's exact CPU time (v1 ``cpuacct.usage``, v2 ``cpu.stat`` ``usage_usec``,
        both from the scheduler's runtime accounting). The user/system split beside it is
        sampled at the scheduler tick (v1: its sum can differ from this by a few percent) or
        scaled to this total (v2)."""
        if cgroup.version == 1:
            text = self._files.read(str(cgroup.dirs["cpuacct"] / "cpuacct.usage"))
            return int(text) // 1000 if text and text.strip().isdigit() else None
        text = self._files.read(str(cgroup.dirs["unified"] / "cpu.stat"))
        return parse_flat_keyed(text).get("usage_usec") if text else None

    @property
    def _fixed_files(self) -> tuple[str, ...]:
        fixed = (
            "/proc/stat",
            "/proc/softirqs",
            "/proc/meminfo",
            f"{self.net}/snmp",
            f"{self.net}/netstat",
            f"{self.net}/sockstat",
        )
        return (*fixed, self._tasks_file) if self._tasks_file else fixed

    def _must_read(self, path: str) -> str:
        text = self._files.read(path)
        if text is None:
            raise FileNotFoundError(path)
        return text

    def _slow(self, due: float) -> SlowSample:
        self._refresh_pids()
        smaps = procfs.Smaps(0, 0, 0, 0)
        processes = 0
        for pid in self._target_pids:
            s = procfs.read_smaps_rollup(pid)
            if s is not None:
                smaps += s
                processes += 1
        record: SlowSample = {
            "type": "slow",
            "t_ms": self._t_ms(due),
            "target": {
                "rss_bytes": smaps.rss_bytes,
                "pss_bytes": smaps.pss_bytes,
                "uss_bytes": smaps.uss_bytes,
                "swap_bytes": smaps.swap_bytes,
                "processes": processes,
            },
        }
        if self.ports:
            run = ss_sockets(self.ports, command_prefix=self.ss_prefix)
            self._ss_cpu_us += run.cpu_us
            record["sockets"] = run.memory.to_dict()
            record["ss_wall_us"] = run.wall_us
            record["ss_cpu_us"] = run.cpu_us
        return record
