"""Kernel memory of a target's own sockets, socket by socket, as ``ss`` reports it.

``ss -tuamnH '( sport = :53 or sport = :853 )'`` lists every TCP and UDP socket whose local
port is one of the target's listening ports: its listeners, its UDP sockets and every connection
it accepted. Each socket line is followed by ``skmem:(r..,rb..,t..,tb..,f..,w..,o..,bl..,d..)``,
the kernel's ``SK_MEMINFO`` of that socket:

====  ==================  ==================================================================
key   kernel field        meaning (bytes, except ``d``)
====  ==================  ==================================================================
r     ``sk_rmem_alloc``   received data queued on the socket, not yet read (skb truesize)
rb    ``sk_rcvbuf``       the receive buffer limit (not memory in use)
t     ``sk_wmem_alloc``   sent data handed to the IP layer and not yet freed (TCP: clones of
                          segments in flight, which are also counted in ``w``)
tb    ``sk_sndbuf``       the send buffer limit (not memory in use)
f     ``sk_forward_alloc`` memory charged to the socket in advance and not used yet (the
                          kernel charges whole pages; this is the unused part)
w     ``sk_wmem_queued``  data written by the application and queued for sending, including
                          sent but unacknowledged TCP data
o     ``sk_omem_alloc``   option memory (socket options, filters, TLS state of kTLS)
bl    ``sk_backlog.len``  segments that arrived while the socket was locked, not yet processed
d     ``sk_drops``        packets dropped on this socket (a count, not memory)
====  ==================  ==================================================================

**Socket buffer memory** (``buffer_bytes``) is ``r + w + f``: exactly what the socket has
charged to its protocol's memory accounting, i.e. what ``/proc/net/sockstat`` ``mem`` counts in
pages and what a memory cgroup charges as ``sock`` (v2) or ``kmem.tcp`` (v1). ``t`` is left out
because it overlaps ``w``; ``o`` and ``bl`` are summed separately. The ``struct sock`` itself,
its inode and file are slab objects and appear in none of these: they are in ``/proc/meminfo``
``Slab`` and in the cgroup's kernel memory.

Sockets without ``skmem`` (TIME-WAIT and FIN-WAIT-2 mini sockets, request sockets in SYN-RECV)
are counted in ``states`` but hold no buffer. Sockets the target opened itself (to an upstream)
have an ephemeral local port and are not matched.

Cost: ``ss`` asks the kernel for its sockets over netlink (the port filter is compiled into a
kernel-side bytecode, but the kernel still walks the whole table) and prints two lines per
socket. Measured on the 2-vCPU development VM (``python -m dnscost.meter.bench``): with 2000
connections (4000 sockets, 2001 matched) one call took 16-26 ms of wall time and 9-14 ms of
``ss`` CPU; with 9000 connections (18 000 sockets) 73-94 ms wall and 39-46 ms CPU; even with a
handful of sockets about 3-5 ms of CPU, for starting the process. Parsing here costs about
3.5 µs per matched socket. Hence the sampler calls it about once a second, not at every sample.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from dnscost.contract import SocketMemoryRecord
from dnscost.errors import MachineError

__all__ = [
    "SocketMemory",
    "SsRun",
    "listen_backlogs",
    "parse_listeners",
    "parse_ss",
    "ss_filter",
    "ss_sockets",
]

_PROTOCOLS = frozenset(("tcp", "udp", "raw", "u_str", "u_dgr", "u_seq", "p_raw", "p_dgr", "nl", "mptcp", "sctp"))
_SKMEM = re.compile(r"skmem:\(([^)]*)\)")
_SKMEM_KEY = re.compile(r"([a-z]+)(\d+)")
_SKMEM_USUAL = re.compile(r"skmem:\(r(\d+),rb\d+,t(\d+),tb\d+,f(\d+),w(\d+),o(\d+),bl(\d+),d(\d+)\)")


@dataclass
class SocketMemory:
    """Sums over the matched sockets. Byte fields are sums of the ``skmem`` fields of the same
    letter; ``sockets`` counts every matched socket, ``sockets_with_skmem`` those that have
    buffers at all."""

    sockets: int = 0
    sockets_with_skmem: int = 0
    r_bytes: int = 0
    t_bytes: int = 0
    f_bytes: int = 0
    w_bytes: int = 0
    o_bytes: int = 0
    bl_bytes: int = 0
    drops: int = 0
    states: dict[str, int] = field(default_factory=dict)
    protocols: dict[str, int] = field(default_factory=dict)

    @property
    def buffer_bytes(self) -> int:
        """``r + w + f``: the bytes charged to protocol memory accounting (see module doc)."""
        return self.r_bytes + self.w_bytes + self.f_bytes

    def to_dict(self) -> SocketMemoryRecord:
        return {
            "sockets": self.sockets,
            "sockets_with_skmem": self.sockets_with_skmem,
            "buffer_bytes": self.buffer_bytes,
            "r_bytes": self.r_bytes,
            "t_bytes": self.t_bytes,
            "f_bytes": self.f_bytes,
            "w_bytes": self.w_bytes,
            "o_bytes": self.o_bytes,
            "bl_bytes": self.bl_bytes,
            "drops": self.drops,
            "states": dict(self.states),
            "protocols": dict(self.protocols),
        }


def ss_filter(ports: Sequence[int]) -> str:
    """``( sport = :53 or sport = :853 )``: sockets whose local port is one of ``ports``."""
    if not ports:
        raise ValueError("no ports to filter on")
    return "( " + " or ".join(f"sport = :{p}" for p in sorted(set(ports))) + " )"


def listen_backlogs(ports: Sequence[int], *, command_prefix: Sequence[str] = ()) -> dict[int, int]:
    """The accept-queue length (the ``listen()`` backlog, as the kernel holds it: ``ss``'s
    Send-Q of a listening socket) of each TCP port in ``ports`` that has a listener; the
    smallest when several sockets listen on one port."""
    argv = [*command_prefix, "ss", "-Hltn", ss_filter(ports)]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except FileNotFoundError as e:
        raise MachineError(f"{argv[0]} not found (ss is in iproute2)") from e
    except subprocess.TimeoutExpired as e:
        raise MachineError("ss -lt did not finish") from e
    if r.returncode != 0:
        raise MachineError(f"ss failed ({r.returncode}): {r.stderr.strip()}")
    return parse_listeners(r.stdout)


def parse_listeners(text: str) -> dict[int, int]:
    """Port → backlog from ``ss -Hltn`` lines (``LISTEN 0 128 127.0.0.1:853 0.0.0.0:*``)."""
    out: dict[int, int] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 4 or f[0] != "LISTEN" or not f[2].isdigit():
            continue
        port = int(f[3].rsplit(":", 1)[1])
        out[port] = min(out.get(port, int(f[2])), int(f[2]))
    return out


def parse_ss(text: str, protocol: str = "?") -> SocketMemory:
    """Output of ``ss -tuamnH``. With both ``-t`` and ``-u`` the first column is the protocol;
    with only one of them it is the state, and ``protocol`` names what was asked for. A socket
    line starts at the left margin; its ``skmem`` follows, on the indented line after it (or on
    the same line in some ss versions)."""
    out = SocketMemory()
    states, protocols = out.states, out.protocols
    sums = [0] * 7  # r, t, f, w, o, bl, d
    counted = 0
    pending = False
    for line in text.splitlines():
        if not line or line.isspace():
            continue
        if not line[0].isspace():
            first, rest = line.split(None, 1) if " " in line or "\t" in line else (line, "")
            if first in _PROTOCOLS:
                proto, state = first, rest.split(None, 1)[0]
            else:
                proto, state = protocol, first
            out.sockets += 1
            states[state] = states.get(state, 0) + 1
            protocols[proto] = protocols.get(proto, 0) + 1
            pending = True
        if not pending or "skmem:(" not in line:
            continue
        pending = False
        counted += 1
        usual = _SKMEM_USUAL.search(line)
        if usual:  # the layout of every ss since 2015, parsed in one go
            values = [int(v) for v in usual.groups()]
        else:
            m = _SKMEM.search(line)
            keyed = {k: int(v) for k, v in _SKMEM_KEY.findall(m.group(1))} if m else {}
            values = [keyed.get(k, 0) for k in ("r", "t", "f", "w", "o", "bl", "d")]
        for i, v in enumerate(values):
            sums[i] += v
    out.sockets_with_skmem = counted
    out.r_bytes, out.t_bytes, out.f_bytes, out.w_bytes, out.o_bytes, out.bl_bytes, out.drops = sums
    return out


@dataclass(frozen=True)
class SsRun:
    """One run of ``ss``: the memory of the matched sockets, the wall time of the run and
    parsing (µs), and the CPU time of the ``ss`` process itself (µs, user + system)."""

    memory: SocketMemory
    wall_us: int
    cpu_us: int


def ss_sockets(
    ports: Sequence[int],
    *,
    tcp: bool = True,
    udp: bool = True,
    command_prefix: Sequence[str] = (),
    timeout_s: float = 10.0,
) -> SsRun:
    """Runs ``ss`` for the sockets whose local port is in ``ports``. ``command_prefix`` runs it
    elsewhere, for instance ``("ip", "netns", "exec", "ns1")`` for a target in a network
    namespace. The process is reaped with ``wait4`` to learn its own CPU time."""
    flags = "-" + ("t" if tcp else "") + ("u" if udp else "") + "amnH"
    argv = [*command_prefix, "ss", flags, ss_filter(ports)]
    start = time.monotonic_ns()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError as e:
        raise MachineError(f"{argv[0]} not found (ss is in iproute2)") from e
    timer = threading.Timer(timeout_s, proc.kill)  # bounded: a stuck ss is killed (by its own PID)
    timer.start()
    try:
        assert proc.stdout is not None and proc.stderr is not None
        out = proc.stdout.read()
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        timer.cancel()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    if proc.returncode != 0:
        raise MachineError(f"ss failed ({proc.returncode}): {err.decode(errors='replace').strip()}")
    protocol = "tcp" if tcp and not udp else "udp" if udp and not tcp else "?"
    memory = parse_ss(out.decode(errors="replace"), protocol)
    cpu_us = round((usage.ru_utime + usage.ru_stime) * 1e6)
    return SsRun(memory, (time.monotonic_ns() - start) // 1000, cpu_us)
