"""The DoT stubs of the page loads (:mod:`dnscost.clientside.pageload`), each started in the
lab's client namespace as the system resolver's one server (127.0.0.1:53), forwarding to the
lab's DoT: Stubby (``dot``), unbound (``dot-unbound``), and Stubby with Nagle's algorithm off
by an ``LD_PRELOAD`` shim (``dot-nodelay``, a diagnostic)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from dnscost.errors import MachineError
from dnscost.lab.clients import STUB_LISTEN, Client, Schedule, UnboundDot, Upstream
from dnscost.lab.lab import Lab

__all__ = ["NODELAY_SHIM", "STUBS", "StubbyDot", "StubbyNoDelay", "UnboundStub"]


class StubbyDot(Client):
    """Stubby (getdns) as the DoT stub, the one Hounsel et al. used (they state Stubby and its
    10 s idle timeout; the rest is Stubby's shipped configuration or our choice): strict TLS to
    one upstream (the lab's DoT, authenticated by name against the run's CA), round robin off,
    no DNSSEC, its connection closed after ``idle_timeout_ms`` without queries (Stubby's
    default, 10 s), EDNS padding to 128 octets and a private client subnet as shipped. It has
    no cache, and like unbound it leaves Nagle's algorithm on (no ``TCP_NODELAY``): a query
    written while an earlier one is unacknowledged waits for that acknowledgement, about a
    round trip. Log level 6 (info): each connection's open and close, with its responses, in
    ``stubby.log``."""

    name = "stubby"
    package = "stubby"
    program = "stubby"
    transport = "dot"

    def __init__(self, idle_timeout_ms: int) -> None:
        super().__init__()
        self.idle_timeout_ms = idle_timeout_ms

    def argv(self, workdir: Path, upstream: Upstream, schedule: Schedule) -> list[str]:
        conf = workdir / "stubby.yml"
        conf.write_text(
            "resolution_type: GETDNS_RESOLUTION_STUB\n"
            "dns_transport_list:\n  - GETDNS_TRANSPORT_TLS\n"
            "tls_authentication: GETDNS_AUTHENTICATION_REQUIRED\n"
            "tls_query_padding_blocksize: 128\n"
            "edns_client_subnet_private: 1\n"
            "round_robin_upstreams: 0\n"
            f"idle_timeout: {self.idle_timeout_ms}\n"
            f"tls_ca_file: {json.dumps(str(upstream.ca))}\n"
            f"appdata_dir: {json.dumps(str(workdir))}\n"
            f"listen_addresses:\n  - {STUB_LISTEN}@53\n"
            "upstream_recursive_servers:\n"
            f"  - address_data: {upstream.address}\n"
            "    tls_port: 853\n"
            f"    tls_auth_name: {json.dumps(upstream.server_name)}\n"
        )
        return ["stubby", "-C", str(conf), "-v", "6"]


class UnboundStub(UnboundDot):
    """unbound as the second DoT stub (``dot-unbound``; see :mod:`dnscost.clientside.pageload`)."""

    name = "unbound"

    def __init__(self, idle_timeout_ms: int) -> None:
        super().__init__()
        self.idle_timeout_ms = idle_timeout_ms

    def argv(self, workdir: Path, upstream: Upstream, schedule: Schedule) -> list[str]:
        conf = workdir / "unbound.conf"
        conf.write_text(
            "server:\n"
            f"  interface: {STUB_LISTEN}\n  port: 53\n  do-ip6: no\n  num-threads: 1\n"
            f'  chroot: ""\n  username: ""\n  directory: "{workdir}"\n  pidfile: ""\n'
            '  use-syslog: no\n  logfile: ""\n  verbosity: 1\n'
            '  module-config: "iterator"\n'
            '  local-zone: "test." nodefault\n'
            f'  tls-cert-bundle: "{upstream.ca}"\n'
            f"  tcp-reuse-timeout: {self.idle_timeout_ms}\n  prefetch: no\n"
            "remote-control:\n  control-enable: no\n"
            "forward-zone:\n"
            '  name: "."\n  forward-tls-upstream: yes\n'
            f"  forward-addr: {upstream.address}@853#{upstream.server_name}\n"
        )
        return ["unbound", "-d", "-p", "-c", str(conf)]


NODELAY_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
/* dnscost: TCP_NODELAY on every TCP socket the program connects (Nagle's algorithm off). */
int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    static int (*real)(int, const struct sockaddr *, socklen_t);
    int type = 0, one = 1;
    socklen_t size = sizeof type;
    if (!real)
        real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) == 0 && type == SOCK_STREAM &&
        (addr->sa_family == AF_INET || addr->sa_family == AF_INET6))
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return real(fd, addr, len);
}
"""
"""The ``LD_PRELOAD`` shim of :class:`StubbyNoDelay`, compiled with ``cc`` into the session's
directory."""


class StubbyNoDelay(StubbyDot):
    """A diagnostic: :class:`StubbyDot` with Nagle's algorithm off on its TLS connection
    (``TCP_NODELAY`` set by :data:`NODELAY_SHIM` when it connects), to measure what Nagle's
    algorithm costs DoT; Stubby itself never sets it."""

    def prepare(self, lab: Lab, workdir: Path, upstream: Upstream, schedule: Schedule) -> dict[str, str] | None:
        if shutil.which("cc") is None:
            raise MachineError("pageload: dot-nodelay needs a C compiler, cc (build-essential; run scripts/setup)")
        source, shim = workdir / "nodelay.c", workdir / "nodelay.so"
        source.write_text(NODELAY_SHIM)
        r = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(source), "-ldl"],
                           capture_output=True, text=True, check=False)  # fmt: skip
        if r.returncode != 0:
            raise MachineError(f"pageload: cannot build the TCP_NODELAY shim: {r.stderr.strip()[-300:]}")
        return {**os.environ, "LD_PRELOAD": str(shim)}


STUBS: dict[str, type[StubbyDot] | type[UnboundStub]] = {
    "dot": StubbyDot,
    "dot-unbound": UnboundStub,
    "dot-nodelay": StubbyNoDelay,
}
"""The DoT transports and the stub each starts in the client namespace."""
