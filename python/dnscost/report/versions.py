"""The headline of one target at several versions, side by side (``docs/versions.md``): for each
adapter of a run (``dnsdist``, ``dnsdist@trixie``, ``dnsdist@sid`` ...), one Markdown table with a
column per version and a row per headline figure, each ``median [min-max]`` over rounds (fits:
the slope and its 95 % interval), ``(!)`` where the run's consistency table flags the cell.

python -m dnscost.report.versions RUN_DIR [--together]   (after ``dnscost report RUN_DIR``: reads
its tables; ``--together``: every target of the run in one table, as ``docs/dnsdist-quic.md`` puts
dnsdist built with quiche beside CoreDNS)
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from dnscost.errors import DnscostError, UsageError
from dnscost.jsonl import loads

__all__ = ["FIGURES", "figure", "main", "number", "read_csv", "versions_tables"]

Row = dict[str, str]

FIGURES: list[tuple[str, str, str, str, float, int]] = [
    # label, figure, transport(s), profile, scale, digits
    ("UDP, CPU-µs per query", "cpu_us_per_query", "udp", "persistent", 1.0, 2),
    ("persistent, CPU per query ÷ UDP's", "cpu_ratio_to_udp", "tcp,dot,doh,doq,doh3", "persistent", 1.0, 2),
    ("persistent, qps share of UDP", "qps_share_of_udp", "tcp,dot,doh,doq,doh3", "persistent", 1.0, 2),
    (
        "1 query per connection, CPU per query ÷ persistent",
        "cpu_ratio_to_persistent",
        "tcp,dot,doh,doq,doh3",
        "1q",
        1.0,
        1,
    ),
    ("CPU-µs per full handshake", "cpu_us_per_handshake", "tcp,dot,doh,doq,doh3", "full", 1.0, 0),
    ("memory per idle connection, KiB", "memory_bytes_per_connection", "tcp,dot,doh,doq,doh3", "idle", 1 / 1024, 1),
]


def read_csv(path: Path) -> list[Row]:
    """A table ``dnscost report`` wrote, as text rows; a missing one is one line."""
    try:
        with path.open(newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror or e} (run dnscost report on the run first)") from e


def number(text: str | None) -> float | None:
    """A CSV cell as a number; None for an empty one."""
    return float(text) if text not in (None, "") else None


def figure(v: float | None, digits: int = 3) -> str:
    """A number as the docs' Markdown tables print it: ``digits`` significant digits, whole
    numbers from ``10**digits`` up with thin groups (``323 058``), ``n/a`` for none."""
    if v is None:
        return "n/a"
    if abs(v) >= 10**digits:
        return f"{v:,.0f}".replace(",", " ")
    return f"{v:.{digits}g}"


def _cell(r: Row | None, scale: float, digits: int) -> str:
    if r is None or not r["value"]:
        return "n/a"
    v = float(r["value"]) * scale
    text = f"{v:,.{digits}f}"
    if r["low"] and r["high"] and int(r["n"] or 0) >= 2:
        text += f" [{float(r['low']) * scale:,.{digits}f}-{float(r['high']) * scale:,.{digits}f}]"
    return text


def _shown(target: str) -> str:
    """A target as a table heads it: an own build's place (``NAME@/path/to/root``) by its last
    component, not the machine's path (``dnsdist@dnsdist-quic``)."""
    name, _, place = target.partition("@")
    return f"{name}@{Path(place).name}" if place.startswith("/") else target


def versions_tables(
    headline: list[Row], consistency: list[Row], versions: dict[str, str], *, together: bool = False
) -> str:
    """One Markdown table per adapter with more than one version in ``headline`` (``together``:
    one table of every target)."""
    targets = list(dict.fromkeys(r["target"] for r in headline))
    by_base: dict[str, list[str]] = {}
    for t in targets:
        by_base.setdefault("side by side" if together else t.partition("@")[0], []).append(t)
    flagged = {(r.get("target", ""), r.get("transport", "")) for r in consistency if r.get("flag")}
    index = {(r["target"], r["figure"], r["transport"], r["profile"]): r for r in headline}
    out = []
    for base, tokens in by_base.items():
        if len(tokens) < 2:
            continue
        head = [f"{_shown(t)} {versions.get(t, '')}".strip() for t in tokens]
        out += [f"### {base}", "", "| figure | transport | " + " | ".join(head) + " |"]
        out.append("| --- | --- | " + " | ".join("---:" for _ in tokens) + " |")
        for label, figure, transports, profile, scale, digits in FIGURES:
            for transport in transports.split(","):
                cells = []
                for t in tokens:
                    cell = _cell(index.get((t, figure, transport, profile)), scale, digits)
                    cells.append(cell + (" (!)" if (t, transport) in flagged and cell != "n/a" else ""))
                if all(c == "n/a" for c in cells):
                    continue
                out.append(f"| {label} | {transport} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        together = "--together" in args
        args = [a for a in args if a != "--together"]
        if len(args) != 1:
            raise UsageError("usage: python -m dnscost.report.versions RUN_DIR [--together]")
        run = Path(args[0])
        headline = read_csv(run / "tables" / "headline.csv")
        consistency = read_csv(run / "tables" / "consistency.csv")
        try:
            versions = loads((run / "run.json").read_text()).get("versions") or {}
        except (OSError, json.JSONDecodeError) as e:
            raise UsageError(f"{run}: no readable run.json: {e}") from e
        print(versions_tables(headline, consistency, {str(k): str(v) for k, v in versions.items()}, together=together))
    except DnscostError as e:
        print(f"dnscost: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
