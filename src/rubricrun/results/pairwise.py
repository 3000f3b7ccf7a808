"""Pairwise judging results per dataset (docs/judging.md): win / tie / loss rates with bootstrap CIs, Bradley-Terry
ratings, the position-bias rate, mean answer lengths and length-controlled win rates. Bradley-Terry: Hunter's (2004)
MM iteration p_i <- W_i / sum_j n_ij / (p_i + p_j), a tie half a win to each side (Chatbot Arena's compute_mle_elo),
one virtual tie per pair so a candidate that lost every comparison (often, in a resample) has a finite rating.
Length control: AlpacaEval 2's `length_controlled_minimal` GLM (tatsu-lab/alpaca_eval, metrics/glm_winrate.py),
P(a preferred) = logistic(theta + gamma * tanh(d / sd(d))), d = len_a - len_b, sd with ddof=1 (pandas), fitted to
a's fractional preferences by maximum likelihood; docs/judging.md ("Length-controlled win rate") has the differences."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

import numpy as np

from ..config import Config
from ..types import PairJudgment
from . import stats
from .stats import rounded
from .summary_types import PairOutcome, PairwiseJudging, Rating

Comparison = tuple[str, str, float]  # (a, b, a's score: 1 win, 0.5 tie, 0 loss)

BT_PRIOR_TIES = 1.0  # virtual ties per pair of candidates in the summary's fit (see the module docstring)
_KINDS = 1024  # at most this many kinds of example: the bootstrap draws counts per kind (`bootstrap_ratings`)
_MAX_ITER = 100  # Newton iterations of the length-controlled fit
_TOL = 1e-12  # Newton stops when no coefficient moves more than this
_MAX_COEF = 30.0  # |coefficient| beyond this: the preferences are separated, the MLE does not exist


def _score(row: PairJudgment) -> float | None:
    """a's score in the comparison: 1 win, 0.5 tie, 0 loss; None for an error."""
    return {row.a: 1.0, "tie": 0.5, row.b: 0.0}.get(row.winner) if row.winner != "error" else None


def pair_outcome(cfg: Config, a: str, b: str, rows: Sequence[PairJudgment], text_len: Mapping[str, int]) -> PairOutcome:
    """a against b: counts, and rates as means over examples (an example's turns averaged) with bootstrap CIs;
    beside them AlpacaEval 2's length-controlled win rate (`text_len`: response id -> characters of its text)."""
    per_example: dict[str, list[float]] = defaultdict(list)
    prefs = [_score(r) for r in rows]
    for r, s in zip(rows, prefs, strict=True):
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
        prefs,
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
