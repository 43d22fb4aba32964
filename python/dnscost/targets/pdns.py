"""PowerDNS Recursor forwarding the synthetic TLD to dnscost's authoritative upstream. Counters
come from ``rec_control get-all`` over its control socket in the trial directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dnscost.engine import Endpoint
from dnscost.errors import TargetError, UsageError
from dnscost.targets._util import (
    IDLE_TIMEOUT_S,
    fd_limit,
    remove_socket_dir,
    socket_dir,
    sum_of,
)
from dnscost.targets.base import Counters, Target, free_port

__all__ = ["PdnsRecursor", "parse_rec_control"]


def parse_rec_control(text: str) -> Counters:
    """``rec_control get-all``: ``name<TAB>value`` lines. Queries are ``questions`` (udp and
    tcp), answers the sum of ``noerror-answers``, ``nxdomain-answers`` and ``servfail-answers``,
    cache hits and misses those of the packet cache (``packetcache-hits``,
    ``packetcache-misses``): one per client query. (``cache-hits`` and ``cache-misses`` count
    record-cache look-ups, which a packet-cache hit skips.)"""
    raw: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            raw[parts[0]] = int(parts[1])
    return Counters(
        queries=raw.get("questions"),
        answers=sum_of(raw, ("noerror-answers", "nxdomain-answers", "servfail-answers")),
        cache_hits=raw.get("packetcache-hits"),
        cache_misses=raw.get("packetcache-misses"),
        raw=raw,
    )


def _yaml(
    host: str, port: int, zone: str, upstream: str, threads: int, tcp_clients: int, own: str | None, ecs: bool
) -> str:
    """recursor.yml (Recursor 5) with the settings the old-style file of Recursor 4 holds."""
    subnet = f"""
  use_incoming_edns_subnet: true
outgoing:
  edns_subnet_allow_list: ['{upstream.rsplit(":", 1)[0]}']"""
    return f"""# pdns-recursor 5 configuration written by dnscost for one trial. Run in the foreground:
#   pdns_recursor --daemon=no --write-pid=no --socket-dir=DIR --config-dir=DIR
dnssec:
  validation: 'off'
incoming:
  allow_from: [127.0.0.0/8, 198.18.0.0/15]
  listen: ['{host}'{f", '{own}'" if own else ""}]
  port: {port}
  max_concurrent_requests_per_tcp_connection: 1000
  max_tcp_clients: {tcp_clients}
  max_tcp_per_client: 0
  max_tcp_queries_per_connection: 0
  pdns_distributes_queries: false
  reuseport: true
  tcp_timeout: {IDLE_TIMEOUT_S}{subnet if ecs else ""}
logging:
  disable_syslog: true
  quiet: true
recursor:
  forward_zones:
  - zone: '{zone}'
    recurse: {"true" if zone == "." else "false"}
    forwarders: ['{upstream}']
  hint_file: 'no'
  security_poll_suffix: ''
  threads: {threads}
"""


class PdnsRecursor(Target):
    """PowerDNS Recursor 4.8, as packaged in Debian 12, serves udp and tcp only (PowerDNS puts
    dnsdist in front of it for DoT and DoH).

    ``forward-zones`` sends the TLD to the upstream (RD clear, as to an authoritative server);
    ``hint-file=no`` loads no root hints, so it never primes the root (its periodic root refresh
    then fails locally: "Failed to update . records"); ``dnssec=off``; no security poll. One
    worker thread per CPU, each with its own socket (``reuseport``, no distributor thread).

    Defaults changed for connection experiments: ``client-tcp-timeout`` (2 s, the idle
    timeout of tcp clients) is raised to ``IDLE_TIMEOUT_S``; ``max-tcp-clients`` (128 per
    thread) to the open-files limit less a margin; ``max-concurrent-requests-per-tcp-connection``
    (10) to 1 000; queries per connection and connections per client stay unlimited (0).

    Several processes (``processes``, past one process's open files) share the listening port
    (``reuseport``), each with a configuration directory and control socket of its own
    (counters summed), and each with a packet cache of its own, filled through a port only it
    listens on (:meth:`fill_endpoints`)."""

    name = "pdns-recursor"
    package = "pdns-recursor"
    binary = "pdns_recursor"
    transports = ("udp", "tcp")
    version_flags = ("--version",)
    version_pattern = r"PowerDNS Recursor (\S+)"
    identity = b"PowerDNS Recursor"
    splits = True
    acts_on_client_subnet = True

    _dirs: tuple[tuple[Path, Path], ...] = ()
    """Each process's configuration directory and control socket directory."""
    _short: tuple[Path | None, ...] = ()
    _own: tuple[int, ...] = ()

    def configure(self) -> list[str]:
        if self.upstream is None:
            raise UsageError("pdns-recursor needs an upstream (the authoritative dnscost-engine serve)")
        exe = self.executable()
        self.executable("rec_control")
        # Each process's control socket (and rec_control's own) go into its configuration
        # directory, through a short directory of its own when that path is too long for a unix
        # socket. The first process's directory is the trial's.
        configs = [self.workdir if i == 0 else self.workdir / f"process-{i}" for i in range(self.processes)]
        for d in configs:
            d.mkdir(parents=True, exist_ok=True)
        made = [socket_dir(d) for d in configs]
        self._dirs = tuple((d, sockets) for d, (sockets, _) in zip(configs, made, strict=True))
        self._short = tuple(short for _, short in made)
        # With several processes, each one's own port (its packet cache's fill).
        self._own = tuple(free_port() for _ in range(self.processes if self.processes > 1 else 0))
        threads = max(1, len(self.cpus))
        dns_port = free_port()
        for t in self.wanted:
            self.endpoints[t] = Endpoint(t, self.host, dns_port)
        tcp_clients = max(128, (fd_limit() - 1000) // threads)
        up = self.upstream
        lines = [
            "# pdns-recursor configuration written by dnscost for one trial. Run in the foreground:",
            f"#   {exe} --daemon=no --write-pid=no --socket-dir=DIR --config-dir=DIR",
            f"local-port={dns_port}",
            "allow-from=127.0.0.0/8, 198.18.0.0/15",
            # Every name (a capture's own) as to a resolver (RD set, no NS of the root looked up:
            # forwarded as to an authoritative server, it asked for them on every query).
            f"forward-zones-recurse=.={up.address}"
            if self.forwarded == "."
            else f"forward-zones={self.forwarded}={up.address}",
            "dnssec=off",
            "security-poll-suffix=",
            "hint-file=no",
            f"threads={threads}",
            "pdns-distributes-queries=no",
            "reuseport=yes",
            f"max-tcp-clients={tcp_clients}",
            "max-tcp-per-client=0",
            "max-tcp-queries-per-connection=0",
            "max-concurrent-requests-per-tcp-connection=1000",
            f"client-tcp-timeout={IDLE_TIMEOUT_S}",
            "disable-syslog=yes",
            "quiet=yes",
        ]
        if self.client_subnet:
            # The queries' ECS used toward the upstream (whose answers give its scope).
            lines += ["use-incoming-edns-subnet=yes", f"edns-subnet-allow-list={up.address.rsplit(':', 1)[0]}"]
        for i, d in enumerate(configs):
            own = f"{self.host}:{self._own[i]}" if self._own else None
            if self.major_version() >= 5:
                # Recursor 5 reads YAML (old-style settings only with --enable-old-settings, to be
                # removed): the same settings as rec_control show-yaml converts them.
                text = _yaml(
                    self.host, dns_port, self.forwarded, up.address, threads, tcp_clients, own, self.client_subnet
                )
                (d / "recursor.yml").write_text(text)
            else:
                local = ", ".join([self.host, *([own] if own else [])])
                (d / "recursor.conf").write_text("\n".join([*lines[:2], f"local-address={local}", *lines[2:]]) + "\n")
        return self.instance([exe, "--daemon=no", "--write-pid=no"], 0)

    def instance(self, argv: list[str], i: int) -> list[str]:
        config, sockets = self._dirs[i]
        return [*argv[:3], f"--socket-dir={sockets}", f"--config-dir={config}"]

    def fill_endpoints(self) -> list[dict[str, Endpoint]]:
        """With several processes, each one's own port (each has its own packet cache)."""
        if not self._own:
            return [self.endpoints]
        return [{t: Endpoint(t, self.host, port) for t in self.wanted} for port in self._own]

    def shared_paths(self) -> list[Path]:
        return [*super().shared_paths(), *(sockets for _, sockets in self._dirs)]

    def stop(self) -> None:
        super().stop()
        for short in self._short:
            remove_socket_dir(short)
        self._short = ()

    def counters(self) -> Counters:
        """Every process's counters, summed."""
        if self.child is None:
            raise TargetError("pdns-recursor: not started")
        return Counters.total([self._counters(config, sockets) for config, sockets in self._dirs])

    def _counters(self, config: Path, sockets: Path) -> Counters:
        ctl = self.executable("rec_control")
        try:
            out = subprocess.run(
                self.command([ctl, f"--config-dir={config}", f"--socket-dir={sockets}", "--timeout=5", "get-all"]),
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise TargetError("pdns-recursor: rec_control get-all did not answer within 10 s") from e
        if out.returncode != 0:
            why = out.stderr.strip() or out.stdout.strip()
            raise TargetError(f"pdns-recursor: rec_control get-all failed: {why}")
        return parse_rec_control(out.stdout)
