"""The cost model: per target x transport, the target's CPU time in a trial's window as a
non-negative sum of a cost per answered query, per full handshake, per resumed handshake and per
second of an open connection, fitted over every valid load and idle trial. The study's specs
hold trials designed to separate the terms (docs/experiments.md, "The cost model's trials").

The fit minimises relative residuals (each trial weighted by 1 / its CPU time): the trials' CPU
times span orders of magnitude (an idle trial uses a thousandth of a saturated one), their
errors are proportional to their size, and an unweighted fit would let the largest trials alone
decide the small terms. Intervals are percentile bootstrap intervals over the trials (resampled
with replacement, :data:`RESAMPLES` times, seeded), and a term is reported only when the trials
identify it (:func:`identification`); otherwise it is "not identified", never 0."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dnscost.analysis.stats import (
    Bootstrap,
    NonNegativeFit,
    bootstrap_non_negative,
    fit_non_negative,
    leave_one_out_errors_pct,
    median,
    significant,
)
from dnscost.analysis.tables import group_by, reference_key
from dnscost.contract import Row
from dnscost.shares import CURVE

__all__ = [
    "APPLIES",
    "MIN_IDENTIFIED_SHARE",
    "MIN_SPARE_TRIALS",
    "RESAMPLES",
    "SEED",
    "TERMS",
    "TransportFit",
    "cost_model_rows",
    "fit_cells",
    "fit_transports",
    "fitted_trials",
    "identification",
    "indistinct_from_zero",
    "predict_cpu_us",
    "term_count",
]

TERMS: dict[str, str] = {
    "query": "queries_answered",
    "full_handshake": "handshakes_full",
    "resumed_handshake": "handshakes_resumed",
    "connection_second": "connection_seconds",
}
"""Each term of the model and the trials-table column that counts it. For tcp, which has no
TLS, the full-handshake term counts TCP connections established (``connections_established``)."""

APPLIES: dict[str, tuple[str, ...]] = {
    "udp": ("query",),
    "tcp": ("query", "full_handshake", "connection_second"),
    "dot": tuple(TERMS),
    "doh": tuple(TERMS),
    "doq": tuple(TERMS),
    "doh3": tuple(TERMS),
}
"""The terms that mean something for each transport: UDP has no connection, TCP no TLS (a
QUIC handshake with 0-RTT data counts as resumed, as the engine counts it)."""

RESAMPLES = 1000
"""Bootstrap resamples per fit."""
SEED = 2023
"""The bootstrap's seed: the same trials give the same intervals."""
MIN_IDENTIFIED_SHARE = 0.9
"""A term the resampled trials identify in fewer than this share of resamples rests on too few
trials to be reported."""
MIN_SPARE_TRIALS = 3
"""A fit has bootstrap intervals only with at least this many trials more than it has terms:
resampling two or three trials cannot show how much a fresh trial would differ (with n trials
the percentile interval is at most their spread), so a smaller fit gives estimates without
intervals."""

STATUS_IDENTIFIED = "identified"
STATUS_NOT_IDENTIFIED = "not identified"


def _count(r: Row, column: str) -> float:
    if column == "handshakes_full" and r["transport"] == "tcp":
        column = "connections_established"
    return float(r[column] or 0.0)


def _design(
    rows: list[Row], terms: Sequence[str], count: Callable[[Row, str], float]
) -> tuple[list[list[float]], list[float]]:
    """The trials' ``count`` of each of ``terms`` and their CPU times, for the valid load and
    idle trials that used CPU time."""
    usable = fitted_trials(rows)
    x = [[count(r, t) for t in terms] for r in usable]
    return x, [float(r["target_cpu_us"]) for r in usable]


def fitted_trials(rows: list[Row]) -> list[Row]:
    """The trials a fit uses, in order: the valid load and idle trials that used CPU time."""
    return [r for r in rows if r["valid"] and r["kind"] in ("load", "idle") and (r["target_cpu_us"] or 0) > 0]


def term_count(r: Row, term: str) -> float:
    """A trial's count of a cost-model term (a missing count is 0)."""
    return _count(r, TERMS[term])


def indistinct_from_zero(f: TransportFit, k: int) -> bool:
    """Term ``k`` is identified by the design and its resamples but its bootstrap 95 % interval
    starts at 0 (case 3 of :func:`identification`): a value the trials cannot tell from zero,
    which a prediction may still take at its estimate, its resamples carrying the uncertainty
    (the sum of collinear terms is known better than each)."""
    fit, boot = f.fit, f.boot
    if f.estimates[k] is not None or fit is None or boot is None:
        return False
    low = boot.low[k]
    return (
        bool(fit.counted[k])
        and bool(fit.identified[k])
        and fit.coef[k] is not None
        and boot.identified_share[k] >= MIN_IDENTIFIED_SHARE
        and low is not None
        and low <= 0.0
    )


def identification(
    fit: NonNegativeFit | None, boot: Bootstrap | None, k: int, terms: Sequence[str]
) -> tuple[float | None, str]:
    """Term ``k``'s estimate and, when it is not identified, None and why. A term is not
    identified when

    1. no trial counts it, or the design is rank-deficient for it: a vector of the weighted,
       column-scaled design's null space has a component on it, so another mix of terms fits
       the trials equally well (the terms it is confounded with are named);
    2. fewer than :data:`MIN_IDENTIFIED_SHARE` of the bootstrap resamples identify it by (1):
       it rests on a few trials;
    3. its bootstrap 95 % interval starts at 0 (at least 2.5 % of the resamples put it at its
       bound), whatever its upper end: the trials cannot tell it from zero. This covers an
       interval from 0 to far beyond the estimate (a term lost in the noise of others), from 0
       to about the estimate (two nearly collinear terms trading their cost), and an estimate
       of 0.

    A fit too small for intervals (``boot`` None, :data:`MIN_SPARE_TRIALS`) is judged by (1)
    alone, and an estimate of 0 is not identified.
    """
    if fit is None or not fit.counted[k]:
        return None, "no valid trial counts it"
    if not fit.identified[k]:
        partners = [terms[j] for j in fit.confounded(k)]
        return None, ("confounded with " + ", ".join(partners) + " (" if partners else "(") + "rank-deficient design)"
    estimate = fit.coef[k]
    assert estimate is not None
    if boot is None:
        return (estimate, "") if estimate > 0 else (None, "estimate 0 from too few trials for an interval")
    share = boot.identified_share[k]
    if share < MIN_IDENTIFIED_SHARE:
        return None, f"identified in {share:.0%} of resamples only (too few trials)"
    low, high = boot.low[k], boot.high[k]
    if low is not None and high is not None and low <= 0.0:
        return None, f"95 % interval from 0 to {high:.3g} µs"
    return estimate, ""


@dataclass(frozen=True, eq=False)
class TransportFit:
    """The cost model of one target x transport: its terms (:data:`APPLIES`), the design it was
    fitted on (``x``: the trials' counts of the terms, ``y``: their CPU-µs), the fit and its
    bootstrap (None when the fit has too few trials for one, :data:`MIN_SPARE_TRIALS`), and per
    term the estimate reported (None: not identified) with the reason."""

    target: Any
    transport: str
    terms: tuple[str, ...]
    x: list[list[float]]
    y: list[float]
    fit: NonNegativeFit | None
    boot: Bootstrap | None
    estimates: tuple[float | None, ...]
    reasons: tuple[str, ...]


def fit_transports(rows: list[Row]) -> list[TransportFit]:
    """The cost model fitted per target x transport over the ``trials`` table's rows, target by
    target in the order the plan measured them."""
    # One certificate key type: a full handshake's cost depends on it.
    # Real clients replayed (the clients analysis) run far below saturation, where a query costs
    # more than the model's linear terms say (the target batches less): not fitted.
    # A population's trials mix transports: the model is put to the test on them, not fitted.
    # A ladder's steps (the cost curves) run far below saturation on purpose: not fitted either.
    candidates = [
        r
        for r in reference_key(rows)
        if r["kind"] in ("load", "idle") and r.get("analysis") not in ("clients", "population", CURVE)
    ]
    return fit_cells(candidates, lambda transport, _: APPLIES.get(transport, tuple(TERMS)), term_count)


def fit_cells(
    candidates: list[Row], terms_of: Callable[[str, list[Row]], tuple[str, ...]], count: Callable[[Row, str], float]
) -> list[TransportFit]:
    """A model fitted per target x transport over ``candidates`` (``trials`` rows), each with the
    terms ``terms_of`` its transport and its trials, counted by ``count``: target by target in the order the
    plan measured them."""
    targets = list(dict.fromkeys(r["target"] for r in candidates))
    transports = list(dict.fromkeys(r["transport"] for r in candidates))
    groups = group_by(candidates, lambda r: (r["target"], r["transport"]))
    out = []
    for target, transport in sorted(groups, key=lambda k: (targets.index(k[0]), transports.index(k[1]))):
        terms = terms_of(str(transport), groups[(target, transport)])
        x, y = _design(groups[(target, transport)], terms, count)
        fit = fit_non_negative(x, y, relative=True)
        enough = len(y) >= len(terms) + MIN_SPARE_TRIALS
        boot = bootstrap_non_negative(x, y, relative=True, resamples=RESAMPLES, seed=SEED) if fit and enough else None
        judged = [identification(fit, boot, k, terms) for k in range(len(terms))]
        out.append(
            TransportFit(
                target=target,
                transport=str(transport),
                terms=terms,
                x=x,
                y=y,
                fit=fit,
                boot=boot,
                estimates=tuple(e for e, _ in judged),
                reasons=tuple(r for _, r in judged),
            )
        )
    return out


def cost_model_rows(rows: list[Row], fitted: Sequence[TransportFit] | None = None) -> tuple[list[Row], list[Row]]:
    """The ``cost_model`` rows (one per term that applies to the transport) and
    ``cost_model_fit`` rows (one per target x transport), of ``fitted`` (the fits of ``rows``,
    made here when not given). A term the trials do not identify has no estimate (``us``
    None), status "not identified" and the reason; its bootstrap interval, when there is one,
    is kept (its upper end bounds the term)."""
    terms_out: list[Row] = []
    fits: list[Row] = []
    for f in fit_transports(rows) if fitted is None else fitted:
        boot = f.boot
        for k, term in enumerate(f.terms):
            estimate = f.estimates[k]
            terms_out.append(
                {
                    "target": f.target,
                    "transport": f.transport,
                    "term": term,
                    "us": significant(estimate),
                    "ci95_low": significant(boot.low[k]) if boot else None,
                    "ci95_high": significant(boot.high[k]) if boot else None,
                    "status": STATUS_IDENTIFIED if estimate is not None else STATUS_NOT_IDENTIFIED,
                    "reason": f.reasons[k] or None,
                }
            )
        errors = leave_one_out_errors_pct(f.x, f.y, relative=True)
        fits.append(
            {  # floats: significant() (the fits' last bits differ from one CPU to another)
                "target": f.target,
                "transport": f.transport,
                "trials": len(f.y),
                "terms": len(f.terms),
                "terms_identified": sum(e is not None for e in f.estimates),
                "r2": significant(f.fit.r2) if f.fit else None,
                "holdout_trials": len(errors),
                "holdout_median_abs_error_pct": significant(median(errors)),
                "holdout_max_abs_error_pct": significant(max(errors, default=None)),
                "resamples": boot.resamples if boot else 0,
            }
        )
    return terms_out, fits


def predict_cpu_us(coefficients: Mapping[str, float | None], counts: Mapping[str, float | None]) -> float | None:
    """CPU time the model predicts for a trial's counts (``trials``-table columns); None when a
    term the trial counts has no identified coefficient."""
    total = 0.0
    for term, column in TERMS.items():
        n = float(counts.get(column) or 0.0)
        if n == 0:
            continue
        c = coefficients.get(term)
        if c is None:
            return None
        total += c * n
    return total
