"""The lab where real clients are observed: a client's network namespace and a server's,
joined by a veth pair, the server on 198.18.0.1/30 and the client on 198.18.0.2/30 (RFC
2544's benchmarking range, the only addresses dnscost assigns). Neither namespace reaches
any other network, so every lab can use the same two addresses.

The client's namespace has no default route: a browser's follow-up connection to an answer
outside the pair fails at once instead of leaving the machine. Files under
``/etc/netns/<namespace>/`` (``resolv.conf``, a browser's policies) replace their ``/etc``
counterparts for programs started with :meth:`Lab.exec_prefix` (``ip netns exec`` bind-mounts
them), and for nothing else.

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

from dnscost.errors import MachineError
from dnscost.network import _ip, _pid_alive, orphans

__all__ = ["Lab", "remove_leftovers"]

SERVER_ADDRESS = "198.18.0.1"
CLIENT_ADDRESS = "198.18.0.2"
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


def _remove(server_netns: str, client_netns: str, client_device: str) -> None:
    # Deleting one end of a veth pair deletes both; a namespace goes once its processes have.
    _ip("-n", client_netns, "link", "del", client_device, check=False)
    for ns in (server_netns, client_netns):
        _ip("netns", "del", ns, check=False)
        shutil.rmtree(ETC_NETNS / ns, ignore_errors=True)


def remove_leftovers() -> list[str]:
    """Removes the labs left by dnscost processes that no longer run. Returns their namespaces."""
    removed = []
    for m in orphans(_NAME):
        _ip("netns", "del", m.group(0), check=False)
        shutil.rmtree(ETC_NETNS / m.group(0), ignore_errors=True)
        removed.append(m.group(0))
    if ETC_NETNS.is_dir():
        for d in ETC_NETNS.iterdir():
            own = _NAME.match(d.name)
            if own and not _pid_alive(int(own.group(1))):
                shutil.rmtree(d, ignore_errors=True)
    return removed


class Lab:
    """One lab (see the module's documentation)."""

    def __init__(self, info: LabInfo) -> None:
        self.info = info

    @classmethod
    def create(cls) -> Lab:
        global _made
        remove_leftovers()
        _made += 1
        pid = os.getpid()
        base = f"dnscost-lab-{pid}-{_made}"
        sns, cns = f"{base}-s", f"{base}-c"
        sdev, cdev = f"dl{pid}-{_made}s", f"dl{pid}-{_made}c"
        lab = cls(LabInfo(sns, cns, SERVER_ADDRESS, CLIENT_ADDRESS, sdev, cdev))
        _live.add(lab)
        try:
            _ip("netns", "add", sns)
            _ip("netns", "add", cns)
            _ip("link", "add", cdev, "type", "veth", "peer", "name", sdev)
            for dev, ns, addr in ((sdev, sns, SERVER_ADDRESS), (cdev, cns, CLIENT_ADDRESS)):
                _ip("link", "set", dev, "addrgenmode", "none")  # no IPv6 chatter on the pair
                _ip("link", "set", dev, "netns", ns)
                _ip("-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
                _ip("-n", ns, "link", "set", dev, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            lab.remove()
            raise
        return lab

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
