"""Ratios within rounds (docs/results.md, "Rounds and ratios"). Repetitions run in rounds
(:mod:`dnscost.plan`): round ``r`` holds repetition ``r`` of every cell and a UDP reference
trial, so a ratio to UDP divides two values measured minutes apart on the same machine state.

The primary quantities are CPU per unit of work, which do not depend on how much CPU the
machine lent the target: target CPU-µs per answered query, per full and per resumed handshake;
capacity per core (1e6 / µs per query) is derived from them, measured qps is the second view.
Every figure is computed per round and then summarised over rounds as its median with the min
and max (:class:`Spread`). Pure: rows of the ``trials`` table in, rows out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dnscost.analysis.stats import median
from dnscost.contract import Row

__all__ = [
    "ROUND_COLUMNS",
    "Spread",
    "round_of",
    "round_rows",
    "spread",
    "udp_references",
]


ROUND_COLUMNS = [
    "target",
    "transport",
    "group",
    "analysis",
    "lifetime",
    "resumption",
    "early_data",
    "cert_key",
    "connections",
    "round",
    "id",
    "valid",
    "reference_id",
    "reference_valid",
    "cpu_us_per_query",
    "udp_cpu_us_per_query",
    "cpu_ratio_to_udp",
    "capacity_per_core_qps",
    "answered_qps",
    "udp_answered_qps",
    "qps_share_of_udp",
    "energy_j_per_query",
    "udp_energy_j_per_query",
    "energy_ratio_to_udp",
    "energy_source",
]
"""Columns of the ``rounds`` table: one row per load trial, beside its round's UDP reference."""


@dataclass(frozen=True)
class Spread:
    """A figure over rounds (or repetitions): the median, the min and max, and how many."""

    median: float | None
    low: float | None
    high: float | None
    n: int


def spread(values: Iterable[float | None]) -> Spread:
    """Median, min and max of the values present (None left out)."""
    present = [float(v) for v in values if v is not None]
    return Spread(median(present), min(present, default=None), max(present, default=None), len(present))


def round_of(row: Row) -> Any:
    """A trial's round: recorded in its plan entry, else its repetition (runs made before rounds
    paired repetitions of the same index, which is what they had)."""
    return row.get("round") if row.get("round") is not None else row.get("rep")


def _is_reference(row: Row) -> bool:
    return row.get("kind") == "load" and row.get("transport") == "udp" and row.get("rate") == "max"


_PREFERENCE = {"reference": 0, "establishment": 1}


def udp_references(rows: Sequence[Row]) -> dict[tuple[Any, Any], Row]:
    """Per (target, round), the round's UDP reference trial: closed-loop UDP load, from the
    ``reference`` group (:mod:`dnscost.plan` adds one to every round), else the
    ``establishment`` group's UDP cell (runs made before the reference group), else any; a
    valid one before an invalid one. An invalid reference is returned too (its ratios are
    then None: a share of UDP never falls back on another round's or the open-loop figure)."""
    out: dict[tuple[Any, Any], Row] = {}
    for r in rows:
        if not _is_reference(r):
            continue
        key = (r["target"], round_of(r))
        rank = (not r.get("valid"), _PREFERENCE.get(str(r.get("group")), 2))
        best = out.get(key)
        if best is None or rank < (not best.get("valid"), _PREFERENCE.get(str(best.get("group")), 2)):
            out[key] = r
    return out


def _div(a: Any, b: Any) -> float | None:
    if isinstance(a, int | float) and isinstance(b, int | float) and b:
        return float(a) / float(b)
    return None


def _energy_per_query(r: Row) -> float | None:
    """Marginal joules per answered query, from RAPL only (the model's joules are CPU time
    times a constant, so they add nothing to CPU per query)."""
    if r.get("energy_source") != "rapl":
        return None
    return _div(r.get("energy_marginal_j"), r.get("queries_answered"))


def round_rows(rows: Sequence[Row]) -> list[Row]:
    """One row per load trial (every group, the references included): its CPU per query, its
    round's UDP reference, and the ratios between them. A ratio is None unless both trials are
    valid."""
    refs = udp_references(rows)
    out = []
    for r in rows:
        if r.get("kind") != "load":
            continue
        ref = refs.get((r["target"], round_of(r)))
        both = bool(r.get("valid")) and ref is not None and bool(ref.get("valid"))
        cpu = r.get("cpu_us_per_query") if r.get("valid") else None
        udp_cpu = ref.get("cpu_us_per_query") if both and ref is not None else None
        qps = r.get("answered_qps") if r.get("valid") else None
        udp_qps = ref.get("answered_qps") if both and ref is not None else None
        energy = _energy_per_query(r) if r.get("valid") else None
        udp_energy = _energy_per_query(ref) if both and ref is not None else None
        out.append(
            {
                "target": r["target"],
                "transport": r["transport"],
                "group": r["group"],
                "analysis": r["analysis"],
                "lifetime": r["lifetime"],
                "resumption": r["resumption"],
                "early_data": r["early_data"],
                "cert_key": r["cert_key"],
                "connections": r["connections"],
                "round": round_of(r),
                "id": r["id"],
                "valid": bool(r.get("valid")),
                "reference_id": ref["id"] if ref is not None else None,
                "reference_valid": bool(ref.get("valid")) if ref is not None else None,
                "cpu_us_per_query": cpu,
                "udp_cpu_us_per_query": udp_cpu,
                "cpu_ratio_to_udp": _div(cpu, udp_cpu) if both else None,
                "capacity_per_core_qps": _div(1e6, cpu),
                "answered_qps": qps,
                "udp_answered_qps": udp_qps,
                "qps_share_of_udp": _div(qps, udp_qps) if both else None,
                "energy_j_per_query": energy,
                "udp_energy_j_per_query": udp_energy,
                "energy_ratio_to_udp": _div(energy, udp_energy) if both else None,
                "energy_source": r.get("energy_source"),
            }
        )
    return out
