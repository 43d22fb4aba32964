"""The run's report: one self-contained HTML file (figures as inline SVG, inline CSS and script;
no external resource, no network access) written next to the run's tables and figures.

Python computes what each section shows (tables of formatted cells, figures, notes' values);
the jinja2 templates in ``templates/`` lay it out (``report.html.j2``, its parts in
``macros.html.j2``), with autoescape on, so every piece of text from the run is escaped. A small
inline script checks, on load, that every figure rendered and records
``data-figures-ok="<rendered>/<total>"`` on the body, which :mod:`dnscost.report.browser` reads
back.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from dnscost import analysis, study
from dnscost.analysis import Analysis
from dnscost.analysis.capacity import run_model, what_if_rows
from dnscost.analysis.headline import Head
from dnscost.analysis.table1 import AGREE_FACTOR, key_match, verdict_counts
from dnscost.analysis.tables import CELL, group_by
from dnscost.contract import Row, RunRecord
from dnscost.report import points, render, series
from dnscost.report.figures import (
    display_profile,
    display_transport,
    lifetime_key,
    save_figures,
    transport_key,
    wanted_analyses,
)
from dnscost.report.headline import answers
from dnscost.report.render import DASH, TEMPLATES, Links, Span, Table, fmt, inline_svg
from dnscost.spec import load_profile

__all__ = ["render_report", "write_report"]


NOT_IDENTIFIED = "not identified"
"""Shown for a cost-model term the trials do not identify (never 0)."""

_CAPTIONS: dict[str, tuple[str, str, str]] = {
    # name: (section title, caption, table it draws)
    "fig3_memory": (
        "Figure 3 analogue: memory per connection",
        "Left: user (RSS) and kernel (cgroup kernel memory, including TCP buffers on cgroup v1) bytes per "
        "open connection, slope of a least-squares fit, with 95 % confidence intervals. Middle and right: the "
        "level in the window minus the idle level before the engine started, against the number of open "
        "connections, with the fitted line (hollow points: invalid trials, not fitted).",
        "memory_fit",
    ),
    "fig4_connections": (
        "Figure 4 analogue: throughput against persistent connections",
        "Answered queries per second against the number of persistent connections (log scale): median over "
        "repetitions, band from minimum to maximum; dashed: UDP at saturation (closed loop, else the baseline).",
        "connections",
    ),
    "fig5_establishment": (
        "Figure 5 analogue: throughput per connection lifetime",
        "Answered queries per second per connection lifetime (persistent, 30 s, 1 s, one query per "
        "connection): median with min/max error bars; hatched: TLS session resumption on; dashed: the UDP "
        "baseline.",
        "establishment",
    ),
    "energy": (
        "Energy per day at 10 000 qps",
        "Energy above idle for a day at 10 000 queries per second (log scale), per lifetime and transport.",
        "energy",
    ),
    "latency": (
        "Latency percentiles",
        "Query latency per transport and lifetime profile: p50 bar, p90 and p99 markers (log scale), medians "
        "over valid repetitions.",
        "latency",
    ),
    "cost_curves": (
        "Cost at the load you run",
        "Target CPU-µs per answered query against the queries per second offered (both log), per transport and "
        "connection shape: each cell of a ladder open loop at shares of the rate its saturation trial answered in "
        "the same round (the last point); median over rounds with min/max error bars.",
        "cost_curve",
    ),
    "cost_model": (
        "Cost model",
        "Target CPU time per unit of each term (non-negative least squares over the valid trials of each "
        "target and transport), with 95 % bootstrap intervals; terms the trials do not identify are left out.",
        "cost_model",
    ),
}


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value else None


def _dict(value: Any) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _rows(a: Analysis, name: str) -> list[Row]:
    table = a.tables.get(name)
    return list(table.rows) if table is not None else []


@dataclass(frozen=True)
class Figure:
    """A figure for the template: its SVG (matplotlib's, drawn from the run: trusted markup) or,
    when the run has no data for it, the table it would draw."""

    name: str
    caption: str
    table: str
    svg: Markup | None = None
    files: tuple[str, str] | None = None


def _figure(name: str, figures: dict[str, tuple[Path, Path]]) -> Figure:
    _, caption, table = _CAPTIONS[name]
    if name not in figures:
        return Figure(name, caption, table)
    svg_path, png_path = figures[name]
    svg = Markup(inline_svg(svg_path.read_text(), str(escape(name))))  # matplotlib's SVG, trusted
    return Figure(name, caption, table, svg, (svg_path.name, png_path.name))


def _when(ms: Any) -> str:
    value = _num(ms)
    if not value:
        return DASH
    return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


_ENERGY_SOURCES = {"rapl": "RAPL", "model": "model (CCF coefficients)"}


def energy_source_label(source: str | None) -> str:
    """``rapl`` → ``RAPL``, ``model`` → ``model (CCF coefficients)``; ``model+rapl`` → both."""
    if not source:
        return "unknown"
    return " + ".join(_ENERGY_SOURCES.get(part, part) for part in source.split("+"))


def _kwh(energy: list[Row], transport: str, lifetime: str) -> float | None:
    """kWh per day at 10 000 qps of one transport and lifetime without resumption."""
    for e in energy:
        if e.get("transport") == transport and (e.get("lifetime") or "forever") == lifetime and not e.get("resumption"):
            return _num(e.get("kwh_per_day_at_10k_qps"))
    return None


def _summary(a: Analysis, headline: Sequence[Head]) -> dict[str, object]:
    trials = a.trials
    done = sum(1 for t in trials if t.get("status") == "done")
    invalid = sum(1 for r in _rows(a, "trials") if r.get("valid") is False and r.get("status") == "done")
    rows = []
    for h in headline:
        persistent, collapse, memory = h["persistent"], h["collapse_1q"], h["memory_per_connection"]
        energy = h["energy"]
        target, version, udp = h["target"], h["target_version"], _num(h["udp_saturation_qps"])
        rows.append(
            [target, version, "UDP", udp, 1.0 if udp else None, None, None, None, _kwh(energy, "udp", "forever"), None]
        )
        for t in sorted({*persistent, *collapse, *memory} - {"udp"}, key=transport_key):
            p, c, m = persistent.get(t), collapse.get(t), memory.get(t)
            total = _num(m["total_bytes"]) if m else None
            rows.append(
                [
                    target,
                    version,
                    display_transport(t),
                    _num(p["qps"]) if p else None,
                    _num(p["share_of_udp"]) if p else None,
                    _num(c["ratio"]) if c else None,
                    _num(c["ratio_resumed"]) if c else None,
                    total / 1024 if total is not None else None,
                    _kwh(energy, t, "forever"),
                    _kwh(energy, t, "1q"),
                ]
            )
    table = (
        render.table(
            [
                "target",
                "version",
                "transport",
                "persistent qps",
                "share of UDP",
                "1 query/conn. \u00f7 persistent",
                "same, resumed",
                "KiB per connection (user + kernel)",
                "kWh/day at 10k qps, persistent",
                "kWh/day at 10k qps, 1 query/conn.",
            ],
            rows,
            text_columns=3,
        )
        if headline
        else None
    )
    return {
        "answers": [" ".join(s) for h in headline if (s := answers(h))],
        "planned": len(trials),
        "done": done,
        "invalid": invalid,
        "table": table,
        "headline": _headline_table(a) if headline else None,
    }


_FIGURES = {
    "cpu_us_per_query": "target CPU-µs per query",
    "capacity_per_core_qps": "capacity per core (1e6 ÷ µs per query), qps",
    "answered_qps": "measured qps at saturation",
    "j_per_query": "energy per query, J (RAPL)",
    "cpu_ratio_to_udp": "CPU per query ÷ UDP's",
    "qps_share_of_udp": "measured qps ÷ UDP's",
    "energy_ratio_to_udp": "energy per query ÷ UDP's (RAPL)",
    "cpu_ratio_to_persistent": "CPU per query ÷ persistent",
    "qps_ratio_to_persistent": "measured qps ÷ persistent",
    "cpu_us_per_handshake": "target CPU-µs per handshake",
    "resumed_share": "share of reconnections resumed (resumption on)",
    "memory_bytes_per_connection": "bytes per idle connection (user + kernel)",
}


def _headline_table(a: Analysis) -> Table | None:
    """The ``headline`` table: every headline figure with its interval."""
    rows = _rows(a, "headline")
    if not rows:
        return None
    body = [
        [
            r.get("target"),
            _FIGURES.get(str(r.get("figure")), r.get("figure")),
            display_transport(str(r.get("transport"))),
            r.get("profile"),
            _num(r.get("value")),
            _num(r.get("low")),
            _num(r.get("high")),
            r.get("n"),
            "min, max over rounds" if r.get("interval") == "range" else "95 % t interval",
        ]
        for r in rows
    ]
    rounds = max((int(r.get("n") or 0) for r in rows if r.get("interval") == "range"), default=0)
    return render.table(
        ["target", "figure", "transport", "profile", "median / estimate", "low", "high", "n", "interval"],
        body,
        text_columns={0, 1, 2, 3, 8},
        caption=f"Headline figures with their intervals (up to {rounds} rounds; each ratio divides values "
        "measured in the same round)",
    )


def _consistency(a: Analysis) -> Table | None:
    """Cells that contradict physics beyond their intervals, both named (None: no contradiction)."""
    rows = _rows(a, "consistency")
    if not rows:
        return None
    body = [
        [r.get("flag"), r.get("cell"), r.get("against"), r.get("what"), _num(r.get("value")), _num(r.get("low")),
         _num(r.get("high")), _num(r.get("margin")), r.get("interval")]
        for r in rows
    ]  # fmt: skip
    return render.table(
        ["flag", "cell", "against", "what", "value", "low", "high", "margin beyond the interval", "interval"],
        body,
        text_columns={0, 1, 2, 3, 8},
        row_classes=["flagged"] * len(body),
        caption="Cells that contradict physics beyond their intervals; their trials carry the flag (still valid)",
    )


def _series_links(
    a: Analysis, pages: Mapping[str, str], row: Row, keys: Sequence[str], analysis_name: str, label: str = "round"
) -> Links | str:
    """The pages over time of the load trials of ``analysis_name`` whose ``keys`` equal the
    row's (a figure's point: its rounds, or its connection counts), each labelled by ``label``."""
    items = tuple(
        (f"{label[0]}{t.get(label)}" if label == "round" else fmt(t.get(label)), pages[str(t.get("id"))])
        for t in _rows(a, "trials")
        if t.get("analysis") == analysis_name
        and t.get("kind") == "load"
        and str(t.get("id")) in pages
        and all(t.get(k) == row.get(k) for k in keys)
    )
    return Links(items) if items else DASH


def _memory_table(a: Analysis, pages: Mapping[str, str]) -> Table | None:
    rows = _rows(a, "memory_fit")
    if not rows:
        return None

    def ci(r: Row, kind: str) -> str:
        low, high = _num(r.get(f"{kind}_ci95_low")), _num(r.get(f"{kind}_ci95_high"))
        if low is None or high is None:
            return DASH
        return f"{fmt(low / 1024)} {DASH} {fmt(high / 1024)}"

    def kib(value: Any) -> float | None:
        v = _num(value)
        return v / 1024 if v is not None else None

    body = [
        [
            r.get("target"),
            display_transport(r.get("transport")),
            kib(r.get("user_bytes_per_connection")),
            ci(r, "user"),
            kib(r.get("kernel_bytes_per_connection")),
            ci(r, "kernel"),
            _num(r.get("user_r2")),
            _num(r.get("kernel_r2")),
            r.get("points"),
            r.get("max_connections"),
            r.get("dropped") or DASH,
            _series_links(a, pages, r, ("target", "transport"), "memory", "connections"),
        ]
        for r in rows
    ]
    return render.table(
        [
            "target",
            "transport",
            "user KiB/conn",
            "95 % CI",
            "kernel KiB/conn",
            "95 % CI",
            "user R²",
            "kernel R²",
            "points",
            "max connections",
            "dropped (invalid)",
            "over time (connections)",
        ],
        body,
        text_columns={0, 1, 10, 11},
    )


def _study_method_kwh(r: Row) -> str:
    """A Table I cell's kWh by the study's method, or why it has none; a cell measured below
    saturation (its trials generator-bound) says so: the figure is an upper bound."""
    kwh = _num(r.get("kwh_study_method"))
    if kwh is None:
        return f"no valid trial ({r.get('valid_reps') or 0} of {r.get('reps')})" if r.get("reps") else DASH
    return f"≤ {fmt(kwh)} (below saturation: generator-bound)" if r.get("below_saturation") else fmt(kwh)


def _study_table1_context(a: Analysis) -> dict[str, object]:

    rows = [r for r in _rows(a, "table1") if r.get("transport") is not None]
    if not rows:
        return {"table": None, "keys": None, "counts": None, "agree_factor": AGREE_FACTOR}
    counts = verdict_counts(rows)
    body = [
        [
            r.get("target"),
            display_transport(str(r["transport"])),
            display_profile(r.get("lifetime") or "forever", 0.0) if r["transport"] != "udp" else "no connection",
            r.get("cert_key") or "default",
            _study_method_kwh(r),
            _num(r.get("kwh_model")) if r.get("model_status") == "identified" else r.get("model_status"),
            _num(r.get("study_kwh")),
            _num(r.get("ratio_to_udp")),
            _num(r.get("ratio_to_udp_cell")),
            _num(r.get("model_ratio_to_udp")),
            _num(r.get("study_ratio_to_udp")),
            r.get("verdict"),
            r.get("verdict_udp_cell"),
        ]
        for r in rows
    ]
    table = render.table(
        [
            "target",
            "transport",
            "connections",
            "certificate key",
            "ours, kWh/day (study's method)",
            "ours, kWh/day (cost model at 10 000 qps)",
            "study, kWh/day",
            "ours ÷ UDP (study's method, in-round)",
            "ours ÷ UDP cell",
            "ours ÷ UDP (cost model)",
            "study ÷ UDP",
            "verdict",
            "verdict ÷ UDP cell",
        ],
        body,
        text_columns={0, 1, 2, 3, 11, 12},
        caption="Table I as the study measured it: 1 000 connections lasting 30 s (33/s), 1 s (1 000/s) or one "
        "query each, TLS resumption off; a day at 10 000 qps",
    )
    keys = None
    matches = key_match(rows)
    if matches:
        verdicts = []
        for target, ms in group_by(matches, lambda m: m["target"]).items():
            best = min(ms, key=lambda m: abs(math.log(m["ours_over_study"])))
            detail = ", ".join(
                f"{m['cert_key'] or 'default'}: {m['agree']} of {m['cells']} TLS cells agree, ours \u00f7 study "
                f"{m['ours_over_study']:.2f} (geometric mean)"
                for m in ms
            )
            closer = f"closer: {best['cert_key'] or 'default'}" if len(ms) > 1 else "one key type measured"
            verdicts.append(f"{target}: {detail}; {closer}")
        keys = "; ".join(verdicts)
    return {
        "table": table,
        "keys": keys,
        "counts": counts.sentence() if counts.cells else None,
        "agree_factor": AGREE_FACTOR,
    }


def _study_table1(a: Analysis) -> Markup:
    """Table I as the study measured it (the ``table1`` table): per target and cell, our kWh for a
    day at 10 000 qps by the study's method and by the cost model, the study's kWh, both ratios
    to UDP and the verdict."""
    return Markup(_macro("study_table1")(_study_table1_context(a)))  # rendered, autoescaped


def _energy_context(a: Analysis) -> dict[str, object] | None:
    """Table I: rows transport by profile, columns targets, kWh per day at 10 000 qps with the
    target CPU-µs per query beside it."""
    rows = [r for r in _rows(a, "energy") if r.get("transport") is not None]
    if not rows:
        return None
    targets = list(dict.fromkeys(str(r["target"]) for r in rows if r.get("target") is not None))

    def cell(r: Row) -> tuple[str, str, float, float]:
        handshake = (_num(r.get("resumption")) or 0.0, _num(r.get("early_data")) or 0.0)
        return (str(r["transport"]), r.get("lifetime") or "forever", *handshake)

    keys = sorted({cell(r) for r in rows}, key=lambda k: (transport_key(k[0]), lifetime_key(k[1]), k[2], k[3]))
    by_key = {(r.get("target"), *cell(r)): r for r in rows}
    body = []
    for transport, lifetime, resumption, early in keys:
        cells = []
        for target in targets:
            r = by_key.get((target, transport, lifetime, resumption, early), {})
            cells += [fmt(_num(r.get("kwh_per_day_at_10k_qps"))), fmt(_num(r.get("cpu_us_per_query")))]
        body.append((display_transport(transport), display_profile(lifetime, resumption, early), cells))
    sources = {
        target: sorted(
            {str(r.get("energy_source")) for r in rows if r.get("target") == target and r.get("energy_source")}
        )
        for target in targets
    }
    source_text = "; ".join(
        f"{t}: {', '.join(energy_source_label(s) for s in sources[t]) or 'unknown'}" for t in targets
    )
    return {"targets": targets, "rows": body, "sources": source_text}


def _range(r: Row, name: str) -> str:
    """``median [min-max]`` of a ``name_median``, ``name_min``, ``name_max`` triple."""
    median, low, high = (_num(r.get(f"{name}_{k}")) for k in ("median", "min", "max"))
    if median is None:
        return DASH
    return f"{fmt(median)} [{fmt(low)}-{fmt(high)}]"


def _clients_table(a: Analysis) -> Table | None:
    """Real clients replayed (the ``clients`` table), beside Table I's synthetic profiles of the
    same target and transport (the ``energy`` table: persistent connections and one query per
    connection, resumption off)."""
    rows = _rows(a, "clients")
    if not rows:
        return None
    synthetic = {
        (r.get("target"), r.get("transport"), r.get("lifetime") or "forever"): _num(r.get("kwh_per_day_at_10k_qps"))
        for r in _rows(a, "energy")
        if not _num(r.get("resumption")) and not _num(r.get("early_data"))
    }

    def spread(r: Row, name: str) -> str:
        median, low, high = (_num(r.get(f"{name}{k}")) for k in ("", "_min", "_max"))
        return DASH if median is None else f"{fmt(median)} [{fmt(low)}-{fmt(high)}]"

    body = [
        [
            r.get("target"),
            display_transport(str(r["transport"])),
            r.get("profile"),
            _num(r.get("clients")),
            _num(r.get("rate_qps")),
            _num(r.get("clients_at_10k_qps")),
            f"{r.get('valid_reps') or 0} of {r.get('reps')}",
            _num(r.get("handshakes_per_1k_queries")),
            spread(r, "cpu_us_per_query"),
            spread(r, "cpu_ratio_to_udp"),
            _num(r.get("kwh_per_day_at_10k_qps")),
            synthetic.get((r.get("target"), r.get("transport"), "forever")),
            synthetic.get((r.get("target"), r.get("transport"), "1q")),
        ]
        for r in rows
    ]
    return render.table(
        [
            "target",
            "transport",
            "client profile",
            "clients",
            "replayed qps",
            "clients for 10 000 qps",
            "valid",
            "handshakes per 1 000 queries",
            "target CPU-µs/query, median [min-max]",
            "÷ UDP's",
            "kWh/day at 10 000 qps",
            "Table I: persistent, kWh/day",
            "Table I: 1 query/connection, kWh/day",
        ],
        body,
        text_columns={0, 1, 2, 6},
        caption="Real clients replayed: many clients of each observed profile (dnscost observe) against the target, "
        "open loop at the rate they make together, beside Table I's synthetic profiles",
    )


def _population_table(a: Analysis) -> Table | None:
    """A population replayed (the ``population`` table): the target's CPU time measured beside
    what the run's cost model predicts from the counts of each class."""
    rows = _rows(a, "population")
    if not rows:
        return None

    def between(r: Row, low: str, high: str) -> str:
        lo, hi = _num(r.get(low)), _num(r.get(high))
        return DASH if lo is None or hi is None else f"{fmt(lo)} to {fmt(hi)}"

    body = [
        [
            r.get("target"),
            r.get("target_version"),
            _num(r.get("answered_qps")),
            f"{r.get('classes')} ({str(r.get('transports') or '').replace(';', ', ')})",
            str(r.get("left_out") or "").replace(";", ", ") or DASH,
            "yes" if r.get("valid") else "no",
            _num(r.get("measured_cpu_us")),
            _num(r.get("predicted_cpu_us")),
            between(r, "predicted_low_us", "predicted_high_us"),
            between(r, "error_low_pct", "error_high_pct"),
            r.get("verdict") or DASH,
            r.get("reason") or DASH,
        ]
        for r in rows
    ]
    return render.table(
        [
            "target",
            "version",
            "answered qps",
            "classes replayed",
            "left out",
            "valid",
            "target CPU-µs measured",
            "predicted",
            "predicted, 95 % interval",
            "error %, interval",
            "measured is",
            "note",
        ],
        body,
        text_columns={0, 1, 3, 4, 5, 8, 9, 10, 11},
        caption="A population replayed (dnscost population, dnscost load --population): the target's CPU time over the "
        "window beside the same run's cost model applied to what the engine counted of each class",
    )


def _connections_table(a: Analysis, pages: Mapping[str, str]) -> Table | None:
    """Figure 4's points: answered qps at saturation over persistent connections."""
    rows = _rows(a, "connections")
    if not rows:
        return None
    body = [
        [
            r.get("target"),
            display_transport(r.get("transport")),
            r.get("connections"),
            _range(r, "qps"),
            f"{r.get('valid_reps')} of {r.get('reps')}",
            _num(r.get("share_of_udp")),
            _series_links(a, pages, r, ("target", "transport", "connections"), "connections"),
        ]
        for r in rows
    ]
    return render.table(
        ["target", "transport", "connections", "answered qps, median [min-max]", "valid", "share of UDP", "over time"],
        body,
        text_columns={0, 1, 3, 4, 6},
        caption="Answered qps at saturation against the number of persistent connections (closed loop)",
    )


def _establishment_table(a: Analysis, pages: Mapping[str, str]) -> Table | None:
    """Figure 5's points: answered qps and CPU per query per transport, lifetime and resumption."""
    rows = _rows(a, "establishment")
    if not rows:
        return None
    body = [
        [
            r.get("target"),
            display_transport(r.get("transport")),
            display_profile(r.get("lifetime"), _num(r.get("resumption")), _num(r.get("early_data"))),
            r.get("cert_key") or DASH,
            _range(r, "qps"),
            f"{r.get('valid_reps')} of {r.get('reps')}",
            _num(r.get("share_of_udp")),
            _num(r.get("cpu_us_per_query")),
            _num(r.get("handshakes_per_s")),
            _num(r.get("zero_rtt_share")),
            _series_links(a, pages, r, CELL, "establishment"),
        ]
        for r in rows
    ]
    return render.table(
        [
            "target",
            "transport",
            "profile",
            "key",
            "answered qps, median [min-max]",
            "valid",
            "share of UDP",
            "CPU-µs/query",
            "handshakes/s",
            "0-RTT taken (of resumed)",
            "over time",
        ],
        body,
        text_columns={0, 1, 2, 3, 4, 5, 10},
        caption="1 000 connections living the whole run, 30 s, 1 s or one query, at saturation (closed loop)",
    )


def _with_range(r: Row, column: str) -> str:
    """A median with its ``_min`` and ``_max`` columns beside it: ``12.3 (10.1`` dash ``14)``."""
    mid, low, high = (_num(r.get(c)) for c in (column, f"{column}_min", f"{column}_max"))
    if mid is None:
        return DASH
    return fmt(mid) if low is None or high is None else f"{fmt(mid)} ({fmt(low)}{DASH}{fmt(high)})"


def _curve_table(a: Analysis) -> Table | None:
    rows = [r for r in _rows(a, "cost_curve") if r.get("cpu_us_per_query") is not None]
    if not rows:
        return None
    body = [
        [
            r.get("target"),
            display_transport(r.get("transport")),
            display_profile(r.get("lifetime"), _num(r.get("resumption")), _num(r.get("early_data"))),
            r.get("connections"),
            f"{float(r['share']):.3g}" if _num(r.get("share")) is not None else None,
            r.get("valid_reps"),
            _num(r.get("offered_qps")),
            _with_range(r, "cpu_us_per_query"),
            _with_range(r, "ratio_to_saturation"),
            _num(r.get("wakeups_per_query")),
        ]
        for r in rows
    ]
    return render.table(
        [
            "target",
            "transport",
            "profile",
            "connections",
            "share of capacity",
            "valid rounds",
            "offered qps",
            f"CPU-µs per query (min{DASH}max)",
            f"over its cost at saturation (min{DASH}max)",
            "target wake-ups per query",
        ],
        body,
        text_columns={0, 1, 2},
    )


def _latency_table(a: Analysis, pages: Mapping[str, str]) -> Table | None:
    rows = [r for r in _rows(a, "latency") if r.get("p50_us") is not None]
    if not rows:
        return None
    body = [
        [
            r.get("target"),
            display_transport(r.get("transport")),
            r.get("group"),
            display_profile(r.get("lifetime"), _num(r.get("resumption")), _num(r.get("early_data"))),
            r.get("connections"),
            r.get("reps"),
            _num(r.get("p50_us")),
            _num(r.get("p90_us")),
            _num(r.get("p99_us")),
            _num(r.get("p999_us")),
            r.get("share"),
            _num(r.get("share_offered_qps")),
            _num(r.get("share_p50_us")),
            _num(r.get("share_p99_us")),
            _series_links(
                a,
                pages,
                r,
                ("target", "transport", "group", "lifetime", "resumption", "early_data", "connections"),
                str(r.get("analysis")),
            ),
        ]
        for r in rows
    ]
    return render.table(
        [
            "target",
            "transport",
            "group",
            "profile",
            "connections",
            "valid reps",
            "p50 µs",
            "p90 µs",
            "p99 µs",
            "p99.9 µs",
            "below saturation: share",
            "offered qps",
            "p50 µs",
            "p99 µs",
            "over time",
        ],
        body,
        text_columns={0, 1, 2, 3, 14},
    )


def _wire_context(a: Analysis) -> dict[str, object]:
    """Packets and octets per answered query, each direction, per target, transport and profile,
    beside the slides' figures for one query on a new connection."""
    rows = sorted(
        _rows(a, "wire"),
        key=lambda r: (
            str(r.get("target")),
            transport_key(str(r.get("transport"))),
            lifetime_key(r.get("lifetime")),
            _num(r.get("resumption")) or 0.0,
            _num(r.get("early_data")) or 0.0,
            str(r.get("cert_key") or ""),
            _num(r.get("connections")) or 0.0,
        ),
    )
    slides = study.wire_one_query()
    slides_text = "; ".join(
        f"{display_transport(t)} {w.messages} messages" + (f", {w.bytes:,} octets" if w.bytes is not None else "")
        for t, w in sorted(slides.items(), key=lambda kv: transport_key(kv[0]))
    )
    body = [
        [
            r.get("target"),
            display_transport(r.get("transport")),
            "no connection"
            if r.get("transport") == "udp"
            else display_profile(r.get("lifetime"), _num(r.get("resumption")), _num(r.get("early_data"))),
            r.get("cert_key"),
            r.get("connections"),
            r.get("trials"),
            _num(r.get("packets_sent_per_query")),
            _num(r.get("packets_received_per_query")),
            _num(r.get("packets_per_query")),
            r.get("study_messages"),
            _num(r.get("bytes_sent_per_query")),
            _num(r.get("bytes_received_per_query")),
            _num(r.get("frame_bytes_per_query_est")),
            r.get("study_bytes"),
            _num(r.get("queries_per_connection")),
        ]
        for r in rows
    ]
    table = (
        render.table(
            [
                "target",
                "transport",
                "profile",
                "certificate key",
                "connections",
                "trials",
                "packets sent/query",
                "packets received/query",
                "packets/query",
                "slides: messages",
                "payload octets sent/query",
                "payload octets received/query",
                "frame octets/query (est.)",
                "slides: octets",
                "queries/connection",
            ],
            body,
            text_columns=4,
            row_classes=["" if r.get("valid") else "invalid" for r in rows],
            caption="Packets and octets per answered query, each direction (sent: generator to target)",
        )
        if rows
        else None
    )
    return {
        "table": table,
        "source": study.WIRE_SOURCE,
        "slides": slides_text,
        "any_invalid": any(not r.get("valid") for r in rows),
    }


def _cost_term(r: Row) -> Any:
    """A term's estimate, or "not identified" (never 0) with the bound its interval gives."""
    us = _num(r.get("us"))
    if us is not None:
        return us
    high = _num(r.get("ci95_high"))
    return NOT_IDENTIFIED + (f" (≤ {fmt(high)})" if high is not None else "")


def _cost_context(a: Analysis) -> dict[str, object]:
    terms = _rows(a, "cost_model")
    fits = _rows(a, "cost_model_fit")
    terms_table = (
        render.table(
            ["target", "transport", "term", "CPU-µs", "95 % low", "95 % high", "why not identified"],
            [
                [
                    r.get("target"),
                    display_transport(r.get("transport")),
                    r.get("term"),
                    _cost_term(r),
                    _num(r.get("ci95_low")),
                    _num(r.get("ci95_high")),
                    r.get("reason"),
                ]
                for r in terms
            ],
            text_columns={0, 1, 2, 6},
            row_classes=["" if _num(r.get("us")) is not None else "not-identified" for r in terms],
            caption=(
                "Coefficients: target CPU-µs per query, per full handshake (tcp: per connection), per resumed "
                "handshake, per connection-second; 95 % bootstrap intervals over trials. A term the trials "
                "cannot separate from the others or from zero is not identified (its interval, when it has "
                "one, still bounds it)"
            ),
        )
        if terms
        else None
    )
    fits_table = (
        render.table(
            [
                "target",
                "transport",
                "trials",
                "terms identified",
                "R²",
                "hold-out trials",
                "hold-out median |error| %",
                "hold-out max |error| %",
            ],
            [
                [
                    r.get("target"),
                    display_transport(r.get("transport")),
                    r.get("trials"),
                    f"{fmt(r.get('terms_identified'))} of {fmt(r.get('terms'))}",
                    _num(r.get("r2")),
                    r.get("holdout_trials"),
                    _num(r.get("holdout_median_abs_error_pct")),
                    _num(r.get("holdout_max_abs_error_pct")),
                ]
                for r in fits
            ],
            text_columns={0, 1, 3},
            caption="Fit quality: R² and the leave-one-out prediction error of target CPU time",
        )
        if fits
        else None
    )
    return {"terms": terms_table, "fits": fits_table}


def _interval_text(value: Any, low: Any, high: Any, scale: float = 1.0, digits: int = 3) -> str:
    """``value [low-high]`` scaled, or the value alone when it has no interval."""
    v = _num(value)
    if v is None:
        return NOT_IDENTIFIED
    lo, hi = _num(low), _num(high)
    text = fmt(v / scale, digits)
    return text + (
        f" [{fmt(lo / scale, digits)}-{fmt(hi / scale, digits)}]" if lo is not None and hi is not None else ""
    )


def _what_if(a: Analysis) -> Table | None:
    """The capacity plan of a few standard mixes at 10 000 and 50 000 qps, per target
    (:func:`dnscost.analysis.capacity.what_if_rows`, from the run's cost model)."""

    model = run_model(_rows(a, "trials"), _rows(a, "memory_points"))
    if not model.targets:
        return None
    rows = what_if_rows(model, lambda name: load_profile(name, Path.cwd()))
    body, classes = [], []
    for r in rows:
        reasons = [
            f"{what}: {r[f'{name}_reason']}"
            for what, name in (("CPU", "cores"), ("memory", "memory_bytes"))
            if r.get(f"{name}_reason")
        ]
        body.append(
            [
                r["mix"],
                r["description"],
                r["qps"],
                r["target"],
                _interval_text(r["cores"], r["cores_low"], r["cores_high"], digits=4),
                _interval_text(r["cpu_us_per_s"], r["cpu_us_per_s_low"], r["cpu_us_per_s_high"], 1e6),
                _interval_text(r["memory_bytes"], r["memory_bytes_low"], r["memory_bytes_high"], 2**20),
                _interval_text(r["kwh_per_day"], r["kwh_per_day_low"], r["kwh_per_day_high"]),
                _num(r["connections_held"]),
                "; ".join(reasons) or None,
            ]
        )
        classes.append("not-identified" if r["cores"] is None else "")
    return render.table(
        [
            "mix (dnscost plan --mix)",
            "what",
            "qps",
            "target",
            "cores",
            "CPU, cores",
            "memory, MiB",
            "kWh/day above idle",
            "connections held",
            "why not identified",
        ],
        body,
        text_columns={0, 1, 3, 9},
        row_classes=classes,
        caption="What if: the cores, memory and energy a day each target needs for a few standard mixes of "
        "transports and clients at a steady rate (dnscost plan, docs/capacity.md); 95 % intervals over the "
        "cost model's bootstrap resamples (memory: the memory fit's intervals added)",
    )


def _mean(values: Iterable[Any]) -> float | None:
    present = [v for x in values if (v := _num(x)) is not None]
    return sum(present) / len(present) if present else None


def _capacity_table(a: Analysis) -> Table | None:
    """The capacity searches: per target and transport or profile, the highest rate, and the
    clients a profile's rate stands for, that met the objective, per core of the target."""
    rows = _rows(a, "capacity")
    if not rows:
        return None
    body = [
        [
            r.get("target"),
            display_transport(r.get("transport")),
            r.get("profile")
            or (DASH if r.get("transport") == "udp" else display_profile(r.get("lifetime"), _num(r.get("resumption")))),
            r.get("connections") if r.get("connections") is not None else DASH,
            f"loss ≤ {fmt(100 * (_num(r.get('max_loss')) or 0))} %, p99 ≤ {fmt(_num(r.get('max_p99_ms')))} ms",
            f"{r.get('valid_reps')} of {r.get('reps')}",
            ("≥ " if r.get("lower_bound") else "") + _range(r, "qps"),
            _num(r.get("qps_per_core")),
            ("≥ " if r.get("lower_bound") else "") + _range(r, "clients")
            if r.get("clients_median") is not None
            else DASH,
            _num(r.get("clients_per_core")),
            _num(r.get("p99_us")),
            _num(r.get("cpu_us_per_query")),
            r.get("failed") or DASH,
        ]
        for r in rows
    ]
    return render.table(
        [
            "target",
            "transport",
            "profile",
            "connections",
            "objective",
            "valid",
            "qps, median [min-max]",
            "qps per core",
            "clients, median [min-max]",
            "clients per core",
            "p99 µs at it",
            "CPU-µs/query at it",
            "the step above broke",
        ],
        body,
        text_columns={0, 1, 2, 4, 5, 6, 8, 12},
        caption="The highest rate (and the clients it stands for) at which the target met the objective, open loop",
    )


def _over_time(a: Analysis, pages: Mapping[str, str]) -> Table | None:
    """Every trial drawn over time: its page, what it was, and its measured period's means."""
    by_trial = series.series_by_trial(_rows(a, "series"))
    body, classes = [], []
    for t in _rows(a, "trials"):
        trial_id = str(t.get("id"))
        if trial_id not in pages:
            continue
        measured = [r for r in by_trial.get(trial_id, []) if r.get("phase") == "measure"]
        p99 = [v for r in measured if (v := _num(r.get("latency_p99_us"))) is not None]
        cpu = _mean(r.get("target_cpu_share") for r in measured)
        body.append(
            [
                Links(((trial_id, pages[trial_id]),)),
                display_transport(t.get("transport")),
                display_profile(t.get("lifetime"), _num(t.get("resumption")), _num(t.get("early_data"))),
                t.get("connections"),
                t.get("valid"),
                _mean(r.get("offered_qps") for r in measured),
                _mean(r.get("answered_qps") for r in measured),
                max(p99) / 1000 if p99 else None,
                _mean(r.get("connections_open") for r in measured),
                _mean(r.get("handshakes_full_per_s") for r in measured),
                _mean(r.get("handshakes_resumed_per_s") for r in measured),
                cpu * 100 if cpu is not None else None,
            ]
        )
        classes.append("" if t.get("valid") is True else "invalid")
    if not body:
        return None
    return render.table(
        [
            "trial (its page)",
            "transport",
            "profile",
            "connections",
            "valid",
            "offered qps",
            "answered qps",
            "worst second's p99, ms",
            "open connections",
            "full handshakes/s",
            "resumed/s",
            "target CPU, % of a core",
        ],
        body,
        text_columns={0, 1, 2, 4},
        row_classes=classes,
        caption="Each trial's measured period, second by second on its page: the means of its seconds here",
    )


def _trial_page(a: Analysis) -> series.PageRenderer:
    """Fills ``trial.html.j2`` for one trial's page."""
    run_name = f"{a.run.get('experiment', 'run')} {a.run.get('run_id', '')}".strip()

    def page(trial_id: str, trial: Mapping[str, object], rows: Sequence[Row], svg: str) -> str:
        facts = [
            (k, fmt(trial.get(k)))
            for k in (
                "analysis",
                "target",
                "target_version",
                "transport",
                "connections",
                "lifetime",
                "resumption",
                "early_data",
                "rate",
                "in_flight",
                "profile",
                "clients",
                "round",
                "valid",
                "flags",
            )
            if trial.get(k) not in (None, "")
        ]
        table = render.table(
            series.TABLE_HEADERS,
            [[r.get(c) if c in ("phase",) else _num(r.get(c)) for c in series.TABLE_COLUMNS] for r in rows],
            text_columns={1},
        )
        return TEMPLATES.get_template("trial.html.j2").render(
            title=f"{trial_id}: over time", run_name=run_name, facts=facts, svg=Markup(svg), rows_table=table
        )

    return page


def _validity(a: Analysis, pages: Mapping[str, str]) -> Table | None:
    table_rows = {r.get("id"): r for r in _rows(a, "trials")}
    body, classes = [], []
    for t in a.trials:
        row = table_rows.get(t.get("id"), {})
        v = _dict(_dict(t.get("summary")).get("validity"))
        valid = row.get("valid") if isinstance(row.get("valid"), bool) else v.get("valid")
        flags = row.get("flags") if row.get("flags") is not None else v.get("flags")
        if isinstance(flags, str):
            flags = [f for f in re.split(r"[;,]", flags) if f]
        status = t.get("status")
        page = pages.get(str(t.get("id")))
        body.append(
            [
                Links(((str(t.get("id")), page),)) if page else t.get("id"),
                status,
                t.get("error") if status != "done" else None,
                valid,
                flags or None,
                v.get("generator_kept_up"),
                _num(v.get("loss")),
                _num(v.get("cache_hit_ratio", t.get("cache_hit_ratio"))),
                _num(v.get("answer_count_agreement")),
            ]
        )
        classes.append("invalid" if status != "done" or valid is not True else "")
    if not body:
        return None
    return render.table(
        ["trial", "status", "error", "valid", "flags", "generator kept up", "loss", "cache hits", "answer agreement"],
        body,
        text_columns=5,
        row_classes=classes,
    )


def _verdict_class(verdict: str) -> str:
    if verdict.startswith("agrees"):
        return "agrees"
    if verdict.startswith("differs"):
        return "differs"
    return "unmeasured"


def _points_table(a: Analysis) -> Table:
    """Every number and statement of the study's record (``iscc2023.toml``) beside ours."""
    rows = [[p.section, p.study, p.ours, Span(p.verdict, _verdict_class(p.verdict))] for p in points.study_points(a)]
    return render.table(["record", "study", "ours", "verdict"], rows, text_columns={0, 1, 2, 3})


def _comparison(a: Analysis) -> dict[str, object]:
    sources = sorted({str(r.get("energy_source")) for r in _rows(a, "energy") if r.get("energy_source")})
    versions = _dict(a.run.get("versions"))
    return {
        "citation": study.CITATION,
        "setup": study.published()["setup"],
        "source": study.SOURCE,
        "points": _points_table(a),
        "factor": points.FACTOR,
        "same": points.SAME,
        "model_energy": any("model" in s for s in sources),
        "versions": ", ".join(f"{k} {v}" for k, v in sorted(versions.items())),
    }


def _facts(items: Mapping[str, object]) -> list[tuple[str, str]]:
    return [(str(k), json.dumps(v) if isinstance(v, dict | list) else fmt(v)) for k, v in items.items()]


def _version(run: RunRecord) -> str:
    """dnscost's version and the commit that measured the run, when run.json names it."""
    version = str(run.get("dnscost_version", DASH))
    source = run.get("dnscost_source")
    if source is not None:
        version += f" (commit {source['commit'][:10]}{', with changes' if source['dirty'] else ''})"
    return version


def _machine(a: Analysis) -> dict[str, object]:
    run = a.run
    spec_text = run.get("spec_toml")
    if not isinstance(spec_text, str) or not spec_text.strip():
        spec = run.get("spec", run.get("settings"))
        spec_text = json.dumps(spec, indent=2, sort_keys=True) if spec is not None else ""
    return {
        "machine": _facts(_dict(run.get("machine"))),
        "versions": _facts({"dnscost": _version(run), **_dict(run.get("versions"))}),
        "spec": spec_text,
    }


_NAV = (
    ("summary", "Summary", None),
    ("fig3", "Memory", "memory"),
    ("fig4", "Connections", "connections"),
    ("fig5", "Lifetimes", "establishment"),
    ("table1", "Energy", "energy"),
    ("clients", "Real clients", "clients"),
    ("population", "Your traffic", "population"),
    ("latency", "Latency", "latency"),
    ("cost-curves", "Cost at load", "curve"),
    ("cost-model", "Cost model", "cost_model"),
    ("what-if", "What if", "cost_model"),
    ("wire", "Wire", None),
    ("study", "Study", None),
    ("capacity", "Capacity", None),
    ("over-time", "Over time", None),
    ("validity", "Validity", None),
    ("machine", "Machine", None),
)
"""Every section: anchor, label in the navigation bar, and the analysis that the spec's
``analyses`` must ask for (None: always there)."""


_MARKDOWN = jinja2.Environment(
    loader=jinja2.PackageLoader("dnscost.report", "templates"),
    autoescape=False,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
"""The study page (``study.md``): the report's tables as Markdown, for a paper or a README."""
_MARKDOWN.filters["cell"] = lambda value: (
    str(value.text if isinstance(value, Span) else value).replace("|", "\\|").replace("\n", " ")
)


def _macro(name: str) -> Any:
    """A macro of ``templates/macros.html.j2``, callable from Python."""
    return getattr(TEMPLATES.get_template("macros.html.j2").module, name)


def render_report(a: Analysis, run_dir: Path, *, headline: Sequence[Head] | None = None) -> Path:
    """Draws the figures into ``run_dir/figures`` and writes ``run_dir/report.html`` from an
    analysis already made; returns the report's path. ``headline`` is
    :func:`dnscost.analysis.headline`'s output (empty summary without it)."""
    figures = save_figures(a, run_dir / "figures")
    pages = series.write_pages(run_dir, _rows(a, "series"), _rows(a, "trials"), _trial_page(a))
    capacity = _capacity_table(a)
    run = a.run
    wanted = wanted_analyses(a)
    shown = {analysis for _, _, analysis in _NAV if analysis is None or analysis in wanted}
    udp_lines = [
        f"{r.get('target')}: {fmt(_num(r.get('udp_saturation_qps')))} qps at saturation (closed loop, the reference "
        f"for shares of UDP), {fmt(_num(r.get('udp_max_qps')))} qps with loss below 1 % (open loop)"
        for r in _rows(a, "baseline")
    ]
    context = {
        "title": f"dnscost report: {run.get('experiment', 'run')} {run.get('run_id', run_dir.name)}",
        "run_name": f"{run.get('experiment', 'run')} {run.get('run_id', run_dir.name)}",
        "note": run.get("note") if isinstance(run.get("note"), str) else None,
        "status": run.get("status", "unknown"),
        "started": _when(run.get("created_unix_ms")),
        "finished": _when(run.get("finished_unix_ms")),
        "command": " ".join(str(c) for c in run.get("command") or []),
        "version": _version(run),
        "nav": [
            (anchor, label)
            for anchor, label, analysis in _NAV
            if analysis in shown and (anchor != "capacity" or capacity is not None)
        ],
        "shown": shown,
        "titles": {name: title for name, (title, _, _) in _CAPTIONS.items()},
        "summary": _summary(a, headline or []),
        "figures": {name: _figure(name, figures) for name in _CAPTIONS},
        "memory": _memory_table(a, pages),
        "connections": _connections_table(a, pages),
        "establishment": _establishment_table(a, pages),
        "udp_lines": "; ".join(udp_lines),
        "table1": _study_table1_context(a),
        "energy": _energy_context(a),
        "clients": _clients_table(a),
        "population": _population_table(a),
        "latency": _latency_table(a, pages),
        "curves": _curve_table(a),
        "cost": _cost_context(a),
        "what_if": _what_if(a) if "cost_model" in shown else None,
        "wire": _wire_context(a),
        "study": _comparison(a),
        "consistency": _consistency(a),
        "validity": _validity(a, pages),
        "over_time": _over_time(a, pages),
        "capacity": capacity,
        "machine": _machine(a),
    }
    path = run_dir / "report.html"
    path.write_text(TEMPLATES.get_template("report.html.j2").render(context), encoding="utf-8")
    (run_dir / "study.md").write_text(_MARKDOWN.get_template("study.md.j2").render(context), encoding="utf-8")
    return path


def write_report(run_dir: Path) -> Path:
    """Analyses the run in ``run_dir`` (reads stored results only), writes its tables
    (``tables/``), figures (``figures/``) and ``report.html``; returns the report's path."""
    a = analysis.analyze(run_dir)
    analysis.write_tables(a, run_dir / "tables")
    return render_report(a, run_dir, headline=analysis.headline(a))
