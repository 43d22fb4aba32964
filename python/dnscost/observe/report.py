"""The observations' report (``report.html`` in ``dnscost observe``'s output): one self-contained
page with Figure 2 of every client, the table of every observation (connections, lifetimes,
queries per connection, closes by side and method) and the profile each observation gave.
Drawn from what :mod:`.figure` wrote and the observations' own logs; never starts a process."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from markupsafe import Markup

from dnscost.observe.analysis import COLUMNS, Observed, load, table
from dnscost.observe.figure import draw_figure
from dnscost.report import render
from dnscost.results import read_json

__all__ = ["write_all", "write_report"]

_OBSERVATIONS = [
    ("client", "client"), ("client_version", "version"), ("delay_s", "delay, s"), ("policy", "policy"),
    ("duration_s", "duration, s"), ("connections", "connections with queries"),
    ("idle_connections", "without queries"), ("duration_median_s", "lifetime median, s"),
    ("duration_max_s", "lifetime max, s"), ("lab_queries_per_connection_median", "lab queries per connection, median"),
    ("lab_names", "lab names"), ("lab_queries", "lab queries"), ("background_queries", "background queries"),
    ("closes", "closes, by side and how"),
]  # fmt: skip

_PROFILE = [
    ("name", "profile"), ("transport", "transport"), ("connections", "connections"),
    ("query_interval_ms", "ms between resolutions"), ("queries_per_resolution", "queries per resolution"),
    ("idle_timeout_ms", "idle close, ms"), ("lifetime", "lifetime"), ("close", "close"),
    ("resumption", "resumed reconnections"),
]  # fmt: skip


def _observations(observed: list[Observed]) -> render.Table:
    rows = table(observed)
    return render.table(
        [h for _, h in _OBSERVATIONS],
        [[r[k] for k, _ in _OBSERVATIONS] for r in rows],
        text_columns={0, 1, 3, 13},
        caption="Every observation, from the responder's logs: connections that carried queries and those that "
        "carried none (a browser's redundant opens), their lifetimes, the driver's queries per connection, and who "
        "closed them how",
    )


def _lifetime(value: Any) -> Any:
    if isinstance(value, dict):
        parts = [f"{value['queries']} queries" if value.get("queries") else "",
                 f"{value['duration_ms']} ms" if value.get("duration_ms") else ""]  # fmt: skip
        return ", ".join(p for p in parts if p) or None
    return value


def _profiles(observed: list[Observed]) -> render.Table | None:
    found = []
    for o in sorted(observed, key=lambda o: (o.meta["client"], o.delay_s, o.policy)):
        path = o.path / "profile.json"
        if path.exists():
            found.append(read_json(path))
    if not found:
        return None
    return render.table(
        [h for _, h in _PROFILE],
        [[_lifetime(p.get(k)) for k, _ in _PROFILE] for p in found],
        text_columns={0, 1, 6, 7},
        caption="The profile each observation gave (profile.json): the client's own behaviour, replayed by "
        "dnscost-engine generate --profile and by a spec's group of profiles; what no close of the client's "
        "showed is empty",
    )


def write_report(out: Path, observed: list[Observed]) -> Path:
    """Writes ``out/report.html`` from the observations under ``out`` and the Figure 2 SVGs
    :func:`write_all` drew there; returns its path."""
    clients = list(dict.fromkeys(o.meta["client"] for o in observed))
    figures = []
    for k, client in enumerate(clients):
        svg = out / f"figure2-{client}.svg"
        if svg.exists():
            figures.append((client, Markup(render.inline_svg(svg.read_text(), f"f{k}-"))))  # matplotlib's own markup
    context = {
        "title": f"dnscost observe: {', '.join(clients)}",
        "figures": figures,
        "observations": _observations(observed),
        "profiles": _profiles(observed),
    }
    path = out / "report.html"
    path.write_text(render.TEMPLATES.get_template("observe.html.j2").render(context), encoding="utf-8")
    return path


def write_all(out: Path) -> list[Path]:
    """Reads every observation under ``out`` (``<client>/<cell>/observation.json``), writes
    ``observations.csv``, one Figure 2 per client and ``report.html`` (all of them in one
    page). Returns the files written."""
    observed = [load(p.parent) for p in sorted(out.glob("*/*/observation.json"))]
    if not observed:
        return []
    rows = table(observed)
    path = out / "observations.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    written = [path]
    for client in dict.fromkeys(o.meta["client"] for o in observed):
        written += draw_figure(client, [o for o in observed if o.meta["client"] == client], out)
    written.append(write_report(out, observed))
    return written
