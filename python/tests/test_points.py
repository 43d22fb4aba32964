"""The study point by point (report/points.py): every number and statement of the study's record
appears beside ours, in the record's order, with a verdict computed from the run's tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from dnscost.analysis import Analysis, Table, analyze
from dnscost.analysis.tables import COLUMNS
from dnscost.report.points import AGREE, CLIENTS, DIFFER, NOT_MEASURED, study_points
from dnscost.study import published

QUICK = Path(__file__).parent / "fixtures" / "runs" / "quick"


@pytest.fixture(scope="module")
def quick() -> Analysis:
    return analyze(QUICK)


def test_every_statement_of_the_record_appears_in_its_order(quick: Analysis) -> None:
    points = study_points(quick)
    record = published()
    for section in ("memory", "persistent", "establishment", "table1_statements", "clients"):
        statements = record[section]["statements"]
        mine = [p.study for p in points if p.section == section and p.study in statements]
        assert mine == statements, section
    assert all(p.verdict == CLIENTS for p in points if p.section == "clients")


def test_every_number_of_the_record_appears(quick: Analysis) -> None:
    text = "\n".join(p.study for p in study_points(quick))
    record = published()
    for key, value in record["baseline_udp"].items():
        if isinstance(value, dict):
            assert f"answered {value['answered_qps']} qps, sent {value['sent_qps']} qps" in text, key
    for target, by_transport in record["table1_kwh"].items():
        name = target.replace("_", "-")
        for transport, value in by_transport.items():
            for kwh in value.values() if isinstance(value, dict) else [value]:
                assert any(
                    line.startswith(f"{name} {transport}") and line.endswith(f": {kwh} kWh/day at 10 000 qps")
                    for line in text.splitlines()
                ), (name, transport, kwh)
    for transport, figure in record["wire_one_query"].items():
        assert f"{transport}: {figure['messages']} messages" in text
    assert f"{record['establishment']['connections']} connections" in text


def test_verdicts_come_from_the_run(quick: Analysis) -> None:
    points = study_points(quick)
    measured = [p for p in points if p.verdict in (AGREE, DIFFER)]
    assert len(measured) >= 10
    # The quick study has no 30 s lifetime: those Table I cells are not measured.
    thirty = [p for p in points if p.section == "table1_kwh" and " 30s:" in p.study]
    assert len(thirty) == 6 and all(p.verdict == NOT_MEASURED for p in thirty)


def test_one_query_statement_follows_the_table1_rows() -> None:
    rows = [
        {"target": "dnsdist", "transport": "udp", "lifetime": None, "kwh_study_method": 0.05},
        # ratio_to_udp: against each round's own UDP reference, the one denominator
        {"target": "dnsdist", "transport": "doh", "lifetime": "1q", "kwh_study_method": 9.0, "ratio_to_udp": 180.0},
    ]
    table = Table("table1", COLUMNS["table1"], [{c: r.get(c) for c in COLUMNS["table1"]} for r in rows])
    a = Analysis(run={}, trials=[], tables={"table1": table})
    (point,) = [p for p in study_points(a) if p.study.startswith("one query per connection: unsustainable")]
    assert point.verdict == AGREE and "180x" in point.ours
    rows[1]["kwh_study_method"], rows[1]["ratio_to_udp"] = 1.0, 20.0  # 20x UDP: not the study's ~200x
    table.rows = [{c: r.get(c) for c in COLUMNS["table1"]} for r in rows]
    (point,) = [p for p in study_points(a) if p.study.startswith("one query per connection: unsustainable")]
    assert point.verdict == DIFFER
