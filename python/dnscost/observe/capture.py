"""Connections as a packet capture shows them (pcap or pcapng, Ethernet, Linux cooked or raw
IP), independent of the server's log: per TCP connection with the server its open and close
times, who closed it and how (FIN, RST or both), and the payload octets each way; per UDP
flow (DoQ, DoH/3: encrypted, so no close is visible) its first and last packet and octets.

Rules, per TCP 4-tuple: the client is the side that is not the server's address and port; a
connection opens at its SYN (or its first packet if the SYN was not captured) and ends at its
last packet; the closer is the sender of the first FIN, or of the first RST if that comes
before every FIN; a SYN after a close on the same 4-tuple starts a new connection.

:func:`reconcile` sets them beside the server's per-connection log (matched by the client's
address and port, and time), keeping both views where they differ: a client that sends
GOAWAY and lets the server's TCP stack send the FIN is "closed by the client" in the log and
by the server in the capture."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import dpkt  # type: ignore[import-untyped]

from dnscost.contract import ConnectionRecord
from dnscost.errors import UsageError

__all__ = ["CapturedConnection", "analyse", "reconcile"]


@dataclass
class CapturedConnection:
    transport: str
    """``tcp`` or ``udp``."""
    client: str
    """The client's address and port, ``ip:port``."""
    opened_unix_s: float
    closed_unix_s: float
    closer: str = "none"
    """``client``, ``server``, ``none`` (never closed in the capture) or ``unknown`` (UDP)."""
    how: str = "none"
    """``fin``, ``rst``, ``fin+rst``, ``none`` or ``unknown`` (UDP)."""
    octets_from_client: int = 0
    octets_from_server: int = 0
    packets_from_client: int = 0
    packets_from_server: int = 0
    _fin: set[str] = field(default_factory=set, repr=False)
    _rst: set[str] = field(default_factory=set, repr=False)

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if not k.startswith("_")}

    @property
    def ended(self) -> bool:
        return bool(self._rst) or self._fin == {"client", "server"}


def _reader(f: BinaryIO) -> Any:
    head = f.read(4)
    f.seek(0)
    if head == b"\x0a\x0d\x0d\x0a":
        return dpkt.pcapng.Reader(f)
    return dpkt.pcap.Reader(f)


def _ip_of(reader: Any, buf: bytes) -> Any:
    link = reader.datalink()
    if link == dpkt.pcap.DLT_EN10MB:
        eth = dpkt.ethernet.Ethernet(buf)
        return eth.data
    if link == dpkt.pcap.DLT_LINUX_SLL:
        return dpkt.sll.SLL(buf).data
    if link in (dpkt.pcap.DLT_RAW, 101):  # raw IP (LINKTYPE_RAW is 101 in files)
        return dpkt.ip.IP(buf) if buf and buf[0] >> 4 == 4 else dpkt.ip6.IP6(buf)
    raise UsageError(f"capture: link type {link} is not supported (Ethernet, Linux cooked, raw IP are)")


def _address(ip: Any, raw: bytes) -> str:
    family = socket.AF_INET6 if isinstance(ip, dpkt.ip6.IP6) else socket.AF_INET
    return socket.inet_ntop(family, raw)


def _payload(ip: Any, l4: Any) -> int:
    """The segment's or datagram's payload octets, from its headers (a capture may keep only
    the first octets of each packet)."""
    if isinstance(l4, dpkt.udp.UDP):
        return max(int(l4.ulen) - 8, 0)
    ip_payload = int(ip.plen) if isinstance(ip, dpkt.ip6.IP6) else int(ip.len) - int(ip.hl) * 4
    return max(ip_payload - int(l4.off) * 4, 0)


def analyse(path: Path, server: str) -> list[CapturedConnection]:
    """The connections and flows with ``server`` (``ip:port``) in the capture at ``path``."""
    host, _, port_text = server.rpartition(":")
    try:
        server_ip = ipaddress.ip_address(host.strip("[]"))
        server_port = int(port_text)
    except ValueError:
        raise UsageError(f"capture: --server {server!r} is not ADDRESS:PORT") from None
    live: dict[tuple[str, str], CapturedConnection] = {}
    out: list[CapturedConnection] = []
    try:
        f = path.open("rb")
    except OSError as e:
        raise UsageError(f"capture: {path}: {e.strerror}") from None
    with f:
        try:
            reader = _reader(f)
        except (ValueError, dpkt.dpkt.NeedData) as e:
            raise UsageError(f"capture: {path}: not a pcap or pcapng file ({e})") from None
        for ts, buf in reader:
            try:
                ip = _ip_of(reader, buf)
            except (dpkt.dpkt.UnpackError, dpkt.dpkt.NeedData):
                continue
            if not isinstance(ip, dpkt.ip.IP | dpkt.ip6.IP6):
                continue
            l4 = ip.data
            if not isinstance(l4, dpkt.tcp.TCP | dpkt.udp.UDP):
                continue
            src, dst = _address(ip, ip.src), _address(ip, ip.dst)
            if ipaddress.ip_address(dst) == server_ip and l4.dport == server_port:
                side, client = "client", f"{src}:{l4.sport}"
            elif ipaddress.ip_address(src) == server_ip and l4.sport == server_port:
                side, client = "server", f"{dst}:{l4.dport}"
            else:
                continue
            transport = "tcp" if isinstance(l4, dpkt.tcp.TCP) else "udp"
            key = (transport, client)
            c = live.get(key)
            syn = transport == "tcp" and l4.flags & dpkt.tcp.TH_SYN and not l4.flags & dpkt.tcp.TH_ACK
            if c is None or (syn and c.ended):
                c = CapturedConnection(transport, client, ts, ts)
                if transport == "udp":
                    c.closer = c.how = "unknown"
                live[key] = c
                out.append(c)
            c.closed_unix_s = ts
            payload = _payload(ip, l4)
            if side == "client":
                c.octets_from_client += payload
                c.packets_from_client += 1
            else:
                c.octets_from_server += payload
                c.packets_from_server += 1
            if transport == "tcp":
                if l4.flags & dpkt.tcp.TH_RST:
                    if not c._fin and not c._rst:
                        c.closer = side
                    c._rst.add(side)
                if l4.flags & dpkt.tcp.TH_FIN:
                    if not c._fin and not c._rst:
                        c.closer = side
                    c._fin.add(side)
                if c._fin or c._rst:
                    c.how = "+".join(w for w, seen in (("fin", c._fin), ("rst", c._rst)) if seen)
    return out


def reconcile(
    captured: list[CapturedConnection], log: Sequence[ConnectionRecord], origin_unix_us: int
) -> list[dict[str, object]]:
    """Each server-log connection beside the captured one of the same client address and port
    whose span overlaps it (``origin_unix_us``: the wall-clock time of the log's zero). Both
    views are kept; ``agree`` says whether they name the same closer."""
    by_client: dict[str, list[CapturedConnection]] = {}
    for c in captured:
        by_client.setdefault(c.client, []).append(c)
    rows = []
    for r in log:
        if r["role"] != "server":
            continue
        opened = (origin_unix_us + r["opened_us"]) / 1e6
        closed = (origin_unix_us + r["closed_us"]) / 1e6
        candidates = [
            c
            for c in by_client.get(r["peer_address"], [])
            if c.opened_unix_s <= closed + 1 and c.closed_unix_s >= opened - 1
        ]
        match = min(candidates, key=lambda c: abs(c.opened_unix_s - opened), default=None)
        rows.append(
            {
                "id": r["id"],
                "transport": r["transport"],
                "client": r["peer_address"],
                "log_closed_by": r.get("closed_by"),
                "log_close": r.get("close"),
                "capture_closer": match.closer if match else None,
                "capture_how": match.how if match else None,
                "capture_octets_from_client": match.octets_from_client if match else None,
                "capture_octets_from_server": match.octets_from_server if match else None,
                "agree": match is not None and match.closer == r.get("closed_by"),
            }
        )
    return rows
