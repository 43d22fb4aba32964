"""Cost curves: a target's CPU per query against the load it serves (issue 54).

A ladder (a ``capacity_of`` group with several shares, :data:`dnscost.shares.CURVE`) runs each
cell of a saturation group open loop at several shares of the answered rate its saturation
trial measured in the same round. With that saturation trial as the curve's last point (100 %),
each cell gives one curve: per share, the offered and answered rates and the target's CPU per
answered query over the valid rounds (median, min, max), and the same CPU per query over the
saturation trial's of its round (``ratio_to_saturation``: what a query costs at that load
against at full load, paired within rounds so that the machine's drift between rounds cancels),
and what explains it: the target's wake-ups, scheduler runs and softirq time per query.

The ``curve_mechanism`` table says which observer carries each curve: over the cell's valid
trials (every step and its saturation points), the target's CPU per query regressed on each of
its wake-ups, scheduler runs and softirq time per query (ordinary least squares): the slope (the
CPU a wake-up costs, with its 95 % interval), the share of the CPU per query's variance it
explains (``r2``), and the share of the curve's rise (lowest step over saturation, medians) that
the slope times the observer's own rise accounts for.

Pure: rows of the ``trials`` table in, rows of ``cost_curve`` and ``curve_mechanism`` out."""

from __future__ import annotations

from dnscost.analysis.stats import fit_line, median, significant
from dnscost.contract import Row
from dnscost.shares import CURVE, load_share
from dnscost.transports import TRANSPORTS

__all__ = ["CURVE_COLUMNS", "MECHANISM_COLUMNS", "curve_rows", "mechanism_rows"]

CURVE_COLUMNS = [
    "target",
    "transport",
    "lifetime",
    "resumption",
    "early_data",
    "cert_key",
    "connections",
    "share",
    "reps",
    "valid_reps",
    "offered_qps",
    "answered_qps",
    "cpu_us_per_query",
    "cpu_us_per_query_min",
    "cpu_us_per_query_max",
    "ratio_to_saturation",
    "ratio_to_saturation_min",
    "ratio_to_saturation_max",
    "wakeups_per_query",
    "runs_per_query",
    "softirq_us_per_query",
]

MECHANISM_COLUMNS = [
    "target",
    "transport",
    "lifetime",
    "resumption",
    "early_data",
    "cert_key",
    "connections",
    "observer",
    "trials",
    "us_per_unit",
    "us_per_unit_low",
    "us_per_unit_high",
    "r2",
    "rise_explained",
]

_OBSERVED = ("wakeups_per_query", "runs_per_query", "softirq_us_per_query")
"""What the meter saw beside the CPU (the target's voluntary context switches and scheduler runs,
its cores' softirq time), per answered query: medians over the valid rounds."""

_CELL = ("target", "transport", "lifetime", "resumption", "early_data", "cert_key", "connections")


def _spread(values: list[float]) -> tuple[float | None, float | None, float | None]:
    """(median, min, max), or three None for no values."""
    if not values:
        return None, None, None
    return median(values), min(values), max(values)


def _ladders(rows: list[Row]) -> dict[tuple[object, ...], dict[float, list[tuple[Row, Row]]]]:
    """Per cell of a ladder, per share (1: its saturation trials), its trials each with its
    round's saturation trial."""
    of = {r["id"]: r for r in rows}
    points: dict[tuple[object, ...], dict[float, list[tuple[Row, Row]]]] = {}
    for r in rows:
        if r.get("analysis") != CURVE or r.get("reference") not in of:
            continue
        ref = of[r["reference"]]
        share = load_share(r["rate"])
        if share is None:
            continue
        cell = points.setdefault(tuple(r[k] for k in _CELL), {})
        cell.setdefault(share, []).append((r, ref))
        cell.setdefault(1.0, [])
        if not any(s is ref for s, _ in cell[1.0]):
            cell[1.0].append((ref, ref))
    return points


def mechanism_rows(rows: list[Row]) -> list[Row]:
    """One row per ladder cell and observer (see the module), cells in the ``cost_curve``
    table's order."""
    out: list[Row] = []
    for key, shares in _ladders(rows).items():
        trials = [r for pairs in shares.values() for r, _ in pairs if r["valid"] and r["cpu_us_per_query"] is not None]
        lowest = min(shares)

        def med(share: float, column: str, shares: dict[float, list[tuple[Row, Row]]] = shares) -> float | None:
            return median([float(r[column]) for r, _ in shares[share] if r["valid"] and r.get(column) is not None])

        rise = (med(lowest, "cpu_us_per_query") or 0.0) - (med(1.0, "cpu_us_per_query") or 0.0)
        for observer in _OBSERVED:
            have = [r for r in trials if r.get(observer) is not None]
            fit = fit_line([float(r[observer]) for r in have], [float(r["cpu_us_per_query"]) for r in have])
            low, high = med(lowest, observer), med(1.0, observer)
            explained = (
                fit.slope * (low - high) / rise
                if fit is not None and low is not None and high is not None and rise > 0
                else None
            )
            out.append(
                dict(zip(_CELL, key, strict=True))
                | {
                    "observer": observer,
                    "trials": len(have),
                    # significant(): a fit's last bits differ from one CPU to another
                    "us_per_unit": significant(fit.slope) if fit else None,
                    "us_per_unit_low": significant(fit.ci95_low) if fit else None,
                    "us_per_unit_high": significant(fit.ci95_high) if fit else None,
                    "r2": significant(fit.r2) if fit else None,
                    "rise_explained": significant(explained),
                }
            )
    return sorted(out, key=lambda r: (*_order(r | {"share": 0}), _OBSERVED.index(str(r["observer"]))))


def curve_rows(rows: list[Row]) -> list[Row]:
    """One row per cell and share of every ladder, the saturation point (share 1) included;
    cells sorted as the trials table lists them, shares from the lowest."""
    points = _ladders(rows)
    out: list[Row] = []
    for key, shares in points.items():
        for share in sorted(shares):
            pairs = shares[share]
            valid = [(r, ref) for r, ref in pairs if r["valid"] and r["cpu_us_per_query"] is not None]
            cpu = [float(r["cpu_us_per_query"]) for r, _ in valid]
            ratios = [
                float(r["cpu_us_per_query"]) / float(ref["cpu_us_per_query"])
                for r, ref in valid
                if ref["valid"] and ref["cpu_us_per_query"]
            ]
            mid, low, high = _spread(cpu)
            rmid, rlow, rhigh = _spread(ratios)
            row: Row = dict(zip(_CELL, key, strict=True))
            row |= {
                "share": share,
                "reps": len(pairs),
                "valid_reps": len(valid),
                "offered_qps": median([float(r["offered_qps"]) for r, _ in valid if r["offered_qps"] is not None]),
                "answered_qps": median([float(r["answered_qps"]) for r, _ in valid if r["answered_qps"] is not None]),
                "cpu_us_per_query": mid,
                "cpu_us_per_query_min": low,
                "cpu_us_per_query_max": high,
                "ratio_to_saturation": rmid,
                "ratio_to_saturation_min": rlow,
                "ratio_to_saturation_max": rhigh,
                **{k: median([float(r[k]) for r, _ in valid if r.get(k) is not None]) for k in _OBSERVED},
            }
            out.append(row)
    return sorted(out, key=_order)


def _order(r: Row) -> tuple[object, ...]:
    """Target, transport (the tables' order), then the cell's knobs and the share."""
    t = r["transport"]
    return (
        str(r["target"]),
        TRANSPORTS.index(t) if t in TRANSPORTS else len(TRANSPORTS),
        *(str(r[k]) for k in _CELL[2:]),
        r["share"],
    )
