"""Wire cost per query: the ``wire`` table on synthetic trials, and the engine's packet and
octet counts checked against a packet capture.

The capture test runs ``dnscost-engine serve`` and ``generate`` in a network namespace it makes
(only its loopback, so nothing else on the machine is captured), at one query per connection,
and captures with tcpdump. What the engine counts (``docs/results.md``, Wire cost) differs from
the capture in exactly these ways, which the test accounts for before comparing:

- With the default graceful close the engine waits for the server's FIN after its own close
  and reads TCP_INFO a last time then, so the whole close is counted and every segment is
  compared. With ``close: rst`` the engine reads TCP_INFO just before its RST: the capture's
  client segments less its RSTs must equal ``packets_sent``.
- ``bytes_sent`` is TCP_INFO's ``tcpi_bytes_acked``: it counts sequence numbers the server
  acknowledged, so the SYN's and (graceful close) the FIN's too. It is compared with the
  capture's server segments' highest ACK less the client's ISN. ``bytes_received``
  (``tcpi_bytes_received``) counts the server's FIN likewise.
- Payload octets in the capture are counted once per sequence number (a retransmission is a
  segment again, not new octets), as the kernel counts them.

Tolerance: 2 % on each count after these terms, for a segment that crosses the engine's last
reading (an ACK the kernel sends or receives between the reading and the reset). UDP is exact.
"""

from __future__ import annotations

import json
import shutil
import signal
import struct
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import Netns, need, wait_for
from dnscost import study
from dnscost.analysis import COLUMNS, Table, analyze
from dnscost.analysis.tables import trial_row, wire_rows
from dnscost.engine import engine_path
from dnscost.report.html import render_report
from dnscost.trial_summary import summarize_trial
from test_trial_summary import COUNTERS, CTX, _records, _samples

# --- the table, on synthetic trials ----------------------------------------------------------


def _trial(
    transport: str,
    lifetime: str | None,
    wire: dict[str, int] | None,
    *,
    valid: bool = True,
    resumption: float = 0.0,
    status: str = "done",
) -> dict[str, Any]:
    summary: dict[str, Any] = {"validity": {"valid": valid, "flags": [] if valid else ["generator-bound"]}}
    if wire is not None:
        summary["wire"] = wire
    return {
        "id": f"{transport}-{lifetime}-{len(str(wire))}",
        "group": "establishment",
        "kind": "load",
        "target": "t",
        "transport": transport,
        "status": status,
        "params": {"connections": 10, "lifetime": lifetime, "resumption": resumption},
        "summary": summary,
    }


def _wire(answered: int, connections: int, ps: int, pr: int, bs: int, br: int) -> dict[str, int]:
    return {
        "queries_answered": answered,
        "connections_established": connections,
        "packets_sent": ps,
        "packets_received": pr,
        "bytes_sent": bs,
        "bytes_received": br,
    }


def synthetic_trials() -> list[dict[str, Any]]:
    return [
        # tcp, one query per connection: 4 segments out, 3 in, 41 + 1 (SYN) octets out, 57 in.
        _trial("tcp", "1q", _wire(100, 100, 400, 300, 4200, 5700)),
        _trial("tcp", "1q", _wire(200, 200, 820, 600, 8400, 11400)),
        _trial("tcp", "1q", _wire(50, 50, 5000, 5000, 99999, 99999), valid=False),  # left out
        _trial("tcp", "1q", None, status="failed"),
        # dot persistent: only invalid trials, so the figures come from them (valid false).
        _trial("dot", "forever", _wire(1000, 2, 1100, 1000, 50002, 80000), valid=False),
        # dot one query with resumption: no slides' figure (theirs is a new full connection).
        _trial("dot", "1q", _wire(10, 10, 60, 50, 3010, 14000), resumption=1.0),
        _trial("udp", None, _wire(10, 0, 10, 10, 390, 550)),
        # a trial whose engine kept no traffic: no row of its own
        _trial("doh", "1q", None),
    ]


def test_wire_rows_per_query_medians_and_the_slides_figures() -> None:
    trials = synthetic_trials()
    rows = wire_rows(trials, [trial_row(t, {}) for t in trials])
    by = {(r["transport"], r["lifetime"], r["resumption"]): r for r in rows}
    assert set(by) == {("tcp", "1q", 0.0), ("dot", "forever", 0.0), ("dot", "1q", 1.0), ("udp", None, 0.0)}

    tcp = by["tcp", "1q", 0.0]
    assert tcp["trials"] == 2 and tcp["valid"] is True
    assert tcp["queries_answered"] == 300 and tcp["connections_established"] == 300
    assert tcp["queries_per_connection"] == 1.0
    assert tcp["packets_sent_per_query"] == pytest.approx((4.0 + 4.1) / 2)
    assert tcp["packets_received_per_query"] == pytest.approx(3.0)
    assert tcp["packets_per_query"] == pytest.approx((7.0 + 7.1) / 2)
    assert tcp["bytes_sent_per_query"] == pytest.approx(41.0)  # the SYN's octet taken out
    assert tcp["bytes_received_per_query"] == pytest.approx(57.0)
    assert tcp["bytes_per_query"] == pytest.approx(98.0)
    assert tcp["frame_bytes_per_query_est"] == pytest.approx(((98 + 66 * 7.0) + (98 + 66 * 7.1)) / 2)
    slides = study.wire_one_query()
    assert (tcp["study_messages"], tcp["study_bytes"]) == (slides["tcp"].messages, slides["tcp"].bytes) == (8, 790)

    dot = by["dot", "forever", 0.0]
    assert dot["valid"] is False and dot["trials"] == 1
    assert dot["bytes_sent_per_query"] == pytest.approx(50.0) and dot["packets_per_query"] == pytest.approx(2.1)
    assert dot["study_messages"] is None and dot["study_bytes"] is None
    assert by["dot", "1q", 1.0]["study_messages"] is None

    udp = by["udp", None, 0.0]
    assert udp["packets_per_query"] == 2.0 and udp["bytes_sent_per_query"] == 39.0  # no SYN to take out
    assert udp["frame_bytes_per_query_est"] == pytest.approx(94.0 + 2 * 42)
    assert udp["queries_per_connection"] is None
    assert (udp["study_messages"], udp["study_bytes"]) == (2, None)


def test_slides_figures_come_from_the_study_record() -> None:
    published = study.published()["wire_one_query"]
    figures = study.wire_one_query()
    assert set(figures) == {"udp", "tcp", "dot", "doh"}
    for transport, figure in figures.items():
        assert figure.messages == published[transport]["messages"]
        assert figure.bytes == published[transport].get("bytes")
    assert (figures["dot"].messages, figures["dot"].bytes, figures["doh"].messages, figures["doh"].bytes) == (
        10,
        5589,
        12,
        6350,
    )


def test_the_summary_keeps_the_engines_whole_run_traffic() -> None:
    records = _records(answered=20_000)
    samples = _samples(target_busy=0.5, generator_busy=0.4)
    assert summarize_trial(records, samples, COUNTERS, CTX)["wire"] is None  # an engine record without traffic
    traffic = {"packets_sent": 30_000, "packets_received": 25_000, "bytes_sent": 900_004, "bytes_received": 1_300_000}
    records[-1]["total"] = {
        "queries": {"answered": 25_000},  # the whole run: more than the measured window's 20 000
        "connections": {"established": 4},
        "traffic": traffic,
    }
    wire = summarize_trial(records, samples, COUNTERS, CTX)["wire"]
    assert wire == {"queries_answered": 25_000, "connections_established": 4, **traffic}


def test_every_report_has_the_wire_section(fixtures: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(fixtures / "runs" / "synthetic", run, ignore=shutil.ignore_patterns("golden"))
    a = analyze(run)
    assert a.tables["wire"].rows == []  # its summaries carry no traffic
    empty = render_report(a, run).read_text()
    assert 'id="wire"' in empty and "No traffic counts in this run" in empty
    trials = synthetic_trials()
    rows = wire_rows(trials, [trial_row(t, {}) for t in trials])
    a.tables["wire"] = Table("wire", COLUMNS["wire"], [{c: r.get(c) for c in COLUMNS["wire"]} for r in rows])
    page = render_report(a, run).read_text()
    section = page[page.index('<section id="wire">') :]
    section = section[: section.index("</section>")]
    assert "slides: messages" in section and "The close is counted" in section
    assert "<td" in section and ">790<" in section and ">41<" in section  # the slides' TCP octets; ours sent
    assert 'href="#wire"' in page


# --- the engine's counts against a capture ---------------------------------------------------

CONNECTIONS = 20
"""Queries (and, at one query per connection, connections) per capture: 20 per second for 1 s."""
TOLERANCE = 0.02
PORTS = {"udp": 5300, "tcp": 5300, "dot": 8530, "doh": 4430}


@dataclass
class Flow:
    """One client port's packets, as the capture saw them."""

    segments: Counter[str] = field(default_factory=Counter)  # "sent" / "received" / "sent_rst" / "syn"
    payload: Counter[str] = field(default_factory=Counter)  # new octets (by sequence number)
    frames: Counter[str] = field(default_factory=Counter)  # frame lengths
    isn: int | None = None
    acked: int = 0  # highest ACK the server sent, less the client's ISN
    next_seq: dict[str, int] = field(default_factory=dict)


def read_pcap(path: Path) -> list[tuple[int, bytes]]:
    """(frame length, captured bytes) of every record of a classic pcap file (Ethernet)."""
    data = path.read_bytes()
    magic = data[:4]
    order = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    assert struct.unpack(order + "I", data[20:24])[0] == 1, "tcpdump on lo writes Ethernet frames"
    out, offset = [], 24
    while offset + 16 <= len(data):
        _, _, captured, length = struct.unpack(order + "IIII", data[offset : offset + 16])
        out.append((length, data[offset + 16 : offset + 16 + captured]))
        offset += 16 + captured
    return out


def flows(path: Path, port: int) -> dict[int, Flow]:
    """The capture's packets to and from ``port`` (IPv4), by client port."""
    out: dict[int, Flow] = {}
    for length, frame in read_pcap(path):
        ip = frame[14:]
        if ip[0] >> 4 != 4:
            continue
        ihl, total, proto = (ip[0] & 15) * 4, struct.unpack("!H", ip[2:4])[0], ip[9]
        l4 = ip[ihl:]
        sport, dport = struct.unpack("!HH", l4[:4])
        direction = "sent" if dport == port else "received"
        f = out.setdefault(sport if direction == "sent" else dport, Flow())
        f.segments[direction] += 1
        f.frames[direction] += length
        if proto == 17:
            f.payload[direction] += struct.unpack("!H", l4[4:6])[0] - 8
            continue
        seq, ack = struct.unpack("!II", l4[4:12])
        flags, payload = l4[13], total - ihl - (l4[12] >> 4) * 4
        if flags & 0x02 and direction == "sent":  # SYN
            f.isn = seq
            f.segments["syn"] += 1
        if flags & 0x04 and direction == "sent":  # RST
            f.segments["sent_rst"] += 1
        if direction == "received" and flags & 0x10 and f.isn is not None:
            f.acked = max(f.acked, (ack - f.isn) % 2**32)
        start = f.next_seq.get(direction)
        end = (seq + payload) % 2**32
        if payload and (start is None or 0 < (end - start) % 2**32 <= payload):
            new = payload if start is None else (end - start) % 2**32
            f.payload[direction] += new
            f.next_seq[direction] = end
        elif start is None and flags & 0x02:
            f.next_seq[direction] = (seq + 1) % 2**32
    return out


@pytest.fixture
def netns(root: None, tmp_path: Path) -> Iterator[Netns]:
    need(shutil.which("tcpdump") is not None, "tcpdump is not installed (scripts/setup installs it)")
    need(shutil.which("ip") is not None, "ip (iproute2) is not installed")
    ns = Netns(tmp_path)
    try:
        engine = str(engine_path())
        ns.start(
            [
                engine,
                "serve",
                *("--listen", f"udp://127.0.0.1:{PORTS['udp']}", "--listen", f"tcp://127.0.0.1:{PORTS['tcp']}"),
                *(
                    "--listen",
                    f"dot://127.0.0.1:{PORTS['dot']}",
                    "--listen",
                    f"doh://127.0.0.1:{PORTS['doh']}/dns-query",
                ),
                *("--ca-out", str(tmp_path / "ca.pem")),
            ],
            tmp_path / "serve.log",
        )
        wait_for(tmp_path / "serve.log", '"listening"', count=4)
        yield ns
    finally:
        ns.close()


def capture(ns: Netns, transport: str, close: str | None) -> tuple[dict[str, Any], dict[int, Flow]]:
    """One ``generate`` at one query per connection (udp: one socket), captured; its summary's
    ``total`` and the capture's flows."""
    port, name = PORTS[transport], f"{transport}-{close or 'graceful'}"
    pcap = ns.workdir / f"{name}.pcap"
    proto = "udp" if transport == "udp" else "tcp"
    dump = ns.capture(pcap, f"{proto} port {port}", snaplen=256)
    try:
        argv = [str(engine_path()), "generate", "--transport", transport, "--target", f"127.0.0.1:{port}"]
        argv += ["--connections", "1", "--rate", str(CONNECTIONS), "--duration", "1s", "--quiet"]
        argv += ["--output", str(ns.workdir / f"{name}.jsonl")]
        if transport != "udp":
            argv += ["--lifetime", "1q"]
        if transport in ("dot", "doh"):
            argv += ["--ca", str(ns.workdir / "ca.pem")]
        if close:
            argv += ["--close", close]
        out = ns.run(argv, timeout=60)
        assert out.returncode == 0, out.stderr
        time.sleep(1.0)  # the server's last segments of the close
    finally:
        ns.stop(dump, signal.SIGINT)
    records = [json.loads(line) for line in (ns.workdir / f"{name}.jsonl").read_text().splitlines()]
    total = records[-1]["total"]
    assert total["queries"]["answered"] == CONNECTIONS
    return total, flows(pcap, port)


def close_enough(engine: float, captured: float) -> bool:
    return abs(engine - captured) <= TOLERANCE * max(engine, captured)


def test_udp_counts_equal_the_capture(netns: Netns) -> None:
    total, captured = capture(netns, "udp", None)
    traffic = total["traffic"]
    f = list(captured.values())
    assert len(f) == 1, "one socket"
    got = (f[0].segments["sent"], f[0].segments["received"], f[0].payload["sent"], f[0].payload["received"])
    want = (traffic["packets_sent"], traffic["packets_received"], traffic["bytes_sent"], traffic["bytes_received"])
    print(f"\nudp: engine {want}, capture {got} (datagrams sent, received; payload octets sent, received)")
    assert got == want
    assert traffic["packets_sent"] == CONNECTIONS


@pytest.mark.parametrize("transport", ["tcp", "dot", "doh"])
def test_tcp_counts_equal_the_capture_up_to_the_close(netns: Netns, transport: str) -> None:
    total, captured = capture(netns, transport, "rst")
    traffic = total["traffic"]
    conns = list(captured.values())
    assert total["connections"]["established"] == CONNECTIONS
    assert len(conns) == CONNECTIONS and all(f.segments["syn"] == 1 for f in conns), "one query per connection"
    sent = sum(f.segments["sent"] - f.segments["sent_rst"] for f in conns)
    received = sum(f.segments["received"] for f in conns)
    acked = sum(f.acked - 1 for f in conns)  # the SYN takes one sequence number
    payload_sent = sum(f.payload["sent"] for f in conns)
    payload_received = sum(f.payload["received"] for f in conns)
    print(
        f"\n{transport} (close rst), {CONNECTIONS} connections: segments sent engine {traffic['packets_sent']} "
        f"capture {sent} (+{sum(f.segments['sent_rst'] for f in conns)} RST); received engine "
        f"{traffic['packets_received']} capture {received}; octets sent engine {traffic['bytes_sent']} "
        f"(less {CONNECTIONS} SYN) capture acknowledged {acked} of {payload_sent}; received engine "
        f"{traffic['bytes_received']} capture {payload_received}"
    )
    assert close_enough(traffic["packets_sent"], sent)
    assert close_enough(traffic["packets_received"], received)
    assert close_enough(traffic["bytes_sent"] - CONNECTIONS, acked)
    assert acked <= payload_sent
    assert close_enough(traffic["bytes_received"], payload_received)
    # Each connection's segments are more than the engine's: the reset; nothing counted twice.
    assert traffic["packets_sent"] + CONNECTIONS <= sum(f.segments["sent"] for f in conns) * (1 + TOLERANCE)


@pytest.mark.parametrize("transport", ["tcp", "dot", "doh"])
def test_tcp_counts_equal_the_capture_with_the_graceful_close(netns: Netns, transport: str) -> None:
    """The default close (GOAWAY, close_notify, FIN; the server's close_notify and FIN; the last
    ACK) is counted: the engine waits for the server's FIN before its last TCP_INFO reading."""
    total, captured = capture(netns, transport, None)
    traffic = total["traffic"]
    conns = list(captured.values())
    assert len(conns) == CONNECTIONS and all(f.segments["syn"] == 1 for f in conns), "one query per connection"
    sent = sum(f.segments["sent"] for f in conns)
    received = sum(f.segments["received"] for f in conns)
    acked = sum(f.acked for f in conns)  # the SYN's and the FIN's sequence numbers included
    payload_received = sum(f.payload["received"] for f in conns)
    print(
        f"\n{transport} (graceful close), {CONNECTIONS} connections: segments sent engine "
        f"{traffic['packets_sent']} capture {sent}; received engine {traffic['packets_received']} capture "
        f"{received}; sequence numbers acknowledged engine {traffic['bytes_sent']} capture {acked}; received "
        f"engine {traffic['bytes_received']} capture {payload_received} octets + {CONNECTIONS} FIN"
    )
    assert close_enough(traffic["packets_sent"], sent)
    assert close_enough(traffic["packets_received"], received)
    assert close_enough(traffic["bytes_sent"], acked)
    # TCP_INFO's octets received count the server's FIN too.
    assert close_enough(traffic["bytes_received"], payload_received + CONNECTIONS)
