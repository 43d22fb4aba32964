"""dnscost compare: machines checked, metrics matched by key, differences judged against the
spread of both runs. Run B is the synthetic fixture copied and edited."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dnscost.compare import CompareRow, Comparison, compare, incompatibilities
from dnscost.errors import UsageError

SYNTHETIC = Path(__file__).parent / "fixtures" / "runs" / "synthetic"


def copy_run(tmp_path: Path, name: str = "b") -> Path:
    out = tmp_path / name
    shutil.copytree(SYNTHETIC, out, ignore=shutil.ignore_patterns("golden"))
    return out


def edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def edit_machine(run: Path, **facts: Any) -> None:
    edit_json(run / "run.json", lambda d: d["machine"].update(facts))


def row(c: Comparison, table: str, metric: str, key: str) -> CompareRow:
    found = [r for r in c.rows if (r.table, r.metric, r.key) == (table, metric, key)]
    assert len(found) == 1, (table, metric, key, [r.key for r in c.rows if r.table == table][:5])
    return found[0]


def test_a_run_against_itself_shows_no_significant_difference() -> None:
    c = compare(SYNTHETIC, SYNTHETIC)
    assert c.machine_differences == []
    assert {r.table for r in c.rows} == {
        "headline",
        "baseline",
        "establishment",
        "connections",
        "memory_fit",
        "cost_model",
    }
    assert all(r.diff == 0 and r.ratio == 1 for r in c.rows)
    assert not any(r.significant for r in c.rows)
    qps = row(c, "establishment", "answered_qps", "knot dot lifetime=1s resumption=1")
    assert qps.spread == "range" and qps.significant is False
    assert qps.a_low is not None and qps.a_high is not None and qps.a_low < qps.a <= qps.a_high  # type: ignore[operator]
    # one search per target: no spread, so no verdict
    assert row(c, "baseline", "udp_max_qps", "knot").significant is None
    mem = row(c, "memory_fit", "user_bytes_per_connection", "dnsdist dot")
    assert mem.spread == "ci95" and mem.significant is False


@pytest.mark.parametrize(
    ("facts", "named"),
    [
        ({"cpu_model": "Other CPU"}, "cpu model"),
        ({"cpus": 8}, "CPUs"),
        ({"kernel": "6.5.0-1-amd64"}, "kernel"),
        ({"cgroup_version": 2}, "cgroup version"),
        ({"rapl_readable": True}, "energy source"),
    ],
)
def test_incompatible_machines_are_refused_unless_forced(tmp_path: Path, facts: dict[str, Any], named: str) -> None:
    b = copy_run(tmp_path)
    edit_machine(b, **facts)
    with pytest.raises(UsageError) as e:
        compare(SYNTHETIC, b)
    message = str(e.value)
    assert "\n" not in message and named in message and "--force" in message
    c = compare(SYNTHETIC, b, force=True)
    assert len(c.machine_differences) == 1 and named in c.machine_differences[0]
    assert "WARNING" in c.render()


def test_what_does_not_decide_the_figures_may_differ() -> None:
    base = json.loads((SYNTHETIC / "run.json").read_text())["machine"]
    other = {**base, "hostname": "elsewhere", "kernel": "6.1.0-27-amd64", "memory_bytes": 1, "python": "3.12.1"}
    assert incompatibilities(base, other) == []


def test_a_real_difference_is_significant(tmp_path: Path) -> None:
    b = copy_run(tmp_path)
    for rep in range(3):
        path = b / "trials" / f"establishment-dnsdist-doh-c1000-lforever-res0-r{rep}" / "trial.json"
        edit_json(path, lambda d: d["summary"].update(answered_qps=d["summary"]["answered_qps"] * 0.5))
    c = compare(SYNTHETIC, b)
    changed = row(c, "establishment", "answered_qps", "dnsdist doh lifetime=forever resumption=0")
    assert changed.significant is True
    assert changed.ratio == pytest.approx(0.5)
    assert changed.diff == pytest.approx(-0.5 * changed.a)  # type: ignore[operator]
    same = row(c, "establishment", "answered_qps", "dnsdist dot lifetime=forever resumption=0")
    assert same.significant is False
    # The headline's share of UDP and its ratio to one query per connection move with it.
    moved = {(r.table, r.metric, r.key) for r in c.rows if r.significant}
    assert moved == {
        ("establishment", "answered_qps", "dnsdist doh lifetime=forever resumption=0"),
        ("headline", "qps_share_of_udp", "dnsdist doh persistent"),
        ("headline", "qps_ratio_to_persistent", "dnsdist doh 1q"),
        ("headline", "qps_ratio_to_persistent", "dnsdist doh 1q-resumed"),
    }
    assert "yes" in c.render()


def test_fits_are_judged_by_their_intervals(tmp_path: Path) -> None:
    b = copy_run(tmp_path)
    for path in (b / "trials").glob("memory-knot-doh-*/trial.json"):
        n = json.loads(path.read_text())["params"]["connections"]
        edit_json(
            path,
            lambda d, n=n: d["summary"]["meter"].update(
                rss_bytes_mean=d["summary"]["meter"]["rss_bytes_mean"] + 5000 * n
            ),
        )
    c = compare(SYNTHETIC, b)
    user = row(c, "memory_fit", "user_bytes_per_connection", "knot doh")
    assert user.diff == pytest.approx(5000, rel=1e-6) and user.significant is True
    assert row(c, "memory_fit", "kernel_bytes_per_connection", "knot doh").significant is False


def test_keys_only_in_one_run_are_kept(tmp_path: Path) -> None:
    b = copy_run(tmp_path)
    edit_json(b / "run.json", lambda d: d.update(plan=[p for p in d["plan"] if p["transport"] != "doh"]))
    c = compare(SYNTHETIC, b)
    only_a = row(c, "establishment", "answered_qps", "knot doh lifetime=1q resumption=1")
    assert only_a.b is None and only_a.diff is None and only_a.significant is None
    assert only_a.a is not None


def test_render_has_one_section_per_table() -> None:
    text = compare(SYNTHETIC, SYNTHETIC).render()
    for section in ("[baseline]", "[establishment]", "[connections]", "[memory_fit]", "[cost_model]"):
        assert section in text
    assert text.splitlines()[0] == f"A: {SYNTHETIC} (synthetic)"


def test_not_a_run_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        compare(tmp_path, SYNTHETIC)


def test_runs_of_different_networks_are_refused_unless_forced(tmp_path: Path) -> None:
    b = copy_run(tmp_path)
    edit_json(b / "run.json", lambda d: d["spec"].update(network="veth"))
    with pytest.raises(UsageError, match="network 'loopback' vs 'veth'"):
        compare(SYNTHETIC, b)
    forced = compare(SYNTHETIC, b, force=True)
    assert forced.machine_differences == ["network 'loopback' vs 'veth'"]
    assert "WARNING: compared across machines or set-ups (forced): network" in forced.render()
    # The same set-up named explicitly on one side and implied (older runs: loopback) on the other.
    edit_json(b / "run.json", lambda d: d["spec"].update(network="loopback"))
    assert compare(SYNTHETIC, b).machine_differences == []


def test_headline_ratios_are_compared_with_their_relative_difference(tmp_path: Path) -> None:
    b = copy_run(tmp_path)
    for rep in range(3):
        path = b / "trials" / f"establishment-knot-tcp-c1000-lforever-res0-r{rep}" / "trial.json"
        edit_json(
            path, lambda d: d["summary"].update(target_cpu_us_per_query=d["summary"]["target_cpu_us_per_query"] * 1.2)
        )
    c = compare(SYNTHETIC, b)
    ratio = row(c, "headline", "cpu_ratio_to_udp", "knot tcp persistent")
    assert ratio.rel_diff == pytest.approx(0.2) and ratio.significant is True
    assert ratio.as_dict()["rel_diff"] == ratio.rel_diff
    assert row(c, "headline", "cpu_ratio_to_udp", "knot dot persistent").rel_diff == pytest.approx(0.0)


def _as_release(run: Path, base: str, token: str, version: str) -> None:
    """Run ``run``'s target ``base`` renamed ``token`` at ``version``, as a run of a release root records it."""

    def plan(d: dict[str, Any]) -> None:
        for p in d["plan"]:
            if p["target"] == base:
                p["target"] = token
        d["versions"][token] = version
        del d["versions"][base]

    edit_json(run / "run.json", plan)
    for path in (run / "trials").glob(f"*-{base}-*/trial.json"):
        edit_json(path, lambda d: d.update(target=token, target_version=version))


def test_runs_that_differ_in_target_version_are_compared_and_the_difference_named(tmp_path: Path) -> None:
    """dnsdist 1.7.3 (the host's) against dnsdist@sid 2.1.3: every metric matched under the
    adapter's name, the difference named once, and a real difference still found."""
    b = copy_run(tmp_path)
    _as_release(b, "dnsdist", "dnsdist@sid", "2.1.3")
    for rep in range(3):
        path = b / "trials" / f"establishment-dnsdist-doh-c1000-lforever-res0-r{rep}" / "trial.json"
        edit_json(path, lambda d: d["summary"].update(answered_qps=d["summary"]["answered_qps"] * 0.5))
    c = compare(SYNTHETIC, b)
    assert c.target_differences == ["dnsdist: A is dnsdist 1.7.3, B is dnsdist@sid 2.1.3"]
    assert "target versions differ: dnsdist: A is dnsdist 1.7.3, B is dnsdist@sid 2.1.3" in c.render()
    assert not [r for r in c.rows if "@sid" in r.key]
    changed = row(c, "establishment", "answered_qps", "dnsdist doh lifetime=forever resumption=0")
    assert changed.significant is True and changed.ratio == pytest.approx(0.5)
    assert row(c, "establishment", "answered_qps", "dnsdist dot lifetime=forever resumption=0").significant is False
    # Unchanged targets are not named.
    assert compare(SYNTHETIC, SYNTHETIC).target_differences == []


def test_repeatability_counts_the_headline_ratios_measured_in_both() -> None:
    """bench/repeatability's figures: ratios and shares of the headline table only, |B-A|/A of
    those measured in both runs, the upper median, and the largest named."""
    from dnscost.compare import Repeatability

    def row(metric: str, a: float | None, b: float | None, table: str = "headline") -> CompareRow:
        diff = b - a if a is not None and b is not None else None
        return CompareRow(table, metric, "dnsdist dot", a, b, diff, None, None, None, None, None, "range", None)

    rows = [
        row("cpu_ratio_to_udp", 2.0, 2.1),  # +5 %
        row("qps_share_of_udp", 0.5, 0.44),  # -12 %
        row("resumed_share", 1.0, 1.0),  # 0
        row("cpu_ratio_to_persistent", 20.0, None),  # one side missing: not counted
        row("cpu_us_per_query", 3.0, 6.0),  # not a ratio
        row("cpu_ratio_to_udp", 1.0, 3.0, table="rounds"),  # not the headline
    ]
    rep = Repeatability.of(Comparison(Path("a"), Path("b"), "a", "b", rows=rows))
    assert [r.metric for r in rep.rows] == [
        "cpu_ratio_to_udp", "qps_share_of_udp", "resumed_share", "cpu_ratio_to_persistent"
    ]  # fmt: skip
    assert rep.within == 2 and rep.differences == pytest.approx([0.05, 0.12, 0.0])
    assert rep.largest is rows[1] and rep.median == pytest.approx(0.05)
    assert rep.summary() == "2 of 3 headline ratios within ±10 %, median difference 5.0 %, largest 12.0 %"
    assert Repeatability.of(Comparison(Path("a"), Path("b"), "a", "b")).summary() == "no headline ratio in both runs"


def _gated(capsys: pytest.CaptureFixture[str], b: Path, *gates: str) -> tuple[int, list[str]]:
    """``dnscost compare SYNTHETIC B --fail-on G ...``: its exit code and its lines on stderr."""
    from dnscost.cli import main

    code = main(["compare", str(SYNTHETIC), str(b), *(x for g in gates for x in ("--fail-on", g))])
    return code, capsys.readouterr().err.splitlines()


def test_the_gate_fails_on_a_significant_regression_and_passes_otherwise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """B's DoH on dnsdist answers half as many queries in every repetition: a gate on a fall of
    answered qps fails with one line naming that cell; the same gate with the runs swapped (B
    doubled A's rate: an improvement) and a gate on a metric B did not move pass; a run against
    itself passes every gate."""
    b = copy_run(tmp_path)
    for rep in range(3):
        path = b / "trials" / f"establishment-dnsdist-doh-c1000-lforever-res0-r{rep}" / "trial.json"
        edit_json(path, lambda d: d["summary"].update(answered_qps=d["summary"]["answered_qps"] * 0.5))
    code, err = _gated(capsys, b, "answered_qps<-10%")
    failures = [line for line in err if line.startswith("regression: ")]
    assert code == 1 and len(failures) == 1, err
    assert failures[0].startswith(
        "regression: answered_qps [establishment] dnsdist doh lifetime=forever resumption=0: "
    )
    assert "(-50.0 %, beyond -10 %;" in failures[0], failures[0]
    assert err[-1].startswith("gate: 1 regression (answered_qps<-10%: "), err
    docs = (Path(__file__).parents[2] / "docs" / "experiments.md").read_text()
    assert "\n".join(err) in docs, err  # the example docs/experiments.md gives
    code, err = _gated(capsys, b, "cpu_us_per_query>+5%")
    assert code == 0 and err[-1].startswith("gate: no regression ("), err
    from dnscost.cli import main

    code = main(["compare", str(b), str(SYNTHETIC), "--fail-on", "answered_qps<-10%"])
    err = capsys.readouterr().err.splitlines()
    assert code == 0 and err[-1].startswith("gate: no regression (answered_qps<-10%: "), err
    code, err = _gated(capsys, SYNTHETIC, "cpu_us_per_query>+0%", "answered_qps<-0%", "memory_bytes_per_connection>+0%")
    assert code == 0 and not [line for line in err if line.startswith("regression: ")], err


def test_a_gate_that_cannot_fail_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A gate badly written, on an unknown metric, or on a metric no cell of which has an
    interval on both sides (the synthetic run's UDP search ran once) is a usage error (exit 2)
    before or after the analysis, in one line."""
    for text, says in [
        ("cpu_us_per_query>5%", "write METRIC>+X% or METRIC<-X%"),
        ("cpu_per_query>+5%", "unknown metric 'cpu_per_query'"),
        # Inverted: they would fail on an improvement and pass a regression.
        ("cpu_us_per_query<+10%", "cpu_us_per_query regresses when it rises: write cpu_us_per_query>+X%"),
        ("cpu_us_per_query>-10%", "cpu_us_per_query regresses when it rises: write cpu_us_per_query>+X%"),
        ("cpu_us_per_query<-10%", "cpu_us_per_query regresses when it rises: write cpu_us_per_query>+X%"),
        ("answered_qps>+10%", "answered_qps regresses when it falls: write answered_qps<-X%"),
        ("resumed_share<+10%", "resumed_share regresses when it falls: write resumed_share<-X%"),
        ("answered_qps<-100%", "answered_qps cannot fall by 100 % or more: this gate cannot fail"),
        ("udp_max_qps<-5%", "no cell of udp_max_qps with an interval on both sides (two repetitions or more)"),
    ]:
        code, err = _gated(capsys, SYNTHETIC, text)
        assert code == 2 and len(err) == 1 and says in err[0], (text, err)


def test_every_gated_metric_is_documented() -> None:
    """docs/experiments.md's table names every metric ``--fail-on`` takes, and no other."""
    import re

    from dnscost.compare import GATED_METRICS

    text = (Path(__file__).parents[2] / "docs" / "experiments.md").read_text()
    table = text.split("The metrics (`dnscost.compare.GATED_METRICS`):")[1].split("\n\n")[1]
    rows = re.findall(r"^\| `(\w+)` \| (rise|fall) \|", table, re.M)
    assert rows == [(m, "rise" if g.worse == ">" else "fall") for m, g in GATED_METRICS.items()]


def test_a_run_with_no_comparable_figure_against_itself_says_its_cells_are_in_common(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """R14: a run compared with itself whose one cell yields no figure (the raw fixture: one
    DoH trial with no UDP reference) said "no cell in common"; it says the cell is in common
    and yields nothing to compare, in one line, exit 2."""
    from dnscost.cli import main

    raw = SYNTHETIC.parent / "raw"
    assert main(["compare", str(raw), str(raw)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"dnscost: {raw} and {raw} have no figure measured in both: their one cell in common "
        "(load-dnsdist@trixie-doh) yields no figure compare sets side by side (a rate, a cost, a fit)\n"
    )
