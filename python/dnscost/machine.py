"""What this machine is (recorded with every run) and whether it can run dnscost
(``dnscost doctor``)."""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import shutil
from dataclasses import dataclass
from pathlib import Path

from dnscost.cgroup import find_mounts
from dnscost.engine import engine_path
from dnscost.errors import MachineError, UsageError
from dnscost.targets import TARGETS

__all__ = ["Check", "checks", "facts"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def rapl_readable() -> bool:
    root = Path("/sys/class/powercap")
    try:
        return any(os.access(p / "energy_uj", os.R_OK) and (p / "energy_uj").read_text() for p in root.glob("*rapl*"))
    except OSError:
        return False


def raise_open_files() -> int:
    """Raises this process's open-files limit (soft and hard, so every child inherits it) to
    the kernel's ceiling (``fs.nr_open``) when root, else the soft limit to the hard one.
    Connection experiments hold one socket per connection on each side. Returns the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard
    if os.geteuid() == 0:
        with contextlib.suppress(OSError, ValueError):
            want = max(hard, int(Path("/proc/sys/fs/nr_open").read_text()))
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
    except (OSError, ValueError):
        return soft
    return want


FD_HEADROOM = 1_000
"""Descriptors a process keeps for its listeners, its upstream sockets, its logs and its
libraries, beside one per connection."""


def connections_per_process() -> int:
    """The connections one process can hold here: its open-files limit once raised as far as
    the machine allows (:func:`raise_open_files`, which every run does anyway; some machines
    forbid even root to pass their hard limit) less :data:`FD_HEADROOM`."""
    return max(0, raise_open_files() - FD_HEADROOM)


def check_generator(connections: int, workers: int | None, where: str) -> None:
    """Fails in one line when ``connections`` over ``workers`` engines (one without a cluster;
    None: not known yet) give one engine more than a process holds here."""
    if workers is None or workers < 1:
        return
    each = connections_per_process()
    if each and -(-connections // workers) > each:
        need = -(-connections // each)
        raise UsageError(
            f"{where}: {connections} connections: one engine holds at most {each} here (open-files limit "
            f"{each + FD_HEADROOM}): spread them over --cluster netns:{need} or more"
        )


def _sysctl(path: str) -> str | None:
    try:
        return " ".join(Path("/proc/sys", path).read_text().split())
    except OSError:
        return None


def facts() -> dict[str, object]:
    """Machine facts recorded in every run.json (comparisons across machines are refused on
    these)."""
    mounts = find_mounts()
    return {
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "cpus_allowed": sorted(os.sched_getaffinity(0)),
        "memory_bytes": _memory_bytes(),
        "kernel": platform.release(),
        "os": _os_release(),
        "python": platform.python_version(),
        "cgroup_version": mounts.version,
        "open_files_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[1],
        "somaxconn": _sysctl("net/core/somaxconn"),
        "ip_local_port_range": _sysctl("net/ipv4/ip_local_port_range"),
        "rapl_readable": rapl_readable(),
        "virtualized": Path("/sys/hypervisor/type").exists() or "hypervisor" in Path("/proc/cpuinfo").read_text(),
    }


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.system()


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def checks() -> list[Check]:
    """Everything ``dnscost doctor`` checks, in order."""

    out: list[Check] = []
    cpus = len(os.sched_getaffinity(0))
    out.append(Check("cores", cpus >= 2, f"{cpus} usable", "the target and the generator need a core each"))
    mounts = find_mounts()
    detail = {1: "v1 (cpuacct, memory)", 2: "v2 (unified)", 0: "none with cpuacct and memory"}[mounts.version]
    out.append(Check("cgroups", mounts.version > 0, detail, "mount the cpuacct and memory controllers"))
    root = os.geteuid() == 0
    out.append(Check("root", root, "yes" if root else "no", "run as root: cgroups and CPU pinning of servers"))
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    out.append(
        Check(
            "open-files limit",
            limit >= 16_384,
            f"hard limit {limit}",
            "raise it (ulimit -Hn / limits.conf): connection experiments hold many sockets",
            required=False,
        )
    )
    try:
        out.append(Check("dnscost-engine", True, str(engine_path())))
    except MachineError as e:
        out.append(Check("dnscost-engine", False, str(e), "bash scripts/setup"))
    for name, target in TARGETS.items():
        if name == "builtin":
            continue  # the engine, checked above
        try:
            target.locate()
            found = True
        except MachineError:
            found = False
        out.append(
            Check(
                f"target {name}",
                found,
                f"{target.binary} {'found' if found else 'missing'}",
                f"apt-get install {target.package}" if target.package else "bash scripts/setup",
                required=False,
            )
        )
    for tool in ("openssl", "ss", "dnsperf"):
        found = shutil.which(tool) is not None
        out.append(
            Check(
                tool,
                found or tool == "dnsperf",
                "found" if found else "missing",
                "bash scripts/setup",
                required=tool != "dnsperf",
            )
        )
    rapl = rapl_readable()
    out.append(
        Check(
            "energy",
            True,
            "RAPL readable: measured"
            if rapl
            else "RAPL not readable: energy is estimated from CPU time (model, labelled)",
            required=False,
        )
    )
    return out
