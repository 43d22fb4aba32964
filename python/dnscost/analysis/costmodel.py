"""The cost model: per target x transport, the target's CPU time in a trial's window as a
non-negative sum of a cost per answered query, per full handshake, per resumed handshake and per
second of an open connection, fitted over every valid load and idle trial (idle trials hold
connections open with almost no queries, which pins the connection-second term).

The fit minimises relative residuals (each trial weighted by 1 / its CPU time): the trials' CPU
times span orders of magnitude (an idle trial uses a thousandth of a saturated one), their
errors are proportional to their size, and an unweighted fit would let the largest trials alone
decide the small terms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dnscost.analysis.stats import NonNegativeFit, fit_non_negative, leave_one_out_errors_pct, median
from dnscost.analysis.tables import Row, group_by, reference_key

__all__ = ["TERMS", "cost_model_rows", "predict_cpu_us"]

TERMS: dict[str, str] = {
    "query": "queries_answered",
    "full_handshake": "handshakes_full",
    "resumed_handshake": "handshakes_resumed",
    "connection_second": "connection_seconds",
}
"""Each term of the model and the trials-table column that counts it. For tcp, which has no
TLS, the full-handshake term counts TCP connections established (``connections_established``)."""


def _count(r: Row, column: str) -> float:
    if column == "handshakes_full" and r["transport"] == "tcp":
        column = "connections_established"
    return float(r[column] or 0.0)


def _design(rows: list[Row]) -> tuple[list[list[float]], list[float]]:
    """The trials' counts (a missing count is 0: UDP has no handshakes) and CPU times, for the
    valid load and idle trials that used CPU time."""
    usable = [r for r in rows if r["valid"] and r["kind"] in ("load", "idle") and (r["target_cpu_us"] or 0) > 0]
    x = [[_count(r, c) for c in TERMS.values()] for r in usable]
    return x, [float(r["target_cpu_us"]) for r in usable]


def _fit(x: Sequence[Sequence[float]], y: Sequence[float]) -> NonNegativeFit | None:
    return fit_non_negative(x, y, relative=True)


def cost_model_rows(rows: list[Row]) -> tuple[list[Row], list[Row]]:
    """The ``cost_model`` rows (one per term) and ``cost_model_fit`` rows (one per target x
    transport). A term no trial exercised has no coefficient (None)."""
    terms: list[Row] = []
    fits: list[Row] = []
    # One certificate key type: a full handshake's cost depends on it.
    candidates = [r for r in reference_key(rows) if r["kind"] in ("load", "idle")]
    targets = list(dict.fromkeys(r["target"] for r in candidates))
    transports = list(dict.fromkeys(r["transport"] for r in candidates))
    groups = group_by(candidates, lambda r: (r["target"], r["transport"]))
    # Target by target, whatever order the plan measured them in.
    for target, transport in sorted(groups, key=lambda k: (targets.index(k[0]), transports.index(k[1]))):
        g = groups[(target, transport)]
        x, y = _design(g)
        fit = _fit(x, y)
        for k, term in enumerate(TERMS):
            terms.append(
                {
                    "target": target,
                    "transport": transport,
                    "term": term,
                    "us": fit.coef[k] if fit else None,
                    "ci95_low": fit.ci95_low[k] if fit else None,
                    "ci95_high": fit.ci95_high[k] if fit else None,
                }
            )
        errors = leave_one_out_errors_pct(x, y, _fit)
        fits.append(
            {
                "target": target,
                "transport": transport,
                "trials": len(y),
                "r2": fit.r2 if fit else None,
                "holdout_median_abs_error_pct": median(errors),
                "holdout_max_abs_error_pct": max(errors, default=None),
            }
        )
    return terms, fits


def predict_cpu_us(coefficients: dict[str, float | None], counts: dict[str, Any]) -> float:
    """CPU time the model predicts for a trial's counts (a term without a coefficient adds 0)."""
    return sum((coefficients.get(term) or 0.0) * float(counts.get(column) or 0.0) for term, column in TERMS.items())
