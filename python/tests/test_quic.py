"""QUIC interop: ``dnscost-engine serve`` answers an independent DoQ and DoH/3 client (dnspython
on aioquic), and its connections log says what that client did."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dns.message
import dns.query
import dns.quic
import dns.rcode
import dns.rdatatype
from dnscost.engine import engine_path


def _serve(tmp_path: Path, listen: str = "doq://127.0.0.1:0") -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [
            str(engine_path()),
            "serve",
            "--listen",
            listen,
            "--synthetic",
            "100",
            "--ca-out",
            str(tmp_path / "ca.pem"),
            "--connections-log",
            str(tmp_path / "connections.jsonl"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = json.loads(proc.stdout.readline())
    assert line["transport"] == listen.split(":")[0]
    return proc, int(line["address"].rsplit(":", 1)[1])


def test_serve_answers_dnspython_over_quic(tmp_path: Path) -> None:
    proc, port = _serve(tmp_path)
    ca = str(tmp_path / "ca.pem")
    try:
        # Three queries on one connection (a stream each), then the client closes.
        with dns.quic.SyncQuicManager(verify_mode=ca, server_name="localhost") as manager:
            conn = manager.connect("127.0.0.1", port)
            for i in range(3):
                q = dns.message.make_query(f"q0{i}.test.", dns.rdatatype.A)
                r = dns.query.quic(q, "127.0.0.1", port=port, connection=conn, verify=ca, timeout=5)
                assert r.rcode() == dns.rcode.NOERROR
                assert r.answer and r.answer[0].name.to_text() == f"q0{i}.test."
                assert r.id == q.id, "the client's ID is restored from the stream"
        # A name outside the synthetic set, on a connection of its own.
        r = dns.query.quic(dns.message.make_query("q100.test.", "A"), "127.0.0.1", port=port, verify=ca, timeout=5)
        assert r.rcode() == dns.rcode.NXDOMAIN
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    conns = [json.loads(x) for x in (tmp_path / "connections.jsonl").read_text().splitlines()]
    assert sorted(c["queries"] for c in conns) == [1, 3], conns
    for c in conns:
        assert (c["transport"], c["handshake"], c["tls_version"]) == ("doq", "full", "1.3"), c
        assert c["answers"] == c["queries"], c
        assert c["bytes_sent"] > 0 and c["bytes_received"] >= 1200, "a client Initial is padded to 1 200 octets"


def test_serve_answers_dnspython_over_http3(tmp_path: Path) -> None:
    proc, port = _serve(tmp_path, "doh3://127.0.0.1:0/dns-query")
    ca = str(tmp_path / "ca.pem")
    try:
        for i, post in enumerate((True, False)):
            q = dns.message.make_query(f"q0{i}.test.", dns.rdatatype.A)
            r = dns.query.https(
                q,
                "127.0.0.1",
                port=port,
                path="/dns-query",
                post=post,
                verify=ca,
                http_version=dns.query.HTTPVersion.H3,
                bootstrap_address="127.0.0.1",
                timeout=5,
            )
            assert r.rcode() == dns.rcode.NOERROR and r.answer, (post, r)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    conns = [json.loads(x) for x in (tmp_path / "connections.jsonl").read_text().splitlines()]
    assert len(conns) == 2, conns
    for c in conns:
        assert (c["transport"], c["handshake"], c["queries"], c["answers"]) == ("doh3", "full", 1, 1), c


BENCH = Path(__file__).resolve().parents[2] / "bench"


def doh3_post_fin(port: int, name: str = "q0001.test.") -> dict[str, str]:
    """What ``bench/doh3-post-fin`` (aioquic) got for each way of sending a query: way -> result."""
    out = subprocess.run(
        [sys.executable, str(BENCH / "doh3-post-fin"), f"127.0.0.1:{port}", "--timeout", "1", "--name", name],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return dict(line.split(None, 1) for line in out.stdout.splitlines())


def test_serve_answers_a_doh3_post_whose_fin_comes_alone(tmp_path: Path) -> None:
    """The responder answers a POST whatever packet ends its stream (dnsdist's DoH/3 does not:
    docs/findings/dnsdist-doh3-post.md); the reproducer's three ways, from aioquic."""
    proc, port = _serve(tmp_path, "doh3://127.0.0.1:0/dns-query")
    try:
        got = doh3_post_fin(port, "q01.test.")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert got == dict.fromkeys(("post-fin-with-body", "post-fin-alone", "get"), "HTTP 200, NOERROR"), got
    conns = [json.loads(x) for x in (tmp_path / "connections.jsonl").read_text().splitlines()]
    assert [(c["queries"], c["answers"]) for c in conns] == [(1, 1)] * 3, conns
