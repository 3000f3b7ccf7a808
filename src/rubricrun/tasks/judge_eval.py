"""Judge meta-evaluation: how well a judge's met / not-met verdicts agree with human labels of the same rows, and how
well the humans agree with each other (docs/benchmarks.md explains each figure).

A *row* is one (conversation, completion, rubric criterion) with one or more human labels (tasks/meta_eval.meta_row). The
balanced F1 is simple-evals `healthbench_meta_eval.py`'s `pairwise_model_f1_balanced`: the judge's label of a row is
paired with *every* human label of that row, each (judge, human) pair counting once in (tp, fp, fn, tn). A figure
whose denominator is 0 does not exist (HealthBench leaves its key out; here it is None), nor does an F1 needing it. A
judge failure (None) is counted and left out, never guessed. Bootstrap CIs resample rows (a row brings its pairs).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

_CHUNK = 16  # bootstrap resamples drawn at a time (a chunk holds _CHUNK x rows indices)
_LEVEL = 0.95  # of every bootstrap CI


@dataclass(frozen=True)
class Metric:
    """One figure and its HealthBench `n`: the pairs it rests on (for a balanced figure, the two classes' n
    summed, which counts a pair twice as HealthBench notes). `value` is None where HealthBench has no key."""

    value: float | None
    n: int


@dataclass(frozen=True)
class Agreement:
    """A rater's agreement with other labels of the same rows (a judge: the humans; a human: the other humans)."""

    counts: tuple[int, int, int, int]  # (tp, fp, fn, tn) over (rater, other) label pairs
    precision_pos: Metric
    precision_neg: Metric
    recall_pos: Metric
    recall_neg: Metric
    f1_pos: Metric
    f1_neg: Metric
    f1_balanced: Metric
    ci: tuple[float, float] | None = None  # bootstrap CI of f1_balanced over rows, when asked for
    boot_undefined: int = 0  # resamples in which f1_balanced did not exist (left out of the CI)
    rows: int = 0  # the rows whose pairs were counted (0 for a table given as counts alone)


@dataclass(frozen=True)
class JudgeEval:
    """One judge against the human labels: overall, per category, kappa, leniency and what was left out."""

    overall: Agreement
    by_category: dict[str, Agreement]
    kappa: float | None  # Cohen's kappa against the majority human label
    kappa_n: int  # rows with a majority
    kappa_ties: int  # rows whose humans split evenly (no majority): left out of kappa
    judge_met: float | None  # the judge's share of met verdicts (over the rows of `overall`)
    human_met: float | None  # mean over the same rows of the row's share of met human labels (percent_physician_pos)
    leniency: float | None  # judge_met - human_met: above 0, the judge says met more often than the humans
    rows: int  # rows given
    failures: int  # rows whose judge verdict failed (None): left out of every figure
    no_labels: int  # rows without a human label: left out of every figure


@dataclass(frozen=True)
class HumanBaseline:
    """Each human rater against the other raters of the same rows (leave one out)."""

    per_rater: dict[str, Agreement]
    per_rater_by_category: dict[str, dict[str, Agreement]]
    weighted: Metric  # n-weighted mean of the raters' balanced F1 (HealthBench's analysis notebook)
    weighted_by_category: dict[str, Metric]
    pooled: Agreement  # every rater's pairs in one table, with a bootstrap CI over rows
    pooled_by_category: dict[str, Agreement]


def pair_counts(label: bool, others: Sequence[bool]) -> np.ndarray:
    """(tp, fp, fn, tn) of one rater label paired with each of `others` (HealthBench's pairwise expansion)."""
    met = sum(1 for o in others if o)
    not_met = len(others) - met
    return np.array([met, not_met, 0, 0] if label else [0, 0, met, not_met], dtype=np.int64)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den as float64, NaN where den is 0 (the figure does not exist)."""
    out = np.full(np.shape(num), np.nan)
    np.divide(num, den, out=out, where=den > 0, casting="unsafe")
    return out


def _f1(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """HealthBench's compute_f1_metric: NaN if either is missing, 0 when both are 0, else 2*(p*r)/(p+r)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = 2 * (p * r) / (p + r)  # same operation order as simple-evals, so the floats are the same
    return np.where((p == 0) & (r == 0), 0.0, f1)


def _figures(counts: np.ndarray) -> dict[str, np.ndarray]:
    """Every figure (NaN where it does not exist) of (..., 4) count arrays (tp, fp, fn, tn) in the last axis."""
    tp, fp, fn, tn = (counts[..., i] for i in range(4))
    out = {
        "precision_pos": _ratio(tp, tp + fp),
        "precision_neg": _ratio(tn, tn + fn),
        "recall_pos": _ratio(tp, tp + fn),
        "recall_neg": _ratio(tn, tn + fp),
    }
    out["f1_pos"] = _f1(out["precision_pos"], out["recall_pos"])
    out["f1_neg"] = _f1(out["precision_neg"], out["recall_neg"])
    out["f1_balanced"] = (out["f1_pos"] + out["f1_neg"]) / 2  # NaN if either class's F1 is missing
    return out


def agreement_of(counts: np.ndarray) -> Agreement:
    """The Agreement of one (tp, fp, fn, tn) table, with HealthBench's n for each figure."""
    tp, fp, fn, tn = (int(c) for c in counts)
    fig = {k: None if np.isnan(x) else float(x) for k, x in _figures(np.asarray(counts, dtype=np.int64)).items()}
    n = {"precision_pos": tp + fp, "precision_neg": tn + fn, "recall_pos": tp + fn, "recall_neg": tn + fp}
    n["f1_pos"] = (tp + fp) + (tp + fn) - tp  # TP+FP + TP+FN - TP, as compute_f1_metric counts it
    n["f1_neg"] = (tn + fn) + (tn + fp) - tn
    n["f1_balanced"] = n["f1_pos"] + n["f1_neg"]
    # A figure that does not exist rests on no pair (HealthBench leaves its key out).
    return Agreement(counts=(tp, fp, fn, tn), **{k: Metric(fig[k], n[k] if fig[k] is not None else 0) for k in n})


def balanced_f1_ci(
    row_counts: np.ndarray, *, n_boot: int = 1000, seed: int = 0
) -> tuple[tuple[float, float] | None, int]:
    """Percentile-bootstrap CI of the balanced F1 of (rows, 4) per-row pair counts, resampling rows; and the number
    of resamples in which it did not exist (left out). None when there is no row or no resample has a value."""
    if n_boot < 1:
        raise ValueError(f"need n_boot >= 1, got {n_boot}")
    n = len(row_counts)
    if n == 0:
        return None, 0
    rng = np.random.Generator(np.random.PCG64(seed))
    stats = np.empty(n_boot)
    for lo in range(0, n_boot, _CHUNK):
        k = min(_CHUNK, n_boot - lo)
        idx = rng.integers(0, n, size=(k, n))
        # how often each row was drawn, then one matrix product: faster than gathering k x n rows of counts
        times = np.bincount((idx + n * np.arange(k)[:, None]).ravel(), minlength=k * n).reshape(k, n)
        stats[lo : lo + k] = _figures(times @ row_counts)["f1_balanced"]
    defined = stats[~np.isnan(stats)]
    if defined.size == 0:
        return None, n_boot
    tail = (1.0 - _LEVEL) / 2.0
    lo_q, hi_q = np.quantile(defined, [tail, 1.0 - tail])  # numpy's default is the linear (type 7) quantile
    return (float(lo_q), float(hi_q)), n_boot - int(defined.size)


def _with_ci(row_counts: np.ndarray, n_boot: int, seed: int) -> Agreement:
    """The Agreement of summed row counts, with the bootstrap CI of its balanced F1 (n_boot 0: no CI)."""
    a = agreement_of(row_counts.sum(axis=0) if len(row_counts) else np.zeros(4, dtype=np.int64))
    ci, undefined = balanced_f1_ci(row_counts, n_boot=n_boot, seed=seed) if n_boot else (None, 0)
    return replace(a, ci=ci, boot_undefined=undefined, rows=len(row_counts))


def _by_category(row_counts: np.ndarray, categories: Sequence[str], n_boot: int, seed: int) -> dict[str, Agreement]:
    of = np.asarray(categories, dtype=object)  # a category's rows keep their order: the same resamples
    return {c: _with_ci(row_counts[of == c], n_boot, seed) for c in sorted(set(categories))}


def cohen_kappa_counts(pairs: Mapping[tuple[Hashable, Hashable], int]) -> float | None:
    """Cohen's kappa of two raters over units given as counts: (verdict a, verdict b) -> units. (p_o - p_e) /
    (1 - p_e), p_o the share of units they agree on, p_e = sum over categories c of p_a(c) * p_b(c), each rater's own
    share of c. None when undefined: no unit, or p_e == 1 (both put every unit in one category)."""
    n = sum(pairs.values())
    if n == 0:
        return None
    p_o = sum(k for (a, b), k in pairs.items() if a == b) / n
    ca: Counter[Hashable] = Counter()
    cb: Counter[Hashable] = Counter()
    for (a, b), k in pairs.items():
        ca[a] += k
        cb[b] += k
    p_e = sum(ca[c] * cb[c] for c in ca) / (n * n)
    if 1.0 - p_e <= 1e-12:
        return None
    return (p_o - p_e) / (1.0 - p_e)


def majority(labels: Sequence[bool]) -> bool | None:
    """The labels' majority, None on an even split (no majority)."""
    met = sum(1 for x in labels if x)
    return None if 2 * met == len(labels) else 2 * met > len(labels)


def judge_meta_eval(
    judge: Sequence[bool | None],
    humans: Sequence[Sequence[bool]],
    categories: Sequence[str],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> JudgeEval:
    """One judge's verdicts (None: failed) against the rows' human labels: HealthBench's pairwise agreement overall
    and per category (balanced F1 with a bootstrap CI over rows), kappa against the majority, leniency."""
    if not len(judge) == len(humans) == len(categories):
        raise ValueError(f"judge, humans, categories differ in length: {len(judge)}, {len(humans)}, {len(categories)}")
    _check_labels(humans)
    if any(j is not None and not isinstance(j, (bool, np.bool_)) for j in judge):
        raise ValueError("judge labels must be True, False or None (a failed verdict)")
    failures = sum(1 for j in judge if j is None)
    keep = [i for i, (j, hs) in enumerate(zip(judge, humans, strict=True)) if j is not None and len(hs) > 0]
    js = [bool(judge[i]) for i in keep]
    hs = [list(humans[i]) for i in keep]
    cats = [categories[i] for i in keep]
    row_counts = np.array([pair_counts(j, h) for j, h in zip(js, hs, strict=True)], dtype=np.int64).reshape(-1, 4)
    # kappa against each row's majority human label: a row whose humans split evenly has none
    kappa_table: Counter[tuple[Hashable, Hashable]] = Counter(
        (j, m) for j, h in zip(js, hs, strict=True) if (m := majority(h)) is not None
    )
    # leniency: the judge's met share against the humans' mean per-row met share, over the same rows
    judge_met = sum(js) / len(js) if js else None
    human_met = float(np.mean([sum(h) / len(h) for h in hs])) if hs else None
    return JudgeEval(
        overall=_with_ci(row_counts, n_boot, seed),
        by_category=_by_category(row_counts, cats, n_boot, seed),
        kappa=cohen_kappa_counts(kappa_table),
        kappa_n=kappa_table.total(),
        kappa_ties=len(js) - kappa_table.total(),
        judge_met=judge_met,
        human_met=human_met,
        leniency=judge_met - human_met if js else None,  # type: ignore[operator]
        rows=len(judge),
        failures=failures,
        no_labels=len(judge) - failures - len(keep),
    )


def judge_agreement(
    judge: Sequence[bool | None], humans: Sequence[Sequence[bool]], *, n_boot: int = 1000, seed: int = 0
) -> JudgeEval:
    """judge_meta_eval over rows of no category: a judge's verdicts on items people labelled in a run
    (results/anchor.py, the judges beside a score anchored to human labels)."""
    return judge_meta_eval(judge, humans, [""] * len(judge), n_boot=n_boot, seed=seed)


def _check_labels(humans: Sequence[Sequence[bool]]) -> None:
    """ValueError unless every human label is a bool or numpy bool (a string such as "not met" would count as met)."""
    if any(not isinstance(h, (bool, np.bool_)) for hs in humans for h in hs):
        raise ValueError("human labels must be True or False")


def _weighted(agreements: Mapping[str, Agreement]) -> Metric:
    """n-weighted mean of the balanced F1s that exist (the notebook's agg_n_and_val_list)."""
    pairs = [(a.f1_balanced.value, a.f1_balanced.n) for a in agreements.values() if a.f1_balanced.value is not None]
    total = sum(n for _, n in pairs)
    return Metric(sum(v * n for v, n in pairs) / total if total else None, total)


def human_baseline(
    humans: Sequence[Sequence[bool]],
    rater_ids: Sequence[Sequence[str]],
    categories: Sequence[str],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> HumanBaseline:
    """Each human rater's labels against the other raters' labels of the same rows (HealthBench's physician
    agreement): per rater overall and per category, their n-weighted mean, and every pair pooled (with a CI)."""
    _check_labels(humans)
    # each rater's label against the row's other labels: per rater (row, counts), and summed per row
    per_rater_rows: dict[str, list[tuple[int, np.ndarray]]] = defaultdict(list)
    pooled = np.zeros((len(humans), 4), dtype=np.int64)
    for row, (labels, ids) in enumerate(zip(humans, rater_ids, strict=True)):
        if len(labels) != len(ids):
            raise ValueError(f"row {row}: {len(labels)} labels but {len(ids)} rater ids")
        for i, (label, rater) in enumerate(zip(labels, ids, strict=True)):
            counts = pair_counts(label, [*labels[:i], *labels[i + 1 :]])
            per_rater_rows[rater].append((row, counts))
            pooled[row] += counts
    per_rater: dict[str, Agreement] = {}
    per_rater_cat: dict[str, dict[str, Agreement]] = {}
    for rater, items in sorted(per_rater_rows.items()):
        counts = np.array([c for _, c in items], dtype=np.int64)
        per_rater[rater] = agreement_of(counts.sum(axis=0))
        per_rater_cat[rater] = _by_category(counts, [categories[r] for r, _ in items], 0, seed)
    cats = sorted(set(categories))
    return HumanBaseline(
        per_rater=per_rater,
        per_rater_by_category=per_rater_cat,
        weighted=_weighted(per_rater),
        weighted_by_category={c: _weighted({r: by[c] for r, by in per_rater_cat.items() if c in by}) for c in cats},
        pooled=_with_ci(pooled, n_boot, seed),
        pooled_by_category=_by_category(pooled, categories, n_boot, seed),
    )
