"""The stored full study (``docs/study-run/tables``) recomputed from its ``trials.csv``
(:mod:`dnscost.analysis.stored`): the physics checks flag every violation the audit
(issue 29) found in it, and leave a clean cell alone."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from dnscost.analysis import Analysis
from dnscost.analysis.stored import analyze_tables
from dnscost.analysis.write import csv_cell

STUDY = Path(__file__).parents[2] / "docs" / "study-run"


@pytest.fixture(scope="module")
def study() -> Analysis:
    return analyze_tables(STUDY)


def _contradiction(a: Analysis, flag: str, cell: str, against: str) -> dict[str, Any]:
    rows = [r for r in a.tables["consistency"].rows if (r["flag"], r["cell"], r["against"]) == (flag, cell, against)]
    assert len(rows) == 1, f"{flag}: {cell} against {against} not flagged"
    return rows[0]


def _trial(a: Analysis, tid: str) -> dict[str, Any]:
    return next(r for r in a.tables["trials"].rows if r["id"] == tid)


def test_knot_rsa_persistent_trials_are_not_persistent_and_left_out(study: Analysis) -> None:
    """202-241 full handshakes per 4 s window at 1 000 'persistent' connections."""
    for transport in ("dot", "doh"):
        for rnd in range(3):
            r = _trial(study, f"establishment-knot-resolver-{transport}-lforever-res0-rsa-2048-r{rnd}")
            assert 200 <= r["connections_established"] <= 241
            assert "not-persistent" in r["flags"].split(";") and r["valid"] is False
        cell = next(
            e
            for e in study.tables["establishment"].rows
            if (e["target"], e["transport"], e["lifetime"], e["cert_key"])
            == ("knot-resolver", transport, "forever", "rsa-2048")
        )
        assert (cell["reps"], cell["valid_reps"], cell["cpu_us_per_query"]) == (3, 0, None)
    # Their ECDSA twins opened none and stand.
    clean = _trial(study, "establishment-knot-resolver-dot-lforever-res0-ecdsa-p256-r0")
    assert clean["connections_established"] == 0 and clean["valid"] and "not-persistent" not in clean["flags"]


def test_knot_tcp_dearer_than_dot_is_flagged(study: Analysis) -> None:
    """23.5 CPU-µs per query over TCP against 11.1 over DoT, persistent, every round."""
    c = _contradiction(study, "inconsistent-layering", "knot-resolver tcp forever", "knot-resolver dot forever")
    assert c["value"] == pytest.approx(2.10, abs=0.01) and c["low"] > 1.9 and c["margin"] == pytest.approx(c["low"] - 1)
    assert c["rounds"] == 3
    # At 1 000 persistent connections in the connections group too (two valid rounds).
    c = _contradiction(
        study, "inconsistent-layering", "knot-resolver tcp 1000 connections", "knot-resolver dot 1000 connections"
    )
    assert c["low"] > 1.9
    assert "inconsistent-layering" in _trial(study, "connections-knot-resolver-tcp-c1000-r0")["flags"]


def test_knot_tcp_persistent_above_both_shorter_lifetimes_is_flagged(study: Analysis) -> None:
    """persistent 23.5 > 1 s 20.9 > 30 s 15.6 µs/q: both pairs with persistent, each in every round."""
    one_s = _contradiction(study, "inconsistent-lifetime", "knot-resolver tcp forever", "knot-resolver tcp 1s")
    thirty = _contradiction(study, "inconsistent-lifetime", "knot-resolver tcp forever", "knot-resolver tcp 30s")
    assert one_s["value"] == pytest.approx(1.124, abs=0.001) and 0 < one_s["margin"] < 0.02
    assert thirty["low"] > 1.4
    # 1 s costs more than 30 s, as it must: no row for that pair either way.
    pairs = {(r["cell"], r["against"]) for r in study.tables["consistency"].rows}
    assert ("knot-resolver tcp 30s", "knot-resolver tcp 1s") not in pairs
    assert ("knot-resolver tcp 1s", "knot-resolver tcp 30s") not in pairs


def test_dnsdist_doh_resumed_dearer_than_full_at_30s_is_flagged(study: Analysis) -> None:
    c = _contradiction(study, "inconsistent-resumption", "dnsdist doh 30s resumption 1", "dnsdist doh 30s")
    assert c["value"] == pytest.approx(1.088, abs=0.001) and c["margin"] > 0.05


def test_memory_per_connection_falling_at_16000_is_flagged(study: Analysis) -> None:
    rows = [r for r in study.tables["consistency"].rows if r["flag"] == "inconsistent-memory"]
    flagged = {(r["target"], r["transport"]) for r in rows}
    assert {("dnsdist", "doh"), ("knot-resolver", "tcp"), ("knot-resolver", "dot")} <= flagged
    assert all(" at 159" in r["against"] or " at 16000" in r["against"] for r in rows)
    assert all(r["margin"] > 0 for r in rows)


def test_clean_cells_are_not_flagged(study: Analysis) -> None:
    """dnsdist's DoT lifetimes are monotonic, its TCP cheaper than its DoT; dnsdist TCP memory
    grows with connections."""
    named = " ".join(f"{r['cell']} | {r['against']}" for r in study.tables["consistency"].rows)
    assert "dnsdist dot forever" not in named and "dnsdist tcp" not in named
    assert all("knot-resolver doh 1s" not in r["cell"] for r in study.tables["consistency"].rows)
    r = _trial(study, "establishment-dnsdist-dot-lforever-res0-ecdsa-p256-r0")
    assert r["flags"] == "" and r["valid"]


def test_stored_tables_are_what_the_recompute_writes(study: Analysis) -> None:
    """docs/study-run/tables was written by this recompute: every stored CSV is byte for byte
    what the analysis of its trials.csv gives today (regenerate with
    ``python -m dnscost.analysis.stored docs/study-run``)."""
    for name, table in study.tables.items():
        path = STUDY / "tables" / f"{name}.csv"
        if not table.rows and not path.exists():
            continue
        with path.open(newline="") as f:
            stored = list(csv.reader(f))
        assert stored[0] == table.columns, name
        assert len(stored) - 1 == len(table.rows), name
        for got, want in zip(table.rows, stored[1:], strict=True):
            assert [csv_cell(got[c]) for c in table.columns] == want, name


def test_transports_compare_on_connection_counts_valid_for_both(study: Analysis) -> None:
    """dnsdist's DoH fit kept a 16 000 point its DoT lost: on the counts valid for both, DoH's
    user memory per connection is 25.5 KiB against DoT's 24.5, so "less for DoH" differs."""
    from dnscost.report.points import DIFFER, study_points

    points = {p.study.split(",")[0]: p for p in study_points(study)}
    memory = points["dnsdist uses less for DoH than for DoT"]
    assert "doh 25.5, dot 24.5 over the connections valid for both (1,000/4,000/8,000" in memory.ours
    assert memory.verdict == DIFFER
    decrease = next(p for s, p in points.items() if s.startswith("UDP to DoH: up to 70 % decrease"))
    assert "0.14 of UDP remains against the study's 0.30" in decrease.ours and decrease.verdict == DIFFER
    fit = {(r["target"], r["transport"]): r for r in study.tables["memory_fit"].rows}
    assert fit[("dnsdist", "dot")]["dropped"] == "16000" and fit[("dnsdist", "doh")]["dropped"] is None
    assert fit[("knot-resolver", "tcp")]["user_r2"] == pytest.approx(0.784, abs=0.001)
