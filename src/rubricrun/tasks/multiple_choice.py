"""Multiple choice (ARC, MMLU, INCLUDE, ...): a question and its options, answered by a letter, scored judge-free
(judging/auto.py: the letter a response commits to) as `accuracy`, the fraction of `correct` verdicts met. A row
that carries its own rubric is judged on it (the rubric metric)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..data.schemas import Row, _build_mc
from ..judging.auto import AUTO_CRITERION
from ..types import Criterion, Example
from .rubric import RUBRIC
from .spec import Marks, Metric, Task, Values


def _accuracy(ex: Example, criteria: Sequence[Criterion], met: Marks, turn: int) -> Values:
    flags = [m for c, m in zip(criteria, met, strict=True) if c.id == AUTO_CRITERION.id]
    return {"score": float(flags[0])} if flags else {}


def _detect(row: Row, keys: Collection[str]) -> bool:
    return "question" in keys and ("choices" in keys or "option_a" in keys)


ACCURACY = Metric(
    name="accuracy", scale="auto", source="exact match of the extracted letter or final answer", values=_accuracy
)

TASK = Task(name="mc", detect=_detect, build=_build_mc, metric=ACCURACY, metric_with_rubric=RUBRIC)  # type: ignore[arg-type]
