"""The page-load analysis on synthetic records: what is paired (a page's median per transport
and round, against the baseline's in the same round), the CDF, the median's order-statistic
interval, failures and DNS times per transport, and the figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dnscost.clientside.pageload_analysis import cdf, compare, draw_figure, median_interval, pairs, read_loads
from scipy.stats import binom


def _rec(preset: str, transport: str, rnd: int, page: int, ms: float | None, **kw: Any) -> dict[str, Any]:
    ok = kw.pop("ok", ms is not None)
    return {"preset": preset, "transport": transport, "round": rnd, "page": page, "warmup": kw.pop("warmup", False),
            "ok": ok, "failure": kw.pop("failure", None if ok else "timeout"),
            "page_load_us": None if ms is None else round(ms * 1000), "lookups_us": kw.pop("lookups", {})}  # fmt: skip


def test_pairs_are_a_page_s_medians_in_one_round_against_the_baseline_s() -> None:
    records = [
        # Round 0, page 1: two loads per transport; the medians are 150 and 230.
        _rec("lte", "do53", 0, 1, 100), _rec("lte", "do53", 0, 1, 200),
        _rec("lte", "doh", 0, 1, 210), _rec("lte", "doh", 0, 1, 250),
        _rec("lte", "dot", 0, 1, 140), _rec("lte", "dot", 0, 1, 150),
        # Round 1, page 1: one load each; page 2: DoH failed, not paired.
        _rec("lte", "do53", 1, 1, 300), _rec("lte", "doh", 1, 1, 290), _rec("lte", "dot", 1, 1, 330),
        _rec("lte", "do53", 1, 2, 400), _rec("lte", "doh", 1, 2, None), _rec("lte", "dot", 1, 2, 410),
        # Warm-ups are never paired; another preset is its own.
        _rec("lte", "do53", 1, 2, 1.0, warmup=True), _rec("lte", "doh", 1, 2, 9999.0, warmup=True),
        _rec("3g", "do53", 0, 1, 1000), _rec("3g", "doh", 0, 1, 1500),
    ]  # fmt: skip
    got, unpaired = pairs(records)
    diffs = {(p.preset, p.transport, p.round, p.page): p.difference_ms for p in got}
    assert diffs == {
        ("lte", "doh", 0, 1): 80.0, ("lte", "dot", 0, 1): -5.0,
        ("lte", "doh", 1, 1): -10.0, ("lte", "dot", 1, 1): 30.0, ("lte", "dot", 1, 2): 10.0,
        ("3g", "doh", 0, 1): 500.0,
    }  # fmt: skip
    assert unpaired == {("lte", "doh"): 1}
    # Against another baseline.
    got, _ = pairs(records, baseline="dot")
    assert {(p.transport, p.round, p.page): p.difference_ms for p in got if p.preset == "lte"} == {
        ("do53", 0, 1): 5.0, ("doh", 0, 1): 85.0, ("do53", 1, 1): -30.0, ("doh", 1, 1): -40.0, ("do53", 1, 2): -10.0,
    }  # fmt: skip


def test_the_cdf_and_the_median_s_interval() -> None:
    assert cdf([3.0, 1.0, 2.0, 2.0]) == [(1.0, 0.25), (2.0, 0.5), (2.0, 0.75), (3.0, 1.0)]
    assert cdf([]) == []
    assert median_interval([1.0, 2, 3, 4, 5]) is None  # 2/32 > 5 %: no pair covers 95 %
    low, high, coverage = median_interval([6.0, 1, 5, 2, 4, 3])  # type: ignore[misc]
    assert (low, high) == (1, 6) and coverage == pytest.approx(1 - 2 / 64)
    # n = 100: the textbook ranks 40 and 61, coverage 96.5 %; and k is the widest that holds.
    xs = [float(i) for i in range(1, 101)]
    low, high, coverage = median_interval(xs)  # type: ignore[misc]
    assert (low, high) == (40, 61)
    k = int(low)
    assert coverage == pytest.approx(binom.cdf(100 - k, 100, 0.5) - binom.cdf(k - 1, 100, 0.5))
    assert coverage >= 0.95 > binom.cdf(100 - k - 1, 100, 0.5) - binom.cdf(k, 100, 0.5)


def test_compare_summarises_each_preset_and_transport(tmp_path: Path) -> None:
    records = []
    for rnd in range(3):
        for page in range(4):
            base = 100.0 + 10 * page
            records.append(_rec("lte", "do53", rnd, page, base, lookups={"a": 1000, "b": 3000}))
            records.append(_rec("lte", "doh", rnd, page, base + 20 + rnd, lookups={"a": 5000, "b": 7000, "c": 9000}))
    records.append(_rec("lte", "doh", 3, 0, None, failure="no beacon"))
    records.append(_rec("lte", "do53", 3, 0, None, failure="incomplete", ok=False))
    records.append(_rec("lte", "doh", 0, 0, 1.0, warmup=True))
    summary = compare(records)
    lte = summary["presets"]["lte"]
    assert summary["baseline"] == "do53" and list(lte) == ["do53", "doh"]
    assert lte["do53"]["difference"] is None
    d = lte["doh"]["difference"]
    assert d["pairs"] == 12 and d["unpaired"] == 1  # round 3's page 0: both sides failed
    assert d["median_ms"] == 21.0 and d["interval_ms"] == [20.0, 22.0] and d["coverage"] >= 0.95
    assert [p[0] for p in d["cdf"]] == sorted([20.0] * 4 + [21.0] * 4 + [22.0] * 4) and d["cdf"][-1][1] == 1.0
    assert lte["doh"]["loads"] == 13 and lte["doh"]["completed"] == 12 and lte["doh"]["failures"] == {"no beacon": 1}
    assert lte["do53"]["failures"] == {"incomplete": 1}
    assert lte["do53"]["page_load"] == {"n": 12, "median_ms": 115.0, "interval_ms": [100.0, 130.0], "p90_ms": 130.0}
    assert lte["doh"]["dns"] == {"n": 36, "median_ms": 7.0, "interval_ms": [5.0, 9.0], "p90_ms": 9.0}
    assert lte["do53"]["dns"] == {"n": 24, "median_ms": 2.0, "interval_ms": [1.0, 3.0], "p90_ms": 3.0}
    # Read back from a run's loads.jsonl (a line cut short by a crash is skipped), and drawn.
    (tmp_path / "loads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"preset": "lt')
    assert compare(read_loads(tmp_path / "loads.jsonl")) == summary
    paths = draw_figure(summary, tmp_path / "fig")
    assert [p.name for p in paths] == ["pageload-cdf.svg", "pageload-cdf.png"]
    assert all(p.stat().st_size > 1000 for p in paths)
    assert "median +21 ms" in paths[0].read_text()
