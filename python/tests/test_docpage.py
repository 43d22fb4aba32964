"""Docs pages rendered from a run's tables (:mod:`dnscost.report.docpage`): numbers come from the
rows, a verdict the data contradict stops the rendering, and ``--check`` catches a page that
drifted from its tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dnscost.errors import UsageError
from dnscost.report.docpage import InvalidGroup, invalid_trials, main, render_page

CONNECTIONS = """target,transport,connections,qps_median,share_of_udp
dnsdist,tcp,1000,116382.0,0.469
dnsdist,dot,1000,82445.75,0.333
"""


@pytest.fixture
def run(tmp_path: Path) -> Path:
    d = tmp_path / "study-run"
    (d / "tables").mkdir(parents=True)
    (d / "tables" / "connections.csv").write_text(CONNECTIONS)
    (d / "run.json").write_text(json.dumps({"run_id": "r1", "created_unix_ms": 1795605080000, "plan": []}))
    return d


def _page(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "page.md.j2"
    p.write_text(text)
    return p


def test_numbers_come_from_the_rows(run: Path, tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        '{% set c = t("connections", transport="dot", connections=1000) %}'
        "{{ run.run_id }} {{ run.created_unix_ms | utc }}: DoT {{ c.qps_median | k }}, "
        '{{ (c.qps_median / t("connections", transport="tcp").qps_median) | f(2) }} of TCP, '
        "{{ c.share_of_udp | pct }}\n",
    )
    assert render_page(page, run) == "r1 2026-11-25 11:11: DoT 82 k, 0.71 of TCP, 33 %\n"


def test_a_verdict_the_data_contradict_stops_the_rendering(run: Path, tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        '{% set c = rows("connections") %}{{ require(c[1].qps_median > c[0].qps_median, "DoT faster than TCP") }}\n',
    )
    with pytest.raises(UsageError, match="the tables contradict the page: DoT faster than TCP"):
        render_page(page, run)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ('t("connections", transport="doh")', "connections: 0 rows with transport='doh', not one"),
        ('t("connections")', "connections: 2 rows with , not one"),
        ('t("connections", lifetime="1s")', "connections: no column lifetime"),
        ('t("latency")', "latency.csv: no such table"),
    ],
)
def test_a_row_that_is_not_one_is_an_error(run: Path, tmp_path: Path, call: str, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        render_page(_page(tmp_path, "{{ " + call + " }}\n"), run)


def test_check_finds_a_page_that_drifted(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    template = _page(tmp_path, '{{ t("connections", transport="tcp").qps_median | n }} qps\n')
    page = tmp_path / "page.md"
    assert main([str(template), str(run), str(page)]) == 0
    assert page.read_text() == "116 382 qps\n"
    assert main([str(template), str(run), str(page), "--check"]) == 0
    page.write_text("116 000 qps\n")  # typed by hand
    assert main([str(template), str(run), str(page), "--check"]) == 1
    out, err = capsys.readouterr()
    assert "-116 000 qps" in out and "+116 382 qps" in out
    assert err.strip().endswith("is not what " + str(run) + "'s tables give: render it again")


def test_a_run_without_tables_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    template = _page(tmp_path, "x\n")
    assert main([str(template), str(tmp_path), str(tmp_path / "out.md")]) == 2
    assert (
        capsys.readouterr().err
        == f"docpage: {tmp_path}: no tables/ to render from (dnscost report {tmp_path} writes them)\n"
    )


def test_invalid_trials_are_grouped_by_flags_with_their_rounds() -> None:
    def trial(rnd: int, flags: str, **kw: object) -> dict[str, object]:
        base = {
            "status": "done",
            "valid": False,
            "flags": flags,
            "round": rnd,
            "kind": "load",
            "group": "establishment",
        }
        return {**base, "target": "knot-resolver", "transport": "tcp", "lifetime": "1q", "connections": 1000, **kw}

    rows = [trial(r, "generator-bound") for r in range(3)]
    rows += [trial(1, "not-persistent", transport="dot", lifetime="forever", cert_key="rsa-2048")]
    rows += [trial(0, "", valid=True), trial(2, "loss", status="failed")]
    assert invalid_trials(rows) == [
        InvalidGroup("generator-bound", 3, ["knot-resolver's TCP at one query per connection, every round"]),
        InvalidGroup("not-persistent", 1, ["knot-resolver's DoT on persistent connections (RSA-2048), one round"]),
    ]


def test_an_empty_cell_names_the_template_line(run: Path, tmp_path: Path) -> None:
    """A number the tables do not have (an empty cell) stops the rendering with the line of the
    template that asked for it, so its author finds the sentence to make conditional."""
    page = _page(tmp_path, 'line one\n{{ t("connections", transport="dot").missing_column | f(1) }}\n')
    table = CONNECTIONS.replace("qps_median,", "qps_median,missing_column,")
    table = table.replace("116382.0,", "116382.0,,").replace("82445.75,", "82445.75,,")
    (run / "tables" / "connections.csv").write_text(table)
    with pytest.raises(UsageError, match=r"page\.md\.j2 line 2: not a number: None"):
        render_page(page, run)
