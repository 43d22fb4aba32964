"""Our results beside the study's (:mod:`dnscost.report.study`): the same ratios, computed from
the derived tables, with a verdict and the reasons a difference is plausible."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dnscost.analysis import Analysis
from dnscost.analysis.tables import reference_key
from dnscost.report.study import Finding, finding

__all__ = ["AGREEMENT_FACTOR", "COLLAPSE_SHARE", "StudyComparison", "energy_source_label", "versus_study"]

AGREEMENT_FACTOR = 1.5
"""A ratio within this factor of the study's agrees (throughput shares)."""
ENERGY_AGREEMENT_FACTOR = 3.0
"""Energy figures agree within this factor: an order-of-magnitude comparison, since one side is a
model and the machines differ."""
COLLAPSE_SHARE = 0.25
"""Throughput at one query per connection below this share of UDP counts as a collapse."""

_ENERGY_SOURCES = {"rapl": "RAPL", "model": "model (CCF coefficients)"}


def energy_source_label(source: str | None) -> str:
    """``rapl`` → ``RAPL``, ``model`` → ``model (CCF coefficients)``; ``model+rapl`` → both."""
    if not source:
        return "unknown"
    return " + ".join(_ENERGY_SOURCES.get(part, part) for part in source.split("+"))


@dataclass(frozen=True)
class StudyComparison:
    """One of the study's findings beside ours for one target."""

    finding: Finding
    target: str
    ours: float | None
    how: str
    """How ``ours`` was computed, from which table and rows."""
    verdict: str
    """``agrees``, ``differs (higher)``, ``differs (lower)`` or ``not measured``."""


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value else None


def _rows(a: Analysis, name: str) -> list[dict[str, Any]]:
    table = a.tables.get(name)
    return list(table.rows) if table is not None else []


def _udp(a: Analysis, target: str) -> float | None:
    for r in _rows(a, "baseline"):
        if r.get("target") == target and _num(r.get("udp_reference_qps")):
            return _num(r["udp_reference_qps"])
    for name in ("establishment", "connections"):
        for r in _rows(a, name):
            if r.get("target") == target and _num(r.get("udp_reference_qps")):
                return _num(r["udp_reference_qps"])
    return None


def _establishment(a: Analysis, target: str, transport: str, lifetime: str) -> dict[str, Any] | None:
    """The row without resumption (the lowest resumption) that has a median."""
    rows = [
        r
        for r in reference_key(_rows(a, "establishment"))
        if r.get("target") == target
        and r.get("transport") == transport
        and (r.get("lifetime") or "forever") == lifetime
        and _num(r.get("qps_median")) is not None
    ]
    return min(rows, key=lambda r: _num(r.get("resumption")) or 0.0) if rows else None


def _energy(a: Analysis, target: str, transport: str, lifetime: str) -> dict[str, Any] | None:
    rows = [
        r
        for r in reference_key(_rows(a, "energy"))
        if r.get("target") == target
        and r.get("transport") == transport
        and (r.get("lifetime") or "forever") == lifetime
        and (_num(r.get("kwh_per_day_at_10k_qps")) or 0.0) > 0
    ]
    return min(rows, key=lambda r: _num(r.get("resumption")) or 0.0) if rows else None


def _verdict(ours: float | None, theirs: float | None, factor: float) -> str:
    if ours is None:
        return "not measured"
    if theirs is None or theirs / factor <= ours <= theirs * factor:
        return "agrees"
    return "differs (higher)" if ours > theirs else "differs (lower)"


def _doh_persistent(a: Analysis, target: str, udp: float | None) -> tuple[float | None, str]:
    row = _establishment(a, target, "doh", "forever")
    if row is not None and udp:
        return float(row["qps_median"]) / udp, "establishment: DoH persistent median qps / UDP reference"
    conns = [
        r
        for r in _rows(a, "connections")
        if r.get("target") == target and r.get("transport") == "doh" and _num(r.get("qps_median")) is not None
    ]
    if conns and udp:
        best = max(conns, key=lambda r: float(r["qps_median"]))
        return (
            float(best["qps_median"]) / udp,
            f"connections: DoH best median qps ({best.get('connections')} connections) / UDP reference",
        )
    return None, "needs the UDP baseline and DoH with persistent connections"


def versus_study(a: Analysis) -> list[StudyComparison]:
    """Every finding of the study that this run measured, per target (in table order)."""
    targets: dict[str, None] = {}
    for name in ("baseline", "establishment", "connections", "energy"):
        for r in _rows(a, name):
            if r.get("target") is not None:
                targets.setdefault(str(r["target"]), None)
    out: list[StudyComparison] = []
    for target in targets:
        udp = _udp(a, target)
        share, how = _doh_persistent(a, target, udp)
        f = finding("doh_persistent_share_of_udp")
        out.append(StudyComparison(f, target, share, how, _verdict(share, f.value, AGREEMENT_FACTOR)))

        one = _establishment(a, target, "doh", "1q")
        collapse = float(one["qps_median"]) / udp if one is not None and udp else None
        verdict = (
            "not measured" if collapse is None else ("agrees" if collapse < COLLAPSE_SHARE else "differs (higher)")
        )
        out.append(
            StudyComparison(
                finding("one_query_collapse"),
                target,
                collapse,
                "establishment: DoH one query per connection median qps / UDP reference "
                f"(collapse: < {COLLAPSE_SHARE:.0%})",
                verdict,
            )
        )

        udp_energy = _energy(a, target, "udp", "forever")
        doh_energy = _energy(a, target, "doh", "1q")
        udp_kwh = _num(udp_energy.get("kwh_per_day_at_10k_qps")) if udp_energy else None
        doh_kwh = _num(doh_energy.get("kwh_per_day_at_10k_qps")) if doh_energy else None
        for key, ours, source in (
            ("udp_kwh_per_day_at_10k_qps", udp_kwh, udp_energy),
            ("doh_1q_kwh_per_day_at_10k_qps", doh_kwh, doh_energy),
        ):
            f = finding(key)
            label = energy_source_label(source.get("energy_source")) if source else "no energy row"
            out.append(
                StudyComparison(
                    f, target, ours, f"energy table, {label}", _verdict(ours, f.value, ENERGY_AGREEMENT_FACTOR)
                )
            )
        ratio = doh_kwh / udp_kwh if doh_kwh is not None and udp_kwh else None
        f = finding("doh_1q_over_udp_energy")
        out.append(
            StudyComparison(
                f,
                target,
                ratio,
                "energy table: DoH one query per connection / UDP, kWh per day at 10 000 qps",
                _verdict(ratio, f.value, ENERGY_AGREEMENT_FACTOR),
            )
        )
    return out
