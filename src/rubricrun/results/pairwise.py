"""Pairwise judging results per dataset (docs/judging.md): win / tie / loss rates with bootstrap CIs, Bradley-Terry
ratings, the position-bias rate, mean answer lengths and length-controlled win rates. Bradley-Terry: Hunter's (2004)
MM iteration p_i <- W_i / sum_j n_ij / (p_i + p_j), a tie half a win to each side (Chatbot Arena's compute_mle_elo),
one virtual tie per pair so a candidate that lost every comparison (often, in a resample) has a finite rating."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

import numpy as np

from ..config import Config
from ..types import PairJudgment
from . import stats
from .length_control import length_controlled
from .stats import rounded
from .summary_types import PairOutcome, PairwiseJudging, Rating

Comparison = tuple[str, str, float]  # (a, b, a's score: 1 win, 0.5 tie, 0 loss)

BT_PRIOR_TIES = 1.0  # virtual ties per pair of candidates in the summary's fit (see the module docstring)
_KINDS = 1024  # at most this many kinds of example: the bootstrap draws counts per kind (`bootstrap_ratings`)


def _score(row: PairJudgment) -> float | None:
    """a's score in the comparison: 1 win, 0.5 tie, 0 loss; None for an error."""
    return {row.a: 1.0, "tie": 0.5, row.b: 0.0}.get(row.winner) if row.winner != "error" else None


def pair_outcome(cfg: Config, a: str, b: str, rows: Sequence[PairJudgment], text_len: Mapping[str, int]) -> PairOutcome:
    """a against b: counts, and rates as means over examples (an example's turns averaged) with bootstrap CIs;
    beside them AlpacaEval 2's length-controlled win rate (`text_len`: response id -> characters of its text)."""
    per_example: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        s = _score(r)
        if s is not None:
            per_example[r.example_id].append(s)
    rates: dict[str, Any] = {}
    for what, target in (("win", 1.0), ("tie", 0.5), ("loss", 0.0)):
        values = [sum(1 for s in ss if s == target) / len(ss) for ss in per_example.values()]
        ci = stats.mean_ci(values, n_boot=cfg.run.bootstrap_samples, seed=cfg.run.seed)
        rates[f"{what}_rate"] = rounded(ci["mean"])
        rates[f"{what}_ci"] = (rounded(ci["ci_low"]), rounded(ci["ci_high"]))
    # The length-controlled fields over the same comparisons, one per row (the GLM is fitted per comparison, as
    # AlpacaEval fits per instruction): a's preference and the two answers' lengths (response_ids: a's, b's).
    lc = length_controlled(
        [_score(r) for r in rows],
        [text_len.get(r.response_ids[0], 0) for r in rows],
        [text_len.get(r.response_ids[1], 0) for r in rows],
    )
    winners = Counter(r.winner for r in rows)
    return PairOutcome(
        a=a,
        b=b,
        n=len(per_example),
        comparisons=len(rows),
        wins=winners[a],
        ties=winners["tie"],
        losses=winners[b],
        errors=winners["error"],
        **rates,
        lc_win_rate=rounded(lc.lc_win_rate),
        lc_win_rate_se=rounded(lc.lc_se),
        lc_n=lc.n,
        lc_note=lc.reason,
        lc_one_side_longer=lc.one_side_longer,
        longer_share=rounded(lc.longer_share),
        longer_n=lc.longer_n,
    )


def position_bias(rows: Sequence[PairJudgment]) -> tuple[float | None, int]:
    """Share of decisive single-order verdicts ([[A]] or [[B]], both orders of every row) that picked the answer
    shown first, and how many there were."""
    verdicts = [v for r in rows for v in (r.ab, r.ba) if v in ("A", "B")]
    return (rounded(verdicts.count("A") / len(verdicts)) if verdicts else None), len(verdicts)


def fit_strengths(wins: np.ndarray, games: np.ndarray, *, max_iter: int = 10_000, tol: float = 1e-10) -> np.ndarray:
    """Ratings (B, K) of B fits at once: `wins` (B, K) each candidate's score, `games` (B, K, K) the comparisons of
    each pair (symmetric, zero diagonal). Each row follows Hunter's iteration (tests/oracles.bradley_terry is the
    scalar reference) and stops on its own when its strengths move less than `tol` (in log), so a row's fit does not
    depend on the others. Every row must have a fit (the prior's virtual ties: wins > 0, every pair compared)."""
    p = np.ones_like(wins)
    active = np.arange(len(wins))
    for _ in range(max_iter):
        if not len(active):
            break
        pa = p[active]
        new = wins[active] / (games[active] / (pa[:, :, None] + pa[:, None, :])).sum(axis=2)
        new /= np.exp(np.log(new).mean(axis=1, keepdims=True))
        done = np.abs(np.log(new / pa)).max(axis=1) < tol
        p[active] = new
        active = active[~done]
    return 1000.0 + 400.0 * np.log10(p)


def _example_features(groups: Sequence[Sequence[Comparison]], names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """What a resample's fit reads of each example: each candidate's score in its comparisons (a tie half), then
    how many comparisons each pair (i < j, in `names` order) had. Returned as the distinct rows, in order of first
    appearance, and each example's row index: examples are few kinds (3 candidates: at most 27)."""
    k = len(names)
    col = {n: i for i, n in enumerate(names)}
    pair = {}
    for at, (i, j) in enumerate(zip(*np.triu_indices(k, 1), strict=True)):
        pair[(int(i), int(j))] = pair[(int(j), int(i))] = k + at
    kinds: dict[tuple[float, ...], int] = {}
    which = np.empty(len(groups), dtype=np.intp)
    for e, group in enumerate(groups):
        row = [0.0] * (k + len(pair) // 2)
        for a, b, s in group:
            row[col[a]] += s
            row[col[b]] += 1.0 - s
            row[pair[(col[a], col[b])]] += 1.0
        which[e] = kinds.setdefault(tuple(row), len(kinds))
    return np.array(list(kinds), dtype=np.float64).reshape(len(kinds), -1), which


def _fit_totals(totals: np.ndarray, k: int, tol: float = 1e-8) -> np.ndarray:
    """Ratings (B, K) from resamples' summed features (`_example_features`), with BT_PRIOR_TIES virtual ties."""
    upper = np.triu_indices(k, 1)
    games = np.zeros((len(totals), k, k))
    games[:, upper[0], upper[1]] = totals[:, k:] + BT_PRIOR_TIES
    games += games.transpose(0, 2, 1)
    return fit_strengths(totals[:, :k] + BT_PRIOR_TIES * (k - 1) / 2, games, tol=tol)


def bootstrap_ratings(
    groups: Sequence[Sequence[Comparison]], names: Sequence[str], n_boot: int, seed: int, chunk: int = stats.CHUNK
) -> np.ndarray:
    """Ratings (n_boot, K) of `names` fitted on `n_boot` resamples of the examples (`groups`: each example's
    comparisons), with BT_PRIOR_TIES virtual ties. As stats.resample_means draws: with few kinds of example (at most
    _KINDS, 4 examples a kind on average) a resample is its draws' count per kind (a multinomial, kinds in order of
    first appearance), else index draws. The totals are whole or half numbers: exact in float64 in any order."""
    k, e = len(names), len(groups)
    kinds, which = _example_features(groups, names)
    if len(kinds) <= min(_KINDS, e // 4):
        freq = np.bincount(which, minlength=len(kinds))
        counts = stats.generator(seed).multinomial(e, freq / e, size=n_boot)
        return _fit_totals(counts.astype(np.float64) @ kinds, k)
    feats = kinds[which]
    out = []
    for idx in stats.resample_indexes(e, n_boot, seed, chunk // 4):  # 4 arrays of this size at once
        rows = len(idx)
        flat = (idx + np.arange(rows, dtype=np.int64)[:, None] * e).ravel()
        counts = np.bincount(flat, minlength=rows * e).reshape(rows, e)
        out.append(_fit_totals(counts.astype(np.float64) @ feats, k))
    return np.concatenate(out)


def ratings(cfg: Config, names: Sequence[str], rows: Sequence[PairJudgment]) -> dict[str, tuple]:
    """Bradley-Terry ratings with percentile-bootstrap CIs over examples (seeded with run.seed)."""
    by_example: dict[str, list[Comparison]] = defaultdict(list)
    for r in rows:
        s = _score(r)
        if s is not None:
            by_example[r.example_id].append((r.a, r.b, s))
    groups = list(by_example.values())
    if not groups:
        return {}
    kinds, which = _example_features(groups, names)
    totals = np.bincount(which, minlength=len(kinds)) @ kinds  # every example once
    point = _fit_totals(totals[None, :], len(names), tol=1e-10)[0]
    boots = bootstrap_ratings(groups, names, cfg.run.bootstrap_samples, cfg.run.seed)
    out = {}
    for i, n in enumerate(names):
        lo, hi = stats.percentile_ci(boots[:, i])
        out[n] = (round(float(point[i]), 1), (round(lo, 1), round(hi, 1)))
    return out


def pairwise_results(
    cfg: Config, dataset_of: Mapping[str, str], rows: Sequence[PairJudgment], text_len: Mapping[str, int]
) -> dict[str, PairwiseJudging] | None:
    """summary.json's `pairwise_judging`: one entry per dataset that has comparisons (`dataset_of`: example id ->
    dataset; `text_len`: response id -> characters of its text); None when judging.pairwise is not set."""
    if cfg.judging.pairwise is None:
        return None
    by_dataset: dict[str, list[PairJudgment]] = defaultdict(list)
    for r in rows:
        by_dataset[dataset_of.get(r.example_id, "")].append(r)
    return {name: _dataset_results(cfg, drows, text_len) for name, drows in by_dataset.items()}


def _dataset_results(cfg: Config, rows: Sequence[PairJudgment], text_len: Mapping[str, int]) -> PairwiseJudging:
    order = [c.name for c in cfg.candidates]
    by_pair: dict[tuple[str, str], list[PairJudgment]] = defaultdict(list)
    lengths: dict[str, dict[str, int]] = defaultdict(dict)
    for r in rows:
        by_pair[(r.a, r.b)].append(r)
        for cand, rid in zip((r.a, r.b), r.response_ids, strict=True):
            lengths[cand][rid] = text_len.get(rid, 0)
    names = [n for n in order if n in lengths]
    mean_chars = {n: rounded(fmean(lengths[n].values()), 1) for n in names}
    fitted = ratings(cfg, names, rows) if len(names) >= 3 else {}
    bias, decisive = position_bias(rows)
    return PairwiseJudging(
        pairs=tuple(pair_outcome(cfg, a, b, prs, text_len) for (a, b), prs in by_pair.items()),
        ratings=tuple(
            sorted(
                (Rating(n, fitted[n][0], fitted[n][1], mean_chars[n]) for n in names if n in fitted),
                key=lambda x: -(x.rating or 0.0),
            )
        ),
        position_bias=bias,
        decisive_verdicts=decisive,
        mean_chars=mean_chars,
    )
