"""Question answering with a final answer (GSM8K's `#### <answer>`), matched judge-free (judging/auto.py) and
scored as `accuracy`. A row that carries its own rubric is judged on it (the rubric metric)."""

from __future__ import annotations

from collections.abc import Collection

from ..data.schemas import Row, _build_qa
from .multiple_choice import ACCURACY
from .rubric import RUBRIC
from .spec import Task


def _detect(row: Row, keys: Collection[str]) -> bool:
    return "question" in keys and "answer" in keys


TASK = Task(name="qa", detect=_detect, build=_build_qa, metric=ACCURACY, metric_with_rubric=RUBRIC)  # type: ignore[arg-type]
