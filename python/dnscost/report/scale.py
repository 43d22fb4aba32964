"""Figures 3 and 4 to 100 000 connections (``docs/scale.md``), from a run's tables: memory per
idle connection point by point, the line through the points with how far it holds (its
residuals, the largest point predicted from the others, a million connections), and throughput
over persistent connections.

python -m dnscost.report.scale RUN_DIR   (after ``dnscost report RUN_DIR``: reads its tables)
"""

from __future__ import annotations

import sys
from pathlib import Path

from dnscost.errors import DnscostError, UsageError
from dnscost.report.versions import Row, read_csv
from dnscost.report.versions import number as _num
from dnscost.transports import TRANSPORTS

__all__ = ["main", "scale_tables"]


KIB, MIB, GIB = 1024.0, 1024.0**2, 1024.0**3


def _fmt(v: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "n/a" if v is None else f"{v / scale:,.{digits}f}"


def _range(value: str, low: str, high: str, scale: float, digits: int) -> str:
    text = _fmt(_num(value), scale, digits)
    if _num(low) is not None and _num(high) is not None:
        text += f" [{_fmt(_num(low), scale, digits)}-{_fmt(_num(high), scale, digits)}]"
    return text


def _order(rows: list[Row]) -> list[Row]:
    """Rows by target (in the order they first come), transport, then connections."""
    targets = list(dict.fromkeys(r["target"] for r in rows))

    def key(r: Row) -> tuple[int, int, float]:
        t = r["transport"]
        rank = TRANSPORTS.index(t) if t in TRANSPORTS else len(TRANSPORTS)
        return targets.index(r["target"]), rank, _num(r.get("connections")) or 0.0

    return sorted(rows, key=key)


def _yes(text: str) -> bool | None:
    return {"true": True, "false": False}.get(text.strip().lower())


def scale_tables(points: list[Row], lines: list[Row], connections: list[Row]) -> str:
    """Three Markdown tables from the ``memory_points``, ``memory_scale`` and ``connections``
    tables' rows (CSV text, as ``dnscost report`` writes them)."""
    points, lines, connections = _order(points), _order(lines), _order(connections)
    out = [
        "### Memory per idle connection, point by point",
        "",
        "| target | transport | connections held | user MiB | kernel MiB "
        "| KiB per connection (user + kernel) | valid |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for p in points:
        held = _num(p["connections_held"]) or _num(p["connections"])
        user, kernel = _num(p["rss_delta_bytes"]), _num(p["kernel_delta_bytes"])
        per = (user + kernel) / held if held and user is not None and kernel is not None else None
        out.append(
            f"| {p['target']} | {p['transport']} | {_fmt(held, digits=0)} | {_fmt(user, MIB)} | {_fmt(kernel, MIB)} "
            f"| {_fmt(per, KIB, 2)} | {'yes' if _yes(p['valid']) else 'no'} |"
        )
    out += [
        "",
        "### The line through the points, and how far it holds",
        "",
        "| target | transport | points | KiB per connection | R² | residuals | largest point predicted "
        "from the others, GiB [interval] | measured, GiB | error | in the interval | a million connections, GiB |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---|---:|",
    ]
    for r in lines:
        within = {True: "yes", False: "**no**", None: "n/a"}[_yes(r["holdout_within"])]
        error = _num(r["holdout_error"])
        out.append(
            f"| {r['target']} | {r['transport']} | {r['points']} | {_fmt(_num(r['bytes_per_connection']), KIB, 2)} "
            f"| {_fmt(_num(r['r2']), digits=4)} | {r['residuals'].replace('/', ' ')} "
            f"| {_range(r['holdout_predicted_bytes'], r['holdout_low_bytes'], r['holdout_high_bytes'], GIB, 2)} "
            f"at {_fmt(_num(r['holdout_connections']), digits=0)} | {_fmt(_num(r['holdout_measured_bytes']), GIB, 2)} "
            f"| {'n/a' if error is None else format(100 * error, '+.1f') + ' %'} | {within} "
            f"| {_range(r['million_bytes'], r['million_low_bytes'], r['million_high_bytes'], GIB, 1)} |"
        )
    out += [
        "",
        "### Throughput over persistent connections",
        "",
        "| target | transport | connections | answered qps | share of UDP | valid trials |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for c in connections:
        out.append(
            f"| {c['target']} | {c['transport']} | {_fmt(_num(c['connections']), digits=0)} "
            f"| {_fmt(_num(c['qps_median']), digits=0)} | {_fmt(_num(c['share_of_udp']), digits=3)} "
            f"| {c['valid_reps']} of {c['reps']} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if len(args) != 1:
            raise UsageError("usage: python -m dnscost.report.scale RUN_DIR")
        tables = Path(args[0]) / "tables"
        print(
            scale_tables(
                read_csv(tables / "memory_points.csv"),
                read_csv(tables / "memory_scale.csv"),
                read_csv(tables / "connections.csv"),
            )
        )
    except DnscostError as e:
        print(f"dnscost: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
