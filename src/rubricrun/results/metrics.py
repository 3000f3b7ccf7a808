"""One headline metric per dataset, as the benchmark's own code computes it: the driver of each `tasks.spec.Metric`
(the verdicts or graded scores of each response, the example means, the bootstrap headline with its CI and std, the
`Agg` its aggregate reads; judge failures follow `on_error`). Sources: .agent/plans/007-faithful-scores.md."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from statistics import fmean
from typing import Any

from ..config import Config, dataset_name
from ..judging.answers import AUTO_CRITERION
from ..judging.protocol import SCALES
from ..tasks import registry
from ..tasks.spec import AccSpec, CandidateResult, DatasetAccumulator, DatasetResult, Metric
from ..types import Criterion, Example, Judgment, Response
from . import stats
from .accum import ExampleIds, PerExample

ON_ERROR = ("exclude", "not_met")


def verdicts_for(
    criteria: Sequence[Criterion], got: Mapping[str, str], on_error: str
) -> tuple[list[bool] | None, bool]:
    """(met flags in criteria order or None when the response is not scored, fully judged?); `got`: criterion id ->
    verdict, a criterion with none counting as `error`."""
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
    verdicts = [got.get(c.id, "error") for c in criteria]
    full = bool(criteria) and all(v in ("met", "not_met") for v in verdicts)
    if not criteria or (not full and on_error == "exclude"):
        return None, full
    return [v == "met" for v in verdicts], full


def _boot_std(values: Sequence[float], n_boot: int, seed: int, clip: Callable[[float], float]) -> float | None:
    """Std (ddof 0, as np.std) of the clipped means of `n_boot` resamples, drawn as stats.mean_ci draws them
    (stats.resample_means), so the std and the CI describe the same resamples."""
    if not len(values):
        return None
    return statistics.pstdev([clip(m) for m in stats.resample_means(values, n_boot, seed).tolist()])


def _mean_values(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per-response {key: value} -> {key: mean over the responses that have key}."""
    acc: dict[str, list[float]] = defaultdict(list)
    for d in rows:
        for k, v in d.items():
            acc[k].append(v)
    return {k: fmean(v) for k, v in acc.items()}


def expected_criteria(
    ex: Example, judgments: Sequence[Judgment], criteria: Sequence[Criterion] | None = None
) -> tuple[Criterion, ...]:
    """What a response to `ex` is scored on: `criteria` (the caller's criteria_for) if given; else the example's
    rubric; else `correct` for multiple choice / QA; else the criteria its judgments name (a config default
    rubric), with their judged weights."""
    if criteria is not None:
        return tuple(criteria)
    if ex.rubric:
        return ex.rubric
    if ex.kind != "open":
        return (AUTO_CRITERION,)
    seen: dict[str, Criterion] = {}
    for j in judgments:
        seen.setdefault(j.criterion_id, Criterion(id=j.criterion_id, text="", weight=j.weight))
    return tuple(seen.values())


class _CandidateAcc:
    """One candidate on one dataset so far: response counts and each scored example's values."""

    __slots__ = ("full", "partial", "rows", "scored", "values")

    def __init__(self) -> None:
        self.full = self.partial = self.scored = self.rows = 0
        self.values = PerExample()


class DatasetAcc:
    """A dataset's metric fed one example at a time (with its responses and judgments); result() aggregates. Per
    example it keeps the example's id and, per candidate, the example's values (results/accum.py)."""

    def __init__(self, acc: AccSpec) -> None:
        self.spec, self.name, self.metric, self.on_error = acc.metric, acc.name, acc.metric.name, acc.on_error
        self.n_boot, self.seed, self.samples = acc.n_boot, acc.seed, acc.samples
        self.ids = ExampleIds() if acc.ids is None else acc.ids  # a store shared with the caller's (SummaryAcc)
        self.turns = self.unscorable = 0
        self.cands: dict[str, _CandidateAcc] = {c: _CandidateAcc() for c in acc.samples or ()}

    def add(
        self,
        ex: Example,
        responses: Sequence[Response],
        judgments: Sequence[Judgment],
        criteria: Sequence[Criterion] | None = None,
        pos: int | None = None,
    ) -> None:
        """One example of this dataset, its responses and judgments; `criteria`: what they are scored on (None:
        expected_criteria infers it). `pos`: the example's position in a shared id store (which the caller added it
        to), else it is added to our own."""
        if pos is None:
            pos = self.ids.add(ex.id)
        self.turns += ex.turns  # a multi-turn example expects a response per turn
        crit = expected_criteria(ex, judgments, criteria)
        self.unscorable += _unscorable(self.spec, ex, crit)
        got: dict[str, dict[str, str]] = defaultdict(dict)
        scores: dict[str, dict[str, float]] = defaultdict(dict)  # graded scales: response -> criterion -> score
        for j in judgments:
            got[j.response_id][j.criterion_id] = j.verdict
            if j.score is not None:
                scores[j.response_id][j.criterion_id] = j.score
        mine: dict[str, list[Response]] = defaultdict(list)
        for r in responses:
            mine[r.candidate].append(r)
        for cand, rs in mine.items():
            acc = self.cands.get(cand) if self.samples is not None else self.cands.setdefault(cand, _CandidateAcc())
            if acc is None:
                continue
            rows: list[dict[str, float]] = []  # the values of its scored responses
            acc.rows += len(rs)
            for r in rs:
                if r.status != "ok":
                    continue
                met, is_full = verdicts_for(crit, got.get(r.id, {}), self.on_error)
                acc.full += is_full
                acc.partial += not is_full
                if met is None:
                    continue
                values = response_values(self.spec, ex, crit, met, r.turn, scores.get(r.id, {}))
                if "score" in values:
                    acc.scored += 1
                    rows.append(_conversation_values(ex, r.turn, values))
            if rows:
                acc.values.add(pos, _mean_values(rows))

    def result(self) -> DatasetResult:
        out, per_example = {}, {}
        for cand, acc in self.cands.items():
            expected = self.turns * self.samples[cand] if self.samples is not None else acc.rows
            per_example[cand] = acc.values.column("score", self.ids)
            out[cand] = self._candidate(acc, expected, per_example[cand].vals)
        return DatasetResult(self.name, self.metric, self.on_error, out, per_example=per_example)

    def _candidate(self, acc: _CandidateAcc, expected: int, headline: Sequence[float]) -> CandidateResult:
        clip = self.spec.clip
        ci = stats.mean_ci(headline, n_boot=self.n_boot, seed=self.seed)
        agg = _CandidateAgg(self.spec, acc.values, self.ids, headline, self.n_boot, self.seed)
        extra: dict[str, Any] = dict(self.spec.aggregate(agg))
        by_turn = agg.groups("turn:", clip)
        if by_turn and "by_turn" not in extra:  # multi-turn datasets: turn 1, turn 2, ... beside their average
            extra["by_turn"] = by_turn
        extra["unscorable"] = self.unscorable
        scored = ci["mean"] is not None
        return CandidateResult(
            score=clip(ci["mean"]) if scored else None,
            ci=(clip(ci["ci_low"]), clip(ci["ci_high"])) if scored else (None, None),
            std=_boot_std(headline, self.n_boot, self.seed, clip),
            n=len(headline),
            coverage=stats.rate(acc.full, expected) if acc.full <= expected else 1.0,
            partial=acc.partial,
            extra=extra,
            scored=acc.scored,
            expected=expected,
        )


def response_values(
    metric: Metric,
    ex: Example,
    criteria: Sequence[Criterion],
    met: Sequence[bool],
    turn: int,
    scores: Mapping[str, float],
) -> dict[str, float]:
    """A scored response's values (the judge's verdicts, or the humans': results/anchor.py). Graded metrics read the
    scores; a criterion without one (judged `error`, let in by on_error: not_met) counts as the lowest score of the
    scale, as not met counts as 0 of its weight."""
    if metric.scale not in SCALES:
        return metric.values(ex, criteria, met, turn)
    lo = SCALES[metric.scale][0]
    return _graded_values(metric, ex, criteria, [scores.get(c.id, lo) for c in criteria], turn)


def _graded_values(
    metric: Metric, ex: Example, criteria: Sequence[Criterion], scores: Sequence[float], turn: int = 1
) -> dict[str, float]:
    """{name: value} of one response on a graded metric; `scores` are on the scale, in criteria order. Each value
    is normalized to [0, 1] (the metric's values of the shares); `rating:` keys hold the same on the scale."""
    lo, hi = SCALES[metric.scale]
    groups = metric.values(ex, criteria, [(s - lo) / (hi - lo) for s in scores], turn)
    return {**groups, **{f"rating:{k}": lo + (hi - lo) * v for k, v in groups.items()}}


def _conversation_values(ex: Example, turn: int, values: dict[str, float]) -> dict[str, float]:
    """The response's score under its turn (multi-turn examples), then its task's regrouping (an example's own
    category in place of criterion categories). The example's value, the mean over its turns, is the average."""
    out = dict(values)
    if ex.turns > 1:
        out[f"turn:{turn}"] = values["score"]
    return registry.regroup(ex, out)


def _unscorable(metric: Metric, ex: Example, criteria: Sequence[Criterion]) -> bool:
    """An example no verdict could score: no criteria, or a denominator of 0 whatever the verdicts."""
    if not criteria:
        return True
    if metric.scale in SCALES:
        hi = SCALES[metric.scale][1]
        return "score" not in _graded_values(metric, ex, criteria, [hi] * len(criteria))
    return "score" not in metric.values(ex, criteria, [True] * len(criteria), 1)


class _CandidateAgg:
    """tasks.spec.Agg over one candidate's per-example values: what a metric's `aggregate` reads."""

    def __init__(
        self, spec: Metric, values: PerExample, ids: ExampleIds, headline: Sequence[float], n_boot: int, seed: int
    ) -> None:
        self.spec, self._values, self.ids, self.headline = spec, values, ids, stats.as_floats(headline)
        self.n_boot, self.seed = n_boot, seed

    def values(self, key: str) -> Sequence[float]:
        return self._values.values(key, self.ids)

    def groups(self, prefix: str, clip: Callable[[float], float] = float) -> dict[str, dict[str, Any]]:
        """{group: {"score", "std", "n"}} of the keys `prefix` + group."""
        return {
            g: {"score": clip(fmean(vals)), "std": _boot_std(vals, self.n_boot, self.seed, clip), "n": len(vals)}
            for g, vals in sorted(self._values.groups(prefix, self.ids).items())
        }

    def rated(self, kinds: Sequence[str]) -> dict[str, Any]:
        """A graded result on its own scale: `rating` with its CI, and by each kind (category, turn), each group
        with its normalized `score` and its `rating`."""
        ci = stats.mean_ci(self.values("rating:score"), n_boot=self.n_boot, seed=self.seed)
        out: dict[str, Any] = {
            "scale": self.spec.scale,
            "rating": ci["mean"],
            "rating_ci": (ci["ci_low"], ci["ci_high"]),
        }
        for kind in kinds:
            groups = self.groups(f"{kind}:")
            rated = self.groups(f"rating:{kind}:")
            out[f"by_{kind}"] = {g: {**d, "rating": rated[g]["score"]} for g, d in groups.items()}
        return out


def dataset_accs(
    cfg: Config, counts: Mapping[str, Mapping[str, int]], ids: ExampleIds | None = None
) -> dict[str, DatasetAccumulator]:
    """One accumulator per dataset with examples (config order, then the others in `counts` order): the metric's
    own (`Metric.accumulator`), else a DatasetAcc. `counts`: dataset -> metric -> rows calling for it
    (registry.metric_of), which decides the metric unless the config sets it. `ids`: one id store for them all
    (their examples are added to it by the caller), else each keeps its own."""
    samples = {c.name: c.samples_per_prompt for c in cfg.candidates}
    return {
        name: dataset_acc(name, metric, cfg.judging.on_error, cfg.run.bootstrap_samples, cfg.run.seed, samples, ids)
        for name, metric in dataset_metrics(cfg, counts).items()
    }


def dataset_metrics(cfg: Config, counts: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    """Each dataset with examples (config order, then the others in `counts` order) -> its metric: the config's
    `datasets[].metric`, else the one most of its rows call for, on the run's judging scale."""
    overrides = {dataset_name(d): d.metric for d in cfg.datasets}
    out = {}
    for name in [*overrides, *(n for n in counts if n not in overrides)]:
        if any(counts.get(name, {}).values()):
            metric = registry.metric_of_counts(counts[name], overrides.get(name))
            out[name] = registry.metric_on_scale(metric, cfg.judging.scale)
    return out


def dataset_acc(
    name: str,
    metric: str,
    on_error: str | None,
    n_boot: int,
    seed: int,
    samples_per_prompt: Mapping[str, int] | None,
    ids: ExampleIds | None = None,
) -> DatasetAccumulator:
    """A dataset's accumulator: its metric's own, else a DatasetAcc; `on_error` None: the metric's default.
    `samples_per_prompt`: candidate -> samples asked per example; it fixes the candidates and the expected response
    count (None: those seen, one per response row)."""
    spec = registry.metric(metric)  # raises ValueError for an unknown one
    on_error = registry.on_error_for(on_error, metric)
    return (spec.accumulator or DatasetAcc)(AccSpec(name, spec, on_error, n_boot, seed, samples_per_prompt, ids))
