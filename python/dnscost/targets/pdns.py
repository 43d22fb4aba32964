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


def _yaml(host: str, port: int, zone: str, upstream: str, threads: int, tcp_clients: int) -> str:
    """recursor.yml (Recursor 5) with the settings the old-style file of Recursor 4 holds."""
    return f"""# pdns-recursor 5 configuration written by dnscost for one trial. Run in the foreground:
#   pdns_recursor --daemon=no --write-pid=no --socket-dir=DIR --config-dir=DIR
dnssec:
  validation: 'off'
incoming:
  allow_from: [127.0.0.0/8, 198.18.0.0/15]
  listen: ['{host}']
  port: {port}
  max_concurrent_requests_per_tcp_connection: 1000
  max_tcp_clients: {tcp_clients}
  max_tcp_per_client: 0
  max_tcp_queries_per_connection: 0
  pdns_distributes_queries: false
  reuseport: true
  tcp_timeout: {IDLE_TIMEOUT_S}
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
    (10) to 1 000; queries per connection and connections per client stay unlimited (0)."""

    name = "pdns-recursor"
    package = "pdns-recursor"
    binary = "pdns_recursor"
    transports = ("udp", "tcp")
    version_flags = ("--version",)
    version_pattern = r"PowerDNS Recursor (\S+)"

    _sockets: Path
    _short: Path | None = None

    def configure(self) -> list[str]:
        if self.upstream is None:
            raise UsageError("pdns-recursor needs an upstream (the authoritative dnscost-engine serve)")
        exe = self.executable()
        self.executable("rec_control")
        # The control socket (and rec_control's own) go into the trial directory, through a
        # short directory of its own when that path is too long for a unix socket.
        self._sockets, self._short = socket_dir(self.workdir)
        threads = max(1, len(self.cpus))
        dns_port = free_port()
        for t in self.wanted:
            self.endpoints[t] = Endpoint(t, self.host, dns_port)
        tcp_clients = max(128, (fd_limit() - 1000) // threads)
        up = self.upstream
        lines = [
            "# pdns-recursor configuration written by dnscost for one trial. Run in the foreground:",
            f"#   {exe} --daemon=no --write-pid=no --socket-dir=DIR --config-dir=DIR",
            f"local-address={self.host}",
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
        if self.major_version() >= 5:
            # Recursor 5 reads YAML (old-style settings only with --enable-old-settings, to be
            # removed): the same settings as rec_control show-yaml converts them.
            (self.workdir / "recursor.yml").write_text(
                _yaml(self.host, dns_port, self.forwarded, up.address, threads, tcp_clients)
            )
        else:
            (self.workdir / "recursor.conf").write_text("\n".join(lines) + "\n")
        return [exe, "--daemon=no", "--write-pid=no", f"--socket-dir={self._sockets}", f"--config-dir={self.workdir}"]

    def shared_paths(self) -> list[Path]:
        return [*super().shared_paths(), self._sockets]

    def stop(self) -> None:
        super().stop()
        remove_socket_dir(self._short)
        self._short = None

    def counters(self) -> Counters:
        if self.child is None:
            raise TargetError("pdns-recursor: not started")
        ctl = self.executable("rec_control")
        try:
            out = subprocess.run(
                self.command(
                    [ctl, f"--config-dir={self.workdir}", f"--socket-dir={self._sockets}", "--timeout=5", "get-all"]
                ),
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
