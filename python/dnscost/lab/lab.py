"""The lab where real clients are observed: a client's network namespace and a server's,
joined by a veth pair, the server on 198.18.0.1/30 and the client on 198.18.0.2/30 (RFC
2544's benchmarking range, the only addresses dnscost assigns). Neither namespace reaches
any other network, so every lab can use the same two addresses.

The client's namespace has no default route: a browser's follow-up connection to an answer
outside the pair fails at once instead of leaving the machine. Files under
``/etc/netns/<namespace>/`` (``resolv.conf``, a browser's policies) replace their ``/etc``
counterparts for programs started with :meth:`Lab.exec_prefix` (``ip netns exec`` bind-mounts
them), and for nothing else.

A lab may instead be joined by an *emulated link* (:meth:`Lab.create` with a network preset,
``dnscost client``): ``dnscost-engine link`` makes a TUN device in each namespace and forwards
every packet between them with the preset's delay, jitter, loss and rates (this machine's kernel,
like many VM kernels, has no ``netem``); with an upstream split, packets between the server and
:data:`UPSTREAM_ADDRESS` (the client namespace's loopback, where an authoritative server for
cold-cache runs listens) take a link of their own. The link process dies with the lab.

Everything made here (namespaces, links, ``/etc/netns`` directories) is removed by
:meth:`Lab.remove`, at exit, and, for a dnscost process that was killed, by the next
:meth:`Lab.create` (names carry the PID of the process that made them)."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dnscost.errors import MachineError
from dnscost.network import ip, orphans, pid_alive

if TYPE_CHECKING:
    from dnscost.lab.presets import Preset
    from dnscost.proc import Child

__all__ = ["CLIENT_ADDRESS", "SERVER_ADDRESS", "UPSTREAM_ADDRESS", "ZONE", "Lab", "LabInfo", "remove_leftovers"]

SERVER_ADDRESS = "198.18.0.1"
CLIENT_ADDRESS = "198.18.0.2"
UPSTREAM_ADDRESS = "198.18.0.5"
"""Where an authoritative server behind an emulated link's upstream split listens (on the client
namespace's loopback, reached from the server's namespace through the link)."""
ZONE = """$TTL 3600
$ORIGIN .
@ IN SOA ns.lab. hostmaster.lab. 1 3600 600 86400 0
@ IN NS ns.lab.
$ORIGIN lab.
@ IN SOA ns.lab. hostmaster.lab. 1 3600 600 86400 0
ns IN A {address}
$ORIGIN gstatic.com.
@ IN SOA ns.lab. hostmaster.lab. 1 3600 600 86400 0
www IN A {address}
"""
"""The root's SOA and NS (resolvers prime and check time against them), its name server's
address, and the name of Chromium's DoH probe (``www.gstatic.com``, which must resolve to
an address): the head of every zone the lab's resolver serves, ``{address}`` its own."""
_NAME = re.compile(r"dnscost-lab-(\d+)-(\d+)-([cs])$")
ETC_NETNS = Path("/etc/netns")
_live: set[Lab] = set()
_made = 0


@dataclass(frozen=True)
class LabInfo:
    server_netns: str
    client_netns: str
    server_address: str
    client_address: str
    server_device: str
    client_device: str
    preset: str | None = None
    """The emulated link's network preset (None: a plain veth pair)."""
    upstream: str | None = None
    """The upstream split's preset, if any."""


def _remove(server_netns: str, client_netns: str, client_device: str) -> None:
    # Deleting one end of a veth pair deletes both; a namespace goes once its processes have.
    ip("-n", client_netns, "link", "del", client_device, check=False)
    for ns in (server_netns, client_netns):
        ip("netns", "del", ns, check=False)
        shutil.rmtree(ETC_NETNS / ns, ignore_errors=True)


def remove_leftovers() -> list[str]:
    """Removes the labs left by dnscost processes that no longer run. Returns their namespaces."""
    removed = []
    for m in orphans(_NAME):
        ip("netns", "del", m.group(0), check=False)
        shutil.rmtree(ETC_NETNS / m.group(0), ignore_errors=True)
        removed.append(m.group(0))
    if ETC_NETNS.is_dir():
        for d in ETC_NETNS.iterdir():
            own = _NAME.match(d.name)
            if own and not pid_alive(int(own.group(1))):
                shutil.rmtree(d, ignore_errors=True)
    return removed


class Lab:
    """One lab (see the module's documentation)."""

    def __init__(self, info: LabInfo) -> None:
        self.info = info
        self.link: Child | None = None
        self.workdir: Path | None = None

    @classmethod
    def create(
        cls, preset: Preset | None = None, *, upstream: Preset | None = None, workdir: Path | None = None
    ) -> Lab:
        """A lab joined by a veth pair, or with ``preset``, by an emulated link (whose log
        and counters go to ``workdir``); ``upstream`` splits the link for
        :data:`UPSTREAM_ADDRESS`."""
        global _made
        if preset is None and upstream is not None:
            raise ValueError("an upstream split needs an emulated link")
        remove_leftovers()
        _made += 1
        pid = os.getpid()
        base = f"dnscost-lab-{pid}-{_made}"
        sns, cns = f"{base}-s", f"{base}-c"
        sdev, cdev = f"dl{pid}-{_made}s", f"dl{pid}-{_made}c"
        info = LabInfo(
            sns, cns, SERVER_ADDRESS, CLIENT_ADDRESS, sdev, cdev,
            preset.name if preset else None, upstream.name if upstream else None,
        )  # fmt: skip
        lab = cls(info)
        _live.add(lab)
        try:
            ip("netns", "add", sns)
            ip("netns", "add", cns)
            for ns in (sns, cns):
                ip("-n", ns, "link", "set", "lo", "up")
            if preset is None:
                ip("link", "add", cdev, "type", "veth", "peer", "name", sdev)
                for dev, ns, addr in ((sdev, sns, SERVER_ADDRESS), (cdev, cns, CLIENT_ADDRESS)):
                    ip("link", "set", dev, "addrgenmode", "none")  # no IPv6 chatter on the pair
                    ip("link", "set", dev, "netns", ns)
                    ip("-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
                    ip("-n", ns, "link", "set", dev, "up")
            else:
                lab._start_link(preset, upstream, workdir or Path.cwd())
        except BaseException:
            lab.remove()
            raise
        return lab

    def _start_link(self, preset: Preset, upstream: Preset | None, workdir: Path) -> None:
        import json

        from dnscost.engine import engine_path
        from dnscost.proc import Child

        i = self.info
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        argv = [
            str(engine_path()), "link",
            "--a", f"{i.client_netns}:{i.client_device}", "--b", f"{i.server_netns}:{i.server_device}",
            "--a-to-b", preset.link("up"), "--b-to-a", preset.link("down"),
            "--stats", str(workdir / "link-stats.json"),
            "--realtime",  # wakes on time on a busy machine: the delay is the preset's, not the load's
        ]  # fmt: skip
        if upstream is not None:
            # The resolver in the server's namespace is the client of that link.
            argv += ["--split", UPSTREAM_ADDRESS, "--split-a-to-b", upstream.link("down")]
            argv += ["--split-b-to-a", upstream.link("up")]
        ready = workdir / "link.out"
        out = ready.open("wb")
        self.link = Child("link", argv, log=workdir / "link.log", stdout=out)
        out.close()

        def is_ready() -> bool:
            # Not jsonl.read_records: only the first line, of a file the link is still writing.
            lines = ready.read_text().splitlines()
            return bool(lines) and bool(json.loads(lines[0]).get("ready"))

        self.link.wait_for(is_ready, 10, "while making the lab's link")
        for ns, dev, addr, peer in ((i.server_netns, i.server_device, SERVER_ADDRESS, CLIENT_ADDRESS),
                                    (i.client_netns, i.client_device, CLIENT_ADDRESS, SERVER_ADDRESS)):  # fmt: skip
            # No IPv6 on the link: the kernel's own solicitations would cross it.
            ip("netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1")
            ip("-n", ns, "addr", "add", addr, "peer", f"{peer}/32", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
        if upstream is not None:
            ip("-n", i.client_netns, "addr", "add", f"{UPSTREAM_ADDRESS}/32", "dev", "lo")
            ip("-n", i.server_netns, "route", "add", f"{UPSTREAM_ADDRESS}/32", "dev", i.server_device)

    def link_stats(self) -> dict[str, object] | None:
        """The emulated link's counters (written when it stops: after :meth:`remove`)."""
        import json

        if self.workdir is None:
            return None
        path = self.workdir / "link-stats.json"
        if not path.exists():
            return None
        doc: dict[str, object] = json.loads(path.read_text())
        return doc

    def exec_prefix(self, side: str) -> list[str]:
        """A command prefix that runs a program in the ``client``'s or the ``server``'s
        namespace, with that namespace's ``/etc/netns`` files in place of ``/etc``'s."""
        return ["ip", "netns", "exec", self.netns(side)]

    def netns(self, side: str) -> str:
        if side not in ("client", "server"):
            raise ValueError(side)
        return self.info.client_netns if side == "client" else self.info.server_netns

    def write_etc(self, side: str, relative: str, text: str) -> Path:
        """Writes ``/etc/<relative>`` as the programs of ``side`` see it."""
        path = ETC_NETNS / self.netns(side) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def remove(self) -> None:
        """Removes the namespaces, the veth pair and the ``/etc/netns`` files. Safe to call
        twice."""
        if self.link is not None:
            self.link.stop()
            self.link = None
        if self in _live:
            i = self.info
            _remove(i.server_netns, i.client_netns, i.client_device)
        _live.discard(self)


def remove_all() -> None:
    """Removes every lab this process made and has not removed (at exit)."""
    for lab in list(_live):
        with contextlib.suppress(MachineError):
            lab.remove()


atexit.register(remove_all)
