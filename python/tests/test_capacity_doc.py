"""docs/capacity-slo.md against its kept run (docs/capacity-slo/run): the table is what the
analysis's ``capacity`` table gives from the kept trials, row for row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dnscost import analysis
from dnscost.analysis.records import Analysis

DASH = "\u2013"
RUN = Path(__file__).parents[2] / "docs" / "capacity-slo" / "run"
PAGE = RUN.parents[1] / "capacity-slo.md"


@pytest.fixture(scope="module")
def kept() -> Analysis:
    return analysis.analyze(RUN)


def _n(value: object, digits: int = 0) -> str:
    return DASH if value is None else f"{value:,.{digits}f}".replace(",", " ")


def capacity_lines(a: Analysis) -> list[str]:
    """The page's table, one line per row of the ``capacity`` table."""
    out = []
    for r in a.tables["capacity"].rows:
        what = r["profile"] or f"{r['transport']}, {r['connections']} connections"
        at_least = "≥ " if r["lower_bound"] else ""
        qps = f"{_n(r['qps_median'])} [{_n(r['qps_min'])}{DASH}{_n(r['qps_max'])}]" if r["qps_median"] else DASH
        clients = (
            f"{_n(r['clients_median'])} [{_n(r['clients_min'])}{DASH}{_n(r['clients_max'])}]"
            if r["clients_median"]
            else DASH
        )
        p99 = _n(r["p99_us"] / 1000, 1) if r["p99_us"] is not None else DASH
        cpu = _n(r["cpu_us_per_query"], 1)
        out.append(
            f"| {r['target']} | {what} | {r['valid_reps']} of {r['reps']} | {at_least}{qps} "
            f"| {at_least if r['clients_median'] else ''}{clients} | {p99} | {cpu} "
            f"| {r['failed'] or DASH} |"
        )
    return out


def test_the_table_is_what_the_kept_run_gives(kept: Analysis) -> None:
    assert "\n".join(capacity_lines(kept)) in PAGE.read_text()


def _trial(run: str, trial: str) -> dict[str, object]:
    return json.loads((RUN.parent / run / "trials" / trial / "trial.json").read_text())


def test_the_runs_before_the_retries_say_what_the_page_says() -> None:
    """The stolen steps and the transient the page cites, from the runs kept for them."""
    text = " ".join(PAGE.read_text().split())
    tcp = _trial("second-run", "transports-dnsdist-tcp-r2")
    steps = tcp["steps"]
    assert isinstance(steps, list)

    def stolen(step: dict[str, Any]) -> float:
        s = step["summary"]
        return float(s["meter"]["cores"]["0"]["steal_us"]) / (s["measured_s"] * 1e6)

    broke = [s for s in steps if s["failed"] == "p99"]
    met = [s for s in steps if s["ok"]]
    p99 = sorted(s["p99_us"] / 1000 for s in broke)
    steal = sorted(100 * stolen(s) for s in broke)
    fine = sorted(100 * stolen(s) for s in met)
    assert len(broke) == 5 and "five steps" in text
    assert (
        f"at {p99[0]:.1f} to {p99[-1]:.1f} ms, with {steal[0]:.1f} to {steal[-1]:.1f} % of the target's core stolen"
        in text
    )
    assert f"Its steps with {fine[0]:.1f} to {fine[-1]:.1f} % stolen met it" in text
    others = [_trial("second-run", f"transports-dnsdist-tcp-r{r}")["search"]["max_qps"] for r in (0, 1)]  # type: ignore[index]
    assert f"ended at 13 750 qps, where the other two rounds found {_n(others[0])} and {_n(others[1])}" in text
    doh = _trial("first-run", "transports-dnsdist-doh-r1")
    broke_doh = [s for s in doh["steps"] if s["failed"] == "p99" and s["offered_qps"] == 20_000]  # type: ignore[union-attr]
    (b,) = broke_doh
    busy = b["summary"]["validity"]["target_busy_share"]
    assert f"at 20 000 qps, {b['p99_us'] / 1000:.1f} ms with the target {100 * busy:.0f} % busy" in text
    assert doh["search"]["max_qps"] == 17_500  # type: ignore[index]
    other = _trial("first-run", "transports-dnsdist-doh-r0")["search"]["max_qps"]  # type: ignore[index]
    assert f"Another round found {_n(other)}" in text


def test_every_number_of_the_findings_is_in_the_table(kept: Analysis) -> None:
    text = PAGE.read_text()
    findings = text.split("## Findings", 1)[1].split("\n## ", 1)[0]
    rows = {(r["target"], r["profile"] or r["transport"]): r for r in kept.tables["capacity"].rows}

    def qps(target: str, what: str) -> str:
        return _n(rows[(target, what)]["qps_median"])

    def cpu(target: str, what: str) -> str:
        return _n(rows[(target, what)]["cpu_us_per_query"], 1)

    said = " ".join(findings.split())
    assert (
        f"TCP up to {qps('dnsdist', 'tcp')} qps, over DoT to {qps('dnsdist', 'dot')} and over DoH to "
        f"{qps('dnsdist', 'doh')}. At those rates each query costs it {cpu('dnsdist', 'tcp')}, "
        f"{cpu('dnsdist', 'dot')} and {cpu('dnsdist', 'doh')} CPU-µs"
    ) in said
    knot = "knot-resolver"
    assert f"over DoT up to {qps(knot, 'dot')} qps, but over plain TCP only to {qps(knot, 'tcp')}" in said
    assert f"at {cpu(knot, 'tcp')} CPU-µs a query against DoT's {cpu(knot, 'dot')}" in said
    assert f"Its DoH stops at {qps(knot, 'doh')}, at {cpu(knot, 'doh')} CPU-µs a query" in said
    assert rows[("dnsdist", "udp")]["lower_bound"] and rows[(knot, "udp")]["lower_bound"]
    assert f"so ≥ {qps('dnsdist', 'udp')} and ≥ {qps(knot, 'udp')} are lower bounds" in said
    firefox, chromium = "firefox-1s-cloudflare", "chromium-0.05s-cloudflare"
    clients = {k: _n(r["clients_per_core"]) for k, r in rows.items() if r["profile"]}
    assert clients[("dnsdist", firefox)] == clients[(knot, firefox)]
    assert f"On both targets, {clients[('dnsdist', firefox)]} such clients per core" in said
    assert (
        f"dnsdist serves {clients[('dnsdist', chromium)]} such clients per core, "
        f"knot-resolver {clients[(knot, chromium)]}" in said
    )
    assert all(r["failed"] == "p99" for r in rows.values() if r["profile"])


def test_the_round_the_first_rule_flagged() -> None:
    t = json.loads((RUN / "trials" / "transports-knot-resolver-tcp-r1" / "trial.json").read_text())
    assert "generator-bound-search" in t["summary"]["validity"]["flags"] and t["search"]["max_qps"] == 27_500
    broke = [s for s in t["steps"] if s["failed"] == "generator"]
    assert [s["offered_qps"] for s in broke] == [40_000, 30_000]
    text = " ".join(PAGE.read_text().split())
    p99 = " and ".join(f"{s['p99_us'] / 1000:.0f}" for s in broke)
    busy = " and ".join(f"{100 * s['summary']['validity']['generator_busy_share']:.0f}" for s in broke)
    assert f"broke the p99 objective at {p99} ms, while the generator was {busy} % busy" in text
    assert all(s["p99_us"] > 10_000 and not s["summary"]["validity"]["generator_saturated"] for s in broke)


def test_the_runs_time_and_versions_are_the_pages() -> None:
    run = json.loads((RUN / "run.json").read_text())
    seconds = round((run["finished_unix_ms"] - run["created_unix_ms"]) / 1000)
    text = " ".join(PAGE.read_text().split())
    assert f"The run took {seconds // 60} minutes {seconds % 60} seconds here ({len(run['plan'])} searches)" in text
    assert f"dnsdist {run['versions']['dnsdist']} and knot-resolver {run['versions']['knot-resolver']}" in text
