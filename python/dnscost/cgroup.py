"""Control groups (v1 and v2) that hold a target's processes, so that its CPU time and memory,
kernel socket memory included, are read from the kernel rather than inferred.

A :class:`Cgroup` is created under dnscost's own cgroup in every hierarchy it needs (``cpuacct``
and ``memory`` on v1; the unified tree on v2). Parsing is separated from reading so that every
parser is tested on captured files.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from dnscost.errors import MachineError

__all__ = [
    "Cgroup",
    "CpuTime",
    "MemoryUsage",
    "Mounts",
    "cgroup_name",
    "find_mounts",
    "parse_flat_keyed",
    "parse_mountinfo",
    "parse_percpu",
    "parse_proc_cgroup",
    "remove_orphans",
    "tasks_percpu_file",
]

V1_CONTROLLERS = ("cpuacct", "memory")

_NAME = re.compile(r"dnscost-.+-pid(\d+)-(\d+)-[0-9a-f]+$")
"""A cgroup made by :func:`cgroup_name`: its creator's PID and start time."""


@dataclass(frozen=True)
class Mounts:
    """Where the cgroup hierarchies are mounted: ``version`` 1 (one directory per controller)
    or 2 (``unified``)."""

    version: int
    v1: dict[str, Path]
    unified: Path | None


@dataclass(frozen=True)
class CpuTime:
    user_us: int
    system_us: int

    @property
    def total_us(self) -> int:
        return self.user_us + self.system_us


@dataclass(frozen=True)
class MemoryUsage:
    """Bytes charged to the cgroup. ``tcp_bytes`` is kernel memory of its TCP sockets (v1
    ``memory.kmem.tcp.usage_in_bytes``, v2 ``sock`` in ``memory.stat``); ``kernel_bytes`` all of
    its kernel memory (slab, stacks, sockets); ``None`` where the kernel does not say.
    ``page_faults`` is the count of page faults its processes took so far (``pgfault`` in
    ``memory.stat``, v1 and v2): a page first touched, or touched again after its memory was
    given back to the kernel."""

    usage_bytes: int
    anon_bytes: int
    kernel_bytes: int | None
    tcp_bytes: int | None
    slab_bytes: int | None
    page_faults: int | None = None


def parse_mountinfo(text: str) -> Mounts:
    """Finds cgroup mounts in ``/proc/self/mountinfo``."""
    v1: dict[str, Path] = {}
    unified: Path | None = None
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount, fstype, options = Path(fields[4]), tail[0], tail[2].split(",")
        if fstype == "cgroup2":
            unified = mount
        elif fstype == "cgroup":
            for controller in options:
                if controller in V1_CONTROLLERS or controller == "cpuset":
                    v1.setdefault(controller, mount)
    if all(c in v1 for c in V1_CONTROLLERS):
        return Mounts(1, v1, unified)
    if unified is not None:
        return Mounts(2, {}, unified)
    return Mounts(0, v1, None)


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """``/proc/PID/cgroup``: the path of the process in each hierarchy (``""`` for v2)."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            paths[""] = path
        for c in controllers.split(","):
            if c:
                paths[c] = path
    return paths


def parse_flat_keyed(text: str) -> dict[str, int]:
    """``key value`` lines (``memory.stat``, ``cpu.stat``, ``cpuacct.stat``)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


def find_mounts() -> Mounts:
    return parse_mountinfo(Path("/proc/self/mountinfo").read_text())


def tasks_percpu_file(mounts: Mounts | None = None) -> Path | None:
    """``cpuacct.usage_percpu`` at the root of the v1 ``cpuacct`` hierarchy: the run time of
    every task on each CPU, in ns, from the scheduler's own clock (exact, where ``/proc/stat``'s
    per-core times are sampled at the tick, and with ``NO_HZ`` idle badly skewed on a CPU that
    is busy part of the time). None where only cgroup v2 is mounted (its root ``cpu.stat`` has
    no per-CPU split)."""
    m = mounts or find_mounts()
    root = m.v1.get("cpuacct") if m.version == 1 else None
    path = root / "cpuacct.usage_percpu" if root is not None else None
    return path if path is not None and path.exists() else None


def parse_percpu(text: str) -> dict[int, int]:
    """``cpuacct.usage_percpu`` (ns per CPU, by position) as µs by CPU number."""
    return {n: int(v) // 1000 for n, v in enumerate(text.split())}


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class Cgroup:
    """A cgroup holding one target's processes."""

    def __init__(self, version: int, dirs: dict[str, Path]) -> None:
        self.version = version
        self.dirs = dirs

    @classmethod
    def create(cls, name: str) -> Cgroup:
        """Creates ``name`` under this process's own cgroup in every hierarchy needed."""
        mounts = find_mounts()
        own = parse_proc_cgroup(Path("/proc/self/cgroup").read_text())
        dirs: dict[str, Path] = {}
        try:
            if mounts.version == 1:
                for c in V1_CONTROLLERS:
                    d = mounts.v1[c] / own.get(c, "/").lstrip("/") / name
                    d.mkdir(parents=True, exist_ok=True)
                    dirs[c] = d
                if (dirs["memory"] / "memory.kmem.tcp.limit_in_bytes").exists():
                    # v1 charges TCP socket buffers to a cgroup only once its tcp limit has been
                    # written (memory.kmem.tcp.usage_in_bytes stays 0 otherwise); -1 = no limit.
                    with contextlib.suppress(OSError):
                        (dirs["memory"] / "memory.kmem.tcp.limit_in_bytes").write_text("-1")
            elif mounts.version == 2 and mounts.unified is not None:
                parent = mounts.unified / own.get("", "/").lstrip("/")
                d = parent / name
                d.mkdir(exist_ok=True)
                dirs["unified"] = d
                missing = {"cpu", "memory"} - set((d / "cgroup.controllers").read_text().split())
                if missing:
                    raise MachineError(
                        f"cgroup v2 controllers {sorted(missing)} are not enabled for {d}: "
                        f"enable them in {parent}/cgroup.subtree_control"
                    )
            else:
                raise MachineError("no cgroup hierarchy with cpuacct and memory is mounted")
        except PermissionError as e:
            raise MachineError(f"cannot create a cgroup ({e.filename}): run as root") from e
        from dnscost.proc import record_cgroup

        record_cgroup(list(dirs.values()))
        return cls(mounts.version, dirs)

    def procs_files(self) -> list[Path]:
        """Files to write a PID into to move it into this cgroup."""
        return [d / "cgroup.procs" for d in self.dirs.values()]

    def attach(self, pid: int) -> None:
        for f in self.procs_files():
            f.write_text(str(pid))

    def pids(self) -> list[int]:
        d = next(iter(self.dirs.values()))
        try:
            return [int(p) for p in (d / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def cpu(self) -> CpuTime:
        if self.version == 1:
            d = self.dirs["cpuacct"]
            user, system = _read_int(d / "cpuacct.usage_user"), _read_int(d / "cpuacct.usage_sys")
            if user is not None and system is not None:
                return CpuTime(user // 1000, system // 1000)
            ticks = parse_flat_keyed((d / "cpuacct.stat").read_text())
            hz = os.sysconf("SC_CLK_TCK")
            return CpuTime(ticks.get("user", 0) * 1_000_000 // hz, ticks.get("system", 0) * 1_000_000 // hz)
        stat = parse_flat_keyed((self.dirs["unified"] / "cpu.stat").read_text())
        return CpuTime(stat.get("user_usec", 0), stat.get("system_usec", 0))

    def memory(self) -> MemoryUsage | None:
        """None where the cgroup has no memory accounting (an external target's v1 ``cpuacct``
        directory without a ``memory`` twin, or a v2 one without the memory controller)."""
        if self.version == 1:
            if "memory" not in self.dirs:
                return None
            d = self.dirs["memory"]
            stat = parse_flat_keyed((d / "memory.stat").read_text())
            return MemoryUsage(
                usage_bytes=_read_int(d / "memory.usage_in_bytes") or 0,
                anon_bytes=stat.get("rss", 0),
                kernel_bytes=_read_int(d / "memory.kmem.usage_in_bytes"),
                tcp_bytes=_read_int(d / "memory.kmem.tcp.usage_in_bytes"),
                slab_bytes=None,
                page_faults=stat.get("pgfault"),
            )
        d = self.dirs["unified"]
        if not (d / "memory.current").exists():
            return None
        stat = parse_flat_keyed((d / "memory.stat").read_text())
        return MemoryUsage(
            usage_bytes=_read_int(d / "memory.current") or 0,
            anon_bytes=stat.get("anon", 0),
            kernel_bytes=stat.get("kernel"),
            tcp_bytes=stat.get("sock"),
            slab_bytes=stat.get("slab"),
            page_faults=stat.get("pgfault"),
        )

    def remove(self, timeout: float = 5.0) -> None:
        """Removes the cgroup once its processes are gone (they must have been stopped)."""
        deadline = time.monotonic() + timeout
        for d in self.dirs.values():
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)


def cgroup_name(kind: str, serial: int) -> str:
    """A name for a cgroup this process makes, ``dnscost-KIND-pidPID-START-SERIAL``, which says
    who made it (:func:`dnscost.proc.owner_tag`), so that :func:`remove_orphans` can tell when
    its maker is gone."""
    from dnscost.proc import owner_tag

    return f"dnscost-{kind}-{owner_tag()}-{serial:x}"


def remove_orphans(mounts: Mounts | None = None, depth: int = 6) -> list[str]:
    """Removes the cgroups named by :func:`cgroup_name` whose creator no longer runs and that
    hold no process (a ``dnscost load`` or ``target start`` killed by SIGKILL leaves its
    target's, in every hierarchy). Searches each hierarchy dnscost uses, ``depth`` levels
    down. Returns one line per cgroup removed (its directories in every hierarchy), and per
    orphan that still holds a process (left: nothing of a live run is ever removed)."""
    from dnscost.proc import owner_gone

    m = mounts or find_mounts()
    roots = [m.v1[c] for c in V1_CONTROLLERS if c in m.v1] if m.version == 1 else [m.unified] if m.unified else []
    removed: dict[str, list[Path]] = {}
    held: dict[str, set[str]] = {}
    for root in roots:
        base = len(root.parts)
        for top, dirs, _ in os.walk(root):
            here = Path(top)
            if len(here.parts) - base >= depth:
                dirs.clear()
            for d in list(dirs):
                found = _NAME.match(d)
                if found is None:
                    continue
                dirs.remove(d)  # never inside one of ours
                if owner_gone(d) is None:
                    continue  # its creator runs: a live run's
                path = here / d
                try:
                    tasks = (path / "cgroup.procs").read_text().split()
                except OSError:
                    continue
                if tasks:
                    held.setdefault(d, set()).update(tasks)
                    continue
                with contextlib.suppress(OSError):
                    path.rmdir()
                    removed.setdefault(d, []).append(path)
    lines = []
    for name, paths in removed.items():
        pid = _NAME.match(name).group(1)  # type: ignore[union-attr]
        lines.append(f"removed cgroup {name} ({', '.join(str(p.parent) for p in paths)}), left by PID {pid}, gone")
    for name, pids in held.items():
        pid = _NAME.match(name).group(1)  # type: ignore[union-attr]
        lines.append(f"left cgroup {name}: its creator PID {pid} is gone, but it holds PID {' '.join(sorted(pids))}")
    return lines
