"""Real clients replayed against a real resolver (a spec's group of profiles): the engine plays
many clients of each profile, and the target's side shows their shape — the kernel of the
target's namespace counts the connections they open, dnsdist counts the answers — and the
``clients`` table and the report carry the result."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need
from dnscost.analysis import analyze

# A stub that closes its connection 300 ms after its query and resolves once a second: each
# query opens a connection, and every reconnection resumes its TLS session; and a browser-like
# client that keeps one connection for all its queries.
STUB = {"name": "stub", "transport": "dot", "query_interval_ms": 1000, "queries_per_resolution": 1,
        "idle_timeout_ms": 300, "close": "graceful", "resumption": 1.0}  # fmt: skip
KEEPER = {"name": "keeper", "transport": "doh", "query_interval_ms": 500, "queries_per_resolution": 2}

SPEC = """
name = "clients"
targets = ["dnsdist"]
[defaults]
duration = "3s"
warmup = "1s"
baseline = "0.2s"
[[group]]
name = "clients"
profile = ["stub.json", "keeper.json"]
clients = 40
in_flight = 8
"""


@pytest.mark.root
@pytest.mark.resolver
def test_profiles_replayed_against_dnsdist_show_their_shape_at_the_target(tmp_path: Path) -> None:
    need(os.geteuid() == 0, "needs root (cgroups)")
    need(shutil.which("dnsdist") is not None, "needs dnsdist (scripts/setup installs it)")
    (tmp_path / "stub.json").write_text(json.dumps(STUB))
    (tmp_path / "keeper.json").write_text(json.dumps(KEEPER))
    (tmp_path / "clients.toml").write_text(SPEC)
    out = tmp_path / "run"
    # In a process of its own: dnscost pins itself to the generator's CPUs.
    r = subprocess.run(
        [sys.executable, "-m", "dnscost.cli", "run", str(tmp_path / "clients.toml"), "--output", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    trials = {t["id"]: t for t in (json.loads(p.read_text()) for p in (out / "trials").glob("*/trial.json"))}
    stub, keeper = trials["clients-dnsdist-dot-stub-r0"], trials["clients-dnsdist-doh-keeper-r0"]
    for t, qps in ((stub, 40), (keeper, 160)):
        s = t["summary"]
        assert t["status"] == "done" and abs(s["offered_qps"] - qps) <= 0.05 * qps, s["offered_qps"]
        # dnsdist's own counters saw every answer the engine counted.
        assert s["validity"]["answer_count_agreement"] == 1.0, s["validity"]
    # The kernel of the target's namespace: the stub's clients open a connection per query (in
    # the measured window, give or take the queries at its edges); the keepers opened theirs
    # before it and open none.
    window = stub["summary"]
    opens = window["meter"]["counters"]["tcp_passive_opens"]
    assert abs(opens - window["queries_answered"]) <= 0.15 * window["queries_answered"] + 5, (opens, window)
    assert keeper["summary"]["meter"]["counters"]["tcp_passive_opens"] < 5, keeper["summary"]["meter"]["counters"]
    # As the profile says, the stub's reconnections offer to resume, and the server's handshake
    # resumes (the engine counts what the handshake did); dnsdist 1.7 issues no new ticket on a
    # resumed handshake, so only about two thirds of them can.
    assert window["handshakes_resumed"] >= 0.55 * window["connections_established"] > 0, window
    assert "connections-short" not in window["validity"]["flags"]  # its clients close idle connections
    # The clients table: one row per profile, a handshake per query for the stub, none for the keeper.
    rows = {r["profile"]: r for r in analyze(out).tables["clients"].rows}
    assert set(rows) == {"stub", "keeper"}
    assert rows["stub"]["clients"] == 40 and rows["stub"]["rate_qps"] == 40
    assert 850 <= (rows["stub"]["handshakes_per_1k_queries"] or 0) <= 1150, rows["stub"]
    assert rows["keeper"]["handshakes_per_1k_queries"] == 0, rows["keeper"]
    assert rows["stub"]["clients_at_10k_qps"] == 10_000 and rows["keeper"]["clients_at_10k_qps"] == 2_500
    assert "Real clients replayed" in (out / "report.html").read_text()
