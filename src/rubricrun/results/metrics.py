"""One headline metric per dataset, computed as the benchmark's own code computes it (pure functions).

Metrics (`METRICS`), each over the per-example score (an example's samples are averaged first):
- accuracy:    fraction of `correct` verdicts met (judge-free multiple choice and QA).
- healthbench: openai/simple-evals healthbench_eval.py. Per response `calculate_score`:
               achieved points (met weights, negatives included) / total positive points (may be negative);
               headline `_compute_clipped_stats(values, "mean")` = clip(mean, 0, 1); rubric tags (axis:*,
               level:*) and example tags (theme:*, physician_agreed_category:*) scored the same way; std is
               the std (ddof 0) of the clipped means of bootstrap resamples.
- prbench:     scaleapi/PRBench. Per response `get_clipped_points` = point_total / sum of positive weights
               (no per-response clip), headline `mean_clipped` = max(0, mean) (evals.py), and
               `get_normalized_points` = (point_total - N) / (P - N) averaged as `mean_normalized` beside it.
- rubric:      mean of the per-response normalized score (point_total - N) / (P - N), as scoring.py does.
- mt_bench:    judging.scale 1-10, MT-Bench single-answer grading: one rating per response. Reported on its own
               scale (`rating`, `rating_ci`, by category and by turn, as FastChat's show_result.py averages the
               judgments) and, as `score`, normalized (rating - 1) / 9, which is what enters leaderboards.
- rubric_graded: judging.scale 1-5, a score s per criterion; each criterion counts x = (s - 1) / 4 of its weight,
               score = (sum of w * x - N) / (P - N) (the rubric metric with x in place of met / not met), and
               `rating` = 1 + 4 * score on the 1-5 scale (the mean criterion score when all weights are equal).
Formulas, sources and every deviation are quoted in .agent/plans/007-faithful-scores.md.

Judge failures follow `on_error` (`ON_ERROR`): `exclude` leaves a response whose criteria are not all judged
out of the score (it is counted as `partial`); `not_met` counts an error (or missing) verdict as not met,
as PRBench's own grader does with a reply it cannot read.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import Config, dataset_name
from ..judging.auto import AUTO_CRITERION
from ..judging.graded import SCALES
from ..judging.rubric import criteria_for
from ..types import Criterion, Example, Judgment, Response
from . import stats
from .accum import ExampleIds, PerExample

METRICS = ("accuracy", "healthbench", "prbench", "rubric", "mt_bench", "rubric_graded")
GRADED_METRICS = {"mt_bench": "1-10", "rubric_graded": "1-5"}  # metric -> the judging.scale it reads
ON_ERROR = ("exclude", "not_met")

_FORMAT_METRIC = {"mc": "accuracy", "qa": "accuracy", "healthbench": "healthbench", "prbench": "prbench"}


@dataclass(frozen=True)
class CandidateResult:
    """One candidate on one dataset.

    score: the headline (None when nothing could be scored); ci: (lo, hi) percentile bootstrap over examples,
    clipped as the headline is; std: std (ddof 0) of the bootstrap headlines; n: examples scored;
    coverage: share of the expected responses that are fully judged (status ok, every criterion met or
    not_met); partial: responses with status ok whose criteria are not all judged (error or missing);
    scored: responses that entered the score; expected: responses the run should have produced;
    extra: metric-specific fields (breakdowns are {name: {"score", "std", "n", ...}}).
    """

    score: float | None
    ci: tuple[float | None, float | None]
    std: float | None
    n: int
    coverage: float | None
    partial: int
    extra: dict[str, Any] = field(default_factory=dict)
    scored: int = 0
    expected: int = 0
    per_example: dict[str, float] = field(default_factory=dict, repr=False)  # example id -> value, for paired diffs


@dataclass(frozen=True)
class DatasetResult:
    """A dataset's metric, the judge-failure policy that applied, and one result per candidate."""

    name: str
    metric: str
    on_error: str
    candidates: dict[str, CandidateResult] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------
# Which metric, which policy


def detect_metric(example: Example) -> str:
    """The metric an example's schema calls for: mc/qa -> accuracy, healthbench, prbench, else rubric.
    A multiple-choice or QA row that carries its own rubric is judged on it, so it is `rubric`."""
    fmt = example.metadata.get("format")
    if fmt in _FORMAT_METRIC and not (fmt in ("mc", "qa") and example.rubric):
        return _FORMAT_METRIC[fmt]
    if fmt is None and example.kind != "open" and not example.rubric:
        return "accuracy"
    return "rubric"


def dataset_metric(examples: Iterable[Example], override: str | None = None) -> str:
    """`override` (datasets[].metric) if set; else the metric most of the rows call for (ties: METRICS order)."""
    return metric_of_counts(Counter(detect_metric(ex) for ex in examples), override)


def metric_of_counts(counts: Mapping[str, int], override: str | None = None) -> str:
    """dataset_metric from the count of rows calling for each metric (detect_metric), so a run can count as it goes."""
    if override is not None:
        if override not in METRICS:
            raise ValueError(f"unknown metric {override!r} (expected one of {', '.join(METRICS)})")
        return override
    if not any(counts.values()):
        return "rubric"
    return max(METRICS, key=lambda m: (counts.get(m, 0), -METRICS.index(m)))


def graded_metric(metric: str, scale: str) -> str:
    """The metric a judged dataset gets on a graded scale (judge-free accuracy is not judged, so it stays)."""
    if scale == "binary" or metric == "accuracy" or metric in GRADED_METRICS:
        return metric
    return next(m for m, s in GRADED_METRICS.items() if s == scale)


def default_on_error(metric: str) -> str:
    """PRBench's grader counts a reply it cannot read as not met; elsewhere an unjudged response is left out."""
    return "not_met" if metric == "prbench" else "exclude"


def on_error_for(configured: str | None, metric: str) -> str:
    """`judging.on_error` when set, else the metric's default."""
    return configured if configured is not None else default_on_error(metric)


# ---------------------------------------------------------------------------------------------------
# Per-response values (pure; unit-tested against the official formulas)


def verdicts_for(
    criteria: Sequence[Criterion], got: Mapping[str, str], on_error: str
) -> tuple[list[bool] | None, bool]:
    """(met flags in criteria order or None when the response is not scored, fully judged?).

    `got` maps criterion id -> verdict. A criterion with no verdict counts as `error`."""
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
    verdicts = [got.get(c.id, "error") for c in criteria]
    full = bool(criteria) and all(v in ("met", "not_met") for v in verdicts)
    if not criteria or (not full and on_error == "exclude"):
        return None, full
    return [v == "met" for v in verdicts], full


def healthbench_score(criteria: Sequence[Criterion], met: Sequence[bool]) -> float | None:
    """simple-evals `calculate_score`: sum of met points / sum of positive points; None when no positive points."""
    total = math.fsum(c.weight for c in criteria if c.weight > 0)
    if total == 0:
        return None
    return math.fsum(c.weight for c, m in zip(criteria, met, strict=True) if m) / total


def prbench_points(criteria: Sequence[Criterion], met: Sequence[bool]) -> tuple[float | None, float | None]:
    """PRBench (get_clipped_points, get_normalized_points) of one response; None where the denominator is 0."""
    point_total = math.fsum(c.weight for c, m in zip(criteria, met, strict=True) if m)
    max_w = math.fsum(c.weight for c in criteria if c.weight > 0)
    min_w = math.fsum(c.weight for c in criteria if c.weight < 0)
    clipped = point_total / max_w if max_w != 0 else None
    normalized = (point_total - min_w) / (max_w - min_w) if max_w != min_w else None
    return clipped, normalized


def rubric_normalized(criteria: Sequence[Criterion], met: Sequence[bool]) -> float | None:
    """(points - N) / (P - N), the PRBench-style normalization scoring.py reports; None when P - N is 0."""
    return prbench_points(criteria, met)[1]


# ---------------------------------------------------------------------------------------------------
# Aggregation helpers


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _clip01(x: float) -> float:
    return min(1.0, max(0.0, x))


def _floor0(x: float) -> float:
    return max(0.0, x)


def _boot_std(values: Sequence[float], n_boot: int, seed: int, clip: Callable[[float], float]) -> float | None:
    """Std (ddof 0, as np.std) of the clipped means of `n_boot` resamples, drawn as stats.mean_ci draws them
    (stats.resample_means), so the std and the CI describe the same resamples."""
    if not len(values):
        return None
    return statistics.pstdev([clip(m) for m in stats.resample_means(values, n_boot, seed).tolist()])


def _headline(
    values: Sequence[float], n_boot: int, seed: int, clip: Callable[[float], float]
) -> tuple[float | None, tuple[float | None, float | None], float | None]:
    """(clip(mean), CI with clipped bounds, bootstrap std) over one value per example."""
    ci = stats.mean_ci(values, n_boot=n_boot, seed=seed)
    if ci["mean"] is None:
        return None, (None, None), None
    return clip(ci["mean"]), (clip(ci["ci_low"]), clip(ci["ci_high"])), _boot_std(values, n_boot, seed, clip)


def _group(by_group: Mapping[str, Sequence[float]], n_boot: int, seed: int, clip: Callable) -> dict:
    """{group: {"score", "std", "n"}} from {group: one value per example, in sorted example-id order}."""
    out = {}
    for g in sorted(by_group):
        vals = by_group[g]
        out[g] = {"score": clip(_mean(vals)), "std": _boot_std(vals, n_boot, seed, clip), "n": len(vals)}
    return out


def _example_means(rows: Mapping[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """{example: [per-response {key: value}]} -> {example: {key: mean over the responses that have key}}."""
    out: dict[str, dict[str, float]] = {}
    for eid, dicts in rows.items():
        acc: dict[str, list[float]] = defaultdict(list)
        for d in dicts:
            for k, v in d.items():
                acc[k].append(v)
        out[eid] = {k: _mean(v) for k, v in acc.items()}
    return out


# ---------------------------------------------------------------------------------------------------
# Per-metric response values: {name: value} for one scored response ("score" is the headline's value)


def _values_accuracy(ex: Example, criteria: Sequence[Criterion], met: Sequence[bool]) -> dict[str, float]:
    flags = [m for c, m in zip(criteria, met, strict=True) if c.id == AUTO_CRITERION.id]
    return {"score": float(flags[0])} if flags else {}


def _values_healthbench(ex: Example, criteria: Sequence[Criterion], met: Sequence[bool]) -> dict[str, float]:
    overall = healthbench_score(criteria, met)
    if overall is None:  # simple-evals asserts here: an example needs a positive criterion
        return {}
    # Same namespace and order as grade_sample's metrics: example tags, then rubric tags (which win a clash).
    out = {"score": overall, **{f"tag:{t}": overall for t in ex.metadata.get("example_tags") or ()}}
    tagged: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(criteria):
        for t in dict.fromkeys(c.tags):
            tagged[t].append(i)
    for t, idx in tagged.items():
        s = healthbench_score([criteria[i] for i in idx], [met[i] for i in idx])
        if s is not None:
            out[f"tag:{t}"] = s
    return out


def _values_prbench(ex: Example, criteria: Sequence[Criterion], met: Sequence[bool]) -> dict[str, float]:
    clipped, normalized = prbench_points(criteria, met)
    if clipped is None or normalized is None:
        return {}
    out = {"score": clipped, "normalized": normalized}
    field_name = ex.metadata.get("field")
    if isinstance(field_name, str) and field_name:
        out[f"field:{field_name}"] = clipped
        out[f"field_normalized:{field_name}"] = normalized
    out.update(_by_category(criteria, met, lambda cs, ms: prbench_points(cs, ms)[0]))
    return out


def _values_rubric(ex: Example, criteria: Sequence[Criterion], met: Sequence[bool]) -> dict[str, float]:
    value = rubric_normalized(criteria, met)
    if value is None:
        return {}
    return {"score": value, **_by_category(criteria, met, rubric_normalized)}


def _by_category(criteria: Sequence[Criterion], met: Sequence[bool], fn: Callable) -> dict[str, float]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(criteria):
        if c.category:
            groups[c.category].append(i)
    out = {}
    for cat, idx in groups.items():
        v = fn([criteria[i] for i in idx], [met[i] for i in idx])
        if v is not None:
            out[f"category:{cat}"] = v
    return out


def graded_normalized(criteria: Sequence[Criterion], shares: Sequence[float]) -> float | None:
    """(sum of w * x - N) / (P - N) with x in [0, 1] the share of each criterion met (binary: 0 or 1, where it is
    rubric_normalized); None when P - N is 0."""
    max_w = math.fsum(c.weight for c in criteria if c.weight > 0)
    min_w = math.fsum(c.weight for c in criteria if c.weight < 0)
    if max_w == min_w:
        return None
    return (math.fsum(c.weight * x for c, x in zip(criteria, shares, strict=True)) - min_w) / (max_w - min_w)


def graded_values(
    metric: str, ex: Example, criteria: Sequence[Criterion], scores: Sequence[float], turn: int = 1
) -> dict[str, float]:
    """{name: value} of one response on a graded metric; `scores` are on the scale, in criteria order. Each value
    is normalized to [0, 1]; `rating*` keys hold the same on the scale."""
    lo, hi = SCALES[GRADED_METRICS[metric]]
    shares = [(s - lo) / (hi - lo) for s in scores]
    if metric == "mt_bench":
        groups = {"score": shares[0], f"turn:{turn}": shares[0]}
        category = ex.metadata.get("category")
        if isinstance(category, str) and category:
            groups[f"category:{category}"] = shares[0]
    else:
        value = graded_normalized(criteria, shares)
        if value is None:
            return {}
        groups = {"score": value, **_by_category(criteria, shares, graded_normalized)}
    return {**groups, **{f"rating:{k}": lo + (hi - lo) * v for k, v in groups.items()}}


_VALUES = {
    "accuracy": _values_accuracy,
    "healthbench": _values_healthbench,
    "prbench": _values_prbench,
    "rubric": _values_rubric,
}
# Graded metrics: normalized values lie in [0, 1] by construction (scores are checked on their scale).
_CLIP = {"accuracy": float, "healthbench": _clip01, "prbench": _floor0, "rubric": float, "mt_bench": float}
_CLIP["rubric_graded"] = float


# ---------------------------------------------------------------------------------------------------
# The dataset result


def expected_criteria(
    ex: Example, judgments: Sequence[Judgment], criteria: Mapping[str, Sequence[Criterion]] | None = None
) -> tuple[Criterion, ...]:
    """What a response to `ex` is scored on: `criteria[ex.id]` (the caller's criteria_for) if given; else the
    example's rubric; else `correct` for multiple choice / QA; else the criteria its judgments name (a config
    default rubric), with their judged weights."""
    if criteria is not None and ex.id in criteria:
        return tuple(criteria[ex.id])
    if ex.rubric:
        return ex.rubric
    if ex.kind != "open":
        return (AUTO_CRITERION,)
    seen: dict[str, Criterion] = {}
    for j in judgments:
        seen.setdefault(j.criterion_id, Criterion(id=j.criterion_id, text="", weight=j.weight))
    return tuple(seen.values())


def dataset_result(
    name: str,
    metric: str,
    examples: Sequence[Example],
    responses: Sequence[Response],
    judgments: Sequence[Judgment],
    *,
    on_error: str,
    n_boot: int,
    seed: int,
    criteria: Mapping[str, Sequence[Criterion]] | None = None,
    samples_per_prompt: Mapping[str, int] | None = None,
) -> DatasetResult:
    """Every candidate's `metric` on this dataset's `examples` (responses and judgments of other datasets are
    ignored). `criteria`: example id -> the criteria its responses are scored on (rubric.criteria_for); when
    absent they are inferred (see expected_criteria). `samples_per_prompt`: candidate -> samples asked per
    example; it fixes the candidates (in its order) and the expected response count (default: the candidates
    seen in `responses`, one expected response per response row)."""
    acc = DatasetAcc(name, metric, on_error=on_error, n_boot=n_boot, seed=seed, samples_per_prompt=samples_per_prompt)
    by_id = {ex.id: ex for ex in examples}
    rs: dict[str, list[Response]] = defaultdict(list)
    for r in responses:
        if r.example_id in by_id:
            rs[r.example_id].append(r)
    js: dict[str, list[Judgment]] = defaultdict(list)
    for j in judgments:
        if j.example_id in by_id:
            js[j.example_id].append(j)
    for eid, ex in by_id.items():
        acc.add(ex, rs.get(eid, ()), js.get(eid, ()), None if criteria is None else criteria.get(eid))
    return acc.result()


class _CandidateAcc:
    """One candidate on one dataset so far: response counts and each scored example's values."""

    __slots__ = ("full", "partial", "rows", "scored", "values")

    def __init__(self) -> None:
        self.full = self.partial = self.scored = self.rows = 0
        self.values = PerExample()


class DatasetAcc:
    """dataset_result fed one example at a time (with its responses and judgments); result() aggregates. Per
    example it keeps the example's id and, per candidate, the example's values (results/accum.py)."""

    def __init__(
        self,
        name: str,
        metric: str,
        *,
        on_error: str,
        n_boot: int,
        seed: int,
        samples_per_prompt: Mapping[str, int] | None = None,
        ids: ExampleIds | None = None,
    ) -> None:
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r} (expected one of {', '.join(METRICS)})")
        self.name, self.metric, self.on_error, self.n_boot, self.seed = name, metric, on_error, n_boot, seed
        self.samples = samples_per_prompt
        self.ids = ExampleIds() if ids is None else ids  # a store shared with the caller's (summary.SummaryAcc)
        self.turns = self.unscorable = 0
        self.cands: dict[str, _CandidateAcc] = {c: _CandidateAcc() for c in samples_per_prompt or ()}
        self._last: tuple[tuple[Criterion, ...], bool] | None = None  # _unscorable of the last criteria (below)

    def add(
        self,
        ex: Example,
        responses: Sequence[Response],
        judgments: Sequence[Judgment],
        criteria: Sequence[Criterion] | None = None,
        pos: int | None = None,
    ) -> None:
        """One example of this dataset, its responses and judgments; `criteria` as dataset_result's for it. `pos`:
        the example's position in a shared id store (which the caller added it to), else it is added to our own."""
        if pos is None:
            pos = self.ids.add(ex.id)
        self.turns += ex.turns  # a multi-turn example expects a response per turn
        crit = expected_criteria(ex, judgments, None if criteria is None else {ex.id: criteria})
        # Whether a score can exist depends on the criteria alone, which a dataset's examples mostly share (the
        # judge-free `correct`, a default rubric): computed again only when they change (plan 012).
        if self._last is None or self._last[0] != crit:
            self._last = (crit, _unscorable(self.metric, ex, crit))
        self.unscorable += self._last[1]
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
            if acc is not None:
                self._add_candidate(acc, pos, ex, crit, rs, got, scores)

    def _add_candidate(
        self,
        acc: _CandidateAcc,
        pos: int,
        ex: Example,
        crit: Sequence[Criterion],
        responses: Sequence[Response],
        got: Mapping[str, Mapping[str, str]],
        scores: Mapping[str, Mapping[str, float]],
    ) -> None:
        rows: list[dict[str, float]] = []
        acc.rows += len(responses)
        for r in responses:
            if r.status != "ok":
                continue
            met, is_full = verdicts_for(crit, got.get(r.id, {}), self.on_error)
            acc.full += is_full
            acc.partial += not is_full
            if met is None:
                continue
            values = _response_values(self.metric, ex, crit, met, r, scores.get(r.id, {}))
            if "score" in values:
                acc.scored += 1
                rows.append(_conversation_values(ex, r.turn, values))
        if rows:
            acc.values.add(pos, _example_means({ex.id: rows})[ex.id])

    def result(self) -> DatasetResult:
        out = {}
        for cand, acc in self.cands.items():
            expected = self.turns * self.samples[cand] if self.samples is not None else acc.rows
            out[cand] = self._candidate(acc, expected)
        return DatasetResult(name=self.name, metric=self.metric, on_error=self.on_error, candidates=out)

    def _candidate(self, acc: _CandidateAcc, expected: int) -> CandidateResult:
        per_example = acc.values.column("score", self.ids)
        headline = per_example.vals
        score, ci, std = _headline(headline, self.n_boot, self.seed, _CLIP[self.metric])
        extra = _extra(self.metric, acc.values, self.ids, headline, self.n_boot, self.seed)
        extra["unscorable"] = self.unscorable
        return CandidateResult(
            score=score,
            ci=ci,
            std=std,
            n=len(headline),
            coverage=stats.rate(acc.full, expected) if acc.full <= expected else 1.0,
            partial=acc.partial,
            extra=extra,
            scored=acc.scored,
            expected=expected,
            per_example=per_example,
        )


def _response_values(
    metric: str,
    ex: Example,
    criteria: Sequence[Criterion],
    met: Sequence[bool],
    r: Response,
    scores: Mapping[str, float],
) -> dict[str, float]:
    """A scored response's values. Graded metrics read the scores; a criterion without one (judged `error`, let in
    by on_error: not_met) counts as the lowest score of the scale, as not met counts as 0 of its weight."""
    if metric not in GRADED_METRICS:
        return _VALUES[metric](ex, criteria, met)
    lo = SCALES[GRADED_METRICS[metric]][0]
    return graded_values(metric, ex, criteria, [scores.get(c.id, lo) for c in criteria], r.turn)


def _conversation_values(ex: Example, turn: int, values: dict[str, float]) -> dict[str, float]:
    """MT-Bench's breakdowns: the response's score under its turn (multi-turn examples), and under the example's
    own category (MT-Bench rows: writing, math, ...) in place of criterion categories. The example's value, the
    mean over its turns, is MT-Bench's "average"."""
    out = dict(values)
    if ex.turns > 1:
        out[f"turn:{turn}"] = values["score"]
    category = ex.metadata.get("category")
    if ex.metadata.get("format") == "mtbench" and isinstance(category, str) and category:
        out = {k: v for k, v in out.items() if not k.startswith("category:")}
        out[f"category:{category}"] = values["score"]
    return out


def _unscorable(metric: str, ex: Example, criteria: Sequence[Criterion]) -> bool:
    """An example no verdict could score: no criteria, or a denominator of 0 whatever the verdicts."""
    if not criteria:
        return True
    if metric in GRADED_METRICS:
        hi = SCALES[GRADED_METRICS[metric]][1]
        return "score" not in graded_values(metric, ex, criteria, [hi] * len(criteria))
    return "score" not in _VALUES[metric](ex, criteria, [True] * len(criteria))


def _extra(
    metric: str, values: PerExample, ids: ExampleIds, headline: Sequence[float], n_boot: int, seed: int
) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if metric == "healthbench":
        extra["mean_unclipped"] = _mean(headline) if len(headline) else None
        extra["by_tag"] = _group(values.groups("tag:", ids), n_boot, seed, _clip01)
    elif metric == "prbench":
        normalized = memoryview(values.values("normalized", ids))  # Python floats, for the standard library
        points = memoryview(stats.as_floats(headline))
        extra["mean_normalized"] = _mean(normalized) if len(normalized) else None
        extra["mean_clipped_unfloored"] = _mean(points) if len(points) else None
        # evals.py's std_clipped / std_normalized: np.std (ddof 0) of the per-example points.
        extra["std_clipped"] = statistics.pstdev(points) if len(points) else None
        extra["std_normalized"] = statistics.pstdev(normalized) if len(normalized) else None
        extra["by_category"] = _group(values.groups("category:", ids), n_boot, seed, _floor0)
        by_field = _group(values.groups("field:", ids), n_boot, seed, _floor0)
        for f, d in _group(values.groups("field_normalized:", ids), n_boot, seed, float).items():
            by_field[f]["mean_normalized"] = d["score"]
        extra["by_field"] = by_field
    elif metric == "rubric":
        extra["by_category"] = _group(values.groups("category:", ids), n_boot, seed, float)
    elif metric in GRADED_METRICS:
        extra.update(_graded_extra(metric, values, ids, n_boot, seed))
    by_turn = _group(values.groups("turn:", ids), n_boot, seed, _CLIP[metric])
    if by_turn and "by_turn" not in extra:  # multi-turn datasets: turn 1, turn 2, ... beside their average
        extra["by_turn"] = by_turn
    return extra


def _graded_extra(metric: str, values: PerExample, ids: ExampleIds, n_boot: int, seed: int) -> dict:
    """The result on its own scale: `rating` with its CI, and by category (and by turn for mt_bench), each group
    with its normalized `score` and its `rating`."""
    ratings = values.values("rating:score", ids)
    ci = stats.mean_ci(ratings, n_boot=n_boot, seed=seed)
    out: dict[str, Any] = {
        "scale": GRADED_METRICS[metric],
        "rating": ci["mean"],
        "rating_ci": (ci["ci_low"], ci["ci_high"]),
    }
    for kind in ("category", "turn") if metric == "mt_bench" else ("category",):
        groups = _group(values.groups(f"{kind}:", ids), n_boot, seed, float)
        rated = _group(values.groups(f"rating:{kind}:", ids), n_boot, seed, float)
        out[f"by_{kind}"] = {g: {**d, "rating": rated[g]["score"]} for g, d in groups.items()}
    return out


def dataset_results(
    cfg: Config, examples: Sequence[Example], responses: Sequence[Response], judgments: Sequence[Judgment]
) -> list[DatasetResult]:
    """One DatasetResult per dataset of the run (config order, then synthesized ones), each with its metric
    (`datasets[].metric` or detected), its on_error policy, the config's criteria and samples per prompt."""
    counts: dict[str, Counter] = {}
    for ex in examples:
        counts.setdefault(ex.dataset, Counter())[detect_metric(ex)] += 1
    accs = dataset_accs(cfg, counts)
    by_ex: dict[str, tuple[list[Response], list[Judgment]]] = {ex.id: ([], []) for ex in examples}
    for r in responses:
        if r.example_id in by_ex:
            by_ex[r.example_id][0].append(r)
    for j in judgments:
        if j.example_id in by_ex:
            by_ex[j.example_id][1].append(j)
    for ex in examples:
        accs[ex.dataset].add(ex, *by_ex[ex.id], criteria_for(ex, cfg))
    return [acc.result() for acc in accs.values()]


def dataset_accs(
    cfg: Config, counts: Mapping[str, Mapping[str, int]], ids: ExampleIds | None = None
) -> dict[str, DatasetAcc]:
    """One DatasetAcc per dataset with examples (config order, then the others in `counts` order); `counts`:
    dataset -> metric -> rows calling for it (detect_metric), which decides the metric unless the config sets it.
    `ids`: one id store for them all (their examples are added to it by the caller), else each keeps its own."""
    overrides = {dataset_name(d): d.metric for d in cfg.datasets}
    samples = {c.name: c.samples_per_prompt for c in cfg.candidates}
    out = {}
    for name in [*overrides, *(n for n in counts if n not in overrides)]:
        if not any(counts.get(name, {}).values()):
            continue
        metric = graded_metric(metric_of_counts(counts[name], overrides.get(name)), cfg.judging.scale)
        out[name] = DatasetAcc(
            name,
            metric,
            on_error=on_error_for(cfg.judging.on_error, metric),
            n_boot=cfg.run.bootstrap_samples,
            seed=cfg.run.seed,
            samples_per_prompt=samples,
            ids=ids,
        )
    return out
