"""Synthetic operator captures of a known composition, as large as asked: a pcap (Ethernet,
IPv4) of clients of a resolver, each class of clients with its transport and connection shape,
for the tests and benchmarks of ``dnscost population`` (``bench/capture-read``).

What the packets hold is what a capture at a resolver shows, octet for octet where the reader
looks: Do53 messages with their questions; TCP connections opened, carrying their data in
sequence and closed with FIN by the side the class says; TLS records with a ClientHello (server
name, ALPN, a pre-shared key offered when the class resumes) and a ServerHello (TLS 1.3, the
key taken), the client's Finished, one application-data record per query (for DoH the HTTP/2
preface first, in a record of its own), a close_notify; QUIC connections with an Initial (or
0-RTT when resuming), one short-header packet per query and acknowledgements. Encrypted
payloads are random octets of the right length. The clients' connections are interleaved in
time; the composition is returned with the file, as the truth to recover."""

from __future__ import annotations

import argparse
import random
import struct
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

__all__ = ["FORMATS", "MIXES", "OPERATOR_MIX", "ClassSpec", "Truth", "scaled", "write_capture"]

PORTS = {"udp": 53, "tcp": 53, "dot": 853, "doh": 443, "doq": 853, "doh3": 443}
SERVER = bytes([192, 0, 2, 53])
ETHERNET = bytes(6) + bytes([2, 0, 0, 0, 0, 1]) + b"\x08\x00"


@dataclass(frozen=True)
class ClassSpec:
    """A class of clients: ``clients`` of them on ``transport``, each opening ``connections``
    connections of ``queries`` queries (Do53 over UDP: ``connections`` times ``queries`` queries),
    closed by ``closer`` (``client`` or ``server``); ``resume``: reconnections offer a session."""

    transport: str
    clients: int
    connections: int
    queries: int
    closer: str = "client"
    resume: bool = False


@dataclass(frozen=True)
class Truth:
    """What was written: queries and clients per transport, packets, octets."""

    queries: dict[str, int]
    clients: dict[str, int]
    packets: int
    octets: int


NAMES = 10_000
"""Distinct names the clients ask, by popularity: the name of rank r (1 to NAMES) is asked with
a probability falling as 1/r (log-uniform ranks), as names are at a resolver; outside the
synthetic TLD (``.example``), so a replay of them needs every name forwarded and answered."""


def _question(rng: random.Random) -> bytes:
    rank = int(NAMES ** (rng.randrange(10**6) / 10**6))
    labels = (f"w{rank}".encode(), f"site{rank % 97}".encode(), b"example")
    name = b"".join(bytes([len(p)]) + p for p in labels)
    return name + b"\x00" + struct.pack("!HH", 1, 1)


def _dns(qid: int, question: bytes, response: bool) -> bytes:
    flags = 0x8180 if response else 0x0100
    return (
        struct.pack("!HHHHHH", qid, flags, 1, 1 if response else 0, 0, 0)
        + question
        + (b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x0e\x10\x00\x04\xc0\x00\x02\x01" if response else b"")
    )


def _ext(kind: int, data: bytes) -> bytes:
    return struct.pack("!HH", kind, len(data)) + data


def _hello(kind: int, body: bytes) -> bytes:
    msg = bytes([kind]) + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + struct.pack("!H", len(msg)) + msg


def _client_hello(alpn: bytes, resume: bool) -> bytes:
    sni = b"dns.example.test"
    exts = _ext(0, struct.pack("!HBH", len(sni) + 3, 0, len(sni)) + sni)
    exts += _ext(16, struct.pack("!H", len(alpn) + 1) + bytes([len(alpn)]) + alpn)
    exts += _ext(43, b"\x02\x03\x04")
    if resume:
        exts += _ext(41, bytes(60))
    body = b"\x03\x03" + bytes(32) + b"\x20" + bytes(32) + b"\x00\x02\x13\x01\x01\x00"
    return _hello(1, body + struct.pack("!H", len(exts)) + exts)


def _server_hello(resumed: bool) -> bytes:
    exts = _ext(43, b"\x03\x04") + (_ext(41, b"\x00\x00") if resumed else b"")
    body = b"\x03\x03" + bytes(32) + b"\x20" + bytes(32) + b"\x13\x01\x00"
    return _hello(2, body + struct.pack("!H", len(exts)) + exts)


def _record(plaintext: int, rng: random.Random) -> bytes:
    """A TLS 1.3 application-data record of ``plaintext`` octets (content type and tag added)."""
    n = plaintext + 17
    return b"\x17\x03\x03" + struct.pack("!H", n) + rng.randbytes(n)


Packet = tuple[bytes, bytes, int, int, str, bytes, int, int]
"""(source, destination, source port, destination port, proto, payload, seq, flags)."""

Burst = list[Packet]
"""Packets that go together (a handshake, a query and its answer; the last with the close)."""


def _tcp_conn(client: bytes, port: int, spec: ClassSpec, again: bool, rng: random.Random) -> Iterator[Burst]:
    sport = PORTS[spec.transport]
    cseq, sseq = rng.randrange(2**32), rng.randrange(2**32)

    def c(payload: bytes, flags: int = 0x18) -> Packet:
        nonlocal cseq
        p = (client, SERVER, port, sport, "tcp", payload, cseq, flags)
        cseq = (cseq + len(payload) + (1 if flags & 0x03 else 0)) % 2**32
        return p

    def s(payload: bytes, flags: int = 0x18) -> Packet:
        nonlocal sseq
        p = (SERVER, client, sport, port, "tcp", payload, sseq, flags)
        sseq = (sseq + len(payload) + (1 if flags & 0x03 else 0)) % 2**32
        return p

    yield [c(b"", 0x02), s(b"", 0x12), c(b"", 0x10)]
    tls = spec.transport in ("dot", "doh")
    resumed = spec.resume and again
    if tls:
        hello = [c(_client_hello(b"h2" if spec.transport == "doh" else b"dot", resumed))]
        hello.append(s(_server_hello(resumed) + b"\x14\x03\x03\x00\x01\x01" + _record(60 if resumed else 400, rng)))
        hello.append(c(b"\x14\x03\x03\x00\x01\x01" + _record(36, rng)))  # Finished
        if spec.transport == "doh":
            hello += [c(_record(58, rng)), s(_record(30, rng))]  # the HTTP/2 preface, SETTINGS, WINDOW_UPDATE
        yield hello
    for k in range(spec.queries):
        q = _dns(k, _question(rng), False)
        if spec.transport == "tcp":
            a = _dns(k, q[12:], True)
            burst = [c(struct.pack("!H", len(q)) + q), s(struct.pack("!H", len(a)) + a)]
        else:
            size = (2 + len(q)) if spec.transport == "dot" else (120 if k == 0 else 70)
            burst = [c(_record(size, rng)), s(_record(size + 20, rng))]
        if k == spec.queries - 1:  # closed once its queries are answered
            first, second = (c, s) if spec.closer == "client" else (s, c)
            if tls:
                burst.append(first(_record(2, rng)))  # close_notify
            burst += [first(b"", 0x11), second(b"", 0x11), first(b"", 0x10)]
        yield burst


def _quic_conn(client: bytes, port: int, spec: ClassSpec, again: bool, rng: random.Random) -> Iterator[Burst]:
    sport = PORTS[spec.transport]

    def c(payload: bytes) -> Packet:
        return (client, SERVER, port, sport, "udp", payload, 0, 0)

    def s(payload: bytes) -> Packet:
        return (SERVER, client, sport, port, "udp", payload, 0, 0)

    opening = [c(b"\xc3" + rng.randbytes(1199))]  # Initial
    if spec.resume and again:
        opening.append(c(b"\xd3" + rng.randbytes(120)))  # 0-RTT
    yield [*opening, s(b"\xc3" + rng.randbytes(1199)), c(b"\xe3" + rng.randbytes(80))]  # and Handshake
    for _ in range(spec.queries):
        query, answer = (
            c(b"\x43" + rng.randbytes(rng.randrange(70, 90))),
            s(b"\x43" + rng.randbytes(rng.randrange(90, 120))),
        )
        yield [query, answer, c(b"\x43" + rng.randbytes(30))]  # and an acknowledgement


def _client(index: int, spec: ClassSpec, base: int, rng: random.Random) -> Iterator[Burst]:
    address = struct.pack("!I", base + index)
    if spec.transport == "udp":
        for k in range(spec.connections * spec.queries):
            port = rng.randrange(1024, 65536)
            q = _dns(k % 65536, _question(rng), False)
            answer = _dns(k % 65536, q[12:], True)
            yield [(address, SERVER, port, 53, "udp", q, 0, 0), (SERVER, address, 53, port, "udp", answer, 0, 0)]
        return
    conn = _quic_conn if spec.transport in ("doq", "doh3") else _tcp_conn
    for n in range(spec.connections):
        yield from conn(address, 20000 + n % 40000, spec, n > 0, rng)


def _frame(p: Packet) -> bytes:
    src, dst, sport, dport, proto, payload, seq, flags = p
    if proto == "tcp":
        l4 = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, flags, 65535, 0, 0) + payload
        number = 6
    else:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
        number = 17
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0x4000, 64, number, 0, src, dst)
    return ETHERNET + ip + l4


FORMATS = ("pcap", "pcap-ns", "pcapng")
"""The file formats written: pcap with microsecond or nanosecond times, pcapng (big-endian,
nanosecond times, a second interface described first and never used, so that the packets'
interface is not the first)."""


def write_capture(
    path: Path,
    classes: Sequence[ClassSpec],
    seed: int = 1,
    gap_us: int = 2000,
    form: str = "pcap",
    drop: float = 0.0,
) -> Truth:
    """Writes the capture of ``classes`` to ``path`` in the format ``form`` (:data:`FORMATS`)
    and returns its composition. The clients take turns, ``gap_us`` apart, each turn one burst
    of packets 50 µs apart. ``drop``: the share of packets the capture loses (left out at
    random; the truth still counts what was sent)."""
    lose = random.Random(seed + 1)
    if form not in FORMATS:
        raise ValueError(f"no capture format {form!r} ({', '.join(FORMATS)})")
    rng = random.Random(seed)
    lanes: list[Iterator[Burst]] = []
    queries: dict[str, int] = {}
    clients: dict[str, int] = {}
    base = (10 << 24) + (1 << 16)
    for spec in classes:
        lanes += [_client(i, spec, base, rng) for i in range(spec.clients)]
        base += spec.clients
        queries[spec.transport] = queries.get(spec.transport, 0) + spec.clients * spec.connections * spec.queries
        clients[spec.transport] = clients.get(spec.transport, 0) + spec.clients
    rng.shuffle(lanes)
    ts, packets, octets = 1_700_000_000_000_000, 0, 0
    with path.open("wb") as f:
        f.write(_header(form))
        active = lanes
        while active:
            still = []
            for lane in active:
                burst = next(lane, None)
                if burst is None:
                    continue
                still.append(lane)
                for p in burst:
                    ts += 50
                    if drop and lose.random() < drop:
                        continue
                    packets += 1
                    octets += _write(f, form, ts - 50, _frame(p))
                ts += gap_us
            active = still
    return Truth(queries, clients, packets, octets)


def _header(form: str) -> bytes:
    if form == "pcap":
        return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    if form == "pcap-ns":
        return struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)
    shb = struct.pack(">IIIHHq", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1) + struct.pack(">I", 28)
    # Two interfaces: 0 raw IP (unused), 1 Ethernet with if_tsresol 9 (nanoseconds).
    idb0 = struct.pack(">IIHHI", 1, 20, 101, 0, 0) + struct.pack(">I", 20)
    opts = struct.pack(">HHB3x", 9, 1, 9) + struct.pack(">HH", 0, 0)
    idb1 = struct.pack(">IIHHI", 1, 20 + len(opts), 1, 0, 0) + opts + struct.pack(">I", 20 + len(opts))
    return shb + idb0 + idb1


def _write(f: BinaryIO, form: str, ts_us: int, frame: bytes) -> int:
    if form == "pcapng":
        ns = ts_us * 1000
        pad = b"\x00" * (-len(frame) % 4)
        n = 32 + len(frame) + len(pad)
        block = struct.pack(">IIIIIII", 6, n, 1, ns >> 32, ns & 0xFFFFFFFF, len(frame), len(frame))
        block += frame + pad + struct.pack(">I", n)
        f.write(block)
        return len(block)
    frac = ts_us % 1_000_000 * (1000 if form == "pcap-ns" else 1)
    f.write(struct.pack("<IIII", ts_us // 1_000_000, frac, len(frame), len(frame)))
    f.write(frame)
    return 16 + len(frame)


OPERATOR_MIX = (
    ClassSpec("udp", 300, 1, 20),
    ClassSpec("tcp", 60, 10, 1),
    ClassSpec("dot", 20, 1, 100),
    ClassSpec("dot", 15, 6, 3, resume=True),
    ClassSpec("doh", 30, 4, 8, resume=True),
    ClassSpec("doq", 10, 2, 30, resume=True),
    ClassSpec("doh3", 5, 3, 4, closer="server"),
)
"""The mix of the tests, the docs' example and the benchmark (``--scale`` times its clients):
Do53 stubs over UDP, one-query TCP, persistent and resuming DoT, DoH, DoQ and DoH/3; about
2.6 MB of capture per unit."""


DOH_HEAVY_MIX = (
    ClassSpec("udp", 100, 1, 20),
    ClassSpec("doh", 40, 1, 60),
    ClassSpec("doh", 40, 5, 6, resume=True),
    ClassSpec("dot", 10, 1, 40),
)
"""Browsers' DoH beside a few stubs: three fifths of the queries over DoH, persistent and in
short resumed connections (docs/population.md, "The load model on trial")."""

ONE_QUERY_MIX = (
    ClassSpec("udp", 150, 1, 20),
    ClassSpec("tcp", 200, 10, 1),
    ClassSpec("dot", 60, 6, 1, resume=True),
    ClassSpec("doh", 30, 6, 1, resume=True),
)
"""Clients that open a connection a query: nearly half the queries each on a connection of its
own (TCP, resumed DoT and DoH), beside stubs over UDP."""

MOBILE_MIX = (
    ClassSpec("udp", 120, 1, 20),
    ClassSpec("dot", 80, 3, 10),
    ClassSpec("dot", 20, 1, 80),
    ClassSpec("tcp", 40, 2, 5),
    ClassSpec("doh", 20, 2, 15, resume=True),
)
"""Phones with a private DNS setting beside stubs: DoT over short connections with full
handshakes, a few persistent DoT clients, TCP connections of several queries and resumed DoH.
Written after the load model was fitted and checked, and its shapes in none of the others' (full
DoT handshakes every tenth query, TCP of five): the composition it has not seen
(docs/population.md, "A composition the model has not seen")."""

ENTERPRISE_MIX = (
    ClassSpec("udp", 150, 1, 20),
    ClassSpec("doh", 30, 1, 100),
    ClassSpec("doh", 25, 3, 8, resume=True),
    ClassSpec("dot", 30, 2, 15, closer="server"),
    ClassSpec("tcp", 30, 5, 2),
)
"""An office network: stubs over UDP, browsers' DoH kept open and in short resumed connections,
DoT that the server closes when idle, TCP connections of two queries (a retry after a truncated
answer, then one more). Written after the load model priced a long idle period apart
(``long_wake``), its server-closed DoT and two-query TCP in none of the others: the second
composition the model has not seen (docs/population.md)."""

MIXES = {
    "operator": OPERATOR_MIX,
    "doh-heavy": DOH_HEAVY_MIX,
    "one-query": ONE_QUERY_MIX,
    "mobile": MOBILE_MIX,
    "enterprise": ENTERPRISE_MIX,
}
"""The compositions ``--mix`` names."""


def scaled(mix: Sequence[ClassSpec], k: int) -> list[ClassSpec]:
    """``mix`` with ``k`` times the clients of each class."""
    return [replace(c, clients=c.clients * k) for c in mix]


def main(argv: list[str] | None = None) -> int:
    """``python -m dnscost.capturegen OUT [--mix NAME] [--scale K] [--seed N]``: a mix of
    :data:`MIXES` (:data:`OPERATOR_MIX` unless told) with ``K`` times its clients, written to
    OUT; its composition printed."""
    ap = argparse.ArgumentParser(prog="python -m dnscost.capturegen", description=main.__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--mix", choices=sorted(MIXES), default="operator")
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--format", choices=FORMATS, default="pcap")
    a = ap.parse_args(argv)
    if a.scale < 1:
        print("capturegen: --scale is at least 1", file=sys.stderr)
        return 2
    t = write_capture(a.out, scaled(MIXES[a.mix], a.scale), a.seed, form=a.format)
    print(f"{a.out}: {t.packets} packets, {t.octets} octets")
    for transport, n in t.queries.items():
        print(f"{transport:<5} {t.clients[transport]:>6} clients {n:>8} queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
