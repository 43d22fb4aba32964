"""Unbound forwarding the synthetic TLD to dnscost's authoritative upstream, serving udp, tcp,
dot and doh (DoH needs an unbound built with nghttp2, as Debian's is). Counters come from
``unbound-control stats_noreset`` over a unix control socket in the trial directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dnscost.engine import Endpoint
from dnscost.errors import MachineError, TargetError, UsageError
from dnscost.targets._util import (
    IDLE_TIMEOUT_S,
    fd_limit,
    sum_of,
)
from dnscost.targets.base import Counters, Target, free_port

__all__ = ["Unbound", "incoming_num_tcp", "parse_unbound_stats"]

OUTGOING_RANGE = 256
"""Ports for upstream queries per thread (default 4096): one upstream needs few, and every one
of them counts against the open-files limit that incoming connections need."""
OUTGOING_NUM_TCP = 10
MAX_INCOMING_TCP = 16384


def incoming_num_tcp(fd_limit: int, threads: int, interfaces: int) -> int:
    """The largest ``incoming-num-tcp`` unbound accepts under ``fd_limit`` open files. Unbound
    refuses to start unless ``threads * (interfaces * (2 + incoming) + outgoing-range +
    outgoing-num-tcp) + about 20`` fits (default incoming-num-tcp is 10; the limit is per
    thread and per interface)."""
    spare = fd_limit - 64 - threads * (OUTGOING_RANGE + OUTGOING_NUM_TCP + 2 * interfaces)
    return max(10, min(MAX_INCOMING_TCP, spare // max(1, threads * interfaces)))


def parse_unbound_stats(text: str) -> Counters:
    """``unbound-control stats_noreset``: ``name=value`` lines. Queries are
    ``total.num.queries``, answers the sum of ``num.answer.rcode.*`` (present with
    ``extended-statistics: yes``), hits and misses ``total.num.cachehits`` and
    ``total.num.cachemiss``."""
    raw: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and value.lstrip("-").isdigit():
            raw[key] = int(value)
    return Counters(
        queries=raw.get("total.num.queries"),
        answers=sum_of(raw, [k for k in raw if k.startswith("num.answer.rcode.")]),
        cache_hits=raw.get("total.num.cachehits"),
        cache_misses=raw.get("total.num.cachemiss"),
        raw=raw,
    )


class Unbound(Target):
    """Unbound 1.17 with the iterator module only (no validator, no trust anchor), a
    forward-zone for the TLD to the upstream on loopback (``do-not-query-localhost: no``) and
    every other name refused locally, so it never primes the root. One thread per CPU, each
    with its own sockets (``so-reuseport``).

    Defaults changed for connection experiments: ``incoming-num-tcp`` (10 per thread and
    interface) is raised as far as the open-files limit allows (see :func:`incoming_num_tcp`;
    about 6 500 per interface with three interfaces under the 20 000 limit of the reference
    VM), ``tcp-idle-timeout`` (30 s) and ``edns-tcp-keepalive-timeout`` (120 s) are set to
    ``IDLE_TIMEOUT_S`` and ``http-max-streams`` (100) to 1 000. Unbound still shortens the idle
    timeout of all its connections to 1 % of it once more than half of its ``incoming-num-tcp``
    slots are in use (0.2 % above 65 %, 200 ms above 80 %): an idle-connection experiment must stay below half
    of the slots.

    Several processes (``processes``, past one process's open files) run one configuration
    each, sharing every listening port (``so-reuseport``, which unbound sets on its TCP
    listeners too) and differing only in their pidfile and control port (counters summed).
    Each keeps a cache of its own, filled through a plain DNS port only it listens on
    (:meth:`fill_endpoints`: unbound's cache does not depend on the transport asked)."""

    name = "unbound"
    package = "unbound"
    binary = "unbound"
    transports = ("udp", "tcp", "dot", "doh")
    version_flags = ("-V",)
    version_pattern = r"Version (\S+)"
    identity = b"unbound"
    splits = True

    _confs: tuple[Path, ...] = ()
    _own: tuple[Endpoint, ...] = ()

    def configure(self) -> list[str]:
        if self.upstream is None:
            raise UsageError("unbound needs an upstream (the authoritative dnscost-engine serve)")
        exe = self.executable()
        self.executable("unbound-control")
        if "doh" in self.wanted:
            try:
                argv = self.place.wrap([exe, "-V"])
                built = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False).stdout
            except (OSError, subprocess.TimeoutExpired) as e:
                raise MachineError(f"unbound: cannot run {exe} -V: {e}") from e
            if "nghttp2" not in built:
                raise MachineError("unbound: this unbound was built without nghttp2 and cannot serve doh")
        threads = max(1, len(self.cpus))
        interfaces: list[str] = []
        server: list[str] = []
        dns_port = free_port()
        if {"udp", "tcp"} & set(self.wanted):
            interfaces.append(f"{self.host}@{dns_port}")
            for t in ("udp", "tcp"):
                if t in self.wanted:
                    self.endpoints[t] = Endpoint(t, self.host, dns_port)
        server.append(f"port: {dns_port}")
        if {"dot", "doh"} & set(self.wanted):
            server += [f'tls-service-key: "{self.tls.key}"', f'tls-service-pem: "{self.tls.cert}"']
        if "dot" in self.wanted:
            port = free_port()
            interfaces.append(f"{self.host}@{port}")
            server.append(f"tls-port: {port}")
            self.endpoints["dot"] = Endpoint("dot", self.host, port)
        if "doh" in self.wanted:
            port = free_port()
            interfaces.append(f"{self.host}@{port}")
            server += [
                f"https-port: {port}",
                'http-endpoint: "/dns-query"',
                "http-max-streams: 1000                 # default 100",
            ]
            self.endpoints["doh"] = Endpoint("doh", self.host, port, "/dns-query")
        # With several processes, each one's own plain DNS port (its cache's fill).
        self._own = tuple(
            Endpoint("udp", self.host, free_port()) for _ in range(self.processes if self.processes > 1 else 0)
        )
        incoming = incoming_num_tcp(fd_limit(), threads, len(interfaces) + (1 if self._own else 0))
        idle_ms = IDLE_TIMEOUT_S * 1000
        tld, forwarded = self.tld.rstrip(".") + ".", self.forwarded
        up = self.upstream

        def lines(i: int, control_port: int) -> list[str]:
            """Process ``i``'s configuration: its own pidfile, control port and fill port."""
            own = [f"{self._own[i].host}@{self._own[i].port}"] if self._own else []
            return [
                "# unbound configuration written by dnscost for one trial.",
                f"# Run in the foreground: {exe} -d -c THIS",
                "server:",
                '    username: ""',
                '    chroot: ""',
                f'    directory: "{self.workdir}"',
                f'    pidfile: "{self.workdir / (f"unbound.{i}.pid" if i else "unbound.pid")}"',
                "    use-syslog: no",
                '    logfile: ""                         # stderr, into the trial log',
                "    log-time-ascii: yes",
                "    verbosity: 1",
                f"    num-threads: {threads}",
                "    so-reuseport: yes",
                *(f"    interface: {a}" for a in interfaces),
                *(f"    interface: {a}                # this process's own: its cache's fill" for a in own),
                *(f"    {s}" for s in server),
                "    do-ip6: no",
                "    access-control: 127.0.0.0/8 allow",
                "    access-control: 198.18.0.0/15 allow  # the generator's side of a veth pair (--network veth)",
                '    module-config: "iterator"           # no validator: nothing to validate, no trust anchor',
                "    do-not-query-localhost: no          # the upstream is on loopback",
                f'    domain-insecure: "{forwarded}"',
                # Nothing else is resolved (no root priming), unless every name is forwarded.
                *(['    local-zone: "." refuse'] if forwarded != "." else []),
                f'    local-zone: "{tld}" transparent     # overrides the built-in RFC 6761 zone for "test."',
                "    trust-anchor-signaling: no",
                "    root-key-sentinel: no",
                "    prefetch: no",
                "    msg-cache-size: 64m",
                "    rrset-cache-size: 128m",
                f"    outgoing-range: {OUTGOING_RANGE}                # default 4096",
                f"    outgoing-num-tcp: {OUTGOING_NUM_TCP}",
                f"    incoming-num-tcp: {incoming}             # default 10 (per thread and interface)",
                f"    tcp-idle-timeout: {idle_ms}           # default 30 000 ms",
                "    edns-tcp-keepalive: yes",
                f"    edns-tcp-keepalive-timeout: {idle_ms}  # default 120 000 ms",
                "    statistics-interval: 0",
                "    extended-statistics: yes            # answers by RCODE",
                "forward-zone:",
                f'    name: "{forwarded}"',
                f"    forward-addr: {up.host}@{up.port}",
                "remote-control:",
                "    control-enable: yes",
                "    # On loopback (of its namespace) in plain text: a unix socket's path is limited to 107 bytes.",
                "    control-interface: 127.0.0.1",
                f"    control-port: {control_port}",
                "    control-use-cert: no",
            ]

        confs = []
        for i in range(self.processes):
            conf = self.workdir / (f"unbound.{i}.conf" if i else "unbound.conf")
            conf.write_text("\n".join(lines(i, free_port())) + "\n")
            confs.append(conf)
        self._confs = tuple(confs)
        return [exe, "-d", "-c", str(confs[0])]

    def instance(self, argv: list[str], i: int) -> list[str]:
        return [*argv[:-1], str(self._confs[i])]

    def fill_endpoints(self) -> list[dict[str, Endpoint]]:
        """With several processes, each one's own plain DNS port (each has its own cache)."""
        if not self._own:
            return [self.endpoints]
        return [{"udp": ep, "tcp": Endpoint("tcp", ep.host, ep.port)} for ep in self._own]

    def counters(self) -> Counters:
        """Every process's counters, summed."""
        if not self._confs:
            raise TargetError("unbound: not started")
        return Counters.total([self._counters(conf) for conf in self._confs])

    def _counters(self, conf: Path) -> Counters:
        ctl = self.executable("unbound-control")
        try:
            out = subprocess.run(
                self.command([ctl, "-c", str(conf), "stats_noreset"]),
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise TargetError("unbound: unbound-control stats_noreset did not answer within 10 s") from e
        if out.returncode != 0:
            why = out.stderr.strip() or out.stdout.strip()
            raise TargetError(f"unbound: unbound-control stats_noreset failed: {why}")
        return parse_unbound_stats(out.stdout)
