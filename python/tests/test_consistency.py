"""The consistency checks the audit found missing (issue 58, item 5; reviews/study-audit.md §1.3),
each on rows built here: it names the cells when every round contradicts physics, and stays quiet
when the physics holds or when a round disagrees. Pure: no run, no process."""

from __future__ import annotations

from typing import Any

import pytest
from dnscost.analysis.consistency import apply_flags, consistency_rows
from dnscost.contract import Row
from dnscost.validity import CONSISTENCY_FLAGS, MAX_NEW_CONNECTIONS


def load(transport: str, cpu: list[float], **fields: Any) -> list[Row]:
    """One load cell of dnsdist over ``transport``, a trial a round with these CPU-µs per query
    (a row of the ``trials`` table, which carries every column the ``rounds`` table does)."""
    cell = {
        "kind": "load",
        "group": "establishment",
        "analysis": "establishment",
        "target": "dnsdist",
        "transport": transport,
        "cert_key": "ecdsa-p256",
        "early_data": 0.0,
        "lifetime": "1q",
        "resumption": 0.0,
        "connections": 1000,
        "rate": "max",
        "status": "done",
        "valid": True,
        "flags": "",
        "connections_established": 1000,
        "handshakes_full": 1000,
        "handshakes_resumed": 0,
    } | fields
    name = "-".join(str(cell[k]) for k in ("group", "transport", "lifetime", "resumption", "early_data", "rate"))
    return [cell | {"id": f"{name}-r{k}", "round": k, "cpu_us_per_query": c} for k, c in enumerate(cpu)]


def found(*cells: list[Row]) -> list[Row]:
    rows = [r for c in cells for r in c]
    return consistency_rows(rows, [], rows)


def named(rows: list[Row]) -> set[tuple[str, str, str]]:
    return {(r["flag"], r["cell"], r["against"]) for r in rows}


# --- DoT dearer than DoH, which carries it plus HTTP/2 ------------------------------------------


def test_dot_dearer_than_doh_in_every_round_is_flagged() -> None:
    """dnsdist's one-query DoT against its DoH, as the audited run measured them (458 against
    411 CPU-µs, DoT ÷ DoH 1.08, 1.03 and 1.13 by round)."""
    dot, doh = load("dot", [453.6, 463.5, 458.0]), load("doh", [420.0, 448.0, 405.3])
    (row,) = found(dot, doh)
    assert (row["flag"], row["cell"], row["against"]) == ("inconsistent-layering", "dnsdist dot 1q", "dnsdist doh 1q")
    assert "plus HTTP/2" in row["what"] and row["rounds"] == 3
    ratios = sorted(a["cpu_us_per_query"] / b["cpu_us_per_query"] for a, b in zip(dot, doh, strict=True))
    assert (row["low"], row["value"], row["high"]) == pytest.approx(tuple(ratios))
    assert row["margin"] == pytest.approx(ratios[0] - 1)
    assert row["cell_trials"] == ";".join(r["id"] for r in dot)
    assert row["against_trials"] == ";".join(r["id"] for r in doh)


def test_dot_cheaper_than_doh_or_dearer_in_one_round_only_is_not_flagged() -> None:
    assert found(load("dot", [400.0, 410.0, 405.0]), load("doh", [450.0, 455.0, 470.0])) == []
    # knot-resolver's one-query RSA in the audited run: DoT dearer in 2 of 3 rounds only
    assert found(load("dot", [1804.0, 1810.0, 1700.0]), load("doh", [1734.0, 1730.0, 1790.0])) == []


def test_dot_and_doh_compare_only_with_the_same_key_and_resumption() -> None:
    """A DoT cell dearer than a DoH cell of another key, or of other resumption, contradicts
    nothing."""
    dot = load("dot", [900.0, 900.0, 900.0], cert_key="rsa-2048")
    doh = load("doh", [400.0, 400.0, 400.0])
    resumed = load("doh", [300.0, 300.0, 300.0], cert_key="rsa-2048", resumption=1.0)
    assert found(dot, doh, resumed) == []


def test_doq_dearer_than_doh3_is_flagged_and_tcp_against_dot_still_is() -> None:
    rows = found(
        load("doq", [120.0, 125.0, 130.0], lifetime="forever"),
        load("doh3", [100.0, 110.0, 105.0], lifetime="forever"),
        load("tcp", [30.0, 31.0, 32.0], lifetime="forever", cert_key=None),
        load("dot", [20.0, 21.0, 22.0], lifetime="forever"),
    )
    assert named(rows) == {
        ("inconsistent-layering", "dnsdist doq forever", "dnsdist doh3 forever"),
        ("inconsistent-layering", "dnsdist tcp forever", "dnsdist dot forever"),
    }
    assert {r["what"].split("plus ")[1].split(")")[0] for r in rows} == {"HTTP/3", "TLS"}


# --- resumption dearer than a full handshake in the cost model's one-query cells -----------------


def cost(transport: str, resumption: float, rate: str, cpu: float) -> list[Row]:
    """A ``cost_handshakes`` trial: one query per connection at ``rate``, a single round."""
    return load(
        transport,
        [cpu],
        group="cost_handshakes",
        analysis="cost_handshakes",
        connections=50,
        rate=rate,
        resumption=resumption,
        handshakes_full=1000 if not resumption else 333,
        handshakes_resumed=0 if not resumption else 667,
    )


def test_resumed_dearer_than_full_in_a_cost_cell_is_flagged_rate_by_rate() -> None:
    """The audited run's dnsdist DoH: resumed 911 against full 733 CPU-µs per query at 200 qps
    (+24 %, beyond a single round's ±10 % on both sides), 588 against 554 at 1 000 (+6 %, not)."""
    rows = found(
        cost("doh", 0.0, "200", 733.0),
        cost("doh", 1.0, "200", 911.0),
        cost("doh", 0.0, "1000", 554.0),
        cost("doh", 1.0, "1000", 588.0),
    )
    (row,) = rows
    assert (row["flag"], row["cell"], row["against"]) == (
        "inconsistent-resumption",
        "dnsdist doh 1q at 200 qps resumption 1",
        "dnsdist doh 1q at 200 qps",
    )
    value = 911.0 / 733.0
    assert row["rounds"] == 1 and row["value"] == pytest.approx(value)
    assert row["low"] == pytest.approx(value * 0.9) and row["margin"] == pytest.approx(value * 0.9 - 1)


def test_resumed_cheaper_in_a_cost_cell_is_not_flagged() -> None:
    assert found(cost("dot", 0.0, "200", 936.0), cost("dot", 1.0, "200", 669.0)) == []
    # nor two rates of the same resumption against each other
    assert found(cost("dot", 1.0, "200", 669.0), cost("dot", 0.0, "1000", 560.0)) == []


def test_cost_cells_are_checked_for_layering_at_the_same_rate() -> None:
    rows = found(cost("dot", 0.0, "200", 936.0), cost("doh", 0.0, "200", 733.0), cost("doh", 0.0, "1000", 2000.0))
    assert named(rows) == {("inconsistent-layering", "dnsdist dot 1q at 200 qps", "dnsdist doh 1q at 200 qps")}


# --- 0-RTT dearer than the same resumption without it --------------------------------------------


def quic(early: float, cpu: list[float], resumption: float = 1.0) -> list[Row]:
    return load(
        "doh3",
        cpu,
        target="coredns",
        group="quic_establishment",
        lifetime="30s",
        resumption=resumption,
        early_data=early,
        connections_established=0,
        handshakes_full=0,
    )


def test_zero_rtt_dearer_than_plain_resumption_in_every_round_is_flagged() -> None:
    """The audited run's CoreDNS DoH/3 at 30 s: 107.5 against 97.4 CPU-µs per query with and
    without 0-RTT (1.09, 1.19 and 1.10 by round)."""
    rows = found(quic(0.0, [97.4, 95.0, 98.0]), quic(1.0, [106.2, 113.1, 107.8]))
    assert named(rows) == {
        ("inconsistent-resumption", "coredns doh3 30s resumption 1 0-RTT 1", "coredns doh3 30s resumption 1")
    }
    assert "0-RTT" in rows[0]["what"] and rows[0]["low"] > 1


def test_zero_rtt_cheaper_or_dearer_in_one_round_only_is_not_flagged() -> None:
    assert found(quic(0.0, [97.4, 95.0, 98.0]), quic(1.0, [90.0, 94.0, 97.0])) == []
    # one round cheaper: not every round contradicts
    assert found(quic(0.0, [97.4, 95.0, 98.0]), quic(1.0, [106.2, 94.0, 107.8])) == []


# --- connections established with no handshake counted ------------------------------------------


def test_connections_without_a_counted_handshake_are_flagged() -> None:
    """The audited run's 0-RTT cells: 140 connections established a window at 30 s, no
    handshake counted; at 1 s, 3 473 established against 3 140 resumed."""
    thirty = quic(1.0, [107.0, 108.0, 106.0])
    for r, n in zip(thirty, (145, 140, 142), strict=True):
        r["connections_established"], r["handshakes_resumed"] = n, 0
    one = load("doh3", [90.0, 91.0, 92.0], target="coredns", lifetime="1s", resumption=1.0, early_data=1.0)
    for r, (n, resumed) in zip(one, ((3572, 3264), (3473, 3140), (3474, 3221)), strict=True):
        r["connections_established"], r["handshakes_full"], r["handshakes_resumed"] = n, 0, resumed
    rows = [r for r in found(thirty, one) if r["flag"] == "inconsistent-handshakes"]
    assert {r["cell"]: r["value"] for r in rows} == pytest.approx(
        {"coredns doh3 30s resumption 1 0-RTT 1": 1.0, "coredns doh3 1s resumption 1 0-RTT 1": 1 - 3264 / 3572}
    )
    second = next(r for r in rows if "1s" in r["cell"])
    assert second["low"] == pytest.approx(1 - 3221 / 3474) and second["high"] == pytest.approx(1 - 3140 / 3473)
    assert second["margin"] == pytest.approx(second["low"] - MAX_NEW_CONNECTIONS) and second["against_trials"] == ""
    # the flag goes to the cell's trials, which stay valid
    trials = [*thirty, *one]
    apply_flags(trials, rows)
    assert all(r["flags"] == "inconsistent-handshakes" and r["valid"] for r in trials)
    assert "inconsistent-handshakes" in CONSISTENCY_FLAGS


def test_connections_with_their_handshakes_counted_are_not_flagged() -> None:
    full = load("dot", [458.0, 460.0, 455.0], connections_established=3001, handshakes_full=1000)
    for r in full:
        r["handshakes_resumed"] = 2001
    # one round in three short of its handshakes, or every round within the bound: no contradiction
    short = load("doq", [100.0, 101.0, 99.0], connections_established=1000, handshakes_full=0)
    for r, resumed in zip(short, (995, 900, 1000), strict=True):
        r["handshakes_resumed"] = resumed
    within = load("doh3", [100.0, 101.0, 99.0], connections_established=1000, handshakes_full=995)
    tcp = load("tcp", [100.0, 101.0, 99.0], cert_key=None, connections_established=1000, handshakes_full=0)
    # a record without handshake counts at all says nothing
    uncounted = load("dot", [90.0], lifetime="1s", handshakes_full=None, handshakes_resumed=None)
    rows = found(full, short, within, tcp, uncounted)
    assert [r for r in rows if r["flag"] == "inconsistent-handshakes"] == []


def test_invalid_trials_do_not_raise_the_handshake_flag() -> None:
    cell = quic(1.0, [107.0, 108.0])
    for r in cell:
        r["connections_established"], r["handshakes_resumed"], r["valid"] = 140, 0, False
    assert found(cell) == []
