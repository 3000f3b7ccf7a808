"""results/ppi.py against ppi-python (`ppi_py`, the reference implementation of PPI++, a test-only dependency): the
estimate, its 95 % interval, the classical interval and the label budget equal ppi_py's on the same arrays to 1e-6,
over random binary, continuous and graded values; and the cases where ppi_py divides by zero."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rubricrun.results import ppi

ppi_py = pytest.importorskip("ppi_py")


def _draw(rng: np.random.Generator, kind: int, n: int, N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # noqa: N803
    """Labels Y and a judge's Yhat of n + N units: binary with a judge right 80 % of the time, continuous with a
    lenient judge (+0.1 and noise, clipped), or two unrelated 1-5 ratings normalized."""
    if kind == 0:
        y = rng.random(n + N) < 0.5
        yhat = np.where(rng.random(n + N) < 0.8, y, ~y).astype(float)
        y = y.astype(float)
    elif kind == 1:
        y = rng.random(n + N)
        yhat = np.clip(y + rng.normal(0.1, 0.2, n + N), 0, 1)
    else:
        y = (rng.integers(1, 6, n + N) - 1) / 4
        yhat = (rng.integers(1, 6, n + N) - 1) / 4
    return y[:n], yhat[:n], yhat[n:]


def _ppi_py(y: np.ndarray, yhat: np.ndarray, unl: np.ndarray) -> tuple[float, float, float]:
    est = float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, unl)))
    lo, hi = ppi_py.ppi_mean_ci(y, yhat, unl, alpha=0.05)
    return est, float(np.squeeze(lo)), float(np.squeeze(hi))


def test_estimate_and_interval_equal_ppi_python() -> None:
    rng = np.random.default_rng(31)
    worst, lams = 0.0, set()
    for t in range(240):
        y, yhat, unl = _draw(rng, t % 3, int(rng.integers(2, 80)), int(rng.integers(1, 600)))
        m = ppi.ppi_mean(y, yhat, unl)
        est, lo, hi = _ppi_py(y, yhat, unl)
        worst = max(worst, abs(m.estimate - est), abs(m.ci[0] - lo), abs(m.ci[1] - hi))
        lams.add(0.0 if m.lam == 0 else 1.0 if m.lam == 1 else 0.5)
        c = ppi.classical_mean(y)
        clo, chi = ppi_py.classical_mean_ci(y, alpha=0.05)
        worst = max(worst, abs(c.estimate - y.mean()), abs(c.ci[0] - clo), abs(c.ci[1] - chi))
    assert worst < 1e-6
    assert lams == {0.0, 0.5, 1.0}  # lambda clipped at both ends, and inside, among the draws


def test_a_given_lambda_equals_ppi_python() -> None:
    rng = np.random.default_rng(7)
    y, yhat, unl = _draw(rng, 1, 40, 300)
    for lam in (0.0, 0.3, 1.0):
        m = ppi.ppi_mean(y, yhat, unl, lam=lam)
        lo, hi = ppi_py.ppi_mean_ci(y, yhat, unl, alpha=0.05, lam=lam)
        assert m.estimate == pytest.approx(float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, unl, lam=lam))))
        assert m.ci == pytest.approx((float(np.squeeze(lo)), float(np.squeeze(hi))), abs=1e-9)


def test_lambda_by_hand() -> None:
    """Y = [1, 0, 1, 1], Yhat = [1, 0, 1, 0], Yhat_unl = [1, 1]: cov (ddof 0) = 0.125, the six judge values' variance
    (ddof 1) = 4/15, 1 + n/N = 3: lambda = 0.125 / 0.8 = 0.15625."""
    m = ppi.ppi_mean([1, 0, 1, 1], [1, 0, 1, 0], [1, 1])
    assert m.lam == pytest.approx(0.15625)
    assert m.estimate == pytest.approx(0.15625 * 1 + (3 - 0.15625 * 2) / 4)
    z = 1.959963984540054
    se = math.sqrt(0 + np.var(np.array([1, 0, 1, 1]) - 0.15625 * np.array([1, 0, 1, 0])) / 4)
    assert m.ci == pytest.approx((m.estimate - z * se, m.estimate + z * se))


def test_where_ppi_python_divides_by_zero_lambda_is_zero() -> None:
    """No unlabelled unit, or a judge that gives every unit the same value: the labels alone."""
    y = np.array([1.0, 0.0, 1.0, 1.0])
    classical = ppi.classical_mean(y)
    for yhat, unl in ((np.array([1.0, 0.0, 0.0, 1.0]), np.empty(0)), (np.ones(4), np.ones(10))):
        m = ppi.ppi_mean(y, yhat, unl)
        assert m.lam == 0.0 and m.estimate == classical.estimate and m.ci == classical.ci
    with np.errstate(all="ignore"):  # ppi_py: 0 / 0 for the constant judge
        assert math.isnan(float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, np.ones(4), np.ones(10)))))


def test_the_label_budget_equals_ppi_mean_power() -> None:
    """labels_needed is ppi_mean_power with predictions already paid for (cost ~0) and every unit counted (n_max)."""
    rng = np.random.default_rng(3)
    checked = 0
    for t in range(150):
        y, yhat, unl = _draw(rng, t % 3, int(rng.integers(5, 60)), int(rng.integers(50, 2000)))
        units = len(y) + len(unl)
        for h in (0.02, 0.05, 0.1):
            n0 = np.var(y) * (ppi.z_of() / h) ** 2
            got = ppi.labels_needed(y, yhat, units, h)
            if n0 > units:
                assert got is None
                continue
            want = ppi_py.ppi_mean_power(y, yhat, 1.0, 1e-12, effective_n=n0, n_max=units)["n"]
            assert got == want
            checked += 1
    assert checked > 100


def test_the_budget_by_hand_and_effective_labels() -> None:
    """Y = 1, 0, 1, 0, ... (std 0.5) and Yhat = 1, 0, 1, 1, ...: cov 0.125, var(Yhat) 0.1875, rho^2 = 1/3. The labels
    alone need n0 = (1.96 * 0.5 / 0.1)^2 = 96.04 for +/-0.1; with the judge, of M = 1000 units, n0 (1 - rho^2) M /
    (M - rho^2 n0) = 66.14: 66 labels."""
    y = np.array([1.0, 0.0] * 8)
    yhat = np.array([1.0, 0.0, 1.0, 1.0] * 4)
    assert ppi.ppi_corr(y, yhat) ** 2 == pytest.approx(1 / 3)
    assert ppi.labels_needed(y, yhat, 1000, 0.1) == 66
    assert ppi.labels_needed(y, np.ones(16), 1000, 0.1) == 96  # an uninformative judge: the labels alone
    assert ppi.labels_needed(y, yhat, 50, 0.1) is None  # even all 50 labelled fall short of n0 = 96
    m = ppi.ppi_mean(y, yhat, np.ones(100))
    assert ppi.effective_labels(y, m.se) == round(0.25 / m.se**2)
    assert ppi.effective_labels(y, ppi.classical_mean(y).se) == 16  # the labels alone are worth themselves
