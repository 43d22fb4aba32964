"""Page loads over several presets, on synthetic files: each DoT session's connections as the
resolver and the DoT front saw them (bursts, reuse, idle before close), the presets' summary
(order, intervals, the DNS path, Hounsel et al.'s medians beside the paired presets only), its
table, and the outputs written from stored files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dnscost.clientside.pageload_analysis import (
    HOUNSEL,
    PAIRING,
    presets_table,
    summarise_presets,
    write_outputs,
)
from dnscost.clientside.pageload_check import dot_connections
from dnscost.clientside.pageload_plan import DEFAULT_SETUPS, SETUPS, PageloadSettings, PlannedLoad, Session
from dnscost.errors import UsageError


def test_transports_default_to_stubby_for_dot_and_unbound_is_a_second_stub() -> None:
    assert DEFAULT_SETUPS == ("do53", "dot", "doh") == PageloadSettings().transports
    assert "dot-unbound" in SETUPS
    PageloadSettings(transports=("do53", "dot-unbound")).check()
    with pytest.raises(UsageError, match="unknown transports"):
        PageloadSettings(transports=("do53", "dot-stubby")).check()


def _q(t_us: int, conn: int, load: int, transport: str = "tcp") -> dict[str, Any]:
    return {"t_us": t_us, "transport": transport, "connection": conn, "qname": f"h0-l{load}.p0.test.", "qtype": "A"}


def test_dot_connections_join_the_front_and_the_resolver_and_count_bursts() -> None:
    sessions = [
        Session(0, 0, "dot", (PlannedLoad(0, 0, 0, True), PlannedLoad(1, 0, 1, False))),
        Session(1, 0, "do53", (PlannedLoad(2, 0, 0, True),)),
    ]
    queries = [
        # Load 0: two queries together, then one 50 ms later; load 1 on the same connection.
        _q(1_000, 7, 0), _q(1_300, 7, 0), _q(51_000, 7, 0), _q(900_000, 7, 1), _q(900_100, 7, 1), _q(900_200, 7, 1),
        {"t_us": 900_300, "transport": "tcp", "connection": 7, "qname": "accounts.google.com.", "qtype": "A"},
        _q(2_000_000, 0, 2, transport="udp") | {"connection": None},
    ]  # fmt: skip
    responder = [{"transport": "tcp", "id": 7, "peer_address": "198.18.0.1:4000", "closed_us": 10_950_300}]
    front = [{"id": 0, "backend_address": "198.18.0.1:4000", "closed_by": "client", "close": "fin",
              "relay_median_us": 250}]  # fmt: skip
    got = dot_connections(queries, responder, front, sessions)
    assert list(got) == [0]
    assert got[0] == [{
        "connection": 7, "front_connection": 0, "queries": 7, "session_queries": 6, "first_query_us": 1_000,
        "last_query_us": 900_300, "bursts": 3, "max_burst": 4, "idle_before_close_ms": 10_050.0,
        "closed_by": "client", "close": "fin", "front_median_us": 250,
    }]  # fmt: skip


def _record(preset: str, transport: str, rnd: int, page: int, ms: float, ok: bool = True) -> dict[str, Any]:
    return {"preset": preset, "transport": transport, "round": rnd, "page": page, "warmup": False, "ok": ok,
            "failure": None if ok else "timeout", "page_load_us": round(ms * 1000) if ok else None,
            "lookups_us": {"a": round(ms * 10)}}  # fmt: skip


def _write_run(out: Path, preset: str, offsets: dict[str, float], failed: int = 0) -> None:
    run = out / preset
    run.mkdir(parents=True)
    lines = []
    for rnd in range(2):
        for page in range(4):
            for t, off in offsets.items():
                lines.append(_record(preset, t, rnd, page, 100 * (page + 1) + off + rnd))
    for k in range(failed):
        lines.append(_record(preset, "doh", 5, k, 0, ok=False))
    (run / "loads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    checks = [{"session": 0, "transport": "do53", "names_expected": 10, "names_asked": 10, "queries": {"udp": 20}},
              {"session": 1, "transport": "dot", "names_expected": 10, "names_asked": 10, "queries": {"tcp": 20},
               "dot_connections": [{"queries": 21, "max_burst": 5}]}]  # fmt: skip
    (run / "pageload.json").write_text(json.dumps({"status": "done", "dns_check": checks}))


def test_summarise_presets_keeps_the_runs_order_and_pairs_hounsel_with_paired_presets_only(tmp_path: Path) -> None:
    out = tmp_path / "pl"
    meta = {"presets": {
        "lte": {"name": "lte", "label": "LTE", "rtt_ms": 70, "jitter_ms": 0, "loss_pct": 0, "down_kbps": 12000,
                "up_kbps": 12000, "source": "WebPageTest", "dir": "lte", "status": "done"},
        "cable": {"name": "cable", "label": "Cable", "rtt_ms": 28, "jitter_ms": 0, "loss_pct": 0, "down_kbps": 5000,
                  "up_kbps": 1000, "source": "WebPageTest", "dir": "cable", "status": "failed", "error": "x"},
    }}  # fmt: skip
    _write_run(out, "lte", {"do53": 0, "dot": 40, "doh": 10}, failed=1)
    _write_run(out, "cable", {"do53": 0, "doh": -5})
    (out / "presets.json").write_text(json.dumps(meta))

    summary = summarise_presets(out)
    assert list(summary["presets"]) == ["lte", "cable"]  # the run's order, not sorted
    lte = summary["presets"]["lte"]
    assert list(lte) == ["do53", "dot", "doh"]
    assert lte["do53"]["difference"] is None and lte["do53"]["page_load"]["n"] == 8
    dot = lte["dot"]["difference"]
    assert dot is not None and dot["pairs"] == 8 and dot["median_ms"] == 40.0 and dot["interval_ms"] == [40.0, 40.0]
    assert lte["doh"]["failed"] == 1 and lte["doh"]["failures"] == {"timeout": 1}
    assert lte["do53"]["page_load"]["interval_ms"] is not None
    path = lte["dot"].get("dns_path")
    assert path is not None and path["connections"] == 1 and path["max_burst"] == 5 and path["queries"] == {"tcp": 20}
    do53_path = lte["do53"].get("dns_path")
    assert do53_path is not None and do53_path["connections"] is None
    assert summary["networks"]["cable"]["status"] == "failed" and summary["networks"]["cable"]["error"] == "x"
    # Hounsel et al.'s medians beside lte (paired with their 4G), nothing beside cable.
    assert PAIRING["lte"] == "4G" and "cable" not in PAIRING
    assert summary["published"]["lte"]["doh"] == {"network": "4G", "median_ms": HOUNSEL["4G"]["doh"][0], "text": "+66"}
    assert summary["published"]["cable"] == {}
    assert "pairing is ours" in summary["pairing_note"] and summary["figures"] == []

    table = presets_table(summary)
    assert "| lte | dot | 290 [140, 441] |" in table and "+40.0 [+40.0, +40.0] (8) | -6 (4G) |" in table
    assert "| cable | doh |" in table and "WWW 2020" in table

    written = write_outputs(out)
    assert [Path(f).name for f in written["figures"]] == ["pageload-cdf.svg", "pageload-cdf.png"]
    assert json.loads((out / "summary.json").read_text())["presets"]["lte"]["dot"]["difference"]["median_ms"] == 40
    assert (out / "table.md").read_text() == presets_table(written)
    svg = (out / "figures" / "pageload-cdf.svg").read_text()
    assert "median +40 ms" in svg and "Hounsel et al." in svg
