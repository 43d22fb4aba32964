"""The main job end to end: ``dnscost reproduce --quick`` on one real resolver (dnsdist), then its
report opened in headless Chromium (the screenshot is kept under $DNSCOST_ARTIFACTS when set);
and its QUIC groups on the built-in responder (``--groups``), which serves DoQ and DoH/3."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need
from dnscost.report.browser import check

pytestmark = pytest.mark.resolver


def _reproduce(tmp_path: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dnscost.cli", "reproduce", "--quick", *args, "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
        cwd=tmp_path,
    )


def test_reproduce_quick_dnsdist(tmp_path: Path) -> None:
    need(os.geteuid() == 0, "needs root (cgroups)")
    need(shutil.which("dnsdist") is not None, "needs dnsdist (Debian package dnsdist)")
    need(shutil.which("chromium") is not None, "needs chromium (Debian package chromium)")
    out = tmp_path / "study"
    r = _reproduce(tmp_path, out, "--targets", "dnsdist")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == f"report: {out / 'report.html'}"
    assert "[1/" in r.stderr and "left)" in r.stderr  # progress

    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "done" and run["format_version"] == 2
    assert run["spec"]["targets"] == ["dnsdist"]
    assert run["versions"]["dnsdist"] and run["machine"]["cpus"]
    # Every trial ran, but a share of capacity whose reference the machine made invalid: not run.
    for t in run["plan"]:
        state = run["trials"][t["id"]]
        if state["status"] == "not-run":
            assert t["group"] == "latency" and "is invalid" in state["error"], state
        else:
            assert state["status"] == "done", state
    groups = {t["group"] for t in run["plan"]}
    assert groups == {
        "baseline",
        "memory",
        "connections",
        "establishment",
        "cost_queries",
        "cost_handshakes",
        "latency",
        "reference",
        # Real clients: the shipped profiles replayed. (QUIC's groups run on their targets
        # among --targets, builtin and coredns: none here.)
        "clients",
        # The operator's traffic: a population replayed, its CPU set beside the model's.
        "population",
    }

    # Every derived table, as Parquet and CSV; the headline figures are there for both targets.
    for name in ("trials", "baseline", "memory_fit", "connections", "establishment", "energy", "cost_model"):
        assert (out / "tables" / f"{name}.parquet").stat().st_size > 0
        with (out / "tables" / f"{name}.csv").open() as f:
            rows = list(csv.DictReader(f))
        assert rows, name
    with (out / "tables" / "baseline.csv").open() as f:
        baseline = {row["target"]: row for row in csv.DictReader(f)}
    assert float(baseline["dnsdist"]["udp_reference_qps"]) > 1000
    with (out / "tables" / "memory_fit.csv").open() as f:
        fits = [row for row in csv.DictReader(f) if row["target"] == "dnsdist"]
    assert {row["transport"] for row in fits} == {"tcp", "dot", "doh"}
    # A TLS connection costs dnsdist more memory than a TCP one.
    per = {row["transport"]: float(row["user_bytes_per_connection"]) for row in fits}
    assert per["dot"] > per["tcp"] and per["doh"] > per["tcp"]
    with (out / "tables" / "energy.csv").open() as f:
        energy = [row for row in csv.DictReader(f) if row["target"] == "dnsdist"]
    # (Rows without a valid trial, such as TCP at one query per connection when the generator is
    # the bottleneck, have no value.)
    kwh = {
        (row["transport"], row["lifetime"], row["resumption"]): float(row["kwh_per_day_at_10k_qps"])
        for row in energy
        if row["kwh_per_day_at_10k_qps"]
    }
    # One query per connection over DoH costs more energy than persistent UDP.
    assert kwh[("doh", "1q", "0.0")] > kwh[("udp", "forever", "0.0")]
    # Real clients replayed against dnsdist: every profile, and what its shape costs. dnss
    # resolving once a minute opens a connection (a full TLS handshake: it does not resume) per
    # query, so each of its queries costs dnsdist several times one of dnss resolving every
    # 50 ms over one connection.
    with (out / "tables" / "clients.csv").open() as f:
        clients = {row["profile"]: row for row in csv.DictReader(f) if row["target"] == "dnsdist"}
    assert len(clients) == 9 and {p.split("-")[0] for p in clients} == {"chromium", "firefox", "dnss"}, clients
    rare, busy = clients["dnss-60s-google"], clients["dnss-0.05s-google"]
    assert 800 <= float(rare["handshakes_per_1k_queries"]) <= 1200, rare
    assert float(busy["handshakes_per_1k_queries"]) < 10, busy
    # An empty cell: the profile's trial was invalid (the flags say why; a CPU shared with
    # other work makes the generator fall behind).
    assert rare["cpu_us_per_query"] and busy["cpu_us_per_query"], (rare, busy)
    assert float(rare["cpu_us_per_query"]) > 3 * float(busy["cpu_us_per_query"]), (rare, busy)
    assert "Real clients replayed" in (out / "report.html").read_text()
    # The cost model: every term that applies, each identified or saying why not (never 0).
    with (out / "tables" / "cost_model.csv").open() as f:
        terms = [row for row in csv.DictReader(f) if row["target"] == "dnsdist"]
    assert {(row["transport"], row["term"]) for row in terms} >= {("udp", "query"), ("dot", "resumed_handshake")}
    for row in terms:
        assert (row["status"], bool(row["us"]), bool(row["reason"])) in {
            ("identified", True, False),
            ("not identified", False, True),
        }, row
        assert row["us"] == "" or float(row["us"]) > 0, row
    # The population replayed at two rates: its classes over the transports dnsdist 1.7 serves
    # (DoQ's and DoH/3's left out by name), the target's CPU time measured beside the cost
    # model's prediction, a number or a reason, never both missing.
    with (out / "tables" / "population.csv").open() as f:
        replays = list(csv.DictReader(f))
    assert sorted(float(row["rate_qps"]) for row in replays) == pytest.approx([2000, 8000], rel=0.02), replays
    for row in replays:
        assert (row["classes"], row["left_out"]) == ("5", "doq-several-none;doh3-few-none"), row
        assert float(row["measured_cpu_us"]) > 0, row
        assert row["status"] in ("identified", "bounded", "not identified"), row
        assert bool(row["predicted_high_us"]) == (row["status"] != "not identified"), row
        assert row["status"] == "identified" or row["reason"], row
    assert "Your traffic: a population replayed" in (out / "report.html").read_text()
    assert "the cost model on trial: a population replayed" in r.stdout
    for name in ("fig3_memory", "fig4_connections", "fig5_establishment", "energy"):
        assert (out / "figures" / f"{name}.svg").exists() and (out / "figures" / f"{name}.png").exists()

    # The report is self-contained and renders cleanly in a real browser.
    html = (out / "report.html").read_text()
    assert 'src="http' not in html and 'href="http' not in html
    shots = Path(os.environ.get("DNSCOST_ARTIFACTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    result = check(out / "report.html", shots / "reproduce-quick.png")
    print(f"screenshot: {result.screenshot}")
    assert result.console_errors == []
    assert result.figures_total >= 5 and result.figures_rendered == result.figures_total

    # Derived data is recomputable from the raw data alone.
    shutil.rmtree(out / "tables")
    (out / "report.html").unlink()
    r = subprocess.run(
        [sys.executable, "-m", "dnscost.cli", "report", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert (out / "tables" / "energy.csv").exists() and (out / "report.html").exists()


def test_reproduce_quick_quic_groups_on_builtin(tmp_path: Path) -> None:
    """DoQ and DoH/3 in Figure 4 and 5 (builtin): every cell measured, and the resumed
    connections of the 0-RTT cells sent their query as early data, which the responder took.
    (From the trials: one generator core cannot saturate builtin over persistent QUIC, so those
    cells are flagged generator-bound and have no valid figure.)"""
    need(os.geteuid() == 0, "needs root (cgroups)")
    out = tmp_path / "quic"
    r = _reproduce(tmp_path, out, "--targets", "builtin", "--groups", "quic_connections,quic_establishment")
    assert r.returncode == 0, r.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["spec"]["only_groups"] == ["quic_connections", "quic_establishment"]
    assert {t["group"] for t in run["plan"]} == {"quic_connections", "quic_establishment", "reference"}
    assert all(s["status"] == "done" for s in run["trials"].values()), run["trials"]
    with (out / "tables" / "trials.csv").open() as f:
        rows = list(csv.DictReader(f))
    quic = [row for row in rows if row["group"] == "quic_establishment" and row["transport"] != "udp"]
    cells = {(row["transport"], row["lifetime"], row["resumption"], row["early_data"]) for row in quic}
    assert cells == {
        (t, *cell)
        for t in ("doq", "doh3")
        for cell in (("forever", "0.0", "0.0"), ("1q", "0.0", "0.0"), ("1q", "1.0", "0.0"), ("1q", "1.0", "1.0"))
    }
    assert all(row["analysis"] == "establishment" and float(row["answered_qps"]) > 0 for row in quic)
    for row in quic:
        early = float(row["handshakes_zero_rtt_accepted"]) / max(float(row["handshakes_resumed"]), 1.0)
        assert (early > 0.9) == (row["early_data"] == "1.0"), row
    connections = {(row["transport"], row["connections"]) for row in rows if row["group"] == "quic_connections"}
    assert connections == {(t, c) for t in ("doq", "doh3") for c in ("100", "1000")}, connections
    assert (out / "report.html").exists()
