"""The report's figures, drawn from the derived tables (``docs/results.md``) with matplotlib.

Each ``fig_*`` function takes an :class:`~dnscost.analysis.Analysis` and returns a Figure, or
``None`` when the table it draws is empty or missing: a run that holds only some experiments
still gets a report. Figures are built without pyplot (no global state) on the Agg backend and
saved deterministically (fixed SVG hash salt per figure, no dates).

Display names of transports ("DoH") and of lifetime profiles live here and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from dnscost.analysis import Analysis
from dnscost.analysis.tables import reference_key
from dnscost.contract import Row
from dnscost.spec import ANALYSES
from dnscost.transports import TRANSPORTS, display_name

__all__ = [
    "FIGURES",
    "display_lifetime",
    "display_profile",
    "display_transport",
    "fig_connections",
    "fig_cost_model",
    "fig_energy",
    "fig_establishment",
    "fig_latency",
    "fig_memory",
    "lifetime_key",
    "save_figures",
    "transport_key",
    "udp_baseline",
]

_COLOURS: dict[str, str] = {
    "udp": "#555555",
    "tcp": "#1f77b4",
    "dot": "#2ca02c",
    "doh": "#d62728",
    "doq": "#8c564b",
    "doh3": "#9467bd",
}
_LIFETIMES: dict[str, str] = {"forever": "persistent", "30s": "30 s", "1s": "1 s", "1q": "1 query"}
_TERMS: dict[str, str] = {
    "query": "per query",
    "full_handshake": "per full handshake",
    "resumed_handshake": "per resumed handshake",
    "connection_second": "per connection-second",
}
_DPI = 110
_PANEL_W = 5.2
_PANEL_H = 3.4


def display_transport(transport: str | None) -> str:
    """The transport's name for people: ``doh`` → ``DoH``."""
    if transport is None:
        return "\u2013"
    return display_name(transport)


def display_lifetime(lifetime: str | None) -> str:
    """A connection lifetime for people: ``forever`` → ``persistent``, ``1q`` → ``1 query``."""
    if lifetime is None:
        return "persistent"
    return _LIFETIMES.get(lifetime, lifetime)


def display_profile(lifetime: str | None, resumption: float | None, early_data: float | None = None) -> str:
    """A lifetime profile with its resumption share and its share of 0-RTT among the resumed:
    ``1s`` at 1.0 → ``1 s, resumed``; with early data 1.0 → ``1 s, resumed, 0-RTT``."""
    text = display_lifetime(lifetime)
    if resumption:
        text += ", resumed" if resumption >= 1 else f", {resumption:.0%} resumed"
    if resumption and early_data:
        text += ", 0-RTT" if early_data >= 1 else f", {early_data:.0%} 0-RTT"
    return text


def transport_key(transport: str) -> tuple[int, str]:
    """Sorts transports as the report shows them: UDP, TCP, DoT, DoH, then the others."""
    order = list(TRANSPORTS)
    return (order.index(transport) if transport in order else len(order), transport)


def lifetime_key(lifetime: str | None) -> tuple[int, str]:
    """Sorts lifetimes from the longest (persistent) to the shortest (one query)."""
    name = lifetime or "forever"
    order = list(_LIFETIMES)
    return (order.index(name) if name in order else len(order), name)


def _colour(transport: str) -> str:
    return _COLOURS.get(transport, "#7f7f7f")


def _rows(a: Analysis, name: str) -> list[Row]:
    table = a.tables.get(name)
    return list(table.rows) if table is not None else []


def _num(value: Any) -> float | None:
    """A finite number, or None (missing, NaN, not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _targets(rows: Iterable[Row]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        if row.get("target") is not None:
            seen.setdefault(str(row["target"]), None)
    return list(seen)


def _transports(rows: Iterable[Row]) -> list[str]:
    return sorted({str(r["transport"]) for r in rows if r.get("transport") is not None}, key=transport_key)


def udp_baseline(a: Analysis, target: str) -> float | None:
    """The target's UDP reference (closed-loop saturation when measured, else the highest rate
    answered with loss below the limit), from the ``baseline`` table, else from the
    ``udp_reference_qps`` column of the load tables."""
    for row in _rows(a, "baseline"):
        if row.get("target") == target and _num(row.get("udp_reference_qps")) is not None:
            return _num(row["udp_reference_qps"])
    for name in ("connections", "establishment"):
        for row in _rows(a, name):
            if row.get("target") == target and _num(row.get("udp_reference_qps")) is not None:
                return _num(row["udp_reference_qps"])
    return None


def _panels(
    n: int, *, columns: int = 2, width: float = _PANEL_W, height: float = _PANEL_H
) -> tuple[Figure, list[Axes]]:
    cols = max(1, min(n, columns))
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(width * cols, height * rows), dpi=_DPI, layout="constrained")
    grid = fig.subplots(rows, cols, squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _span(median: float | None, low: float | None, high: float | None) -> tuple[float, float]:
    """Asymmetric error bar lengths (never negative) around the median."""
    if median is None:
        return (0.0, 0.0)
    return (max(0.0, median - low) if low is not None else 0.0, max(0.0, high - median) if high is not None else 0.0)


def _grouped_bars(
    ax: Axes,
    groups: Sequence[str],
    series: Sequence[tuple[str, str, str, Sequence[float | None], Sequence[tuple[float, float]] | None]],
) -> None:
    """Bars in groups along x; each series is (label, colour, hatch, values, error spans)."""
    width = 0.8 / max(1, len(series))
    for k, (label, colour, hatch, values, errors) in enumerate(series):
        xs = [g - 0.4 + width * (k + 0.5) for g in range(len(groups))]
        heights = [v if v is not None else 0.0 for v in values]
        ax.bar(
            xs, heights, width=width * 0.92, color=colour, edgecolor="black", linewidth=0.5, hatch=hatch, label=label
        )
        if errors is not None:
            kept = [(x, h, e) for x, h, e, v in zip(xs, heights, errors, values, strict=True) if v is not None]
            if kept:
                ax.errorbar(
                    [x for x, _, _ in kept],
                    [h for _, h, _ in kept],
                    yerr=[[e[0] for _, _, e in kept], [e[1] for _, _, e in kept]],
                    fmt="none",
                    ecolor="black",
                    elinewidth=0.8,
                    capsize=2,
                )
    ax.set_xticks(range(len(groups)), list(groups))


def _udp_line(ax: Axes, qps: float | None) -> None:
    if qps is not None:
        ax.axhline(qps, color=_colour("udp"), linestyle="--", linewidth=1.2, label=f"UDP ({qps:,.0f} qps)")


def fig_memory(a: Analysis) -> Figure | None:
    """Figure 3 analogue: bytes per connection (user and kernel) with 95 % intervals, and the
    raw level deltas against the number of open connections with the fitted line."""
    fits = [r for r in _rows(a, "memory_fit") if r.get("transport") is not None]
    points = [r for r in _rows(a, "memory_points") if _num(r.get("connections")) is not None]
    targets = _targets([*fits, *points])
    if not targets:
        return None
    fig = Figure(figsize=(_PANEL_W * 3, _PANEL_H * len(targets)), dpi=_DPI, layout="constrained")
    grid = fig.subplots(len(targets), 3, squeeze=False)
    for (bars_ax, user_ax, kernel_ax), target in zip(grid, targets, strict=True):
        target_fits = {str(r["transport"]): r for r in fits if r.get("target") == target}
        target_points = [r for r in points if r.get("target") == target]
        transports = _transports([*target_fits.values(), *target_points])
        series = []
        for kind, hatch in (("user", ""), ("kernel", "//")):
            values: list[float | None] = []
            errors: list[tuple[float, float]] = []
            for t in transports:
                fit = target_fits.get(t, {})
                value = _num(fit.get(f"{kind}_bytes_per_connection"))
                values.append(value / 1024 if value is not None else None)
                low, high = _num(fit.get(f"{kind}_ci95_low")), _num(fit.get(f"{kind}_ci95_high"))
                span = _span(value, low, high)
                errors.append((span[0] / 1024, span[1] / 1024))
            series.append((kind, "#9ecae1" if kind == "user" else "#fdae6b", hatch, values, errors))
        _grouped_bars(bars_ax, [display_transport(t) for t in transports], series)
        bars_ax.set_title(f"{target}: memory per connection (95 % CI)")
        bars_ax.set_ylabel("KiB per connection")
        bars_ax.legend(fontsize="small")
        for ax, kind, column in ((user_ax, "user", "rss_delta_bytes"), (kernel_ax, "kernel", "kernel_delta_bytes")):
            for t in transports:
                pts_t = [
                    (float(r["connections"]), y, r.get("valid") is not False)
                    for r in target_points
                    if r.get("transport") == t and (y := _num(r.get(column))) is not None
                ]
                if not pts_t:
                    continue
                colour = _colour(t)
                valid = [(x, y) for x, y, ok in pts_t if ok]
                invalid = [(x, y) for x, y, ok in pts_t if not ok]
                if valid:
                    ax.scatter(
                        [x for x, _ in valid],
                        [y / 2**20 for _, y in valid],
                        color=colour,
                        s=14,
                        label=display_transport(t),
                    )
                if invalid:
                    ax.scatter(
                        [x for x, _ in invalid],
                        [y / 2**20 for _, y in invalid],
                        facecolors="none",
                        edgecolors=colour,
                        s=14,
                    )
                slope = _num(target_fits.get(t, {}).get(f"{kind}_bytes_per_connection"))
                if slope is not None and valid:
                    # The least-squares line passes through the means of the points it was fitted on.
                    mx = sum(x for x, _ in valid) / len(valid)
                    my = sum(y for _, y in valid) / len(valid)
                    xs = [0.0, max(x for x, _, _ in pts_t)]
                    ax.plot(xs, [(my + slope * (x - mx)) / 2**20 for x in xs], color=colour, linewidth=1)
            ax.set_title(f"{target}: {kind} level \u2212 idle vs connections")
            ax.set_xlabel("open connections")
            ax.set_ylabel("MiB")
            if ax.has_data():
                ax.legend(fontsize="small")
    return fig


def fig_connections(a: Analysis) -> Figure | None:
    """Figure 4 analogue: answered qps against the number of persistent connections, median
    with a min-max band, one line per transport, the UDP baseline dashed."""
    rows = [r for r in _rows(a, "connections") if _num(r.get("connections")) and _num(r.get("qps_median")) is not None]
    targets = _targets(rows)
    if not targets:
        return None
    fig, axes = _panels(len(targets))
    for ax, target in zip(axes, targets, strict=True):
        mine = [r for r in rows if r.get("target") == target]
        for t in _transports(mine):
            pts = sorted((r for r in mine if r.get("transport") == t), key=lambda r: float(r["connections"]))
            xs = [float(r["connections"]) for r in pts]
            med = [float(r["qps_median"]) for r in pts]
            low = [_num(r.get("qps_min")) for r in pts]
            high = [_num(r.get("qps_max")) for r in pts]
            colour = _colour(t)
            ax.plot(xs, med, marker="o", markersize=3, color=colour, label=display_transport(t))
            ax.fill_between(
                xs,
                [lo if lo is not None else m for lo, m in zip(low, med, strict=True)],
                [hi if hi is not None else m for hi, m in zip(high, med, strict=True)],
                color=colour,
                alpha=0.2,
                linewidth=0,
            )
        _udp_line(ax, udp_baseline(a, target))
        ax.set_xscale("log")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{target}: throughput vs persistent connections")
        ax.set_xlabel("persistent connections")
        ax.set_ylabel("answered qps (median, min\u2013max)")
        ax.legend(fontsize="small")
    return fig


def _profile_series(
    rows: list[Row], value: str, low: str | None, high: str | None, scale: float = 1.0
) -> tuple[list[str], list[tuple[str, str, str, list[float | None], list[tuple[float, float]] | None]]]:
    """Groups = lifetimes, series = transport by resumption and 0-RTT, for grouped bars."""
    lifetimes = sorted({r.get("lifetime") or "forever" for r in rows}, key=lifetime_key)

    def handshake(r: Row) -> tuple[float, float]:
        return (_num(r.get("resumption")) or 0.0, _num(r.get("early_data")) or 0.0)

    keys = sorted(
        {(str(r["transport"]), *handshake(r)) for r in rows if r.get("transport") is not None},
        key=lambda k: (transport_key(k[0]), k[1], k[2]),
    )
    series = []
    for transport, resumption, early in keys:
        values: list[float | None] = []
        errors: list[tuple[float, float]] = []
        for lifetime in lifetimes:
            match = [
                r
                for r in rows
                if r.get("transport") == transport
                and handshake(r) == (resumption, early)
                and (r.get("lifetime") or "forever") == lifetime
            ]
            v = _num(match[0].get(value)) if match else None
            values.append(v * scale if v is not None else None)
            lo = _num(match[0].get(low)) if match and low else None
            hi = _num(match[0].get(high)) if match and high else None
            span = _span(v, lo, hi)
            errors.append((span[0] * scale, span[1] * scale))
        label = display_transport(transport) + (f" + {resumption:.0%} resumption" if resumption else "")
        label += f" + {early:.0%} 0-RTT" if early else ""
        hatch = "xx" if early else "//" if resumption else ""
        series.append((label, _colour(transport), hatch, values, errors if low or high else None))
    return [display_lifetime(lt) for lt in lifetimes], series


def fig_establishment(a: Analysis) -> Figure | None:
    """Figure 5 analogue: answered qps per connection lifetime profile and transport, median
    with min/max error bars, resumption hatched, the UDP baseline dashed."""
    rows = [r for r in reference_key(_rows(a, "establishment")) if _num(r.get("qps_median")) is not None]
    targets = _targets(rows)
    if not targets:
        return None
    fig, axes = _panels(len(targets))
    for ax, target in zip(axes, targets, strict=True):
        groups, series = _profile_series(
            [r for r in rows if r.get("target") == target], "qps_median", "qps_min", "qps_max"
        )
        _grouped_bars(ax, groups, series)
        _udp_line(ax, udp_baseline(a, target))
        ax.set_title(f"{target}: throughput per connection lifetime")
        ax.set_xlabel("connection lifetime")
        ax.set_ylabel("answered qps (median, min/max)")
        ax.legend(fontsize="small")
    return fig


def _latency_rows(rows: list[Row]) -> list[Row]:
    """One row per transport, lifetime, resumption and 0-RTT: from the establishment group when
    the run has it, else from any group, preferring the most connections."""
    preferred = [r for r in rows if r.get("analysis", r.get("group")) == "establishment"] or rows
    chosen: dict[tuple[str, str, float, float], Row] = {}
    for r in sorted(preferred, key=lambda r: _num(r.get("connections")) or 0.0):
        key = (
            str(r.get("transport")),
            r.get("lifetime") or "forever",
            _num(r.get("resumption")) or 0.0,
            _num(r.get("early_data")) or 0.0,
        )
        chosen[key] = r
    return [chosen[k] for k in sorted(chosen, key=lambda k: (transport_key(k[0]), lifetime_key(k[1]), k[2], k[3]))]


def fig_latency(a: Analysis) -> Figure | None:
    """Latency percentiles (p50 bar, p90 and p99 markers) per transport and lifetime profile."""
    rows = [r for r in _rows(a, "latency") if _num(r.get("p50_us")) is not None and r.get("transport") is not None]
    targets = _targets(rows)
    if not targets:
        return None
    fig, axes = _panels(len(targets), columns=1, width=11.0, height=3.6)
    for ax, target in zip(axes, targets, strict=True):
        chosen = _latency_rows([r for r in rows if r.get("target") == target])
        xs = list(range(len(chosen)))
        p50 = [float(r["p50_us"]) / 1000 for r in chosen]
        ax.bar(xs, p50, color=[_colour(str(r["transport"])) for r in chosen], alpha=0.6, label="p50")
        for column, marker in (("p90_us", "^"), ("p99_us", "v")):
            pts = [(x, _num(r.get(column))) for x, r in zip(xs, chosen, strict=True)]
            kept = [(x, y / 1000) for x, y in pts if y is not None]
            if kept:
                ax.scatter(
                    [x for x, _ in kept], [y for _, y in kept], marker=marker, color="black", s=18, label=column[:3]
                )
        labels = [
            "\n".join(
                [display_transport(str(r["transport"])), display_lifetime(r.get("lifetime"))]
                + (["resumed"] if _num(r.get("resumption")) else [])
                + (["0-RTT"] if _num(r.get("early_data")) else [])
            )
            for r in chosen
        ]
        ax.set_xticks(xs, labels, fontsize="small")
        ax.set_yscale("log")
        ax.set_title(f"{target}: latency percentiles (median over repetitions)")
        ax.set_ylabel("latency (ms, log)")
        ax.legend(fontsize="small")
    return fig


def fig_energy(a: Analysis) -> Figure | None:
    """Table I as a figure: kWh per day at 10 000 qps (log scale) per lifetime and transport."""
    rows = [r for r in reference_key(_rows(a, "energy")) if (_num(r.get("kwh_per_day_at_10k_qps")) or 0.0) > 0]
    targets = _targets(rows)
    if not targets:
        return None
    fig, axes = _panels(len(targets))
    for ax, target in zip(axes, targets, strict=True):
        mine = [r for r in rows if r.get("target") == target]
        groups, series = _profile_series(mine, "kwh_per_day_at_10k_qps", None, None)
        _grouped_bars(ax, groups, series)
        ax.set_yscale("log")
        sources = sorted({str(r.get("energy_source")) for r in mine})
        ax.set_title(f"{target}: energy for a day at 10 000 qps ({', '.join(sources)})")
        ax.set_xlabel("connection lifetime")
        ax.set_ylabel("kWh per day (log)")
        ax.legend(fontsize="small")
    return fig


def fig_cost_model(a: Analysis) -> Figure | None:
    """The cost model's coefficients (target CPU-µs per unit of each term) with 95 % intervals; a
    term the trials do not identify has no bar, only the words "not identified"."""
    rows = [r for r in _rows(a, "cost_model") if r.get("term") is not None]
    targets = _targets([r for r in rows if _num(r.get("us")) is not None])
    if not targets:
        return None
    present = {str(r["term"]) for r in rows}
    terms = [t for t in _TERMS if t in present] + sorted(present - set(_TERMS))
    fig = Figure(figsize=(3.6 * len(terms), 3.0 * len(targets)), dpi=_DPI, layout="constrained")
    grid = fig.subplots(len(targets), len(terms), squeeze=False)
    for axes, target in zip(grid, targets, strict=True):
        mine = [r for r in rows if r.get("target") == target]
        for ax, term in zip(axes, terms, strict=True):
            # Only the transports the term applies to (udp: queries; tcp: no resumption).
            here = [r for r in mine if r.get("term") == term]
            transports = _transports(here)
            xs = list(range(len(transports)))
            for x, t in zip(xs, transports, strict=True):
                r = next(r for r in here if r.get("transport") == t)
                v = _num(r.get("us"))
                if v is None:
                    ax.text(x, 0, "not\nidentified", ha="center", va="bottom", fontsize="x-small", color="#777")
                    continue
                lo, hi = _span(v, _num(r.get("ci95_low")), _num(r.get("ci95_high")))
                ax.bar([x], [v], color=_colour(t), edgecolor="black", linewidth=0.5)
                if lo or hi:
                    ax.errorbar([x], [v], yerr=[[lo], [hi]], fmt="none", ecolor="black", capsize=3)
            ax.set_xticks(xs, [display_transport(t) for t in transports])
            ax.set_xlim(-0.6, max(len(xs), 1) - 0.4)
            ax.set_title(f"{target}: {_TERMS.get(term, term)}", fontsize="medium")
            ax.set_ylabel("target CPU-µs")
    return fig


def fig_cost_curves(a: Analysis) -> Figure | None:
    """Cost curves: the target's CPU per answered query against the load offered (both log),
    one line per transport and connection shape, the median over rounds with min-max error
    bars; the last point of each line is its saturation trial."""
    rows = [
        r
        for r in _rows(a, "cost_curve")
        if _num(r.get("offered_qps")) and _num(r.get("cpu_us_per_query")) is not None and r.get("transport")
    ]
    targets = _targets(rows)
    if not targets:
        return None
    fig, axes = _panels(len(targets))
    styles = ("-", "--", ":", "-.")
    for ax, target in zip(axes, targets, strict=True):
        mine = [r for r in rows if r.get("target") == target]
        shapes = sorted(
            {(str(r["transport"]), r.get("lifetime"), _num(r.get("resumption")) or 0.0) for r in mine},
            key=lambda k: (transport_key(k[0]), lifetime_key(k[1]), k[2]),
        )
        for transport, lifetime, resumption in shapes:
            pts = sorted(
                (
                    r
                    for r in mine
                    if (r["transport"], r.get("lifetime"), _num(r.get("resumption")) or 0.0)
                    == (transport, lifetime, resumption)
                ),
                key=lambda r: float(r["offered_qps"]),
            )
            xs = [float(r["offered_qps"]) for r in pts]
            med = [float(r["cpu_us_per_query"]) for r in pts]
            err = [
                [m - (_num(r.get("cpu_us_per_query_min")) or m) for m, r in zip(med, pts, strict=True)],
                [(_num(r.get("cpu_us_per_query_max")) or m) - m for m, r in zip(med, pts, strict=True)],
            ]
            style = styles[lifetime_key(lifetime)[0] % len(styles)]
            label = f"{display_transport(transport)} {display_profile(lifetime, resumption)}"
            ax.errorbar(
                xs, med, yerr=err, marker="o", markersize=3, capsize=2, linestyle=style, color=_colour(transport),
                label=label,
            )  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{target}: CPU per query against load")
        ax.set_xlabel("offered queries per second (log)")
        ax.set_ylabel("target CPU-µs per query (log)")
        ax.legend(fontsize="x-small")
    return fig


FIGURES: dict[str, Callable[[Analysis], Figure | None]] = {
    "fig3_memory": fig_memory,
    "fig4_connections": fig_connections,
    "fig5_establishment": fig_establishment,
    "latency": fig_latency,
    "cost_curves": fig_cost_curves,
    "energy": fig_energy,
    "cost_model": fig_cost_model,
}
"""Every figure of the report by file name, in report order."""


FIGURE_ANALYSIS = {
    "fig3_memory": "memory",
    "fig4_connections": "connections",
    "fig5_establishment": "establishment",
    "energy": "energy",
    "latency": "latency",
    "cost_curves": "curve",
    "cost_model": "cost_model",
}
"""The spec's analysis (``analyses = [...]``) each figure belongs to."""


def wanted_analyses(a: Analysis) -> set[str]:
    """The analyses the run's spec asks for (all when it does not say)."""

    spec = a.run.get("spec")
    wanted = spec.get("analyses") if isinstance(spec, dict) else None
    return set(wanted) if isinstance(wanted, list) else set(ANALYSES)


def save_figures(a: Analysis, out_dir: Path) -> dict[str, tuple[Path, Path]]:
    """Draws every figure that has data and saves it as ``<name>.svg`` and ``<name>.png`` in
    ``out_dir``; returns ``{name: (svg_path, png_path)}`` for the figures drawn."""
    out_dir.mkdir(parents=True, exist_ok=True)
    saved: dict[str, tuple[Path, Path]] = {}
    for name, draw in FIGURES.items():
        if FIGURE_ANALYSIS[name] not in wanted_analyses(a):
            continue
        # A distinct salt per figure keeps the SVG ids unique when figures share one HTML page.
        with matplotlib.rc_context({"svg.hashsalt": f"dnscost-{name}", "svg.fonttype": "none"}):
            fig = draw(a)
            if fig is None:
                continue
            svg, png = out_dir / f"{name}.svg", out_dir / f"{name}.png"
            fig.savefig(svg, format="svg", metadata={"Date": None})
            fig.savefig(png, format="png", dpi=_DPI)
        saved[name] = (svg, png)
    return saved
