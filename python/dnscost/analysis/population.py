"""The cost model on trial: for every trial that replayed a population (``dnscost load
--population``, a spec's population group), the target CPU time the same run's cost model
(:mod:`dnscost.analysis.costmodel`) predicts from the counts the engine kept of each class,
beside the CPU time measured, and the error. Pure: the trials' documents and the run's fits in,
the ``population`` table's rows out.

Per transport of the trial, its classes' counts over the measured window (answered queries;
full handshakes, or for tcp connections established; resumed handshakes; connection-seconds)
times that transport's fitted cost per unit, summed over the transports::

    predicted = sum_t  q_t a_query + F_t a_full + R_t a_resumed + N_t a_connection_second

The interval is the central 95 % of the same sum on each of the fits' bootstrap resamples
(resample ``b`` of every transport together; a fit too small for a bootstrap enters at its
estimate, and the row says so). A term a trial counts that the run does not identify leaves the
prediction without a value: "bounded" when the term's bootstrap interval bounds it (the
interval then spans 0 to that upper end for it), else "not identified", with the term and why. The error is
(predicted - measured) / measured, its interval from the prediction's; the verdict says whether
the measured CPU time lies within the prediction's interval, above it (the model under-predicts)
or below it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dnscost.analysis.costmodel import RESAMPLES, TransportFit
from dnscost.analysis.load import is_valid
from dnscost.analysis.loadmodel import events, gap_share, price, solve_mix
from dnscost.contract import ClassResult, ReplayRecord, Row, TrialRecord

__all__ = ["population_rows"]

LEVEL = 0.95


def _counts(classes: Sequence[ClassResult], transport: str) -> dict[str, float]:
    """The cost model's terms counted over a trial's classes on ``transport``."""
    mine = [c for c in classes if c["transport"] == transport]
    return {
        "query": float(sum(c["queries_answered"] for c in mine)),
        "full_handshake": float(
            sum(c["connections_established"] if transport == "tcp" else c["handshakes_full"] for c in mine)
        ),
        "resumed_handshake": float(sum(c["handshakes_resumed"] for c in mine)) if transport != "tcp" else 0.0,
        "connection_second": float(sum(c.get("connection_seconds", 0.0) for c in mine)),
    }


def _load_prediction(
    classes: Sequence[ClassResult], target: object, load_fits: Sequence[TransportFit], capacity_us: float | None
) -> tuple[float | None, float | None, float | None, str | None]:
    """The load model's prediction of a trial's CPU-µs from its classes' counts, with its 95 %
    interval (:func:`dnscost.analysis.loadmodel.solve_mix` over every transport at once: they
    share the target's busy share), or None and why."""
    if not capacity_us:
        return None, None, None, "no measured window"
    prices = []
    transports = list(dict.fromkeys(c["transport"] for c in classes))
    # Every class's events share the target's idle periods: their rate sets how long those last.
    everything = sum(events(_counts(classes, t)) for t in transports)
    gap = gap_share(everything * 1e6 / capacity_us)
    for transport in transports:
        fit = next((f for f in load_fits if f.target == target and f.transport == transport), None)
        if fit is None:
            return None, None, None, f"{transport}: no valid trial of it in this run"
        if fit.boot is None:
            return None, None, None, f"{transport}: its load fit has {len(fit.y)} trials, too few for an interval"
        p = price(fit, {k: n for k, n in _counts(classes, transport).items() if k in fit.terms}, gap)
        if p.missing is not None:
            return None, None, None, p.missing
        prices.append(p)
    idle, idle_draws = solve_mix(prices, capacity_us)
    value = sum(p.busy + p.wake * idle for p in prices)
    draws = sum((p.busy_draws + p.wake_draws * idle_draws for p in prices), np.zeros(RESAMPLES))
    kept = draws[~np.isnan(draws)]
    if not kept.size:
        return value, None, None, None
    return value, float(np.percentile(kept, 2.5)), float(np.percentile(kept, 97.5)), None


def population_rows(
    trials: Sequence[TrialRecord], fits: Sequence[TransportFit], load_fits: Sequence[TransportFit] = ()
) -> list[Row]:
    """One row per population trial (see the module)."""
    out: list[Row] = []
    for t in trials:
        summary = t.get("summary")
        classes = summary.get("classes") if summary is not None else None
        if summary is None or not classes:
            continue
        target = t.get("target")
        measured = summary.get("target_cpu_us")
        value, draws = 0.0, np.zeros(RESAMPLES)
        reasons: list[str] = []
        fixed: list[str] = []
        bounds: list[str] = []
        headroom = 0.0
        transports = list(dict.fromkeys(c["transport"] for c in classes))
        for transport in transports:
            fit = next((f for f in fits if f.target == target and f.transport == transport), None)
            if fit is None:
                reasons.append(f"{transport}: no valid trial of it in this run")
                continue
            for term, n in _counts(classes, transport).items():
                if n == 0 or term not in fit.terms:
                    continue
                k = fit.terms.index(term)
                estimate = fit.estimates[k]
                if estimate is None:
                    top = fit.boot.high[k] if fit.boot is not None else None
                    if top is None:
                        reasons.append(f"{transport} {term}: {fit.reasons[k]}")
                    else:  # bounded: between 0 and its interval's upper end
                        bounds.append(f"{transport} {term} ({fit.reasons[k]})")
                        headroom += n * top
                    continue
                value += n * estimate
                if fit.boot is not None and fit.boot.values.shape[0] == RESAMPLES:
                    draws = draws + n * fit.boot.values[:, k]
                else:
                    draws = draws + n * estimate
                    fixed.append(f"{transport} {term}")
        identified = not reasons and not bounds
        kept = draws[~np.isnan(draws)]
        low = float(np.percentile(kept, 100 * (1 - LEVEL) / 2)) if not reasons and kept.size else None
        high = float(np.percentile(kept, 100 * (1 + LEVEL) / 2)) + headroom if not reasons and kept.size else None

        def err(p: float | None, measured: float | None = measured) -> float | None:
            return 100 * (p - measured) / measured if p is not None and measured else None

        seconds = summary.get("measured_s")
        cores = len(t.get("target_cpus") or [0])
        load, load_low, load_high, load_why = _load_prediction(
            classes, target, load_fits, float(seconds) * 1e6 * cores if seconds else None
        )
        replay: ReplayRecord | dict[str, list[str]] = t.get("population") or {"left_out": []}
        status = "identified" if identified else "bounded" if not reasons else "not identified"
        why = reasons or [f"between 0 and its interval's upper end: {'; '.join(bounds)}"] if not identified else []
        if fixed:
            why.append(f"at their estimates (fits too small for an interval): {', '.join(fixed)}")
        names = replay.get("names")
        hits = summary["validity"].get("cache_hit_ratio")
        if names:
            missed = "an unknown share" if hits is None else f"{100 * (1 - hits):.0f} %"
            why.append(
                f"the capture's own names: {missed} missed the cache and went upstream, which the model "
                "(fitted on trials its cache answered) does not price"
            )
        out.append(
            {
                "target": target,
                "target_version": t.get("target_version"),
                "id": t.get("id"),
                "rate_qps": replay["rate_qps"] if "rate_qps" in replay else summary.get("offered_qps"),
                "offered_qps": summary.get("offered_qps"),
                "answered_qps": summary.get("answered_qps"),
                "queries_answered": summary.get("queries_answered"),
                "classes": len(classes),
                "left_out": ";".join(replay.get("left_out", [])),
                "valid": is_valid(t),
                "measured_cpu_us": measured,
                "predicted_cpu_us": value if identified else None,
                "predicted_low_us": low,
                "predicted_high_us": high,
                "error_pct": err(value if identified else None),
                "error_low_pct": err(low),
                "error_high_pct": err(high),
                "verdict": (
                    None
                    if low is None or high is None or not measured
                    else "within"
                    if low <= measured <= high
                    else "above"
                    if measured > high
                    else "below"
                ),
                "status": status,
                "reason": "; ".join(why) or None,
                "load_predicted_cpu_us": load,
                "load_predicted_low_us": load_low,
                "load_predicted_high_us": load_high,
                "load_error_pct": err(load),
                "load_reason": load_why,
                "transports": ";".join(transports),
                "names": "capture" if names else "synthetic",
                "cache_hit_ratio": hits,
                "replayed_repeat_share": replayed["repeat_share"] if (replayed := t.get("names_replayed")) else None,
                "upstream_queries": t.get("upstream_queries"),
                "target_answered": summary["validity"].get("target_answered"),
                "capture_repeat_share": replay.get("repeat_share"),
            }
        )
    return out
