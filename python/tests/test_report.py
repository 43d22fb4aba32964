"""The report: figures from a hand-built Analysis (every table of docs/results.md), the
self-contained HTML, the comparison with the study, and the report in a real browser (headless
Chromium; required in CI). Screenshots are kept under $DNSCOST_ARTIFACTS when set."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from conftest import need
from dnscost import analysis, study
from dnscost.analysis import COLUMNS, Analysis, Table
from dnscost.errors import MachineError
from dnscost.report import browser
from dnscost.report.figures import FIGURES, save_figures
from dnscost.report.html import energy_source_label, render_report, write_report

TARGETS = {"knot": 200_000.0, "dnsdist": 400_000.0}
ONE_TARGET = {"knot": 200_000.0}
SHARE = {"tcp": 0.7, "dot": 0.6, "doh": 0.5}
LIFETIME_SHARE = {"forever": 1.0, "30s": 0.9, "1s": 0.4, "1q": 0.03}
CPU_US = {"udp": 5.0, "tcp": 7.0, "dot": 9.0, "doh": 10.0}


def _table(name: str, rows: list[dict[str, Any]]) -> Table:
    """A table with exactly the columns of docs/results.md, missing values None."""
    return Table(name, COLUMNS[name], [{c: r.get(c) for c in COLUMNS[name]} for r in rows])


def _validity(valid: bool) -> dict[str, Any]:
    return {
        "generator_kept_up": valid,
        "loss": 0.001 if valid else 0.05,
        "accounting_balanced": True,
        "cache_hit_ratio": 1.0,
        "engine_answered": 1000,
        "target_answered": 1000,
        "answer_count_agreement": 1.0,
        "flags": [] if valid else ["generator-behind", "loss"],
        "valid": valid,
    }


def make_analysis(*, targets: dict[str, float] | None = None) -> Analysis:
    """Two targets, every transport and lifetime profile, one invalid trial."""
    targets = TARGETS if targets is None else targets
    trials: list[dict[str, Any]] = []
    memory_points, memory_fit, connections, establishment, energy, latency = [], [], [], [], [], []
    cost_model, cost_model_fit, baseline, trial_rows, curves = [], [], [], [], []
    for target, udp in targets.items():
        for transport, base in (("udp", 4.0), ("dot", 8.0)):
            for share, times in ((0.01, 4.0), (0.1, 3.0), (1.0, 1.0)):
                cpu = base * times
                curves.append(
                    {"target": target, "transport": transport, "lifetime": "forever", "resumption": 0.0,
                     "early_data": 0.0, "cert_key": None, "connections": 16, "share": share, "reps": 3,
                     "valid_reps": 3, "offered_qps": share * udp, "answered_qps": share * udp,
                     "cpu_us_per_query": cpu, "cpu_us_per_query_min": 0.9 * cpu, "cpu_us_per_query_max": 1.1 * cpu,
                     "ratio_to_saturation": times, "ratio_to_saturation_min": 0.9 * times,
                     "ratio_to_saturation_max": 1.1 * times, "wakeups_per_query": 0.5 * (1 - share),
                     "runs_per_query": 0.5 * (1 - share), "softirq_us_per_query": None}
                )  # fmt: skip
        baseline.append(
            {
                "target": target,
                "udp_max_qps": udp,
                "udp_saturation_qps": udp,
                "udp_reference_qps": udp,
                "offered_qps": udp,
                "loss": 0.002,
                "cpu_us_per_query": 5.0,
                "valid": True,
            }
        )
        energy.append(
            {
                "target": target,
                "transport": "udp",
                "lifetime": None,
                "resumption": None,
                "cpu_us_per_query": CPU_US["udp"],
                "energy_j_per_query": 1.8e-5,
                "kwh_per_day_at_10k_qps": 0.0043,
                "cores_at_10k_qps": 0.05,
                "energy_source": "model",
            }
        )
        for transport, share in SHARE.items():
            user, kernel = 20_000.0 + 5_000 * len(transport), 9_000.0
            memory_fit.append(
                {
                    "target": target,
                    "transport": transport,
                    "user_bytes_per_connection": user,
                    "user_ci95_low": user * 0.9,
                    "user_ci95_high": user * 1.1,
                    "kernel_bytes_per_connection": kernel,
                    "kernel_ci95_low": kernel * 0.95,
                    "kernel_ci95_high": kernel * 1.05,
                    "user_r2": 0.99,
                    "kernel_r2": 0.98,
                    "points": 4,
                    "max_connections": 8000,
                }
            )
            for n in (1000, 2000, 4000, 8000):
                memory_points.append(
                    {
                        "target": target,
                        "transport": transport,
                        "connections": n,
                        "rss_delta_bytes": user * n + 1e6,
                        "kernel_delta_bytes": kernel * n,
                        "tcp_delta_bytes": 4000.0 * n,
                        "valid": n != 8000 or transport != "doh",
                    }
                )
            for n in (1, 10, 100, 1000, 10_000):
                med = udp * share * (0.5 if n == 1 else 1.0)
                connections.append(
                    {
                        "target": target,
                        "transport": transport,
                        "connections": n,
                        "qps_min": med * 0.95,
                        "qps_median": med,
                        "qps_max": med * 1.03,
                        "reps": 3,
                        "valid_reps": 3,
                        "udp_reference_qps": udp,
                        "share_of_udp": med / udp,
                    }
                )
            for lifetime, factor in LIFETIME_SHARE.items():
                for resumption in (0.0, 1.0) if transport != "tcp" and lifetime != "forever" else (0.0,):
                    med = udp * share * factor * (1.3 if resumption else 1.0)
                    cpu = CPU_US[transport] / factor
                    establishment.append(
                        {
                            "target": target,
                            "transport": transport,
                            "lifetime": lifetime,
                            "resumption": resumption,
                            "qps_min": med * 0.9,
                            "qps_median": med,
                            "qps_max": med * 1.1,
                            "reps": 3,
                            "valid_reps": 3,
                            "udp_reference_qps": udp,
                            "share_of_udp": med / udp,
                            "cpu_us_per_query": cpu,
                            "handshakes_per_s": med if lifetime == "1q" else med / 100,
                        }
                    )
                    energy.append(
                        {
                            "target": target,
                            "transport": transport,
                            "lifetime": lifetime,
                            "resumption": resumption,
                            "cpu_us_per_query": cpu,
                            "energy_j_per_query": cpu * 2.76e-6,
                            "kwh_per_day_at_10k_qps": cpu * 2.76e-6 * 10_000 * 86_400 / 3.6e6,
                            "cores_at_10k_qps": cpu * 10_000 / 1e6,
                            "energy_source": "model",
                        }
                    )
                    latency.append(
                        {
                            "target": target,
                            "transport": transport,
                            "group": "establishment",
                            "lifetime": lifetime,
                            "resumption": resumption,
                            "connections": 100,
                            "reps": 3,
                            "p50_us": 200.0 / factor,
                            "p90_us": 400.0 / factor,
                            "p99_us": 900.0 / factor,
                            "p999_us": 2000.0 / factor,
                        }
                    )
            for term, us in (
                ("query", 8.0),
                ("full_handshake", 900.0),
                ("resumed_handshake", 300.0),
                ("connection_second", 0.5),
            ):
                if transport == "tcp" and term == "resumed_handshake":
                    continue
                # knot's TCP handshake: the trials could not tell it from zero
                lost = target == "knot" and transport == "tcp" and term == "full_handshake"
                cost_model.append(
                    {
                        "target": target,
                        "transport": transport,
                        "term": term,
                        "us": None if lost else us,
                        "ci95_low": 0.0 if lost else us * 0.8,
                        "ci95_high": 4321.0 if lost else us * 1.2,
                        "status": "not identified" if lost else "identified",
                        "reason": "95 % interval from 0 to 4.32e+03 µs" if lost else None,
                    }
                )
            cost_model_fit.append(
                {
                    "target": target,
                    "transport": transport,
                    "trials": 12,
                    "terms": 3 if transport == "tcp" else 4,
                    "terms_identified": 2
                    if target == "knot" and transport == "tcp"
                    else 3
                    if transport == "tcp"
                    else 4,
                    "r2": 0.97,
                    "holdout_trials": 12,
                    "holdout_median_abs_error_pct": 4.0,
                    "holdout_max_abs_error_pct": 11.0,
                    "resamples": 1000,
                }
            )
            for rep in (0, 1):
                valid = not (target == "knot" and transport == "doh" and rep == 1)
                trial_id = f"establishment-{target}-{transport}-c100-l1q-res0-r{rep}"
                trials.append(
                    {
                        "id": trial_id,
                        "group": "establishment",
                        "kind": "load",
                        "target": target,
                        "transport": transport,
                        "rep": rep,
                        "status": "done",
                        "summary": {"validity": _validity(valid)},
                    }
                )
                trial_rows.append(
                    {
                        "id": trial_id,
                        "group": "establishment",
                        "target": target,
                        "transport": transport,
                        "status": "done",
                        "valid": valid,
                        "flags": "" if valid else "generator-behind,loss",
                    }
                )
    run = {
        "format_version": 2,
        "dnscost_version": "0.1.0",
        "experiment": "study",
        "run_id": "20261121-101500-1234",
        "created_unix_ms": 1_795_000_000_000,
        "finished_unix_ms": 1_795_000_600_000,
        "command": ["dnscost", "reproduce", "--quick"],
        "status": "done",
        "spec": {"name": "study"},
        "spec_toml": 'name = "study"\n# <escaped & kept>\n',
        "machine": {
            "cpus": 2,
            "cpu_model": "Test CPU <2 GHz>",
            "kernel": "6.1.0",
            "cgroup_version": 1,
            "rapl_readable": False,
        },
        "versions": {"dnsdist": "1.7.3", "knot-resolver": "5.6.0", "dnscost-engine": "0.1.0"},
        "plan": [{"id": t["id"]} for t in trials] + [{"id": "connections-knot-dot-c10-r0"}],
        "trials": {
            **{t["id"]: {"status": "done"} for t in trials},
            "connections-knot-dot-c10-r0": {"status": "failed", "error": "target died"},
        },
    }
    tables = {
        t.name: t
        for t in (
            _table("trials", trial_rows),
            _table("baseline", baseline),
            _table("memory_points", memory_points),
            _table("memory_fit", memory_fit),
            _table("connections", connections),
            _table("establishment", establishment),
            _table("energy", energy),
            _table("latency", latency),
            _table("cost_curve", curves),
            _table("cost_model", cost_model),
            _table("cost_model_fit", cost_model_fit),
            _table("rounds", []),
            _table("headline", []),
            _table("consistency", []),
        )
    }
    return Analysis(run=run, trials=trials, tables=tables)


def empty_analysis() -> Analysis:
    """A run that measured nothing: no trials, no rows."""
    return Analysis(run={"run_id": "empty", "status": "failed"}, trials=[], tables={})


def _tables_only(a: Analysis, *names: str) -> Analysis:
    """The same run with every other table present but empty, as analyze() gives for a run that
    held only some experiments."""
    tables = {n: Table(n, COLUMNS[n], list(a.tables[n].rows) if n in names else []) for n in COLUMNS}
    return Analysis(run=a.run, trials=a.trials, tables=tables)


def _artefact(tmp_path: Path, name: str) -> Path:
    root = os.environ.get("DNSCOST_ARTIFACTS")
    directory = Path(root) if root else tmp_path
    directory.mkdir(parents=True, exist_ok=True)
    return directory / name


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _need_chromium() -> None:
    need(shutil.which("chromium") is not None, "needs chromium (Debian package chromium)")


# Figures


def test_every_figure_is_saved_as_svg_and_png(tmp_path: Path) -> None:
    saved = save_figures(make_analysis(), tmp_path)
    assert list(saved) == list(FIGURES)
    for svg, png in saved.values():
        assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()
        assert _png_size(png)[0] > 500


def test_figures_are_deterministic(tmp_path: Path) -> None:
    first = save_figures(make_analysis(targets=ONE_TARGET), tmp_path / "a")
    second = save_figures(make_analysis(targets=ONE_TARGET), tmp_path / "b")
    for name in first:
        assert first[name][0].read_bytes() == second[name][0].read_bytes(), name


def test_transport_display_names_are_used(tmp_path: Path) -> None:
    svg = save_figures(make_analysis(targets=ONE_TARGET), tmp_path)["fig4_connections"][0].read_text()
    assert "DoH" in svg and "DoT" in svg and "UDP (" in svg


@pytest.mark.parametrize("make", [empty_analysis, lambda: _tables_only(make_analysis())])
def test_no_data_no_figures(tmp_path: Path, make: Any) -> None:
    assert save_figures(make(), tmp_path) == {}


def test_a_partial_run_gets_the_figures_it_has(tmp_path: Path) -> None:
    a = _tables_only(make_analysis(), "connections", "baseline")
    assert list(save_figures(a, tmp_path)) == ["fig4_connections"]


def test_missing_values_do_not_break_figures(tmp_path: Path) -> None:
    a = make_analysis(targets=ONE_TARGET)
    for table in a.tables.values():
        for k, row in enumerate(table.rows):
            if k % 3 == 0:
                for column in row:
                    if column not in ("target", "transport", "lifetime", "term", "connections"):
                        row[column] = None
    assert save_figures(a, tmp_path)


# HTML


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The report of the hand-built run, rendered once for the tests that only read it."""
    return _report(tmp_path_factory.mktemp("report"))


def _report(tmp_path: Path, a: Analysis | None = None) -> tuple[Path, str]:
    a = make_analysis() if a is None else a
    path = render_report(a, tmp_path, headline=analysis.headline(a) if "trials" in a.tables else [])
    return path, path.read_text()


def test_report_is_self_contained(report: tuple[Path, str]) -> None:
    path, text = report
    assert path.name == "report.html"
    assert not re.search(r"""(src|href|action)\s*=\s*["']?\s*(https?:)?//""", text, re.I)
    assert not re.search(r"<link\b|<img\b|<iframe\b|@import|url\((?!#)", text, re.I)
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        'xmlns:xlink="http://www.w3.org/1999/xlink"', ""
    )
    assert "https://" not in text
    assert text.count("<figure") == len(FIGURES) == text.count("<svg")
    assert "<?xml" not in text and "<!DOCTYPE svg" not in text
    for name in FIGURES:
        assert (path.parent / "figures" / f"{name}.svg").is_file()
        assert (path.parent / "figures" / f"{name}.png").is_file()


def test_the_study_page_beside_the_report(tmp_path: Path) -> None:
    """study.md holds the report's tables as Markdown (the synthetic run's): every row of a table
    has as many cells as its header, and Table I and the point-by-point record are there."""
    a = analysis.analyze(Path(__file__).parent / "fixtures" / "runs" / "synthetic")
    path, _ = _report(tmp_path, a)
    text = (path.parent / "study.md").read_text()
    assert text.startswith("# The study beside ")
    tables: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("| "):
            if not tables or not tables[-1]:
                tables.append([])
            tables[-1].append(line)
        elif tables and tables[-1]:
            tables.append([])
    tables = [t for t in tables if t]
    assert len(tables) >= 9
    for t in tables:
        width = len(re.split(r"(?<!\\)\|", t[0]))
        assert all(len(re.split(r"(?<!\\)\|", row)) == width for row in t), t[0]
        assert re.fullmatch(r"\|( ---:? \|)+", t[1]), t[1]
    headers = [t[0] for t in tables]
    assert any("study, kWh/day" in h and "ours ÷ UDP (study's method, in-round)" in h for h in headers)
    assert "Verdicts: " in text and "verdicts flip" in text
    assert any(h.startswith("| record | study | ours | verdict |") for h in headers)
    assert any("connections | answered qps, median [min-max]" in h for h in headers)
    published = study.published()["table1_kwh"]["dnsdist"]["doh"]["one_query"]
    assert f"| {published:g} |" in text


def test_svg_ids_are_unique_across_figures(report: tuple[Path, str]) -> None:
    _, text = report
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))
    # Every reference inside a figure points at an id of the page.
    refs = set(re.findall(r'(?:url\(#|href="#)([^)"]+)', text))
    assert refs and refs <= set(ids)


def test_report_escapes_text_from_the_run(tmp_path: Path) -> None:
    a = make_analysis(targets=ONE_TARGET)
    a.trials[0]["id"] = "t<script>alert(1)</script>"
    _, text = _report(tmp_path, a)
    assert "Test CPU &lt;2 GHz&gt;" in text and "<2 GHz>" not in text
    assert "# &lt;escaped &amp; kept&gt;" in text
    assert "<script>alert(1)" not in text and "t&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_report_sections(report: tuple[Path, str]) -> None:
    _, text = report
    for anchor in (
        "summary",
        "fig3",
        "fig4",
        "fig5",
        "table1",
        "latency",
        "cost-model",
        "study",
        "validity",
        "machine",
    ):
        assert f'<section id="{anchor}">' in text
    # Table I: transports x profiles as rows, targets as columns, with its energy source.
    table_i = text[
        text.index('<table class="table-i">') : text.index("</table>", text.index('<table class="table-i">'))
    ]
    assert '<th colspan="2">knot</th><th colspan="2">dnsdist</th>' in table_i
    assert table_i.count("<th>kWh/day</th><th>CPU-µs/query</th>") == 2
    assert "1 query, resumed" in table_i
    assert "model (CCF coefficients)" in text
    # The study's figures, with their source.
    assert study.SOURCE in html.unescape(text) and "flamethrower" in text and "20 client machines" in text
    # Versions and machine.
    assert "dnsdist" in text and "1.7.3" in text and "knot-resolver" in text


def test_a_term_the_trials_do_not_identify_is_never_shown_as_zero(report: tuple[Path, str]) -> None:
    _, text = report
    section = text[text.index('<section id="cost-model">') :]
    section = section[: section.index("</section>")]
    row = next(r for r in section.split("<tr") if ">knot<" in r and ">full_handshake<" in r and ">TCP<" in r)
    assert 'class="not-identified"' in row
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    # the estimate's cell says so (with the bound the interval gives); the interval starts at 0
    assert cells[3:] == ["not identified (≤ 4,321)", "0", "4,321", "95 % interval from 0 to 4.32e+03 µs"]
    assert ">2 of 3<" in section


def test_invalid_and_failed_trials_are_highlighted(report: tuple[Path, str]) -> None:
    _, text = report
    invalid_rows = re.findall(r'<tr class="invalid">(.*?)</tr>', text)
    ids = {re.search(r"<td[^>]*>([^<]+)</td>", row).group(1) for row in invalid_rows}  # type: ignore[union-attr]
    assert ids == {"establishment-knot-doh-c100-l1q-res0-r1"}
    assert "generator-behind, loss" in text


def test_report_of_a_run_with_nothing(tmp_path: Path) -> None:
    _, text = _report(tmp_path, empty_analysis())
    assert "<figure" not in text
    assert text.count('class="missing"') >= len(FIGURES)


def test_write_report_from_a_run_directory(tmp_path: Path) -> None:
    """The whole pipeline on a stored run whose only trial failed: tables, report, no figures."""
    run = {
        "format_version": 2,
        "experiment": "study",
        "run_id": "r1",
        "status": "failed",
        "machine": {"cpus": 2},
        "versions": {"dnsdist": "1.7.3"},
        "plan": [
            {
                "id": "baseline-dnsdist-udp-r0",
                "group": "baseline",
                "kind": "search",
                "target": "dnsdist",
                "transport": "udp",
            }
        ],
        "trials": {"baseline-dnsdist-udp-r0": {"status": "failed", "error": "target died"}},
    }
    (tmp_path / "run.json").write_text(json.dumps(run))
    path = write_report(tmp_path)
    text = path.read_text()
    assert (tmp_path / "tables" / "trials.csv").is_file() and (tmp_path / "tables" / "energy.parquet").is_file()
    assert "baseline-dnsdist-udp-r0" in text and "target died" in text
    assert '<tr class="invalid">' in text


def test_a_run_names_the_commit_that_measured_it(tmp_path: Path) -> None:
    """run.json records the checkout's commit, as git itself gives it, and the report prints it."""
    import subprocess

    from dnscost.results import Run

    def git(*args: str) -> str:
        here = Path(__file__).parent
        return subprocess.run(["git", *args], cwd=here, capture_output=True, text=True, check=True).stdout

    run = Run.create(tmp_path / "r", "study", spec={}, spec_toml="", plan=[], facts={}, versions={})
    run.unlock()
    head = git("rev-parse", "HEAD").strip()
    dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    doc = json.loads((tmp_path / "r" / "run.json").read_text())
    assert doc["dnscost_source"] == {"commit": head, "dirty": dirty}
    text = write_report(tmp_path / "r").read_text()
    assert f"commit {head[:10]}{', with changes' if dirty else ''})" in text


def test_write_report_uses_the_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "analyze", lambda run_dir: make_analysis())
    path = write_report(tmp_path)
    assert path.read_text().count("<figure") == len(FIGURES)
    assert (tmp_path / "tables" / "connections.csv").is_file()


# Comparison with the study


def test_energy_source_labels() -> None:
    assert energy_source_label("rapl") == "RAPL"
    assert energy_source_label("model") == "model (CCF coefficients)"
    assert energy_source_label("model+rapl") == "model (CCF coefficients) + RAPL"


# In a browser


def test_report_renders_in_chromium(report: tuple[Path, str], tmp_path: Path) -> None:
    _need_chromium()
    path, _ = report
    shot = _artefact(tmp_path, "report.png")
    result = browser.check(path, shot, timeout_s=90)
    print(f"report screenshot: {result.screenshot}")
    assert result.console_errors == []
    assert (result.figures_rendered, result.figures_total) == (len(FIGURES), len(FIGURES))
    assert result.ok
    width, height = _png_size(shot)
    assert width == 1280 and height > 3000  # the whole page, not the window


def test_empty_report_renders_in_chromium(tmp_path: Path) -> None:
    _need_chromium()
    path, _ = _report(tmp_path, empty_analysis())
    result = browser.check(path, _artefact(tmp_path, "report-empty.png"), timeout_s=90)
    assert result.console_errors == [] and (result.figures_rendered, result.figures_total) == (0, 0)


def test_browser_check_detects_errors(report: tuple[Path, str], tmp_path: Path) -> None:
    """A report spoiled on purpose: a script error, console.error, a missing image and a figure
    that cannot render. Each must be seen."""
    _need_chromium()
    _, text = report
    path = tmp_path / "report.html"
    broken = text.replace("<svg ", '<svg style="display:none" ', 1).replace(
        "</body>",
        '<img src="missing.png" alt=""><script>console.error("deliberate");undefinedFunction();</script></body>',
    )
    path.write_text(broken)
    shot = _artefact(tmp_path, "report-broken.png")
    result = browser.check(path, shot, timeout_s=90)
    print(f"broken report screenshot: {result.screenshot}")
    assert not result.ok
    assert (result.figures_rendered, result.figures_total) == (len(FIGURES) - 1, len(FIGURES))
    errors = "\n".join(result.console_errors)
    assert "undefinedFunction is not defined" in errors
    assert "console.error: deliberate" in errors
    assert "missing.png" in errors
    assert shot.is_file()


def test_browser_check_without_chromium(tmp_path: Path) -> None:
    with pytest.raises(MachineError) as e:
        browser.check(tmp_path / "x.html", tmp_path / "x.png", chromium=str(tmp_path / "no-chromium"))
    assert "\n" not in str(e.value)


def test_browser_check_is_bounded(tmp_path: Path) -> None:
    """A page whose load never ends: the check gives up at its time limit and leaves no browser."""
    _need_chromium()
    page = tmp_path / "hang.html"
    page.write_text("<!DOCTYPE html><html><body><script>for (;;) {}</script></body></html>")
    with pytest.raises(TimeoutError):
        browser.check(page, tmp_path / "hang.png", timeout_s=5)


def test_report_makes_only_the_analyses_the_spec_asks_for(tmp_path: Path) -> None:
    """A real stored run (the analysis fixture), with its spec narrowed to the memory analysis."""
    import json
    import shutil

    from dnscost.report import write_report

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "fixtures" / "runs" / "quick", run, ignore=shutil.ignore_patterns("golden"))
    doc = json.loads((run / "run.json").read_text())
    doc["spec"]["analyses"] = ["memory"]
    (run / "run.json").write_text(json.dumps(doc))
    html = write_report(run).read_text()
    assert 'id="fig3"' in html and 'id="fig5"' not in html and 'id="table1"' not in html
    assert 'href="#fig5"' not in html and 'id="validity"' in html
    assert sorted(p.name for p in (run / "figures").iterdir()) == ["fig3_memory.png", "fig3_memory.svg"]


def test_table_i_as_the_study_measured_it_shows_both_methods_the_study_and_the_verdict() -> None:
    from dnscost.report.html import _study_table1

    rows = [
        {"target": "dnsdist", "transport": "udp", "kwh_study_method": 0.04, "kwh_model": 0.04},
        {
            "target": "dnsdist",
            "transport": "dot",
            "lifetime": "1s",
            "kwh_study_method": 0.2,
            "kwh_model": None,
            "model_status": "not identified",
            "study_kwh": 0.3,
            "ratio_to_udp": 5.0,
            "study_ratio_to_udp": 6.0,
            "verdict": "agree",
        },
    ]
    rows[0].update(model_status="identified", study_kwh=0.05, ratio_to_udp=1.0, model_ratio_to_udp=1.0)
    a = Analysis(run={}, trials=[], tables={"table1": _table("table1", rows)})
    text = _study_table1(a)
    assert "study's method" in text and "cost model at 10 000 qps" in text and "study, kWh/day" in text
    assert ">not identified</td>" in text and '<td class="text">agree</td>' in text
    assert "0.3" in text and "no connection" in text and "1 s" in text
    assert "No Table I cells" in _study_table1(Analysis(run={}, trials=[], tables={}))


def test_table_i_says_which_key_type_the_study_matches() -> None:
    from dnscost.report.html import _study_table1

    rows = [
        {"target": "dnsdist", "transport": "udp", "kwh_study_method": 0.01, "ratio_to_udp": 1.0},
        *(
            {
                "target": "dnsdist",
                "transport": "dot",
                "lifetime": "1q",
                "cert_key": key,
                "ratio_to_udp": ours,
                "study_ratio_to_udp": 189.2,
                "verdict": verdict,
            }
            for key, ours, verdict in (("ecdsa-p256", 90.0, "differ"), ("rsa-2048", 170.0, "agree"))
        ),
    ]
    text = _study_table1(Analysis(run={}, trials=[], tables={"table1": _table("table1", rows)}))
    assert "rsa-2048: 1 of 1 TLS cells agree" in text and "closer: rsa-2048" in text


def test_real_clients_replayed_sit_beside_table_i(tmp_path: Path) -> None:
    """The synthetic run replays two profiles against dnsdist: the report's section shows each
    with its CPU per query over rounds and Table I's synthetic kWh of the same transport, and
    study.md the same table."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "fixtures" / "runs" / "synthetic", run)
    html = write_report(run).read_text()
    section = html[html.index('id="clients"') : html.index('id="latency"')]
    assert "stub-60s" in section and "browser-1s" in section and "Table I: persistent, kWh/day" in section
    assert "600,000" in section  # a client resolving once a minute: 600 000 of them for 10 000 qps
    assert "## Real clients replayed" in (run / "study.md").read_text()
