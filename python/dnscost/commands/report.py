"""``dnscost report``: a run's tables, figures and report.html computed again from its stored
records, the headline figures printed (and ``--check``: the report opened in headless Chromium)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dnscost.errors import DnscostError, TargetError

__all__ = ["add_parser", "main", "make_report"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rep = sub.add_parser("report", help="recompute tables, figures and report.html of a run")
    rep.add_argument("run_dir", type=Path)
    rep.add_argument("--check", action="store_true", help="open the report in headless Chromium and check it")


def make_report(run_dir: Path) -> Path:
    """Tables, figures and report.html of a run; prints the headline figures."""
    from dnscost.analysis import analyze, headline, write_tables
    from dnscost.analysis.load import damage_notes, status_note
    from dnscost.report import render_report
    from dnscost.report.headline import format_headline, format_population

    a = analyze(run_dir)
    for line in damage_notes(run_dir, a.trials):
        print(f"dnscost: {line}", file=sys.stderr)
    if not any(t.get("status") == "done" for t in a.trials):
        raise TargetError(f"{run_dir}: no trial of this run finished, so there is nothing to report")
    status = status_note(a.run, a.trials)
    if status is not None:
        print(f"dnscost: {run_dir} {status}; the report covers those", file=sys.stderr)
    write_tables(a, run_dir / "tables")
    rows = headline(a)
    path = render_report(a, run_dir, headline=rows)
    for line in format_headline(rows, a.tables["consistency"].rows, a.tables["clients"].rows):
        print(line)
    for line in format_population(a.tables["population"].rows):
        print(line)
    return path


def main(a: argparse.Namespace) -> int:
    path = make_report(a.run_dir)
    print(f"report: {path}")
    if a.check:
        from dnscost.report.browser import check

        result = check(path, a.run_dir / "report.png")
        print(
            f"browser: {result.figures_rendered}/{result.figures_total} figures rendered, "
            f"{len(result.console_errors)} console errors, screenshot {result.screenshot}"
        )
        if not result.ok:
            raise DnscostError(f"{path}: the report did not render cleanly in Chromium: {result.console_errors}")
    return 0
