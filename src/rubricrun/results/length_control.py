"""Length-controlled pairwise win rate: AlpacaEval 2's `length_controlled_minimal` GLM (tatsu-lab/alpaca_eval,
metrics/glm_winrate.py), P(a preferred) = logistic(theta + gamma * tanh(d / sd(d))), d = len_a - len_b, sd with
ddof=1 (pandas), fitted to a's fractional preferences by maximum likelihood; and the share of verdicts that went to
the longer answer. docs/judging.md ("Length-controlled win rate") is the reference, with the differences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

_MAX_ITER = 100
_TOL = 1e-12  # Newton stops when no coefficient moves more than this
_MAX_COEF = 30.0  # |coefficient| beyond this: the preferences are separated, the MLE does not exist


@dataclass(frozen=True, kw_only=True)
class LengthControlled:
    """a against b: the raw and the length-controlled win rate, and how often the longer answer won."""

    n: int  # comparisons used
    failures: int  # comparisons without a preference (judge error): left out
    win_rate: float | None  # mean preference (a tie counts half)
    lc_win_rate: float | None = None  # logistic(theta): the win rate predicted at zero length difference
    lc_se: float | None = None  # delta-method (sandwich) standard error of lc_win_rate
    theta: float | None = None  # the model term
    gamma: float | None = None  # the length term (positive: the longer answer is preferred)
    longer_share: float | None  # among decisive verdicts between answers of unequal length, the longer one's share
    longer_n: int  # those verdicts
    one_side_longer: bool = False  # a never shorter (or never longer): lc_win_rate extrapolates to zero difference
    reason: str | None = None  # why lc_win_rate is None


def _loss(beta: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """Negative log-likelihood of fractional targets y in [0, 1] under logistic(x @ beta)."""
    z = x @ beta
    return float(np.sum(np.logaddexp(0.0, z) - y * z))


def fit_logistic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, bool]:
    """Maximum-likelihood logistic regression of fractional y in [0, 1] on the columns of x (no intercept added):
    Newton's method with step halving. Returns (coefficients, converged); not converged when the preferences are
    separated (a coefficient runs off to infinity) or the Hessian is singular."""
    beta = np.zeros(x.shape[1])
    loss = _loss(beta, x, y)
    for _ in range(_MAX_ITER):
        p = 1.0 / (1.0 + np.exp(-(x @ beta)))
        hess = x.T @ (x * (p * (1.0 - p))[:, None])
        try:
            step = np.linalg.solve(hess, x.T @ (y - p))
        except np.linalg.LinAlgError:
            return beta, False
        t = 1.0
        new = beta + t * step
        new_loss = _loss(new, x, y)
        while t > 1e-10 and new_loss > loss + 1e-12 * abs(loss):
            t /= 2  # a full Newton step may overshoot far from the optimum
            new = beta + t * step
            new_loss = _loss(new, x, y)
        beta, loss = new, new_loss
        if np.max(np.abs(beta)) > _MAX_COEF:
            return beta, False
        if np.max(np.abs(t * step)) < _TOL:
            return beta, True
    return beta, False


def _sandwich_se_theta(x: np.ndarray, y: np.ndarray, beta: np.ndarray) -> float:
    """Robust (HC0) standard error of beta[0]: H^-1 (sum x x' (y-p)^2) H^-1, H the Fisher information."""
    p = 1.0 / (1.0 + np.exp(-(x @ beta)))
    bread = np.linalg.inv(x.T @ (x * (p * (1.0 - p))[:, None]))
    meat = x.T @ (x * ((y - p) ** 2)[:, None])
    return float(np.sqrt((bread @ meat @ bread)[0, 0]))


def longer_share(prefs: np.ndarray, len_a: np.ndarray, len_b: np.ndarray) -> tuple[float | None, int]:
    """Among verdicts that picked a side (preference != 0.5) between answers of unequal length, the share that
    picked the longer answer; and how many such verdicts there were."""
    decisive = (prefs != 0.5) & (len_a != len_b)
    n = int(decisive.sum())
    if n == 0:
        return None, 0
    went_longer = (prefs[decisive] > 0.5) == (len_a[decisive] > len_b[decisive])
    return float(went_longer.mean()), n


def _lc_fit(y: np.ndarray, delta: np.ndarray) -> dict[str, Any]:
    """LengthControlled's LC win rate, its se, theta and gamma; or the reason the fit has no answer."""
    if len(y) == 0:
        return {"reason": "no comparison has a preference"}
    sd = float(np.std(delta, ddof=1)) if len(delta) > 1 else 0.0
    if sd == 0.0:
        return {"reason": "the length difference does not vary: its effect cannot be separated"}
    x = np.column_stack([np.ones_like(delta), np.tanh(delta / sd)])
    beta, converged = fit_logistic(x, y)
    if not converged:
        return {"reason": "the preferences are separated (e.g. one side always won): no optimum"}
    lc = float(1.0 / (1.0 + np.exp(-beta[0])))
    se = lc * (1.0 - lc) * _sandwich_se_theta(x, y, beta)
    return {"lc_win_rate": lc, "lc_se": se, "theta": float(beta[0]), "gamma": float(beta[1])}


def length_controlled(prefs: Sequence[float | None], len_a: Sequence[int], len_b: Sequence[int]) -> LengthControlled:
    """a's raw and length-controlled win rate against b over the comparisons (see the module docstring)."""
    if not len(prefs) == len(len_a) == len(len_b):
        raise ValueError(f"prefs, len_a, len_b differ in length: {len(prefs)}, {len(len_a)}, {len(len_b)}")
    keep = [i for i, p in enumerate(prefs) if p is not None]
    y = np.array([prefs[i] for i in keep], dtype=float)
    if not np.all(np.isfinite(y)) or np.any((y < 0) | (y > 1)):
        raise ValueError("preferences must lie in [0, 1]")
    la = np.array([len_a[i] for i in keep], dtype=float)
    lb = np.array([len_b[i] for i in keep], dtype=float)
    share, share_n = longer_share(y, la, lb)
    return LengthControlled(
        n=len(y),
        failures=len(prefs) - len(y),
        win_rate=float(y.mean()) if len(y) else None,
        longer_share=share,
        longer_n=share_n,
        one_side_longer=bool(len(y)) and (bool(np.all(la >= lb)) or bool(np.all(la <= lb))),
        **_lc_fit(y, la - lb),
    )
