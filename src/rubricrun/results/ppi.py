"""Prediction-powered inference (PPI++) for a mean, in numpy: the reference is the `ppi-python` package (`ppi_py`,
Angelopoulos, Duchi, Zrnic, "PPI++: Efficient Prediction-Powered Inference", 2023), whose conventions these
functions follow exactly (tests/test_ppi.py checks them against it to 1e-6; it is a test-only dependency).

The data: `y`, a value computed from human labels on n units drawn at random; `yhat`, the judge's value of the same
n units; `yhat_unl`, the judge's value of the N other units. With the power-tuning weight lambda:

    estimate = lambda * mean(yhat_unl) + mean(y - lambda * yhat)
    se       = sqrt(var(lambda * yhat_unl) / N + var(y - lambda * yhat) / n)        (variances with ddof 0)
    CI       = estimate -/+ z * se, z the normal quantile (1.96 for 95 %)
    lambda   = cov(y, yhat) / ((1 + n / N) * var(yhat and yhat_unl together)), clipped to [0, 1]

(cov with ddof 0, the pooled variance with ddof 1, as ppi_py's `_calc_lam_glm` computes them for a mean). lambda 0
is the labels alone (the classical interval); lambda 1 is the original PPI. Where ppi_py divides by zero, here
lambda is 0: no unlabelled unit (N = 0), or a judge that gives every unit the same value.

The label budget is ppi_py's `ppi_mean_power` with the judge's verdicts already paid for (their cost ~0) and every
unit of the run counted (`n_max`): see `labels_needed`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

ALPHA = 0.05  # a 95 % interval


def z_of(alpha: float = ALPHA) -> float:
    """The two-sided normal quantile (scipy's norm.ppf(1 - alpha / 2), which ppi_py uses)."""
    return NormalDist().inv_cdf(1.0 - alpha / 2.0)


@dataclass(frozen=True)
class MeanCI:
    """An estimate of a mean with its normal interval. `lam`: the PPI weight (0 for the labels alone)."""

    estimate: float
    ci: tuple[float, float]
    se: float
    lam: float
    n: int  # labelled units
    N: int  # unlabelled units  # noqa: N815 - PPI's own name for it


def _arrays(*xs: object) -> list[np.ndarray]:
    return [np.asarray(x, dtype=np.float64).ravel() for x in xs]


def power_tuned_lambda(y: object, yhat: object, yhat_unl: object) -> float:
    """ppi_py's lambda for a mean (`_calc_lam_glm` with clip=True), 0 where it would divide by zero."""
    y, yhat, yhat_unl = _arrays(y, yhat, yhat_unl)
    n, N = len(y), len(yhat_unl)  # noqa: N806
    if n == 0 or N == 0 or n + N < 2:
        return 0.0
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    var = float(np.var(np.concatenate([yhat, yhat_unl]), ddof=1))
    if var <= 0.0:
        return 0.0
    return min(1.0, max(0.0, cov / ((1.0 + n / N) * var)))


def ppi_mean(y: object, yhat: object, yhat_unl: object, *, alpha: float = ALPHA, lam: float | None = None) -> MeanCI:
    """The PPI++ estimate of the mean of y over every unit, and its interval (ppi_py's `ppi_mean_pointestimate` and
    `ppi_mean_ci`, lambda power-tuned unless given). Needs n >= 1 labelled units."""
    y, yhat, yhat_unl = _arrays(y, yhat, yhat_unl)
    n, N = len(y), len(yhat_unl)  # noqa: N806
    if n == 0 or len(yhat) != n:
        raise ValueError(f"need as many judge values as labelled units (at least one): {n} labels, {len(yhat)}")
    if lam is None:
        lam = power_tuned_lambda(y, yhat, yhat_unl)
    rect = y - lam * yhat
    imputed = float(np.mean(lam * yhat_unl)) if N else 0.0
    estimate = imputed + float(np.mean(rect))
    var_imputed = float(np.var(lam * yhat_unl)) / N if N else 0.0
    se = math.sqrt(var_imputed + float(np.var(rect)) / n)
    z = z_of(alpha)
    return MeanCI(estimate, (estimate - z * se, estimate + z * se), se, lam, n, N)


def classical_mean(y: object, *, alpha: float = ALPHA) -> MeanCI:
    """The labels alone: their mean and the normal interval (ppi_py's `classical_mean_ci`: std with ddof 0)."""
    (arr,) = _arrays(y)
    return ppi_mean(arr, np.zeros_like(arr), np.empty(0), alpha=alpha, lam=0.0)


def ppi_corr(y: object, yhat: object) -> float:
    """ppi_py's `_get_ppi_corr` for a mean: the correlation (ddof 0) of the labels and the judge's values on the
    labelled units, capped at 1 - 1/n; 0 where either is constant."""
    y, yhat = _arrays(y, yhat)
    n = len(y)
    den = math.sqrt(float(np.var(y)) * float(np.var(yhat)))
    if n == 0 or den == 0.0:
        return 0.0
    return min(float(np.mean((y - y.mean()) * (yhat - yhat.mean()))) / den, 1.0 - 1.0 / n)


def labels_needed(y: object, yhat: object, units: int, half_width: float, *, alpha: float = ALPHA) -> int | None:
    """How many labelled units (in all, of `units`) bring the PPI interval to +/- `half_width`: ppi_py's
    `ppi_mean_power(Y, Yhat, cost_Y=1, cost_Yhat=~0, effective_n=n0, n_max=units)["n"]`, where n0 = (z sigma /
    half_width)^2 is the labels the classical interval would need (sigma the labels' std, ddof 0) and rho the PPI
    correlation: round(n0 (1 - rho^2) units / (units - rho^2 n0)). None when even labelling every unit falls short
    (n0 > units)."""
    y, yhat = _arrays(y, yhat)
    if half_width <= 0:
        raise ValueError(f"half_width must be positive, got {half_width}")
    n0 = float(np.var(y)) * (z_of(alpha) / half_width) ** 2
    if n0 > units:
        return None
    rho2 = ppi_corr(y, yhat) ** 2
    if rho2 == 0.0:
        return round(n0)
    return round(n0 * (1.0 - rho2) * units / (units - rho2 * n0))


def effective_labels(y: object, se: float) -> int | None:
    """How many labelled units alone (the classical interval, the labels' own spread) would give an interval as
    narrow as one with standard error `se`: var(y) / se^2, rounded. None when se is 0."""
    (arr,) = _arrays(y)
    return round(float(np.var(arr)) / se**2) if se > 0 else None
