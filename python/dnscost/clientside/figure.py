"""Figures of ``dnscost client``: response-time CDFs per transport, one panel per network preset
(warm cache solid, cold dashed), recomputed from the engine's histograms (:mod:`.times`). Pure
drawing: reads rows, writes SVG and PNG."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from dnscost.contract import Row

__all__ = ["COLOURS", "draw_times"]

COLOURS = {
    "udp": "#1f77b4", "tcp": "#7f7f7f", "dot": "#2ca02c", "doh": "#d62728", "doq": "#9467bd", "doh3": "#8c564b",
    "do53": "#1f77b4",
}  # fmt: skip


def draw_times(rows: Sequence[Row], out: Path, stem: str = "response-times") -> list[Path]:
    """One panel per preset: the CDF of response times of every (transport, cache); returns the
    files written (SVG and PNG)."""
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    if not presets:
        return []
    fig, axes = plt.subplots(1, len(presets), figsize=(4.2 * len(presets), 3.4), squeeze=False, sharey=True)
    for ax, preset in zip(axes[0], presets, strict=True):
        for r in (r for r in rows if r["preset"] == preset and r["cdf_ms"]):
            xs = [x for x, _ in r["cdf_ms"]]
            ys = [y for _, y in r["cdf_ms"]]
            ax.step(xs, ys, where="post", color=COLOURS.get(r["transport"], "black"),
                    linestyle="--" if r["cache"] == "cold" else "-", linewidth=1.2,
                    label=f"{r['transport']} {r['cache']}")  # fmt: skip
        ax.set_xscale("log")
        ax.set_title(preset, fontsize=9)
        ax.set_xlabel("response time, ms (log)", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("share of queries", fontsize=8)
    axes[0][-1].legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.svg", out / f"{stem}.png"]
    for p in paths:
        fig.savefig(p, dpi=120)
    plt.close(fig)
    return paths
