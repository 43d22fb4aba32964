"""Page loads compared pairwise per page, as Hounsel et al. (WWW 2020) did: for each
transport against a baseline (``do53``) and each network preset, the CDF of the per-page
differences of page-load time, with the median marked; and the DNS time of each transport.
Pure (reads records, never starts anything); :func:`draw_figure` draws with matplotlib.

What is paired: within one round, the same page loaded in each transport's session. A page's
value in a session is the median of its loads there that reached their load event, warm-ups
left out (one load unless the run asked for more per page); the difference is that value for
the transport minus the baseline's, in the same round. A (round, page) where either side has
no completed load is not paired and is counted (``unpaired``). The median difference has a
distribution-free interval from order statistics (the binomial interval for a median; none
below 6 pairs at 95 %), with its exact coverage.

DNS time is per lookup: each hostname of a load once, its longest DNS time among its
Navigation and Resource Timing entries (``lookups_us`` of the records), over every load but the
warm-ups."""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

__all__ = [
    "LoadRecord",
    "Pair",
    "ResourceTiming",
    "cdf",
    "compare",
    "draw_figure",
    "median_interval",
    "pairs",
    "read_records",
    "summarise_run",
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
    :func:`dnscost.client.pageload.load_record`, which documents each field)."""

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


DISPLAY = {"do53": "Do53", "dot": "DoT", "doh": "DoH"}
COLOURS = {"dot": "#2ca02c", "doh": "#d62728", "do53": "#1f77b4"}


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


def read_records(path: Path) -> list[LoadRecord]:
    """A run's ``loads.jsonl`` (a line cut short by a crash is skipped)."""
    out: list[LoadRecord] = []
    with path.open() as f:
        for line in f:
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(doc, dict):
                out.append(cast(LoadRecord, doc))
    return out


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


def _quantiles(values: Sequence[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "median_ms": None, "p90_ms": None}
    xs = sorted(values)
    p90 = xs[min(len(xs) - 1, math.ceil(0.9 * len(xs)) - 1)]  # nearest rank
    return {"n": len(xs), "median_ms": round(statistics.median(xs), 3), "p90_ms": round(p90, 3)}


def compare(records: Iterable[Mapping[str, Any]], baseline: str = "do53") -> dict[str, Any]:
    """Per preset: each transport's pairwise difference against ``baseline`` (pairs, median
    with its interval, CDF points, unpaired), its page-load and DNS times, its loads and
    failures by reason."""
    records = list(records)
    all_pairs, unpaired = pairs(records, baseline)
    out: dict[str, Any] = {"baseline": baseline, "presets": {}}
    presets = sorted({str(r["preset"]) for r in records})
    for preset in presets:
        mine = [r for r in _measured(records) if str(r["preset"]) == preset]
        transports = sorted({str(r["transport"]) for r in mine}, key=lambda t: (t != baseline, t))
        per: dict[str, Any] = {}
        for t in transports:
            rs = [r for r in mine if r["transport"] == t]
            failures = Counter(str(r.get("failure")) for r in rs if not r.get("ok"))
            loads = [float(r["page_load_us"]) / 1000 for r in rs if r.get("ok") and r.get("page_load_us") is not None]
            lookups = [float(v) / 1000 for r in rs for v in (r.get("lookups_us") or {}).values()]
            entry: dict[str, Any] = {
                "loads": len(rs),
                "completed": sum(1 for r in rs if r.get("ok")),
                "failed": sum(failures.values()),
                "failures": dict(sorted(failures.items())),
                "page_load": _quantiles(loads),
                "dns": _quantiles(lookups),
            }
            if t != baseline:
                diffs = [p.difference_ms for p in all_pairs if p.preset == preset and p.transport == t]
                interval = median_interval(diffs)
                entry["difference"] = {
                    "pairs": len(diffs),
                    "unpaired": unpaired[(preset, t)],
                    "median_ms": round(statistics.median(diffs), 3) if diffs else None,
                    "interval_ms": [round(interval[0], 3), round(interval[1], 3)] if interval else None,
                    "coverage": round(interval[2], 4) if interval else None,
                    "cdf": [[round(x, 3), round(f, 6)] for x, f in cdf(diffs)],
                }
            per[t] = entry
        out["presets"][preset] = per
    return out


def summarise_run(run_dir: Path, baseline: str = "do53") -> dict[str, Any]:
    """:func:`compare` over one run's ``loads.jsonl`` (or several runs': pass their records
    to :func:`compare` together)."""
    return compare(read_records(run_dir / "loads.jsonl"), baseline)


def draw_figure(summary: Mapping[str, Any], out: Path, stem: str = "pageload-cdf") -> list[Path]:
    """The CDF of per-page differences against the baseline, one panel per preset, one line per
    transport, its median marked (dashed) and written beside it. SVG and PNG in ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    presets = list(summary["presets"])
    base = DISPLAY.get(summary["baseline"], summary["baseline"])
    fig, axes = plt.subplots(1, max(len(presets), 1), figsize=(4.2 * max(len(presets), 1) + 0.6, 3.4), squeeze=False)
    for ax, preset in zip(axes[0], presets, strict=False):
        for row, (t, entry) in enumerate(summary["presets"][preset].items()):
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
            ax.text(median, 0.04 + 0.08 * row, f" median {median:+.0f} ms", color=colour, fontsize=7, ha="left")
        ax.axvline(0, color="black", linewidth=0.6, alpha=0.5)
        ax.set_title(preset, fontsize=9)
        ax.set_xlabel(f"page-load time difference vs {base} (ms)", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="upper left")
    axes[0][0].set_ylabel("CDF of pages", fontsize=8)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.svg", out / f"{stem}.png"]
    for p in paths:
        fig.savefig(p, dpi=150)
    plt.close(fig)
    return paths
