"""The statistics the derived tables need, with numpy only: Student's t quantile, ordinary least
squares with a confidence interval on the slope, non-negative least squares (Lawson-Hanson) with
intervals from the residual variance, and leave-one-out hold-out errors."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "LinearFit",
    "NonNegativeFit",
    "fit_line",
    "fit_non_negative",
    "leave_one_out_errors_pct",
    "median",
    "nnls",
    "t_cdf",
    "t_quantile",
]

Matrix = npt.NDArray[np.float64]


def median(values: Sequence[float]) -> float | None:
    """The median, None for no values."""
    return float(np.median(values)) if len(values) else None


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    tail = 0.5 * _betai(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``t_quantile(0.975, 10)``
    is 2.228...), by bisection on :func:`t_cdf` to about 1e-12."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


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


def nnls(a: Matrix, b: Matrix, max_iter: int | None = None) -> Matrix:
    """argmin ||a x - b|| subject to x >= 0 (Lawson and Hanson's active-set algorithm)."""
    m, n = a.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 10 * np.finfo(float).eps * max(m, n) * max(float(np.abs(a).sum(axis=0).max(initial=0.0)), 1.0)
    w = a.T @ (b - a @ x)
    for _ in range(max_iter or 3 * n + 10):
        if passive.all() or float(w[~passive].max()) <= tol:
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        s = np.zeros(n)
        while passive.any():
            s = np.zeros(n)
            s[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if float(s[passive].min()) > 0:
                break
            blocking = passive & (s <= 0)
            alpha = float(np.min(x[blocking] / (x[blocking] - s[blocking])))
            x = x + alpha * (s - x)
            passive &= x > tol
            x[~passive] = 0.0
        x = s
        w = a.T @ (b - a @ x)
    return x


@dataclass(frozen=True)
class NonNegativeFit:
    """Non-negative coefficients per column of the design; None where a column is all zero (not
    estimable from these trials). Intervals are ± t(0.975, n - p) x the standard error from the
    residual variance, None when there are no spare degrees of freedom."""

    coef: list[float | None]
    ci95_low: list[float | None]
    ci95_high: list[float | None]
    r2: float | None
    points: int


def fit_non_negative(
    x: Sequence[Sequence[float]], y: Sequence[float], *, relative: bool = False
) -> NonNegativeFit | None:
    """Non-negative least squares of ``y`` on the columns of ``x`` (no intercept); None without
    any point or any non-zero column. ``relative`` minimises relative rather than absolute
    residuals (each point weighted by 1/y; points with y <= 0 are dropped), for points whose
    errors grow with their size. ``r2`` is 1 - RSS/TSS of the unweighted predictions."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.ndim != 2 or len(xs) == 0:
        return None
    if relative:
        keep = ys > 0
        xs, ys = xs[keep], ys[keep]
        if len(xs) == 0:
            return None
    w = 1.0 / ys if relative else np.ones(len(ys))
    n, p_all = xs.shape
    xw, yw = xs * w[:, None], ys * w
    scale = np.sqrt((xw**2).sum(axis=0))
    used = scale > 0
    if not used.any():
        return None
    a = xw[:, used] / scale[used]
    beta = nnls(a, yw) / scale[used]
    rss_w = float(((yw - xw[:, used] @ beta) ** 2).sum())
    rss = float(((ys - xs[:, used] @ beta) ** 2).sum())
    tss = float(((ys - ys.mean()) ** 2).sum())
    r2 = 1.0 - rss / tss if tss > 0 and n > 1 else None
    p = int(used.sum())
    se: list[float | None] = [None] * p
    if n > p:
        cov = rss_w / (n - p) * np.linalg.pinv(a.T @ a)
        se = [math.sqrt(max(float(cov[i, i]), 0.0)) / float(scale[used][i]) for i in range(p)]
    t = t_quantile(0.975, n - p) if n > p else None
    coef: list[float | None] = [None] * p_all
    low: list[float | None] = [None] * p_all
    high: list[float | None] = [None] * p_all
    for k, col in enumerate(np.flatnonzero(used)):
        c = float(beta[k])
        coef[col] = c
        s = se[k]
        if s is not None and t is not None:
            low[col], high[col] = c - t * s, c + t * s
    return NonNegativeFit(coef, low, high, r2, n)


def leave_one_out_errors_pct(
    x: Sequence[Sequence[float]],
    y: Sequence[float],
    fit: Callable[[Sequence[Sequence[float]], Sequence[float]], NonNegativeFit | None] = fit_non_negative,
) -> list[float]:
    """For each point, fit on the others and return |predicted - measured| / measured x 100.
    Points measured as zero, and points whose fit leaves a column it uses unestimated, are
    skipped."""
    errors: list[float] = []
    for i in range(len(y)):
        if y[i] == 0:
            continue
        rest = [j for j in range(len(y)) if j != i]
        f = fit([x[j] for j in rest], [y[j] for j in rest])
        if f is None:
            continue
        if any(c is None and v != 0 for c, v in zip(f.coef, x[i], strict=True)):
            continue
        pred = sum((c or 0.0) * v for c, v in zip(f.coef, x[i], strict=True))
        errors.append(abs(pred - y[i]) / abs(y[i]) * 100.0)
    return errors
