"""Table I's day at 10 000 qps, measured (``docs/table1-day.md``), from a run's ``table1`` table:
per target and cell, the kWh of a day by the study's method (energy per query at saturation x
10 000 x 86 400), by the constant cost model (its CPU at exactly 10 000 qps), and measured (the
cell run open loop at 10 000 qps, its energy above idle a second x 86 400), each ratio to UDP's
by the same method, and the measured day over the study's method's. A cell one core could not
carry at 10 000 qps has no measured kWh: its answered rate stands instead.

python -m dnscost.report.day RUN_DIR   (after ``dnscost report RUN_DIR``: reads its tables)
"""

from __future__ import annotations

import sys
from pathlib import Path

from dnscost.errors import DnscostError, UsageError
from dnscost.report.versions import Row, read_csv
from dnscost.report.versions import figure as _g
from dnscost.report.versions import number as _num

__all__ = ["day_table", "main"]


def _cell(r: Row) -> str:
    if r["transport"] == "udp":
        return "udp"
    lifetime = {"1q": "one query", "1s": "1 s", "30s": "30 s"}.get(r["lifetime"], r["lifetime"])
    return f"{r['transport']}, {lifetime}"


def _measured(r: Row) -> str:
    value, low, high = (_num(r[k]) for k in ("kwh_measured", "kwh_measured_min", "kwh_measured_max"))
    return "n/a" if value is None else f"{_g(value)} [{_g(low)}-{_g(high)}]"


def day_table(table1: list[Row]) -> str:
    """One Markdown table per target of the run's Table I cells that were measured at 10 000 qps."""
    rows = [r for r in table1 if int(r.get("day_reps") or 0) and r["cert_key"] in ("", "ecdsa-p256")]
    out: list[str] = []
    for target in dict.fromkeys(r["target"] for r in rows):
        out += [
            f"**{target}**: a day at 10 000 qps, kWh (energy above idle), three ways, and each ÷ UDP's by the same "
            "way (measured: median [min-max] over the rounds that stand for the day); measured ÷ the study's "
            "method; the rate the cell answered at 10 000 qps offered (median over rounds) and its rounds that "
            "stand for the day (valid, answering at least 97 % of 10 000 qps)",
            "",
            "| cell | study's method | ÷ UDP | cost model | ÷ UDP | measured | ÷ UDP | measured ÷ study's "
            "| answered qps | rounds |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in (r for r in rows if r["target"] == target):
            study, measured = _num(r["kwh_study_method"]), _num(r["kwh_measured"])
            over = measured / study if measured is not None and study else None
            udp_study = _num(r["ratio_to_udp_cell"]) if r["transport"] != "udp" else 1.0
            out.append(
                f"| {_cell(r)} | {_g(study)} | {_g(udp_study)} | {_g(_num(r['kwh_model']))} "
                f"| {_g(_num(r['model_ratio_to_udp']))} | {_measured(r)} | {_g(_num(r['measured_ratio_to_udp']))} "
                f"| {_g(over)} | {_g(_num(r['day_answered_qps']))} | {r['day_valid_reps']} of {r['day_reps']} |"
            )
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if len(args) != 1:
            raise UsageError("usage: python -m dnscost.report.day RUN_DIR")
        table = day_table(read_csv(Path(args[0]) / "tables" / "table1.csv"))
        if not table:
            raise UsageError(f"{args[0]}: no Table I cell measured at 10 000 qps (experiments/table1-day.toml)")
        print(table, end="")
    except DnscostError as e:
        print(f"dnscost: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
