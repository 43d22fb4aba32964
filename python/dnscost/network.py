"""Where the target sits on the network, and so on which core the kernel receives each packet.

On loopback, and on a veth pair without steering, the receive path of a packet (the NET_RX
softirq: IP, UDP/TCP, the wake-up of the reader) runs on the core of the process that *sent*
it: the generator's core pays for delivering queries into the target's socket and the target's
core for delivering answers to the generator. On a real network each receiver pays for its own
packets. Three set-ups (``--network``):

``loopback``
    Target and generator in the root namespace: the target on 127.0.0.1, the generator's
    connections from 127.0.1.1 to 127.0.32.1 (loopback routes all of 127.0.0.0/8; nothing
    is assigned).
``veth``
    The target (and only the target) in a network namespace made for the bed, joined to the
    root namespace by a veth pair, in a /26 of RFC 2544's benchmarking range (the only
    addresses dnscost ever assigns): ``.1/30`` on the target's side, ``.2/30`` on the
    generator's, and the generator's connections from ``.32`` to ``.63`` (``/32`` each on the
    generator's device, routed there from the namespace). The engine, the authoritative
    upstream (listening on ``.2``) and dnscost itself stay in the root namespace. Receive
    still runs on the sender's core.
``veth-rps``
    The same, with Receive Packet Steering on each veth's receive queue
    (``queues/rx-0/rps_cpus``) set to that side's cores: a query is received on the target's
    cores, an answer on the generator's, as on a real network, at the price of an
    inter-processor interrupt per batch of packets.

Why many source addresses: a connection's ``connect()`` searches the ephemeral ports of its
(source, destination) pair for one whose 4-tuple is free, through every connection of that pair
still in TIME_WAIT. At one query per connection and 14 000 connections per second from one
address, that search was half of the generator's core (``__inet_hash_connect``,
``__inet_check_established``) and the generator, not the target, set the rate; spread over 32
addresses it opened 2.2 to 2.3 times as many (``bench/engine-vs-peers``, part 2). Every
transport uses them (the engine takes ``sources[slot % 32]``), so UDP and TCP trials differ in
nothing but the transport.

Everything made here (namespace, links, addresses) is removed by :meth:`Network.remove`, at exit, and,
for a dnscost process that was killed, by the next :meth:`Network.create` (names carry the PID
of the process that made them).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dnscost.contract import NetworkRecord, SoftnetCounts
from dnscost.errors import MachineError, UsageError

__all__ = [
    "DEFAULT_NETWORK",
    "NETWORKS",
    "Network",
    "NetworkInfo",
    "Softnet",
    "check_network",
    "cpu_mask",
    "ip",
    "orphans",
    "pid_alive",
    "read_softnet",
    "remove_all",
    "remove_leftovers",
    "softnet_delta",
]

NETWORKS = ("loopback", "veth", "veth-rps")
DEFAULT_NETWORK = "loopback"
"""See ``docs/metering.md`` ("Where the kernel's work lands") for the measurements behind it."""

BENCH_NET = ipaddress.IPv4Network("198.18.0.0/15")
"""RFC 2544's benchmarking range: the only addresses dnscost assigns, a /26 per bed."""
BED_PREFIX = 26
LOOPBACK_SOURCES = tuple(f"127.0.{i}.1" for i in range(1, 33))
"""The generator's source addresses on loopback (see the module's documentation)."""

_LOCK = Path("/run/lock/dnscost-network.lock")
_NAME = re.compile(r"dnscost-(\d+)-(\d+)$")
_live: set[Network] = set()
_made = 0


def check_network(kind: str) -> None:
    """Fails early, before anything starts, on a set-up that cannot be made here."""
    if kind not in NETWORKS:
        raise UsageError(f"unknown network {kind!r} (known: {', '.join(NETWORKS)})")
    if kind != "loopback" and os.geteuid() != 0:
        raise UsageError(f"--network {kind} makes a network namespace and a veth pair: run as root")


def cpu_mask(cpus: Sequence[int]) -> str:
    """The hexadecimal CPU mask sysfs takes (``0,1`` → ``3``; groups of 32 CPUs separated by
    commas, as in ``rps_cpus``)."""
    if not cpus:
        raise ValueError("no CPU in the mask")
    digits = f"{sum(1 << c for c in set(cpus)):x}"
    groups: list[str] = []
    while digits:
        groups.insert(0, digits[-8:])
        digits = digits[:-8]
    return ",".join(groups)


@dataclass(frozen=True)
class NetworkInfo:
    """What a set-up is, as recorded in every trial (``network`` in ``trial.json``)."""

    kind: str
    target_address: str
    """Where the target listens, and the engine sends to."""
    generator_address: str
    """The generator's side of the link, where the upstream listens."""
    sources: tuple[str, ...] = ()
    """The addresses the engine's connections come from, slot by slot in turn (the engine
    configuration's ``sources``)."""
    netns: str | None = None
    """The target's network namespace (None on loopback)."""
    target_device: str | None = None
    generator_device: str | None = None
    rps_cpus: dict[str, str] = field(default_factory=dict)
    """Each veth's ``queues/rx-0/rps_cpus`` as read back after writing (``0``: no steering)."""

    def to_dict(self) -> NetworkRecord:
        return {
            "kind": self.kind,
            "target_address": self.target_address,
            "generator_address": self.generator_address,
            "sources": list(self.sources),
            "netns": self.netns,
            "target_device": self.target_device,
            "generator_device": self.generator_device,
            "rps_cpus": dict(self.rps_cpus),
        }


@dataclass(frozen=True)
class Softnet:
    """One core's line of ``/proc/net/softnet_stat``: packets its receive softirq processed
    (``processed``) and inter-processor interrupts that brought it packets steered by RPS
    (``received_rps``). Counts, since boot, for every namespace."""

    processed: int
    received_rps: int


def read_softnet(path: Path = Path("/proc/net/softnet_stat")) -> dict[int, Softnet]:
    """Per-core receive counts (``softnet_stat`` columns 1 and 10; the core is column 13 when
    present, else the line's position)."""
    out: dict[int, Softnet] = {}
    for i, line in enumerate(path.read_text().splitlines()):
        f = [int(x, 16) for x in line.split()]
        out[f[12] if len(f) > 12 else i] = Softnet(f[0], f[9] if len(f) > 9 else 0)
    return out


def softnet_delta(before: dict[int, Softnet], after: dict[int, Softnet]) -> dict[str, SoftnetCounts]:
    """Per-core counts between two readings (keys are core numbers as strings, for JSON)."""
    return {
        str(c): {
            "processed": a.processed - before[c].processed,
            "received_rps": a.received_rps - before[c].received_rps,
        }
        for c, a in sorted(after.items())
        if c in before
    }


def ip(*args: str, check: bool = True) -> str:
    """Runs ``ip ARGS`` (iproute2) and returns what it printed; a failure (with ``check``), a
    missing ``ip`` or one that hangs is a :class:`MachineError`."""
    try:
        r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=False)
    except FileNotFoundError as e:
        raise MachineError("ip not found (install iproute2)") from e
    except subprocess.TimeoutExpired as e:
        raise MachineError(f"ip {' '.join(args)} did not finish") from e
    if check and r.returncode != 0:
        raise MachineError(f"ip {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (another user's process counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(netns: str, generator_device: str) -> None:
    # Deleting one end of a veth pair deletes both; the namespace goes once its processes have.
    ip("link", "del", generator_device, check=False)
    ip("netns", "del", netns, check=False)


def orphans(pattern: re.Pattern[str]) -> list[re.Match[str]]:
    """The network namespaces named by ``pattern`` (group 1: the PID of the process that made
    them) whose maker no longer runs."""
    found = []
    for line in ip("netns", "list", check=False).splitlines():
        m = pattern.match(line.split()[0] if line.split() else "")
        if m and not pid_alive(int(m.group(1))):
            found.append(m)
    return found


def remove_leftovers() -> list[str]:
    """Removes the namespaces (and links) left by dnscost processes that no longer run (killed
    before they could clean up). Returns their names."""
    removed = []
    for m in orphans(_NAME):
        _remove(m.group(0), f"dc{m.group(1)}-{m.group(2)}g")
        removed.append(m.group(0))
    return removed


def _used_subnets() -> set[ipaddress.IPv4Network]:
    used = set()
    for line in ip("-4", "-o", "addr", "show", check=False).splitlines():
        m = re.search(r"inet (\S+)", line)
        if m:
            iface = ipaddress.IPv4Interface(m.group(1))
            if iface.ip in BENCH_NET:
                used.add(ipaddress.IPv4Network(f"{iface.ip}/{BED_PREFIX}", strict=False))
    return used


class Network:
    """One set-up, made for one bed. Loopback makes nothing."""

    def __init__(self, info: NetworkInfo) -> None:
        self.info = info

    @property
    def kind(self) -> str:
        return self.info.kind

    @property
    def exec_prefix(self) -> list[str]:
        """A command prefix that runs a program in the target's namespace (empty on
        loopback). ``nsenter`` execs the program (same PID, affinity and cgroup)."""
        if self.info.netns is None:
            return []
        return ["nsenter", f"--net=/run/netns/{self.info.netns}", "--"]

    def proc_net(self, pid: int | None) -> Path:
        """The ``/proc/.../net`` directory of the target's namespace (through the target's PID)."""
        if self.info.netns is None or pid is None:
            return Path("/proc/net")
        return Path(f"/proc/{pid}/net")

    @classmethod
    def loopback(cls) -> Network:
        return cls(NetworkInfo("loopback", "127.0.0.1", "127.0.0.1", LOOPBACK_SOURCES))

    @classmethod
    def create(cls, kind: str, *, target_cpus: Sequence[int], generator_cpus: Sequence[int]) -> Network:
        """Makes the set-up ``kind`` (see the module's documentation)."""
        global _made
        check_network(kind)
        if kind == "loopback":
            return cls.loopback()
        remove_leftovers()
        _made += 1
        pid = os.getpid()
        netns, tdev, gdev = f"dnscost-{pid}-{_made}", f"dc{pid}-{_made}t", f"dc{pid}-{_made}g"
        _LOCK.parent.mkdir(parents=True, exist_ok=True)
        with _LOCK.open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two dnscost processes never pick one subnet
            used = _used_subnets()
            subnet = next((s for s in BENCH_NET.subnets(new_prefix=BED_PREFIX) if s not in used), None)
            if subnet is None:
                raise MachineError(f"no free /{BED_PREFIX} left in {BENCH_NET}")
            taddr, gaddr = str(subnet[1]), str(subnet[2])
            source_net = list(subnet.subnets(prefixlen_diff=1))[1]  # the upper half: 32 addresses
            sources = tuple(str(a) for a in source_net)
            net = cls(NetworkInfo(kind, taddr, gaddr, sources, netns, tdev, gdev))
            _live.add(net)
            try:
                ip("netns", "add", netns)
                ip("link", "add", gdev, "type", "veth", "peer", "name", tdev)
                rps: dict[str, str] = {}
                masks = {tdev: "0", gdev: "0"}
                if kind == "veth-rps":
                    masks = {tdev: cpu_mask(target_cpus), gdev: cpu_mask(generator_cpus)}
                for dev, mask in masks.items():  # set before the move: the map moves with the device
                    Path(f"/sys/class/net/{dev}/queues/rx-0/rps_cpus").write_text(mask + "\n")
                # No IPv6 link-local address: no DAD, router or MLD packets on the pair.
                for dev in (gdev, tdev):
                    ip("link", "set", dev, "addrgenmode", "none")
                ip("link", "set", tdev, "netns", netns)
                ip("addr", "add", f"{gaddr}/30", "dev", gdev)
                for a in sources:
                    ip("addr", "add", f"{a}/32", "dev", gdev)
                ip("link", "set", gdev, "up")
                ip("-n", netns, "link", "set", "lo", "up")
                ip("-n", netns, "addr", "add", f"{taddr}/30", "dev", tdev)
                ip("-n", netns, "link", "set", tdev, "up")
                ip("-n", netns, "route", "add", str(source_net), "via", gaddr)
                rps[gdev] = Path(f"/sys/class/net/{gdev}/queues/rx-0/rps_cpus").read_text().strip()
                rps[tdev] = ip("netns", "exec", netns, "cat", f"/sys/class/net/{tdev}/queues/rx-0/rps_cpus").strip()
                for dev, mask in masks.items():
                    if int(rps[dev].replace(",", ""), 16) != int(mask.replace(",", ""), 16):
                        raise MachineError(f"{dev}: rps_cpus reads {rps[dev]}, not {mask}")
            except BaseException:
                net.remove()
                raise
        net.info = NetworkInfo(kind, taddr, gaddr, sources, netns, tdev, gdev, rps)
        return net

    @classmethod
    def cluster_host(cls, sources: int = 8) -> Network:
        """A "host" of a namespace cluster (:mod:`dnscost.cluster.netns`): a network namespace
        of its own joined to the root namespace by a veth pair in a /26 of RFC 2544's range,
        ``.1/30`` on the root's side (``generator_address``: where the root namespace, and so the
        target and the scheduler, are reached), ``.2/30`` on the host's (``target_address``:
        where its worker listens), and ``sources`` addresses from ``.32`` (``/32`` each on the
        host's device, routed there from the root namespace) that its engine's connections come
        from; the host's default route goes to the root's side. Removed like a bed's."""
        global _made
        if os.geteuid() != 0:
            raise UsageError("a namespace cluster makes network namespaces and veth pairs: run as root")
        if not 1 <= sources <= 32:
            raise ValueError(f"1 to 32 sources per host, not {sources}")
        remove_leftovers()
        _made += 1
        pid = os.getpid()
        netns, hdev, rdev = f"dnscost-{pid}-{_made}", f"dc{pid}-{_made}t", f"dc{pid}-{_made}g"
        _LOCK.parent.mkdir(parents=True, exist_ok=True)
        with _LOCK.open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            used = _used_subnets()
            subnet = next((s for s in BENCH_NET.subnets(new_prefix=BED_PREFIX) if s not in used), None)
            if subnet is None:
                raise MachineError(f"no free /{BED_PREFIX} left in {BENCH_NET}")
            root_addr, host_addr = str(subnet[1]), str(subnet[2])
            own = tuple(str(subnet[32 + i]) for i in range(sources))
            net = cls(NetworkInfo("cluster-host", host_addr, root_addr, own, netns, hdev, rdev))
            _live.add(net)
            try:
                ip("netns", "add", netns)
                ip("link", "add", rdev, "type", "veth", "peer", "name", hdev)
                for dev in (rdev, hdev):
                    ip("link", "set", dev, "addrgenmode", "none")
                ip("link", "set", hdev, "netns", netns)
                ip("addr", "add", f"{root_addr}/30", "dev", rdev)
                ip("link", "set", rdev, "up")
                ip("-n", netns, "link", "set", "lo", "up")
                ip("-n", netns, "addr", "add", f"{host_addr}/30", "dev", hdev)
                for a in own:
                    ip("-n", netns, "addr", "add", f"{a}/32", "dev", hdev)
                ip("-n", netns, "link", "set", hdev, "up")
                ip("-n", netns, "route", "add", "default", "via", root_addr)
                for a in own:
                    ip("route", "add", f"{a}/32", "via", host_addr, "dev", rdev)
            except BaseException:
                net.remove()
                raise
        return net

    def remove(self) -> None:
        """Removes the namespace and the veth pair. Safe to call twice."""
        info = self.info
        if info.netns is not None and info.generator_device is not None and self in _live:
            _remove(info.netns, info.generator_device)
        _live.discard(self)


def remove_all() -> None:
    """Removes every set-up this process made and has not removed (at exit)."""
    for net in list(_live):
        with contextlib.suppress(MachineError):
            net.remove()


atexit.register(remove_all)
