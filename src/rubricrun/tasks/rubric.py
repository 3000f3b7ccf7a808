"""The generic rubric benchmark: rows with a prompt or messages (and an optional rubric or answer), judged on
their rubric (or `judging.default_rubric`) per criterion, on the binary scale or 1-5.

Metrics: `rubric`, the mean of the per-response normalized score (points - N) / (P - N), as scoring.py does; and
`rubric_graded` (judging.scale 1-5), a score s per criterion, each counting x = (s - 1) / 4 of its weight,
score = (sum of w * x - N) / (P - N), with `rating` = 1 + 4 * score on the 1-5 scale.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from ..data.schemas import Built, Fail, Row, _messages, text_value
from ..types import Criterion, Example
from .spec import Agg, Marks, Metric, Task, Values

SOURCE = "rubricrun results/scoring.py (PRBench-style normalization, .agent/plans/007-faithful-scores.md)"


def by_label(
    criteria: Sequence[Criterion],
    marks: Marks,
    fn: Callable,
    prefix: str = "category",
    labels: Callable[[Criterion], Iterable[str]] = lambda c: (c.category,) if c.category else (),
) -> dict[str, float]:
    """{"<prefix>:<label>": fn(the criteria carrying that label, their marks)} for each label of a criterion (its
    category, or what `labels` reads); a group whose fn is None is left out."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(criteria):
        for label in labels(c):
            groups[label].append(i)
    out = {}
    for label, idx in groups.items():
        v = fn([criteria[i] for i in idx], [marks[i] for i in idx])
        if v is not None:
            out[f"{prefix}:{label}"] = v
    return out


def graded_normalized(criteria: Sequence[Criterion], shares: Marks) -> float | None:
    """(sum of w * x - N) / (P - N) with x in [0, 1] the share of each criterion met; None when P - N is 0. Binary
    verdicts (x 0 or 1) give (points - N) / (P - N), the PRBench-style normalization scoring.py reports, to the bit:
    math.fsum rounds the exact sum once, and w * 1 = w, w * 0 = 0 add nothing inexact."""
    max_w = math.fsum(c.weight for c in criteria if c.weight > 0)
    min_w = math.fsum(c.weight for c in criteria if c.weight < 0)
    if max_w == min_w:
        return None
    return (math.fsum(c.weight * x for c, x in zip(criteria, shares, strict=True)) - min_w) / (max_w - min_w)


def points_share(criteria: Sequence[Criterion], met: Marks) -> float | None:
    """The weights of the criteria met over the sum of positive weights, None when that is 0: HealthBench's
    calculate_score and PRBench's get_clipped_points (its get_normalized_points is graded_normalized)."""
    max_w = math.fsum(c.weight for c in criteria if c.weight > 0)
    return math.fsum(c.weight for c, m in zip(criteria, met, strict=True) if m) / max_w if max_w != 0 else None


def _values(ex: Example, criteria: Sequence[Criterion], marks: Marks, turn: int) -> Values:
    value = graded_normalized(criteria, marks)
    if value is None:
        return {}
    return {"score": value, **by_label(criteria, marks, graded_normalized)}


def _detect(row: Row, keys: Collection[str]) -> bool:
    return "prompt" in keys or "messages" in keys


def _build(r: Row, fail: Fail) -> Built:
    if r.get("messages") is not None:
        messages = _messages(r.get("messages"), r.key("messages"), fail)
        mkey = r.key("messages")
    else:
        prompt = r.get("prompt")
        if prompt is None:
            fail(
                r.key("prompt"),
                "missing prompt (give 'prompt' or 'messages', or map a key with fields: {prompt: <key>})",
            )
        messages = _messages(prompt, r.key("prompt"), fail)
        mkey = r.key("prompt")
    answer = r.get("answer")
    if answer is not None:
        answer = text_value(answer, r.key("answer"), fail).strip()
    return Built(messages=messages, messages_key=mkey, answer=answer)


def aggregate(agg: Agg) -> dict[str, Any]:
    return {"by_category": agg.groups("category:")}


RUBRIC = Metric(name="rubric", scale="binary", source=SOURCE, values=_values, aggregate=aggregate)
# Graded metrics: normalized values lie in [0, 1] by construction (scores are checked on their scale).
RUBRIC_GRADED = Metric(
    name="rubric_graded",
    scale="1-5",
    source=SOURCE,
    values=_values,
    aggregate=lambda agg: agg.rated(("category",)),  # the result on the 1-5 scale, by criterion category
)

TASK = Task(name="generic", title="rubric", detect=_detect, build=_build, metric=RUBRIC)
