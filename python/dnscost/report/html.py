"""The run's report: one self-contained HTML file (figures as inline SVG, inline CSS and script;
no external resource, no network access) written next to the run's tables and figures.

Every piece of text from the run goes through :func:`html.escape`. A small inline script checks,
on load, that every figure rendered and records ``data-figures-ok="<rendered>/<total>"`` on the
body, which :mod:`dnscost.report.browser` reads back.
"""

from __future__ import annotations

import datetime
import html
import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dnscost import analysis
from dnscost.analysis import Analysis
from dnscost.report import study
from dnscost.report.figures import (
    display_profile,
    display_transport,
    lifetime_key,
    save_figures,
    transport_key,
    wanted_analyses,
)
from dnscost.report.versus import StudyComparison, energy_source_label, versus_study

__all__ = ["render_report", "write_report"]

Row = dict[str, Any]

DASH = "\u2013"
"""Shown for a missing value."""
NOT_IDENTIFIED = "not identified"
"""Shown for a cost-model term the trials do not identify (never 0)."""

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1250px;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .88em; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: right; vertical-align: top; }
th { background: #f2f2f2; } td.text, th.text { text-align: left; }
tr.invalid td { background: #fde2e2; }
tr.not-identified td { color: #777; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: .9em; color: #444; margin-top: .3em; }
.missing { color: #8a6d3b; background: #fcf8e3; padding: .4em .6em; border: 1px solid #faebcc; }
.note { font-size: .9em; color: #444; }
.agrees { color: #1a7f37; } .differs { color: #b35900; } .unmeasured { color: #777; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; font-size: .85em; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: .15em 1em; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
"""

_SCRIPT = """
window.addEventListener("load", function () {
  var figures = document.querySelectorAll("figure");
  var rendered = 0;
  figures.forEach(function (figure) {
    var svg = figure.querySelector("svg");
    if (!svg) { return; }
    var box = svg.getBoundingClientRect();
    var inner = svg.getBBox();
    if (box.width > 0 && box.height > 0 && inner.width > 0 && inner.height > 0) { rendered += 1; }
  });
  document.body.dataset.figuresOk = rendered + "/" + figures.length;
});
"""

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
    "cost_model": (
        "Cost model",
        "Target CPU time per unit of each term (non-negative least squares over the valid trials of each "
        "target and transport), with 95 % bootstrap intervals; terms the trials do not identify are left out.",
        "cost_model",
    ),
}


def esc(value: Any) -> str:
    """Any value as escaped HTML text."""
    return html.escape(str(value), quote=True)


def fmt(value: Any, digits: int = 3) -> str:
    """A cell's text: a dash for missing, ``yes``/``no``, integers with separators, floats with
    ``digits`` significant digits (whole numbers above 1000)."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:
            return DASH
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _rows(a: Analysis, name: str) -> list[Row]:
    table = a.tables.get(name)
    return list(table.rows) if table is not None else []


def _table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    text_columns: int | set[int] = 1,
    row_classes: Sequence[str] | None = None,
    caption: str | None = None,
    raw: bool = False,
) -> str:
    """An HTML table; cells are formatted with :func:`fmt` and escaped (unless ``raw``: then
    they are already HTML). Text columns (the first ``text_columns``, or those indices) are
    left-aligned, the others (numbers) right-aligned."""
    text = set(range(text_columns)) if isinstance(text_columns, int) else text_columns

    def align(i: int) -> str:
        return "text" if i in text else "num"

    out = ["<table>"]
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    out.append(
        "<thead><tr>"
        + "".join(f'<th class="{align(i)}">{esc(h)}</th>' for i, h in enumerate(headers))
        + "</tr></thead><tbody>"
    )
    for k, row in enumerate(rows):
        cls = row_classes[k] if row_classes else ""
        out.append(f'<tr class="{esc(cls)}">' if cls else "<tr>")
        for i, cell in enumerate(row):
            content = str(cell) if raw and isinstance(cell, str) else esc(fmt(cell))
            out.append(f'<td class="{align(i)}">{content}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _missing(what: str) -> str:
    return f'<p class="missing">{esc(what)}</p>'


_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)


_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')


def inline_svg(svg_text: str, prefix: str) -> str:
    """A saved SVG made fit to sit inside HTML: no XML prolog, DOCTYPE or metadata, and every
    id (and every reference to one) prefixed, since matplotlib numbers its ids afresh in each
    figure and ids must be unique in the page."""
    text = _METADATA.sub("", _PROLOG.sub("", svg_text, count=1), count=1).strip()
    text = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', text)
    return _REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", text)


def _figure(name: str, figures: dict[str, tuple[Path, Path]]) -> str:
    _, caption, table = _CAPTIONS[name]
    if name not in figures:
        return _missing(f"No data for this figure in this run (the {table} table is empty).")
    svg_path, png_path = figures[name]
    return (
        f'<figure id="figure-{esc(name)}">{inline_svg(svg_path.read_text(), esc(name))}'
        f"<figcaption>{esc(caption)} Files: figures/{esc(svg_path.name)}, figures/{esc(png_path.name)}."
        "</figcaption></figure>"
    )


def _when(ms: Any) -> str:
    value = _num(ms)
    if not value:
        return DASH
    return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _section(anchor: str, title: str, *parts: str) -> str:
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{"".join(parts)}</section>'


def _kwh(energy: list[Row], transport: str, lifetime: str) -> float | None:
    """kWh per day at 10 000 qps of one transport and lifetime without resumption."""
    for e in energy:
        if e.get("transport") == transport and (e.get("lifetime") or "forever") == lifetime and not e.get("resumption"):
            return _num(e.get("kwh_per_day_at_10k_qps"))
    return None


def _summary(a: Analysis, headline: list[Row]) -> str:
    trials = a.trials
    done = sum(1 for t in trials if t.get("status") == "done")
    invalid = sum(1 for r in _rows(a, "trials") if r.get("valid") is False and r.get("status") == "done")
    parts = [
        f"<p>{len(trials)} trials planned, {done} done, {invalid} of those invalid (kept in the tables, left out of "
        'fits and headline figures); see <a href="#validity">validity</a>. Figures below come from valid trials '
        "only.</p>"
    ]
    if not headline:
        parts.append(_missing("No headline figures: the run has no valid load trials."))
        return _section("summary", "Summary", *parts)
    rows = []
    for h in headline:
        persistent, collapse = _dict(h.get("persistent")), _dict(h.get("collapse_1q"))
        memory = _dict(h.get("memory_per_connection"))
        energy = [e for e in h.get("energy") or [] if isinstance(e, dict)]
        target, version, udp = h.get("target"), h.get("target_version"), _num(h.get("udp_saturation_qps"))
        rows.append(
            [target, version, "UDP", udp, 1.0 if udp else None, None, None, None, _kwh(energy, "udp", "forever"), None]
        )
        for t in sorted({*persistent, *collapse, *memory} - {"udp"}, key=transport_key):
            p, c, m = _dict(persistent.get(t)), _dict(collapse.get(t)), _dict(memory.get(t))
            total = _num(m.get("total_bytes"))
            rows.append(
                [
                    target,
                    version,
                    display_transport(t),
                    _num(p.get("qps")),
                    _num(p.get("share_of_udp")),
                    _num(c.get("ratio")),
                    _num(c.get("ratio_resumed")),
                    total / 1024 if total is not None else None,
                    _kwh(energy, t, "forever"),
                    _kwh(energy, t, "1q"),
                ]
            )
    parts.append(
        _table(
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
    )
    parts.append(_headline_table(a))
    return _section("summary", "Summary", *parts)


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
    "memory_bytes_per_connection": "bytes per idle connection (user + kernel)",
}


def _headline_table(a: Analysis) -> str:
    """The ``headline`` table: every headline figure with its interval."""
    rows = _rows(a, "headline")
    if not rows:
        return ""
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
    return _table(
        ["target", "figure", "transport", "profile", "median / estimate", "low", "high", "n", "interval"],
        body,
        text_columns={0, 1, 2, 3, 8},
        caption=f"Headline figures with their intervals (up to {rounds} rounds; each ratio divides values "
        "measured in the same round)",
    )


def _consistency(a: Analysis) -> str:
    """Cells that contradict physics beyond their intervals, both named."""
    rows = _rows(a, "consistency")
    if not rows:
        return (
            '<p class="note">Consistency checks (shorter lifetimes never cheaper per query, resumed handshakes '
            "never dearer than full ones, memory per connection never below the kernel's socket buffers): no "
            "contradiction beyond the intervals.</p>"
        )
    body = [
        [r.get("flag"), r.get("cell"), r.get("against"), r.get("what"), _num(r.get("value")), _num(r.get("low")),
         _num(r.get("high")), r.get("interval")]
        for r in rows
    ]  # fmt: skip
    return "<h3>Contradictions</h3>" + _table(
        ["flag", "cell", "against", "what", "value", "low", "high", "interval"],
        body,
        text_columns={0, 1, 2, 3, 7},
        row_classes=["invalid"] * len(body),
        caption="Cells that contradict physics beyond their intervals; their trials carry the flag (still valid)",
    )


def _memory_table(a: Analysis) -> str:
    rows = _rows(a, "memory_fit")
    if not rows:
        return ""

    def ci(r: Row, kind: str) -> str:
        low, high = _num(r.get(f"{kind}_ci95_low")), _num(r.get(f"{kind}_ci95_high"))
        if low is None or high is None:
            return DASH
        return f"{fmt(low / 1024)} {DASH} {fmt(high / 1024)}"

    body = [
        [
            r.get("target"),
            display_transport(r.get("transport")),
            (_num(r.get("user_bytes_per_connection")) or 0) / 1024
            if r.get("user_bytes_per_connection") is not None
            else None,
            ci(r, "user"),
            (_num(r.get("kernel_bytes_per_connection")) or 0) / 1024
            if r.get("kernel_bytes_per_connection") is not None
            else None,
            ci(r, "kernel"),
            _num(r.get("user_r2")),
            _num(r.get("kernel_r2")),
            r.get("points"),
            r.get("max_connections"),
        ]
        for r in rows
    ]
    return _table(
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
        ],
        body,
        text_columns=2,
    )


def _study_table1(a: Analysis) -> str:
    """Table I as the study measured it (the ``table1`` table): per target and cell, our kWh for a
    day at 10 000 qps by the study's method and by the cost model, the study's kWh, both ratios
    to UDP and the verdict."""
    rows = [r for r in _rows(a, "table1") if r.get("transport") is not None]
    if not rows:
        return _missing("No Table I cells in this run (no establishment trials).")
    body = [
        [
            r.get("target"),
            display_transport(str(r["transport"])),
            display_profile(r.get("lifetime") or "forever", 0.0) if r["transport"] != "udp" else "no connection",
            r.get("cert_key") or "default",
            _num(r.get("kwh_study_method"))
            if r.get("kwh_study_method") is not None or not r.get("reps")
            else f"no valid trial ({r.get('valid_reps') or 0} of {r.get('reps')})",
            _num(r.get("kwh_model")) if r.get("model_status") == "identified" else r.get("model_status"),
            _num(r.get("study_kwh")),
            _num(r.get("ratio_to_udp")),
            _num(r.get("model_ratio_to_udp")),
            _num(r.get("study_ratio_to_udp")),
            r.get("verdict"),
        ]
        for r in rows
    ]
    table = _table(
        [
            "target",
            "transport",
            "connections",
            "certificate key",
            "ours, kWh/day (study's method)",
            "ours, kWh/day (cost model at 10 000 qps)",
            "study, kWh/day",
            "ours ÷ UDP (study's method)",
            "ours ÷ UDP (cost model)",
            "study ÷ UDP",
            "verdict",
        ],
        body,
        text_columns={0, 1, 2, 3, 10},
        caption="Table I as the study measured it: 1 000 connections lasting 30 s (33/s), 1 s (1 000/s) or one "
        "query each, TLS resumption off; a day at 10 000 qps",
    )
    from dnscost.analysis.table1 import AGREE_FACTOR, key_match
    from dnscost.analysis.tables import group_by

    matches = key_match(rows)
    keys = ""
    if matches:
        by_target = group_by(matches, lambda m: m["target"])
        verdicts = []
        for target, ms in by_target.items():
            best = min(ms, key=lambda m: abs(math.log(m["ours_over_study"])))
            detail = ", ".join(
                f"{m['cert_key'] or 'default'}: {m['agree']} of {m['cells']} TLS cells agree, ours \u00f7 study "
                f"{m['ours_over_study']:.2f} (geometric mean)"
                for m in ms
            )
            closer = f"closer: {best['cert_key'] or 'default'}" if len(ms) > 1 else "one key type measured"
            verdicts.append(f"{target}: {detail}; {closer}")
        keys = (
            "<p>Which certificate key the study's ratios match (DoT and DoH cells): "
            + esc("; ".join(verdicts))
            + ".</p>"
        )

    note = (
        '<p class="note">Two energy methods. The study\'s method: energy per query at saturation \u00d7 10 000 '
        "\u00d7 86 400 (the handshakes of a 30 s or 1 s profile come at a fixed rate, spread over the saturated "
        "rate's queries). The cost model: the target CPU time the fitted model predicts for exactly 10 000 qps "
        "with the profile's connection rate and 1 000 connections held, turned into energy with the joules per "
        "CPU-\u00b5s the cell's own trials measured; \u201cnot identified\u201d when a term it needs is not. "
        f"Verdict: \u201cagree\u201d when our ratio to UDP (study's method) is within a factor {AGREE_FACTOR:g} of "
        "the study's either way, \u201cdiffer\u201d otherwise; \u201cnot measured\u201d: the run has no trial for "
        "the cell (the quick study has no 30 s lifetime).</p>"
    )
    return table + keys + note


def _energy_table(a: Analysis) -> str:
    """Table I: rows transport by profile, columns targets, kWh per day at 10 000 qps with the
    target CPU-µs per query beside it."""
    rows = [r for r in _rows(a, "energy") if r.get("transport") is not None]
    if not rows:
        return _missing("No energy figures in this run (the energy table is empty).")
    targets = list(dict.fromkeys(str(r["target"]) for r in rows if r.get("target") is not None))
    keys = sorted(
        {(str(r["transport"]), r.get("lifetime") or "forever", _num(r.get("resumption")) or 0.0) for r in rows},
        key=lambda k: (transport_key(k[0]), lifetime_key(k[1]), k[2]),
    )
    by_key = {
        (r.get("target"), str(r["transport"]), r.get("lifetime") or "forever", _num(r.get("resumption")) or 0.0): r
        for r in rows
    }
    head = (
        '<table class="table-i"><caption>Table I analogue: energy above idle for a day at 10 000 qps (kWh) and '
        'target CPU-µs per query</caption><thead><tr><th class="text" rowspan="2">transport</th>'
        '<th class="text" rowspan="2">connection lifetime</th>'
        + "".join(f'<th colspan="2">{esc(t)}</th>' for t in targets)
        + "</tr><tr>"
        + "".join("<th>kWh/day</th><th>CPU-µs/query</th>" for _ in targets)
        + "</tr></thead><tbody>"
    )
    body = []
    for transport, lifetime, resumption in keys:
        cells = [
            f'<td class="text">{esc(display_transport(transport))}</td>',
            f'<td class="text">{esc(display_profile(lifetime, resumption))}</td>',
        ]
        for target in targets:
            r = by_key.get((target, transport, lifetime, resumption), {})
            cells.append(f"<td>{esc(fmt(_num(r.get('kwh_per_day_at_10k_qps'))))}</td>")
            cells.append(f"<td>{esc(fmt(_num(r.get('cpu_us_per_query'))))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    sources = {
        target: sorted(
            {str(r.get("energy_source")) for r in rows if r.get("target") == target and r.get("energy_source")}
        )
        for target in targets
    }
    source_text = "; ".join(
        f"{t}: {', '.join(energy_source_label(s) for s in sources[t]) or 'unknown'}" for t in targets
    )
    note = (
        f'<p class="note">Energy source: {esc(source_text)}. RAPL is measured package energy above the idle '
        "baseline; the model (CCF coefficients) is a linear CPU power model with Cloud Carbon Footprint's average "
        "per-vCPU coefficients applied to the target's CPU time: it ranks transports on this machine, it is not a "
        "measurement of its power. kWh/day = energy per query \u00d7 10 000 \u00d7 86 400 / 3.6 \u00d7 10⁶.</p>"
    )
    return head + "".join(body) + "</tbody></table>" + note


def _latency_table(a: Analysis) -> str:
    rows = [r for r in _rows(a, "latency") if r.get("p50_us") is not None]
    if not rows:
        return ""
    body = [
        [
            r.get("target"),
            display_transport(r.get("transport")),
            r.get("group"),
            display_profile(r.get("lifetime"), _num(r.get("resumption"))),
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
        ]
        for r in rows
    ]
    return _table(
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
        ],
        body,
        text_columns=4,
    )


def _wire_table(a: Analysis) -> str:
    """Packets and octets per answered query, each direction, per target, transport and profile,
    beside the slides' figures for one query on a new connection, and what counts."""
    rows = sorted(
        _rows(a, "wire"),
        key=lambda r: (
            str(r.get("target")),
            transport_key(str(r.get("transport"))),
            lifetime_key(r.get("lifetime")),
            _num(r.get("resumption")) or 0.0,
            str(r.get("cert_key") or ""),
            _num(r.get("connections")) or 0.0,
        ),
    )
    slides = study.wire_one_query()
    slides_text = "; ".join(
        f"{display_transport(t)} {w.messages} messages" + (f", {w.bytes:,} octets" if w.bytes is not None else "")
        for t, w in sorted(slides.items(), key=lambda kv: transport_key(kv[0]))
    )
    note = (
        f'<p class="note">The slides\' figures for one query on a new connection ({esc(study.WIRE_SOURCE)}): '
        f"{esc(slides_text)}; they stand beside our UDP rows and our one-query rows without resumption. "
        "Ours are the generator's own counts over each trial's whole run (warm-up included) divided by the "
        "queries it answered, medians over valid trials. <strong>What counts:</strong> for UDP, datagrams and "
        "their DNS payload; for TCP, DoT and DoH, TCP segments as the kernel counts them for the connection "
        "(TCP_INFO), so the SYN, SYN-ACK and handshake ACK, pure ACKs and retransmissions each count one, and "
        "octets are TCP payload (TLS records with their headers and tags, HTTP/2 frames; acknowledged by the "
        "server when sent). A TLS record is not a message: records sharing a segment count once. "
        "<strong>The close is counted</strong>: after its GOAWAY, close_notify and FIN the engine waits for the "
        "server's close_notify and FIN before it reads TCP_INFO a last time, so both FINs and the last ACK are in "
        "the counts (each count equals a capture's, segment for segment, in the test suite), and octets include "
        "one sequence number per FIN each way; runs made before 2026-11-24 counted no close (3 segments per "
        "connection over TCP, 4 to 5 over DoT, 6 to 7 over DoH on loopback). The slides' TCP ladder of 8 "
        "messages fits SYN, SYN-ACK, ACK, query, answer and a close of three, with no separate ACK; on loopback "
        "Linux also sends pure ACKs, so ours are higher. “Frame octets (est.)” adds the headers "
        "of every packet on Ethernet over IPv4 (UDP 42, TCP 66 octets with timestamps), which is how a "
        "capture, and the slides, count octets. TLS octets also depend on the certificate chain: this run's "
        "server sends one certificate from a per-run CA, the study's resolvers a chain of their own. In a "
        "closed loop at saturation, answers share segments and ACKs ride on data, so persistent connections "
        "can take less than one segment per query each way.</p>"
    )
    if not rows:
        return _section(
            "wire",
            "Wire cost per query",
            _missing(
                "No traffic counts in this run's trials (summaries written before the engine's whole-run "
                "traffic was kept, without the raw records to compute it again)."
            ),
            note,
        )
    body = [
        [
            r.get("target"),
            display_transport(r.get("transport")),
            "no connection"
            if r.get("transport") == "udp"
            else display_profile(r.get("lifetime"), _num(r.get("resumption"))),
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
    table = _table(
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
    return _section(
        "wire",
        "Wire cost per query",
        table,
        note,
        '<p class="note">Highlighted rows come from invalid trials (no valid trial in the group): what went on '
        "the wire does not depend on which side was the bottleneck.</p>"
        if any(not r.get("valid") for r in rows)
        else "",
    )


def _cost_term(r: Row) -> Any:
    """A term's estimate, or "not identified" (never 0) with the bound its interval gives."""
    us = _num(r.get("us"))
    if us is not None:
        return us
    high = _num(r.get("ci95_high"))
    return NOT_IDENTIFIED + (f" (≤ {fmt(high)})" if high is not None else "")


def _cost_tables(a: Analysis) -> str:
    terms = _rows(a, "cost_model")
    fits = _rows(a, "cost_model_fit")
    parts = []
    if terms:
        parts.append(
            _table(
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
        )
    if fits:
        parts.append(
            _table(
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
        )
        parts.append(
            '<p class="note">A term is not identified when no trial counts it, when the trials cannot '
            "separate it from another term (rank-deficient design), when fewer than 90 % of the bootstrap "
            "resamples can, or when its interval starts at 0 (docs/results.md, Cost model). The terms are "
            "averages over the loads the trials ran at: at saturation a target batches work and spends less "
            "per unit than at a fixed lower rate, which the hold-out error shows.</p>"
        )
    return "".join(parts)


def _validity(a: Analysis) -> str:
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
        body.append(
            [
                t.get("id"),
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
        return _missing("The run has no trials.")
    return _table(
        [
            "trial",
            "status",
            "error",
            "valid",
            "flags",
            "generator kept up",
            "loss",
            "cache hits",
            "answer agreement",
        ],
        body,
        text_columns=5,
        row_classes=classes,
    ) + (
        '<p class="note">Highlighted rows are invalid or did not finish: kept in every table, left out of fits '
        "and headline figures.</p>"
    )


def _verdict_class(verdict: str) -> str:
    if verdict.startswith("agrees"):
        return "agrees"
    if verdict.startswith("differs"):
        return "differs"
    return "unmeasured"


def _points_table(a: Analysis) -> str:
    """Every number and statement of the study's record (``iscc2023.toml``) beside ours."""
    from dnscost.report.points import study_points

    points = study_points(a)
    rows = [
        [
            esc(p.section),
            esc(p.study),
            esc(p.ours),
            f'<span class="{_verdict_class(p.verdict)}">{esc(p.verdict)}</span>',
        ]
        for p in points
    ]
    return (
        "<h3>The study point by point</h3>"
        '<p class="note">Every number and statement of the study\'s record (iscc2023.toml: the paper and the '
        "authors' slides), in its order, beside this run. \u201ccontext\u201d: a figure of another machine, "
        "shown for scale; \u201cnot checked here\u201d: a statement this run cannot test.</p>"
        + _table(["record", "study", "ours", "verdict"], rows, text_columns={0, 1, 2, 3}, raw=True)
    )


def _comparison(a: Analysis, comparisons: list[StudyComparison]) -> str:
    setup = study.SETUP
    parts = [
        f"<p>The study: {esc(study.CITATION)}. It measured {esc(' and '.join(setup.resolvers))} with "
        f"{esc(setup.generator)} on {esc(setup.clients)}. <strong>Source of the study's figures below: "
        f"{esc(study.SOURCE)}.</strong> None of them is read off the paper's plots.</p>"
    ]
    if comparisons:
        rows = []
        for c in comparisons:
            theirs = fmt(c.finding.value) if c.finding.value is not None else "(given in words only)"
            verdict = f'<span class="{_verdict_class(c.verdict)}">{esc(c.verdict)}</span>'
            rows.append(
                [
                    esc(c.target),
                    esc(c.finding.claim),
                    esc(theirs),
                    esc(fmt(c.ours)),
                    esc(c.finding.unit),
                    verdict,
                    esc(c.how),
                ]
            )
        parts.append(
            _table(
                ["target", "study's finding", "study", "ours", "unit", "verdict", "how ours is computed"],
                rows,
                text_columns={0, 1, 4, 5, 6},
                raw=True,
            )
        )
        verdicts = [c.verdict for c in comparisons]
        parts.append(
            f"<p>Of {len(verdicts)} comparisons, {sum(v == 'agrees' for v in verdicts)} agree, "
            f"{sum(v.startswith('differs') for v in verdicts)} differ and "
            f"{sum(v == 'not measured' for v in verdicts)} were not measured in this run.</p>"
        )
    else:
        parts.append(_missing("This run measured none of the figures the study is compared on."))
    parts.append(_points_table(a))
    sources = sorted({str(r.get("energy_source")) for r in _rows(a, "energy") if r.get("energy_source")})
    energy_note = (
        "Our energy comes from the model (CCF coefficients): a linear function of the target's CPU time, so "
        "energy ratios here are CPU-time ratios, while the study measured power. "
        if any("model" in s for s in sources)
        else "Our energy is RAPL package energy above idle, which also counts the generator's share of the package. "
    )
    versions = _dict(a.run.get("versions"))
    parts.append(
        "<p>Why differences are plausible: the study ran resolvers on their own server with twenty client "
        "machines over a network; this run puts target and generator on one machine over loopback, so there is "
        "no NIC or interrupt cost, receive softirq lands on the sender's core, and the two compete for caches and "
        "memory bandwidth. Our generator (dnscost-engine) is cheaper per query than flamethrower, so the target "
        "saturates first with fewer cores. "
        + esc(energy_note)
        + "Absolute kWh depend on the hardware; ratios between transports travel better than absolute values. "
        + "Resolver and TLS library versions differ from the study's"
        + (f" (here: {esc(', '.join(f'{k} {v}' for k, v in sorted(versions.items())))})" if versions else "")
        + ". A verdict of “agrees” means within a factor of 1.5 for throughput shares, within a factor of 3 "
        "for energy, and below 25 % of UDP for a collapse.</p>"
    )
    return _section("study", "Comparison with the study", *parts)


def _facts(items: dict[str, Any]) -> str:
    if not items:
        return _missing("Not recorded.")
    return (
        '<dl class="facts">'
        + "".join(
            f"<dt>{esc(k)}</dt><dd>{esc(json.dumps(v) if isinstance(v, dict | list) else fmt(v))}</dd>"
            for k, v in items.items()
        )
        + "</dl>"
    )


def _machine(a: Analysis) -> str:
    run = a.run
    machine = _dict(run.get("machine"))
    versions = _dict(run.get("versions"))
    spec_text = run.get("spec_toml")
    if not isinstance(spec_text, str) or not spec_text.strip():
        spec = run.get("spec", run.get("settings"))
        spec_text = json.dumps(spec, indent=2, sort_keys=True) if spec is not None else ""
    return _section(
        "machine",
        "Machine, software and spec",
        "<h3>Machine</h3>",
        _facts(machine),
        "<h3>Software versions</h3>",
        _facts({"dnscost": run.get("dnscost_version"), **versions}),
        "<h3>Spec</h3>",
        f"<pre>{esc(spec_text)}</pre>" if spec_text else _missing("No spec recorded."),
    )


def render_report(a: Analysis, run_dir: Path, *, headline: list[Row] | None = None) -> Path:
    """Draws the figures into ``run_dir/figures`` and writes ``run_dir/report.html`` from an
    analysis already made; returns the report's path. ``headline`` is
    :func:`dnscost.analysis.headline`'s output (empty summary without it)."""
    figures = save_figures(a, run_dir / "figures")
    run = a.run
    title = f"dnscost report: {run.get('experiment', 'run')} {run.get('run_id', run_dir.name)}"
    udp_lines = [
        f"{r.get('target')}: {fmt(_num(r.get('udp_saturation_qps')))} qps at saturation (closed loop, the reference "
        f"for shares of UDP), {fmt(_num(r.get('udp_max_qps')))} qps with loss below 1 % (open loop)"
        for r in _rows(a, "baseline")
    ]
    wanted = wanted_analyses(a)
    optional = {  # sections the spec's `analyses` can leave out, by analysis
        "memory": _section("fig3", _CAPTIONS["fig3_memory"][0], _figure("fig3_memory", figures), _memory_table(a)),
        "connections": _section(
            "fig4",
            _CAPTIONS["fig4_connections"][0],
            f'<p class="note">UDP: {esc("; ".join(udp_lines))}.</p>' if udp_lines else "",
            _figure("fig4_connections", figures),
        ),
        "establishment": _section("fig5", _CAPTIONS["fig5_establishment"][0], _figure("fig5_establishment", figures)),
        "energy": _section("table1", "Table I: energy", _study_table1(a), _energy_table(a), _figure("energy", figures)),
        "latency": _section("latency", _CAPTIONS["latency"][0], _figure("latency", figures), _latency_table(a)),
        "cost_model": _section(
            "cost-model", _CAPTIONS["cost_model"][0], _figure("cost_model", figures), _cost_tables(a)
        ),
    }
    sections = [
        _summary(a, headline or []),
        *(html for name, html in optional.items() if name in wanted),
        _wire_table(a),
        _comparison(a, versus_study(a)),
        _section("validity", "Validity of every trial", _consistency(a), _validity(a)),
        _machine(a),
    ]
    nav = " · ".join(
        f'<a href="#{anchor}">{esc(label)}</a>'
        for anchor, label in (
            ("summary", "Summary"),
            ("fig3", "Memory"),
            ("fig4", "Connections"),
            ("fig5", "Lifetimes"),
            ("table1", "Energy"),
            ("latency", "Latency"),
            ("cost-model", "Cost model"),
            ("wire", "Wire"),
            ("study", "Study"),
            ("validity", "Validity"),
            ("machine", "Machine"),
        )
        if any(f'id="{anchor}"' in html for html in sections)
    )
    document = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{esc(title)}</h1>"
        f'<p class="note">Status {esc(run.get("status", "unknown"))}; '
        f"started {esc(_when(run.get('created_unix_ms')))}, "
        f"finished {esc(_when(run.get('finished_unix_ms')))}; command "
        f"<code>{esc(' '.join(str(c) for c in run.get('command') or []))}</code>; dnscost "
        f"{esc(run.get('dnscost_version', DASH))}. Tables: tables/*.parquet, tables/*.csv. This file needs no "
        "network access.</p>"
        f"<nav>{nav}</nav>" + "".join(sections) + f"<script>{_SCRIPT}</script></body></html>\n"
    )
    path = run_dir / "report.html"
    path.write_text(document, encoding="utf-8")
    return path


def write_report(run_dir: Path) -> Path:
    """Analyses the run in ``run_dir`` (reads stored results only), writes its tables
    (``tables/``), figures (``figures/``) and ``report.html``; returns the report's path."""
    a = analysis.analyze(run_dir)
    analysis.write_tables(a, run_dir / "tables")
    return render_report(a, run_dir, headline=analysis.headline(a))
