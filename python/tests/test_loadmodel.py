"""The load model (:mod:`dnscost.analysis.loadmodel`): trials made by the law it assumes (a cost
per event when the target is busy, a wake-up cost per event that finds it idle, and what a
wake-up after a long idle period adds, the idle share solved with the CPU it sets) give back
their costs; its prediction is the law's fixed point; its hold-out error beats the constant cost
model's on them; the share of long idle periods is what independent arrivals give."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from dnscost.analysis.costmodel import fit_transports
from dnscost.analysis.loadmodel import (
    LONG_GAP_US,
    busy_share,
    events,
    fit_load,
    gap_share,
    holdout_errors_pct,
    load_terms,
    price,
    solve_cpu,
    solve_mix,
)

B = {"query": 5.0, "full_handshake": 300.0}
"""What a query and a full handshake cost a busy target, CPU-µs."""
A = {"query": 12.0, "full_handshake": 200.0}
"""What a wake-up adds to each when it finds the target idle."""
LONG = 20.0
"""What a wake-up adds when the idle period before it was longer than LONG_GAP_US."""
SECONDS = 2.0


def _law(queries: float, full: float, seconds: float = SECONDS) -> float:
    """The CPU-µs the law gives: the cpu with cpu = B + (A + LONG x exp(-rate x gap))
    (1 - min(1, cpu / C)), found by bisection (not by the module's closed form, which is what is
    under test)."""
    capacity = seconds * 1e6
    busy = queries * B["query"] + full * B["full_handshake"]
    long_share = math.exp(-(queries + full) / seconds * LONG_GAP_US * 1e-6)
    wake = queries * A["query"] + full * A["full_handshake"] + (queries + full) * LONG * long_share
    low, high = busy, busy + wake
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if busy + wake * (1 - min(1.0, mid / capacity)) > mid else (low, mid)
    return (low + high) / 2


def _row(i: int, transport: str, queries: float, full: float, noise: float) -> dict[str, Any]:
    cpu = _law(queries, full) * noise
    return {
        "id": f"t{i}",
        "target": "x",
        "transport": transport,
        "kind": "load",
        "analysis": "curve",
        "cert_key": None,
        "valid": True,
        "measured_s": SECONDS,
        "queries_answered": queries,
        "handshakes_full": full if transport != "tcp" else 0.0,
        "handshakes_resumed": 0.0,
        "connections_established": full,
        "connection_seconds": 0.0,
        "target_cpu_us": cpu,
        "target_cpu_share": cpu / (SECONDS * 1e6),
    }


def _rows(seed: int = 1) -> list[dict[str, Any]]:
    """Ladders from 1 % of capacity to saturation, 3 rounds, 2 % noise: UDP, persistent TCP, and
    one query per TCP connection (a handshake per query)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(3):
        for share in (0.01, 0.025, 0.063, 0.16, 0.4, 1.0):
            queries = share * SECONDS * 1e6 / B["query"]
            rows.append(_row(len(rows), "udp", queries, 0.0, rng.uniform(0.98, 1.02)))
            rows.append(_row(len(rows), "tcp", queries, 0.0, rng.uniform(0.98, 1.02)))
            one = share * SECONDS * 1e6 / (B["query"] + B["full_handshake"])
            rows.append(_row(len(rows), "tcp", one, one, rng.uniform(0.98, 1.02)))
    return rows


def test_trials_made_by_the_law_give_back_its_costs() -> None:
    fits = {f.transport: f for f in fit_load(_rows())}
    udp, tcp = fits["udp"], fits["tcp"]
    assert udp.terms == load_terms("udp") == ("query", "query_wake", "long_wake")
    got = dict(zip(udp.terms, udp.estimates, strict=True))
    assert got["query"] == pytest.approx(B["query"], rel=0.05)
    assert got["query_wake"] == pytest.approx(A["query"], rel=0.1)
    assert got["long_wake"] == pytest.approx(LONG, rel=0.15)
    assert udp.boot is not None
    k = udp.terms.index("query_wake")
    low, high = udp.boot.low[k], udp.boot.high[k]
    assert low is not None and high is not None and low <= A["query"] <= high
    got = dict(zip(tcp.terms, tcp.estimates, strict=True))
    # Every TCP connection carries one query: the two events are one, so only their sums are
    # identified (the fit says so rather than splitting them).
    assert (
        got["query"] is None
        or got["full_handshake"] is None
        or (got["query"] + got["full_handshake"] == pytest.approx(B["query"] + B["full_handshake"], rel=0.05))
    )


def test_the_prediction_is_the_laws_fixed_point() -> None:
    coefficients = {"query": B["query"], "query_wake": A["query"], "long_wake": LONG}
    capacity = SECONDS * 1e6
    for queries in (1_000.0, 20_000.0, 150_000.0, 399_000.0):
        cpu = solve_cpu(coefficients, {"query": queries}, capacity)
        assert cpu is not None
        assert cpu == pytest.approx(_law(queries, 0.0), rel=1e-9)
        u = cpu / capacity
        g = gap_share(queries / SECONDS)
        assert cpu == pytest.approx(queries * (B["query"] + (A["query"] + LONG * g) * (1 - u)), rel=1e-9)
    # Beyond what the cores serve, every event finds the target busy.
    assert solve_cpu(coefficients, {"query": 500_000.0}, capacity) == 500_000.0 * B["query"]
    # A query at 1 % of capacity (2 000 a second: two thirds of the idle periods are long) costs
    # about B + A + 2/3 LONG (the target is busy 6 % of the time), against B at saturation.
    queries = 0.01 * capacity / B["query"]
    low = solve_cpu(coefficients, {"query": queries}, capacity)
    assert low is not None and 25 < low / queries < B["query"] + A["query"] + LONG
    # A term counted without a coefficient leaves no prediction.
    assert solve_cpu({"query": 5.0}, {"query": 10.0}, capacity) is None


def test_long_idle_periods_are_those_independent_arrivals_leave() -> None:
    """gap_share against a simulation: a server that takes no time, queries arriving at random
    (exponential gaps); the share of its idle periods longer than LONG_GAP_US."""
    rng = random.Random(7)
    for rate in (500.0, 5_000.0, 20_000.0):
        gaps = [rng.expovariate(rate) * 1e6 for _ in range(20_000)]
        simulated = sum(g > LONG_GAP_US for g in gaps) / len(gaps)
        assert gap_share(rate) == pytest.approx(simulated, abs=0.01)
    assert gap_share(0.0) == 1.0 and gap_share(1e7) < 1e-9


def test_a_mix_shortens_each_parts_idle_periods() -> None:
    """A trickle of UDP alone wakes the target after long idle periods; beside a busier mix the
    same queries find shorter ones and cost less each (the classes alone cost more than their
    whole: docs/population.md)."""
    fits = {f.transport: f for f in fit_load(_rows())}
    trickle = {"query": 1_000.0}
    alone = price(fits["udp"], trickle, gap_share(events(trickle) / SECONDS))
    beside = price(fits["udp"], trickle, gap_share((events(trickle) + 60_000.0) / SECONDS))
    assert alone.missing is None and beside.missing is None
    assert alone.busy == beside.busy and alone.wake > 1.3 * beside.wake


def test_shares_of_a_mix_share_one_busy_share() -> None:
    """Two transports priced apart and solved together: the idle share is the one that makes
    their CPU add up to itself, not each one's alone."""
    fits = {f.transport: f for f in fit_load(_rows())}
    capacity = SECONDS * 1e6
    udp = price(fits["udp"], {"query": 50_000.0})
    alone, _ = solve_mix([udp], capacity)
    tcp = price(fits["tcp"], {"query": 1_000.0, "full_handshake": 1_000.0}, gap_share(52_000.0 / SECONDS))
    idle, draws = solve_mix([udp, tcp], capacity)
    assert udp.missing is None and tcp.missing is None
    assert 0 < idle < alone < 1
    total = sum(p.busy + p.wake * idle for p in (udp, tcp))
    assert 1 - total / capacity == pytest.approx(idle, rel=1e-9)
    assert draws.shape == (1000,) and abs(float(draws.mean()) - idle) < 0.05


def test_its_holdout_error_beats_the_constant_models_on_a_ladder() -> None:
    rows = [r for r in _rows() if r["transport"] == "udp"]
    load, constant = holdout_errors_pct(rows, "udp")
    assert len(load) == len(constant) == len(rows)
    assert max(load) < 6 and sorted(constant)[len(constant) // 2] > 30


def test_the_busy_share_is_of_the_targets_cores() -> None:
    assert busy_share({"target_cpu_share": 0.5}) == 0.5
    assert busy_share({"target_cpu_share": 1.5, "target_cores": 2}) == 0.75
    assert busy_share({"target_cpu_share": 1.2}) == 1.0


def test_a_run_without_busy_shares_has_no_load_fit() -> None:
    rows = _rows()
    for r in rows:
        r["target_cpu_share"] = None
    assert fit_load(rows) == []
    assert {f.transport for f in fit_transports(rows)} == set()  # ladders are not the constant model's
