"""Page loads compared pairwise per page, as Hounsel et al. did (2019; WWW 2020): for each
transport against a baseline (``do53``) and each network preset, the CDF of the per-page
differences of page-load time, with the median marked; and the DNS time of each transport.
Starts nothing: it reads a run's records; :func:`draw_figure` draws with matplotlib and
:func:`write_outputs` writes the summary, its table and the figure.

What is paired: within one round, the same page loaded in each transport's session. A page's
value in a session is the median of its loads there that reached their load event, warm-ups
left out (one load unless the run asked for more per page); the difference is that value for
the transport minus the baseline's, in the same round. A (round, page) where either side has
no completed load is not paired and is counted (``unpaired``). The median difference has a
distribution-free interval from order statistics (the binomial interval for a median; none
below 6 pairs at 95 %), with its exact coverage.

DNS time is per lookup: each hostname of a load once, its longest DNS time among its
Navigation and Resource Timing entries (``lookups_us`` of the records), over every load but the
warm-ups.

Several presets (:func:`dnscost.clientside.pageload.run_pageload_presets`): :func:`summarise_presets`
reads ``<out>/presets.json`` and every preset's ``<out>/<preset>/loads.jsonl`` and
``pageload.json`` and gives, per preset and transport, the page-load and DNS times with their
medians' intervals, the difference with Do53, the failures and the DNS path's check, beside
Hounsel et al.'s medians (:data:`HOUNSEL`, paired with our presets by :data:`PAIRING`);
:func:`write_outputs` writes it (``summary.json``), its table (``table.md``) and the figure."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from dnscost import jsonl
from dnscost.lab.presets import PresetRecord
from dnscost.results import read_document, write_atomic, write_json

__all__ = [
    "HOUNSEL",
    "HOUNSEL_SOURCE",
    "PAIRING",
    "Comparison",
    "Difference",
    "DnsPath",
    "LoadRecord",
    "PageloadRecord",
    "Pair",
    "PresetEntry",
    "PresetInfo",
    "PresetsRecord",
    "PresetsSummary",
    "Published",
    "Quantiles",
    "ResourceTiming",
    "TransportSummary",
    "cdf",
    "compare",
    "draw_figure",
    "median_interval",
    "pairs",
    "presets_table",
    "read_loads",
    "summarise_presets",
    "summarise_run",
    "write_outputs",
]


class ResourceTiming(TypedDict):
    """One Resource Timing entry of a load (µs; ``*_at_us`` from the navigation's start)."""

    host: str
    start_at_us: int | None
    dns_us: int | None
    """None: the browser gave no lookup times (a failed fetch)."""
    connect_us: int | None
    end_at_us: int | None


class LoadRecord(TypedDict):
    """One line of a run's ``loads.jsonl`` (written by
    :func:`dnscost.clientside.pageload_records.load_record`, which documents each field)."""

    preset: str
    browser: str
    round: int
    transport: str
    session: int
    page: int
    load: int
    index: int
    warmup: bool
    ok: bool
    failure: str | None
    page_load_us: int | None
    dom_content_loaded_us: int | None
    response_start_at_us: int | None
    dns_us: int | None
    resources_expected: int
    resources_timed: int
    resources_fetched: int
    hosts_expected: int
    hosts_looked_up: int
    lookups_us: dict[str, int]
    resources: list[ResourceTiming]
    received_unix_us: NotRequired[int]


class Quantiles(TypedDict):
    """Times in ms: the median with its order-statistic interval (95 %; None below 6 values) and
    the 90th percentile (nearest rank)."""

    n: int
    median_ms: float | None
    interval_ms: list[float] | None
    p90_ms: float | None


class Difference(TypedDict):
    """A transport's per-page differences with the baseline (ms): pairs, the pages that could
    not be paired, the median with its interval and exact coverage, the CDF's points."""

    pairs: int
    unpaired: int
    median_ms: float | None
    interval_ms: list[float] | None
    coverage: float | None
    cdf: list[list[float]]


class DnsPath(TypedDict):
    """The DNS path as the resolver saw a preset's sessions of one transport (``dns_check`` of
    ``pageload.json``): names asked against expected, queries by the transport they came over
    (``tcp`` for DoT, relayed by the front), and for DoT the connections per session, the
    queries per connection (median) and the largest burst of queries in flight together."""

    sessions: int
    names_expected: int
    names_asked: int
    queries: dict[str, int]
    connections: int | None
    connections_per_session_max: int | None
    queries_per_connection_median: float | None
    max_burst: int | None


class TransportSummary(TypedDict):
    loads: int
    completed: int
    failed: int
    failures: dict[str, int]
    page_load: Quantiles
    dns: Quantiles
    difference: Difference | None
    """None for the baseline."""
    dns_path: NotRequired[DnsPath | None]
    """From :func:`summarise_presets` only."""


class Comparison(TypedDict):
    baseline: str
    presets: dict[str, dict[str, TransportSummary]]
    """Preset → transport (the baseline first) → its summary."""


class Published(TypedDict):
    """One of Hounsel et al.'s medians: their network, the value (ms; None when they gave a
    bound only) and how it is written."""

    network: str
    median_ms: float | None
    text: str


class PresetInfo(TypedDict):
    """A preset as ``presets.json`` records it."""

    label: str
    rtt_ms: float
    loss_pct: float
    down_kbps: float | None
    up_kbps: float | None
    source: str
    dir: str
    status: str
    error: str | None


class PresetsSummary(TypedDict):
    """:func:`summarise_presets`: ``presets`` as :class:`Comparison`'s (in the run's order, each
    transport with its ``dns_path``), the presets' parameters, Hounsel et al.'s medians beside
    each preset paired with one of their networks (transport → median), and the figures."""

    format: int
    baseline: str
    presets: dict[str, dict[str, TransportSummary]]
    networks: dict[str, PresetInfo]
    published: dict[str, dict[str, Published]]
    published_source: str
    pairing_note: str
    figures: list[str]


DISPLAY = {"do53": "Do53", "dot": "DoT", "dot-unbound": "DoT (unbound)", "dot-nodelay": "DoT (no Nagle)", "doh": "DoH"}
COLOURS = {"dot": "#2ca02c", "dot-unbound": "#9467bd", "dot-nodelay": "#17becf", "doh": "#d62728", "do53": "#1f77b4"}
SUMMARY_FORMAT = 1
FIGURE_STEM = "pageload-cdf"

HOUNSEL_SOURCE = (
    "Hounsel, Borgolte, Schmitt, Holland and Feamster's 2019 measurements with Cloudflare's resolver "
    "('Analyzing the Costs (and Benefits) of DNS, DoT, and DoH for the Modern Web', arXiv 1907.08089, "
    "as their APNIC blog post of 8 October 2019, 'Page load times not affected by DoH and DoT', presents "
    "them): the median per-site difference of page-load time against Do53 (Firefox; DoT through Stubby; "
    "DoH the browser's own), per emulated network. The later version of that preprint, 'Comparing the "
    "Effects of DNS, DoT, and DoH on Web Performance' (WWW 2020, five vantage points), found Do53 "
    "fastest as loss and latency grow; the lossy 4G values here, DoT and DoH faster, are 2019's"
)
HOUNSEL: dict[str, dict[str, tuple[float | None, str]]] = {
    "default": {"dot": (None, "< +1"), "doh": (16.0, "+16")},
    "4G": {"dot": (-6.0, "-6"), "doh": (66.0, "+66")},
    "lossy 4G": {"dot": (-101.0, "-101"), "doh": (-45.0, "-45")},
    "3G": {"dot": (137.0, "+137"), "doh": (328.0, "+328")},
}
"""Their network → transport → (median difference with Do53 in ms, or None for a bound; as
written). Their networks were their own emulations, not our presets."""
PAIRING = {"native": "default", "lte": "4G", "lossy-lte": "lossy 4G", "3g": "3G"}
"""Our preset → the network of theirs we set it beside. The pairing is ours: their "4G",
"lossy 4G" and "3G" settings are not in the sources at hand, and our `lossy-lte`'s loss rate is
our choice (``presets.toml``)."""
PAIRING_NOTE = (
    "Hounsel et al.'s networks were their own emulations; we set native beside their 'default', lte "
    "beside '4G', lossy-lte beside 'lossy 4G' and 3g beside '3G'. The pairing is ours, not theirs, and "
    "the presets are not their settings (lossy-lte's loss rate is our choice)."
)


@dataclass(frozen=True)
class Pair:
    """One page in one round: its page-load time (ms) with a transport and with the baseline."""

    preset: str
    transport: str
    round: int
    page: int
    baseline_ms: float
    transport_ms: float

    @property
    def difference_ms(self) -> float:
        return self.transport_ms - self.baseline_ms


def read_loads(path: Path) -> list[LoadRecord]:
    """A run's ``loads.jsonl``, read as :func:`dnscost.jsonl.read_records` reads it (a line
    cut short by a crash is skipped; a kept run's ``loads.jsonl.gz`` alike), except that a
    missing file is an error here."""
    if not path.with_name(path.name + ".gz").exists():
        path.stat()  # a run without loads.jsonl is an error (FileNotFoundError), not a run of no loads
    return cast(list[LoadRecord], jsonl.read_records(path))


def _measured(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in records if not r.get("warmup")]


def page_medians(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, int, int], float]:
    """(preset, transport, round, page) → median page-load time (ms) of its completed loads."""
    values: dict[tuple[str, str, int, int], list[float]] = defaultdict(list)
    for r in _measured(records):
        if r.get("ok") and isinstance(r.get("page_load_us"), int | float):
            key = (str(r["preset"]), str(r["transport"]), int(r["round"]), int(r["page"]))
            values[key].append(float(r["page_load_us"]) / 1000)
    return {k: statistics.median(v) for k, v in values.items()}


def pairs(records: Iterable[Mapping[str, Any]], baseline: str = "do53") -> tuple[list[Pair], Counter[tuple[str, str]]]:
    """Every (preset, transport ≠ baseline, round, page) pair, and per (preset, transport)
    how many (round, page) could not be paired (a side without a completed load)."""
    records = list(records)
    medians = page_medians(records)
    planned = {(str(r["preset"]), str(r["transport"]), int(r["round"]), int(r["page"])) for r in _measured(records)}
    transports = sorted({k[1] for k in planned} - {baseline})
    cells = {(k[0], k[2], k[3]) for k in planned}
    out: list[Pair] = []
    unpaired: Counter[tuple[str, str]] = Counter()
    for preset, rnd, page in sorted(cells):
        base = medians.get((preset, baseline, rnd, page))
        for t in transports:
            if (preset, t, rnd, page) not in planned:
                continue
            other = medians.get((preset, t, rnd, page))
            if base is None or other is None:
                unpaired[(preset, t)] += 1
            else:
                out.append(Pair(preset, t, rnd, page, base, other))
    return out, unpaired


def cdf(values: Iterable[float]) -> list[tuple[float, float]]:
    """The empirical CDF's points: each value, sorted, with the share of values at or below."""
    xs = sorted(values)
    n = len(xs)
    return [(x, (i + 1) / n) for i, x in enumerate(xs)]


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float] | None:
    """The order-statistic interval for the median, ``(low, high, coverage)``: the widest pair
    of order statistics x(k), x(n+1-k) whose coverage, 1 - 2 P(B <= k-1) with B ~ Bin(n, 1/2), is
    at least ``confidence``. None when no such pair exists (fewer than 6 values at 95 %)."""
    xs = sorted(values)
    n = len(xs)
    alpha = 1 - confidence
    k, below = 0, 0.0  # below = P(B <= k - 1)
    while k < n // 2 + 1:
        nxt = below + math.comb(n, k) / 2**n
        if 2 * nxt > alpha:
            break
        below, k = nxt, k + 1
    if k == 0:
        return None
    return xs[k - 1], xs[n - k], 1 - 2 * below


def _quantiles(values: Sequence[float]) -> Quantiles:
    if not values:
        return {"n": 0, "median_ms": None, "interval_ms": None, "p90_ms": None}
    xs = sorted(values)
    p90 = xs[min(len(xs) - 1, math.ceil(0.9 * len(xs)) - 1)]  # nearest rank
    interval = median_interval(xs)
    return {
        "n": len(xs),
        "median_ms": round(statistics.median(xs), 3),
        "interval_ms": [round(interval[0], 3), round(interval[1], 3)] if interval else None,
        "p90_ms": round(p90, 3),
    }


def compare(records: Iterable[Mapping[str, Any]], baseline: str = "do53") -> Comparison:
    """Per preset: each transport's pairwise difference against ``baseline`` (pairs, median
    with its interval, CDF points, unpaired), its page-load and DNS times, its loads and
    failures by reason."""
    records = list(records)
    all_pairs, unpaired = pairs(records, baseline)
    out: Comparison = {"baseline": baseline, "presets": {}}
    presets = sorted({str(r["preset"]) for r in records})
    for preset in presets:
        mine = [r for r in _measured(records) if str(r["preset"]) == preset]
        transports = sorted({str(r["transport"]) for r in mine}, key=lambda t: (t != baseline, _ORDER.get(t, 9), t))
        per: dict[str, TransportSummary] = {}
        for t in transports:
            rs = [r for r in mine if r["transport"] == t]
            failures = Counter(str(r.get("failure")) for r in rs if not r.get("ok"))
            loads = [float(r["page_load_us"]) / 1000 for r in rs if r.get("ok") and r.get("page_load_us") is not None]
            lookups = [float(v) / 1000 for r in rs for v in (r.get("lookups_us") or {}).values()]
            difference: Difference | None = None
            if t != baseline:
                diffs = [p.difference_ms for p in all_pairs if p.preset == preset and p.transport == t]
                interval = median_interval(diffs)
                difference = {
                    "pairs": len(diffs),
                    "unpaired": unpaired[(preset, t)],
                    "median_ms": round(statistics.median(diffs), 3) if diffs else None,
                    "interval_ms": [round(interval[0], 3), round(interval[1], 3)] if interval else None,
                    "coverage": round(interval[2], 4) if interval else None,
                    "cdf": [[round(x, 3), round(f, 6)] for x, f in cdf(diffs)],
                }
            per[t] = {
                "loads": len(rs),
                "completed": sum(1 for r in rs if r.get("ok")),
                "failed": sum(failures.values()),
                "failures": dict(sorted(failures.items())),
                "page_load": _quantiles(loads),
                "dns": _quantiles(lookups),
                "difference": difference,
            }
        out["presets"][preset] = per
    return out


_ORDER = {"do53": 0, "dot": 1, "dot-unbound": 2, "dot-nodelay": 3, "doh": 4}


def summarise_run(run_dir: Path, baseline: str = "do53") -> Comparison:
    """:func:`compare` over one run's ``loads.jsonl`` (or several runs': pass their records
    to :func:`compare` together)."""
    return compare(read_loads(run_dir / "loads.jsonl"), baseline)


def _dns_path(checks: Sequence[Mapping[str, Any]]) -> DnsPath | None:
    if not checks:
        return None
    queries: Counter[str] = Counter()
    for c in checks:
        queries.update({str(k): int(v) for k, v in (c.get("queries") or {}).items()})
    conns = [c.get("dot_connections") for c in checks]
    dot = [row for rows in conns if rows for row in rows]
    return {
        "sessions": len(checks),
        "names_expected": sum(int(c.get("names_expected", 0)) for c in checks),
        "names_asked": sum(int(c.get("names_asked", 0)) for c in checks),
        "queries": dict(sorted(queries.items())),
        "connections": len(dot) if any(r is not None for r in conns) else None,
        "connections_per_session_max": max((len(r) for r in conns if r is not None), default=None),
        "queries_per_connection_median": statistics.median(int(r["queries"]) for r in dot) if dot else None,
        "max_burst": max((int(r["max_burst"]) for r in dot), default=None),
    }


def _published(preset: str) -> dict[str, Published]:
    network = PAIRING.get(preset)
    if network is None:
        return {}
    return {t: {"network": network, "median_ms": v, "text": text} for t, (v, text) in HOUNSEL[network].items()}


class PageloadRecord(TypedDict):
    """pageload.json: one run of page loads in one lab (written when it starts, completed when
    it ends). What a reader needs is required; :func:`dnscost.clientside.pageload_run.run_pageloads`
    writes every field."""

    format: NotRequired[int]
    dnscost: NotRequired[str]
    engine: NotRequired[str]
    settings: NotRequired[dict[str, object]]
    browser_version: NotRequired[str | None]
    stub_versions: NotRequired[dict[str, str | None]]
    server_address: NotRequired[str]
    sessions: NotRequired[int]
    loads: NotRequired[int]
    names: NotRequired[int]
    corpus: NotRequired[dict[str, object]]
    started_unix_us: NotRequired[int]
    status: str
    """``running``, then ``done``, ``failed`` or ``interrupted``."""
    responder_start_unix_us: NotRequired[int | None]
    ended_unix_us: NotRequired[int]
    dns_check: NotRequired[list[dict[str, object]]]
    """Per session: the queries the resolver saw against what its pages asked
    (:func:`dns_check`)."""
    loads_ok: NotRequired[int]
    loads_failed: NotRequired[int]


class PresetEntry(PresetRecord):
    """One preset's run in presets.json: the preset, its directory and how its run went."""

    dir: str
    status: str
    started_unix_us: NotRequired[int]
    ended_unix_us: NotRequired[int]
    error: NotRequired[str]
    link: NotRequired[dict[str, object] | None]
    """The emulated link's counters (dnscost-engine link)."""


class PresetsRecord(TypedDict):
    """presets.json: page loads under every network preset, one run each (the presets
    required; the writer writes every field)."""

    format: NotRequired[int]
    dnscost: NotRequired[str]
    settings: NotRequired[dict[str, object]]
    presets: dict[str, PresetEntry]
    started_unix_us: NotRequired[int]
    status: NotRequired[str]
    ended_unix_us: NotRequired[int]


def summarise_presets(out: Path, baseline: str = "do53") -> PresetsSummary:
    """The experiment of :func:`dnscost.clientside.pageload.run_pageload_presets` in ``out``
    (see :class:`PresetsSummary`): every preset's ``loads.jsonl`` and ``pageload.json``, in the
    order of ``presets.json`` (without it, every ``<out>/*/loads.jsonl`` by name). Reads stored
    files only; the figures listed are those :func:`write_outputs` drew, if it has."""
    meta_path = out / "presets.json"
    meta: PresetsRecord | None = read_document(meta_path, PresetsRecord) if meta_path.exists() else None
    entries = meta["presets"] if meta is not None else {}
    # A kept run's records are compressed (dnscost keep): read_loads reads <name>.gz alike.
    names = list(entries) or sorted({p.parent.name for p in out.glob("*/loads.jsonl*")})
    records: list[LoadRecord] = []
    networks: dict[str, PresetInfo] = {}
    checks: dict[str, list[dict[str, object]]] = {}
    for name in names:
        m = entries.get(name)
        run = out / (m["dir"] if m else name)
        if (run / "loads.jsonl").exists() or (run / "loads.jsonl.gz").exists():
            records += read_loads(run / "loads.jsonl")
        doc: PageloadRecord | None = (
            read_document(run / "pageload.json", PageloadRecord) if (run / "pageload.json").exists() else None
        )
        checks[name] = list(doc.get("dns_check") or []) if doc else []
        status = doc["status"] if doc else "unknown"
        networks[name] = {
            "label": m["label"] if m else name,
            "rtt_ms": float(m["rtt_ms"]) if m else 0.0,
            "loss_pct": float(m["loss_pct"]) if m else 0.0,
            "down_kbps": m["down_kbps"] if m else None,
            "up_kbps": m["up_kbps"] if m else None,
            "source": m["source"] if m else "",
            "dir": m["dir"] if m else name,
            "status": m["status"] if m else status,
            "error": m.get("error") if m else None,
        }
    compared = compare(records, baseline)["presets"]
    presets: dict[str, dict[str, TransportSummary]] = {}
    for name in names:
        per = compared.get(name, {})
        for t, entry in per.items():
            entry["dns_path"] = _dns_path([c for c in checks[name] if c.get("transport") == t])
        presets[name] = per
    figures = [str(p) for p in (out / "figures" / f"{FIGURE_STEM}.svg", out / "figures" / f"{FIGURE_STEM}.png")]
    return {
        "format": SUMMARY_FORMAT,
        "baseline": baseline,
        "presets": presets,
        "networks": networks,
        "published": {name: _published(name) for name in names},
        "published_source": HOUNSEL_SOURCE,
        "pairing_note": PAIRING_NOTE,
        "figures": [f for f in figures if Path(f).exists()],
    }


def _ms(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "n/a"
    return f"{v:+.1f}" if signed else f"{v:.0f}"


def presets_table(summary: Mapping[str, Any]) -> str:
    """A Markdown table of :func:`summarise_presets`' output: per preset and transport, the
    page-load median [interval], the difference with the baseline, median [interval] (pairs),
    Hounsel et al.'s median where the preset is paired with one of their networks, the DNS
    lookup median, failed loads; then the source and the pairing's note."""
    base = summary["baseline"]
    lines = [
        f"| preset | transport | page load, median [95 % interval], ms | difference with {base}, median "
        "[95 % interval] (pairs), ms | Hounsel et al., ms | DNS per lookup, median, ms | failed loads |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for preset, per in summary["presets"].items():
        published = summary.get("published", {}).get(preset, {})
        for t, e in per.items():
            pl = e["page_load"]
            load = _ms(pl["median_ms"])
            if pl.get("interval_ms"):
                load += f" [{_ms(pl['interval_ms'][0])}, {_ms(pl['interval_ms'][1])}]"
            d = e.get("difference")
            diff = ""
            if d:
                diff = _ms(d["median_ms"], True)
                if d.get("interval_ms"):
                    diff += f" [{_ms(d['interval_ms'][0], True)}, {_ms(d['interval_ms'][1], True)}]"
                diff += f" ({d['pairs']})"
            theirs = published.get(t)
            hounsel = f"{theirs['text']} ({theirs['network']})" if theirs else ""
            dns = e["dns"]["median_ms"]
            lines.append(
                f"| {preset} | {t} | {load} | {diff} | {hounsel} | "
                f"{'n/a' if dns is None else f'{dns:.1f}'} | {e['failed']} of {e['loads']} |"
            )
    lines += ["", f"Hounsel et al.: {summary.get('published_source', HOUNSEL_SOURCE)}.",
              summary.get("pairing_note", PAIRING_NOTE)]  # fmt: skip
    return "\n".join(lines) + "\n"


def write_outputs(out: Path, baseline: str = "do53") -> PresetsSummary:
    """:func:`summarise_presets` of ``out``, its figure (``figures/pageload-cdf.svg``, ``.png``),
    ``summary.json`` and ``table.md``. Returns the summary."""
    summary = summarise_presets(out, baseline)
    if any(summary["presets"].values()):
        draw_figure(summary, out / "figures", FIGURE_STEM)
        summary = summarise_presets(out, baseline)
    write_json(out / "summary.json", summary, indent=1)
    write_atomic(out / "table.md", presets_table(summary))
    return summary


def draw_figure(summary: Mapping[str, Any], out: Path, stem: str = FIGURE_STEM) -> list[Path]:
    """The CDF of per-page differences against the baseline, one panel per preset (in the
    summary's order), one line per transport, its median marked (dashed) and written beside it;
    where the summary pairs the preset with one of Hounsel et al.'s networks (``published``),
    their medians are written under the panel's title. SVG and PNG in ``out``; returns them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    presets = [p for p, per in summary["presets"].items() if per]
    base = DISPLAY.get(summary["baseline"], summary["baseline"])
    published = summary.get("published") or {}
    n = max(len(presets), 1)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols + 0.4, 3.7 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax, preset in zip(flat, presets, strict=False):
        drawn = 0
        for t, entry in summary["presets"][preset].items():
            diff = entry.get("difference")
            if not diff or not diff["cdf"]:
                continue
            xs = [p[0] for p in diff["cdf"]]
            ys = [p[1] for p in diff["cdf"]]
            colour = COLOURS.get(t, "#7f7f7f")
            label = f"{DISPLAY.get(t, t)} \N{MINUS SIGN} {base} (n = {diff['pairs']})"
            ax.step([xs[0], *xs], [0.0, *ys], where="post", color=colour, label=label)
            median = diff["median_ms"]
            ax.axvline(median, color=colour, linestyle="--", linewidth=1)
            ax.text(median, 0.04 + 0.08 * drawn, f" median {median:+.0f} ms", color=colour, fontsize=7, ha="left")
            drawn += 1
        ax.axvline(0, color="black", linewidth=0.6, alpha=0.5)
        theirs = published.get(preset) or {}
        title = preset
        if theirs:
            network = next(iter(theirs.values()))["network"]
            medians = ", ".join(f"{DISPLAY.get(t, t)} {v['text']}" for t, v in theirs.items())
            title += f"\nHounsel et al. '{network}': {medians} ms (pairing ours)"
        ax.set_title(title, fontsize=8)
        ax.set_xlabel(f"page-load time difference vs {base} (ms)", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.tick_params(labelsize=7)
        if drawn:
            ax.legend(fontsize=7, loc="upper left")
    for ax in flat[len(presets) :]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel("CDF of pages", fontsize=8)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.svg", out / f"{stem}.png"]
    for p in paths:
        fig.savefig(p, dpi=150)
    plt.close(fig)
    return paths
