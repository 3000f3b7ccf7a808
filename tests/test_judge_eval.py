"""tasks/judge_eval.py: HealthBench's own test vectors (openai/simple-evals healthbench_meta_eval_test.py at
ee3b0318, unchanged since 5e623c2b), and kappa, leniency, the leave-one-out human baseline and failures against
numbers computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rubricrun.tasks.judge_eval import (
    agreement_of,
    balanced_f1_ci,
    human_baseline,
    judge_meta_eval,
    majority,
    pair_counts,
)

# healthbench_meta_eval_test.py's table: three rows, the model's label against every physician label of the row.
SELF = [True, False, True]
OTHERS = [[True, True, False], [True, False], [False]]
CLUSTERS = ["a", "a", "b"]


def test_healthbench_vectors_overall() -> None:
    ev = judge_meta_eval(SELF, OTHERS, CLUSTERS, n_boot=0)
    o = ev.overall
    # The upstream test's expected values, written as it writes them (exact float equality, as it asserts).
    p_pos, p_neg = (2 + 0 + 0) / (3 + 0 + 1), (0 + 1 + 0) / (0 + 2 + 0)
    r_pos, r_neg = (2 + 0 + 0) / (2 + 1 + 0), (0 + 1 + 0) / (1 + 1 + 1)
    assert (o.precision_pos.value, o.precision_pos.n) == (p_pos, 4)
    assert (o.precision_neg.value, o.precision_neg.n) == (p_neg, 2)
    assert (o.recall_pos.value, o.recall_pos.n) == (r_pos, 3)
    assert (o.recall_neg.value, o.recall_neg.n) == (r_neg, 3)
    f1_pos = 2 * p_pos * r_pos / (p_pos + r_pos)
    f1_neg = 2 * p_neg * r_neg / (p_neg + r_neg)
    assert o.f1_pos.value == f1_pos and o.f1_neg.value == f1_neg
    assert o.f1_balanced.value == (f1_pos + f1_neg) / 2 == 0.48571428571428577
    # n as compute_f1_metric / compute_balanced_metric count them (simple-evals prints 5.0, 4.0, 9.0)
    assert (o.f1_pos.n, o.f1_neg.n, o.f1_balanced.n) == (5, 4, 9)


def test_healthbench_vectors_by_cluster() -> None:
    ev = judge_meta_eval(SELF, OTHERS, CLUSTERS, n_boot=0)
    a, b = ev.by_category["a"], ev.by_category["b"]
    assert (a.precision_pos.value, a.precision_pos.n) == ((2 + 0) / (3 + 0), 3)
    assert (a.precision_neg.value, a.precision_neg.n) == ((0 + 1) / (0 + 2), 2)
    assert (a.recall_pos.value, a.recall_pos.n) == ((2 + 0) / (2 + 1), 3)
    assert (a.recall_neg.value, a.recall_neg.n) == ((0 + 1) / (1 + 1), 2)
    # cluster b (row 3 only): pos precision 0/1 and neg recall 0/1 exist; the upstream test asserts every other key
    # absent from the metrics (here None): neg precision, pos recall, both F1s and the balanced F1.
    assert (b.precision_pos.value, b.precision_pos.n) == (0 / 1, 1)
    assert (b.recall_neg.value, b.recall_neg.n) == (0 / 1, 1)
    assert b.precision_neg.value is None and b.recall_pos.value is None
    assert b.f1_pos.value is None and b.f1_neg.value is None and b.f1_balanced.value is None


def test_f1_of_a_class_with_precision_and_recall_zero_is_zero() -> None:
    # judge says met where the humans say not met and vice versa: every pair disagrees
    a = agreement_of(np.array([0, 2, 3, 0]))
    assert a.precision_pos.value == 0.0 and a.recall_pos.value == 0.0 and a.f1_pos.value == 0.0
    assert a.f1_neg.value == 0.0 and a.f1_balanced.value == 0.0
    assert (a.f1_pos.n, a.f1_neg.n) == (5, 5)  # TP+FP + TP+FN - TP with TP = 0


def test_a_class_never_predicted_has_no_balanced_f1() -> None:
    ev = judge_meta_eval([True, True], [[True, False], [False]], ["x", "x"], n_boot=0)
    assert ev.overall.precision_neg.value is None  # the judge never said not met
    assert ev.overall.f1_neg.value is None and ev.overall.f1_balanced.value is None
    assert ev.overall.f1_pos.value == 2 * ((1 / 3) * 1.0) / ((1 / 3) + 1.0)


def test_category_named_purpose_gets_its_balanced_f1() -> None:
    # simple-evals builds the neg key with str.replace("pos", "neg") on the whole "{cluster}: ..." key, so a cluster
    # named "purpose" loses its balanced F1 there; here categories are keys of their own.
    ev = judge_meta_eval([True, False], [[True, False], [False, True]], ["purpose", "purpose"], n_boot=0)
    assert ev.by_category["purpose"].f1_balanced.value == ev.overall.f1_balanced.value == 0.5


def test_kappa_leniency_and_failures_by_hand() -> None:
    judge = [True, True, False, False, True, None, True]
    humans = [
        [True, True, False],
        [False, False],
        [False, True, False],
        [True, False],
        [True],
        [True, False, False],
        [],
    ]
    ev = judge_meta_eval(judge, humans, ["c"] * 7, n_boot=0)
    assert (ev.rows, ev.failures, ev.no_labels) == (7, 1, 1)
    # majority of rows 0-4: T, F, F, (1-1 split: none), T. Pairs (judge, majority): (T,T) (T,F) (F,F) (T,T).
    # p_o = 3/4; judge met share 3/4, majority met share 2/4: p_e = 3/4*2/4 + 1/4*2/4 = 1/2; kappa = (3/4-1/2)/(1/2)
    assert (ev.kappa, ev.kappa_n, ev.kappa_ties) == (pytest.approx(0.5), 4, 1)
    # leniency over rows 0-4: judge 3/5 met; humans' per-row shares 2/3, 0, 1/3, 1/2, 1 -> mean 2.5/5
    assert (ev.judge_met, ev.human_met, ev.overall.rows) == (pytest.approx(0.6), pytest.approx(0.5), 5)
    assert ev.leniency == pytest.approx(0.1)
    # the failed row and the unlabelled row add no pair: rows 0-4 only, (tp, fp, fn, tn) = (2,1,0,0) + (0,2,0,0)
    # + (0,0,1,2) + (0,0,1,1) + (1,0,0,0)
    assert ev.overall.counts == (3, 3, 2, 3)


def test_majority_ties() -> None:
    assert majority([True, False]) is None and majority([]) is None
    assert majority([True, True, False]) is True and majority([False]) is False


def test_pair_counts_expand_each_label() -> None:
    assert pair_counts(True, [True, False, True]).tolist() == [2, 1, 0, 0]
    assert pair_counts(False, [True, False, False]).tolist() == [0, 0, 1, 2]


def test_human_baseline_leave_one_out_by_hand() -> None:
    humans = [[True, True, False], [True, False], [False, False]]
    ids = [["p1", "p2", "p3"], ["p1", "p3"], ["p2", "p3"]]
    base = human_baseline(humans, ids, ["a", "a", "b"], n_boot=0)
    # p1: row 0 met vs (met, not) -> tp 1 fp 1; row 1 met vs (not) -> fp 1. Never said not met: no balanced F1.
    p1 = base.per_rater["p1"]
    assert p1.counts == (1, 2, 0, 0) and p1.f1_pos.value == pytest.approx(0.5) and p1.f1_balanced.value is None
    # p2: row 0 met vs (met, not) -> tp 1 fp 1; row 2 not vs (not) -> tn 1.
    # pos: p 1/2, r 1 -> F1 2/3; neg: p 1, r 1/2 -> F1 2/3; n 2 + 2
    p2 = base.per_rater["p2"]
    assert p2.counts == (1, 1, 0, 1) and p2.f1_balanced.value == pytest.approx(2 / 3) and p2.f1_balanced.n == 4
    assert base.per_rater["p3"].counts == (0, 0, 3, 1) and base.per_rater["p3"].f1_balanced.value is None
    # HealthBench's summary: the n-weighted mean of the raters' balanced F1s that exist (p2 only)
    assert base.weighted.value == pytest.approx(2 / 3) and base.weighted.n == 4
    # pooled: every disagreeing pair is seen from both sides, so fp == fn: (2, 3, 3, 2) -> both F1s 2/5
    assert base.pooled.counts == (2, 3, 3, 2) and base.pooled.f1_balanced.value == pytest.approx(0.4)
    # per category, pooled: a = rows 0-1 (2, 3, 3, 0): F1 pos 2/5, F1 neg 0 -> 0.2; b has no met label at all
    assert base.pooled_by_category["a"].f1_balanced.value == pytest.approx(0.2)
    assert base.pooled_by_category["b"].f1_balanced.value is None
    assert base.per_rater_by_category["p2"]["b"].counts == (0, 0, 0, 1)
    assert base.weighted_by_category["a"].value is None  # no rater has both classes within a


def test_human_baseline_checks_ids() -> None:
    with pytest.raises(ValueError, match="rater ids"):
        human_baseline([[True, False]], [["p1"]], ["a"])


def test_bootstrap_ci_is_seeded_and_counts_undefined_resamples() -> None:
    # one row per class: a resample holding only one kind of row has no balanced F1
    rows = np.array([[1, 0, 0, 0], [0, 0, 0, 1]])
    ci, undefined = balanced_f1_ci(rows, n_boot=200, seed=3)
    assert ci == (1.0, 1.0) and 0 < undefined < 200
    assert balanced_f1_ci(rows, n_boot=200, seed=3) == (ci, undefined)
    assert balanced_f1_ci(np.zeros((0, 4), dtype=np.int64)) == (None, 0)


def test_bootstrap_ci_brackets_the_estimate() -> None:
    rng = np.random.Generator(np.random.PCG64(0))
    humans = [[bool(x) for x in rng.random(3) < 0.6] for _ in range(300)]
    judge = [bool(sum(h) >= 2) if rng.random() < 0.8 else not sum(h) >= 2 for h in humans]
    ev = judge_meta_eval(judge, humans, ["a", "b", "c"] * 100, n_boot=300, seed=1)
    lo, hi = ev.overall.ci
    assert lo < ev.overall.f1_balanced.value < hi and hi - lo < 0.2
    assert ev.overall.boot_undefined == 0
    assert all(c.ci is not None and c.ci[0] < c.f1_balanced.value < c.ci[1] for c in ev.by_category.values())
    assert judge_meta_eval(judge, humans, ["a", "b", "c"] * 100, n_boot=300, seed=1) == ev


def test_bad_lengths() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        judge_meta_eval([True], [[True], [False]], ["a"])


def test_labels_must_be_booleans() -> None:
    # a verdict string would otherwise be truthy: "not met" counted as met
    with pytest.raises(ValueError, match="judge labels"):
        judge_meta_eval(["not met"], [[True]], ["a"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="human labels"):
        human_baseline([[True, "no"]], [["p1", "p2"]], ["a"])  # type: ignore[list-item]


def test_numpy_labels() -> None:
    judge = np.array([True, False, True])
    humans = [np.array(h) for h in OTHERS]
    assert judge_meta_eval(judge, humans, CLUSTERS, n_boot=0) == judge_meta_eval(SELF, OTHERS, CLUSTERS, n_boot=0)
