"""The load model: the cost model with the load it is paid at (issue 54, docs/cost-curves.md).

The cost model (:mod:`dnscost.analysis.costmodel`) prices a query, a handshake and a second of
an open connection the same at every load. They are not: below saturation a server finds no
work waiting, blocks, and is woken for the next query (a context switch out and in, the
scheduler's and the system call's return paths, cold caches); saturated, it finds the next query
queued and pays that once per batch. A query that finds the server idle wakes it; with queries
arriving independently, the share of them that do is the share of time the server is idle,
``1 - u`` where ``u`` is its busy share (an M/G/1 server's arrivals see its time average). So
each event term of the cost model gets a second term, paid per event times ``1 - u``::

    cpu = sum_k  n_k (b_k + a_k (1 - u)),   u = cpu / (seconds x 1e6 x cores)

``b_k`` is what the event costs when it finds the server busy (at saturation), ``a_k`` what a
wake-up adds. Both are fitted as the cost model's terms are (non-negative, relative residuals,
bootstrap intervals, identification) over every valid load and idle trial, the cost curves'
ladder steps included: they are what sets ``u`` apart from 1. ``u`` is the trial's measured
busy share (``target_cpu_share`` over its cores). The connection-second term has no wake-up part
(an idle connection wakes nobody). A wake-up after an idle period longer than :data:`LONG_GAP_US`
adds :data:`LONG_WAKE`, one per target x transport, paid by the share of idle periods that long
at the rate of every event the target serves (:func:`gap_share`): ``A`` below gains
``sum_k n_k x long_wake x gap_share(rate)``.

A prediction solves the equation for ``cpu`` (:func:`solve_cpu`): with ``B = sum n_k b_k``,
``A = sum n_k a_k`` and ``C`` the CPU-µs the window holds, ``cpu = (A + B) / (1 + A / C)``
while ``B <= C``; beyond (more than the cores can serve) ``u = 1`` and ``cpu = B``.

Why this form rather than the measured curves interpolated: it predicts what no ladder measured
(a mix of transports, a population's shapes, another load), from terms that add up; the
``load_model_fit`` table gives, per target x transport, its hold-out error beside the constant
cost model's on the same trials (each trial predicted from a fit without it, by
:func:`solve_cpu` from its counts alone, not its measured CPU).

Pure: rows of the ``trials`` table in, rows of ``load_model``, ``load_model_fit`` and ``load_model_gaps`` out."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnscost.analysis.costmodel import (
    APPLIES,
    RESAMPLES,
    STATUS_IDENTIFIED,
    STATUS_NOT_IDENTIFIED,
    TERMS,
    TransportFit,
    fit_cells,
    fitted_trials,
    indistinct_from_zero,
    term_count,
)
from dnscost.analysis.stats import fit_non_negative, median, significant
from dnscost.analysis.tables import reference_key
from dnscost.contract import Row

__all__ = [
    "LONG_GAP_US",
    "LONG_WAKE",
    "WAKE",
    "Price",
    "busy_ranges",
    "busy_share",
    "events",
    "fit_load",
    "fit_terms",
    "gap_share",
    "load_count",
    "load_model_rows",
    "load_terms",
    "long_gap_rows",
    "price",
    "solve_cpu",
    "solve_mix",
]

WAKE: dict[str, str] = {
    "query": "query_wake",
    "full_handshake": "full_handshake_wake",
    "resumed_handshake": "resumed_handshake_wake",
}
"""Each event term and its wake-up term (counted as the event times ``1 - u``)."""

_BASE = {wake: base for base, wake in WAKE.items()}

LONG_WAKE = "long_wake"
"""What a wake-up adds when the target had been idle longer than :data:`LONG_GAP_US` before it:
counted, for a trial or a mix, as its events times the idle share (``1 - u``) times the share of
idle periods that long (``exp(-rate x LONG_GAP_US)``, with ``rate`` the events a second of each
of the target's cores: an idle period under independent arrivals lasts until the next one). One
term per target x transport: the extra is the core's, not the event's (docs/cost-curves.md, "A
long idle period costs more")."""

LONG_GAP_US = 200.0
"""The idle time beyond which a wake-up costs more: KVM's default ``halt_poll_ns`` (200 µs),
how long the host polls a halted virtual CPU before it schedules it out. Chosen by hold-out
error among :data:`LONG_GAPS_US` (the ``load_model_gaps`` table; docs/cost-curves.md)."""

LONG_GAPS_US = (0.0, 50.0, 100.0, 200.0, 400.0, 800.0)
"""The idle times tried for :data:`LONG_GAP_US`, 0 for the load model without :data:`LONG_WAKE`."""

_WAKE_TERMS = frozenset(_BASE) | {LONG_WAKE}


def gap_share(events_per_core_s: float, gap_us: float = LONG_GAP_US) -> float:
    """The share of a target's idle periods that last longer than ``gap_us`` when events
    arrive independently at ``events_per_core_s`` a second per core."""
    return math.exp(-max(0.0, events_per_core_s) * gap_us * 1e-6)


def events(counts: Mapping[str, float]) -> float:
    """The events among ``counts`` (cost-model terms) that can wake a target: queries and
    handshakes, not connection-seconds."""
    return sum(n for t, n in counts.items() if t in WAKE)


STATUS_BOUNDED = "bounded"
"""A wake-up term the trials cannot tell from 0 (its interval starts there) but fit all the
same, or an event term identified by the design whose interval starts at 0
(:func:`~dnscost.analysis.costmodel.indistinct_from_zero`: a busy part and its wake-up part
trade cost along a ladder, their sum known better than each): priced at its fitted value, which
may be 0, its resamples carrying the uncertainty into the prediction's interval
(:class:`Price`'s ``bounded``)."""


def load_terms(transport: str) -> tuple[str, ...]:
    """The load model's terms for ``transport``: the cost model's, then the wake-up term of each
    of its events."""
    base = APPLIES.get(transport, tuple(TERMS))
    wakes = tuple(WAKE[t] for t in base if t in WAKE)
    return base + wakes + ((LONG_WAKE,) if wakes else ())


MIN_LONG_TRIALS = 3
"""Load trials a fit needs whose idle periods were mostly long (:func:`trial_gap_share` at
least :data:`LONG_ENOUGH`) to price :data:`LONG_WAKE`: a run that measured none (a study run's
trials are near saturation) cannot tell what a long idle period costs, and its bootstrap would
price it anywhere from 0 to 10^5 µs."""

LONG_ENOUGH = 0.25


def trial_gap_share(r: Row, gap_us: float = LONG_GAP_US) -> float:
    """The share of a trial's idle periods longer than :data:`LONG_GAP_US` (its events a second
    of each of the target's cores)."""
    seconds = _capacity_us(r) / 1e6
    return gap_share(events(_counts(r, str(r["transport"]))) / seconds if seconds else 0.0, gap_us)


def fit_terms(transport: str, trials: Sequence[Row], gap_us: float = LONG_GAP_US) -> tuple[str, ...]:
    """The terms a load fit of ``trials`` (one target, one transport) has: :func:`load_terms`,
    without :data:`LONG_WAKE` unless at least :data:`MIN_LONG_TRIALS` of its load trials left
    the target mostly idle periods longer than ``gap_us`` (0: no long idle period is priced
    apart, the load model without the term)."""
    terms = load_terms(transport)
    long_trials = sum(r["kind"] == "load" and trial_gap_share(r, gap_us) >= LONG_ENOUGH for r in trials)
    keep = gap_us > 0 and long_trials >= MIN_LONG_TRIALS
    return terms if keep else tuple(t for t in terms if t != LONG_WAKE)


def busy_share(r: Mapping[str, Any]) -> float:
    """The share of its cores' time the target was busy in a trial's window, 0 to 1 (0 for an
    idle trial, whose connections wait: every event in it finds the target idle)."""
    share = float(r.get("target_cpu_share") or 0.0) / float(r.get("target_cores") or 1)
    return min(1.0, max(0.0, share))


def _known_share(r: Row) -> bool:
    """Whether the trial says how busy the target was (idle trials need not: see busy_share)."""
    return r["kind"] == "idle" or r.get("target_cpu_share") is not None


def load_count(r: Row, term: str, gap_us: float = LONG_GAP_US) -> float:
    """A trial's count of a load-model term: an event term's count, for a wake-up term its
    event's count times the share of time the target was idle, and for :data:`LONG_WAKE` every
    event's count times that share times the share of idle periods longer than
    :data:`LONG_GAP_US` at the trial's rate of events."""
    if term == LONG_WAKE:
        return events(_counts(r, str(r["transport"]))) * (1.0 - busy_share(r)) * trial_gap_share(r, gap_us)
    base = _BASE.get(term)
    if base is None:
        return term_count(r, term)
    return term_count(r, base) * (1.0 - busy_share(r))


def fit_load(rows: list[Row]) -> list[TransportFit]:
    """The load model fitted per target x transport over the ``trials`` table's rows: every
    load and idle trial of the default certificate key, ladder steps included; replayed clients
    and populations are what it is tested on, not fitted to."""
    return fit_cells(_candidates(rows), fit_terms, load_count)


def busy_ranges(rows: list[Row], target: object) -> dict[str, tuple[float, float]]:
    """Per transport, the lowest and highest busy share of ``target``'s load trials the load fit
    uses: the range of load its terms are measured over."""
    out: dict[str, tuple[float, float]] = {}
    for r in fitted_trials(_candidates(rows)):
        if r["target"] == target and r["kind"] == "load":
            u, t = busy_share(r), str(r["transport"])
            low, high = out.get(t, (u, u))
            out[t] = (min(low, u), max(high, u))
    return out


def _candidates(rows: list[Row]) -> list[Row]:
    return [
        r
        for r in reference_key(rows)
        if r["kind"] in ("load", "idle") and r.get("analysis") not in ("clients", "population") and _known_share(r)
    ]


def solve_cpu(
    coefficients: Mapping[str, float | None],
    counts: Mapping[str, float],
    capacity_us: float,
    gap_us: float = LONG_GAP_US,
) -> float | None:
    """The CPU-µs the model predicts for ``counts`` of the cost model's terms (events over a
    window whose cores hold ``capacity_us`` CPU-µs), the busy share solved with it (see the
    module; the share of long idle periods from the counts' rate over the window); None when a
    term counted has no coefficient."""
    busy = wake = 0.0
    if LONG_WAKE in coefficients and (n := events(counts)):
        long_wake = coefficients[LONG_WAKE]
        if long_wake is None:
            return None
        wake += n * long_wake * gap_share(n * 1e6 / capacity_us if capacity_us else 0.0, gap_us)
    for term, n in counts.items():
        if n == 0:
            continue
        b = coefficients.get(term)
        if b is None:
            return None
        busy += n * b
        if term in WAKE:
            a = coefficients.get(WAKE[term])
            if a is None:
                return None
            wake += n * a
    if busy >= capacity_us:
        return busy
    return (busy + wake) / (1.0 + wake / capacity_us)


Draws = np.ndarray[Any, np.dtype[np.float64]]


@dataclass(frozen=True)
class Price:
    """What some counts of events cost a target by one fit: CPU-µs when it is busy (``busy``,
    ``B``) and what wake-ups add when it is idle (``wake``, ``A``), at the estimates and on
    every bootstrap resample (``RESAMPLES`` values each, NaN where a resample does not identify
    a term; the estimate repeated where the fit has no bootstrap, named in ``fixed``); or, in
    ``missing``, the first term counted that the fit does not identify, and why."""

    busy: float = 0.0
    wake: float = 0.0
    busy_draws: Draws = field(default_factory=lambda: np.zeros(RESAMPLES))
    wake_draws: Draws = field(default_factory=lambda: np.zeros(RESAMPLES))
    missing: str | None = None
    fixed: tuple[str, ...] = ()
    bootstrapped: bool = False
    bounded: tuple[str, ...] = ()
    """Wake-up terms the trials cannot tell from 0 (their interval starts there), priced at
    their fitted value all the same: what a wake-up adds may be nothing, and the interval says so."""


def price(fit: TransportFit, counts: Mapping[str, float], gap: float = 1.0) -> Price:
    """``counts`` of the cost model's terms priced by ``fit``: a load fit (its wake-up terms
    priced too, :data:`LONG_WAKE` at ``gap``, the share of the target's idle periods longer than
    :data:`LONG_GAP_US` at the rate of every event it serves (:func:`gap_share`, over the whole
    mix), and every term the trials cannot tell from 0 at its fitted value:
    :data:`STATUS_BOUNDED`) or a constant cost-model fit (no wake-up part; a term not identified
    leaves the price ``missing``)."""
    busy = wake = 0.0
    busy_draws, wake_draws = np.zeros(RESAMPLES), np.zeros(RESAMPLES)
    fixed: list[str] = []
    bounded: list[str] = []
    bootstrapped = False
    load = any(t in _BASE for t in fit.terms)  # a load fit: events with their wake-up parts
    parts: list[tuple[str, float, bool]] = []
    for term, n in counts.items():
        if n == 0:
            continue
        if term not in fit.terms:
            return Price(missing=f"{fit.transport} {term}: not a term of its fit")
        parts.append((term, n, False))
        if WAKE.get(term) in fit.terms:
            parts.append((WAKE[term], n, True))
    if LONG_WAKE in fit.terms and (n := events(counts) * gap):
        parts.append((LONG_WAKE, n, True))
    for name, n, is_wake in parts:
        k = fit.terms.index(name)
        estimate = fit.estimates[k]
        if (
            estimate is None
            and (is_wake or (load and indistinct_from_zero(fit, k)))
            and fit.fit is not None
            and (value := fit.fit.coef[k]) is not None
        ):
            estimate = value
            bounded.append(f"{fit.transport} {name} ({fit.reasons[k]})")
        if estimate is None:
            return Price(missing=f"{fit.transport} {name}: {fit.reasons[k]}")
        if fit.boot is not None and fit.boot.values.shape[0] == RESAMPLES:
            d = n * fit.boot.values[:, k]
            bootstrapped = True
        else:
            d = np.full(RESAMPLES, n * estimate)
            trials = f"{len(fit.y)} trial" + ("s" if len(fit.y) != 1 else "")
            fixed.append(f"{fit.transport} {name} (a fit of {trials}, too few for an interval)")
        if is_wake:
            wake, wake_draws = wake + n * estimate, wake_draws + d
        else:
            busy, busy_draws = busy + n * estimate, busy_draws + d
    return Price(busy, wake, busy_draws, wake_draws, None, tuple(fixed), bootstrapped, tuple(bounded))


def solve_mix(prices: Sequence[Price], capacity_us: float) -> tuple[float, Draws]:
    """The idle share of the target's cores (``1 - u``) when the priced events share them, at
    the estimates and on every resample: :func:`solve_cpu` over all of them at once, since they
    share one busy share. A price's CPU is then ``busy + wake x idle``."""
    busy = sum(p.busy for p in prices)
    wake = sum(p.wake for p in prices)
    busy_draws = sum((p.busy_draws for p in prices), np.zeros(RESAMPLES))
    wake_draws = sum((p.wake_draws for p in prices), np.zeros(RESAMPLES))
    total = busy if busy >= capacity_us else (busy + wake) / (1 + wake / capacity_us)
    with np.errstate(invalid="ignore"):
        totals = np.where(
            busy_draws >= capacity_us, busy_draws, (busy_draws + wake_draws) / (1 + wake_draws / capacity_us)
        )
        idle_draws = 1 - np.minimum(1.0, totals / capacity_us)
    return 1 - min(1.0, total / capacity_us), idle_draws


def _counts(r: Row, transport: str) -> dict[str, float]:
    return {t: term_count(r, t) for t in APPLIES.get(transport, tuple(TERMS))}


def _capacity_us(r: Row) -> float:
    return float(r.get("measured_s") or 0.0) * 1e6 * float(r.get("target_cores") or 1)


def holdout_errors_pct(rows: list[Row], transport: str, gap_us: float = LONG_GAP_US) -> tuple[list[float], list[float]]:
    """For each trial a load fit of ``rows`` uses: |predicted / measured - 1| x 100 from a fit
    without it, by the load model (solved from its counts) and by the constant cost model (the
    same trials, without the wake-up terms). Trials a fit without them cannot price are skipped
    (by both, so the two lists compare the same trials)."""
    trials = fitted_trials(rows)
    terms = fit_terms(transport, trials, gap_us)
    constant = APPLIES.get(transport, tuple(TERMS))
    x = [[load_count(r, t, gap_us) for t in terms] for r in trials]
    y = [float(r["target_cpu_us"]) for r in trials]
    load_errors: list[float] = []
    constant_errors: list[float] = []
    for i, r in enumerate(trials):
        rest = [j for j in range(len(trials)) if j != i]
        fit = fit_non_negative([x[j] for j in rest], [y[j] for j in rest], relative=True)
        flat = fit_non_negative(
            [[x[j][terms.index(t)] for t in constant] for j in rest], [y[j] for j in rest], relative=True
        )
        if fit is None or flat is None:
            continue
        counts = _counts(r, transport)
        load = solve_cpu(dict(zip(terms, fit.coef, strict=True)), counts, _capacity_us(r), gap_us)
        same = flat.predict([counts[t] for t in constant])
        if load is None or same is None:
            continue
        load_errors.append(abs(load / y[i] - 1) * 100)
        constant_errors.append(abs(same / y[i] - 1) * 100)
    return load_errors, constant_errors


def load_model_rows(rows: list[Row], fitted: Sequence[TransportFit] | None = None) -> tuple[list[Row], list[Row]]:
    """The ``load_model`` rows (one per term of each target x transport, as ``cost_model``'s)
    and the ``load_model_fit`` rows (one per target x transport: its trials, the busy shares
    they span, which is the range it is fitted for, and its hold-out error beside the constant
    cost model's)."""
    terms_out: list[Row] = []
    fits: list[Row] = []
    candidates = _candidates(rows)
    for f in fit_load(rows) if fitted is None else fitted:
        for k, term in enumerate(f.terms):
            estimate, status = f.estimates[k], STATUS_IDENTIFIED
            if estimate is None:
                status = STATUS_NOT_IDENTIFIED
                if (
                    (term in _WAKE_TERMS or indistinct_from_zero(f, k))
                    and f.fit is not None
                    and (value := f.fit.coef[k]) is not None
                ):
                    estimate, status = value, STATUS_BOUNDED  # as price() uses it
            terms_out.append(
                {
                    "target": f.target,
                    "transport": f.transport,
                    "term": term,
                    "us": significant(estimate),
                    "ci95_low": significant(f.boot.low[k]) if f.boot else None,
                    "ci95_high": significant(f.boot.high[k]) if f.boot else None,
                    "status": status,
                    "reason": f.reasons[k] or None,
                }
            )
        mine = [r for r in candidates if r["target"] == f.target and r["transport"] == f.transport]
        low, high = busy_ranges(mine, f.target).get(f.transport, (None, None))
        load, constant = holdout_errors_pct(mine, f.transport)
        fits.append(
            {
                "target": f.target,
                "transport": f.transport,
                "trials": len(f.y),
                "terms": len(f.terms),
                "terms_identified": sum(e is not None for e in f.estimates),
                "busy_share_min": significant(low),
                "busy_share_max": significant(high),
                "holdout_trials": len(load),
                "holdout_median_abs_error_pct": significant(median(load)),
                "holdout_max_abs_error_pct": significant(max(load, default=None)),
                "constant_holdout_median_abs_error_pct": significant(median(constant)),
                "constant_holdout_max_abs_error_pct": significant(max(constant, default=None)),
            }
        )
    return terms_out, fits


def long_gap_rows(rows: list[Row]) -> list[Row]:
    """The ``load_model_gaps`` rows: per target x transport and each idle time of
    :data:`LONG_GAPS_US`, the load model's hold-out error (as ``load_model_fit``'s) were that
    the idle time beyond which a wake-up costs more: what :data:`LONG_GAP_US` is chosen by."""
    candidates = _candidates(rows)
    out: list[Row] = []
    for target, transport in dict.fromkeys((r["target"], str(r["transport"])) for r in candidates):
        mine = [r for r in candidates if r["target"] == target and r["transport"] == transport]
        for gap in LONG_GAPS_US:
            errors, _ = holdout_errors_pct(mine, transport, gap)
            out.append(
                {
                    "target": target,
                    "transport": transport,
                    "gap_us": gap,
                    "long_wake": LONG_WAKE in fit_terms(transport, fitted_trials(mine), gap),
                    "holdout_trials": len(errors),
                    "holdout_median_abs_error_pct": significant(median(errors)),
                    "holdout_max_abs_error_pct": significant(max(errors, default=None)),
                }
            )
    return out
