"""Pure statistics for summary.json: bootstrap CIs, paired comparisons, vote and agreement measures. Deterministic
given `seed` (each bootstrap its own numpy PCG64); one value per example, so the example is the unit of resampling;
percentile CIs with type-7 quantiles (`_quantile`), a constant sample's exactly its mean (docs/statistics.md)."""

from __future__ import annotations

import hashlib
import math
from array import array
from collections import Counter, OrderedDict
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from statistics import fmean
from typing import Any

import numpy as np

from .accum import ByExample, paired

CHUNK = 1 << 20  # indexes drawn per chunk of resamples: 4 MB as uint32, 8 MB as the intp take reads, 8 MB of values
DISTINCT = 64  # at most this many distinct values: a resample is drawn as counts per value (`resample_means`)
_CACHED = 16  # bootstraps remembered (`resample_means`): a summary asks for the same one several times


def _check_boot_args(n_boot: int, level: float) -> None:
    """Raise ValueError on a bootstrap size below 1 or a confidence level outside (0, 1)."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")


def rounded(x: float | None, nd: int = 4) -> float | None:
    """`x` to `nd` decimals as summary.json writes its rates; None as it is."""
    return None if x is None else round(x, nd)


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of already-sorted values, linearly interpolated between order statistics."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def generator(seed: int) -> np.random.Generator:
    """The bootstraps' random stream for `seed`."""
    return np.random.Generator(np.random.PCG64(seed))


def resample_indexes(n: int, n_boot: int, seed: int, chunk: int = CHUNK) -> Iterator[np.ndarray]:
    """The `n_boot` resamples of indexes 0..n-1 (with replacement, size n), as (rows, n) uint32 arrays of about
    `chunk` indexes each (at least one resample a chunk). The draws are one stream: the same whatever `chunk`."""
    if not 0 < n < 2**32:
        raise ValueError(f"resample_indexes: need 0 < n < 2**32, got {n}")
    rng = generator(seed)
    rows = max(1, chunk // n)
    for lo in range(0, n_boot, rows):
        yield rng.integers(0, n, size=(min(rows, n_boot - lo), n), dtype=np.uint32)


def as_floats(values: Sequence[float]) -> np.ndarray:
    """`values` as a contiguous float64 array: a view of an array('d') or such an array, else a new array."""
    if isinstance(values, array) and values.typecode == "d":
        return np.frombuffer(values, dtype=np.float64) if len(values) else np.empty(0)
    return np.ascontiguousarray(values, dtype=np.float64)


_cache: OrderedDict[tuple, np.ndarray] = OrderedDict()


def resample_means(values: Sequence[float], n_boot: int, seed: int, chunk: int = CHUNK) -> np.ndarray:
    """The means of `n_boot` resamples (with replacement, same size) of non-empty `values`, in draw order,
    read-only. With at most DISTINCT distinct values (0/1 scores, a few rubric levels), each seen 4 times on
    average, a resample's mean depends only on how many of its draws hit each value: those counts are drawn as
    Multinomial(n, share of each value), the same distribution as n index draws at a fraction of the cost;
    otherwise the resamples are index draws (`resample_indexes`). The last few results are kept, keyed by the
    values' bytes: a summary bootstraps one column several times (its CI, its std, a pair's difference)."""
    vals = as_floats(values)
    key = (n_boot, seed, chunk, hashlib.blake2b(vals, digest_size=16).digest())
    hit = _cache.get(key)
    if hit is not None:
        _cache.move_to_end(key)
        return hit
    mean = fmean(memoryview(vals))
    few = _few_values(vals)
    if vals.min() == vals.max():  # a constant sample: every resample is the sample, its mean exactly
        out = np.full(n_boot, mean)
    elif few is None:  # the mean plus that of the deviations from it (smaller numbers, smaller rounding)
        out = _index_means(vals - mean, n_boot, seed, chunk) + mean
    else:  # counts times values: 0/1 scores give exact fractions, as math.fsum did
        counts = generator(seed).multinomial(len(vals), few[1] / len(vals), size=n_boot)
        out = (counts * few[0]).sum(axis=1) / len(vals)
    out.flags.writeable = False
    _cache[key] = out
    if len(_cache) > _CACHED:
        _cache.popitem(last=False)
    return out


def _few_values(vals: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct values of `vals` and how many times each appears, or None when there are more than DISTINCT
    or fewer than 4 values a distinct one. In order of first appearance, not sorted: negated values
    (paired_diff(b, a)) keep the order, so they draw the same counts and mirror exactly."""
    limit = min(DISTINCT, len(vals) // 4)
    if len(np.unique(vals[: 64 * DISTINCT])) > limit:  # most continuous samples stop here, nothing sorted
        return None
    ordered = np.sort(vals)  # one copy (np.unique with counts and first indexes would hold several)
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    if len(starts) > limit:
        return None
    distinct, freq = ordered[starts], np.diff(np.append(starts, len(vals)))
    seen = np.argsort([int(np.argmax(vals == v)) for v in distinct])
    return distinct[seen], freq[seen]


def _index_means(dev: np.ndarray, n_boot: int, seed: int, chunk: int) -> np.ndarray:
    """The means of `dev` picked by each resample of `resample_indexes`."""
    out = np.empty(n_boot)
    at = 0
    for idx in resample_indexes(len(dev), n_boot, seed, chunk):
        out[at : at + len(idx)] = np.take(dev, idx).sum(axis=1) / len(dev)
        at += len(idx)
    return out


def percentile_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The percentile-bootstrap interval at `level` of bootstrap statistics (a stable sort: sorted ones keep their
    order)."""
    ordered = sorted(np.asarray(values, dtype=np.float64).tolist())
    tail = (1.0 - level) / 2.0
    return _quantile(ordered, tail), _quantile(ordered, 1.0 - tail)


def _finite_floats(values: Sequence[float], what: str) -> np.ndarray:
    """`values` as a float64 array (`as_floats`); ValueError on NaN or infinity (they would silently poison every
    statistic)."""
    out = as_floats(values)
    bad = out[~np.isfinite(out)]
    if len(bad):
        raise ValueError(f"{what}: non-finite value {float(bad[0])!r}")
    return out


def mean_ci(values: Sequence[float], *, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """Mean of one-value-per-example `values` with a percentile-bootstrap CI over examples: {"mean", "ci_low",
    "ci_high", "n"}. n == 0: all None; n == 1: the CI is the value (one example says nothing about spread)."""
    _check_boot_args(n_boot, level)
    vals = _finite_floats(values, "mean_ci")
    n = len(vals)
    mean = ci_low = ci_high = fmean(memoryview(vals)) if n else None
    if n >= 2:
        ci_low, ci_high = percentile_ci(np.sort(resample_means(vals, n_boot, seed)), level)
    return {"mean": mean, "ci_low": ci_low, "ci_high": ci_high, "n": n}


def paired_diff(
    a: Mapping[str, float],
    b: Mapping[str, float],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    tie_eps: float = 1e-9,
) -> dict[str, Any]:
    """Paired comparison of a against b over the example ids both have: {"n", "mean_diff" (mean(a - b)), "ci_low",
    "ci_high", "significant", "wins", "ties", "losses" (from a's side; |a - b| <= tie_eps a tie)}. The bootstrap
    resamples the per-id differences (both values of an id travel together), ids in sorted order, so
    paired_diff(b, a) mirrors paired_diff(a, b) exactly. `significant`: the CI excludes 0 and n >= 2 (n == 1: the
    CI is the one difference); n == 0: mean_diff and CI are None."""
    _check_boot_args(n_boot, level)
    if isinstance(a, ByExample) and isinstance(b, ByExample) and a.ids is b.ids:  # one run's columns, by position
        va, vb = paired(a, b)
        diffs = _finite_floats(as_floats(va) - as_floats(vb), "paired_diff")
    else:
        ids = sorted(set(a) & set(b))
        diffs = _finite_floats([float(a[i]) - float(b[i]) for i in ids], "paired_diff")
    n = len(diffs)
    wins = int(np.count_nonzero(diffs > tie_eps))
    losses = int(np.count_nonzero(diffs < -tie_eps))
    mean_diff = ci_low = ci_high = fmean(memoryview(diffs)) if n else None
    if n >= 2:
        ci_low, ci_high = percentile_ci(np.sort(resample_means(diffs, n_boot, seed)), level)
    return {
        "n": n,
        "mean_diff": mean_diff,
        "ci_low": ci_low,
        "ci_high": ci_high,
        "significant": n >= 2 and (ci_low > 0.0 or ci_high < 0.0),  # type: ignore[operator]
        "wins": wins,
        "ties": n - wins - losses,
        "losses": losses,
    }


# One unit's ratings as a multiset: its (category, count) pairs (`composition`).
Composition = frozenset[tuple[Hashable, int]]


def composition(item: Iterable[Hashable]) -> Composition:
    """One unit's ratings as a multiset. Every agreement figure here reads a unit only through it, so callers that
    see millions of units keep `{composition: units}` counts (a handful of keys) instead of the units."""
    return frozenset(Counter(item).items())


def _size(comp: Composition) -> int:
    return sum(c for _, c in comp)


def percent_agreement_counts(units: Mapping[Composition, int]) -> float | None:
    """Mean, over items with >= 2 ratings, of the share of rater pairs that agree; items given as counts
    ({composition: items}). Each item's ratings are the valid (non-error) verdicts its raters gave. An item with k
    ratings has k(k-1)/2 pairs, of which sum_c n_c(n_c-1)/2 agree. None when no item has 2 ratings."""
    shares: list[float] = []
    total = 0
    for comp, k in units.items():
        m = _size(comp)
        if m < 2 or k == 0:
            continue
        shares.append(k * sum(c * (c - 1) for _, c in comp) / (m * (m - 1)))
        total += k
    return math.fsum(shares) / total if total else None


def fleiss_kappa_counts(
    units: Mapping[Composition, int], categories: Sequence[Hashable] = ("met", "not_met")
) -> float | None:
    """Fleiss' kappa for items (given as counts, {composition: items}) rated into `categories`.

    Fleiss' kappa needs the same number of raters n on every item. Judges fail independently, so items can end up
    with different counts of valid ratings: only the items having the modal number of ratings (>= 2; ties go to the
    larger number) are used, and the others are dropped. With N such items and n_ij raters putting item i in
    category j: p_j = sum_i n_ij / (N n), P_i = (sum_j n_ij^2 - n) / (n (n - 1)), P_bar = mean P_i,
    P_e = sum_j p_j^2, kappa = (P_bar - P_e) / (1 - P_e).

    Returns None when undefined: fewer than 2 usable items, or P_e == 1 (every rating in one category).
    A rating outside `categories` raises ValueError.
    """
    allowed = set(categories)
    for comp in units:
        bad = {cat for cat, _ in comp} - allowed
        if bad:
            raise ValueError(f"fleiss_kappa: ratings {sorted(map(str, bad))} not in categories {list(categories)}")
    sizes: Counter[int] = Counter()  # items by their number of ratings (>= 2)
    for comp, k in units.items():
        if _size(comp) >= 2 and k:
            sizes[_size(comp)] += k
    n = max(sizes, key=lambda size: (sizes[size], size), default=None)  # the modal number, ties to the larger
    if n is None:
        return None
    used = {comp: k for comp, k in units.items() if _size(comp) == n and k}
    big_n = sum(used.values())
    if big_n < 2:
        return None
    totals: Counter[Hashable] = Counter()
    for comp, k in used.items():
        for cat, c in comp:
            totals[cat] += k * c
    p_e = sum((totals[cat] / (big_n * n)) ** 2 for cat in allowed)
    if 1.0 - p_e <= 1e-12:
        return None
    # sum_i (sum_j n_ij^2 - n) is an integer: P_bar is one division, whatever the number of items.
    p_bar = sum(k * (sum(c * c for _, c in comp) - n) for comp, k in used.items()) / (n * (n - 1) * big_n)
    return (p_bar - p_e) / (1.0 - p_e)


def krippendorff_alpha_counts(units: Mapping[Composition, int]) -> float | None:
    """Krippendorff's alpha for nominal data, items given as counts ({composition: items}); items may have different
    numbers of ratings.

    Items with fewer than 2 ratings are not pairable and are dropped. With m_u ratings in item u, n_uc of them in
    category c, the coincidence matrix is o_ck = sum_u n_uc n_uk / (m_u - 1) for c != k; n_c = sum_k o_ck (= the
    number of pairable ratings in c) and n = sum_c n_c. Then
        alpha = 1 - (n - 1) * sum_{c != k} o_ck / sum_{c != k} n_c n_k,
    where item u contributes sum_{c != k} n_uc n_uk / (m_u - 1) = (m_u^2 - sum_c n_uc^2) / (m_u - 1).

    Returns None when undefined: no pairable item, or a single category used throughout (no expected disagreement).
    """
    observed: list[float] = []
    totals: Counter[Hashable] = Counter()
    for comp, k in units.items():
        m = _size(comp)
        if m < 2 or k == 0:
            continue
        observed.append(k * (m * m - sum(c * c for _, c in comp)) / (m - 1))
        for cat, c in comp:
            totals[cat] += k * c
    n = sum(totals.values())
    expected = n * n - sum(v * v for v in totals.values())
    if n == 0 or expected == 0:
        return None
    return 1.0 - (n - 1) * math.fsum(observed) / expected


def rate(successes: int, total: int) -> float | None:
    """successes / total, or None when total is 0. ValueError if counts are negative or successes > total."""
    if successes < 0 or total < 0 or successes > total:
        raise ValueError(f"rate: need 0 <= successes <= total, got {successes}/{total}")
    return successes / total if total else None
