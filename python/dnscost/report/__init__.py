"""The run's report: figures (:mod:`~dnscost.report.figures`), the study's published figures
(:mod:`~dnscost.study`) and ours beside them point by point (:mod:`~dnscost.report.points`), the
self-contained HTML report (:mod:`~dnscost.report.html`), the render kit every report page uses
(:mod:`~dnscost.report.render`: formatted cells and tables, inline SVG, the templates) and the
report's check in a real browser (:mod:`~dnscost.report.browser`). Reads stored results only;
the browser check is the one place that starts a process (Chromium).

::

    write_report(run_dir) -> Path            tables/, figures/ and report.html of a run
    render_report(analysis, run_dir) -> Path figures/ and report.html from an Analysis
    save_figures(analysis, out_dir)          every figure as SVG and PNG
    check(html, screenshot) -> BrowserCheck  figures rendered, console errors, screenshot
"""

from __future__ import annotations

from dnscost.report.browser import BrowserCheck, check
from dnscost.report.figures import save_figures
from dnscost.report.html import render_report, write_report

__all__ = ["BrowserCheck", "check", "render_report", "save_figures", "write_report"]
