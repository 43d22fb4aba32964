"""Derived tables again from a run's stored ``trials`` table, for a run whose raw records were
not kept (``docs/study-run`` holds its ``tables/`` only).

What can be recomputed is recomputed from ``trials.csv``: the rounds, consistency, connections,
establishment, energy, Table I, latency, cost model, clients and headline tables, under today's
definitions (the ``not-persistent`` flag and the consistency checks included). Three tables need
the trials' documents, which are not stored, and are taken as written: ``baseline`` (the UDP
searches' results), ``memory_points`` (the meter's levels; their ``valid`` follows the idle
trial's row) and ``wire`` (the engine's packet counts). A trial's validity is the stored
``valid`` (the flags it was given at measurement), less the consistency flags, which are raised
again. Columns an older ``trials.csv`` lacks take their documented defaults: ``analysis`` is the
group's name, ``early_data`` 0.

Run facts (identity, times, versions) come from ``run-facts.json`` beside ``tables/`` when
present, else are unknown. Reads files only; never starts a process.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from dnscost.analysis import derive, headline
from dnscost.analysis.consistency import flag_not_persistent
from dnscost.analysis.records import Analysis
from dnscost.analysis.tables import COLUMNS, TEXT_COLUMNS
from dnscost.analysis.write import write_tables
from dnscost.contract import Row, RunRecord, TrialRecord
from dnscost.errors import UsageError
from dnscost.validity import CONSISTENCY_FLAGS

__all__ = ["FROM_DOCUMENTS", "analyze_tables", "read_table"]

FROM_DOCUMENTS = ("baseline", "memory_points", "wire")
"""Tables that need the trials' documents: taken as stored."""


def _cell(name: str, text: str) -> Any:
    """A CSV cell as :func:`dnscost.analysis.write.csv_cell` wrote it, read back."""
    if text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    if name in TEXT_COLUMNS:
        return text
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def read_table(path: Path) -> list[Row]:
    """A derived table's CSV as rows, typed back (empty cells None)."""
    with path.open(newline="") as f:
        return [{k: _cell(k, v) for k, v in row.items()} for row in csv.DictReader(f)]


def _trial_rows(path: Path) -> list[Row]:
    rows = []
    for r in read_table(path):
        row = {c: r.get(c) for c in COLUMNS["trials"]}
        row["analysis"] = r.get("analysis") or r.get("group")
        row["early_data"] = r.get("early_data") or 0.0
        row["flags"] = ";".join(f for f in str(r.get("flags") or "").split(";") if f and f not in CONSISTENCY_FLAGS)
        row["valid"] = bool(r.get("valid"))
        rows.append(row)
    return rows


def analyze_tables(run_dir: Path) -> Analysis:
    """Every derived table of the run in ``run_dir`` from its ``tables/trials.csv`` and the
    tables of :data:`FROM_DOCUMENTS` (see the module's docstring). Raises
    :class:`dnscost.errors.UsageError` when ``tables/trials.csv`` is missing."""
    tables = run_dir / "tables"
    if not (tables / "trials.csv").is_file():
        raise UsageError(f"{run_dir}: no tables/trials.csv to recompute from")
    rows = _trial_rows(tables / "trials.csv")
    flag_not_persistent(rows)
    stored = {name: read_table(tables / f"{name}.csv") for name in FROM_DOCUMENTS if (tables / f"{name}.csv").is_file()}
    valid = {(r["target"], r["transport"], r["connections"]): r["valid"] for r in rows if r["kind"] == "idle"}
    points = [
        {**p, "valid": valid.get((p["target"], p["transport"], p["connections"]), p["valid"])}
        for p in stored.get("memory_points", [])
    ]
    facts = run_dir / "run-facts.json"
    run: RunRecord = json.loads(facts.read_text()) if facts.is_file() else {}
    trials: list[TrialRecord] = [{"id": r["id"], "status": r["status"]} for r in rows]
    return derive(run, trials, rows, baseline=stored.get("baseline", []), points=points, wire=stored.get("wire", []))


def main(argv: list[str] | None = None) -> int:
    """``python -m dnscost.analysis.stored RUN_DIR [--page]``: recomputes ``RUN_DIR/tables``
    from its ``trials.csv`` (and the tables of :data:`FROM_DOCUMENTS`, kept as they are); with
    ``--page``, also the study page ``study.md`` and the HTML report with its figures."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m dnscost.analysis.stored", description=main.__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--page", action="store_true", help="write study.md and report.html too")
    args = parser.parse_args(argv)
    a = analyze_tables(args.run_dir)
    write_tables(a, args.run_dir / "tables")
    if args.page:
        from dnscost.report import render_report  # the report imports the analysis, not the other way

        render_report(a, args.run_dir, headline=headline(a))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
