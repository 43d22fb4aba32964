"""Knot Resolver 5 (``kresd``) stubbing the synthetic TLD to dnscost's authoritative upstream,
serving udp, tcp, dot and doh. Counters come from its control socket
(``RUNDIR/control/<pid>``): ``stats.list()`` of the ``stats`` module and ``worker.stats()``."""

from __future__ import annotations

import re
import shutil
import socket
import struct
from pathlib import Path
from typing import ClassVar

from dnscost.engine import Endpoint
from dnscost.errors import TargetError, UsageError
from dnscost.targets._util import (
    IDLE_TIMEOUT_S,
    host_network,
    lua_str,
    remove_socket_dir,
    socket_dir,
)
from dnscost.targets.base import Counters, Target, free_port

__all__ = ["KnotResolver", "kresd_counters", "parse_kresd_table"]

_ENTRY = re.compile(r"\['([^']+)'\]\s*=\s*(-?\d+)\s*,")


_OPEN = re.compile(r"\['([^']+)'\]\s*=\s*\{")


def parse_kresd_table(text: str) -> dict[str, int]:
    """The integer entries of a Lua table as kresd's control socket prints it, flat as kresd 5
    prints ``stats.list()`` (``['answer.total'] = 12,``) or nested as kresd 6 does (``['answer']
    = { ['total'] = 12, },``: the key ``answer.total``); fractional values (CPU seconds) are left
    out."""
    out: dict[str, int] = {}
    path: list[str] = []
    for line in text.splitlines():
        opened = _OPEN.search(line)
        if opened:
            path.append(opened.group(1))
            continue
        entry = _ENTRY.search(line)
        if entry:
            out[".".join([*path, entry.group(1)])] = int(entry.group(2))
        elif line.strip().startswith("}") and path:
            path.pop()
    return out


def kresd_counters(stats: str, worker: str) -> Counters:
    """Normalises ``stats.list()`` and ``worker.stats()``: queries are the requests from
    clients (``request.total`` less kresd's own ``request.internal``), answers
    ``answer.total``, cache hits ``answer.cached`` (answers served from the cache alone) and
    misses the other answers."""
    raw = parse_kresd_table(stats)
    raw.update({f"worker.{k}": v for k, v in parse_kresd_table(worker).items()})
    total, internal = raw.get("request.total"), raw.get("request.internal", 0)
    answers, cached = raw.get("answer.total"), raw.get("answer.cached")
    return Counters(
        queries=None if total is None else total - internal,
        answers=answers,
        cache_hits=cached,
        cache_misses=None if answers is None or cached is None else answers - cached,
        raw=raw,
    )


def _recv_exact(sock: socket.socket, n: int, buf: bytearray) -> bytes:
    while len(buf) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise TargetError("knot-resolver: control socket closed")
        buf += chunk
    out = bytes(buf[:n])
    del buf[:n]
    return out


CONTROL_TIMEOUT_S = 30.0
"""How long a command on kresd's control socket may take: kresd answers it between the
connections it serves, and 8 processes sharing a core with 100 000 connections closing took
more than 3 s (the counters of a trial then could not be read)."""


class KnotResolver(Target):
    """Knot Resolver 5.6, one ``kresd`` process, or several sharing its ports and its cache
    (``processes``: kresd is single-threaded, and operators run one instance per core; the
    kernel spreads connections over them, SO_REUSEPORT, which kresd sets), never contacting the root: no priming, no
    trust anchors, no time or trust-anchor signalling modules. Names of the TLD are forwarded
    to the upstream (``policy.FORWARD``; with ``policy.STUB`` kresd 5.6 re-asks the upstream
    for cached names every 6 s or so) and cached; everything else is refused.

    Defaults changed for connection experiments: the idle timeout of incoming tcp, dot and doh
    connections (``net.tcp_in_idle``, 10 s) is raised to ``IDLE_TIMEOUT_S`` and pipelining per
    connection (``net.tcp_pipeline``, 100) to 65 535. The listen queue is fixed at 128 in kresd
    5.6 and cannot be raised: open many connections at a bounded rate."""

    name = "knot-resolver"
    package = "knot-resolver"
    binary = "kresd"
    transports = ("udp", "tcp", "dot", "doh")
    transport_counters: ClassVar[dict[str, str]] = {t: f"request.{t}" for t in transports}
    version_flags = ("--version",)
    version_pattern = r"Knot Resolver, version (\S+)"
    identity = b"Knot Resolver"
    splits = True
    proxy_v2_transports = ("udp", "tcp")
    """Not dot: kresd 5.6.0 given a PROXY v2 header before a TLS handshake fails an assertion
    in ``tls_process_input_data`` (daemon/tls.c:475) and never answers (docs/proxy-v2.md)."""

    _rundir: Path
    _short: Path | None = None

    def configure(self) -> list[str]:
        if self.upstream is None:
            raise UsageError("knot-resolver needs an upstream (the authoritative dnscost-engine serve)")
        exe = self.executable()
        # kresd makes its control socket RUNDIR/control/<pid>: RUNDIR is the trial directory,
        # or a short directory of its own when that path is too long for a unix socket.
        self._rundir, self._short = socket_dir(self.workdir, room=20)
        dns_port = free_port()
        listen = []
        if self.proxy_v2 is not None:  # kresd 5.5 and later; before its listeners
            peers = ", ".join(lua_str(host_network(a)) for a in self.proxy_v2_peers)
            listen.append(f"net.proxy_allowed({{ {peers} }})  -- PROXY v2 from the load")
        listen.append(f"net.listen('{self.host}', {dns_port}, {{ kind = 'dns' }})   -- udp and tcp")
        for t in ("udp", "tcp"):
            if t in self.wanted:
                self.endpoints[t] = Endpoint(t, self.host, dns_port)
        if "dot" in self.wanted:
            port = free_port()
            listen.append(f"net.listen('{self.host}', {port}, {{ kind = 'tls' }})")
            self.endpoints["dot"] = Endpoint("dot", self.host, port)
        if "doh" in self.wanted:
            port = free_port()
            listen.append(f"net.listen('{self.host}', {port}, {{ kind = 'doh2' }})  -- /dns-query, POST and GET")
            self.endpoints["doh"] = Endpoint("doh", self.host, port, "/dns-query")
        up = self.upstream
        upstream = f"{up.host}@{up.port}"  # kresd writes addresses as addr@port
        conf = f"""-- Knot Resolver configuration written by dnscost for one trial.
-- Run in the foreground, no REPL, without Debian's distro-preconfig.lua:
--   {exe} -n -c THIS {self._rundir}

-- Never contact the root: no priming, no trust anchors, no time/TA signalling, no RFC 5011.
modules.unload('priming')
modules.unload('detect_time_skew')
modules.unload('detect_time_jump')
modules.unload('ta_signal_query')
modules.unload('ta_sentinel')
modules.unload('ta_update')
trust_anchors.remove('.')
modules.load('stats')      -- request and answer counters, read through the control socket

net.ipv6 = false
{chr(10).join(listen)}
net.tls({lua_str(self.tls.cert)}, {lua_str(self.tls.key)})
net.tcp_pipeline(65535)            -- default 100 queries in flight per connection
net.tcp_in_idle({IDLE_TIMEOUT_S * 1000})          -- default 10 000 ms

cache.open(100 * MB, {lua_str("lmdb://" + str(self.workdir / "cache"))})

{self._forward(upstream)}
"""
        path = self.workdir / "kresd.conf"
        path.write_text(conf)
        (self.workdir / "cache").mkdir(exist_ok=True)
        return [exe, "-n", "-c", str(path), str(self._rundir)]

    def control(self, command: str, timeout: float = CONTROL_TIMEOUT_S, pid: int | None = None) -> str:
        """Runs one Lua command on the control socket of kresd process ``pid`` (default: the
        first) and returns what it printed."""
        if self.child is None:
            raise TargetError("knot-resolver: not started")
        path = self._rundir / "control" / str(pid or self.child.pid)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                s.connect(str(path))
                # Binary mode: each answer is prefixed by its length (4 octets, network order).
                s.sendall(b"__binary\n" + command.encode() + b"\n")
                buf = bytearray()
                head = _recv_exact(s, 2, buf)
                if head != b"> ":  # the prompt kresd sends on connection, before binary mode
                    buf[:0] = head
                (length,) = struct.unpack("!I", _recv_exact(s, 4, buf))
                return _recv_exact(s, length, buf).decode("utf-8", errors="replace")
        except OSError as e:
            raise TargetError(f"knot-resolver: control socket {path}: {e}") from e

    def _forward(self, upstream: str) -> str:
        tld = lua_str(self.forwarded)
        if self.major_version() >= 6:
            return f"""-- FORWARD the TLD to the upstream, as for kresd 5 (below). kresd 6 answers special-use
-- names ("test.", RFC 6761) from its rule database before any Lua policy, with NXDOMAIN: a
-- forwarding rule for the TLD in that database replaces that answer, and the Lua FORWARD then
-- sends the query to the upstream (without it, kresd 6 iterates from the root: checked with
-- log_level('debug')). The database is opened, emptied, here, as kresd 6's policy-loader does.
assert(require('ffi').C.kr_rules_init(nil, 0, true) == 0)
policy.rule_forward_add({tld}, {{ dnssec = false, auth = false }}, {{ {{ {lua_str(upstream)} }} }})
policy.add(policy.suffix(policy.FORWARD({lua_str(upstream)}), {{ todname({tld}) }}))
policy.add(policy.all(policy.REFUSE))"""
        return f"""-- FORWARD the TLD to the upstream (no iteration; nothing validated: there is no trust
-- anchor) and cache the answers. Not STUB: kresd 5.6 asks the upstream again for STUB answers
-- it holds in cache, every 6 s or so, so the cache would never stay warm. Rules added here run
-- before the built-in rules for special-use names, which would answer every name under
-- "test." with NXDOMAIN (RFC 6761).
policy.add(policy.suffix(policy.FORWARD({lua_str(upstream)}), {{ todname({tld}) }}))
policy.add(policy.all(policy.REFUSE))"""

    def shared_paths(self) -> list[Path]:
        return [*super().shared_paths(), self._rundir]

    def stop(self) -> None:
        super().stop()
        remove_socket_dir(self._short)
        self._short = None
        # The cache file is working state (100 MB per instance), not a result.
        shutil.rmtree(self.workdir / "cache", ignore_errors=True)

    def counters(self) -> Counters:
        """Every process's counters, summed."""
        return Counters.total(
            [
                kresd_counters(self.control("stats.list()", pid=c.pid), self.control("worker.stats()", pid=c.pid))
                for c in self.children
            ]
        )
