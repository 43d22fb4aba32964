"""Analysis of stored runs: the statistics, the derived tables of the synthetic fixture against
the costs it was made from, and golden CSVs.

The fixture ``fixtures/runs/synthetic`` is written by ``fixtures/make_synthetic_run.py``. When
the analysis changes on purpose, regenerate the golden tables and review their diff::

    DNSCOST_REGOLD=1 .venv/bin/pytest python/tests/test_analysis.py
"""

from __future__ import annotations

import csv
import importlib.util
import itertools
import json
import math
import os
import re
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dnscost.analysis import COLUMNS, Analysis, analyze, headline, write_tables
from dnscost.analysis.stats import fit_line, fit_non_negative, leave_one_out_errors_pct, t_quantile
from dnscost.analysis.write import column_type
from dnscost.errors import UsageError

FIXTURES = Path(__file__).parent / "fixtures"
SYNTHETIC = FIXTURES / "runs" / "synthetic"
REGOLD = os.environ.get("DNSCOST_REGOLD") == "1"


def _load_maker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_synthetic_run", FIXTURES / "make_synthetic_run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKER = _load_maker()


@pytest.fixture(scope="module")
def synthetic() -> Analysis:
    return analyze(SYNTHETIC)


def rows(a: Analysis, table: str, **match: Any) -> list[dict[str, Any]]:
    return [r for r in a.tables[table].rows if all(r[k] == v for k, v in match.items())]


def one(a: Analysis, table: str, **match: Any) -> dict[str, Any]:
    found = rows(a, table, **match)
    assert len(found) == 1, (table, match, found)
    return found[0]


# --- statistics ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.706204736), (2, 4.302652730), (3, 3.182446305), (5, 2.570581836), (10, 2.228138852),
     (30, 2.042272456), (120, 1.979930405), (1e6, 1.959966)],
)  # fmt: skip
def test_t_quantile_matches_tables(df: float, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, rel=1e-6)


def test_t_quantile_is_symmetric_and_checks_its_arguments() -> None:
    assert t_quantile(0.5, 7) == pytest.approx(0.0, abs=1e-9)
    assert t_quantile(0.025, 4) == pytest.approx(-t_quantile(0.975, 4))
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError):
        t_quantile(0.9, 0)


def test_fit_line_recovers_an_exact_line_and_brackets_a_noisy_one() -> None:
    exact = fit_line([1, 2, 3, 4], [3, 5, 7, 9])
    assert exact is not None
    assert (exact.slope, exact.intercept, exact.r2) == pytest.approx((2.0, 1.0, 1.0))
    assert exact.ci95_low == pytest.approx(2.0) and exact.ci95_high == pytest.approx(2.0)

    rng = np.random.default_rng(7)
    x = np.linspace(100, 8000, 12)
    noisy = fit_line(list(x), list(20_480 * x + rng.normal(0, 100_000, len(x))))
    assert noisy is not None and noisy.ci95_low is not None and noisy.ci95_high is not None
    assert noisy.ci95_low < 20_480 < noisy.ci95_high
    # half-width = t(0.975, n-2) x standard error
    assert (noisy.ci95_high - noisy.slope) == pytest.approx(t_quantile(0.975, 10) * (noisy.slope_se or 0))


def test_fit_line_needs_two_distinct_points_and_three_for_an_interval() -> None:
    assert fit_line([1], [1]) is None
    assert fit_line([2, 2, 2], [1, 2, 3]) is None
    two = fit_line([1, 2], [1, 3])
    assert two is not None and two.slope == pytest.approx(2.0) and two.ci95_low is None


def test_fit_non_negative_skips_unused_columns_and_recovers_the_truth() -> None:
    rng = np.random.default_rng(3)
    x = rng.random((40, 3)) * [1e5, 1e3, 0.0]
    truth = np.array([8.0, 900.0, 0.0])
    y = x @ truth * (1 + rng.normal(0, 0.01, 40))
    fit = fit_non_negative(x.tolist(), y.tolist(), relative=True)
    assert fit is not None and fit.points == 40 and fit.rank == 2
    assert fit.coef[2] is None and fit.counted == [True, True, False]
    assert fit.coef[:2] == pytest.approx(truth[:2], rel=0.01)
    assert fit_non_negative([[0.0, 0.0]], [1.0]) is None
    assert fit_non_negative([], []) is None


def test_leave_one_out_errors_are_zero_on_exact_data_and_skip_zero_points() -> None:
    x = [[1.0, 0.0], [2.0, 1.0], [3.0, 1.0], [4.0, 3.0], [0.0, 0.0]]
    y = [2 * a + 5 * b for a, b in x]
    errors = leave_one_out_errors_pct(x, y)
    assert len(errors) == 4
    assert max(errors) == pytest.approx(0.0, abs=1e-9)


# --- the synthetic run -----------------------------------------------------------------------


def test_every_table_has_exactly_the_documented_columns(synthetic: Analysis) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "results.md").read_text()
    for name, table in synthetic.tables.items():
        assert table.columns == COLUMNS[name]
        assert all(list(r) == table.columns for r in table.rows), name
        line = next(line for line in doc.splitlines() if line.startswith(f"| `{name}` |"))
        documented = [c.strip() for c in re.sub(r"\s*\([^)]*\)", "", line.split("|")[3]).split(",")]
        if name == "latency":
            documented = [
                "target",
                "transport",
                "group",
                "analysis",
                "lifetime",
                "resumption",
                "early_data",
                "connections",
                *documented[1:],
            ]
        assert documented == table.columns, name


def test_trials_keeps_missing_failed_and_invalid_trials(synthetic: Analysis) -> None:
    trials = synthetic.tables["trials"]
    run = json.loads((SYNTHETIC / "run.json").read_text())
    assert [r["id"] for r in trials.rows] == [p["id"] for p in run["plan"]]
    missing, failed, invalid = (one(synthetic, "trials", id=i) for i in (MAKER.MISSING, MAKER.FAILED, MAKER.INVALID))
    assert (missing["status"], missing["valid"], missing["answered_qps"]) == ("interrupted", False, None)
    assert (failed["status"], failed["valid"], failed["target_cpu_us"]) == ("failed", False, None)
    assert (invalid["status"], invalid["valid"], invalid["flags"]) == ("done", False, "loss")
    assert sum(1 for r in trials.rows if not r["valid"]) == 3


def test_trials_row_reads_the_summary(synthetic: Analysis) -> None:
    tid = "establishment-dnsdist-dot-c1000-l1s-res1-r0"
    doc = json.loads((SYNTHETIC / "trials" / tid / "trial.json").read_text())
    s = doc["summary"]
    r = one(synthetic, "trials", id=tid)
    assert (r["lifetime"], r["resumption"], r["rate"], r["connections"]) == ("1s", 1.0, "max", 1000)
    assert r["handshakes_resumed"] == s["handshakes_resumed"] > 0 and r["handshakes_full"] == s["handshakes_full"] > 0
    assert r["softirq_us"] == s["meter"]["cores"]["0"]["softirq_us"]  # target core only
    assert r["rss_baseline_bytes"] == s["baseline_meter"]["rss_bytes_mean"]
    assert (r["latency_p99_us"], r["setup_p50_us"]) == (s["latency_us"]["p99_us"], s["setup_latency_us"]["p50_us"])
    assert r["target_version"] == "1.7.3"


def test_baseline_is_the_search_result(synthetic: Analysis) -> None:
    for target in MAKER.STUDY_TARGETS:
        b = one(synthetic, "baseline", target=target)
        assert b["udp_max_qps"] == MAKER.TARGETS[target]["udp_max_qps"] and b["valid"]
        assert b["loss"] == pytest.approx(0.002)


def test_memory_fit_recovers_bytes_per_connection_within_its_interval(synthetic: Analysis) -> None:
    assert len(synthetic.tables["memory_points"].rows) == 2 * 3 * len(MAKER.IDLE_CONNECTIONS)
    covered = []
    for target, transport in itertools.product(MAKER.STUDY_TARGETS, ("tcp", "dot", "doh")):
        fit = one(synthetic, "memory_fit", target=target, transport=transport)
        user, kernel = MAKER.memory(target, transport)
        covered.append(fit["user_ci95_low"] < user < fit["user_ci95_high"])
        covered.append(fit["kernel_ci95_low"] < kernel < fit["kernel_ci95_high"])
        assert fit["user_bytes_per_connection"] == pytest.approx(user, rel=0.02)
        assert fit["kernel_bytes_per_connection"] == pytest.approx(kernel, rel=0.02)
        assert (fit["points"], fit["max_connections"]) == (5, 8000)
        assert fit["user_r2"] > 0.999
    # 95 % intervals: with 12 of them, one may miss (this fixture: exactly one does)
    assert sum(covered) >= len(covered) - 1


def test_connections_leaves_the_invalid_repetition_out(synthetic: Analysis) -> None:
    r = one(synthetic, "connections", target="knot", transport="dot", connections=4000)
    assert (r["reps"], r["valid_reps"]) == (3, 2)
    valid = [t["answered_qps"] for t in rows(synthetic, "trials", group="connections", target="knot",
                                             transport="dot", connections=4000, valid=True)]  # fmt: skip
    assert (r["qps_min"], r["qps_max"], r["qps_median"]) == (min(valid), max(valid), float(np.median(valid)))
    base = one(synthetic, "baseline", target="knot")
    udp = [t["answered_qps"] for t in rows(synthetic, "trials", group="establishment", target="knot",
                                           transport="udp", valid=True)]  # fmt: skip
    # Shares of UDP divide by UDP at saturation (closed loop, like the other transports), in
    # each round by that round's UDP reference; the share is their median.
    assert base["udp_reference_qps"] == base["udp_saturation_qps"] == pytest.approx(float(np.median(udp)))
    by_round = {t["round"]: t["answered_qps"] for t in rows(synthetic, "trials", group="establishment",
                                                          target="knot", transport="udp", valid=True)}  # fmt: skip
    shares = [t["answered_qps"] / by_round[t["round"]] for t in rows(synthetic, "trials", group="connections",
              target="knot", transport="dot", connections=4000, valid=True)]  # fmt: skip
    assert len(shares) == 2 and r["share_of_udp"] == pytest.approx(float(np.median(shares)))


def test_establishment_counts_failed_and_missing_repetitions(synthetic: Analysis) -> None:
    failed = one(synthetic, "establishment", target="knot", transport="doh", lifetime="1q", resumption=0.0)
    missing = one(synthetic, "establishment", target="knot", transport="tcp", lifetime="1s", resumption=0.0)
    assert (failed["reps"], failed["valid_reps"]) == (3, 2)
    assert (missing["reps"], missing["valid_reps"]) == (3, 2)
    persistent = one(synthetic, "establishment", target="dnsdist", transport="dot", lifetime="forever")
    assert persistent["handshakes_per_s"] == 0
    per_second = one(synthetic, "establishment", target="dnsdist", transport="dot", lifetime="1s", resumption=0.0)
    assert per_second["handshakes_per_s"] == pytest.approx(1000)


def test_energy_follows_the_documented_formulas(synthetic: Analysis) -> None:
    udp = one(synthetic, "energy", target="dnsdist", transport="udp")
    assert udp["lifetime"] == "forever" and udp["energy_source"] == "model"
    j = udp["energy_j_per_query"]
    assert udp["kwh_per_day_at_10k_qps"] == pytest.approx(j * 10_000 * 86_400 / 3.6e6)
    assert udp["cores_at_10k_qps"] == pytest.approx(udp["cpu_us_per_query"] * 10_000 / 1e6)
    # the fixture's model: 10 W per busy core, so J per query = CPU seconds per query x 10
    assert j == pytest.approx(udp["cpu_us_per_query"] * 1e-6 * MAKER.MODEL_WATTS_PER_CORE, rel=1e-3)
    assert len(synthetic.tables["energy"].rows) == len(synthetic.tables["establishment"].rows)


def test_latency_is_the_median_over_valid_repetitions(synthetic: Analysis) -> None:
    r = one(synthetic, "latency", target="knot", transport="dot", group="connections", connections=4000)
    assert r["reps"] == 2
    assert len(synthetic.tables["latency"].rows) == 18 + 28 + 1 + len(MAKER.QUIC_ESTABLISHMENT)


def test_cost_model_recovers_the_costs_the_fixture_was_made_from(synthetic: Analysis) -> None:
    covered = []
    for target, transport in itertools.product(MAKER.STUDY_TARGETS, ("udp", "tcp", "dot", "doh")):
        truth = MAKER.cost(target, transport)
        terms = {r["term"]: r for r in rows(synthetic, "cost_model", target=target, transport=transport)}
        # Only the terms that apply: udp has only queries, tcp no resumption.
        assert set(terms) == {term for term, us in truth.items() if us > 0}
        for term, r in terms.items():
            us = truth[term]
            assert (r["status"], r["reason"]) == ("identified", None)
            assert r["us"] == pytest.approx(us, rel=0.03)
            if transport == "udp":
                # three trials for one term: too few for an interval
                assert r["ci95_low"] is None and r["ci95_high"] is None
                continue
            covered.append(r["ci95_low"] <= us <= r["ci95_high"])
        fit = one(synthetic, "cost_model_fit", target=target, transport=transport)
        assert fit["holdout_median_abs_error_pct"] < 2.0
        assert fit["terms_identified"] == fit["terms"] == len(terms)
        assert fit["resamples"] == (0 if transport == "udp" else 1000)
        if transport != "udp":
            assert fit["r2"] > 0.999
    # 95 % intervals: with 22 of them, one may miss (this fixture: knot's TCP handshake, by 0.2 %)
    assert len(covered) == 22 and sum(covered) >= len(covered) - 1


def test_cost_model_leaves_invalid_trials_out(synthetic: Analysis) -> None:
    fit = one(synthetic, "cost_model_fit", target="knot", transport="dot")
    used = [r for r in rows(synthetic, "trials", target="knot", transport="dot", valid=True) if r["kind"] != "search"]
    assert fit["trials"] == len(used) == 5 + 9 - 1 + 15


def test_headline(synthetic: Analysis) -> None:
    h = {x["target"]: x for x in headline(synthetic)}
    assert list(h) == ["dnsdist", "knot", "coredns"]
    d = h["dnsdist"]
    assert d["udp_max_qps"] == MAKER.TARGETS["dnsdist"]["udp_max_qps"]
    dot = one(synthetic, "establishment", target="dnsdist", transport="dot", lifetime="forever")
    p = d["persistent"]["dot"]
    assert (p["qps"], p["share_of_udp"], p["source"]) == (dot["qps_median"], dot["share_of_udp"], "establishment")
    # Every figure has its interval over the three rounds; the CPU ratio recovers the costs.
    assert p["cpu_ratio"].n == 3 and p["cpu_ratio"].low <= p["cpu_ratio"].median <= p["cpu_ratio"].high
    dot_cost, udp_cost = MAKER.cost("dnsdist", "dot"), MAKER.cost("dnsdist", "udp")
    expected = (dot_cost["query"] + dot_cost["connection_second"] * 1000 / p["qps"]) / udp_cost["query"]
    assert p["cpu_ratio"].median == pytest.approx(expected, rel=0.03)
    full = d["handshake_us"]["dot"]["full"]
    assert full.n == 3 and full.median == pytest.approx(dot_cost["full_handshake"], rel=0.05)
    # A third of dnsdist's reconnections could not resume: their full handshakes are not charged
    # to the resumed ones.
    resumed = d["handshake_us"]["dot"]["resumed"]
    assert resumed.n == 3 and resumed.median == pytest.approx(dot_cost["resumed_handshake"], rel=0.05)
    # Idle connections: CPU per connection-second, fitted over the memory trials.
    idle = d["memory_per_connection"]["dot"]["cpu_us_per_connection_second"]
    assert idle.n == 5 and idle.low <= dot_cost["connection_second"] <= idle.high
    q1 = one(synthetic, "establishment", target="dnsdist", transport="dot", lifetime="1q", resumption=0.0)
    assert d["collapse_1q"]["dot"]["ratio"] == pytest.approx(q1["qps_median"] / dot["qps_median"])
    assert d["collapse_1q"]["dot"]["ratio_resumed"] > d["collapse_1q"]["dot"]["ratio"]
    assert d["memory_per_connection"]["doh"]["user_bytes"] == pytest.approx(30_720, rel=0.02)
    assert [e["transport"] for e in d["energy"]][:2] == ["udp", "tcp"]


def test_quic_cells_of_another_group_feed_figure_5_with_0rtt_apart(synthetic: Analysis) -> None:
    # coredns's DoQ trials are in group quic_establishment, read by the establishment analysis.
    cells = rows(synthetic, "establishment", target="coredns", transport="doq")
    assert sorted((r["lifetime"], r["resumption"], r["early_data"]) for r in cells) == sorted(MAKER.QUIC_ESTABLISHMENT)
    # Of the resumed handshakes, every one sent 0-RTT data and the target took it.
    share = {(r["resumption"], r["early_data"]): r["zero_rtt_share"] for r in cells if r["lifetime"] == "1q"}
    assert share == {(0.0, 0.0): None, (1.0, 0.0): None, (1.0, 1.0): 1.0}
    # The handshake costs the fixture was made from, 0-RTT's apart from the resumed one's.
    doq = next(x for x in headline(synthetic) if x["target"] == "coredns")["handshake_us"]["doq"]
    cost = MAKER.cost("coredns", "doq")
    assert doq["full"].median == pytest.approx(cost["full_handshake"], rel=0.05)
    assert doq["resumed"].median == pytest.approx(cost["resumed_handshake"], rel=0.05)
    assert doq["zero_rtt"].n == 3 and doq["zero_rtt"].median == pytest.approx(MAKER.ZERO_RTT_US, rel=0.05)
    # 0-RTT, dearer here than a plain resumption (cheaper than a full handshake), is flagged
    # against it, the one contradiction of coredns's cells.
    assert [(r["flag"], r["cell"], r["against"]) for r in rows(synthetic, "consistency", target="coredns")] == [
        ("inconsistent-resumption", "coredns doq 1q resumption 1 0-RTT 1", "coredns doq 1q resumption 1")
    ]


def test_headline_falls_back_to_the_connections_table(tmp_path: Path) -> None:
    run = json.loads((SYNTHETIC / "run.json").read_text())
    run["plan"] = [p for p in run["plan"] if p["group"] != "establishment"]
    shutil.copytree(SYNTHETIC / "trials", tmp_path / "trials")
    (tmp_path / "run.json").write_text(json.dumps(run))
    a = analyze(tmp_path)
    smallest = one(a, "connections", target="knot", transport="doh", connections=100)
    knot = next(x for x in headline(a) if x["target"] == "knot")
    assert knot["persistent"]["doh"]["source"] == "connections"
    assert knot["persistent"]["doh"]["qps"] == smallest["qps_median"]
    assert knot["collapse_1q"] == {}


def test_not_a_run_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no run\.json"):
        analyze(tmp_path)
    (tmp_path / "run.json").write_text('{"format_version": 1, "trials": []}')
    with pytest.raises(UsageError, match="no plan"):
        analyze(tmp_path)


def test_unreadable_trial_json_is_kept_as_unreadable(tmp_path: Path) -> None:
    shutil.copytree(SYNTHETIC, tmp_path / "run", ignore=shutil.ignore_patterns("golden"))
    tid = "baseline-knot-udp-r0"
    (tmp_path / "run" / "trials" / tid / "trial.json").write_text("{")
    a = analyze(tmp_path / "run")
    assert one(a, "trials", id=tid)["status"] == "unreadable"
    base = one(a, "baseline", target="knot")
    assert base | {"udp_saturation_qps": None, "udp_reference_qps": None} == {
        "target": "knot", "udp_max_qps": None, "offered_qps": None, "loss": None, "cpu_us_per_query": None,
        "valid": False, "udp_saturation_qps": None, "udp_reference_qps": None,
    }  # fmt: skip
    # Without its search, the reference is UDP at saturation.
    assert base["udp_reference_qps"] == base["udp_saturation_qps"] is not None


# --- writing and golden tables -----------------------------------------------------------------


def _cells_equal(got: str, want: str) -> bool:
    if got == want:
        return True
    try:
        return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-12)
    except ValueError:
        return False


@pytest.mark.parametrize("run", ["synthetic", "quick"])
def test_written_tables_match_the_golden_csvs(run: str, tmp_path: Path) -> None:
    """The synthetic run, and a real one: `dnscost reproduce --quick` on this project's 2-core
    VM, stored without its raw data (run.json and trial.json only)."""
    directory = FIXTURES / "runs" / run
    written = write_tables(analyze(directory), tmp_path)
    assert sorted(p.name for p in written) == sorted(f"{n}.{e}" for n in COLUMNS for e in ("csv", "parquet"))
    golden = directory / "golden"
    if REGOLD:
        golden.mkdir(exist_ok=True)
        for name in COLUMNS:
            shutil.copy(tmp_path / f"{name}.csv", golden / f"{name}.csv")
    for name in COLUMNS:
        got = list(csv.reader((tmp_path / f"{name}.csv").open()))
        want = list(csv.reader((golden / f"{name}.csv").open()))
        assert got[0] == want[0] == COLUMNS[name]
        assert len(got) == len(want), f"{name}: {len(got)} rows, golden has {len(want)} (DNSCOST_REGOLD=1 to update)"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert all(_cells_equal(a, b) for a, b in zip(g, w, strict=True)), f"{name} row {i}: {g} != {w}"


def test_parquet_and_csv_hold_the_same_table(synthetic: Analysis, tmp_path: Path) -> None:
    write_tables(synthetic, tmp_path)
    for name in COLUMNS:
        table = pq.read_table(tmp_path / f"{name}.parquet")
        assert table.column_names == COLUMNS[name]
        assert table.to_pylist() == synthetic.tables[name].rows
    trials = pq.read_table(tmp_path / "trials.parquet").to_pylist()
    assert [r["id"] for r in trials] == [r["id"] for r in synthetic.tables["trials"].rows]
    assert {str(f.type) for f in pq.read_table(tmp_path / "trials.parquet").schema if f.name == "rate"} == {"string"}


def test_column_types_do_not_depend_on_which_values_are_present() -> None:
    assert column_type("softirq_us", [None, None]) == pa.float64()
    assert column_type("valid", [None]) == pa.bool_()
    assert column_type("rate", ["max", None]) == pa.string()
    assert column_type("target_version", [None]) == pa.string()
    assert column_type("connections", [1, None, 3]) == pa.int64()
    assert column_type("qps_median", [1, 2.5]) == pa.float64()


def test_real_clients_replayed_cost_what_their_shape_costs(synthetic: Analysis) -> None:
    """The clients table: per profile, the target's CPU per query is its query cost plus the
    handshakes and the connection-seconds its clients spend per query (the fixture's cost
    model), beside the round's UDP reference; energy for a day at 10 000 qps; how many clients
    make 10 000 qps. Replays are kept out of the cost model's fit, latency and wire tables."""
    c = MAKER.COST
    stub, browser = (one(synthetic, "clients", profile=p) for p in ("stub-60s", "browser-1s"))
    # stub: 100 qps, a full DoT handshake per query, 3 000 connections held a second each.
    stub_us = c["dot"]["query"] + c["dot"]["full_handshake"] + c["dot"]["connection_second"] * 3000 / 100
    browser_us = c["doh"]["query"] + c["doh"]["connection_second"] * 5000 / 10_000
    assert stub["cpu_us_per_query"] == pytest.approx(stub_us, rel=0.05)
    assert browser["cpu_us_per_query"] == pytest.approx(browser_us, rel=0.05)
    assert stub["cpu_us_per_query_min"] <= stub["cpu_us_per_query"] <= stub["cpu_us_per_query_max"]
    assert stub["cpu_ratio_to_udp"] == pytest.approx(stub_us / c["udp"]["query"], rel=0.08)
    assert (stub["reps"], stub["valid_reps"], browser["valid_reps"]) == (3, 3, 3)
    assert (stub["clients_at_10k_qps"], browser["clients_at_10k_qps"]) == (600_000, 5_000)
    assert (stub["handshakes_per_1k_queries"], browser["handshakes_per_1k_queries"]) == (1000.0, 0.0)
    kwh = stub_us * 1e-6 * MAKER.MODEL_WATTS_PER_CORE * 10_000 * 86_400 / 3.6e6
    assert stub["kwh_per_day_at_10k_qps"] == pytest.approx(kwh, rel=0.05)
    assert not rows(synthetic, "latency", group="clients")
    assert not any(r["connections"] in (3000, 5000) for r in rows(synthetic, "wire", target="dnsdist"))


def test_not_persistent_by_either_observer() -> None:
    """A persistent trial is not persistent when the engine opened connections in its window,
    or when the kernel accepted them (over TCP: beyond KERNEL_ACCEPT_NOISE of others' accepts);
    a QUIC trial's TCP count says nothing of it."""
    from dnscost.analysis.consistency import flag_not_persistent

    def row(tid: str, transport: str, engine: float | None, kernel: float | None) -> dict[str, object]:
        return {
            "id": tid, "transport": transport, "lifetime": "forever", "status": "done", "connections": 1000,
            "connections_established": engine, "kernel_passive_opens": kernel, "flags": "", "valid": True,
        }  # fmt: skip

    rows = [
        row("engine", "dot", 240, 0),  # the engine gave up handshakes and opened them again
        row("kernel", "doh", 0, 300),  # the engine did not see what the target accepted
        row("noise", "tcp", 0, 19),  # 10 allowed (1 %), and 10 accepted for others
        row("quic", "doq", 0, 500),  # not a TCP transport: the kernel's count is not its
        row("old", "dot", 0, None),  # a run measured before the kernel's count was kept
    ]
    assert flag_not_persistent(rows) == ["engine", "kernel"]
    assert [(r["valid"], r["flags"]) for r in rows] == [
        (False, "not-persistent"), (False, "not-persistent"), (True, ""), (True, ""), (True, ""),
    ]  # fmt: skip


def _idle_point(target: str, held: int, user: float, kernel: float, valid: bool = True) -> dict[str, Any]:
    return {
        "target": target,
        "transport": "dot",
        "connections": held,
        "connections_held": held,
        "rss_delta_bytes": user,
        "kernel_delta_bytes": kernel,
        "tcp_delta_bytes": None,
        "valid": valid,
    }


def test_memory_scale_checks_the_line_against_its_largest_point() -> None:
    from dnscost.analysis.tables import MILLION, memory_scale_rows

    # A straight target: 30 000 bytes a connection (user 20 000, kernel 10 000) over 1 MB.
    straight = [_idle_point("a", n, 1e6 + 2e4 * n, 1e4 * n) for n in (1000, 10_000, 40_000, 100_000)]
    # One whose memory bends up past 40 000 (twice the bytes per connection beyond it), and an
    # invalid point left out.
    bent = [
        _idle_point("b", n, 3e4 * n + (3e4 * (n - 40_000) if n > 40_000 else 0), 0.0)
        for n in (1000, 10_000, 40_000, 100_000)
    ]
    bent.append(_idle_point("b", 70_000, 1.0, 1.0, valid=False))
    rows = {r["target"]: r for r in memory_scale_rows(straight + bent + straight[:2])}
    a, b = rows["a"], rows["b"]
    assert a["points"] == 6  # the two repeated are points too
    assert a["bytes_per_connection"] == pytest.approx(3e4)
    assert a["r2"] == pytest.approx(1.0) and a["max_residual_share"] == pytest.approx(0.0, abs=1e-9)
    assert a["holdout_predicted_bytes"] == pytest.approx(a["holdout_measured_bytes"])
    assert a["holdout_within"] is True and a["holdout_error"] == pytest.approx(0.0, abs=1e-9)
    assert a["million_bytes"] == pytest.approx(1e6 + 3e4 * MILLION)
    # The bend: the holdout (three points up to 40 000) predicts 3.0 GB at 100 000 where 4.8 GB
    # were measured, outside its interval; the line through all four is off at every point.
    assert b["points"] == 4 and b["max_connections"] == 100_000
    assert b["holdout_predicted_bytes"] == pytest.approx(3e9, rel=1e-9)
    assert b["holdout_measured_bytes"] == pytest.approx(4.8e9)
    assert b["holdout_error"] == pytest.approx(3e9 / 4.8e9 - 1)
    assert b["holdout_within"] is False
    assert b["r2"] < 1 and b["max_residual_share"] > 0.05
    assert [part.split(":")[0] for part in b["residuals"].split("/")] == ["1000", "10000", "40000", "100000"]
    # Fewer than three valid points: no row.
    assert memory_scale_rows(straight[:2]) == []
