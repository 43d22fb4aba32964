"""Parsers for the ``/proc`` files the meter reads, and the small readers around them.

Every ``parse_*`` function is pure (text in, values out) and tested on files captured from a
real machine (``python/tests/fixtures/meter/``). Every ``read_*`` function reads one file and
returns ``None`` when the process or the file is gone, which is normal while sampling a
process tree that changes.

Times are returned in microseconds (the kernel counts them in ``USER_HZ`` ticks, usually
100 per second, so they move in steps of 10 000 µs); sizes in bytes.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CLK_TCK",
    "PAGE_SIZE",
    "TCPEXT_KEYS",
    "TCP_KEYS",
    "UDP_KEYS",
    "CoreTimes",
    "OpenFiles",
    "PidStat",
    "Smaps",
    "Sockstat",
    "TaskSched",
    "parse_meminfo",
    "parse_net_counters",
    "parse_pid_stat",
    "parse_proc_stat",
    "parse_smaps_rollup",
    "parse_sockstat",
    "parse_softirqs",
    "parse_task_sched",
    "process_tree",
    "read_meminfo",
    "read_net_counters",
    "read_pid_stat",
    "read_proc_stat",
    "read_smaps_rollup",
    "read_sockstat",
    "select_counters",
    "thread_ids",
]

CLK_TCK = os.sysconf("SC_CLK_TCK")
"""Ticks per second of the times in ``/proc/PID/stat`` and ``/proc/stat`` (``USER_HZ``)."""
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

UDP_KEYS = ("InDatagrams", "NoPorts", "InErrors", "OutDatagrams", "RcvbufErrors", "SndbufErrors", "MemErrors")
"""``Udp:`` counters of ``/proc/net/snmp`` the meter keeps. ``RcvbufErrors``: datagrams dropped
because a socket's receive buffer was full (also counted in ``InErrors``)."""
TCP_KEYS = (
    "ActiveOpens",
    "PassiveOpens",
    "AttemptFails",
    "EstabResets",
    "CurrEstab",
    "RetransSegs",
    "InErrs",
    "OutRsts",
)
"""``Tcp:`` counters of ``/proc/net/snmp`` (``CurrEstab`` is a gauge, the others count up)."""
TCPEXT_KEYS = (
    "ListenOverflows",
    "ListenDrops",
    "TCPBacklogDrop",
    "TCPReqQFullDrop",
    "TCPReqQFullDoCookies",
    "SyncookiesSent",
    "TCPRcvQDrop",
    "PruneCalled",
    "TCPAbortOnMemory",
    "TCPMemoryPressures",
    "TCPTimeouts",
    "TW",
)
"""``TcpExt:`` counters of ``/proc/net/netstat``. ``ListenOverflows``: SYNs or ACKs dropped
because a listener's accept queue was full; ``ListenDrops`` counts those and every other drop
at a listener; ``TCPBacklogDrop``: segments dropped because a socket's backlog was full;
``TCPReqQFullDrop``: SYNs dropped because the SYN queue was full (no syncookies)."""


def _ticks_to_us(ticks: int, clk_tck: int) -> int:
    return ticks * 1_000_000 // clk_tck


_CHUNK = 65536


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None


class OpenFiles:
    """Files re-read at every sample, kept open and read with ``pread`` from offset 0: a
    quarter of the cost of open, read, close (about 8 µs instead of 30 per file here). A kept
    ``/proc/PID/...`` file stays bound to its process: once that exits, reading fails
    (``None``) rather than reading a new process that reused the PID. A read shorter than
    asked for is the end: the kernel writes a ``/proc`` or cgroup file whole into its buffer,
    and asking again past it would make it write the whole file once more, for nothing
    (twice the cost: 19 µs instead of 11 for a thread's ``status``)."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

    def read(self, path: str) -> str | None:
        fd = self._fds.get(path)
        try:
            if fd is None:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                self._fds[path] = fd
            chunks, offset = [os.pread(fd, _CHUNK, 0)], 0
            while len(chunks[-1]) == _CHUNK:
                offset += _CHUNK
                chunks.append(os.pread(fd, _CHUNK, offset))
        except OSError:  # gone (ENOENT, ESRCH)
            self.forget(path)
            return None
        return b"".join(chunks).decode()

    def forget(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def retain(self, paths: Collection[str]) -> None:
        """Closes every file not in ``paths``."""
        for path in [p for p in self._fds if p not in paths]:
            self.forget(path)

    def close(self) -> None:
        self.retain(())


# --- /proc/PID/stat ----------------------------------------------------------------------


@dataclass(frozen=True)
class PidStat:
    """One process from ``/proc/PID/stat``: its CPU time summed over all its threads, live and
    exited (not its children's), and its thread count."""

    pid: int
    comm: str
    state: str
    ppid: int
    utime_us: int
    stime_us: int
    threads: int
    starttime_ticks: int


def parse_pid_stat(text: str, clk_tck: int = CLK_TCK) -> PidStat:
    """``/proc/PID/stat``. The command name may hold spaces and parentheses, so the fields are
    counted from the last ``)``."""
    pid, _, rest = text.partition(" (")
    comm, _, tail = rest.rpartition(") ")
    f = tail.split()
    # f[0] is field 3 (state) of proc(5): utime is field 14, stime 15, num_threads 20, starttime 22.
    return PidStat(
        pid=int(pid),
        comm=comm,
        state=f[0],
        ppid=int(f[1]),
        utime_us=_ticks_to_us(int(f[11]), clk_tck),
        stime_us=_ticks_to_us(int(f[12]), clk_tck),
        threads=int(f[17]),
        starttime_ticks=int(f[19]),
    )


def read_pid_stat(pid: int, proc: Path = Path("/proc")) -> PidStat | None:
    text = _read(proc / str(pid) / "stat")
    return parse_pid_stat(text) if text else None


# --- /proc/PID/task/TID/status and schedstat -------------------------------------------------


@dataclass(frozen=True)
class TaskSched:
    """How often a thread was taken off a CPU and put back on one (summed over threads with
    ``+``). From ``/proc/PID/task/TID/status``: ``voluntary`` (``voluntary_ctxt_switches``:
    it blocked, on a socket, an ``epoll_wait``, a futex, a sleep; each one is a wake-up to
    come) and ``involuntary`` (``nonvoluntary_ctxt_switches``: it was preempted). From
    ``/proc/PID/task/TID/schedstat`` (three fields: ns run on a CPU, ns waited on a runqueue,
    timeslices run): ``runs`` (the times it was put on a CPU, about ``voluntary +
    involuntary``) and ``run_delay_us`` (how long it waited, runnable, for a CPU). Both files
    are the thread's own: ``/proc/PID/status`` is its main thread's alone, and a thread's
    counts leave ``/proc`` with it."""

    voluntary: int
    involuntary: int
    runs: int
    run_delay_us: int

    def __add__(self, other: TaskSched) -> TaskSched:
        return TaskSched(
            self.voluntary + other.voluntary,
            self.involuntary + other.involuntary,
            self.runs + other.runs,
            self.run_delay_us + other.run_delay_us,
        )


_VOLUNTARY = "\nvoluntary_ctxt_switches:"


def parse_task_sched(status: str, schedstat: str | None) -> TaskSched:
    """One thread's ``status`` and ``schedstat`` (None: a kernel without ``CONFIG_SCHED_INFO``,
    whose ``runs`` and ``run_delay_us`` are then 0). The two switch lines are found from the
    end, where the kernel writes them one after the other (a regular expression over the
    whole file cost 20 µs a thread here, this 1 µs)."""
    at = status.rfind(_VOLUNTARY)
    words = status[at + len(_VOLUNTARY) :].split(None, 3) if at >= 0 else []
    if len(words) < 3 or words[1] != "nonvoluntary_ctxt_switches:":
        raise ValueError("no voluntary_ctxt_switches and nonvoluntary_ctxt_switches lines in a task's status")
    _run_ns, delay_ns, runs = schedstat.split() if schedstat is not None else ("0", "0", "0")
    return TaskSched(int(words[0]), int(words[2]), int(runs), int(delay_ns) // 1000)


# --- /proc/PID/smaps_rollup ----------------------------------------------------------------


@dataclass(frozen=True)
class Smaps:
    """Memory of one process (or a sum over processes). ``uss_bytes`` (unique set size) is
    ``Private_Clean + Private_Dirty``: what freeing the process would give back. ``pss_bytes``
    shares every shared page among the processes that map it, so PSS sums over processes."""

    rss_bytes: int
    pss_bytes: int
    uss_bytes: int
    swap_bytes: int

    def __add__(self, other: Smaps) -> Smaps:
        return Smaps(
            self.rss_bytes + other.rss_bytes,
            self.pss_bytes + other.pss_bytes,
            self.uss_bytes + other.uss_bytes,
            self.swap_bytes + other.swap_bytes,
        )


def _kb_lines(text: str, keys: Collection[str] | None = None) -> dict[str, int]:
    """``Key:   123 kB`` lines into bytes (values without a unit are kept as they are)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if keys is not None and key not in keys:
            continue
        parts = value.split()
        if not sep or not parts or not parts[0].isdigit():
            continue
        n = int(parts[0])
        out[key.strip()] = n * 1024 if len(parts) > 1 and parts[1] == "kB" else n
    return out


def parse_smaps_rollup(text: str) -> Smaps:
    """``/proc/PID/smaps_rollup`` (Linux 4.14+). Reading it walks every mapping of the process
    under its mmap lock: cheap for a small resolver, not free for a big one."""
    kb = _kb_lines(text)
    return Smaps(
        rss_bytes=kb.get("Rss", 0),
        pss_bytes=kb.get("Pss", 0),
        uss_bytes=kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0),
        swap_bytes=kb.get("Swap", 0),
    )


def read_smaps_rollup(pid: int, proc: Path = Path("/proc")) -> Smaps | None:
    text = _read(proc / str(pid) / "smaps_rollup")
    # A zombie or a kernel thread has an empty rollup.
    return parse_smaps_rollup(text) if text else None


# --- /proc/stat --------------------------------------------------------------------------


@dataclass(frozen=True)
class CoreTimes:
    """Where one core spent its time since boot (``/proc/stat``). ``softirq_us`` is where the
    network stack's receive work lands; on loopback it runs on the *sender's* core."""

    user_us: int
    nice_us: int
    system_us: int
    idle_us: int
    iowait_us: int
    irq_us: int
    softirq_us: int
    steal_us: int

    @property
    def busy_us(self) -> int:
        """Everything but idle, iowait and steal (guest time is already inside user)."""
        return self.user_us + self.nice_us + self.system_us + self.irq_us + self.softirq_us


_CORE_FIELDS = ("user_us", "nice_us", "system_us", "idle_us", "iowait_us", "irq_us", "softirq_us", "steal_us")


def parse_proc_stat(text: str, clk_tck: int = CLK_TCK) -> dict[int, CoreTimes]:
    """The ``cpuN`` lines of ``/proc/stat``, by CPU number (offline CPUs are absent)."""
    cores: dict[int, CoreTimes] = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *values = line.split()
        ticks = [int(v) for v in values[: len(_CORE_FIELDS)]]
        ticks += [0] * (len(_CORE_FIELDS) - len(ticks))  # very old kernels lack steal
        cores[int(name[3:])] = CoreTimes(*(_ticks_to_us(t, clk_tck) for t in ticks))
    return cores


def read_proc_stat(proc: Path = Path("/proc")) -> dict[int, CoreTimes]:
    return parse_proc_stat((proc / "stat").read_text())


# --- /proc/softirqs ------------------------------------------------------------------------


def parse_softirqs(text: str, names: Collection[str] | None = None) -> dict[str, dict[int, int]]:
    """``/proc/softirqs``: how many times each softirq ran on each CPU since boot, by name
    (``NET_RX``, ``NET_TX``, ``TIMER``, ...) then CPU number (the header's ``CPUn``); only
    ``names`` when given."""
    header, *rows = text.splitlines()
    cpus = [int(c[3:]) for c in header.split()]
    out: dict[str, dict[int, int]] = {}
    for row in rows:
        name, _, values = row.partition(":")
        name = name.strip()
        if names is None or name in names:
            out[name] = {cpu: int(v) for cpu, v in zip(cpus, values.split(), strict=False)}
    return out


# --- /proc/net/snmp, /proc/net/netstat -------------------------------------------------------


def parse_net_counters(text: str, protos: Collection[str] | None = None) -> dict[str, dict[str, int]]:
    """``/proc/net/snmp`` and ``/proc/net/netstat``: pairs of lines, ``Proto: Name Name ...``
    then ``Proto: value value ...``. Returns ``{"Udp": {"InDatagrams": ...}, "TcpExt": ...}``,
    only for ``protos`` when given (parsing all of ``netstat`` costs about 0.1 ms)."""
    out: dict[str, dict[str, int]] = {}
    lines = text.splitlines()
    for header, values in zip(lines[::2], lines[1::2], strict=False):
        proto, _, names = header.partition(":")
        if protos is not None and proto not in protos:
            continue
        vproto, _, nums = values.partition(":")
        if proto != vproto:
            continue
        out[proto] = {n: int(v) for n, v in zip(names.split(), nums.split(), strict=False)}
    return out


def select_counters(counters: dict[str, dict[str, int]], proto: str, keys: Iterable[str]) -> dict[str, int]:
    """The ``keys`` of ``proto`` that this kernel has (a missing one is left out, never 0)."""
    table = counters.get(proto, {})
    return {k: table[k] for k in keys if k in table}


def read_net_counters(
    net: Path = Path("/proc/net"), protos: Collection[str] | None = None
) -> dict[str, dict[str, int]]:
    """Both ``snmp`` and ``netstat`` of ``net`` (``/proc/PID/net`` reads another process's
    network namespace)."""
    out = parse_net_counters((net / "snmp").read_text(), protos)
    out.update(parse_net_counters((net / "netstat").read_text(), protos))
    return out


# --- /proc/meminfo -------------------------------------------------------------------------


def parse_meminfo(text: str, keys: Collection[str] | None = None) -> dict[str, int]:
    """``/proc/meminfo`` in bytes: ``Slab`` (= ``SReclaimable`` + ``SUnreclaim``) holds, among
    others, every socket's ``struct sock``, inode, dentry and file. Socket *buffers* are not in
    it (they come from the page allocator: see :class:`Sockstat`). Only ``keys`` when given."""
    return _kb_lines(text, keys)


def read_meminfo(proc: Path = Path("/proc"), keys: Collection[str] | None = None) -> dict[str, int]:
    return parse_meminfo((proc / "meminfo").read_text(), keys)


# --- /proc/net/sockstat --------------------------------------------------------------------


@dataclass(frozen=True)
class Sockstat:
    """``/proc/net/sockstat``: socket counts of the network namespace, and the buffer memory
    charged to TCP and UDP machine-wide (kernel counts pages; converted to bytes).
    ``tcp_inuse`` counts TCP sockets not in TIME-WAIT; ``tcp_alloc`` every allocated one,
    orphans included; ``tcp_tw`` TIME-WAIT mini sockets."""

    sockets_used: int
    tcp_inuse: int
    tcp_orphan: int
    tcp_tw: int
    tcp_alloc: int
    tcp_mem_bytes: int
    udp_inuse: int
    udp_mem_bytes: int


def parse_sockstat(text: str, page_size: int = PAGE_SIZE) -> Sockstat:
    rows: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        proto, _, rest = line.partition(":")
        words = rest.split()
        rows[proto] = {k: int(v) for k, v in zip(words[::2], words[1::2], strict=False) if v.isdigit()}
    tcp, udp = rows.get("TCP", {}), rows.get("UDP", {})
    return Sockstat(
        sockets_used=rows.get("sockets", {}).get("used", 0),
        tcp_inuse=tcp.get("inuse", 0),
        tcp_orphan=tcp.get("orphan", 0),
        tcp_tw=tcp.get("tw", 0),
        tcp_alloc=tcp.get("alloc", 0),
        tcp_mem_bytes=tcp.get("mem", 0) * page_size,
        udp_inuse=udp.get("inuse", 0),
        udp_mem_bytes=udp.get("mem", 0) * page_size,
    )


def read_sockstat(net: Path = Path("/proc/net")) -> Sockstat:
    return parse_sockstat((net / "sockstat").read_text())


# --- process trees -------------------------------------------------------------------------


def process_tree(roots: Sequence[int], proc: Path = Path("/proc")) -> list[int]:
    """``roots`` and all their descendants that are alive now, for a target without a cgroup.
    Scans every ``/proc/PID/stat`` (``/proc/PID/task/TID/children`` needs
    ``CONFIG_PROC_CHILDREN``, which Debian's kernels lack), so call it about once a second,
    not at every sample."""
    children: dict[int, list[int]] = {}
    alive: set[int] = set()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        text = _read(entry / "stat")
        if not text:
            continue
        ppid = int(text.rpartition(") ")[2].split()[1])
        pid = int(entry.name)
        alive.add(pid)
        children.setdefault(ppid, []).append(pid)
    out: list[int] = []
    stack = [p for p in roots if p in alive]
    seen: set[int] = set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        out.append(pid)
        stack.extend(children.get(pid, []))
    return sorted(out)


def thread_ids(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """The thread IDs of one process (empty if it is gone)."""
    try:
        return sorted(int(t.name) for t in (proc / str(pid) / "task").iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return []
