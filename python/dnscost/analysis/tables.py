"""The derived tables of docs/results.md, from the loaded run. Each builder is a pure function of
the trials table (and, for the baseline, the search trials' documents). Rows come in the order in
which their keys first appear in the plan."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from dnscost.analysis.consistency import CONSISTENCY_COLUMNS, lifetime_order
from dnscost.analysis.curves import CURVE_COLUMNS, MECHANISM_COLUMNS
from dnscost.analysis.load import is_valid, run_network, validity_flags
from dnscost.analysis.rounds import ROUND_COLUMNS, round_of, udp_references
from dnscost.analysis.series import SERIES_COLUMNS
from dnscost.analysis.stats import fit_line, median
from dnscost.contract import Row, RunRecord, TrialRecord
from dnscost.shares import CURVE
from dnscost.study import wire_one_query
from dnscost.transports import DATAGRAM_TRANSPORTS, DEFAULT_KEY_TYPE, TRANSPORTS
from dnscost.validity import CONSISTENCY_FLAGS

__all__ = [
    "COLUMNS",
    "TEXT_COLUMNS",
    "baseline_rows",
    "capacity_rows",
    "connections_rows",
    "energy_rows",
    "establishment_rows",
    "group_by",
    "latency_rows",
    "memory_fit_rows",
    "memory_point_rows",
    "memory_scale_rows",
    "per_unit_trials",
    "trial_row",
    "wire_rows",
]

SECONDS_PER_DAY = 86_400
JOULES_PER_KWH = 3.6e6
REFERENCE_QPS = 10_000
"""Table I's load: a day at this rate."""

COLUMNS: dict[str, list[str]] = {
    name: columns.split()
    for name, columns in {
        "trials": """
            id group analysis kind target target_version transport connections lifetime resumption early_data rate
            in_flight cert_key tls_group profile clients rep round network status valid flags measured_s offered_qps
            answered_qps queries_answered connections_established kernel_passive_opens
            handshakes_full handshakes_resumed handshakes_zero_rtt_accepted handshakes_zero_rtt_rejected
            connection_seconds target_cpu_us cpu_us_per_query
            cpu_us_per_new_connection target_cpu_share softirq_us engine_cpu_us rss_bytes rss_baseline_bytes
            kernel_bytes kernel_baseline_bytes energy_j energy_marginal_j energy_source latency_p50_us
            latency_p90_us latency_p99_us latency_p999_us setup_p50_us setup_p99_us reference capacity_lower_bound
            wakeups_per_query runs_per_query softirq_us_per_query
        """,
        "baseline": "target udp_max_qps offered_qps loss cpu_us_per_query valid udp_saturation_qps udp_reference_qps",
        "memory_points": """
            target transport connections connections_held rss_delta_bytes kernel_delta_bytes tcp_delta_bytes valid
        """,
        "memory_scale": """
            target transport points max_connections bytes_per_connection r2 residuals max_residual_share
            holdout_connections holdout_predicted_bytes holdout_low_bytes holdout_high_bytes holdout_measured_bytes
            holdout_error holdout_within million_bytes million_low_bytes million_high_bytes
        """,
        "memory_fit": """
            target transport user_bytes_per_connection user_ci95_low user_ci95_high kernel_bytes_per_connection
            kernel_ci95_low kernel_ci95_high user_r2 kernel_r2 points max_connections dropped
        """,
        "connections": """
            target transport connections qps_min qps_median qps_max reps valid_reps udp_reference_qps share_of_udp
        """,
        "establishment": """
            target transport lifetime resumption early_data cert_key qps_min qps_median qps_max reps valid_reps
            udp_reference_qps share_of_udp cpu_us_per_query handshakes_per_s zero_rtt_share
        """,
        "energy": """
            target transport lifetime resumption early_data cert_key cpu_us_per_query energy_j_per_query
            kwh_per_day_at_10k_qps
            cores_at_10k_qps energy_source below_saturation
        """,
        "table1": """
            target transport lifetime cert_key connections_per_s_at_10k_qps reps valid_reps cpu_us_per_query
            kwh_study_method
            model_cpu_us_per_s kwh_model model_status energy_source study_kwh ratio_to_udp model_ratio_to_udp
            study_ratio_to_udp verdict below_saturation ratio_to_udp_cell verdict_udp_cell day_reps day_valid_reps
            day_answered_qps day_cpu_us_per_s kwh_measured kwh_measured_min kwh_measured_max measured_ratio_to_udp
        """,
        "latency": """
            target transport group analysis lifetime resumption early_data connections reps p50_us p90_us p99_us p999_us
            share share_reps share_offered_qps share_p50_us share_p90_us share_p99_us share_p999_us
        """,
        "cost_model": "target transport term us ci95_low ci95_high status reason",
        "wire": """
            target transport lifetime resumption early_data cert_key connections trials valid queries_answered
            connections_established queries_per_connection packets_sent_per_query packets_received_per_query
            packets_per_query bytes_sent_per_query bytes_received_per_query bytes_per_query
            frame_bytes_per_query_est study_messages study_bytes
        """,
        "cost_model_fit": """
            target transport trials terms terms_identified r2 holdout_trials holdout_median_abs_error_pct
            holdout_max_abs_error_pct resamples
        """,
        "clients": """
            target transport profile clients connections rate_qps clients_at_10k_qps reps valid_reps answered_qps
            handshakes_per_1k_queries cpu_us_per_query cpu_us_per_query_min cpu_us_per_query_max cpu_ratio_to_udp
            cpu_ratio_to_udp_min cpu_ratio_to_udp_max energy_j_per_query kwh_per_day_at_10k_qps energy_source
        """,
        "population": """
            target target_version id rate_qps offered_qps answered_qps queries_answered classes left_out valid
            measured_cpu_us
            predicted_cpu_us
            predicted_low_us predicted_high_us error_pct error_low_pct error_high_pct verdict status reason transports
            names cache_hit_ratio replayed_repeat_share upstream_queries target_answered capture_repeat_share
            load_predicted_cpu_us load_predicted_low_us load_predicted_high_us load_error_pct load_reason
        """,
        "load_model": "target transport term us ci95_low ci95_high status reason",
        "load_model_fit": """
            target transport trials terms terms_identified busy_share_min busy_share_max holdout_trials
            holdout_median_abs_error_pct holdout_max_abs_error_pct constant_holdout_median_abs_error_pct
            constant_holdout_max_abs_error_pct
        """,
        "load_model_gaps": """
            target transport gap_us long_wake holdout_trials holdout_median_abs_error_pct holdout_max_abs_error_pct
        """,
        "rounds": " ".join(ROUND_COLUMNS),
        "cost_curve": " ".join(CURVE_COLUMNS),
        "curve_mechanism": " ".join(MECHANISM_COLUMNS),
        "headline": "target figure transport profile value low high n interval unit",
        "consistency": " ".join(CONSISTENCY_COLUMNS),
        "series": " ".join(SERIES_COLUMNS),
        "capacity": """
            target transport profile lifetime resumption connections in_flight max_loss max_p99_ms target_cores reps
            valid_reps qps_min qps_median qps_max qps_per_core clients_min clients_median clients_max clients_per_core
            p99_us cpu_us_per_query failed lower_bound
        """,
    }.items()
}
"""Every derived table's columns, in order (docs/results.md, "Derived tables")."""

TEXT_COLUMNS = frozenset(
    [
        "id",
        "trial",
        "failed",
        "phase",
        "group",
        "analysis",
        "kind",
        "target",
        "target_version",
        "transport",
        "lifetime",
        "rate",
        "status",
        "flags",
        "energy_source",
        "term",
        "reason",
        "cert_key",
        "tls_group",
        "network",
        "reference_id",
        "figure",
        "profile",
        "interval",
        "unit",
        "flag",
        "cell",
        "against",
        "what",
        "cell_trials",
        "against_trials",
        "model_status",
        "verdict",
        "verdict_udp_cell",
        "dropped",
        "residuals",
    ]
)
"""Columns holding text; every other column is numeric or boolean (``valid``)."""


def reference_key(rows: Iterable[Row]) -> list[Row]:
    """The rows measured with the default certificate key type (ECDSA P-256; runs made before
    the key type was an axis have none): figures, headline and the cost model use these, the
    tables keep every key type."""

    return [r for r in rows if r.get("cert_key") in (None, DEFAULT_KEY_TYPE)]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _dict(value: Any) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _rate(value: Any) -> str | None:
    """``"max"`` or the rate in qps as text: one type for the column whatever the spec said."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:g}"
    return str(value)


def _target_cpus(trial: TrialRecord, run: RunRecord) -> list[str] | None:
    """The target's CPUs, as keys of the meter's ``cores``: trial.json's ``target_cpus``, else
    the older ``settings.target_cpus``, else the spec's ``target_cpus``."""
    for source in (trial, _dict(trial.get("settings")), _dict(run.get("spec"))):
        cpus = source.get("target_cpus")
        if isinstance(cpus, list):
            return [str(c) for c in cpus]
    return None


def _softirq_us(meter: dict[str, object], cpus: list[str] | None) -> float | None:
    cores = _dict(meter.get("cores"))
    if cpus is None or not cores:
        return None
    values = [_num(_dict(cores.get(c)).get("softirq_us")) for c in cpus]
    return sum(v for v in values if v is not None) if any(v is not None for v in values) else None


def _network(trial: TrialRecord, run: RunRecord) -> str:
    """Where the target sat: the trial's bed (``network.kind``), else the run's choice
    (:func:`dnscost.analysis.load.run_network`)."""
    kind = _dict(trial.get("network")).get("kind")
    return kind if isinstance(kind, str) else run_network(run)


def _delta(now: float | None, idle: float | None) -> float | None:
    return now - idle if now is not None and idle is not None else None


def trial_row(trial: TrialRecord, run: RunRecord) -> Row:
    """One row of the ``trials`` table. Missing fields (a failed trial, an older summary) are
    None; counts the summary lacks are derived from its rates where that is exact."""
    params = _dict(trial.get("params"))
    s = _dict(trial.get("summary"))
    meter, base = _dict(s.get("meter")), _dict(s.get("baseline_meter"))
    validity = _dict(s.get("validity"))
    latency, setup = _dict(s.get("latency_us")), _dict(s.get("setup_latency_us"))
    measured_s = _num(s.get("measured_s"))
    answered_qps = _num(s.get("answered_qps"))
    queries = _num(s.get("queries_answered"))
    if queries is None and answered_qps is not None and measured_s is not None:
        queries = answered_qps * measured_s
    connection_seconds = _num(s.get("connection_seconds"))
    active = _num(s.get("mean_active_connections"))
    if connection_seconds is None and active is not None and measured_s is not None:
        connection_seconds = active * measured_s
    cpu_us = _num(s.get("target_cpu_us"))
    if cpu_us is None:
        cpu_us = _num(meter.get("cpu_us"))
    target = trial.get("target")
    rss, kernel = _num(meter.get("rss_bytes_mean")), _num(meter.get("cgroup_kernel_bytes_mean"))
    return {
        "id": trial.get("id"),
        "group": trial.get("group"),
        # Runs made before groups named their analysis: the group's name.
        "analysis": trial.get("analysis") or trial.get("group"),
        "kind": trial.get("kind"),
        "target": target,
        "target_version": trial.get("target_version") or _dict(run.get("versions")).get(str(target)),
        "transport": trial.get("transport"),
        "connections": params.get("connections"),
        "lifetime": params.get("lifetime"),
        "resumption": _num(params.get("resumption")),
        "early_data": _num(params.get("early_data")) or 0.0,
        "rate": _rate(params.get("rate")),
        "reference": trial.get("reference"),
        "capacity_lower_bound": _dict(trial.get("derived_rate")).get("capacity_lower_bound"),
        "in_flight": params.get("in_flight"),
        "cert_key": params.get("cert_key"),
        "tls_group": params.get("tls_group"),
        "profile": _dict(params.get("profile")).get("name"),
        "clients": params.get("clients"),
        "rep": trial.get("rep"),
        "round": trial.get("round") if trial.get("round") is not None else trial.get("rep"),
        "network": _network(trial, run),
        "status": trial.get("status"),
        "valid": is_valid(trial),
        "flags": ";".join(validity_flags(validity)) if s else "",
        "measured_s": measured_s,
        "offered_qps": _num(s.get("offered_qps")),
        "answered_qps": answered_qps,
        "queries_answered": queries,
        "connections_established": _num(s.get("connections_established")),
        "kernel_passive_opens": _num(_dict(meter.get("counters")).get("tcp_passive_opens")),
        "handshakes_full": _num(s.get("handshakes_full")),
        "handshakes_resumed": _num(s.get("handshakes_resumed")),
        "handshakes_zero_rtt_accepted": _num(s.get("handshakes_zero_rtt_accepted")),
        "handshakes_zero_rtt_rejected": _num(s.get("handshakes_zero_rtt_rejected")),
        "connection_seconds": connection_seconds,
        "target_cpu_us": cpu_us,
        "cpu_us_per_query": _num(s.get("target_cpu_us_per_query")),
        "cpu_us_per_new_connection": _num(s.get("target_cpu_us_per_new_connection")),
        "target_cpu_share": _num(s.get("target_cpu_share")),
        "softirq_us": _softirq_us(meter, _target_cpus(trial, run)),
        "engine_cpu_us": _num(s.get("engine_cpu_us")),
        "rss_bytes": rss,
        "rss_baseline_bytes": _num(base.get("rss_bytes_mean")),
        "kernel_bytes": kernel,
        "kernel_baseline_bytes": _num(base.get("cgroup_kernel_bytes_mean")),
        "energy_j": _num(s.get("energy_j")),
        "energy_marginal_j": _num(s.get("energy_marginal_j")),
        "energy_source": s.get("energy_source"),
        "latency_p50_us": _num(latency.get("p50_us")),
        "latency_p90_us": _num(latency.get("p90_us")),
        "latency_p99_us": _num(latency.get("p99_us")),
        "latency_p999_us": _num(latency.get("p999_us")),
        "setup_p50_us": _num(setup.get("p50_us")),
        "setup_p99_us": _num(setup.get("p99_us")),
        "wakeups_per_query": _num(s.get("wakeups_per_query")),
        "runs_per_query": _num(s.get("runs_per_query")),
        "softirq_us_per_query": _num(s.get("softirq_us_per_query")),
    }


T = TypeVar("T")


def group_by(rows: Iterable[T], key: Callable[[T], Hashable]) -> dict[Any, list[T]]:
    """Rows grouped by ``key``, groups in order of first appearance."""
    out: dict[Any, list[T]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def _values(rows: Iterable[Row], column: str) -> list[float]:
    """The column's values over the valid rows, None left out."""
    return [r[column] for r in rows if r["valid"] and r[column] is not None]


SEARCH_BOUNDS = {"generator-bound-search", "search-unbounded"}
"""A search's own flags: the rate it found is a lower bound of the target's."""


def capacity_rows(trials: list[TrialRecord], rows: list[Row]) -> list[Row]:
    """One row per cell of the capacity searches (``kind`` capacity): target, transport or
    profile and their knobs, the objective; over the valid repetitions, the highest rate that
    met it (min, median, max), the clients a profile's rate stands for, both per core of the
    target, the p99 latency and CPU per query at that rate (medians); and what the steps above
    it broke, over every repetition (``loss``, ``p99``, ``in-flight``, ``generator``,
    ``capped``: ``runner.capacity``), joined by ``/``. A cell with no valid round takes the
    rounds flagged only ``generator-bound-search`` or ``search-unbounded``, as lower bounds
    (``lower_bound``)."""
    searches = [(t, r) for t, r in zip(trials, rows, strict=True) if r["kind"] == "capacity"]
    keys = ("target", "transport", "profile", "lifetime", "resumption", "connections", "in_flight")

    def cell(pair: tuple[TrialRecord, Row]) -> tuple[object, ...]:
        t, r = pair
        params = _dict(t.get("params"))
        # A profile's connections follow its clients: its cell is the profile's.
        knobs = (None if k == "connections" and r.get("profile") else r.get(k) for k in keys)
        return (*knobs, params.get("max_loss"), params.get("max_p99_ms"))

    out = []
    for key, pairs in group_by(searches, cell).items():
        valid = [(t, r) for t, r in pairs if r["valid"]]
        # Without a valid round, the rounds whose only flags say the search did not reach the
        # target's limit (the generator's came first, or the steps ran out): lower bounds.
        bounded = [
            (t, r)
            for t, r in pairs
            if not r["valid"] and r["flags"] and set(str(r["flags"]).split(";")) <= SEARCH_BOUNDS
        ]
        use = valid or bounded
        found = [_dict(t.get("search")) for t, _ in use]
        qps = [q for f in found if (q := _num(f.get("max_qps"))) is not None]
        clients = [c for f in found if (c := _num(f.get("clients"))) is not None]
        cpus = pairs[0][0].get("target_cpus")
        cores = len(cpus) if isinstance(cpus, list) and cpus else None
        failed = [str(f) for t, _ in pairs if (f := _dict(t.get("search")).get("failed"))]

        def spread(values: list[float]) -> tuple[float | None, float | None, float | None]:
            return (min(values), median(values), max(values)) if values else (None, None, None)

        q_lo, q_mid, q_hi = spread(qps)
        c_lo, c_mid, c_hi = spread(clients)
        out.append(
            {
                **dict(zip(keys, key, strict=False)),
                "max_loss": key[-2],
                "max_p99_ms": key[-1],
                "target_cores": cores,
                "reps": len(pairs),
                "valid_reps": len(valid),
                "qps_min": q_lo,
                "qps_median": q_mid,
                "qps_max": q_hi,
                "qps_per_core": q_mid / cores if q_mid is not None and cores else None,
                "clients_min": c_lo,
                "clients_median": c_mid,
                "clients_max": c_hi,
                "clients_per_core": c_mid / cores if c_mid is not None and cores else None,
                "p99_us": median([v for _, r in use if (v := r["latency_p99_us"]) is not None]),
                "cpu_us_per_query": median([v for _, r in use if (v := r["cpu_us_per_query"]) is not None]),
                "failed": "/".join(dict.fromkeys(failed)) or None,
                "lower_bound": not valid and bool(bounded),
            }
        )
    return out


def baseline_rows(trials: list[TrialRecord], rows: list[Row]) -> list[Row]:
    """One row per target: from its UDP capacity searches (``kind`` search), medians over the
    valid repetitions of the highest answered rate with loss below ``search.max_loss``; and UDP
    at saturation (closed loop: each round's UDP reference, median over the valid ones),
    measured like the other transports' throughput. That is the reference for shares of UDP
    (``udp_reference_qps``); without a valid one there is none: the open-loop figure is a lower
    bound measured another way, never a substitute."""
    searches = [(t, r) for t, r in zip(trials, rows, strict=True) if r["kind"] == "search"]
    by_target = group_by(searches, lambda p: p[1]["target"])
    saturation = group_by(udp_references(rows).values(), lambda r: r["target"])
    out = []
    for target in dict.fromkeys([*by_target, *saturation]):
        pairs = by_target.get(target, [])
        valid = [(t, r) for t, r in pairs if r["valid"]]
        found = [_dict(t.get("search")) for t, _ in valid]
        udp_max = median([q for f in found if (q := _num(f.get("max_qps"))) is not None])
        udp_saturation = median(_values(saturation.get(target, []), "answered_qps"))
        out.append(
            {
                "target": target,
                "udp_max_qps": udp_max,
                "offered_qps": median([q for f in found if (q := _num(f.get("offered_qps"))) is not None]),
                "loss": median(
                    [
                        v
                        for t, _ in valid
                        if (v := _num(_dict(_dict(t.get("summary")).get("validity")).get("loss"))) is not None
                    ]
                ),
                "cpu_us_per_query": median(_values([r for _, r in pairs], "cpu_us_per_query")),
                "valid": bool(valid),
                "udp_saturation_qps": udp_saturation,
                "udp_reference_qps": udp_saturation,
            }
        )
    return out


def memory_point_rows(trials: list[TrialRecord], rows: list[Row]) -> list[Row]:
    """One row per idle trial: levels in the window minus the idle baseline before the engine."""
    out = []
    for t, r in zip(trials, rows, strict=True):
        if r["kind"] != "idle":
            continue
        s = _dict(t.get("summary"))
        meter, base = _dict(s.get("meter")), _dict(s.get("baseline_meter"))
        out.append(
            {
                "target": r["target"],
                "transport": r["transport"],
                "connections": r["connections"],
                "connections_held": _num(s.get("connections_held")),
                "rss_delta_bytes": _delta(r["rss_bytes"], r["rss_baseline_bytes"]),
                "kernel_delta_bytes": _delta(r["kernel_bytes"], r["kernel_baseline_bytes"]),
                "tcp_delta_bytes": _delta(_num(meter.get("tcp_bytes_mean")), _num(base.get("tcp_bytes_mean"))),
                "valid": r["valid"],
            }
        )
    return out


def _held(point: Row) -> float | None:
    held = point.get("connections_held")
    return float(held) if held is not None else _num(point.get("connections"))


def memory_fit_rows(points: list[Row]) -> list[Row]:
    """Per target x transport: OLS slopes of the user and kernel deltas on the connections the
    target held (counted on its side; the number asked for in runs that did not count them),
    their R², and the connection counts of the invalid points left out (``dropped``)."""
    out = []
    for (target, transport), group in group_by(points, lambda p: (p["target"], p["transport"])).items():
        valid = [p for p in group if p["valid"] and _held(p) is not None]
        fits = {}
        for name, column in (("user", "rss_delta_bytes"), ("kernel", "kernel_delta_bytes")):
            pts = [p for p in valid if p[column] is not None]
            fits[name] = fit_line([_held(p) or 0.0 for p in pts], [p[column] for p in pts])
        user, kernel = fits["user"], fits["kernel"]
        out.append(
            {
                "target": target,
                "transport": transport,
                "user_bytes_per_connection": user.slope if user else None,
                "user_ci95_low": user.ci95_low if user else None,
                "user_ci95_high": user.ci95_high if user else None,
                "kernel_bytes_per_connection": kernel.slope if kernel else None,
                "kernel_ci95_low": kernel.ci95_low if kernel else None,
                "kernel_ci95_high": kernel.ci95_high if kernel else None,
                "user_r2": user.r2 if user else None,
                "kernel_r2": kernel.r2 if kernel else None,
                "points": len(valid),
                "max_connections": max((_held(p) or 0.0 for p in valid), default=None),
                "dropped": "/".join(str(p["connections"]) for p in group if not p["valid"]) or None,
            }
        )
    return out


MILLION = 1_000_000
"""The connection count ``memory_scale`` extrapolates to."""


def memory_scale_rows(points: list[Row]) -> list[Row]:
    """Per target x transport: how far the memory per idle connection (user + kernel, one line
    through the valid idle points on the connections held) can be trusted past what was
    measured. ``r2`` and ``residuals`` (each point's distance from the line as a share of its
    measured memory, ``CONNECTIONS:+X.X%`` joined by ``/``; the largest in
    ``max_residual_share``) say how straight it is. The holdout fits the points below the
    largest and predicts the largest (``holdout_*``: the prediction with the interval its slope's
    95 % interval gives, what was measured, the error as a share of it, and whether it lies in
    the interval): the check of an extrapolation against a measurement. ``million_*``: the line
    at a million connections, the interval its slope's. Nothing with fewer than three points."""
    out = []
    for (target, transport), group in group_by(points, lambda p: (p["target"], p["transport"])).items():
        pts = sorted(
            (
                (float(_held(p) or 0.0), float(p["rss_delta_bytes"]) + float(p["kernel_delta_bytes"]))
                for p in group
                if p["valid"]
                and _held(p) is not None
                and p.get("rss_delta_bytes") is not None
                and p.get("kernel_delta_bytes") is not None
            ),
        )
        if len(pts) < 3:
            continue
        xs, ys = [x for x, _ in pts], [y for _, y in pts]
        fit = fit_line(xs, ys)
        held_out = fit_line(xs[:-1], ys[:-1])
        if fit is None or held_out is None:
            continue
        shares = [(y - fit.intercept - fit.slope * x) / y if y else None for x, y in pts]
        x_last, y_last = pts[-1]

        def at(f: Any, x: float, slope: float | None) -> float | None:
            return None if slope is None else f.intercept + slope * x

        predicted = at(held_out, x_last, held_out.slope)
        low, high = at(held_out, x_last, held_out.ci95_low), at(held_out, x_last, held_out.ci95_high)
        out.append(
            {
                "target": target,
                "transport": transport,
                "points": len(pts),
                "max_connections": x_last,
                "bytes_per_connection": fit.slope,
                "r2": fit.r2,
                "residuals": "/".join(
                    f"{x:.0f}:{'n/a' if s is None else format(100 * s, '+.1f') + '%'}"
                    for (x, _), s in zip(pts, shares, strict=True)
                ),
                "max_residual_share": max((abs(s) for s in shares if s is not None), default=None),
                "holdout_connections": x_last,
                "holdout_predicted_bytes": predicted,
                "holdout_low_bytes": low,
                "holdout_high_bytes": high,
                "holdout_measured_bytes": y_last,
                "holdout_error": (predicted - y_last) / y_last if predicted is not None and y_last else None,
                "holdout_within": None if low is None or high is None else low <= y_last <= high,
                "million_bytes": at(fit, MILLION, fit.slope),
                "million_low_bytes": at(fit, MILLION, fit.ci95_low),
                "million_high_bytes": at(fit, MILLION, fit.ci95_high),
            }
        )
    return out


def _udp_max(baseline: list[Row]) -> dict[Any, float | None]:
    return {b["target"]: b["udp_reference_qps"] for b in baseline}


def _throughput(group: list[Row], udp_max: float | None, refs: dict[tuple[Any, Any], Row]) -> Row:
    """Answered qps over repetitions, and the share of UDP: the median over rounds of the
    answered qps ÷ the round's UDP reference (both valid)."""
    qps = _values(group, "answered_qps")
    mid = median(qps)
    shares = []
    for r in group:
        ref = refs.get((r["target"], round_of(r)))
        if r["valid"] and ref is not None and ref["valid"] and r["answered_qps"] is not None and ref["answered_qps"]:
            shares.append(r["answered_qps"] / ref["answered_qps"])
    return {
        "qps_min": min(qps, default=None),
        "qps_median": mid,
        "qps_max": max(qps, default=None),
        "reps": len(group),
        "valid_reps": sum(1 for r in group if r["valid"]),
        "udp_reference_qps": udp_max,
        "share_of_udp": median(shares),
    }


def connections_rows(rows: list[Row], baseline: list[Row]) -> list[Row]:
    """Figure 4: answered qps per target x transport x connections (group ``connections``)."""
    udp, refs = _udp_max(baseline), udp_references(rows)
    load = [r for r in rows if r["analysis"] == "connections" and r["kind"] == "load"]
    return [
        {"target": k[0], "transport": k[1], "connections": k[2], **_throughput(g, udp.get(k[0]), refs)}
        for k, g in group_by(load, lambda r: (r["target"], r["transport"], r["connections"])).items()
    ]


CELL = ("target", "transport", "lifetime", "resumption", "early_data", "cert_key")
"""What tells the establishment analysis's cells apart (Figure 5, the energy table)."""


def _establishment_groups(rows: list[Row]) -> dict[Any, list[Row]]:
    load = [r for r in rows if r["analysis"] == "establishment" and r["kind"] == "load"]
    return group_by(load, lambda r: tuple(r[k] for k in CELL))


def _zero_rtt_share(g: list[Row]) -> float | None:
    """Of a cell's resumed handshakes, the share whose 0-RTT data the target took (valid
    trials; None where no handshake resumed or none sent early data)."""
    ok = [r for r in g if r["valid"] and r["handshakes_resumed"]]
    sent = [(r["handshakes_zero_rtt_accepted"] or 0) + (r["handshakes_zero_rtt_rejected"] or 0) for r in ok]
    if not any(sent):
        return None
    return median([(r["handshakes_zero_rtt_accepted"] or 0) / r["handshakes_resumed"] for r in ok])


def _handshakes_per_s(r: Row) -> float | None:
    hs = [v for v in (r["handshakes_full"], r["handshakes_resumed"]) if v is not None]
    return sum(hs) / r["measured_s"] if hs and r["measured_s"] else None


def establishment_rows(rows: list[Row], baseline: list[Row]) -> list[Row]:
    """Figure 5: answered qps per target x transport x lifetime x resumption."""
    udp, refs = _udp_max(baseline), udp_references(rows)
    out = []
    for key, g in _establishment_groups(rows).items():
        rates = [h for r in g if r["valid"] and (h := _handshakes_per_s(r)) is not None]
        out.append(
            {
                **dict(zip(CELL, key, strict=True)),
                **_throughput(g, udp.get(key[0]), refs),
                "cpu_us_per_query": median(_values(g, "cpu_us_per_query")),
                "handshakes_per_s": median(rates),
                "zero_rtt_share": _zero_rtt_share(g),
            }
        )
    return out


def energy_per_query(r: Row) -> float | None:
    """Marginal joules (above idle) per answered query."""
    e, q = r["energy_marginal_j"], r["queries_answered"]
    return e / q if e is not None and q else None


def per_unit_trials(g: list[Row]) -> tuple[list[Row], bool]:
    """The trials of a cell whose cost per unit of work counts, and whether they ran below
    saturation: its valid trials; without any, those whose only flag is ``generator-bound``.
    Such a trial's target CPU (and energy) per query is measured, only not at the target's
    capacity: the target, less busy, batched less, so at saturation a query costs at most that
    much (an upper bound). One generator core cannot open TCP connections as fast as dnsdist
    accepts them, so the one-query TCP cell of Table I is only ever measured this way here."""
    valid = [r for r in g if r["valid"]]
    if valid:
        return valid, False
    bound = [r for r in g if set(str(r["flags"] or "").split(";")) - set(CONSISTENCY_FLAGS) == {"generator-bound"}]
    return bound, bool(bound)


def energy_rows(rows: list[Row]) -> list[Row]:
    """Table I, from the establishment trials: energy and cores for a day at 10 000 qps, over
    the cell's :func:`per_unit_trials` (``below_saturation`` when they were generator-bound)."""
    out = []
    for key, g in _establishment_groups(rows).items():
        counted, below = per_unit_trials(g)
        cpu = median([r["cpu_us_per_query"] for r in counted if r["cpu_us_per_query"] is not None])
        energy = median([e for r in counted if (e := energy_per_query(r)) is not None])
        sources = sorted({str(r["energy_source"]) for r in counted if r["energy_source"] is not None})
        out.append(
            {
                **dict(zip(CELL, key, strict=True)),
                "cpu_us_per_query": cpu,
                "energy_j_per_query": energy,
                "kwh_per_day_at_10k_qps": (
                    energy * REFERENCE_QPS * SECONDS_PER_DAY / JOULES_PER_KWH if energy is not None else None
                ),
                "cores_at_10k_qps": cpu * REFERENCE_QPS / 1e6 if cpu is not None else None,
                "energy_source": "+".join(sources) if sources else None,
                "below_saturation": below,
            }
        )
    return out


def latency_rows(rows: list[Row]) -> list[Row]:
    """Latency percentiles of every load trial (real clients replayed aside), medians over the
    valid repetitions. A trial at a share of capacity (a group with ``capacity_of``, its
    ``reference`` the saturation trial) is not a row of its own: its percentiles stand in the
    ``share_`` columns of its saturation cell's row, so latency at saturation (queueing) and
    below it sit side by side."""
    # Real clients are keyed by profile (their own table), a ladder's steps make the cost curves.
    load = [r for r in rows if r["kind"] == "load" and r.get("analysis") not in ("clients", CURVE)]
    of = {r["id"]: r for r in load}
    keys = ("target", "transport", "group", "analysis", "lifetime", "resumption", "early_data", "connections")
    saturation = [r for r in load if not r.get("reference")]
    shares = group_by(
        [r for r in load if r.get("reference") in of],
        lambda r: tuple(of[r["reference"]][k] if k in ("group", "analysis") else r[k] for k in keys),
    )
    out = []
    for key, g in group_by(saturation, lambda r: tuple(r[k] for k in keys)).items():
        row: Row = dict(zip(keys, key, strict=True))
        row["reps"] = sum(1 for r in g if r["valid"])
        for p in ("p50_us", "p90_us", "p99_us", "p999_us"):
            row[p] = median(_values(g, f"latency_{p}"))
        s = shares.get(key, [])
        row["share"] = (
            "/".join(sorted({("≤" if r.get("capacity_lower_bound") else "") + str(r["rate"]) for r in s})) or None
        )
        row["share_reps"] = sum(1 for r in s if r["valid"]) if s else None
        row["share_offered_qps"] = median(_values(s, "offered_qps"))
        for p in ("p50_us", "p90_us", "p99_us", "p999_us"):
            row[f"share_{p}"] = median(_values(s, f"latency_{p}"))
        out.append(row)
    return sorted(out, key=_latency_order)


TRANSPORT_ORDER = {t: i for i, t in enumerate(TRANSPORTS)}
"""How tables list transports: the study's order, then QUIC's."""


def _latency_order(r: Row) -> tuple[Any, ...]:
    """Target, transport (the study's order), profile (from the longest lifetime), then the
    rest: a reader finds one target's transports and profiles together."""
    kind, size = lifetime_order(r["lifetime"])
    return (
        str(r["target"]),
        TRANSPORT_ORDER.get(str(r["transport"]), 9),
        -kind,
        -size,
        str(r["group"]),
        float(r["resumption"] or 0.0),
        float(r["early_data"] or 0.0),
        int(r["connections"] or 0),
    )


FRAME_HEADER_BYTES = {"udp": 14 + 20 + 8, "tcp": 14 + 20 + 20 + 12}
"""Octets a packet carries besides its payload on Ethernet over IPv4: Ethernet 14, IPv4 20, UDP 8;
TCP 20 with the timestamp option (12), which Linux sends on every segment (a SYN carries 8
more, not counted). For ``frame_bytes_per_query_est``, comparable with a capture's frame lengths.
QUIC rides on UDP: its packets are datagrams, its payload their UDP payload (QUIC's own headers
and encryption included)."""


def _wire_figures(trial: TrialRecord) -> dict[str, float] | None:
    """One trial's per-query wire figures from its summary's ``wire`` (the engine's whole run),
    None without one or without an answer."""
    w = _dict(_dict(trial.get("summary")).get("wire"))
    answered, connections = _num(w.get("queries_answered")), _num(w.get("connections_established"))
    counts = [_num(w.get(k)) for k in ("packets_sent", "packets_received", "bytes_sent", "bytes_received")]
    if not answered or connections is None or any(c is None for c in counts):
        return None
    packets_sent, packets_received, bytes_sent, bytes_received = (c or 0.0 for c in counts)
    tcp = trial.get("transport") not in DATAGRAM_TRANSPORTS
    # TCP_INFO's bytes acknowledged include the SYN's sequence number, one per connection.
    payload_sent = bytes_sent - connections if tcp else bytes_sent
    header = FRAME_HEADER_BYTES["tcp" if tcp else "udp"]
    return {
        "queries_answered": answered,
        "connections_established": connections,
        "packets_sent_per_query": packets_sent / answered,
        "packets_received_per_query": packets_received / answered,
        "packets_per_query": (packets_sent + packets_received) / answered,
        "bytes_sent_per_query": payload_sent / answered,
        "bytes_received_per_query": bytes_received / answered,
        "bytes_per_query": (payload_sent + bytes_received) / answered,
        "frame_bytes_per_query_est": (payload_sent + bytes_received + header * (packets_sent + packets_received))
        / answered,
    }


def wire_rows(trials: list[TrialRecord], rows: list[Row]) -> list[Row]:
    """Packets and payload octets per answered query, each direction, per target x transport x
    lifetime x resumption x certificate key x connections, from the engine's own counts over its
    whole run (summary ``wire``): medians over the valid load trials, or over the invalid ones
    when none is valid (``valid`` false: what went on the wire does not depend on which side was
    the bottleneck). Beside one query per connection (and UDP), the slides' messages and octets
    for one query on a new connection (``study_messages``, ``study_bytes``)."""

    slides = wire_one_query()
    measured = [
        (r, f)
        for t, r in zip(trials, rows, strict=True)
        if r["kind"] == "load"
        and r.get("analysis") != "clients"  # a replay of real clients is a shape, not a cell
        and r["status"] == "done"
        and (f := _wire_figures(t)) is not None
    ]
    keys = ("target", "transport", "lifetime", "resumption", "early_data", "cert_key", "connections")
    out = []
    for key, group in group_by(measured, lambda p: tuple(p[0][k] for k in keys)).items():
        valid = [f for r, f in group if r["valid"]]
        used = valid or [f for _, f in group]
        row: Row = dict(zip(keys, key, strict=True))
        answered = round(sum(f["queries_answered"] for f in used))
        connections = round(sum(f["connections_established"] for f in used))
        figure = slides.get(str(row["transport"]))
        new_connection = row["transport"] == "udp" or (row["lifetime"] == "1q" and not row["resumption"])
        row.update(
            {
                "trials": len(used),
                "valid": bool(valid),
                "queries_answered": answered,
                "connections_established": connections,
                "queries_per_connection": answered / connections if connections else None,
                **{
                    name: median([f[name] for f in used])
                    for name in (
                        "packets_sent_per_query",
                        "packets_received_per_query",
                        "packets_per_query",
                        "bytes_sent_per_query",
                        "bytes_received_per_query",
                        "bytes_per_query",
                        "frame_bytes_per_query_est",
                    )
                },
                "study_messages": figure.messages if figure and new_connection else None,
                "study_bytes": figure.bytes if figure and new_connection else None,
            }
        )
        out.append(row)
    return out
