"""Table I (``table1``) on synthetic establishment trials with known costs: every cell of the
study's table, energy by the study's method (energy per query at saturation) and by the cost
model at exactly 10 000 qps, the study's kWh beside them, both ratios to UDP and the verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dnscost.analysis.table1 import AGREE_FACTOR, CELLS, NOT_MEASURED, table1_rows
from dnscost.analysis.tables import energy_rows
from dnscost.study import published

Row = dict[str, Any]

COST: dict[str, dict[str, float]] = {
    "udp": {"query": 4.0},
    "tcp": {"query": 6.0, "full_handshake": 50.0, "connection_second": 0.5},
    "dot": {"query": 9.0, "full_handshake": 600.0, "resumed_handshake": 150.0, "connection_second": 1.5},
    "doh": {"query": 20.0, "full_handshake": 700.0, "resumed_handshake": 200.0, "connection_second": 2.0},
}
"""Target CPU-µs per query, per handshake (a TCP connection for tcp), per connection-second."""
W_PER_CPU = 2.76
"""Joules per CPU-second of the target (the CPU power model's P_max - P_idle)."""
SECONDS = 10.0
ONE_QUERY_S = 0.002
"""How long a one-query connection stays open."""
KWH = 10_000 * 86_400 / 3.6e6
"""A day at 10 000 qps, per joule per query."""


def _trial(transport: str, lifetime: str | None, resumption: float | None = 0.0, key: str | None = None) -> Row:
    """One saturated trial (one core busy) of 1 000 connections with the given lifetime."""
    c = COST[transport]
    if transport == "udp":
        per_query, rate, held = c["query"], 0.0, 0.0
    elif lifetime == "1q":
        per_query, held = c["query"] + c["full_handshake"] + c["connection_second"] * ONE_QUERY_S, 0.0
        rate = -1.0  # one connection per query: set below
    else:
        seconds = {"forever": None, "30s": 30.0, "1s": 1.0}[str(lifetime)]
        rate, held = (0.0 if seconds is None else 1000 / seconds), 1000.0
        per_query = c["query"]
    fixed = 0.0 if rate < 0 else rate * c.get("full_handshake", 0.0) + held * c.get("connection_second", 0.0)
    qps = (1e6 - fixed) / per_query
    if rate < 0:
        rate, held = qps, qps * ONE_QUERY_S
    cpu = 1e6 * SECONDS
    return {
        "id": f"{transport}-{lifetime}-{resumption}-{key}",
        "group": "establishment",
        "analysis": "establishment",
        "kind": "load",
        "rate": "max",
        "round": 0,
        "rep": 0,
        "target": "dnsdist",
        "transport": transport,
        "lifetime": lifetime,
        "resumption": resumption,
        "early_data": 0.0,
        "cert_key": key,
        "valid": True,
        "flags": "",
        "measured_s": SECONDS,
        "queries_answered": qps * SECONDS,
        "connections_established": rate * SECONDS,
        "handshakes_full": None if transport in ("udp", "tcp") else rate * SECONDS,
        "handshakes_resumed": None if transport in ("udp", "tcp") else 0.0,
        "connection_seconds": held * SECONDS,
        "target_cpu_us": cpu,
        "cpu_us_per_query": cpu / (qps * SECONDS),
        "energy_marginal_j": cpu / 1e6 * W_PER_CPU,
        "energy_source": "model",
    }


def _terms(unidentified: tuple[tuple[str, str], ...] = ()) -> list[Row]:
    return [
        {
            "target": "dnsdist",
            "transport": transport,
            "term": term,
            "us": None if (transport, term) in unidentified else us,
            "status": "not identified" if (transport, term) in unidentified else "identified",
        }
        for transport, costs in COST.items()
        for term, us in costs.items()
    ]


def _rows() -> list[Row]:
    rows = [_trial("udp", None, None)]
    for transport in ("tcp", "dot", "doh"):
        for lifetime in ("forever", "30s", "1s", "1q"):
            rows.append(_trial(transport, lifetime, None if transport == "tcp" else 0.0))
            if transport != "tcp" and lifetime != "forever":
                rows.append(_trial(transport, lifetime, 1.0))  # resumption on: not a Table I cell
    return rows


def _table(unidentified: tuple[tuple[str, str], ...] = ()) -> dict[tuple[Any, Any], Row]:
    rows = _rows()
    out = table1_rows(rows, energy_rows(rows), _terms(unidentified))
    return {(r["transport"], r["lifetime"]): r for r in out}


def _study_method(transport: str, lifetime: str | None) -> float:
    """Energy per query at saturation, from the costs: the handshakes of a fixed-rate profile
    are spread over the saturated rate."""
    t = _trial(transport, lifetime)
    return float(t["cpu_us_per_query"]) / 1e6 * W_PER_CPU * KWH


def _model(transport: str, lifetime: str | None) -> float:
    """CPU-µs for one second at exactly 10 000 qps with the profile's connection rate."""
    c = COST[transport]
    if transport == "udp":
        return 10_000 * c["query"]
    if lifetime == "1q":
        return 10_000 * (c["query"] + c["full_handshake"] + c["connection_second"] * ONE_QUERY_S)
    rate = {"30s": 1000 / 30, "1s": 1000.0}[str(lifetime)]
    return 10_000 * c["query"] + rate * c["full_handshake"] + 1000 * c["connection_second"]


def test_every_cell_of_the_study_and_no_other() -> None:
    table = _table()
    assert sorted(table, key=str) == sorted(CELLS, key=str)
    assert [(r["transport"], r["lifetime"]) for r in table.values()] == list(CELLS)


@pytest.mark.parametrize("cell", CELLS)
def test_both_energy_methods_follow_the_known_costs(cell: tuple[str, str | None]) -> None:
    transport, lifetime = cell
    r = _table()[cell]
    assert r["kwh_study_method"] == pytest.approx(_study_method(transport, lifetime), rel=1e-9)
    assert r["model_cpu_us_per_s"] == pytest.approx(_model(transport, lifetime), rel=1e-9)
    assert r["kwh_model"] == pytest.approx(_model(transport, lifetime) / 1e6 * W_PER_CPU * 86_400 / 3.6e6, rel=1e-9)
    assert r["model_status"] == "identified"


def test_the_methods_differ_when_handshakes_come_at_a_fixed_rate() -> None:
    table = _table()
    # 1 000 handshakes/s: at saturation (44 000 qps) they are spread over more queries than at
    # 10 000 qps, so the study's method puts a day at 10 000 qps lower than the model does.
    assert table[("dot", "1s")]["kwh_study_method"] * 1.5 < table[("dot", "1s")]["kwh_model"]
    # One query per connection: the handshakes scale with the queries, both methods agree.
    assert table[("dot", "1q")]["kwh_study_method"] == pytest.approx(table[("dot", "1q")]["kwh_model"], rel=1e-3)


def test_study_values_ratios_and_verdicts() -> None:
    study = published()["table1_kwh"]["dnsdist"]
    table = _table()
    udp = table[("udp", None)]
    assert udp["study_kwh"] == study["udp"]
    for (transport, lifetime), r in table.items():
        if transport == "udp":
            continue
        key = {"30s": "cx33_per_s", "1s": "cx1000_per_s", "1q": "one_query"}[str(lifetime)]
        assert r["study_kwh"] == study[transport][key]
        assert r["study_ratio_to_udp"] == pytest.approx(study[transport][key] / study["udp"])
        # One round, whose reference is the UDP cell: both denominators are the same.
        assert r["ratio_to_udp"] == pytest.approx(r["kwh_study_method"] / udp["kwh_study_method"])
        assert r["ratio_to_udp_cell"] == pytest.approx(r["ratio_to_udp"]) and r["verdict_udp_cell"] == r["verdict"]
        assert r["model_ratio_to_udp"] == pytest.approx(r["kwh_model"] / udp["kwh_model"])
        within = 1 / AGREE_FACTOR <= r["ratio_to_udp"] / r["study_ratio_to_udp"] <= AGREE_FACTOR
        assert r["verdict"] == ("agree" if within else "differ")
    # Known by construction: TCP one query costs 14x UDP here, the study says 61.6x.
    assert table[("tcp", "1q")]["verdict"] == "differ"
    assert table[("tcp", "1s")]["verdict"] == "agree"


def test_a_term_not_identified_leaves_the_prediction_not_identified_never_zero() -> None:
    table = _table(unidentified=(("dot", "full_handshake"),))
    for lifetime in ("30s", "1s", "1q"):
        r = table[("dot", lifetime)]
        assert r["kwh_model"] is None and r["model_cpu_us_per_s"] is None
        assert r["model_status"] == "not identified"
        assert r["kwh_study_method"] is not None
    assert table[("tcp", "1s")]["model_status"] == "identified"


def test_a_missing_profile_is_listed_as_not_measured() -> None:
    rows = [r for r in _rows() if r["lifetime"] != "30s"]
    out = table1_rows(rows, energy_rows(rows), _terms())
    missing = [r for r in out if r["lifetime"] == "30s"]
    assert [r["transport"] for r in missing] == ["tcp", "dot", "doh"]
    assert all(r["model_status"] == NOT_MEASURED and r["kwh_study_method"] is None for r in missing)
    assert all(r["study_kwh"] is not None and r["verdict"] is None for r in missing)


def test_key_match_says_which_key_type_the_study_ratios_match() -> None:
    from dnscost.analysis.table1 import key_match

    def cell(key: str, transport: str, ours: float, theirs: float) -> Row:
        verdict = "agree" if 1 / AGREE_FACTOR <= ours / theirs <= AGREE_FACTOR else "differ"
        return {
            "target": "dnsdist",
            "transport": transport,
            "cert_key": key,
            "ratio_to_udp": ours,
            "study_ratio_to_udp": theirs,
            "verdict": verdict,
        }

    rows = [
        cell("ecdsa-p256", "dot", 95.0, 189.2),
        cell("ecdsa-p256", "doh", 4.0, 14.8),
        cell("rsa-2048", "dot", 180.0, 189.2),
        cell("rsa-2048", "doh", 12.0, 14.8),
        cell("rsa-2048", "tcp", 1.0, 61.6),  # no key: left out
    ]
    ecdsa, rsa = key_match(rows)
    assert (ecdsa["cert_key"], ecdsa["cells"], ecdsa["agree"]) == ("ecdsa-p256", 2, 0)
    assert (rsa["cert_key"], rsa["cells"], rsa["agree"]) == ("rsa-2048", 2, 2)
    assert ecdsa["ours_over_study"] == pytest.approx(((95 / 189.2) * (4 / 14.8)) ** 0.5)
    assert abs(rsa["ours_over_study"] - 1) < abs(ecdsa["ours_over_study"] - 1)


def test_another_key_type_has_its_own_cells_and_no_model_prediction() -> None:
    from dnscost.analysis.table1 import NOT_FITTED

    rows = [*_rows(), _trial("dot", "1s", 0.0, "rsa-2048")]
    for r in rows:
        if r["transport"] in ("dot", "doh") and r["cert_key"] is None:
            r["cert_key"] = "ecdsa-p256"
    out = table1_rows(rows, energy_rows(rows), _terms())
    (rsa,) = [r for r in out if r["cert_key"] == "rsa-2048"]
    (ecdsa,) = [r for r in out if r["cert_key"] == "ecdsa-p256" and r["transport"] == "dot" and r["lifetime"] == "1s"]
    assert rsa["model_status"] == NOT_FITTED and rsa["kwh_model"] is None
    assert ecdsa["model_status"] == "identified"
    assert rsa["ratio_to_udp"] == pytest.approx(ecdsa["ratio_to_udp"])  # same costs in this fixture
    assert rsa["study_kwh"] == ecdsa["study_kwh"]


def test_a_cell_without_a_valid_trial_says_so_and_udp_has_no_verdict() -> None:
    rows = _rows()
    for r in rows:
        if r["transport"] == "tcp" and r["lifetime"] == "1q":
            r["valid"] = False
    table = {(r["transport"], r["lifetime"]): r for r in table1_rows(rows, energy_rows(rows), _terms())}
    tcp = table[("tcp", "1q")]
    assert (tcp["reps"], tcp["valid_reps"]) == (1, 0)
    assert tcp["kwh_study_method"] is None and tcp["verdict"] is None
    assert table[("udp", None)]["verdict"] is None and table[("udp", None)]["ratio_to_udp"] == 1.0


def test_a_generator_bound_cell_is_measured_below_saturation_as_an_upper_bound() -> None:
    """One generator core cannot open TCP connections one query each as fast as dnsdist accepts
    them: the cell's trials, flagged generator-bound and nothing else, still give the target's
    energy per query (at the rate reached), marked below saturation. Any other flag besides, and
    the cell has no value."""
    rows = _rows()
    tcp = next(r for r in rows if r["transport"] == "tcp" and r["lifetime"] == "1q")
    tcp["valid"], tcp["flags"] = False, "generator-bound;inconsistent-lifetime"
    # The generator reached 60 % of the target's capacity: the target batched less, so each
    # query cost it a tenth more than at saturation.
    tcp["queries_answered"] *= 0.6
    tcp["target_cpu_us"] *= 0.6 * 1.1
    tcp["energy_marginal_j"] *= 0.6 * 1.1
    tcp["cpu_us_per_query"] *= 1.1
    table = {(r["transport"], r["lifetime"]): r for r in table1_rows(rows, energy_rows(rows), _terms())}
    cell = table[("tcp", "1q")]
    assert cell["below_saturation"] is True and (cell["reps"], cell["valid_reps"]) == (1, 0)
    assert cell["kwh_study_method"] == pytest.approx(_study_method("tcp", "1q") * 1.1)
    assert cell["kwh_study_method"] > _study_method("tcp", "1q")  # an upper bound
    assert cell["ratio_to_udp"] is not None and cell["verdict"] in ("agree", "differ")
    assert not any(r["below_saturation"] for k, r in table.items() if k != ("tcp", "1q"))

    tcp["flags"] = "generator-bound;loss"
    table = {(r["transport"], r["lifetime"]): r for r in table1_rows(rows, energy_rows(rows), _terms())}
    assert table[("tcp", "1q")]["kwh_study_method"] is None and table[("tcp", "1q")]["below_saturation"] is False


def test_every_ratio_divides_by_its_own_rounds_udp_and_flips_are_counted() -> None:
    """Each round's UDP reference (group ``reference``) costs 4 µs a query, the Table I UDP cell
    (the establishment group's) 5 µs, and a DoT 30 s cell 15.2 µs: in-round its ratio is 3.8
    (the study's 2.4: differ); against the UDP cell it is 3.04 (agree). The count says 1 verdict
    flips and names it."""
    from dnscost.analysis.table1 import verdict_counts

    def scaled(row: Row, us: float, rnd: int, group: str = "establishment") -> Row:
        factor = us / row["cpu_us_per_query"]
        return {
            **row,
            "id": f"{group}-{row['id']}-r{rnd}",
            "group": group,
            "analysis": group,
            "round": rnd,
            "rep": rnd,
            "target_cpu_us": row["target_cpu_us"] * factor,
            "cpu_us_per_query": us,
            "energy_marginal_j": row["energy_marginal_j"] * factor,
        }

    udp, dot = _trial("udp", None, None), _trial("dot", "30s")
    rows = []
    for rnd in range(3):
        rows += [scaled(udp, 4.0, rnd, "reference"), scaled(udp, 5.0, rnd), scaled(dot, 15.2, rnd)]
    out = table1_rows(rows, energy_rows(rows), _terms())
    cell = next(r for r in out if (r["transport"], r["lifetime"]) == ("dot", "30s"))
    assert cell["ratio_to_udp"] == pytest.approx(3.8)
    assert cell["ratio_to_udp_cell"] == pytest.approx(15.2 / 5.0)
    assert (cell["verdict"], cell["verdict_udp_cell"]) == ("differ", "agree")
    # The UDP cell itself, against its rounds' reference.
    assert next(r for r in out if r["transport"] == "udp")["ratio_to_udp"] == pytest.approx(1.25)
    counts = verdict_counts(out)
    assert (counts.cells, counts.agree, counts.differ) == (1, 0, 1)
    assert (counts.agree_udp_cell, counts.differ_udp_cell) == (1, 0)
    assert counts.flips == ("dnsdist dot 30s default: differ → agree",)
    assert "1 verdicts flip" in counts.sentence()


def _day(transport: str, lifetime: str | None, answered: float = 10_000.0, valid: bool = True) -> Row:
    """One trial of the ``day`` group: the cell open loop at 10 000 qps, its CPU what COST says
    one second of it takes (queries, the profile's connections a second, the connections held)."""
    c = COST[transport]
    seconds = {"30s": 30.0, "1s": 1.0}.get(str(lifetime))
    if transport == "udp":
        rate, held = 0.0, 0.0
    elif lifetime == "1q":
        rate, held = answered, answered * ONE_QUERY_S
    else:
        rate, held = 1000 / float(seconds or 1), 1000.0
    cpu = answered * c["query"] + rate * c.get("full_handshake", 0.0) + held * c.get("connection_second", 0.0)
    row = _trial(transport, lifetime, None if transport in ("udp", "tcp") else 0.0)
    row.update(
        id=f"day-{row['id']}",
        group="day",
        analysis="day",
        rate=10_000,
        valid=valid,
        answered_qps=answered,
        target_cpu_us=cpu * SECONDS,
        energy_marginal_j=cpu * SECONDS / 1e6 * W_PER_CPU,
    )
    return row


def test_the_day_measured_at_10k_qps_stands_beside_the_studys_method() -> None:
    """The ``day`` group's trials give each cell's kWh measured at 10 000 qps (its energy above
    idle a second x 86 400), apart from the study's method, which they do not move; a cell one
    core could not carry (its trials invalid) has none, and its answered rate says how far it got."""
    rows = _rows()
    before = {(r["transport"], r["lifetime"]): r for r in table1_rows(rows, energy_rows(rows), _terms())}
    days = [_day("udp", None), _day("tcp", "30s"), _day("dot", "30s"), _day("dot", "1q", 1_200.0, valid=False)]
    rows += days
    table = {(r["transport"], r["lifetime"]): r for r in table1_rows(rows, energy_rows(rows), _terms())}
    for key, r in table.items():
        assert r["kwh_study_method"] == before[key]["kwh_study_method"], key
    per_day = 86_400 / 3.6e6
    udp = 10_000 * COST["udp"]["query"] / 1e6 * W_PER_CPU * per_day
    assert table[("udp", None)]["kwh_measured"] == pytest.approx(udp)
    dot = (10_000 * 9.0 + 1000 / 30 * 600.0 + 1000 * 1.5) / 1e6 * W_PER_CPU * per_day
    assert table[("dot", "30s")]["kwh_measured"] == pytest.approx(dot)
    assert table[("dot", "30s")]["measured_ratio_to_udp"] == pytest.approx(dot / udp)
    assert table[("dot", "30s")]["day_valid_reps"] == table[("dot", "30s")]["day_reps"] == 1
    # At saturation the 30 s cell's handshakes are spread over more queries than at 10 000 qps.
    assert table[("dot", "30s")]["kwh_measured"] > table[("dot", "30s")]["kwh_study_method"]
    one = table[("dot", "1q")]
    assert one["kwh_measured"] is None and one["day_answered_qps"] == 1_200.0
    assert (one["day_reps"], one["day_valid_reps"]) == (1, 0)
    assert table[("doh", "1s")]["day_reps"] == 0 and table[("doh", "1s")]["kwh_measured"] is None


def test_the_day_report_prints_the_measured_cells_and_refuses_a_run_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m dnscost.report.day``: one table per target, a measured cell as median [min-max],
    one that no round stands for as n/a; a run without a ``day`` group is one line and exit 2."""
    from dnscost.analysis.records import Analysis, Table
    from dnscost.analysis.tables import COLUMNS
    from dnscost.analysis.write import write_tables
    from dnscost.report.day import main

    def write(table: list[Row]) -> None:
        columns = COLUMNS["table1"]
        rows = [{c: r.get(c) for c in columns} for r in table]
        write_tables(
            Analysis(run={}, trials=[], tables={"table1": Table("table1", columns, rows)}), tmp_path / "tables"
        )

    rows = [*_rows(), _day("udp", None), _day("dot", "30s"), _day("dot", "1q", 1_200.0, valid=False)]
    table = table1_rows(rows, energy_rows(rows), _terms())
    write(table)
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("**dnsdist**: a day at 10 000 qps")
    assert "| n/a | n/a | n/a | 1 200 | 0 of 1 |" in out.split("| dot, one query |")[1].splitlines()[0]
    assert " [" in out.split("| dot, 30 s |")[1].splitlines()[0]
    write([r for r in table if not r.get("day_reps")])
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no Table I cell measured at 10 000 qps" in err[0]
