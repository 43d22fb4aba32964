"""Analysis of stored runs: pure functions from a run directory to derived tables (see
``docs/results.md``). Reads ``run.json``, ``trials/*/trial.json`` and the raw records trial summaries
are computed again from (:func:`dnscost.analysis.load.record_files`; a kept run's, compressed, as a
full run's); never starts a process.

::

    analyze(run_dir) -> Analysis          every derived table, in memory
    write_tables(analysis, out_dir)       each table as <name>.parquet and <name>.csv
    headline(analysis)                    the figures a report leads with, per target, with
                                          intervals over rounds (also the ``headline`` table)
"""

from __future__ import annotations

from pathlib import Path

from dnscost.analysis.clients import clients_rows
from dnscost.analysis.consistency import (
    apply_flags,
    consistency_rows,
    flag_not_one_query,
    flag_not_persistent,
    handshake_rows,
)
from dnscost.analysis.costmodel import cost_model_rows, fit_transports
from dnscost.analysis.curves import curve_rows, mechanism_rows
from dnscost.analysis.headline import headline, headline_rows
from dnscost.analysis.load import load_run_series
from dnscost.analysis.loadmodel import fit_load, load_model_rows, long_gap_rows
from dnscost.analysis.population import population_rows
from dnscost.analysis.records import Analysis, Table
from dnscost.analysis.rounds import round_rows
from dnscost.analysis.table1 import table1_rows
from dnscost.analysis.tables import (
    COLUMNS,
    baseline_rows,
    capacity_rows,
    connections_rows,
    energy_rows,
    establishment_rows,
    latency_rows,
    memory_fit_rows,
    memory_point_rows,
    memory_scale_rows,
    trial_row,
    wire_rows,
)
from dnscost.analysis.write import write_tables
from dnscost.contract import Row, RunRecord, TrialRecord

__all__ = ["COLUMNS", "Analysis", "Table", "analyze", "derive", "headline", "write_tables"]


def analyze(run_dir: Path) -> Analysis:
    """Reads a run (run.json and every planned trial's trial.json) and derives every table of
    docs/results.md. Missing or failed trials appear in ``trials`` with their status; invalid
    ones are marked and left out of fits, medians and headline figures. Raises
    :class:`dnscost.errors.UsageError` when ``run_dir`` holds no readable run.json with a plan."""
    run, trials, series = load_run_series(run_dir)
    rows = [trial_row(t, run) for t in trials]
    flag_not_persistent(rows)
    flag_not_one_query(rows)
    return derive(
        run,
        trials,
        rows,
        baseline=baseline_rows(trials, rows),
        points=memory_point_rows(trials, rows),
        wire=wire_rows(trials, rows),
        series=series,
        capacity=capacity_rows(trials, rows),
    )


def derive(
    run: RunRecord,
    trials: list[TrialRecord],
    rows: list[Row],
    *,
    baseline: list[Row],
    points: list[Row],
    wire: list[Row],
    series: list[Row] | None = None,
    capacity: list[Row] | None = None,
) -> Analysis:
    """Every derived table from the ``trials`` table's rows (validity and the ``not-persistent``
    flag already set) and the three tables that need the trials' documents: the ``baseline``
    (UDP searches), the ``memory_points`` (meter levels) and the ``wire`` counts; ``series``,
    the trials' rows over time, from their raw records (:mod:`dnscost.analysis.series`), stands
    as given. Consistency flags are raised here, on ``rows``."""
    rounds = round_rows(rows)
    contradictions = consistency_rows(rounds, points, rows)
    apply_flags(rows, contradictions)
    fitted = fit_transports(rows)
    cost_terms, cost_fits = cost_model_rows(rows, fitted)
    load_fitted = fit_load(rows)
    load_terms, load_fits = load_model_rows(rows, load_fitted)
    energy = energy_rows(rows)
    built = {
        "trials": rows,
        "baseline": baseline,
        "memory_points": points,
        "memory_fit": memory_fit_rows(points),
        "memory_scale": memory_scale_rows(points),
        "connections": connections_rows(rows, baseline),
        "establishment": establishment_rows(rows, baseline),
        "energy": energy,
        "table1": table1_rows(rows, energy, cost_terms),
        "latency": latency_rows(rows),
        "cost_model": cost_terms,
        "cost_model_fit": cost_fits,
        "wire": wire,
        "clients": clients_rows(rows, rounds),
        "population": population_rows(trials, fitted, load_fitted),
        "load_model": load_terms,
        "load_model_fit": load_fits,
        "load_model_gaps": long_gap_rows(rows),
        "rounds": rounds,
        "cost_curve": curve_rows(rows),
        "curve_mechanism": mechanism_rows(rows),
        "consistency": contradictions,
        "headline": [],
        "series": series or [],
        "capacity": capacity or [],
    }
    tables = {
        name: Table(name, COLUMNS[name], [{c: r.get(c) for c in COLUMNS[name]} for r in built[name]])
        for name in COLUMNS
    }
    a = Analysis(run=run, trials=trials, tables=tables)
    # The headline reads the other tables, so it comes last; a resumed handshake dearer than a
    # full one is found there, so its contradictions join the table (and flag the trials) then.
    heads = headline(a)
    dearer = handshake_rows({h["target"]: h["handshake_rounds"] for h in heads})
    if dearer:
        apply_flags(rows, dearer)
        tables["consistency"].rows += [{c: r.get(c) for c in COLUMNS["consistency"]} for r in dearer]
        by_id = {r["id"]: r for r in rows}
        for r in tables["trials"].rows:
            r["flags"] = by_id[r["id"]]["flags"]
    tables["headline"].rows = [{c: r.get(c) for c in COLUMNS["headline"]} for r in headline_rows(heads)]
    return a
