"""A trial over time (analysis/series.py, report/series.py), on kept runs of real trials: the
seconds add up to what the trial's summary says of its window (the engine's own count, and the
meter's window read by meter/summary.py), and the report draws a page per trial, linked."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from dnscost.analysis.load import load_run_series
from dnscost.analysis.series import SERIES_COLUMNS
from dnscost.report.series import PANELS, page_name, series_svg

DOCS = Path(__file__).resolve().parents[2] / "docs"
ONE = DOCS / "findings" / "knot-tcp" / "meter-tcp-f16-r0"  # one engine, 1 000 TCP connections, 10 s
CLUSTER = DOCS / "findings" / "knot-tcp" / "scale-run"  # 8 engines' records merged per trial


@pytest.mark.parametrize("run", [ONE, CLUSTER], ids=["one-engine", "cluster"])
def test_the_seconds_add_up_to_the_trials_window(run: Path) -> None:
    _, trials, rows = load_run_series(run)
    for trial in trials:
        if trial.get("kind") != "load":
            continue
        summary = trial["summary"]
        mine = [r for r in rows if r["trial"] == trial["id"]]
        assert mine and set(mine[0]) == set(SERIES_COLUMNS)
        assert [r["index"] for r in mine] == sorted(r["index"] for r in mine)
        measured = [r for r in mine if r["phase"] == "measure"]
        seconds = [r["end_s"] - r["start_s"] for r in measured]
        # The measured seconds tile the summary's window, from 0.
        assert measured[0]["start_s"] == 0
        assert sum(seconds) == pytest.approx(summary["measured_s"], abs=1e-6)
        # The engine's answers in those seconds are its summary's count of the window.
        answered = sum(r["answered_qps"] * s for r, s in zip(measured, seconds, strict=True))
        assert answered == pytest.approx(summary["queries_answered"], abs=0.5)
        # The target's CPU and page faults over those seconds are the meter's over the window.
        cpu = sum(r["target_cpu_share"] * s * 1e6 for r, s in zip(measured, seconds, strict=True))
        assert cpu == pytest.approx(summary["target_cpu_us"], rel=1e-6)
        faults = sum(r["target_page_faults_per_s"] * s for r, s in zip(measured, seconds, strict=True))
        assert faults == pytest.approx(summary["target_page_faults_per_query"] * summary["queries_answered"], rel=1e-6)
        # Open connections as the engine counted them: the trial's persistent connections.
        if trial["transport"] != "udp":
            held = [r["connections_open"] for r in measured[:-1]]
            assert min(held) >= 0.95 * trial["engine_config"]["connections"]


def test_a_trial_s_figure_has_a_point_per_second_in_every_panel() -> None:
    _, _, rows = load_run_series(ONE)
    svg = series_svg(rows)
    polylines = re.findall(r'<polyline points="([^"]+)"', svg)
    # Every line of every panel has a value in each second (latency in every one: answers came).
    assert len(polylines) == sum(len(p.lines) for p in PANELS)
    assert all(len(p.split()) == len(rows) for p in polylines)
    assert series_svg([]) == ""


def test_the_report_links_every_trial_to_its_page(tmp_path: Path) -> None:
    from dnscost.report.html import write_report

    run = tmp_path / "run"
    shutil.copytree(ONE, run)
    report = write_report(run).read_text()
    _, trials, _ = load_run_series(run)
    (trial,) = trials
    page = run / page_name(str(trial["id"]))
    assert page.is_file()
    assert f'href="{page_name(str(trial["id"]))}"' in report
    text = page.read_text()
    assert 'href="../report.html"' in text and "<polyline" in text
    # The page's table has a row per second of the series table the run wrote.
    series_csv = (run / "tables" / "series.csv").read_text().splitlines()
    assert text.count("<tr") - 1 == len(series_csv) - 1
