"""Table I as the study measured it (issue 10 item 3): per target, UDP and TCP, DoT and DoH with
1 000 connections lasting 30 s (33 connections/s), 1 s (1 000/s) or one query each, TLS
resumption off, energy for a day at 10 000 qps two ways:

- the study's method (``kwh_study_method``): energy per query at saturation x 10 000 x 86 400,
  the ``energy`` table's ``kwh_per_day_at_10k_qps``;
- the cost model's prediction (``kwh_model``): the target CPU time the model
  (:func:`dnscost.analysis.costmodel.predict_cpu_us`) predicts for one second at exactly
  10 000 qps with the profile's connection rate, turned into energy with the joules per CPU-µs
  the cell's own trials measured (their ``energy_marginal_j`` ÷ ``target_cpu_us``, the energy
  table's source: RAPL above idle, or the CPU power model), x 86 400. The two differ when
  handshakes come at a fixed rate (30 s and 1 s lifetimes): at saturation they are spread over
  more queries than at 10 000 qps. A term the model does not identify leaves the prediction
  "not identified" (``model_status``), never 0.

Beside each cell the study's kWh (``iscc2023.toml`` ``[table1_kwh.*]``), both ratios to UDP
(ours by the study's method and the study's) and a verdict. One denominator, the headline's:
``ratio_to_udp`` is the median over the cell's trials of each trial's energy per query ÷ that
of its own round's UDP reference (:func:`dnscost.analysis.rounds.udp_references`), so every
ratio divides two values measured minutes apart. ``ratio_to_udp_cell`` and
``verdict_udp_cell`` give the same against the Table I UDP cell instead (the median of the
establishment group's UDP trials over rounds), the other denominator a reader could choose:
:func:`verdict_counts` says how many verdicts flip between them. The verdict is ``agree`` when ours is within a
factor :data:`AGREE_FACTOR` of theirs, else ``differ``; None when either is missing, and for UDP
(the reference). ``reps`` and ``valid_reps`` say why a measured cell can be empty: none of its
trials was valid. A cell whose trials were all generator-bound and nothing else (one generator
core cannot open TCP connections one query each as fast as dnsdist accepts them) is measured
below saturation (``below_saturation``, :func:`dnscost.analysis.tables.per_unit_trials`): its
CPU and energy per query are an upper bound of those at saturation."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dnscost.analysis.costmodel import STATUS_IDENTIFIED, STATUS_NOT_IDENTIFIED, predict_cpu_us
from dnscost.analysis.rounds import round_of, udp_references
from dnscost.analysis.stats import median
from dnscost.analysis.tables import (
    JOULES_PER_KWH,
    REFERENCE_QPS,
    SECONDS_PER_DAY,
    TRANSPORT_ORDER,
    energy_per_query,
    group_by,
    per_unit_trials,
)
from dnscost.contract import Row
from dnscost.study import published
from dnscost.transports import DEFAULT_KEY_TYPE

__all__ = [
    "AGREE_FACTOR",
    "CELLS",
    "CONNECTIONS",
    "NOT_MEASURED",
    "PROFILES",
    "VerdictCounts",
    "key_match",
    "table1_rows",
    "verdict_counts",
]

CONNECTIONS = 1000
"""The study's connections in every Table I profile."""

PROFILES: dict[str, tuple[str, float]] = {
    "30s": ("cx33_per_s", CONNECTIONS / 30.0),
    "1s": ("cx1000_per_s", CONNECTIONS / 1.0),
    "1q": ("one_query", float(REFERENCE_QPS)),
}
"""Table I's profiles: our lifetime token → the study's key in ``[table1_kwh.*]`` and the
connection rate at 10 000 qps (connections/s): 1 000 connections renewed every lifetime, or one
per query."""

AGREE_FACTOR = 1.5
"""A ratio to UDP agrees with the study's when it is within this factor of it either way."""


def _study_kwh(target: str, transport: str, lifetime: str | None) -> float | None:

    value = published()["table1_kwh"].get(target.replace("-", "_"), {}).get(transport)
    if transport == "udp":
        return float(value) if isinstance(value, int | float) else None
    if not isinstance(value, dict) or lifetime not in PROFILES:
        return None
    return value.get(PROFILES[lifetime][0])


CELLS: tuple[tuple[str, str | None], ...] = (
    ("udp", None),
    *((t, lt) for t in ("tcp", "dot", "doh") for lt in PROFILES),
)
"""Every cell of the study's Table I, as (transport, lifetime)."""

NOT_FITTED = "not fitted"
"""``model_status`` of a cell with a key type other than the default: the cost model is fitted on
the default key's trials only."""

NOT_MEASURED = "not measured"
"""``model_status`` of a Table I cell the run has no trial for (study-quick has no 30 s lifetime)."""


def _unmeasured(target: str, transport: str, lifetime: str | None) -> Row:
    return {
        "target": target,
        "transport": transport,
        "lifetime": lifetime,
        "cert_key": None,
        "connections_per_s_at_10k_qps": 0.0 if transport == "udp" else PROFILES[str(lifetime)][1],
        "reps": 0,
        "valid_reps": 0,
        "cpu_us_per_query": None,
        "kwh_study_method": None,
        "model_cpu_us_per_s": None,
        "kwh_model": None,
        "model_status": NOT_MEASURED,
        "energy_source": None,
        "study_kwh": _study_kwh(target, transport, lifetime),
        "below_saturation": False,
    }


def _cell(r: Row) -> bool:
    """A Table I cell: UDP, or a connected transport with a Table I lifetime, resumption off."""
    if r["transport"] == "udp":
        return True
    return r["lifetime"] in PROFILES and not r["resumption"]


def _counts_per_second(transport: str, lifetime: str | None, group: list[Row]) -> dict[str, float] | None:
    """The model's counts for one second at 10 000 qps in this profile (``trials``-table
    columns); None for one query per connection when the cell's trials do not say how long a
    connection stays open."""
    counts = {"queries_answered": float(REFERENCE_QPS)}
    if transport == "udp":
        return counts
    rate = PROFILES[str(lifetime)][1]
    counts["handshakes_full"] = rate  # resumption off; for tcp the term counts connections
    if lifetime == "1q":
        durations = [
            r["connection_seconds"] / r["connections_established"]
            for r in per_unit_trials(group)[0]
            if r["connection_seconds"] is not None and r["connections_established"]
        ]
        mean = median(durations)
        if mean is None:
            return None
        counts["connection_seconds"] = rate * mean
    else:
        counts["connection_seconds"] = float(CONNECTIONS)
    return counts


def _j_per_cpu_us(group: list[Row]) -> float | None:
    return median(
        [
            r["energy_marginal_j"] / r["target_cpu_us"]
            for r in per_unit_trials(group)[0]
            if r["energy_marginal_j"] is not None and r["target_cpu_us"]
        ]
    )


def _kwh_per_day(j_per_s: float) -> float:
    return j_per_s * SECONDS_PER_DAY / JOULES_PER_KWH


DAY = "day"
"""The group (and analysis) of a spec that measures each Table I cell open loop at
:data:`REFERENCE_QPS` (experiments/table1-day.toml): the day measured, not multiplied out."""


DAY_SHARE = 0.97
"""The share of :data:`REFERENCE_QPS` a ``day`` trial must answer to stand for the day: one that
answered less (its slots waiting on connections the target accepts too slowly, so the schedule
was not kept, valid or not) measured a lighter day."""


def _day(trials: list[Row]) -> Row:
    """A cell measured at 10 000 qps: its trials, those that stand for the day (valid, and
    answering at least :data:`DAY_SHARE` of it), and over them the median target CPU-µs a second
    and the kWh of a day (their energy above idle a second x 86 400); over all of its trials, the
    median rate answered. A cell one core cannot carry at that rate has no trial that stands and
    no kWh: its answered rate says how far it got."""
    valid = [
        r
        for r in trials
        if r["valid"] and r["measured_s"] and float(r.get("answered_qps") or 0.0) >= DAY_SHARE * REFERENCE_QPS
    ]
    answered = [float(r["answered_qps"]) for r in trials if r.get("answered_qps") is not None]
    kwh = [_kwh_per_day(r["energy_marginal_j"] / r["measured_s"]) for r in valid if r["energy_marginal_j"] is not None]
    return {
        "day_reps": len(trials),
        "day_valid_reps": len(valid),
        "day_answered_qps": median(answered) if answered else None,
        "day_cpu_us_per_s": median([r["target_cpu_us"] / r["measured_s"] for r in valid if r["target_cpu_us"]])
        if valid
        else None,
        "kwh_measured": median(kwh),
        "kwh_measured_min": min(kwh, default=None),
        "kwh_measured_max": max(kwh, default=None),
    }


def _ratio(value: float | None, udp: float | None) -> float | None:
    return value / udp if value is not None and udp else None


def _in_round(group: list[Row], refs: dict[tuple[Any, Any], Row]) -> float | None:
    """The median over the cell's counted trials (:func:`per_unit_trials`) of energy per query
    ÷ that of the trial's own round's UDP reference (both present, the reference valid)."""
    ratios = []
    for r in per_unit_trials(group)[0]:
        ref = refs.get((r["target"], round_of(r)))
        if ref is None or not ref.get("valid"):
            continue
        ours, udp = energy_per_query(r), energy_per_query(ref)
        if ours is not None and udp:
            ratios.append(ours / udp)
    return median(ratios)


def _verdict(ours: float | None, theirs: float | None) -> str | None:
    if ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return None
    return "agree" if abs(math.log(ours / theirs)) <= math.log(AGREE_FACTOR) else "differ"


def table1_rows(rows: list[Row], energy: list[Row], cost_terms: list[Row]) -> list[Row]:
    """One row per target x transport x profile x certificate key of Table I, from the
    establishment trials (``rows``, the trials table), the ``energy`` table (the study's method)
    and the ``cost_model`` table (fitted on the default key's trials, so the prediction is
    given for those rows only). The targets' UDP row comes first, then TCP, DoT, DoH, each from
    30 s to one query."""
    coefficients: dict[tuple[Any, Any], dict[str, float | None]] = {}
    for t in cost_terms:
        identified = t["status"] == STATUS_IDENTIFIED
        coefficients.setdefault((t["target"], t["transport"]), {})[t["term"]] = t["us"] if identified else None
    load = [r for r in rows if r["analysis"] == "establishment" and r["kind"] == "load" and _cell(r)]
    groups = group_by(load, lambda r: (r["target"], r["transport"], r["lifetime"], r["cert_key"]))
    by_energy = {
        (e["target"], e["transport"], e["lifetime"], e["cert_key"]): e
        for e in energy
        if e["transport"] == "udp" or not e["resumption"]
    }

    refs = udp_references(rows)
    days = group_by(
        [r for r in rows if r["analysis"] == DAY and r["kind"] == "load" and _cell(r)],
        lambda r: (r["target"], r["transport"], r["lifetime"], r["cert_key"]),
    )
    out: list[Row] = []
    for (target, transport, lifetime, cert_key), group in groups.items():
        e = by_energy.get((target, transport, lifetime, cert_key), {})
        kwh = e.get("kwh_per_day_at_10k_qps")
        model_kwh, status = None, STATUS_NOT_IDENTIFIED
        if cert_key in (None, DEFAULT_KEY_TYPE):
            counts = _counts_per_second(str(transport), lifetime, group)
            cpu = predict_cpu_us(coefficients.get((target, transport), {}), counts) if counts else None
            j = _j_per_cpu_us(group)
            if cpu is not None and j is not None:
                model_kwh, status = _kwh_per_day(cpu * j), STATUS_IDENTIFIED
        else:
            cpu, status = None, NOT_FITTED  # the model is fitted on the default key's trials
        out.append(
            {
                "target": target,
                "transport": transport,
                "lifetime": None if transport == "udp" else lifetime,
                "cert_key": cert_key,
                "connections_per_s_at_10k_qps": 0.0 if transport == "udp" else PROFILES[str(lifetime)][1],
                "reps": len(group),
                "valid_reps": sum(1 for r in group if r["valid"]),
                "cpu_us_per_query": e.get("cpu_us_per_query"),
                "kwh_study_method": kwh,
                "model_cpu_us_per_s": cpu,
                "kwh_model": model_kwh,
                "model_status": status,
                "energy_source": e.get("energy_source"),
                "study_kwh": _study_kwh(str(target), str(transport), lifetime),
                "below_saturation": bool(e.get("below_saturation")),
                "ratio_to_udp": _in_round(group, refs),
                **_day(days.get((target, transport, lifetime, cert_key), [])),
            }
        )
    for target in dict.fromkeys(r["target"] for r in out):
        have = {(r["transport"], r["lifetime"]) for r in out if r["target"] == target}
        for transport, lifetime in CELLS:
            if (transport, lifetime) not in have:
                out.append(_unmeasured(str(target), transport, lifetime))
    udp = {(r["target"], r["cert_key"]): r for r in out if r["transport"] == "udp"}
    udp_any = {r["target"]: r for r in out if r["transport"] == "udp"}
    for r in out:
        u = udp.get((r["target"], r["cert_key"])) or udp_any.get(r["target"], {})
        r.setdefault("ratio_to_udp", None)
        r["ratio_to_udp_cell"] = _ratio(r["kwh_study_method"], u.get("kwh_study_method"))
        r["model_ratio_to_udp"] = _ratio(r["kwh_model"], u.get("kwh_model"))
        r["measured_ratio_to_udp"] = _ratio(r.get("kwh_measured"), u.get("kwh_measured"))
        r["study_ratio_to_udp"] = _ratio(r["study_kwh"], u.get("study_kwh"))
        connected = r["transport"] != "udp"
        r["verdict"] = _verdict(r["ratio_to_udp"], r["study_ratio_to_udp"]) if connected else None
        r["verdict_udp_cell"] = _verdict(r["ratio_to_udp_cell"], r["study_ratio_to_udp"]) if connected else None
    order = {lt: i for i, lt in enumerate(PROFILES)}
    return sorted(
        out,
        key=lambda r: (
            str(r["target"]),
            TRANSPORT_ORDER.get(str(r["transport"]), 9),
            order.get(r["lifetime"], -1),
            str(r["cert_key"] or ""),
        ),
    )


def key_match(table1: list[Row]) -> list[Row]:
    """Which certificate key type's ratios match the study's, per target: over the TLS cells
    (dot, doh) of each key type with both ratios to UDP, how many agree (``verdict``) and the
    geometric mean of ours ÷ the study's (1 = the same; below 1 ours is cheaper against UDP).
    A key type with no such cell is left out."""
    out = []
    tls = [
        r
        for r in table1
        if r["transport"] in ("dot", "doh") and r["ratio_to_udp"] and r["study_ratio_to_udp"] and r["ratio_to_udp"] > 0
    ]
    for (target, cert_key), g in group_by(tls, lambda r: (r["target"], r["cert_key"])).items():
        logs = [math.log(r["ratio_to_udp"] / r["study_ratio_to_udp"]) for r in g]
        out.append(
            {
                "target": target,
                "cert_key": cert_key,
                "cells": len(g),
                "agree": sum(1 for r in g if r["verdict"] == "agree"),
                "ours_over_study": math.exp(sum(logs) / len(logs)),
            }
        )
    return out


@dataclass(frozen=True)
class VerdictCounts:
    """Table I's verdicts counted (cells with one, UDP aside), under the in-round denominator
    (``verdict``) and under the UDP cell (``verdict_udp_cell``), and the cells whose verdict
    differs between the two."""

    cells: int
    agree: int
    differ: int
    agree_udp_cell: int
    differ_udp_cell: int
    flips: tuple[str, ...]
    """Each flipped cell as ``target transport lifetime key: in-round → UDP cell``."""

    def sentence(self) -> str:
        """The counts as a report says them."""
        flipped = "; ".join(self.flips) if self.flips else "none"
        return (
            f"{self.agree} of {self.cells} cells agree within a factor {AGREE_FACTOR:g} and {self.differ} differ, "
            f"each ratio against its own round's UDP reference; against the Table I UDP cell instead, "
            f"{self.agree_udp_cell} agree and {self.differ_udp_cell} differ: {len(self.flips)} verdicts flip "
            f"({flipped})"
        )


def verdict_counts(table1: list[Row], *, target: str | None = None, cert_key: str | None = "any") -> VerdictCounts:
    """Counts the verdicts of ``table1`` rows (one ``target``, or all; one ``cert_key``, or any)
    under both denominators (see the module's docstring)."""
    rows = [
        r
        for r in table1
        if r["transport"] != "udp"
        and r.get("verdict") is not None
        and (target is None or r["target"] == target)
        and (cert_key == "any" or r.get("cert_key") == cert_key)
    ]
    flips = tuple(
        f"{r['target']} {r['transport']} {r['lifetime']} {r.get('cert_key') or 'default'}: "
        f"{r['verdict']} → {r['verdict_udp_cell']}"
        for r in rows
        if r["verdict"] != r.get("verdict_udp_cell")
    )
    return VerdictCounts(
        cells=len(rows),
        agree=sum(1 for r in rows if r["verdict"] == "agree"),
        differ=sum(1 for r in rows if r["verdict"] == "differ"),
        agree_udp_cell=sum(1 for r in rows if r.get("verdict_udp_cell") == "agree"),
        differ_udp_cell=sum(1 for r in rows if r.get("verdict_udp_cell") == "differ"),
        flips=flips,
    )
