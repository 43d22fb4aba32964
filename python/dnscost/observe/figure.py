"""The study's Figure 2 for observations: one panel per delay and policy of a client, a bar per
connection over time (a cross for one shorter than a second), ticks at its lab queries,
coloured by who closed it. Drawn from the observations' own logs (:mod:`.analysis`), never
from anything else."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from dnscost.observe.analysis import Observed

__all__ = ["draw_figure"]

COLOURS = {"client": "#1f77b4", "server": "#d62728"}
OTHER = "#7f7f7f"
SHORT_S = 1.0


def _panel(ax: Axes, o: Observed) -> None:
    conns = [c for c in o.connections if c.lab_queries or c.background_queries or c.duration_s >= SHORT_S]
    for row, c in enumerate(conns):
        colour = COLOURS.get(c.closed_by, OTHER)
        if c.duration_s < SHORT_S:
            ax.plot([max(c.opened_s, 0)], [row], marker="x", color=colour, markersize=5, linestyle="none")
        else:
            ax.broken_barh([(c.opened_s, c.duration_s)], (row - 0.3, 0.6), facecolors=colour, alpha=0.55)
        if c.query_times_s:
            ax.plot(c.query_times_s, [row] * len(c.query_times_s), marker="|", color="black", markersize=6,
                    linestyle="none", alpha=0.7)  # fmt: skip
    s = o.meta["summary"]
    ax.set_xlim(0, max(float(o.meta.get("duration_s", 0)), 1.0) * 1.02)
    ax.set_ylim(-1, max(len(conns), 1))
    ax.set_title(f"{o.delay_s:g} s · {o.policy}", fontsize=9)
    median = s["duration_s"].get("median")
    text = f"{s['connections']} conns" + (f", median {median:.0f} s" if median is not None else "")
    if s["idle_connections"]:
        text += f", +{s['idle_connections']} idle"
    ax.text(0.99, 0.02, text, transform=ax.transAxes, ha="right", va="bottom", fontsize=7)
    ax.tick_params(labelsize=7)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def draw_figure(client: str, observed: list[Observed], out: Path) -> list[Path]:
    """Figure 2 for ``client``: rows are delays, columns policies. Writes SVG and PNG."""
    delays = sorted({o.delay_s for o in observed})
    policies = list(dict.fromkeys(o.policy for o in observed))
    fig, axes = plt.subplots(
        len(delays),
        len(policies),
        figsize=(max(3.2 * len(policies) + 0.6, 6.4), 2.2 * len(delays) + 0.8),
        squeeze=False,
    )
    by = {(o.delay_s, o.policy): o for o in observed}
    for i, d in enumerate(delays):
        for j, p in enumerate(policies):
            ax = axes[i][j]
            if (d, p) in by:
                _panel(ax, by[(d, p)])
            else:
                ax.set_axis_off()
            if i == len(delays) - 1:
                ax.set_xlabel("seconds", fontsize=8)
            if j == 0:
                ax.set_ylabel("connection", fontsize=8)
    version = next((o.meta.get("client_version") for o in observed if o.meta.get("client_version")), None)
    fig.suptitle(f"{client}" + (f" {version}" if version else "") + ": connections to the resolver", fontsize=10)
    handles = [
        Line2D([], [], color=COLOURS["client"], lw=6, alpha=0.55, label="closed by the client"),
        Line2D([], [], color=COLOURS["server"], lw=6, alpha=0.55, label="closed by the server"),
        Line2D([], [], color="black", marker="x", linestyle="none", label=f"under {SHORT_S:g} s"),
        Line2D([], [], color="black", marker="|", linestyle="none", label="lab query"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    paths = []
    for ext in ("svg", "png"):
        path = out / f"figure2-{client}.{ext}"
        fig.savefig(path, dpi=120)
        paths.append(path)
    plt.close(fig)
    return paths
