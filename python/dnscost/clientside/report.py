"""The report of a ``dnscost client`` run (``report.html`` in its directory): the presets with
their sources, the latency check, response times per transport (CDF figures and a table per
target), page loads (pairwise differences per preset, beside Hounsel et al.'s medians), and
what a lab on one machine can and cannot agree with. Computed from the run's stored records
only (``dnscost client report DIR`` redraws it); never starts a process."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from markupsafe import Markup

from dnscost.clientside.figure import draw_times
from dnscost.lab.presets import PresetRecord
from dnscost.report import render
from dnscost.results import read_json

__all__ = ["write_report"]


def _presets(presets: Mapping[str, PresetRecord]) -> render.Table:
    rows = []
    for p in presets.values():
        rates = f"{p['down_kbps'] or 0:g} / {p['up_kbps'] or 0:g}" if (p["down_kbps"] or p["up_kbps"]) else "none"
        rows.append([p["name"], p["label"], p["rtt_ms"], p["jitter_ms"], p["loss_pct"], rates, p["source"]])
    return render.table(
        ["preset", "label", "RTT, ms", "jitter, ms", "loss each way, %", "rate down / up, kbit/s", "source"],
        rows,
        text_columns={0, 1, 5, 6},
        caption="The emulated networks (dnscost-engine link between the lab's namespaces: half the RTT each way)",
    )


def _check(run: Path) -> dict[str, object] | None:
    path = run / "check" / "check.json"
    if not path.exists():
        return None
    doc = read_json(path)
    rows = doc["rows"]
    table = render.table(
        ["RTT, ms", "transport", "connection", "round trips", "baseline, ms", "expected, ms", "median, ms",
         "min, ms", "p90, ms", "answered", "verdict"],
        [[r["rtt_ms"], r["transport"], r["shape"], r["round_trips"], r["baseline_ms"], r["expected_ms"], r["p50_ms"],
          r["min_ms"], r["p90_ms"], r["answered"], "ok" if r["ok"] else ("FAIL" if r["shape_ok"] else "FAIL (shape)")]
         for r in rows],
        text_columns={1, 2, 10},
        row_classes=["" if r["ok"] else "invalid" for r in rows],
        caption="The latency check: each case's median response time between round trips x RTT and round trips "
        "x RTT plus its baseline (the same case over a link of no delay), each widened by 5 % of round trips x "
        f"RTT plus {doc['slack_ms']:g} ms",
    )  # fmt: skip
    link_rows = []
    for name, stats in (doc.get("link") or {}).items():
        if not stats:
            continue
        for direction in ("a_to_b", "b_to_a"):
            d = stats[direction]
            way = "client to server" if direction == "a_to_b" else "server to client"
            link_rows.append(
                [name, way, d["packets_delivered"], d["delay_min_us"], d["delay_mean_us"], d["delay_max_us"]]
            )
    link = render.table(
        ["link", "direction", "packets", "delay min, µs", "mean, µs", "max, µs"],
        link_rows,
        text_columns={0, 1},
        caption="The delay the link applied, as it measured it (read to write): the observer of the RTT other "
        "than the engine",
    )
    failed = sum(1 for r in rows if not r["ok"])
    return {"table": table, "link": link, "failed": failed, "cases": len(rows)}


def _times(run: Path, figures: Path) -> list[dict[str, object]]:
    from dnscost.clientside.times import read_times
    from dnscost.clientside.times import rows as time_rows

    out: list[dict[str, object]] = []
    base = run / "times"
    if not base.is_dir():
        return out
    for k, d in enumerate(sorted(p for p in base.iterdir() if (p / "times.json").exists())):
        doc = read_times(d / "times.json")
        rows = time_rows(doc)
        paths = draw_times(rows, figures, stem=f"response-times-{d.name}")
        svg = Markup(render.inline_svg(paths[0].read_text(), f"t{k}-")) if paths else None  # matplotlib's own markup
        table = render.table(
            ["preset", "cache", "transport", "median, ms", "p90, ms", "p99, ms", "answered / offered", "timed out",
             "resent (udp)", "connections opened", "cache hits"],
            [[r["preset"], r["cache"], r["transport"], r["median_ms"], r["p90_ms"], r["p99_ms"],
              f"{r['answered']} / {r['offered']}", r["timed_out"], r["retransmitted"], r["connections_opened"],
              None if r["cache_hit_ratio"] is None else f"{100 * r['cache_hit_ratio']:.0f} %"] for r in rows],
            text_columns={0, 1, 2, 6, 10},
            caption=f"Response times through {d.name}, per preset, cache and transport, from the engine's "
            "histograms; cache hits from the resolver's own counters",
        )  # fmt: skip
        out.append({"target": d.name, "svg": svg, "files": [p.name for p in paths], "table": table,
                    "settings": doc["settings"]})  # fmt: skip
    return out


def _pageloads(run: Path, figures: Path) -> dict[str, object] | None:
    base = run / "pageload"
    if not base.is_dir():
        return None
    from dnscost.clientside.pageload_analysis import draw_figure, summarise_presets

    summary = summarise_presets(base)
    paths = draw_figure(summary, figures, stem="pageload-cdf") if any(summary["presets"].values()) else []
    svg = Markup(render.inline_svg(paths[0].read_text(), "p-")) if paths else None  # matplotlib's own markup
    rows = []
    for preset, per in summary["presets"].items():
        published = summary["published"].get(preset, {})
        for transport, e in per.items():
            diff = e.get("difference")
            shown = None
            if diff is not None and diff["median_ms"] is not None:
                shown = f"{diff['median_ms']:+.1f}"
                if diff["interval_ms"]:
                    lo, hi = diff["interval_ms"]
                    shown += f" [{lo:+.1f}, {hi:+.1f}]"
            theirs = published.get(transport)
            rows.append([preset, transport, e["page_load"]["median_ms"], e["dns"]["median_ms"], shown,
                         diff["pairs"] if diff else None, e["failed"],
                         f"{theirs['text']} ({theirs['network']})" if theirs else None])  # fmt: skip
    table = render.table(
        ["preset", "transport", "page load median, ms", "DNS per lookup median, ms",
         "difference vs do53, median [95 % interval], ms", "pairs", "failed loads", "Hounsel et al., ms"],
        rows,
        text_columns={0, 1, 4},
        caption="Page loads per preset and transport; differences are per page and round, against Do53; "
        "Hounsel et al.'s medians beside ours where a preset stands for one of their networks (the pairing is ours)",
    )  # fmt: skip
    return {"svg": svg, "files": [p.name for p in paths], "table": table, "source": summary["published_source"],
            "pairing": summary["pairing_note"]}  # fmt: skip


def write_report(run: Path) -> Path:
    """Writes ``run/report.html`` (and its figures under ``run/figures``); returns its path."""
    doc = read_json(run / "client.json")
    figures = run / "figures"
    context = {
        "title": "dnscost client: what each DNS transport costs clients",
        "doc": doc,
        "presets": _presets(doc.get("presets", {})),
        "check": _check(run),
        "times": _times(run, figures),
        "pageload": _pageloads(run, figures),
    }
    path = run / "report.html"
    path.write_text(render.TEMPLATES.get_template("client.html.j2").render(context), encoding="utf-8")
    return path
