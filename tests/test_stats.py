"""Tests for rubricrun.stats against numbers computed by hand (the arithmetic is written out in comments)."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from oracles import fleiss_kappa, krippendorff_alpha_nominal, leaderboard, percent_agreement

from rubricrun.judging.rubric import majority_vote
from rubricrun.results.stats import (
    mean_ci,
    paired_diff,
    rate,
    resample_means,
)

# ---------------------------------------------------------------- mean_ci


def test_mean_ci_empty_and_single() -> None:
    assert mean_ci([]) == {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    one = mean_ci([0.7])
    assert one["n"] == 1
    assert one["mean"] == one["ci_low"] == one["ci_high"] == 0.7


def test_mean_ci_mean_by_hand() -> None:
    # values 1, 2, 3, 4: mean 2.5.
    out = mean_ci([1.0, 2.0, 3.0, 4.0])
    assert out["n"] == 4
    assert out["mean"] == 2.5
    assert 1.0 <= out["ci_low"] < 2.5 < out["ci_high"] <= 4.0


def test_mean_ci_resamples_with_replacement() -> None:
    # values 0, 1 (n = 2): a resample draws each value with replacement, so its mean is 0 (prob 1/4),
    # 0.5 (prob 1/2) or 1 (prob 1/4). The 2.5% and 97.5% quantiles therefore fall on 0 and 1, and the bootstrap
    # std of the mean is sqrt(population var / n) = sqrt(0.25 / 2) = 0.35355. Resampling without replacement
    # would give every resample mean 0.5 and a zero-width CI.
    out = mean_ci([0.0, 1.0], n_boot=20000, seed=3)
    assert out["mean"] == 0.5
    assert out["ci_low"] == 0.0
    assert out["ci_high"] == 1.0
    assert statistics.stdev(resample_means([0.0, 1.0], 20000, 3)) == pytest.approx(math.sqrt(0.125), abs=0.01)


def test_mean_ci_constant_sample_is_exact() -> None:
    out = mean_ci([0.1] * 7, seed=5)
    assert out["mean"] == out["ci_low"] == out["ci_high"] == pytest.approx(0.1)
    assert out["ci_low"] == out["mean"] == out["ci_high"]


def test_mean_ci_reproducible_and_seed_dependent() -> None:
    rng = random.Random(11)
    values = [rng.random() for _ in range(40)]
    assert mean_ci(values, seed=1) == mean_ci(values, seed=1)
    a, b = mean_ci(values, seed=1), mean_ci(values, seed=2)
    assert a["mean"] == b["mean"]  # the point estimate does not depend on the seed
    assert (a["ci_low"], a["ci_high"]) != (b["ci_low"], b["ci_high"])


def test_mean_ci_leaves_global_rng_alone() -> None:
    random.seed(123)
    expected = random.random()
    random.seed(123)
    mean_ci([0.0, 1.0, 0.5, 0.25])
    assert random.random() == expected


def test_mean_ci_contains_mean_and_narrows_with_more_data() -> None:
    rng = random.Random(42)
    small = [rng.gauss(0.6, 0.2) for _ in range(10)]
    large = [rng.gauss(0.6, 0.2) for _ in range(1000)]
    for values in (small, large):
        out = mean_ci(values)
        assert out["ci_low"] <= out["mean"] <= out["ci_high"]
    ws = mean_ci(small)
    wl = mean_ci(large)
    # Width shrinks roughly like 1/sqrt(n): 100x the data, about a tenth of the width.
    assert (wl["ci_high"] - wl["ci_low"]) < 0.5 * (ws["ci_high"] - ws["ci_low"])


def test_mean_ci_level_widens_interval() -> None:
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    narrow = mean_ci(values, level=0.5)
    wide = mean_ci(values, level=0.99)
    assert wide["ci_low"] < narrow["ci_low"] < narrow["ci_high"] < wide["ci_high"]


@pytest.mark.parametrize("kwargs", [{"n_boot": 0}, {"level": 0.0}, {"level": 1.0}])
def test_mean_ci_rejects_bad_args(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        mean_ci([1.0, 2.0], **kwargs)


def test_mean_ci_rejects_nan() -> None:
    with pytest.raises(ValueError):
        mean_ci([1.0, float("nan")])


# ---------------------------------------------------------------- paired_diff


def test_paired_diff_counts_by_hand() -> None:
    # Shared ids w, x, y, z ("only_a" and "only_b" are ignored). Diffs a - b:
    #   w: 1.0 - 0.5 = 0.5 (win), x: 1 - 0 = 1 (win), y: 0 - 1 = -1 (loss), z: 0.5 - 0.5 = 0 (tie)
    # wins 2, ties 1, losses 1; mean_diff = (0.5 + 1 - 1 + 0) / 4 = 0.125.
    a = {"x": 1.0, "y": 0.0, "z": 0.5, "w": 1.0, "only_a": 1.0}
    b = {"x": 0.0, "y": 1.0, "z": 0.5, "w": 0.5, "only_b": 0.0}
    out = paired_diff(a, b)
    assert (out["n"], out["wins"], out["ties"], out["losses"]) == (4, 2, 1, 1)
    assert out["mean_diff"] == pytest.approx(0.125)
    assert out["ci_low"] < 0.0 < out["ci_high"]  # a resample of just "y" has mean -1, of just "x" +1
    assert out["significant"] is False


def test_paired_diff_tie_eps() -> None:
    a = {"p": 0.5 + 1e-12, "q": 0.6}
    b = {"p": 0.5, "q": 0.5}
    out = paired_diff(a, b)
    assert (out["wins"], out["ties"], out["losses"]) == (1, 1, 0)
    out = paired_diff(a, b, tie_eps=0.2)
    assert (out["wins"], out["ties"], out["losses"]) == (0, 2, 0)
    # |diff| == tie_eps is a tie (0.75 - 0.5 = 0.25 and 0.25 - 0.5 = -0.25 exactly in binary floating point).
    out = paired_diff({"p": 0.75, "q": 0.25, "r": 1.0}, {"p": 0.5, "q": 0.5, "r": 0.5}, tie_eps=0.25)
    assert (out["wins"], out["ties"], out["losses"]) == (1, 2, 0)


def test_paired_diff_dominating_candidate_is_significant_and_mirrors() -> None:
    rng = random.Random(7)
    b = {f"ex{i}": rng.random() * 0.5 for i in range(25)}
    a = {k: v + 0.1 + rng.random() * 0.3 for k, v in b.items()}  # a beats b on every example
    ab = paired_diff(a, b)
    assert (ab["wins"], ab["ties"], ab["losses"]) == (25, 0, 0)
    assert ab["ci_low"] > 0.0
    assert ab["significant"] is True
    ba = paired_diff(b, a)
    assert (ba["wins"], ba["ties"], ba["losses"]) == (0, 0, 25)
    assert ba["ci_high"] < 0.0 and ba["significant"] is True
    # Same seed, same resampled ids: the mirrored CI is exactly the negated one.
    assert ba["ci_low"] == pytest.approx(-ab["ci_high"])
    assert ba["ci_high"] == pytest.approx(-ab["ci_low"])


def test_paired_diff_of_few_distinct_values_mirrors_too() -> None:
    """0/1 scores resample as counts per distinct difference (stats.resample_means): the mirrored comparison draws
    the same counts, so its CI is the negated one."""
    rng = random.Random(8)
    a = {f"ex{i:03d}": float(rng.random() < 0.6) for i in range(200)}
    b = {k: float(rng.random() < 0.4) for k in a}
    ab, ba = paired_diff(a, b), paired_diff(b, a)
    assert ab["significant"] and ab["ci_low"] < ab["mean_diff"] < ab["ci_high"]
    assert (ba["ci_low"], ba["ci_high"]) == (
        pytest.approx(-ab["ci_high"], abs=1e-12),
        pytest.approx(-ab["ci_low"], abs=1e-12),
    )


def test_paired_diff_resamples_ids_jointly() -> None:
    # Scores vary a lot across examples (0..99) but a - b is exactly 0.01 on every example. A paired bootstrap
    # resamples ids jointly, so every resample's mean diff is 0.01 and the CI is [0.01, 0.01]; resampling a and b
    # independently would give a CI about +-11 wide that includes 0.
    b = {str(i): float(i) for i in range(100)}
    a = {k: v + 0.01 for k, v in b.items()}
    out = paired_diff(a, b)
    assert out["ci_low"] == pytest.approx(0.01)
    assert out["ci_high"] == pytest.approx(0.01)
    assert out["significant"] is True


def test_paired_diff_independent_of_mapping_order() -> None:
    rng = random.Random(2)
    a = {f"e{i}": rng.random() for i in range(30)}
    b = {f"e{i}": rng.random() for i in range(30)}
    a_rev = dict(reversed(list(a.items())))
    assert paired_diff(a, b, seed=4) == paired_diff(a_rev, b, seed=4)


def test_paired_diff_no_or_one_shared_example() -> None:
    none = paired_diff({"a": 1.0}, {"b": 0.0})
    assert none["n"] == 0 and none["mean_diff"] is None and none["ci_low"] is None and none["significant"] is False
    one = paired_diff({"a": 1.0}, {"a": 0.0})
    assert one["n"] == 1 and one["mean_diff"] == 1.0 and one["ci_low"] == one["ci_high"] == 1.0
    assert one["significant"] is False  # one example: no claim


# ---------------------------------------------------------------- leaderboard


def test_leaderboard_order_and_within_noise_of() -> None:
    ids = [f"q{i}" for i in range(30)]
    # A: 1 everywhere (mean 1). B: like A but 0 on q0, q1 (mean 28/30). C: 0.2 everywhere (mean 0.2).
    # A - B: diff 1 on two ids, 0 elsewhere. A resample misses both ids with prob (28/30)^30 = e^(30 ln(28/30))
    #   = e^-2.07 = 0.126 > 0.025, so the 2.5% quantile is 0: the CI includes 0 -> A, B within noise.
    # A - C: 0.8 on every id -> CI [0.8, 0.8], separated. B - C: 0.8 on 28 ids, -0.2 on q0, q1; a resample with
    #   k draws of q0/q1 has mean (0.8 (30 - k) - 0.2 k) / 30, <= 0 only when k >= 24, which has a negligible
    #   probability -> CI > 0, separated.
    per = {
        "C": {i: 0.2 for i in ids},
        "B": {i: (0.0 if i in ("q0", "q1") else 1.0) for i in ids},
        "A": {i: 1.0 for i in ids},
    }
    rows = leaderboard(per)
    assert [r["candidate"] for r in rows] == ["A", "B", "C"]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert [r["score"] for r in rows] == pytest.approx([1.0, 28 / 30, 0.2])
    assert [r["n"] for r in rows] == [30, 30, 30]
    assert rows[0]["within_noise_of"] == ("B",)
    assert rows[1]["within_noise_of"] == ("A",)
    assert rows[2]["within_noise_of"] == ()
    for r in rows:
        assert r["ci_low"] <= r["score"] <= r["ci_high"]
    assert set(rows[0]) == {"rank", "candidate", "score", "ci_low", "ci_high", "n", "within_noise_of"}


def test_leaderboard_ties_share_rank_and_empty_goes_last() -> None:
    per = {
        "empty": {},
        "y": {"a": 0.5, "b": 0.5},
        "x": {"a": 0.5, "b": 0.5},
        "top": {"a": 1.0, "b": 0.9},
    }
    rows = leaderboard(per)
    assert [r["candidate"] for r in rows] == ["top", "x", "y", "empty"]
    assert [r["rank"] for r in rows] == [1, 2, 2, 4]
    assert rows[-1]["score"] is None and rows[-1]["n"] == 0
    # x and y are identical: their diff CI is [0, 0], within noise.
    assert "y" in rows[1]["within_noise_of"]
    # With no shared ids nothing separates "empty" from anyone.
    assert rows[-1]["within_noise_of"] == ("top", "x", "y")


def test_leaderboard_reproducible() -> None:
    rng = random.Random(9)
    per = {c: {f"e{i}": rng.random() for i in range(20)} for c in ("m1", "m2", "m3")}
    assert leaderboard(per, seed=3) == leaderboard(per, seed=3)


# ---------------------------------------------------------------- majority_vote


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        (["met", "met", "not_met"], "met"),
        (["not_met", "not_met", "met"], "not_met"),
        (["met", "not_met"], "error"),  # tie
        (["met", "not_met", "error"], "error"),  # tie once the error vote is ignored
        (["met", "error", "error"], "met"),  # errors ignored: 1 valid vote, a strict majority
        (["not_met", "error"], "not_met"),
        (["error", "error"], "error"),  # no valid vote
        ([], "error"),
    ],
)
def test_majority_vote(votes: list[str], expected: str) -> None:
    assert majority_vote(votes) == expected


# ---------------------------------------------------------------- percent_agreement


def test_percent_agreement_by_hand() -> None:
    # item 1: met, met, not_met -> 3 pairs, 1 agreeing (met-met) -> 1/3
    # item 2: met, met -> 1 pair, agreeing -> 1
    # item 3: one rating -> dropped
    # mean over items 1, 2: (1/3 + 1) / 2 = 2/3
    items = [["met", "met", "not_met"], ["met", "met"], ["not_met"]]
    assert percent_agreement(items) == pytest.approx(2 / 3)
    # 4 raters split 2/2: 6 pairs, 2 agreeing -> 1/3
    assert percent_agreement([["met", "met", "not_met", "not_met"]]) == pytest.approx(1 / 3)
    assert percent_agreement([["met"], []]) is None
    assert percent_agreement([]) is None


# ---------------------------------------------------------------- fleiss_kappa


def _from_counts(row: list[int], labels: list[int]) -> list[int]:
    """An item's ratings list from a row of per-category counts."""
    return [label for label, count in zip(labels, row, strict=True) for _ in range(count)]


def test_fleiss_kappa_wikipedia_example() -> None:
    # https://en.wikipedia.org/wiki/Fleiss%27_kappa worked example: 10 subjects, 14 raters, 5 categories.
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    # Column totals 20, 28, 39, 21, 32 (sum 140 = 10 * 14).
    # P_e = (20^2 + 28^2 + 39^2 + 21^2 + 32^2) / 140^2 = (400 + 784 + 1521 + 441 + 1024) / 19600 = 4170 / 19600.
    # P_i = (sum_j n_ij^2 - 14) / (14 * 13); the numerators sum_j n_ij^2 - 14 are
    #   196-14=182, 60-14=46, 70-14=56, 94-14=80, 74-14=60, 98-14=84, 58-14=44, 46-14=32, 66-14=52, 66-14=52
    #   -> total 688, so P_bar = 688 / (182 * 10) = 688 / 1820 = 0.378022.
    # kappa = (688/1820 - 4170/19600) / (1 - 4170/19600); over the common denominator 25480:
    #   (9632 - 5421) / (25480 - 5421) = 4211 / 20059 = 0.209930.
    labels = [1, 2, 3, 4, 5]
    items = [_from_counts(row, labels) for row in table]
    kappa = fleiss_kappa(items, categories=labels)
    assert kappa == pytest.approx(4211 / 20059)
    assert round(kappa, 3) == 0.210


def test_fleiss_kappa_binary_by_hand() -> None:
    # 3 items, 2 raters: (met, met), (met, not_met), (not_met, not_met).
    # P_i = 1, 0, 1 -> P_bar = 2/3. p_met = 3/6 = 0.5, p_not = 0.5 -> P_e = 0.5.
    # kappa = (2/3 - 1/2) / (1 - 1/2) = 1/3.
    items = [["met", "met"], ["met", "not_met"], ["not_met", "not_met"]]
    assert fleiss_kappa(items) == pytest.approx(1 / 3)


def test_fleiss_kappa_perfect_and_undefined() -> None:
    assert fleiss_kappa([["met"] * 3, ["not_met"] * 3, ["met"] * 3]) == pytest.approx(1.0)
    assert fleiss_kappa([["met"] * 3, ["met"] * 3]) is None  # P_e = 1
    assert fleiss_kappa([["met", "not_met"]]) is None  # fewer than 2 items
    assert fleiss_kappa([["met"], ["not_met"]]) is None  # no item with 2 ratings
    assert fleiss_kappa([]) is None


def test_fleiss_kappa_uses_modal_rater_count() -> None:
    # Rater counts 3, 3, 3, 2 -> modal 3; the 2-rater item is dropped.
    # Items used: (met x3), (not_met x3), (met, not_met, met).
    # P_i = 1, 1, (2^2 + 1^2 - 3) / (3 * 2) = 1/3 -> P_bar = (7/3) / 3 = 7/9.
    # p_met = (3 + 0 + 2) / 9 = 5/9, p_not = 4/9 -> P_e = 25/81 + 16/81 = 41/81.
    # kappa = (63/81 - 41/81) / (40/81) = 22/40 = 0.55.
    items = [["met"] * 3, ["not_met"] * 3, ["met", "not_met", "met"], ["met", "not_met"]]
    assert fleiss_kappa(items) == pytest.approx(0.55)
    # Equal counts of 2-rater and 3-rater items: the larger count (3) is used.
    # 3-rater items (a,a,a), (b,b,b): P_bar 1, P_e 0.5 -> kappa 1.
    # (Had the 2-rater items (a,a), (a,b) been used: P_bar 0.5, P_e 9/16 + 1/16 = 0.625 -> kappa -1/3.)
    tie = [["a", "a"], ["a", "b"], ["a", "a", "a"], ["b", "b", "b"]]
    assert fleiss_kappa(tie, categories=("a", "b")) == pytest.approx(1.0)


def test_fleiss_kappa_rejects_unknown_category() -> None:
    with pytest.raises(ValueError):
        fleiss_kappa([["met", "error"], ["met", "met"]])


# ---------------------------------------------------------------- krippendorff_alpha_nominal


def test_krippendorff_alpha_reference_example() -> None:
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4-observer x 12-unit example with
    # missing values (also on Wikipedia); nominal alpha = 0.743. Units as lists of the values given:
    units = [
        [1, 1, 1],  # u1 (C missing)
        [2, 2, 3, 2],  # u2
        [3, 3, 3, 3],
        [3, 3, 3, 3],
        [2, 2, 2, 2],
        [1, 2, 3, 4],  # u6
        [4, 4, 4, 4],
        [1, 1, 2, 1],  # u8
        [2, 2, 2, 2],
        [5, 5, 5],  # u10 (A missing)
        [1, 1],  # u11 (C, D only)
        [3],  # u12: one value, not pairable, dropped
    ]
    # Off-diagonal coincidences sum_u (m_u^2 - sum_c n_uc^2) / (m_u - 1):
    #   u2: (16 - 9 - 1) / 3 = 2;  u6: (16 - 4) / 3 = 4;  u8: (16 - 9 - 1) / 3 = 2;  others 0 -> total 8.
    # Pairable value totals: n_1 = 3+1+3+2 = 9, n_2 = 3+4+1+1+4 = 13, n_3 = 1+4+4+1 = 10, n_4 = 1+4 = 5,
    #   n_5 = 3 -> n = 40; sum_{c != k} n_c n_k = 40^2 - (81 + 169 + 100 + 25 + 9) = 1600 - 384 = 1216.
    # alpha = 1 - (40 - 1) * 8 / 1216 = 1 - 312/1216 = 0.743421.
    alpha = krippendorff_alpha_nominal(units)
    assert alpha == pytest.approx(1 - 312 / 1216)
    assert round(alpha, 3) == 0.743


def test_krippendorff_alpha_binary_by_hand() -> None:
    # (met, met), (met, not_met), (not_met, not_met): off-diagonal o = (4 - 1 - 1) / 1 = 2 from item 2.
    # n_met = 3, n_not = 3, n = 6, sum_{c != k} n_c n_k = 36 - 9 - 9 = 18. alpha = 1 - 5 * 2 / 18 = 4/9.
    # (Fleiss' kappa for the same data is 1/3: alpha's (n - 1) factor is a small-sample correction.)
    items = [["met", "met"], ["met", "not_met"], ["not_met", "not_met"]]
    assert krippendorff_alpha_nominal(items) == pytest.approx(4 / 9)


def test_krippendorff_alpha_varying_raters_by_hand() -> None:
    # (met x3): (9 - 9) / 2 = 0;  (met, not_met): (4 - 1 - 1) / 1 = 2;  (not_met, not_met, met): (9 - 4 - 1) / 2 = 2;
    # (not_met) alone: dropped. Observed off-diagonal 4.
    # n_met = 3 + 1 + 1 = 5, n_not = 0 + 1 + 2 = 3, n = 8; 64 - 25 - 9 = 30. alpha = 1 - 7 * 4 / 30 = 1/15.
    items = [["met", "met", "met"], ["met", "not_met"], ["not_met", "not_met", "met"], ["not_met"]]
    assert krippendorff_alpha_nominal(items) == pytest.approx(1 / 15)


def test_krippendorff_alpha_perfect_and_undefined() -> None:
    # Perfect agreement with both categories in use: no observed disagreement -> alpha = 1.
    assert krippendorff_alpha_nominal([["met", "met"], ["not_met", "not_met", "not_met"], ["met", "met"]]) == 1.0
    assert krippendorff_alpha_nominal([["met", "met"], ["met", "met", "met"]]) is None  # one category only
    assert krippendorff_alpha_nominal([["met"], ["not_met"]]) is None  # nothing pairable
    assert krippendorff_alpha_nominal([]) is None


# ---------------------------------------------------------------- rate


def test_rate() -> None:
    assert rate(3, 4) == 0.75
    assert rate(0, 5) == 0.0
    assert rate(0, 0) is None
    with pytest.raises(ValueError):
        rate(5, 4)
    with pytest.raises(ValueError):
        rate(-1, 4)
