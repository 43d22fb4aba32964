"""Cost curves (issue 54): a ladder of shares of capacity in a spec, its plan (every cell at
every share, each after its saturation trial in the same round, in the round's shuffled
order), and the ``cost_curve`` table from rows made here (the saturation point included, the
ratio to saturation paired within rounds), kept out of the latency table's share columns."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
from dnscost.analysis.curves import curve_rows, mechanism_rows
from dnscost.analysis.tables import latency_rows
from dnscost.errors import UsageError
from dnscost.plan import TrialPlan, engine_knobs, expand
from dnscost.spec import parse_spec

SPEC = """
name = "curves"
targets = ["builtin"]
repetitions = 2
[defaults]
duration = "1s"
warmup = "0.5s"
[[group]]
name = "saturation"
transports = ["udp", "dot"]
connections = 8
lifetime = ["forever", "1q"]
rate = "max"
[[group]]
name = "ladder"
capacity_of = "saturation"
rate = ["40%", "1%", "6%"]
"""


def test_a_ladder_runs_every_cell_at_every_share_after_its_saturation_trial() -> None:
    plan = expand(parse_spec(SPEC, "s.toml"))
    by_id = {t.id: t for t in plan}
    order = [t.id for t in plan]
    steps = [t for t in plan if t.group == "ladder"]
    saturation = [t for t in plan if t.group == "saturation"]
    # udp (one lifetime: connections close only over TCP, TLS or QUIC) and dot in two: 3 cells, 2 rounds.
    assert len(saturation) == 3 * 2 and len(steps) == 3 * 2 * 3
    assert {t.params["rate"] for t in steps} == {"1%", "6%", "40%"}
    for t in steps:
        ref = by_id[t.reference or ""]
        assert ref.group == "saturation" and (ref.round, ref.transport) == (t.round, t.transport)
        assert {**ref.params, "rate": t.params["rate"]} == t.params
        assert order.index(ref.id) < order.index(t.id)
        assert t.analysis == "curve" and f"-at{t.params['rate'].rstrip('%')}pct-r{t.round}" in t.id
    # One share is still the latency table's (no share in the id), not a curve.
    (single,) = [t for t in expand(parse_spec(SPEC.replace('["40%", "1%", "6%"]', '"50%"'), "s.toml"))][-1:]
    assert single.analysis == "ladder" and "pct" not in single.id


@pytest.mark.parametrize(
    ("rate", "says"),
    [('["1%", "max"]', "a list of them (a ladder)"), ('["1%", "1.0%"]', "a ladder's shares are distinct")],
)
def test_a_bad_ladder_is_refused_in_one_line(rate: str, says: str) -> None:
    with pytest.raises(UsageError, match=r"rate: .*" + says.replace("(", r"\(").replace(")", r"\)")):
        parse_spec(SPEC.replace('["40%", "1%", "6%"]', rate), "s.toml")


def test_a_ladder_spaces_its_queries_as_it_says_and_its_saturation_trials_do_not_pace() -> None:
    spec = SPEC.replace(
        'rate = ["40%", "1%", "6%"]', 'rate = ["40%", "1%", "6%"]\narrival = "poisson"\npacing_resolution_us = 50'
    )
    plan = [_resolved(t) for t in expand(parse_spec(spec, "s.toml"))]
    for t in plan:
        knobs = engine_knobs(t)
        if t.group == "ladder":
            assert (knobs["arrival"], knobs["pacing_resolution_us"]) == ("poisson", 50), t.id
            assert (t.params["arrival"], t.params["pacing_resolution_us"]) == ("poisson", 50)
        else:  # closed loop: nothing to space
            assert "arrival" not in knobs and "pacing_resolution_us" not in knobs and "arrival" not in t.params
        if t.transport == "dot":
            # A one-query client in an open loop opens its connection when its query is due.
            assert knobs["open_first"] == (t.params["lifetime"] != "1q" or t.group == "saturation"), t.id
    # Without them the engine's defaults hold (none given).
    assert all("arrival" not in engine_knobs(_resolved(t)) for t in expand(parse_spec(SPEC, "s.toml")))


def _resolved(t: TrialPlan) -> TrialPlan:
    """A ladder's trial with its share resolved to a rate, as the runner does once its
    saturation trial has run."""
    rate = t.params["rate"]
    return dataclasses.replace(t, params={**t.params, "rate": 100.0}) if isinstance(rate, str) and "%" in rate else t


@pytest.mark.parametrize(
    ("field", "says"),
    [
        ('arrival = "bursty"', "arrival: expected one of constant, poisson, got 'bursty'"),
        ("pacing_resolution_us = 5", "pacing_resolution_us: expected an integer in 10..=10000, got 5"),
    ],
)
def test_a_bad_spacing_is_refused_in_one_line(field: str, says: str) -> None:
    spec = SPEC.replace('rate = ["40%", "1%", "6%"]', f'rate = ["40%", "1%", "6%"]\n{field}')
    with pytest.raises(UsageError, match=re.escape(says)):
        parse_spec(spec, "s.toml")


def _row(tid: str, rnd: int, cpu: float, qps: float, rate: str = "max", ref: str | None = None, **kw: Any) -> Any:
    cell = {"target": "d", "transport": "udp", "lifetime": "forever", "resumption": 0.0, "early_data": 0.0,
            "cert_key": None, "connections": 8}  # fmt: skip
    return {"id": tid, "group": "ladder" if ref else "saturation", "analysis": "curve" if ref else "saturation",
            "kind": "load", "valid": True, "rate": rate, "reference": ref, "round": rnd, "offered_qps": qps,
            "answered_qps": qps, "cpu_us_per_query": cpu, "latency_p50_us": 100.0, "latency_p90_us": 100.0,
            "latency_p99_us": 100.0, "latency_p999_us": 100.0, **cell, **kw}  # fmt: skip


def test_the_curve_table_has_the_saturation_point_and_ratios_paired_within_rounds() -> None:
    """Round 0 ran on a slower machine than round 1 (every cost 1.5 times): the ratio to
    saturation, paired within rounds, is the same in both; the CPU per query spreads."""
    rows = [
        _row("s-r0", 0, 7.5, 150_000.0),
        _row("s-r1", 1, 5.0, 200_000.0),
        _row("l1-r0", 0, 45.0, 1_500.0, "1%", "s-r0"),
        _row("l1-r1", 1, 30.0, 2_000.0, "1%", "s-r1"),
        _row("l40-r0", 0, 9.0, 60_000.0, "40%", "s-r0"),
        _row("l40-r1", 1, 6.0, 80_000.0, "40%", "s-r1"),
        _row("l40-r2", 2, 99.0, 80_000.0, "40%", "s-r1", valid=False),
    ]
    curve = curve_rows(rows)
    assert [r["share"] for r in curve] == [0.01, 0.4, 1.0]
    low, mid, top = curve
    assert (low["cpu_us_per_query"], low["cpu_us_per_query_min"], low["cpu_us_per_query_max"]) == (37.5, 30.0, 45.0)
    assert low["ratio_to_saturation"] == low["ratio_to_saturation_min"] == low["ratio_to_saturation_max"] == 6.0
    assert (mid["reps"], mid["valid_reps"], mid["ratio_to_saturation"]) == (3, 2, pytest.approx(1.2))
    assert (top["cpu_us_per_query"], top["ratio_to_saturation"], top["offered_qps"]) == (6.25, 1.0, 175_000.0)
    # The ladder's steps are not the latency table's share columns.
    (latency,) = latency_rows(rows)
    assert latency["share"] is None and latency["reps"] == 2


def test_the_mechanism_table_finds_what_carries_the_curve() -> None:
    """Steps whose CPU per query is 4 µs plus 10 µs a wake-up, with 1 wake-up a query at 1 %
    and 0.05 at saturation, and softirq time that does not follow: the wake-ups' slope is the
    10 µs, they explain the whole rise, and the softirq time explains none of it."""
    rows = []
    for r, noise in enumerate((1.0, 1.02)):
        saturation = {"wakeups_per_query": 0.05, "softirq_us_per_query": None}  # the meter saw no softirq tick
        rows.append(_row(f"s-r{r}", r, (4 + 10 * 0.05) * noise, 150_000.0) | saturation)
        for share, wakeups in (("1%", 1.0), ("16%", 0.6), ("40%", 0.3)):
            row = _row(f"l{share}-r{r}", r, (4 + 10 * wakeups) * noise, 1_000.0, share, f"s-r{r}")
            rows.append(row | {"wakeups_per_query": wakeups, "softirq_us_per_query": 0.2 + 0.01 * r})
    by = {m["observer"]: m for m in mechanism_rows(rows)}
    wake, soft = by["wakeups_per_query"], by["softirq_us_per_query"]
    assert wake["trials"] == 8 and wake["us_per_unit"] == pytest.approx(10.0, rel=0.05)
    assert wake["us_per_unit_low"] < 10.0 < wake["us_per_unit_high"] and wake["r2"] > 0.99
    assert wake["rise_explained"] == pytest.approx(1.0, abs=0.05)
    assert soft["trials"] == 6 and (soft["r2"] or 0.0) < 0.5 and soft["rise_explained"] is None
    assert by["runs_per_query"]["us_per_unit"] is None


def test_a_one_query_step_that_opened_no_connection_is_invalid() -> None:
    """A ladder's lowest step of one query per connection whose 152 queries rode the 200
    connections opened in its warm-up measured no establishment: flagged and invalid; a step
    that opened one connection per query, and a persistent cell, stay valid."""
    from dnscost.analysis.consistency import NOT_ONE_QUERY, flag_not_one_query

    base = {"status": "done", "valid": True, "flags": "", "transport": "dot"}
    rows = [
        {**base, "id": "low", "lifetime": "1q", "queries_answered": 152, "connections_established": 0},
        {**base, "id": "high", "lifetime": "1q", "queries_answered": 964, "connections_established": 953},
        {**base, "id": "kept", "lifetime": "forever", "queries_answered": 964, "connections_established": 0},
        {
            **base,
            "id": "udp",
            "transport": "udp",
            "lifetime": "1q",
            "queries_answered": 9,
            "connections_established": 0,
        },
    ]
    assert flag_not_one_query(rows) == ["low"]
    assert rows[0]["valid"] is False and rows[0]["flags"] == NOT_ONE_QUERY
    assert all(r["valid"] for r in rows[1:])


def test_a_population_taken_apart_sums_its_classes_beside_the_whole() -> None:
    """split_table: per part and the whole, CPU-µs per second of the window (answered qps ÷
    answered queries times the CPU-µs), medians over valid rounds; the classes' sum beside the
    whole; invalid rounds and other populations left out."""
    from dnscost.report.curves import split_table

    def row(group: str, rnd: int, measured: float, predicted: float, valid: str = "true") -> dict[str, str]:
        return {
            "id": f"{group}-dnsdist-population-r{rnd}", "target": "dnsdist", "rate_qps": "3000", "valid": valid,
            "answered_qps": "1000", "queries_answered": "2000", "measured_cpu_us": str(measured),
            "load_predicted_cpu_us": str(predicted), "load_error_pct": str(100 * (predicted / measured - 1)),
        }  # fmt: skip

    rows = [
        *(row("population_operator", r, 400_000 + r, 300_000) for r in range(3)),
        *(row("class_udp_rate_1e0", r, 100_000, 90_000) for r in range(3)),
        *(row("class_dot_persistent", r, 200_000, 150_000) for r in range(2)),
        row("class_dot_persistent", 2, 1, 1, valid="false"),
        row("population_doh", 0, 5, 5),
    ]
    text = split_table(rows)
    lines = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert lines == [
        "| dot-persistent | 1 000 | 2 | 100 000 | 75 000 | -25 % [-25 to -25] |",
        "| udp-rate-1e0 | 1 000 | 3 | 50 000 | 45 000 | -10 % [-10 to -10] |",
        "| the classes summed | | | 150 000 | 120 000 | -20 % |",
        "| the whole | 1 000 | 3 | 200 000 | 150 000 | -25 % [-25 to -25] |",
    ]
    assert split_table([r for r in rows if not r["id"].startswith("class_")]) == ""


def test_a_population_planned_from_its_toml_is_set_beside_its_replays() -> None:
    """planned_table: per planned rate, the replays' CPU-µs per second (median, range over valid
    rounds) beside the plan's figure and interval, the error on the median and per round; a rate
    with no valid replay, and other groups' rows, left out."""
    from dnscost.report.curves import planned_table

    def row(
        rate: int, rnd: int, measured: float, valid: str = "true", group: str = "population_mobile"
    ) -> dict[str, str]:
        return {
            "id": f"{group}-dnsdist-population-q{rate}-r{rnd}", "rate_qps": str(rate), "valid": valid,
            "answered_qps": str(rate), "queries_answered": str(2 * rate), "measured_cpu_us": str(2 * measured),
        }  # fmt: skip

    rows = [row(1000, 0, 50_000), row(1000, 1, 40_000), row(1000, 2, 60_000), row(3000, 0, 1, valid="false")]
    rows.append(row(1000, 3, 1, group="population_operator"))
    table = planned_table(
        rows, "population_mobile", {1000.0: (45_000.0, 40_000.0, 52_000.0), 3000.0: (1.0, None, None)}
    )
    assert table.splitlines()[2:] == [
        "| 1 000 | 3 | 50 000 [40 000 to 60 000] | 45 000 | 40 000 to 52 000 | -10 % [-25 to +12] |"
    ]
    assert planned_table(rows, "population_mobile", {3000.0: (1.0, None, None)}) == ""
