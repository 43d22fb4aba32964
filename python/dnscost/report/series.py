"""A trial over time, drawn: the ``series`` table's rows (:mod:`dnscost.analysis.series`) as one
SVG of stacked panels sharing the time axis, and a page per trial (``series/<trial>.html``)
holding it, the trial's parameters and the rows. Plain SVG written here, not matplotlib: a study
has hundreds of trials, and each page must cost milliseconds."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from urllib.parse import quote

from dnscost.analysis.series import SERIES_COLUMNS
from dnscost.contract import Row

PageRenderer = Callable[[str, Mapping[str, object], Sequence[Row], str], str]
"""What :func:`write_pages` calls to fill a page: ``(trial id, its row of the trials table, its
series rows, its SVG) -> HTML``."""

__all__ = [
    "PANELS",
    "TABLE_COLUMNS",
    "TABLE_HEADERS",
    "PageRenderer",
    "Panel",
    "page_name",
    "series_by_trial",
    "series_svg",
    "write_pages",
]

WIDTH, PANEL_HEIGHT, LEFT, RIGHT, TOP, GAP = 760, 92, 78, 150, 8, 26


@dataclass(frozen=True)
class Panel:
    """One panel: its title, its unit's scale (the column's value times ``scale``) and its lines
    (column, label, colour)."""

    title: str
    scale: float
    lines: tuple[tuple[str, str, str], ...]


PANELS: tuple[Panel, ...] = (
    Panel("rate, qps", 1.0, (("offered_qps", "offered", "#888888"), ("answered_qps", "answered", "#1f77b4"))),
    Panel("latency, ms", 1e-3, (("latency_p50_us", "p50", "#2ca02c"), ("latency_p99_us", "p99", "#d62728"))),
    Panel("connections open", 1.0, (("connections_open", "open", "#9467bd"),)),
    Panel(
        "per second",
        1.0,
        (
            ("connections_opened_per_s", "opened", "#888888"),
            ("handshakes_full_per_s", "full handshakes", "#ff7f0e"),
            ("handshakes_resumed_per_s", "resumed", "#17becf"),
            ("zero_rtt_accepted_per_s", "0-RTT taken", "#bcbd22"),
            ("closed_by_server_per_s", "closed by server", "#8c564b"),
        ),
    ),
    Panel("target CPU, % of a core", 100.0, (("target_cpu_share", "CPU", "#e377c2"),)),
    Panel("target memory, MiB", 1 / 2**20, (("target_memory_bytes", "memory", "#7f7f7f"),)),
)
"""What a trial's figure shows, top to bottom."""


TABLE_COLUMNS = [c for c in SERIES_COLUMNS if c != "trial"]
"""The columns of a trial page's table: the ``series`` table's, as named there."""
TABLE_HEADERS = [c.replace("_", " ") for c in TABLE_COLUMNS]


def page_name(trial_id: str) -> str:
    """A trial's page, relative to the report: ``series/<id>.html`` (the id quoted for a URL)."""
    return f"series/{quote(trial_id, safe='@')}.html"


def series_by_trial(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """The ``series`` table's rows grouped by trial, in their order."""
    out: dict[str, list[Row]] = {}
    for r in rows:
        out.setdefault(str(r.get("trial")), []).append(r)
    return out


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _nice(top: float) -> float:
    """The axis's top: ``top`` rounded up to 1, 2 or 5 times a power of ten."""
    if top <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(top))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= top))


def _label(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def series_svg(rows: Sequence[Mapping[str, object]]) -> str:
    """The trial's rows as stacked panels (:data:`PANELS`) over seconds from the start of the
    measured period; the warm-up and the drain shaded. Empty string without rows."""
    points = [r for r in rows if _num(r.get("end_s")) is not None]
    if not points:
        return ""
    t0 = min(_num(r.get("start_s")) or 0.0 for r in points)
    t1 = max(_num(r.get("end_s")) or 0.0 for r in points)
    span = max(t1 - t0, 1e-9)
    plot_w = WIDTH - LEFT - RIGHT
    height = TOP + len(PANELS) * (PANEL_HEIGHT + GAP) + 20

    def x(t: float) -> float:
        return LEFT + (t - t0) / span * plot_w

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="series" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">'
    ]
    measured = [r for r in points if r.get("phase") == "measure"]
    m0 = min((_num(r.get("start_s")) or 0.0 for r in measured), default=t0)
    m1 = max((_num(r.get("end_s")) or 0.0 for r in measured), default=t1)
    for k, panel in enumerate(PANELS):
        top = TOP + k * (PANEL_HEIGHT + GAP)
        bottom = top + PANEL_HEIGHT
        values = [
            (v * panel.scale) for column, _, _ in panel.lines for r in points if (v := _num(r.get(column))) is not None
        ]
        peak = _nice(max(values, default=0.0))
        out.append(f'<text x="{LEFT}" y="{top + 10}" font-weight="bold">{escape(panel.title)}</text>')
        # The measured period's edges; outside them, the warm-up and the drain.
        if m0 > t0:
            out.append(
                f'<rect x="{x(t0):.1f}" y="{top + 14}" width="{x(m0) - x(t0):.1f}" '
                f'height="{PANEL_HEIGHT - 14}" fill="#f2f2f2"/>'
            )
        if m1 < t1:
            out.append(
                f'<rect x="{x(m1):.1f}" y="{top + 14}" width="{x(t1) - x(m1):.1f}" '
                f'height="{PANEL_HEIGHT - 14}" fill="#f2f2f2"/>'
            )
        out.append(f'<line x1="{LEFT}" y1="{bottom}" x2="{LEFT + plot_w}" y2="{bottom}" stroke="#444"/>')
        out.append(f'<line x1="{LEFT}" y1="{top + 14}" x2="{LEFT}" y2="{bottom}" stroke="#444"/>')
        for frac in (0.0, 0.5, 1.0):
            y = bottom - frac * (PANEL_HEIGHT - 14)
            out.append(f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{_label(peak * frac)}</text>')
        for j, (column, label, colour) in enumerate(panel.lines):
            pts = [
                (
                    x(((_num(r.get("start_s")) or 0.0) + (_num(r.get("end_s")) or 0.0)) / 2),
                    bottom - (v * panel.scale) / peak * (PANEL_HEIGHT - 14),
                )
                for r in points
                if (v := _num(r.get(column))) is not None
            ]
            if pts:
                path = " ".join(f"{px:.1f},{py:.1f}" for px, py in pts)
                out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
                if len(pts) == 1:
                    out.append(f'<circle cx="{pts[0][0]:.1f}" cy="{pts[0][1]:.1f}" r="2" fill="{colour}"/>')
            ly = top + 24 + j * 13
            out.append(
                f'<line x1="{LEFT + plot_w + 10}" y1="{ly - 4}" x2="{LEFT + plot_w + 24}" y2="{ly - 4}" '
                f'stroke="{colour}" stroke-width="2"/>'
            )
            out.append(f'<text x="{LEFT + plot_w + 28}" y="{ly}">{escape(label)}</text>')
    axis = TOP + len(PANELS) * (PANEL_HEIGHT + GAP) - GAP + 14
    step = _nice(span / 8)
    for k in range(math.ceil(t0 / step), math.floor(t1 / step) + 1):
        t = round(k * step, 9)
        out.append(f'<text x="{x(t):.1f}" y="{axis}" text-anchor="middle">{t:g} s</text>')
    out.append("</svg>")
    return "".join(out)


def write_pages(run_dir: Path, series: Sequence[Row], trials: Sequence[Row], render: PageRenderer) -> dict[str, str]:
    """Writes a page per trial that has rows (``run_dir/series/<id>.html``) and returns each
    trial's page, relative to the report. ``trials`` are the ``trials`` table's rows (its
    parameters and validity), ``render`` fills the page's template."""
    by_trial = series_by_trial(series)
    about = {str(t.get("id")): t for t in trials}
    pages: dict[str, str] = {}
    if not by_trial:
        return pages
    (run_dir / "series").mkdir(parents=True, exist_ok=True)
    for trial_id, rows in by_trial.items():
        name = page_name(trial_id)
        (run_dir / "series" / Path(name).name).write_text(
            render(trial_id, about.get(trial_id, {}), rows, series_svg(rows)), encoding="utf-8"
        )
        pages[trial_id] = name
    return pages
