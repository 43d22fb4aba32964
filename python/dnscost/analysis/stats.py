"""The statistics the derived tables need: Student's t quantile and ordinary least squares with a
t interval on the slope; non-negative least squares (``scipy.optimize.nnls``) that says which
coefficients its design identifies, bootstrap percentile intervals over resampled points, and
leave-one-out hold-out errors."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = [
    "RANK_TOLERANCE",
    "SIGNIFICANT_DIGITS",
    "Bootstrap",
    "LinearFit",
    "NonNegativeFit",
    "bootstrap_non_negative",
    "fit_line",
    "fit_non_negative",
    "leave_one_out_errors_pct",
    "median",
    "significant",
    "t_quantile",
]

Matrix = npt.NDArray[np.float64]


def median(values: Sequence[float]) -> float | None:
    """The median, None for no values."""
    return float(np.median(values)) if len(values) else None


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``t_quantile(0.975, 10)``
    is 2.228...)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    # scipy is imported where it is used: it takes a second to import, and every dnscost
    # command that reaches this module (dnscost --help among them) would pay it.
    import scipy.stats  # type: ignore[import-untyped]

    return float(scipy.stats.t.ppf(p, df))


@dataclass(frozen=True)
class LinearFit:
    """``y = intercept + slope x x``; the 95 % interval on the slope is None below three points."""

    slope: float
    intercept: float
    slope_se: float | None
    ci95_low: float | None
    ci95_high: float | None
    r2: float | None
    points: int


def fit_line(x: Sequence[float], y: Sequence[float]) -> LinearFit | None:
    """Ordinary least squares of ``y`` on ``x`` with an intercept; None with fewer than two
    points or a single distinct x."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(xs)
    if n < 2 or np.ptp(xs) == 0:
        return None
    xm, ym = xs.mean(), ys.mean()
    sxx = float(((xs - xm) ** 2).sum())
    slope = float(((xs - xm) * (ys - ym)).sum() / sxx)
    intercept = float(ym - slope * xm)
    rss = float(((ys - intercept - slope * xs) ** 2).sum())
    tss = float(((ys - ym) ** 2).sum())
    r2 = 1.0 - rss / tss if tss > 0 else None
    if n < 3:
        return LinearFit(slope, intercept, None, None, None, r2, n)
    se = math.sqrt(rss / (n - 2) / sxx)
    half = t_quantile(0.975, n - 2) * se
    return LinearFit(slope, intercept, se, slope - half, slope + half, r2, n)


RANK_TOLERANCE = 1e-9
"""Singular values of a design (weighted, columns scaled to unit length) below this share of the
largest count as zero: the design is rank-deficient along their vectors."""
_NULL_TOLERANCE = 1e-6
"""A column is in a null vector (so not identified) when its component in it exceeds this."""


def _weighted(x: Sequence[Sequence[float]], y: Sequence[float], relative: bool) -> tuple[Matrix, Matrix, Matrix]:
    """The design and values as arrays (points with y <= 0 dropped when ``relative``) and each
    point's weight (1/y when ``relative``, else 1)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.ndim != 2:
        xs = np.zeros((0, 0))
        ys = np.zeros(0)
    if relative:
        keep = ys > 0
        xs, ys = xs[keep], ys[keep]
    return xs, ys, (1.0 / ys if relative else np.ones(len(ys)))


SIGNIFICANT_DIGITS = 12
"""Digits a fitted coefficient or interval keeps when reported: the linear algebra under the
fits (BLAS, picked per CPU) can differ in the last bits from one machine to another, and a
table stored on one must recompute byte for byte on the next."""


def significant(value: float | None) -> float | None:
    """``value`` rounded to :data:`SIGNIFICANT_DIGITS` significant digits (None stays None)."""
    return None if value is None else float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def _solve(xw: Matrix, yw: Matrix) -> tuple[Matrix, Matrix, Matrix, Matrix]:
    """NNLS of ``yw`` on ``xw``: the solution (0 in unused columns), which columns the design
    identifies, the null space of the column-scaled design (one vector per row) and the column
    scales. Should NNLS not converge (it does in a few steps for a handful of columns), nothing
    is identified."""
    p = xw.shape[1]
    scale = np.sqrt((xw**2).sum(axis=0))
    used = scale > 0
    beta = np.zeros(p)
    identified = np.zeros(p, dtype=bool)
    safe = np.where(used, scale, 1.0)
    a = xw / safe
    if not used.any():
        return beta, identified, np.eye(p), safe
    s, vt = np.linalg.svd(a, full_matrices=True)[1:]
    rank = int((s > RANK_TOLERANCE * s[0]).sum()) if len(s) else 0
    null = vt[rank:]
    identified = used & (np.abs(null) <= _NULL_TOLERANCE).all(axis=0)
    import scipy.optimize  # type: ignore[import-untyped]  # imported here: see t_quantile

    try:
        solution = scipy.optimize.nnls(a[:, used], yw, maxiter=100 * p)[0]
    except RuntimeError:  # the iteration limit
        return beta, np.zeros(p, dtype=bool), np.eye(p), safe
    beta[used] = solution / scale[used]
    return beta, identified, null, safe


@dataclass(frozen=True, eq=False)
class NonNegativeFit:
    """Non-negative coefficients per column of the design, without an intercept.

    ``coef[k]`` is None where the design does not identify column ``k``: the column is zero in
    every point (``counted[k]`` is False), or the weighted design (columns scaled to unit
    length) is rank-deficient for it, i.e. a vector of its null space (``null_space``, one per
    row) has a component on the column, so some other mix of columns fits the points equally
    well. ``beta`` is the NNLS solution itself (0 where a column is all zero), which
    :meth:`predict` uses. ``r2`` is 1 - RSS/TSS of the unweighted predictions."""

    coef: list[float | None]
    counted: list[bool]
    identified: list[bool]
    rank: int
    r2: float | None
    points: int
    beta: Matrix
    null_space: Matrix
    scale: Matrix

    def confounded(self, k: int) -> list[int]:
        """The other columns that share a null vector with column ``k``: the mixes of them and
        ``k`` that the points cannot tell apart."""
        null = np.abs(self.null_space) > _NULL_TOLERANCE
        return [j for j in range(len(self.coef)) if j != k and bool((null[:, k] & null[:, j]).any())]

    def predict(self, row: Sequence[float]) -> float | None:
        """The fitted value for a point with these counts; None when the points do not determine
        it (the row is not a combination of the fitted points' rows)."""
        r = np.asarray(row, dtype=float)
        if not np.any(r):
            return 0.0
        scaled = r / self.scale
        if float(np.abs(self.null_space @ scaled).max(initial=0.0)) > _NULL_TOLERANCE * float(np.linalg.norm(scaled)):
            return None
        return float(r @ self.beta)


def fit_non_negative(
    x: Sequence[Sequence[float]], y: Sequence[float], *, relative: bool = False
) -> NonNegativeFit | None:
    """Non-negative least squares of ``y`` on the columns of ``x`` (no intercept), by
    ``scipy.optimize.nnls``; None without any point or any non-zero column. ``relative``
    minimises relative rather than absolute residuals (each point weighted by 1/y; points with
    y <= 0 are dropped), for points whose errors grow with their size."""
    xs, ys, w = _weighted(x, y, relative)
    if len(ys) == 0 or xs.shape[1] == 0 or not np.any(xs):
        return None
    beta, identified, null, scale = _solve(xs * w[:, None], ys * w)
    rss = float(((ys - xs @ beta) ** 2).sum())
    tss = float(((ys - ys.mean()) ** 2).sum())
    n, p = xs.shape
    return NonNegativeFit(
        coef=[float(beta[k]) if identified[k] else None for k in range(p)],
        counted=[bool(v) for v in np.any(xs != 0, axis=0)],
        identified=[bool(v) for v in identified],
        rank=p - len(null),
        r2=1.0 - rss / tss if tss > 0 and n > 1 else None,
        points=n,
        beta=beta,
        null_space=null,
        scale=scale,
    )


@dataclass(frozen=True)
class Bootstrap:
    """Per column of a non-negative fit, its percentile interval over fits to resampled points
    (as many points as there are, drawn with replacement): ``low`` and ``high`` over the
    resamples whose design identifies the column (None when none does); ``identified_share``,
    the share of resamples that identify it; ``zero_share``, the share of those that put it at
    exactly 0, its bound. ``values`` holds every resample's fitted coefficients (one row per
    resample, NaN where that resample does not identify the column), for quantities computed
    from several coefficients at once (the capacity plan evaluates itself on each row)."""

    low: list[float | None]
    high: list[float | None]
    identified_share: list[float]
    zero_share: list[float | None]
    resamples: int
    values: Matrix = field(default_factory=lambda: np.zeros((0, 0)), compare=False, repr=False)


def bootstrap_non_negative(
    x: Sequence[Sequence[float]],
    y: Sequence[float],
    *,
    relative: bool = False,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Bootstrap | None:
    """Percentile bootstrap of :func:`fit_non_negative`'s coefficients: ``resamples`` sets of
    points drawn with replacement from ``numpy.random.default_rng(seed)``, each fitted the same
    way; the interval holds the central ``level`` of the fitted values. None without points."""
    xs, ys, w = _weighted(x, y, relative)
    n, p = xs.shape
    if n == 0 or p == 0:
        return None
    xw, yw = xs * w[:, None], ys * w
    rng = np.random.default_rng(seed)
    values = np.full((resamples, p), np.nan)
    for b in range(resamples):
        pick = rng.integers(0, n, n)
        beta, identified, _, _ = _solve(xw[pick], yw[pick])
        values[b, identified] = beta[identified]
    tail = (1.0 - level) / 2 * 100
    low: list[float | None] = []
    high: list[float | None] = []
    identified_share: list[float] = []
    zero_share: list[float | None] = []
    for k in range(p):
        v = values[:, k][~np.isnan(values[:, k])]
        identified_share.append(len(v) / resamples)
        if len(v) == 0:
            low.append(None)
            high.append(None)
            zero_share.append(None)
            continue
        low.append(float(np.percentile(v, tail)))
        high.append(float(np.percentile(v, 100 - tail)))
        zero_share.append(float((v <= 0).mean()))
    return Bootstrap(low, high, identified_share, zero_share, resamples, values)


def leave_one_out_errors_pct(
    x: Sequence[Sequence[float]], y: Sequence[float], *, relative: bool = False
) -> list[float]:
    """For each point, fit on the others (:func:`fit_non_negative`) and return
    |predicted - measured| / measured x 100. Points measured as zero, and points the other
    points cannot predict (their counts are not a combination of the others'), are skipped."""
    errors: list[float] = []
    for i in range(len(y)):
        if y[i] == 0:
            continue
        rest = [j for j in range(len(y)) if j != i]
        f = fit_non_negative([x[j] for j in rest], [y[j] for j in rest], relative=relative)
        pred = f.predict(x[i]) if f is not None else None
        if pred is None:
            continue
        errors.append(abs(pred - y[i]) / abs(y[i]) * 100.0)
    return errors
