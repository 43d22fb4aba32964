"""docs/versions.md's tables: one adapter at several versions side by side, from a run's headline."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from dnscost.report.versions import main, versions_tables

GOLDEN = Path(__file__).parent / "fixtures" / "runs" / "quick" / "golden"


def _rows(name: str) -> list[dict[str, str]]:
    with (GOLDEN / name).open(newline="") as f:
        return list(csv.DictReader(f))


def test_two_versions_side_by_side_with_flags() -> None:
    """The quick fixture's knot-resolver, copied as knot-resolver@sid with its UDP cost doubled."""
    headline = _rows("headline.csv")
    sid = [{**r, "target": "knot-resolver@sid"} for r in headline if r["target"] == "knot-resolver"]
    for r in sid:
        if (r["figure"], r["transport"]) == ("cpu_us_per_query", "udp"):
            r["value"] = str(2 * float(r["value"]))
    text = versions_tables(
        headline + sid, _rows("consistency.csv"), {"knot-resolver": "5.6.0", "knot-resolver@sid": "6.5.0"}
    )
    lines = text.splitlines()
    assert "### knot-resolver" in lines and "### dnsdist" not in lines  # one version of dnsdist: no table
    assert "| figure | transport | knot-resolver 5.6.0 | knot-resolver@sid 6.5.0 |" in lines
    udp = next(line for line in lines if line.startswith("| UDP, CPU-µs per query"))
    host = next(
        float(r["value"])
        for r in headline
        if r["target"] == "knot-resolver" and r["figure"] == "cpu_us_per_query" and r["transport"] == "udp"
    )
    assert udp == f"| UDP, CPU-µs per query | udp | {host:,.2f} | {2 * host:,.2f} |"
    # knot-resolver's TCP is flagged in the fixture's consistency table: its TCP cells carry (!).
    tcp = next(line for line in lines if line.startswith("| persistent, CPU per query ÷ UDP's | tcp"))
    assert tcp.count("(!)") == 1


def test_a_run_without_tables_is_one_line(tmp_path: Path, capsys: object) -> None:
    shutil.copy(GOLDEN / "headline.csv", tmp_path / "x.csv")
    assert main([str(tmp_path)]) == 2
    (tmp_path / "tables").mkdir()
    for name in ("headline.csv", "consistency.csv"):
        shutil.copy(GOLDEN / name, tmp_path / "tables" / name)
    (tmp_path / "run.json").write_text(json.dumps({"versions": {"dnsdist": "1.7.3"}}))
    assert main([str(tmp_path)]) == 0


def test_docs_versions_page_matches_its_stored_run(tmp_path: Path) -> None:
    """docs/versions.md: its tables are what the kept run in docs/versions-run gives, and every
    figure its prose quotes (decimals and bracketed intervals) stands in those tables."""
    import re

    from dnscost.analysis import analyze, write_tables

    repo = Path(__file__).resolve().parents[2]
    run = repo / "docs" / "versions-run"
    a = analyze(run)
    write_tables(a, tmp_path)
    with (tmp_path / "headline.csv").open(newline="") as f:
        headline = list(csv.DictReader(f))
    with (tmp_path / "consistency.csv").open(newline="") as f:
        consistency = list(csv.DictReader(f))
    versions = json.loads((run / "run.json").read_text())["versions"]
    tables = versions_tables(headline, consistency, versions)
    page = (repo / "docs" / "versions.md").read_text()
    assert tables.strip() in page
    prose = page.split("## What changed")[1].split("## The tables")[0]
    quoted = re.findall(r"\[\d[\d.,]*-\d[\d.,]*\]|\d+\.\d+", prose)
    assert len(quoted) > 30
    missing = [q for q in quoted if q not in tables]
    assert not missing, missing
    udp = {
        r["target"]: float(r["value"]) for r in headline if (r["figure"], r["transport"]) == ("cpu_us_per_query", "udp")
    }
    assert round(100 * (udp["knot-resolver@sid"] / udp["knot-resolver"] - 1)) == 45  # "45 % more"
    # "the kernel saw dnsdist still accepting 786 of those connections": a second observer.
    trials = {r["id"]: r for r in a.tables["trials"].rows}
    late = trials["memory-dnsdist@trixie-dot-c2000-r0"]
    assert late["connections_established"] == 0 and "not-persistent" in late["flags"]
    assert f"still accepting {late['kernel_passive_opens']:.0f} of those connections" in " ".join(page.split())


def test_docs_dnsdist_quic_page_matches_its_stored_run(tmp_path: Path) -> None:
    """docs/dnsdist-quic.md: its table is what the kept run in docs/dnsdist-quic-run gives, every
    figure its prose quotes stands in that table, and each verdict it states holds there."""
    import re

    from dnscost.analysis import analyze, write_tables

    repo = Path(__file__).resolve().parents[2]
    run = repo / "docs" / "dnsdist-quic-run"
    write_tables(analyze(run), tmp_path)
    with (tmp_path / "headline.csv").open(newline="") as f:
        headline = list(csv.DictReader(f))
    with (tmp_path / "consistency.csv").open(newline="") as f:
        consistency = list(csv.DictReader(f))
    versions = json.loads((run / "run.json").read_text())["versions"]
    tables = versions_tables(headline, consistency, versions, together=True)
    page = (repo / "docs" / "dnsdist-quic.md").read_text()
    assert tables.strip() in page
    prose = page.split("## What it shows")[1].split("## The table")[0]
    quoted = re.findall(r"\[\d[\d.,]*-\d[\d.,]*\]|\d+\.\d+", prose)
    assert len(quoted) > 30
    assert not [q for q in quoted if q not in tables]

    def cell(target: str, figure: str, transport: str, profile: str = "persistent") -> tuple[float, float, float]:
        key = (figure, transport, profile)
        r = next(
            r for r in headline if r["target"].startswith(target) and (r["figure"], r["transport"], r["profile"]) == key
        )
        return float(r["value"]), float(r["low"]), float(r["high"])

    udp = {t: cell(t, "cpu_us_per_query", "udp")[0] for t in ("coredns", "dnsdist")}
    assert round(udp["coredns"] / udp["dnsdist"]) == 3  # "three times cheaper"
    dq = "dnsdist@"

    def apart(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:  # a dearer than b
        return a[1] > b[2]

    def overlap(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
        return a[1] <= b[2] and b[1] <= a[2]

    assert overlap(cell(dq, "cpu_ratio_to_udp", "doq"), cell(dq, "cpu_ratio_to_udp", "dot"))
    assert apart(cell(dq, "cpu_ratio_to_udp", "doh3"), cell(dq, "cpu_ratio_to_udp", "doh"))
    assert apart(cell("coredns", "cpu_ratio_to_udp", "doh"), cell("coredns", "cpu_ratio_to_udp", "doh3"))
    assert apart(cell(dq, "cpu_us_per_handshake", "dot", "full"), cell(dq, "cpu_us_per_handshake", "doq", "full"))
    assert apart(cell(dq, "cpu_us_per_handshake", "doh", "full"), cell(dq, "cpu_us_per_handshake", "doh3", "full"))
    assert apart(
        cell("coredns", "cpu_us_per_handshake", "doq", "full"), cell("coredns", "cpu_us_per_handshake", "dot", "full")
    )
    for t in ("doq", "doh3"):  # "less than half"
        assert (
            2 * cell(dq, "memory_bytes_per_connection", t, "idle")[0]
            < cell("coredns", "memory_bytes_per_connection", t, "idle")[0]
        )
    # The flags the page names, by the consistency table.
    flags = {(r["target"].partition("@")[0], r["transport"], r["flag"]) for r in consistency}
    assert {("coredns", "tcp", "inconsistent-layering"), ("dnsdist", "tcp", "inconsistent-layering")} <= flags
    assert ("coredns", "dot", "inconsistent-memory") in flags
