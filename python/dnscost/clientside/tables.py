"""The docs' tables of a ``dnscost client`` run, in Markdown, from its stored records only:
docs/client.md's latency check, response times and their findings, docs/pageload.md's page
loads.

    python -m dnscost.clientside.tables docs/client-run                      print every block
    python -m dnscost.clientside.tables docs/client-run --write docs/client.md docs/pageload.md
    python -m dnscost.clientside.tables docs/client-run --check docs/client.md docs/pageload.md

In a page, a block stands between ``<!-- computed: NAME -->`` and ``<!-- end: NAME -->`` (NAME
one of :data:`BLOCKS`); ``--write`` replaces each block's lines with what the run gives,
``--check`` exits 1 naming the first block that differs (``python/tests/test_client_docs.py``
runs it), so a number in those blocks is always the stored run's."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dnscost.clientside.pageload_analysis import presets_table, summarise_presets
from dnscost.clientside.times import read_times
from dnscost.clientside.times import rows as time_rows
from dnscost.errors import UsageError
from dnscost.jsonl import loads

__all__ = [
    "BLOCKS",
    "check_table",
    "main",
    "pageload_brief",
    "pageload_table",
    "pageload_verdicts",
    "render_blocks",
    "times_findings",
    "times_table",
]


def check_table(run: Path) -> str:
    """The latency check (``check/check.json``): per RTT and case, round trips, the baseline,
    what was expected, the median and the minimum, in milliseconds. The runs over the link of no
    delay are the baseline column, not rows of their own."""
    doc = _json(run / "check" / "check.json")
    lines = [
        "| RTT | transport | connection | round trips | baseline | expected | median | min | verdict |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in doc["rows"]:
        if not r["rtt_ms"]:
            continue
        verdict = "ok" if r["ok"] else ("FAIL" if r["shape_ok"] else "FAIL (shape)")
        lines.append(
            f"| {r['rtt_ms']:g} ms | {r['transport']} | {r['shape']} | {r['round_trips']} | {r['baseline_ms']:.2f} "
            f"| {r['expected_ms']:.1f} | {r['p50_ms']:.1f} | {r['min_ms']:.1f} | {verdict} |"
        )
    passed = sum(bool(r["ok"]) for r in doc["rows"] if r["rtt_ms"])
    delayed = sum(1 for r in doc["rows"] if r["rtt_ms"])
    baselines = [r["baseline_ms"] for r in doc["rows"]]
    lines += ["", f"{passed} of {delayed} cases within tolerance; baselines {min(baselines):.2f} to "
              f"{max(baselines):.2f} ms (milliseconds throughout)."]  # fmt: skip
    return "\n".join(lines)


def times_table(run: Path) -> str:
    """Response times (``times/<target>/times.json``): per preset, cache and resolver, each
    transport's median / p90 in milliseconds, from the engine's whole-run histograms."""
    docs = {d.name: read_times(d / "times.json") for d in _target_dirs(run)}
    per_target = {name: time_rows(doc) for name, doc in docs.items()}
    # In the spec's order (a run measures them shuffled).
    transports = list(dict.fromkeys(t for doc in docs.values() for t in doc["settings"]["transports"]))
    cells: dict[tuple[str, str, str], dict[str, str]] = {}
    for target, rows in per_target.items():
        for r in rows:
            shown = "n/a" if r["median_ms"] is None else f"{r['median_ms']:.1f} / {r['p90_ms']:.1f}"
            cells.setdefault((r["preset"], r["cache"], target), {})[r["transport"]] = shown
    presets = list(dict.fromkeys(p for p, _, _ in cells))
    caches = list(dict.fromkeys(c for _, c, _ in cells))
    lines = [
        "| preset | cache | resolver | " + " | ".join(transports) + " |",
        "| --- | --- | --- | " + " | ".join("---:" for _ in transports) + " |",
    ]
    for preset in presets:
        for cache in caches:
            for target in per_target:
                row = cells.get((preset, cache, target))
                if row is not None:
                    shown = " | ".join(row.get(t, "n/a") for t in transports)
                    lines.append(f"| {preset} | {cache} | {target} | {shown} |")
    return "\n".join(lines)


def times_findings(run: Path) -> str:
    """What docs/client.md says of the response times, as a Markdown list computed from the
    run: the cache-hit ratios the resolvers' own counters gave (every run off 0 % cold or 100 %
    warm named), UDP's p99 on lossy presets against the stream transports', and each
    resolver's warm medians on the preset of the longest round trip."""
    docs = {d.name: read_times(d / "times.json") for d in _target_dirs(run)}
    per_target = {name: time_rows(doc) for name, doc in docs.items()}
    rows = [(target, r) for target, rs in per_target.items() for r in rs]
    presets = _json(run / "client.json").get("presets", {})
    lines = []
    off = [
        f"{t} {r['preset']} {r['cache']} {r['transport']} {100 * r['cache_hit_ratio']:.0f} %"
        for t, r in rows
        if r["cache_hit_ratio"] is not None and r["cache_hit_ratio"] != (1.0 if r["cache"] == "warm" else 0.0)
    ]
    counted = sum(r["cache_hit_ratio"] is not None for _, r in rows)
    lines.append(
        f"- Cache hits, from the resolvers' own counters: 0 % on every cold run and 100 % on every warm one "
        f"({counted} runs counted)" + (f", except {', '.join(off)}" if off else "") + "."
    )
    for preset in dict.fromkeys(r["preset"] for _, r in rows if presets.get(r["preset"], {}).get("loss_pct", 0) > 0):
        udp = [
            f"{t} {r['cache']} {r['p99_ms'] / 1000:.2f} s ({r['retransmitted']} sent again, {r['timed_out']} timed out)"
            for t, r in rows
            if r["preset"] == preset and r["transport"] == "udp" and r["answered"]
        ]
        other = [r["p99_ms"] for _, r in rows if r["preset"] == preset and r["transport"] != "udp" and r["answered"]]
        if udp and other:
            lines.append(
                f"- On `{preset}`, UDP's p99 per run: {', '.join(udp)}; every other transport's p99 is "
                f"{min(other) / 1000:.2f} to {max(other) / 1000:.2f} s."
            )
    longest = max(
        (r["preset"] for _, r in rows), key=lambda p: float(presets.get(p, {}).get("rtt_ms", 0)), default=None
    )
    for target, rs in per_target.items():
        warm = {r["transport"]: r["median_ms"] for r in rs if r["preset"] == longest and r["cache"] == "warm"}
        warm = {t: warm[t] for t in docs[target]["settings"]["transports"] if t in warm}
        if warm:
            shown = ", ".join(f"{t} {'n/a' if v is None else f'{v:.1f}'}" for t, v in warm.items())
            lines.append(f"- {target}, `{longest}`, warm medians (ms): {shown}.")
    return "\n".join(lines)


def pageload_brief(run: Path) -> str:
    """docs/client.md's page loads in brief, computed: per preset, each transport's median
    difference with Do53 and its 95 % interval (ms), Hounsel et al.'s median in brackets where
    the preset is paired with one of their networks."""
    summary = summarise_presets(run / "pageload")
    parts = []
    for preset, per in summary["presets"].items():
        published = summary["published"].get(preset, {})
        items = []
        for t, e in per.items():
            d = e["difference"]
            if d is None or d["median_ms"] is None:
                continue
            text = f"{t} {d['median_ms']:+.0f}"
            if d["interval_ms"]:
                text += f" ({d['interval_ms'][0]:+.0f} to {d['interval_ms'][1]:+.0f})"
            if (theirs := published.get(t)) is not None:
                text += f" [{theirs['text']}]"
            items.append(text)
        parts.append(f"`{preset}`: {', '.join(items)}")
    return "; ".join(parts) + "."


def pageload_table(run: Path) -> str:
    """Page loads (``pageload/``): per preset and transport, as ``presets_table`` writes them."""
    base = run / "pageload"
    if not base.is_dir():
        raise UsageError(f"{run}: no pageload/ (the run did not load pages)")
    return presets_table(summarise_presets(base))


def pageload_verdicts(run: Path) -> str:
    """docs/pageload.md's verdicts, computed: per preset and transport, whether its page loads
    are dearer or cheaper than Do53's (the 95 % interval of the median per-page difference
    excludes 0) or not told apart (it includes 0), and beside a preset paired with one of
    Hounsel et al.'s networks, whether their median has the same sign."""
    summary = summarise_presets(run / "pageload")
    lines = []
    for preset, per in summary["presets"].items():
        published = summary["published"].get(preset, {})
        for t, e in per.items():
            d = e["difference"]
            if d is None or d["median_ms"] is None:
                continue
            iv = d["interval_ms"]
            if not iv:
                verdict = "no interval (too few pairs)"
            elif iv[0] > 0:
                verdict = "dearer than Do53"
            elif iv[1] < 0:
                verdict = "cheaper than Do53"
            else:
                verdict = "not told apart from Do53"
            line = f"- `{preset}` {t}: {d['median_ms']:+.0f} ms, {verdict}"
            theirs = published.get(t)
            if theirs is not None:
                line += f"; theirs {theirs['text']} ms"
                if theirs["median_ms"] is not None and verdict.startswith(("dearer", "cheaper")):
                    agree = (theirs["median_ms"] > 0) == verdict.startswith("dearer")
                    line += ", the same direction" if agree else ", the other direction"
            lines.append(line + ".")
    return "\n".join(lines)


def _target_dirs(run: Path) -> list[Path]:
    base = run / "times"
    dirs = sorted(p for p in base.iterdir() if (p / "times.json").is_file()) if base.is_dir() else []
    if not dirs:
        raise UsageError(f"{run}: no times/<target>/times.json (the run measured no response times)")
    return dirs


def _json(path: Path) -> Any:
    try:
        return loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: missing (not a client run, or its part did not run)") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not JSON ({e})") from None


BLOCKS: dict[str, Callable[[Path], str]] = {
    "latency-check": check_table,
    "response-times": times_table,
    "response-time-findings": times_findings,
    "page-loads": pageload_table,
    "page-loads-in-brief": pageload_brief,
    "page-load-verdicts": pageload_verdicts,
}
"""The blocks a page may hold, by name, and what computes each from a run."""

_BLOCK = re.compile(r"<!-- computed: (?P<name>[a-z-]+) -->\n(?P<body>(?:.*?\n)?)<!-- end: (?P=name) -->", re.S)


def render_blocks(text: str, run: Path) -> str:
    """``text`` with every computed block's body replaced by what ``run`` gives. A block of an
    unknown name is a :class:`UsageError`."""

    def body(m: re.Match[str]) -> str:
        make = BLOCKS.get(m["name"])
        if make is None:
            raise UsageError(f"unknown computed block {m['name']!r} (known: {', '.join(BLOCKS)})")
        return f"<!-- computed: {m['name']} -->\n{make(run).strip()}\n<!-- end: {m['name']} -->"

    return _BLOCK.sub(body, text)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dnscost.clientside.tables", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a client run's directory (results/client/<id>, or docs/client-run)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", nargs="+", type=Path, metavar="PAGE", help="rewrite the computed blocks of PAGE")
    mode.add_argument("--check", nargs="+", type=Path, metavar="PAGE", help="exit 1 if a block of PAGE differs")
    a = ap.parse_args(argv)
    try:
        if not (a.write or a.check):
            for name, make in BLOCKS.items():
                print(f"<!-- computed: {name} -->\n{make(a.run).strip()}\n<!-- end: {name} -->\n")
            return 0
        for page in a.write or a.check:
            text = page.read_text()
            if not _BLOCK.search(text):
                raise UsageError(f"{page}: no computed block")
            new = render_blocks(text, a.run)
            if a.write and new != text:
                page.write_text(new)
                print(f"{page}: rewritten from {a.run}")
            elif a.check and new != text:
                old_blocks = {m["name"]: m["body"] for m in _BLOCK.finditer(text)}
                differs = next(m["name"] for m in _BLOCK.finditer(new) if old_blocks.get(m["name"]) != m["body"])
                print(f"{page}: block {differs!r} is not what {a.run} gives (--write rewrites it)", file=sys.stderr)
                return 1
    except (UsageError, OSError) as e:
        print(f"dnscost.clientside.tables: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
