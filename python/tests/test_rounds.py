"""Rounds (issue 10, item 1): the plan runs every cell once per round, each round shuffled with
a recorded seed and holding a UDP reference; the analysis divides by the reference of the same
round, never by another round's or by the open-loop figure. Consistency checks (item 2): a
synthetic run edited to contradict itself gets its contradicting cells flagged and named."""

from __future__ import annotations

import html
import json
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dnscost.analysis import Analysis, analyze, headline
from dnscost.plan import REFERENCE_GROUP, expand, round_seed
from dnscost.report.headline import format_headline
from dnscost.spec import parse_spec
from dnscost.validity import CONSISTENCY_FLAGS

SYNTHETIC = Path(__file__).parent / "fixtures" / "runs" / "synthetic"
ZERO_RTT = "quic_establishment-coredns-doq-l1q-res1-e1"
"""The synthetic run's one-query DoQ cell whose resumed handshakes carry 0-RTT data."""

SPEC = """
name = "rounds"
targets = ["builtin", "dnsdist"]
seed = 11
[defaults]
duration = "1s"
[[group]]
name = "memory"
kind = "idle"
transports = ["tcp", "dot"]
connections = [10, 20]
[[group]]
name = "establishment"
transports = ["udp", "tcp", "dot"]
repetitions = 3
connections = 20
lifetime = ["forever", "1q"]
resumption = [0.0, 1.0]
"""


def cell(trial_id: str) -> str:
    return trial_id.rsplit("-r", 1)[0]


def test_every_cell_runs_once_per_round_in_contiguous_rounds() -> None:
    plan = expand(parse_spec(SPEC))
    for target in ("builtin", "dnsdist"):
        mine = [t for t in plan if t.target == target]
        # Rounds are contiguous and in order: 0, 0, ..., 1, 1, ..., 2, 2, ...
        rounds = [t.round for t in mine]
        assert rounds == sorted(rounds) and set(rounds) == {0, 1, 2}
        est = {r: Counter(cell(t.id) for t in mine if t.round == r and t.group == "establishment") for r in range(3)}
        # 1 udp + 2 tcp + 3 dot cells, each exactly once in every round, and one UDP reference
        assert all(len(c) == 6 and set(c.values()) == {1} for c in est.values())
        assert [t.round for t in mine if t.group == REFERENCE_GROUP] == [0, 1, 2]
        assert est[0].keys() == est[1].keys() == est[2].keys()
        # A group with one repetition takes part in the first round only.
        assert {t.round for t in mine if t.group == "memory"} == {0}
        assert all(t.rep == t.round for t in mine)
    # Targets run one after the other.
    targets = [t.target for t in plan]
    assert targets == sorted(targets, key=["builtin", "dnsdist"].index)


def test_each_round_is_shuffled_with_its_own_recorded_seed() -> None:
    spec = parse_spec(SPEC)
    plan = expand(spec)
    for t in plan:
        assert t.round_seed == round_seed(spec.seed, t.target, t.round)
        assert t.to_dict()["round"] == t.round and t.to_dict()["round_seed"] == t.round_seed
    seeds = {(t.target, t.round): t.round_seed for t in plan}
    assert len(set(seeds.values())) == len(seeds) == 6
    orders = [[cell(t.id) for t in plan if t.target == "dnsdist" and t.round == r and t.group == "establishment"]
              for r in (1, 2)]  # fmt: skip
    assert sorted(orders[0]) == sorted(orders[1]) and orders[0] != orders[1]
    # The same spec gives the same plan; another seed, other orders.
    assert [t.id for t in expand(spec)] == [t.id for t in plan]
    other = expand(parse_spec(SPEC.replace("seed = 11", "seed = 12")))
    assert sorted(t.id for t in other) == sorted(t.id for t in plan) and [t.id for t in other] != [t.id for t in plan]


def test_every_round_that_loads_a_target_gets_a_udp_reference() -> None:
    plan = expand(parse_spec(SPEC.replace('transports = ["udp", "tcp", "dot"]', 'transports = ["tcp", "dot"]')))
    refs = [t for t in plan if t.group == REFERENCE_GROUP]
    assert sorted((t.target, t.round) for t in refs) == [(tg, r) for tg in ("builtin", "dnsdist") for r in range(3)]
    for t in refs:
        assert (t.kind, t.transport, t.params["rate"], t.params["lifetime"]) == ("load", "udp", "max", "forever")
        assert (t.params["connections"], t.params["in_flight"]) == (16, 8)
        assert t.id == f"reference-{t.target}-udp-r{t.round}"
    # A spec's own reference group (as many repetitions as rounds) replaces the added ones.
    own = SPEC + '[[group]]\nname = "reference"\ntransports = ["udp"]\nrepetitions = 3\nconnections = 4\nrate = "max"\n'
    refs = [t for t in expand(parse_spec(own)) if t.group == REFERENCE_GROUP]
    assert len(refs) == 6 and {t.params["connections"] for t in refs} == {4}
    # A target's plan without load trials (idle only) needs none.
    idle = SPEC[: SPEC.index('[[group]]\nname = "establishment"')]
    assert not any(t.group == REFERENCE_GROUP for t in expand(parse_spec(idle)))


# --- the analysis: pairing within rounds ------------------------------------------------------


def copy_run(tmp_path: Path) -> Path:
    """The synthetic run, copied with its one contradiction taken out: the fixture makes a
    resumed DoQ handshake with 0-RTT data dearer than one without (``ZERO_RTT_US``), which the
    analysis flags; here those trials cost a fifth less, so the copy contradicts nothing."""
    out = tmp_path / "run"
    shutil.copytree(SYNTHETIC, out, ignore=shutil.ignore_patterns("golden"))
    for rep in range(3):
        edit_trial(out, f"{ZERO_RTT}-r{rep}", scale_cpu(0.8))
    return out


def edit_trial(run: Path, trial_id: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = run / "trials" / trial_id / "trial.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def scale_cpu(factor: float) -> Callable[[dict[str, Any]], None]:
    def change(d: dict[str, Any]) -> None:
        s = d["summary"]
        s["target_cpu_us_per_query"] *= factor
        s["target_cpu_us"] *= factor

    return change


def est(target: str, transport: str, lifetime: str, resumption: float, rep: int) -> str:
    return f"establishment-{target}-{transport}-c1000-l{lifetime}-res{resumption:g}-r{rep}"


def invalidate(d: dict[str, Any]) -> None:
    d["summary"]["validity"].update(flags=["loss"], valid=False, loss=0.2)


def test_ratios_divide_by_the_udp_reference_of_the_same_round(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    # Round 2 ran on a machine twice as slow: every trial of the round costs twice the CPU.
    for transport, lifetime in (("udp", "forever"), ("dot", "forever")):
        edit_trial(run, est("dnsdist", transport, lifetime, 0.0, 2), scale_cpu(2.0))
    before, after = analyze(SYNTHETIC), analyze(run)
    rounds = [r for r in after.tables["rounds"].rows if r["id"] == est("dnsdist", "dot", "forever", 0.0, 2)]
    assert len(rounds) == 1 and rounds[0]["reference_id"] == est("dnsdist", "udp", "forever", 0.0, 2)
    old = next(h for h in headline(before) if h["target"] == "dnsdist")["persistent"]["dot"]["cpu_ratio"]
    new = next(h for h in headline(after) if h["target"] == "dnsdist")["persistent"]["dot"]["cpu_ratio"]
    # Paired within rounds, the slow round changes no ratio; unpaired, it would have.
    assert (new.median, new.low, new.high, new.n) == pytest.approx((old.median, old.low, old.high, 3))
    cpu = {r["round"]: r["cpu_us_per_query"] for r in after.tables["rounds"].rows
           if r["id"].startswith("establishment-dnsdist-dot-c1000-lforever-")}  # fmt: skip
    assert cpu[2] / cpu[0] == pytest.approx(2.0, rel=0.05)


def test_an_invalid_reference_leaves_its_round_out_and_never_falls_back(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    edit_trial(run, est("knot", "udp", "forever", 0.0, 1), invalidate)
    a = analyze(run)
    knot = next(h for h in headline(a) if h["target"] == "knot")
    assert knot["rounds"] == 2 and knot["persistent"]["tcp"]["share"].n == 2
    assert knot["persistent"]["tcp"]["cpu_ratio"].n == 2
    # Every reference invalid: no share of UDP at all (n/a), not a share of the open-loop figure.
    for rep in (0, 2):
        edit_trial(run, est("knot", "udp", "forever", 0.0, rep), invalidate)
    a = analyze(run)
    knot = next(h for h in headline(a) if h["target"] == "knot")
    base = next(r for r in a.tables["baseline"].rows if r["target"] == "knot")
    assert base["udp_max_qps"] is not None and base["udp_reference_qps"] is None
    assert knot["persistent"]["tcp"]["share_of_udp"] is None and knot["rounds"] == 0
    assert all(r["share_of_udp"] is None for r in a.tables["establishment"].rows if r["target"] == "knot")
    lines = format_headline(headline(a))
    share_line = next(line for line in lines[lines.index(next(x for x in lines if x.startswith("knot"))) :]
                      if "share of UDP" in line)  # fmt: skip
    assert share_line.split()[-6:] == ["doh", "n/a,", "dot", "n/a,", "tcp", "n/a"]


def test_a_share_of_udp_above_one_is_marked(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    for rep in range(3):
        edit_trial(run, est("dnsdist", "tcp", "forever", 0.0, rep),
                   lambda d: d["summary"].update(answered_qps=d["summary"]["answered_qps"] * 2))  # fmt: skip
    lines = format_headline(headline(analyze(run)))
    assert "tcp 1.32 [1.29-1.32] (!)" in next(line for line in lines if "share of UDP" in line)
    assert any(line.startswith("(!) a share of UDP above 1") for line in lines)
    assert not any("(!)" in line for line in format_headline(headline(analyze(SYNTHETIC))))


def test_a_resumed_handshake_dearer_than_a_full_one_is_marked(tmp_path: Path) -> None:
    run = copy_run(tmp_path)
    for rep in range(3):
        edit_trial(run, est("knot", "dot", "1q", 1.0, rep), scale_cpu(4.0))
    lines = format_headline(headline(analyze(run)))
    knot = lines[lines.index(next(x for x in lines if x.startswith("knot"))) :]
    handshakes = next(line for line in knot if "per handshake" in line)
    before, dot = handshakes.split("dot ", 1)
    assert dot.split(", tcp")[0].endswith("(!)") and "(!)" not in before, handshakes
    assert any(line.startswith("(!) a resumed handshake measured dearer") for line in lines)
    assert not any("dearer" in line for line in format_headline(headline(analyze(SYNTHETIC))))


def test_an_idle_cost_whose_interval_reaches_zero_is_given_as_a_bound() -> None:
    """A cost cannot be negative: an interval reaching 0 says the data cannot tell it from none."""
    from dnscost.analysis.rounds import Spread
    from dnscost.report.headline import _nonnegative

    assert _nonnegative(Spread(5.28, -0.39, 10.96, 5)) == "below 10.96 (not distinguishable from 0)"
    assert _nonnegative(Spread(5.16, 3.12, 7.20, 5)) == "5.16 [3.12-7.20]"
    assert _nonnegative(Spread(-1.0, -3.0, -0.5, 5)) == "below 0.00 (not distinguishable from 0)"


# --- consistency ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def contradicting(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    """The synthetic run edited to contradict itself three ways."""
    run = copy_run(tmp_path_factory.mktemp("contradicting"))
    for rep in range(3):
        # TCP connections living 1 s cost less per query than persistent ones.
        edit_trial(run, est("dnsdist", "tcp", "1s", 0.0, rep), scale_cpu(0.8))
        # Resumed DoT handshakes cost more than full ones.
        edit_trial(run, est("knot", "dot", "1q", 1.0, rep), scale_cpu(4.0))
    # knot's DoH connections hold more in socket buffers than the memory counted for them.
    for n in (500, 1000, 2000, 4000, 8000):

        def buffers(d: dict[str, Any], n: int = n) -> None:
            s = d["summary"]
            s["meter"]["tcp_bytes_mean"] = s["baseline_meter"]["tcp_bytes_mean"] + 100_000 * n

        edit_trial(run, f"memory-knot-doh-c{n}-r0", buffers)
    return analyze(run)


def test_the_clean_run_has_no_contradiction(tmp_path: Path) -> None:
    a = analyze(copy_run(tmp_path))
    assert a.tables["consistency"].rows == []
    assert not any(f in str(r["flags"]) for r in a.tables["trials"].rows for f in CONSISTENCY_FLAGS)
    # The fixture as made: its 0-RTT cell dearer than plain resumption in every round, and only that.
    a = analyze(SYNTHETIC)
    assert [(r["flag"], r["cell"], r["against"]) for r in a.tables["consistency"].rows] == [
        ("inconsistent-resumption", "coredns doq 1q resumption 1 0-RTT 1", "coredns doq 1q resumption 1")
    ]
    flagged = {r["id"] for r in a.tables["trials"].rows if r["flags"] == "inconsistent-resumption"}
    assert flagged == {f"{cell}-r{rep}" for cell in (ZERO_RTT, ZERO_RTT.replace("-e1", "-e0")) for rep in range(3)}


def test_contradictions_are_named(contradicting: Analysis) -> None:
    found = {(r["flag"], r["cell"], r["against"]) for r in contradicting.tables["consistency"].rows}
    assert found == {
        ("inconsistent-lifetime", "dnsdist tcp forever", "dnsdist tcp 1s"),
        ("inconsistent-resumption", "knot dot 1q resumption 1", "knot dot 1q"),
        # the same resumed DoT trials, dearer than resumed DoH, which carries DoT plus HTTP/2
        ("inconsistent-layering", "knot dot 1q resumption 1", "knot doh 1q resumption 1"),
        # the same resumed trials, per handshake: each resumed one costs more than a full one
        ("inconsistent-resumption", "knot dot 1q resumed handshake", "knot dot 1q full handshake"),
        ("memory-below-kernel", "knot doh memory per connection", "knot doh TCP socket buffers per connection"),
    }
    for r in contradicting.tables["consistency"].rows:
        assert r["low"] > (1.0 if r["flag"] != "memory-below-kernel" else 0)
        assert r["margin"] > 0
    lifetime = next(r for r in contradicting.tables["consistency"].rows if r["flag"] == "inconsistent-lifetime")
    # The mean over rounds of forever ÷ 1 s, each round's 1 s trial made 20 % cheaper.
    clean = {(r["lifetime"], r["round"]): r["cpu_us_per_query"] for r in analyze(SYNTHETIC).tables["rounds"].rows
             if r["target"] == "dnsdist" and r["transport"] == "tcp"}  # fmt: skip
    ratios = sorted(clean[("forever", k)] / (0.8 * clean[("1s", k)]) for k in range(3))
    # The median over rounds, between the min and max: every round contradicts.
    assert lifetime["rounds"] == 3 and lifetime["value"] == pytest.approx(ratios[1], rel=1e-6)
    assert (lifetime["low"], lifetime["high"]) == pytest.approx((ratios[0], ratios[2]), rel=1e-6)
    assert lifetime["margin"] == pytest.approx(ratios[0] - 1, rel=1e-6)


def test_contradicting_trials_are_flagged_and_stay_valid(contradicting: Analysis) -> None:
    flagged = {r["id"]: r for r in contradicting.tables["trials"].rows if any(
        f in str(r["flags"]).split(";") for f in CONSISTENCY_FLAGS)}  # fmt: skip
    expected = {
        *(est("dnsdist", "tcp", life, 0.0, rep) for life in ("1s", "forever") for rep in range(3)),
        *(est("knot", "dot", "1q", res, rep) for res in (0.0, 1.0) for rep in range(3)),
        *(est("knot", "doh", "1q", 1.0, rep) for rep in range(3)),
        *(f"memory-knot-doh-c{n}-r0" for n in (500, 1000, 2000, 4000, 8000)),
    }
    assert set(flagged) == expected
    assert all(r["valid"] for r in flagged.values())
    assert flagged[est("knot", "dot", "1q", 1.0, 0)]["flags"] == "inconsistent-resumption;inconsistent-layering"
    lines = format_headline(headline(contradicting), contradicting.tables["consistency"].rows)
    assert any(line.startswith("inconsistent: dnsdist tcp forever against dnsdist tcp 1s") for line in lines)


def test_the_report_names_contradictions_and_shows_intervals(contradicting: Analysis, tmp_path: Path) -> None:
    from dnscost.report import render_report

    text = render_report(contradicting, tmp_path, headline=headline(contradicting)).read_text()
    section = text[text.index("<h3>Contradictions</h3>") :][:20_000]
    for cell in ("dnsdist tcp forever", "dnsdist tcp 1s", "knot dot 1q resumption 1", "knot doh memory per connection"):
        assert cell in section
    assert "Headline figures with their intervals (up to 3 rounds" in text
    assert "CPU per query ÷ UDP's" in html.unescape(text) and "min, max over rounds" in text
    physical = analyze(copy_run(tmp_path / "physical"))
    clean = render_report(physical, tmp_path / "clean", headline=headline(physical)).read_text()
    assert "<h3>Contradictions</h3>" not in clean and "no contradiction beyond the intervals" in clean


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    """The synthetic run edited to contradict itself the two ways the audited study did (issue
    29): knot's plain TCP half as dear again per query as persistent, so above its DoT (TCP plus
    TLS) and above its 1 s connections; dnsdist's TCP holding 40 % less above its idle baseline
    at 8 000 connections, so less per connection than at 4 000."""
    run = copy_run(tmp_path_factory.mktemp("audited"))
    for rep in range(3):
        edit_trial(run, est("knot", "tcp", "forever", 0.0, rep), scale_cpu(1.5))

    def shrink(d: dict[str, Any]) -> None:
        meter, idle = d["summary"]["meter"], d["summary"]["baseline_meter"]
        for key in ("rss_bytes_mean", "cgroup_kernel_bytes_mean"):
            meter[key] = idle[key] + 0.6 * (meter[key] - idle[key])

    edit_trial(run, "memory-dnsdist-tcp-c8000-r0", shrink)
    return analyze(run)


def test_tcp_dearer_than_dot_and_memory_falling_are_named(audited: Analysis) -> None:
    rows = audited.tables["consistency"].rows
    found = {(r["flag"], r["cell"], r["against"]) for r in rows}
    assert ("inconsistent-layering", "knot tcp forever", "knot dot forever") in found
    assert ("inconsistent-lifetime", "knot tcp forever", "knot tcp 1s") in found
    memory = [r for r in rows if r["flag"] == "inconsistent-memory"]
    assert memory and all((r["target"], r["transport"]) == ("dnsdist", "tcp") for r in memory)
    assert all(" at 8000 " in r["against"] and r["margin"] > 0 for r in memory)
    assert all(r["against_trials"] == "memory-dnsdist-tcp-c8000-r0" for r in memory)
    # Nothing else: every row names one of the two edits.
    assert all("knot tcp forever" in r["cell"] or r["flag"] == "inconsistent-memory" for r in rows)
    layered = next(r for r in rows if r["flag"] == "inconsistent-layering" and r["against"] == "knot dot forever")
    assert layered["rounds"] == 3 and layered["low"] > 1 and layered["margin"] == pytest.approx(layered["low"] - 1)
    tcp = next(r for r in audited.tables["trials"].rows if r["id"] == est("knot", "tcp", "forever", 0.0, 0))
    assert "inconsistent-layering" in str(tcp["flags"]).split(";") and tcp["valid"]


def test_a_negative_memory_slope_is_named_with_its_margin() -> None:
    """Memory that falls by 2 000 B per connection held, however many: the user fit's slope
    and interval lie below zero, checked against numpy's own least squares; the kernel's, flat
    with noise, is not flagged."""
    import numpy as np
    from dnscost.analysis.consistency import consistency_rows

    held = [1000, 2000, 4000, 8000]
    user = [5e7 - 2000 * n + (300_000 if i % 2 else -300_000) for i, n in enumerate(held)]
    kernel = [1e6 + (50_000 if i % 2 else -50_000) * (i + 1) for i in range(len(held))]
    points = [
        {"target": "t", "transport": "dot", "connections": n, "connections_held": n, "rss_delta_bytes": u,
         "kernel_delta_bytes": k, "tcp_delta_bytes": None, "valid": True}
        for n, u, k in zip(held, user, kernel, strict=True)
    ]  # fmt: skip
    trials = [{"id": f"m-{n}", "kind": "idle", "target": "t", "transport": "dot", "connections": n} for n in held]
    rows = [r for r in consistency_rows([], points, trials) if r["flag"] == "negative-memory"]
    assert [r["cell"] for r in rows] == ["t dot user memory per connection"]
    (row,) = rows
    assert row["value"] == pytest.approx(np.polyfit(held, user, 1)[0], rel=1e-9)
    assert row["low"] < row["value"] < row["high"] < 0 and row["margin"] == -row["high"]
    assert row["cell_trials"] == "m-1000;m-2000;m-4000;m-8000" and row["rounds"] == 4


def test_the_answers_in_words_are_the_headline_s_figures() -> None:
    """The report's first screen says each target's headline in words (report.headline.answers):
    UDP's cost and every persistent transport's ratio to it, every handshake's cost and its UDP
    queries, each the headline's figure as printed; a resumed handshake dearer than a full one is
    said to be no result, not a saving."""
    import copy
    import dataclasses

    from dnscost.report.headline import answers
    from dnscost.transports import display_name

    heads = headline(analyze(SYNTHETIC))
    assert heads
    for h in heads:
        text = " ".join(answers(h))
        udp = h["udp"]["cpu_us_per_query"].median
        assert udp is not None and f"a UDP query costs the resolver {udp:,.2f}" in text
        ratios = [(t, v["cpu_ratio"].median) for t, v in h["persistent"].items() if v["cpu_ratio"].median is not None]
        assert ratios
        for t, ratio in ratios:
            assert f"{display_name(t)} {ratio:,.1f}" in text
        for t, v in h["handshake_us"].items():
            full = v["full"].median
            if full is not None:
                assert f"A new {display_name(t)} connection costs {full:,.0f}" in text
                assert f"as much as {full / udp:,.0f} UDP queries" in text
    h = copy.deepcopy(heads[0])
    tls = next(t for t, v in h["handshake_us"].items() if t != "tcp" and v["full"].median is not None)
    full = h["handshake_us"][tls]["full"]
    assert full.median is not None
    h["handshake_us"][tls]["resumed"] = dataclasses.replace(full, median=full.median * 2)
    said = next(s for s in answers(h) if f"A new {display_name(tls)} connection" in s)
    assert said.endswith("no result.") and "less" not in said
