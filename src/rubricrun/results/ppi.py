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

Below them, the types summary.json writes an anchored score with (results/anchor.py builds them,
results/summary_types.py holds them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from msgspec import Struct, field

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


# ---------------------------------------------------------------------------------------------------
# summary.json's anchored figures


class Estimate(Struct, frozen=True):
    """A figure with its 95 % interval."""

    estimate: float | None = None
    ci: tuple[float | None, float | None] = (None, None)


class LabelBudget(Struct, frozen=True):
    """ppi_py's `ppi_mean_power` for this run: the labelled responses an anchored 95 % interval of +/- `half_width`
    needs (`datasets[].label_half_width`), judged by the labels so far."""

    half_width: float = 0.05
    labels_needed: int | None = None  # labelled responses in all; None: even labelling every response falls short
    more: int | None = None  # beyond those labelled now


class JudgeOnLabels(Struct, frozen=True):
    """One judge's verdicts on the human-labelled items (tasks/judge_eval.py, the meta-evaluation's figures)."""

    items: int = 0  # labelled (response, criterion) items the judge gave a verdict on
    balanced_f1: float | None = None  # HealthBench's, each judge verdict against every human label of the item
    ci: tuple[float | None, float | None] = (None, None)  # bootstrap over items
    kappa: float | None = None  # Cohen's kappa against the item's majority human label
    kappa_ties: int = 0  # items whose raters split evenly: out of kappa
    leniency: float | None = None  # judge_met - human_met
    judge_met: float | None = None
    human_met: float | None = None
    failures: int = 0  # items whose verdict failed: out of every figure


class Anchored(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A score anchored to human labels by prediction-powered inference (results/anchor.py, results/ppi.py): PPI++
    over responses, the labelled ones with the humans' value and the judge's, the others with the judge's alone;
    the dataset's own transform (its clip) on the estimate and both ends. `note`: why there is no estimate."""

    estimate: float | None
    ci: tuple[float | None, float | None]
    n_labelled: int  # responses labelled in full (every criterion) that the judge-only score counts too
    n_unlabelled: int  # the other responses the judge-only score counts
    lam: float | None = field(name="lambda")  # the power-tuned weight, in [0, 1] (`lambda` in the file)
    classical: Estimate  # the labelled responses alone
    judge_only: Estimate  # the judge's score as the dataset reports it (its headline and CI)
    judge_outside: bool  # the judge-only score lies outside the anchored interval
    effective_labels: int | None  # labelled responses alone that would give an interval as narrow
    budget: LabelBudget | None = None
    rating: Estimate | None = None  # graded scales: the estimate on the scale itself
    judges: dict[str, JudgeOnLabels]
    note: str | None = None


class AnchoredDiff(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """a minus b anchored to human labels: PPI++ over the response pairs (same example, turn and sample) both have,
    the pairs both labelled with the humans' difference, beside the judge-only paired difference."""

    a: str
    b: str
    estimate: float | None
    ci: tuple[float | None, float | None]
    n_labelled: int
    n_unlabelled: int
    lam: float | None = field(name="lambda")
    judge_only: Estimate  # the paired bootstrap over examples (the leaderboard's noise test)
    note: str | None = None


class LabelCounts(Struct, frozen=True):
    """A dataset's labels file, as the run read it: what entered the anchored scores and what was left out."""

    file: str = ""
    rows: int = 0  # label rows with a verdict
    blank: int = 0  # rows with no verdict yet (an unfilled sheet row)
    superseded: int = 0  # rows replaced by a later row of the same rater on the same item
    items: int = 0  # labelled (response, criterion) items of this run's responses
    ties: int = 0  # items whose raters split evenly: left out
    responses: int = 0  # responses labelled in full that enter an anchored score
    partial: int = 0  # responses with some but not all of their criteria labelled: left out
    not_scored: int = 0  # responses labelled in full that the judge-only score does not count (failed, errors)
    unknown_response: int = 0  # items naming a response this dataset does not have
    unknown_criterion: int = 0  # items naming a criterion its response is not scored on
    pairs: int = 0  # pairwise comparisons with a human preference
    unknown_pair: int = 0  # preferences naming a comparison this dataset does not have
