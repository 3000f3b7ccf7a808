"""results/pairwise.py's length control against AlpacaEval's own code.

The pinned figures came from tatsu-lab/alpaca_eval at cd543a14 (src/alpaca_eval/metrics/glm_winrate.py), run in a
throwaway venv (scikit-learn 1.9.1, pandas 3.1.1, patsy 1.0.3; the same figures with scikit-learn 1.5.2, pandas
2.2.3) on the tables below, with a = AlpacaEval's generator_2 / output_2 (the model), b = generator_1 / output_1
(the baseline), preference 1 -> 2, 0.5 -> 1.5, 0 -> 1, and `hf_hub_download` patched to a dummy df_gamed.csv
(the minimal formula does not read instruction_difficulty). Two figures per table:

- AE_UNPENALIZED: `fit_LogisticRegressionCV(..., is_ytrue_proba=True, n_splits=0, C=1e10, tol=1e-12,
  max_iter=100000)` on `_get_featurized_data(...)`'s design, i.e. their fit with the penalty turned off, which is
  the maximum-likelihood fit this module computes: ours must match it.
- AE_RELEASED: `get_length_controlled_winrate(df, glm_name="length_controlled_minimal", save_weights_dir=None)`,
  their L1-penalized, cross-validated fit: recorded to show how far the penalty moves the figure (see ExecPlan 015).
"""

from __future__ import annotations

import numpy as np
import pytest

from rubricrun.results.pairwise import fit_logistic, length_controlled, longer_share

# 40 comparisons: (a's preference, len a, len b); drawn once with PCG64(22), the longer answer favoured.
TABLE_40 = [
    (1.0, 943, 490), (1.0, 1137, 179), (0.0, 98, 594), (0.0, 447, 1033), (0.5, 139, 137), (1.0, 264, 760),
    (1.0, 465, 614), (0.0, 446, 322), (1.0, 476, 551), (0.0, 738, 493), (1.0, 331, 516), (1.0, 513, 154),
    (0.5, 572, 827), (1.0, 1184, 1030), (0.0, 835, 973), (1.0, 1062, 741), (1.0, 781, 202), (0.0, 128, 1041),
    (1.0, 993, 549), (0.5, 211, 288), (1.0, 763, 817), (0.0, 551, 1136), (0.0, 310, 889), (0.0, 99, 775),
    (0.0, 283, 331), (0.0, 1064, 863), (0.0, 474, 1126), (0.0, 1069, 1034), (0.0, 256, 546), (1.0, 1004, 744),
    (1.0, 1080, 605), (1.0, 92, 290), (0.0, 345, 743), (1.0, 841, 997), (0.0, 99, 657), (0.0, 382, 270),
    (0.0, 215, 455), (0.0, 736, 854), (0.0, 1168, 1013), (0.5, 545, 439),
]  # fmt: skip


def _run(rows: list[tuple[float, int, int]]):
    return length_controlled([p for p, _, _ in rows], [a for _, a, _ in rows], [b for _, _, b in rows])


def test_table_40_matches_alpaca_eval() -> None:
    r = _run(TABLE_40)
    # AlpacaEval: win_rate 45.0, n_wins 16, n_wins_base 20, n_draws 4
    assert r.win_rate * 100 == pytest.approx(45.0, abs=1e-12) and r.n == 40
    # AE_UNPENALIZED: LC 48.79647204299108, coef_ [-1.6823575293811632, -0.04815041903717654] for
    # [tanh(std_delta_len), not_gamed_baseline]; their delta is len b - len a, so gamma's sign flips here.
    assert r.lc_win_rate * 100 == pytest.approx(48.79647204299108, abs=1e-7)
    assert r.theta == pytest.approx(-0.04815041903717654, abs=1e-9)
    assert r.gamma == pytest.approx(1.6823575293811632, abs=1e-8)
    # AE_RELEASED: length_controlled_winrate 49.6638225340611 (CV chose C = 2.7825594, coef_ [-1.5572, -0.0134]),
    # lc_standard_error 0.0 (the standard error of 40 identical predictions). Ours reports a delta-method se
    # instead; a 2,000-resample bootstrap of this table gave a standard deviation of 0.0938 for lc_win_rate.
    assert r.lc_se == pytest.approx(0.08473355843424674, rel=1e-6)
    assert 0.06 < r.lc_se < 0.12
    # 36 decisive verdicts (4 ties), 23 of them to the longer answer
    assert (r.longer_share, r.longer_n) == (pytest.approx(23 / 36), 36)
    assert not r.one_side_longer and r.failures == 0 and r.reason is None


def _table_805() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """805 comparisons (AlpacaEval's size), drawn with PCG64(1)."""
    rng = np.random.Generator(np.random.PCG64(1))
    la, lb = rng.integers(80, 2000, 805), rng.integers(80, 2000, 805)
    p = 1 / (1 + np.exp(-(0.6 + 1.2 * np.tanh((la - lb) / 600))))
    u = rng.random(805)
    return np.where(u < p - 0.05, 1.0, np.where(u < p + 0.05, 0.5, 0.0)), la, lb


def test_table_805_matches_alpaca_eval() -> None:
    pref, la, lb = _table_805()
    assert (pref[:5].tolist(), la[:5].tolist(), lb[:5].tolist()) == (
        [1.0, 0.0, 0.0, 1.0, 1.0],
        [988, 1062, 1529, 1904, 146],
        [1320, 1981, 615, 386, 1445],
    )  # the same draws as in AlpacaEval's run
    r = length_controlled(pref.tolist(), la.tolist(), lb.tolist())
    assert r.win_rate * 100 == pytest.approx(61.86335403726708, abs=1e-10)  # AlpacaEval's win_rate
    assert r.lc_win_rate * 100 == pytest.approx(64.68238609742558, abs=1e-7)  # AE_UNPENALIZED
    assert (r.theta, r.gamma) == (pytest.approx(0.6051071079344439, abs=1e-9), pytest.approx(1.4132671426247763))
    # AE_RELEASED 64.60584341490917: at this size the penalty moves the figure by 0.08 points
    assert abs(r.lc_win_rate * 100 - 64.60584341490917) < 0.1


def test_all_ties() -> None:
    # AlpacaEval: win_rate 50.0, LC 50.0 (both fits), coef_ [0, 0]
    r = length_controlled([0.5] * 6, [100, 250, 80, 400, 90, 300], [200, 100, 120, 150, 95, 310])
    assert (r.win_rate, r.lc_win_rate, r.theta, r.gamma, r.lc_se) == (0.5, 0.5, 0.0, 0.0, 0.0)
    assert (r.longer_share, r.longer_n) == (None, 0)


def test_one_side_always_longer() -> None:
    # a is longer in every comparison: the LC win rate extrapolates to zero length difference.
    # AlpacaEval: win_rate 68.75; AE_UNPENALIZED 29.83713754671709 (coef_ [-7.245042768102964, -0.8550653021510188]);
    # AE_RELEASED 34.58094975173609.
    prefs = [1, 0, 1, 0.5, 1, 1, 0, 1]
    r = length_controlled(prefs, [300, 220, 500, 410, 900, 260, 150, 700], [100, 200, 120, 400, 300, 250, 140, 200])
    assert r.win_rate == 0.6875 and r.one_side_longer
    assert r.lc_win_rate * 100 == pytest.approx(29.83713754671709, abs=1e-6)
    assert r.theta == pytest.approx(-0.8550653021510188, abs=1e-8) and r.gamma == pytest.approx(7.245042768102964)
    assert (r.longer_share, r.longer_n) == (pytest.approx(5 / 7), 7)  # the tie is not a verdict for either side


def test_no_answer_is_named_never_guessed() -> None:
    sep = length_controlled([1, 1, 1], [3, 4, 5], [1, 2, 2])  # a always won: no finite optimum
    assert sep.lc_win_rate is None and "separated" in sep.reason and sep.win_rate == 1.0
    flat = length_controlled([1, 0, None], [3, 3, 5], [1, 1, 2])  # one failure; the two left differ by 2 each
    assert flat.lc_win_rate is None and "does not vary" in flat.reason and (flat.n, flat.failures) == (2, 1)
    none = length_controlled([None, None], [1, 2], [2, 1])
    assert (none.n, none.failures, none.win_rate, none.lc_win_rate) == (0, 2, None, None)
    assert none.reason == "no comparison has a preference" and not none.one_side_longer


def test_failures_are_left_out() -> None:
    with_errors = _run([*TABLE_40, (None, 10, 5000), (None, 5000, 10)])
    assert with_errors.failures == 2 and with_errors.lc_win_rate == _run(TABLE_40).lc_win_rate


def test_bad_input() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        length_controlled([1.5], [1], [2])
    with pytest.raises(ValueError, match="differ in length"):
        length_controlled([1.0, 0.0], [1], [2])


def test_fit_logistic_recovers_known_coefficients() -> None:
    # y set to the model's own probabilities: the fit's optimum is exactly the generating coefficients
    x = np.column_stack([np.ones(50), np.linspace(-1, 1, 50)])
    y = 1 / (1 + np.exp(-(x @ np.array([0.3, -1.2]))))
    beta, converged = fit_logistic(x, y)
    assert converged and beta == pytest.approx([0.3, -1.2], abs=1e-10)


def test_longer_share_counts_only_decisive_unequal_verdicts() -> None:
    share, n = longer_share(np.array([1.0, 0.0, 0.5, 1.0]), np.array([10, 10, 10, 5]), np.array([5, 5, 5, 5]))
    assert (share, n) == (0.5, 2)
