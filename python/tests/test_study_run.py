"""The kept full study (``docs/study-run``, ``dnscost keep``) analysed again from its records:
its stored tables are what the analysis writes today, byte for byte, and the physics checks flag
what the run contradicts (knot-resolver 5.6's plain TCP dearer than its DoT, memory per connection
falling at 16 000) while leaving clean cells alone. The audit's other violations (issue 29) are
held by the synthetic run in ``test_rounds.py`` and ``test_analysis.py``."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from dnscost.analysis import Analysis, analyze
from dnscost.analysis.write import csv_cell
from dnscost.contract import Row

STUDY = Path(__file__).parents[2] / "docs" / "study-run"


@pytest.fixture(scope="module")
def study() -> Analysis:
    return analyze(STUDY)


def _contradiction(a: Analysis, flag: str, cell: str, against: str) -> Row:
    rows = [r for r in a.tables["consistency"].rows if (r["flag"], r["cell"], r["against"]) == (flag, cell, against)]
    assert len(rows) == 1, f"{flag}: {cell} against {against} not flagged"
    return rows[0]


def _trial(a: Analysis, tid: str) -> Row:
    return next(r for r in a.tables["trials"].rows if r["id"] == tid)


def test_stored_tables_are_what_the_analysis_writes(study: Analysis) -> None:
    """docs/study-run/tables is what ``dnscost report docs/study-run`` writes: every stored CSV
    byte for byte what the analysis of the kept records gives today."""
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


def test_knot_tcp_dearer_than_dot_is_flagged_in_every_group(study: Analysis) -> None:
    c = _contradiction(study, "inconsistent-layering", "knot-resolver tcp forever", "knot-resolver dot forever")
    assert c["rounds"] == 3 and c["low"] > 1.5 and c["margin"] == pytest.approx(c["low"] - 1)
    for n in (1000, 4000, 16000):
        c = _contradiction(
            study, "inconsistent-layering", f"knot-resolver tcp {n} connections", f"knot-resolver dot {n} connections"
        )
        assert c["low"] > 1.5
    assert "inconsistent-layering" in str(_trial(study, "connections-knot-resolver-tcp-c1000-r0")["flags"])
    for shorter in ("30s", "1s"):
        _contradiction(study, "inconsistent-lifetime", "knot-resolver tcp forever", f"knot-resolver tcp {shorter}")


def test_knot_rsa_persistent_trials_are_persistent_since_the_open_phase_fix(study: Analysis) -> None:
    """The audited run's RSA persistent trials reopened 202-241 connections a window; since
    cfe33ae none, by the engine's count and the kernel's."""
    for transport in ("dot", "doh"):
        for rnd in range(3):
            r = _trial(study, f"establishment-knot-resolver-{transport}-lforever-res0-rsa-2048-r{rnd}")
            assert r["valid"] and r["connections_established"] == 0 and r["kernel_passive_opens"] < 10
            assert "not-persistent" not in str(r["flags"])


def test_quic_reconnections_in_a_persistent_window_are_flagged(study: Analysis) -> None:
    flagged = [r for r in study.tables["trials"].rows if "not-persistent" in str(r["flags"]).split(";")]
    assert flagged and all(r["transport"] == "doq" and not r["valid"] for r in flagged)
    assert all(r["connections_established"] > 0.01 * r["connections"] for r in flagged)


def test_memory_falling_at_16000_is_flagged(study: Analysis) -> None:
    rows = [r for r in study.tables["consistency"].rows if r["flag"] == "inconsistent-memory"]
    assert {(r["target"], r["transport"]) for r in rows} == {("knot-resolver", "tcp"), ("knot-resolver", "dot")}
    # each against the 16 000-connection point (as many as were held open)
    assert all(r["margin"] > 0 and 15_000 < float(r["against"].split(" at ")[1].split()[0]) <= 16_000 for r in rows)


def test_clean_cells_are_not_flagged(study: Analysis) -> None:
    """dnsdist's TCP and DoT lifetimes are monotonic, its TCP cheaper than its DoT: its only
    contradictions are its one-query DoT dearer than its DoH and one cost cell (below)."""
    named = [(r["flag"], r["cell"]) for r in study.tables["consistency"].rows if "dnsdist" in r["cell"]]
    assert {flag for flag, _ in named} == {"inconsistent-layering", "inconsistent-resumption"}
    assert all(" 1q" in cell for _, cell in named)
    assert not [cell for flag, cell in named if flag == "inconsistent-layering" and not cell.startswith("dnsdist dot ")]
    r = _trial(study, "establishment-dnsdist-dot-lforever-res0-ecdsa-p256-r0")
    assert r["flags"] == "" and r["valid"]


def test_the_audits_unflagged_physics_is_flagged(study: Analysis) -> None:
    """reviews/study-audit.md §1.3, items 1 to 4: dnsdist's one-query DoT dearer than its DoH in
    every round; its resumed DoH dearer than its full one at 200 qps in the cost model's trials;
    CoreDNS's DoH/3 dearer with 0-RTT than without at 30 s; QUIC connections established with no
    handshake counted (all of them at 30 s with 0-RTT, a few % at 1 s)."""
    c = _contradiction(study, "inconsistent-layering", "dnsdist dot 1q", "dnsdist doh 1q")
    assert c["rounds"] == 3 and c["low"] > 1
    c = _contradiction(
        study, "inconsistent-resumption", "dnsdist doh 1q at 200 qps resumption 1", "dnsdist doh 1q at 200 qps"
    )
    assert c["rounds"] == 1 and c["value"] == pytest.approx(911.4 / 732.9, rel=1e-3)
    c = _contradiction(
        study, "inconsistent-resumption", "coredns doh3 30s resumption 1 0-RTT 1", "coredns doh3 30s resumption 1"
    )
    assert c["rounds"] == 3 and c["low"] > 1
    uncounted = {r["cell"]: r for r in study.tables["consistency"].rows if r["flag"] == "inconsistent-handshakes"}
    assert uncounted["coredns doh3 30s resumption 1 0-RTT 1"]["low"] == 1.0
    assert 0.05 < uncounted["coredns doh3 1s resumption 1 0-RTT 1"]["low"] < 0.1
    assert all(" 0-RTT 1" in cell for cell in uncounted)
    r = _trial(study, "quic_establishment-coredns-doh3-l30s-res1-e1-r1")
    assert r["valid"] and "inconsistent-handshakes" in str(r["flags"]).split(";")


def test_transports_compare_on_connection_counts_valid_for_both(study: Analysis) -> None:
    """dnsdist's DoT lost its 16 000 point (connections-short): DoH and DoT compare over the
    counts valid for both, and the verdict follows those."""
    from dnscost.report.points import UNRESOLVED, study_points

    points = {p.study.split(",")[0]: p for p in study_points(study)}
    memory = points["dnsdist uses less for DoH than for DoT"]
    assert "over the connections valid for both (1,000/4,000/8,000" in memory.ours
    # DoH 19.7 [-9.2 to 48.7] against DoT 23.3 [10.6 to 35.9] KiB: the intervals overlap
    assert memory.verdict == UNRESOLVED and "doh 19.7 [-9." in memory.ours and "dot 23.3 [10.6 to 35.9]" in memory.ours
    fit = {(r["target"], r["transport"]): r for r in study.tables["memory_fit"].rows}
    assert fit[("dnsdist", "dot")]["dropped"] == "16000" and fit[("dnsdist", "doh")]["dropped"] is None
