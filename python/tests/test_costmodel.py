"""The cost model on synthetic trials with known costs: a design that separates the terms gives
them back with bootstrap intervals that cover them; designs that cannot separate them say
"not identified", never 0."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from dnscost.analysis.costmodel import cost_model_rows, predict_cpu_us
from dnscost.analysis.stats import bootstrap_non_negative, fit_non_negative

Row = dict[str, Any]

DOT = {"query": 9.0, "full_handshake": 600.0, "resumed_handshake": 180.0, "connection_second": 1.5}
"""Target CPU-µs per answered query, full handshake, resumed handshake, connection-second."""


def _trial(transport: str, kind: str, q: float, full: float, resumed: float, conn_s: float, cpu: float) -> Row:
    return {
        "target": "t",
        "transport": transport,
        "kind": kind,
        "valid": True,
        "cert_key": None,
        "queries_answered": q,
        "connections_established": full + resumed,
        "handshakes_full": full,
        "handshakes_resumed": resumed,
        "connection_seconds": conn_s,
        "target_cpu_us": cpu,
    }


def _cpu(cost: dict[str, float], q: float, full: float, resumed: float, conn_s: float) -> float:
    return (
        cost["query"] * q
        + cost["full_handshake"] * full
        + cost["resumed_handshake"] * resumed
        + cost["connection_second"] * conn_s
    )


def designed(cost: dict[str, float], rng: np.random.Generator, noise: float = 0.02, seconds: float = 5.0) -> list[Row]:
    """The study's cost-model design for one transport: idle connections held at several counts,
    queries at several rates on 10 persistent connections, and one query per connection at
    several connection rates with TLS resumption off and on (a resuming client's first
    connection is full); two repetitions, CPU times with ``noise`` relative error."""
    points: list[tuple[str, float, float, float, float]] = []
    for c in (1000, 4000, 8000, 16000):
        points.append(("idle", 0.0, 0.0, 0.0, c * seconds))
    for qps in (2000, 5000, 10000):
        points.append(("load", qps * seconds, 0.0, 0.0, 10 * seconds))
    for rate in (200, 600, 1000):
        n = rate * seconds
        points.append(("load", n, n, 0.0, 20 * seconds))
        points.append(("load", n, 0.1 * n, 0.9 * n, 20 * seconds))
    return [
        _trial("dot", kind, q, f, r, s, _cpu(cost, q, f, r, s) * (1 + rng.normal(0, noise)))
        for _ in range(2)
        for kind, q, f, r, s in points
    ]


def terms(rows: list[Row]) -> dict[str, Row]:
    return {r["term"]: r for r in cost_model_rows(rows)[0]}


def test_a_design_that_separates_the_terms_recovers_them_within_intervals_that_cover_them() -> None:
    covered, total = 0, 0
    for seed in range(20):
        rows = designed(DOT, np.random.default_rng(seed))
        got = terms(rows)
        assert set(got) == set(DOT)
        for term, us in DOT.items():
            r = got[term]
            assert (r["status"], r["reason"]) == ("identified", None), (seed, r)
            assert r["us"] == pytest.approx(us, rel=0.1), (seed, r)
            assert r["ci95_low"] < r["us"] < r["ci95_high"]
            covered += r["ci95_low"] <= us <= r["ci95_high"]
            total += 1
        (fit,) = cost_model_rows(rows)[1]
        assert fit["terms_identified"] == fit["terms"] == 4
        assert fit["holdout_trials"] == fit["trials"] == len(rows)
        assert fit["holdout_median_abs_error_pct"] < 5.0
    # 95 % intervals: 80 of them, about 4 may miss; a bootstrap over 26 trials runs a little short
    assert covered >= 0.85 * total, f"{covered} of {total} intervals cover the truth"


def test_one_query_per_connection_alone_cannot_separate_queries_from_handshakes() -> None:
    """Every trial with connections opens one per query: the query and handshake columns are
    the same, the design is rank-deficient for both; idle trials still pin the connection-second."""
    rng = np.random.default_rng(1)
    tcp = {"query": 8.0, "full_handshake": 50.0, "connection_second": 1.0}
    rows = [
        _trial("tcp", "load", n, n, 0.0, 20.0, (58.0 * n + 20.0) * (1 + rng.normal(0, 0.02)))
        for n in (1000, 3000, 5000, 1000, 3000, 5000)
    ] + [_trial("tcp", "idle", 0.0, 0.0, 0.0, s, s * (1 + rng.normal(0, 0.02))) for s in (5000, 20000, 40000)]
    got = terms(rows)
    assert set(got) == set(tcp)
    for term in ("query", "full_handshake"):
        r = got[term]
        assert (r["us"], r["status"]) == (None, "not identified")
        other = "full_handshake" if term == "query" else "query"
        assert r["reason"] == f"confounded with {other} (rank-deficient design)"
    assert got["connection_second"]["status"] == "identified"
    assert got["connection_second"]["us"] == pytest.approx(1.0, rel=0.1)
    (fit,) = cost_model_rows(rows)[1]
    assert (fit["terms"], fit["terms_identified"]) == (3, 1)
    # no trial left out can be predicted from the rest unless the rest pin its mix of terms
    assert fit["holdout_trials"] == len(rows)


def test_nearly_collinear_counts_are_not_identified_and_never_zero() -> None:
    """Full rank, but barely: queries exceed handshakes by 0.1 %. The bootstrap shows that the
    trials cannot split the cost between the two."""
    rng = np.random.default_rng(2)
    rows = []
    for n in (1000, 2000, 3000, 4000, 5000, 6000) * 2:
        q = n * (1 + 0.001 * rng.random())
        rows.append(_trial("tcp", "load", q, n, 0.0, 0.0, (8.0 * q + 50.0 * n) * (1 + rng.normal(0, 0.02))))
    got = terms(rows)
    assert got["connection_second"]["reason"] == "no valid trial counts it"
    for term in ("query", "full_handshake"):
        assert got[term]["status"] == "not identified", got[term]
        assert got[term]["us"] is None
    assert all(r["us"] != 0 for r in got.values())


def test_a_term_the_trials_cannot_tell_from_zero_is_not_identified() -> None:
    """A connection-second that costs nothing, counted only in load trials where it is lost in
    the noise of the queries: its interval starts at 0 and the estimate is not reported."""
    cost = {**DOT, "connection_second": 0.0}
    rng = np.random.default_rng(3)
    rows = [r for r in designed(cost, rng) if r["kind"] == "load"]
    got = terms(rows)
    cs = got["connection_second"]
    assert (cs["us"], cs["status"]) == (None, "not identified")
    assert cs["ci95_low"] == 0.0 and cs["reason"].startswith("95 % interval from 0 to ")
    for term in ("query", "full_handshake", "resumed_handshake"):
        assert got[term]["status"] == "identified"


def test_terms_that_do_not_apply_are_not_rows_and_unexercised_ones_say_so() -> None:
    rows = [_trial("udp", "load", q, 0.0, 0.0, 0.0, 5.0 * q) for q in (1e4, 2e4, 3e4, 4e4, 5e4)]
    rows += [_trial("dot", "load", q, 0.0, 0.0, 100.0, 9.0 * q + 150.0) for q in (1e4, 2e4, 3e4, 4e4, 5e4, 6e4)]
    out = cost_model_rows(rows)[0]
    assert [(r["transport"], r["term"]) for r in out if r["transport"] == "udp"] == [("udp", "query")]
    dot = {r["term"]: r for r in out if r["transport"] == "dot"}
    for term in ("full_handshake", "resumed_handshake"):
        assert (dot[term]["us"], dot[term]["reason"]) == (None, "no valid trial counts it")
    assert dot["query"]["us"] == pytest.approx(9.0)


def test_fewer_trials_than_terms_plus_three_give_estimates_without_intervals() -> None:
    rows = [_trial("udp", "load", q, 0.0, 0.0, 0.0, 5.0 * q) for q in (1e4, 2e4, 3e4)]
    (r,) = cost_model_rows(rows)[0]
    assert r["us"] == pytest.approx(5.0) and r["ci95_low"] is None and r["status"] == "identified"
    assert cost_model_rows(rows)[1][0]["resamples"] == 0


def test_invalid_and_search_trials_are_left_out() -> None:
    rows = [_trial("udp", "load", q, 0.0, 0.0, 0.0, 5.0 * q) for q in (1e4, 2e4, 3e4, 4e4)]
    rows.append({**_trial("udp", "load", 1e4, 0.0, 0.0, 0.0, 1e9), "valid": False})
    rows.append({**_trial("udp", "search", 1e4, 0.0, 0.0, 0.0, 1e9)})
    (r,) = cost_model_rows(rows)[0]
    assert r["us"] == pytest.approx(5.0)
    assert cost_model_rows(rows)[1][0]["trials"] == 4


def test_the_bootstrap_is_seeded_and_its_interval_holds_the_estimate() -> None:
    rng = np.random.default_rng(4)
    x = rng.random((20, 2)) * [1e4, 1e3]
    y = x @ [3.0, 40.0] * (1 + rng.normal(0, 0.02, 20))
    a = bootstrap_non_negative(x.tolist(), y.tolist(), relative=True, resamples=200, seed=9)
    b = bootstrap_non_negative(x.tolist(), y.tolist(), relative=True, resamples=200, seed=9)
    assert a == b and a is not None and a.identified_share == [1.0, 1.0]
    fit = fit_non_negative(x.tolist(), y.tolist(), relative=True)
    assert fit is not None
    for k in range(2):
        low, high, coef = a.low[k], a.high[k], fit.coef[k]
        assert low is not None and high is not None and coef is not None and low < coef < high


def test_prediction_needs_every_term_it_counts() -> None:
    coefficients: dict[str, float | None] = {"query": 2.0, "full_handshake": None, "connection_second": 0.5}
    assert predict_cpu_us(coefficients, {"queries_answered": 10, "connection_seconds": 4}) == 22.0
    assert predict_cpu_us(coefficients, {"queries_answered": 10, "handshakes_full": 1}) is None
