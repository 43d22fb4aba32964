"""Observations' packet captures merged into one capture of a known composition: each
observation's client at an address of its own, the captures' times shifted so that they begin
together, their packets interleaved in time. The composition is what each observation's server
logged (``queries.jsonl``, ``connections.jsonl``): the truth a population read from the merged
capture (``dnscost population``) is held to.

    python -m dnscost.observe.merge OUT.pcap COMPOSITION.json CELL [CELL ...]

Each CELL is an observation's directory (``dnscost observe --capture``): its ``capture.pcap``
(Ethernet, as tcpdump wrote it on the lab's veth pair) and its server's logs."""

from __future__ import annotations

import argparse
import heapq
import statistics
import struct
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from dnscost.errors import UsageError
from dnscost.jsonl import read_records
from dnscost.lab.lab import CLIENT_ADDRESS
from dnscost.results import read_json, write_json

__all__ = ["Member", "main", "merge"]

_CLIENT = bytes(int(x) for x in CLIENT_ADDRESS.split("."))
_ETHERNET, _IPV4 = 1, 0x0800


@dataclass(frozen=True)
class Member:
    """One observation's client in the merged capture, as its server logged it."""

    cell: str
    client: str
    version: str
    command: str | None
    """The stub's command, for ``--client external``."""
    address: str
    queries: dict[str, int]
    """Per transport, the queries the server answered (its ``queries.jsonl``)."""
    connections: dict[str, int]
    """Per connection transport, the connections the server saw (its ``connections.jsonl``)."""
    queries_per_connection: dict[str, float]
    """Per connection transport, the median of the queries of its connections that had any."""


def _packets(path: Path) -> Iterator[tuple[int, bytes]]:
    """A pcap's packets (time in µs, frame), Ethernet only (tcpdump on a veth pair)."""
    data = path.read_bytes()
    if len(data) < 24:
        raise UsageError(f"{path}: not a pcap file (too short)")
    magic = data[:4]
    order = {b"\xd4\xc3\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">", b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\x3c\x4d": ">"}
    if magic not in order:
        raise UsageError(f"{path}: not a pcap file (tcpdump -w writes one)")
    e, nano = order[magic], magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    (link,) = struct.unpack(e + "I", data[20:24])
    if link != _ETHERNET:
        raise UsageError(f"{path}: link type {link}, not Ethernet (the lab's veth pair)")
    at = 24
    while at + 16 <= len(data):
        sec, frac, caplen, _ = struct.unpack(e + "IIII", data[at : at + 16])
        frame = data[at + 16 : at + 16 + caplen]
        if len(frame) < caplen:
            raise UsageError(f"{path}: cut short in its last packet")
        yield sec * 1_000_000 + (frac // 1000 if nano else frac), frame
        at += 16 + caplen


def _readdress(frame: bytes, address: bytes) -> bytes:
    """The frame with the lab client's IPv4 address replaced by ``address`` (source or
    destination) and the IPv4 header checksum made again; other frames as they are."""
    if len(frame) < 34 or struct.unpack("!H", frame[12:14])[0] != _IPV4:
        return frame
    ip = bytearray(frame[14:])
    ihl = (ip[0] & 0x0F) * 4
    for at in (12, 16):
        if ip[at : at + 4] == _CLIENT:
            ip[at : at + 4] = address
    ip[10:12] = b"\0\0"
    total = sum(struct.unpack(f"!{ihl // 2}H", bytes(ip[:ihl])))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    ip[10:12] = struct.pack("!H", ~total & 0xFFFF)
    return frame[:14] + bytes(ip)


def _member(cell: Path, address: str) -> Member:
    meta = read_json(cell / "observation.json")
    queries = Counter(str(r.get("transport")) for r in read_records(cell / "queries.jsonl") if r.get("type") == "query")
    per: dict[str, list[int]] = {}
    for r in read_records(cell / "connections.jsonl"):
        if r.get("type") == "connection":
            per.setdefault(str(r["transport"]), []).append(int(r.get("queries", 0)))
    return Member(
        cell=cell.name,
        client=str(meta.get("client", cell.name)),
        version=str(meta.get("client_version", "")),
        command=meta.get("command"),
        address=address,
        queries=dict(sorted(queries.items())),
        connections={t: len(v) for t, v in sorted(per.items())},
        queries_per_connection={t: statistics.median([q for q in v if q] or [0]) for t, v in sorted(per.items())},
    )


def merge(cells: Sequence[Path], out: Path) -> list[Member]:
    """Writes the merged capture of ``cells`` to ``out`` (pcap, microseconds, Ethernet) and
    returns its composition: client ``k`` (from 0) at 10.99.0.``k + 1``."""
    if not cells:
        raise UsageError("merge: no observation given")
    members, lanes = [], []
    for k, cell in enumerate(cells):
        pcap = cell / "capture.pcap"
        if not pcap.is_file():
            raise UsageError(f"{cell}: no capture.pcap (observe with --capture)")
        address = f"10.99.0.{k + 1}"
        members.append(_member(cell, address))
        packets = list(_packets(pcap))
        if not packets:
            raise UsageError(f"{pcap}: no packets")
        first, raw = packets[0][0], bytes(int(x) for x in address.split("."))
        lanes.append([(t - first, k, _readdress(f, raw)) for t, f in packets])
    start = 1_700_000_000_000_000
    with out.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, _ETHERNET))
        for t, _, frame in heapq.merge(*lanes):
            us = start + t
            f.write(struct.pack("<IIII", us // 1_000_000, us % 1_000_000, len(frame), len(frame)) + frame)
    return members


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dnscost.observe.merge", description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="the merged capture (pcap)")
    p.add_argument("composition", type=Path, help="its composition (JSON), from the observations' server logs")
    p.add_argument("cells", type=Path, nargs="+", help="observations made with dnscost observe --capture")
    a = p.parse_args(argv)
    try:
        members = merge(a.cells, a.out)
    except UsageError as e:
        print(f"merge: {e}", file=sys.stderr)
        return 2
    write_json(a.composition, [asdict(m) for m in members], indent=1)
    for m in members:
        print(f"{m.address:<11} {m.client:<12} queries {m.queries} connections {m.connections}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
