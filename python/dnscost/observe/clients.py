"""The clients an observation can watch, each started in the lab's client namespace against
the lab's "public resolver" (dnscost's responder on :data:`~dnscost.observe.lab.SERVER_ADDRESS`).

Stub clients (``dnss``, ``unbound-dot``, ``knot-dot``, ``external``) listen on 127.0.0.1:53
in the client namespace and are fed by the resolution loop (:mod:`.resolve`) through the
system resolver; each forwards over its own encrypted transport with its own connection
policy, which is what is observed."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from dnscost.errors import MachineError, UsageError
from dnscost.observe.lab import SERVER_ADDRESS, Lab
from dnscost.proc import Child

__all__ = ["CLIENTS", "Client", "Upstream", "client"]

STUB_LISTEN = "127.0.0.1"


@dataclass(frozen=True)
class Upstream:
    """The lab's resolver, as clients are pointed at it."""

    ca: Path
    server_name: str = "localhost"
    """A name the server's certificate covers (for clients that authenticate by name)."""
    address: str = SERVER_ADDRESS

    @property
    def doh_url(self) -> str:
        return f"https://{self.address}/dns-query"

    @property
    def dot(self) -> str:
        return f"{self.address}:853"


class Client:
    """One kind of client: how to start it (:meth:`start`) and what it is."""

    name: ClassVar[str]
    package: ClassVar[str | None] = None
    """The Debian package whose version is recorded."""
    program: ClassVar[str] = ""
    transport: ClassVar[str]
    """What it speaks to the lab's resolver: ``doh`` or ``dot``."""
    stub: ClassVar[bool] = True
    """Fed by the resolution loop through the system resolver."""

    def __init__(self, command: str | None = None) -> None:
        self.command = command

    def argv(self, workdir: Path, upstream: Upstream) -> list[str]:
        raise NotImplementedError

    def version(self) -> str | None:
        if self.package is None:
            return None
        r = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", self.package], capture_output=True, text=True, check=False
        )
        return r.stdout.strip() or None

    def start(self, lab: Lab, workdir: Path, upstream: Upstream) -> Child:
        """Starts the client in the lab's client namespace and waits until it listens."""
        if self.program and shutil.which(self.program) is None:
            raise MachineError(f"{self.name}: {self.program} is not installed (run scripts/setup)")
        argv = self.argv(workdir, upstream)
        child = Child(self.name, [*lab.exec_prefix("client"), *argv], log=workdir / f"{self.name}.log", cwd=workdir)
        if self.stub:
            child.wait_for(lambda: _listening_udp(lab, 53), 15, f"while starting to listen on {STUB_LISTEN}:53")
        return child


def _listening_udp(lab: Lab, port: int) -> bool:
    r = subprocess.run(
        [*lab.exec_prefix("client"), "ss", "-Hlun", f"sport = :{port}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return bool(r.stdout.strip())


class Dnss(Client):
    """Debian's ``dnss``: a DoH stub (Go, HTTP/2 POST), cache off; its connection policy is
    Go's HTTP client's (one connection, closed 30 s after the last query), like
    DNSCrypt-proxy 2.1's."""

    name = "dnss"
    package = "dnss"
    program = "dnss"
    transport = "doh"

    def argv(self, workdir: Path, upstream: Upstream) -> list[str]:
        return [
            "dnss",
            "-enable_dns_to_https",
            "-dns_listen_addr",
            f"{STUB_LISTEN}:53",
            "-https_upstream",
            upstream.doh_url,
            "-https_client_cafile",
            str(upstream.ca),
            "-enable_cache=false",
            "-fallback_upstream",
            f"{upstream.address}:53",
        ]


class UnboundDot(Client):
    """unbound as a DoT forwarder, cache off (``cache-max-ttl: 0``; the lab answers with TTL
    0 anyway). ``.test`` is forwarded (``local-zone: "test." nodefault``: unbound would
    answer it itself, RFC 6761)."""

    name = "unbound-dot"
    package = "unbound"
    program = "unbound"
    transport = "dot"

    def argv(self, workdir: Path, upstream: Upstream) -> list[str]:
        conf = workdir / "unbound.conf"
        conf.write_text(
            "server:\n"
            f"  interface: {STUB_LISTEN}\n  port: 53\n  do-ip6: no\n"
            f'  chroot: ""\n  username: ""\n  directory: "{workdir}"\n  pidfile: ""\n'
            '  use-syslog: no\n  logfile: ""\n  verbosity: 1\n'
            '  module-config: "iterator"\n'
            '  local-zone: "test." nodefault\n'
            f'  tls-cert-bundle: "{upstream.ca}"\n'
            "  cache-max-ttl: 0\n  cache-max-negative-ttl: 0\n  prefetch: no\n"
            "remote-control:\n  control-enable: no\n"
            "forward-zone:\n"
            '  name: "."\n  forward-tls-upstream: yes\n'
            f"  forward-addr: {upstream.address}@853#{upstream.server_name}\n"
        )
        return ["unbound", "-d", "-p", "-c", str(conf)]


class KnotDot(Client):
    """Knot Resolver 5 forwarding everything over DoT (``policy.TLS_FORWARD``), DNSSEC off
    (no trust anchor), a small cache in its working directory."""

    name = "knot-dot"
    package = "knot-resolver"
    program = "kresd"
    transport = "dot"

    def argv(self, workdir: Path, upstream: Upstream) -> list[str]:
        rundir = workdir / "kresd"
        rundir.mkdir(parents=True, exist_ok=True)
        conf = workdir / "kresd.conf"
        conf.write_text(
            f"net.listen('{STUB_LISTEN}', 53, {{ kind = 'dns' }})\n"
            "trust_anchors.remove('.')\n"
            "cache.size = 10 * MB\n"
            "policy.add(policy.all(policy.TLS_FORWARD({{"
            f"'{upstream.address}@853', hostname='{upstream.server_name}', ca_file='{upstream.ca}'"
            "}})))\n"
        )
        return ["kresd", "-n", "-c", str(conf), str(rundir)]


class External(Client):
    """A command the user gives, run in the client namespace; it must listen on
    127.0.0.1:53 (UDP) and forward to the lab's resolver. ``{doh_url}``, ``{dot}``, ``{ca}``,
    ``{server_name}``, ``{address}`` and ``{dir}`` in it are replaced."""

    name = "external"
    transport = "any"

    def argv(self, workdir: Path, upstream: Upstream) -> list[str]:
        if not self.command:
            raise UsageError("observe: --client external needs --command")
        fields = {
            "doh_url": upstream.doh_url,
            "dot": upstream.dot,
            "ca": str(upstream.ca),
            "server_name": upstream.server_name,
            "address": upstream.address,
            "dir": str(workdir),
        }
        try:
            return [part.format(**fields) for part in shlex.split(self.command)]
        except (KeyError, IndexError, ValueError) as e:
            raise UsageError(f"observe: --command: unknown or bad placeholder {e}") from None


CLIENTS: dict[str, type[Client]] = {c.name: c for c in (Dnss, UnboundDot, KnotDot, External)}


def client(name: str, command: str | None = None) -> Client:
    try:
        return CLIENTS[name](command)
    except KeyError:
        raise UsageError(f"observe: unknown client {name!r} (known: {', '.join(CLIENTS)})") from None
