"""MT-Bench (lm-sys/FastChat llm_judge): multi-turn questions, each user turn asked after the candidate's own
answer to the one before.

Metric `mt_bench` (judging.scale 1-10, single-answer grading): one rating per response, reported on its own scale
(`rating`, `rating_ci`, by category and by turn, as FastChat's show_result.py averages the judgments) and, as
`score`, normalized (rating - 1) / 9, which is what enters leaderboards. At scale binary its rows get the rubric
metric.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..data.schemas import Row, _build_mtbench
from ..judging.protocol import RATING_1_10
from ..types import Criterion, Example
from .rubric import RUBRIC
from .spec import Marks, Metric, Task, Values

SOURCE = "lm-sys/FastChat fastchat/llm_judge (single-answer grading, show_result.py)"


def _values(ex: Example, criteria: Sequence[Criterion], shares: Marks, turn: int) -> Values:
    out = {"score": float(shares[0]), f"turn:{turn}": float(shares[0])}
    category = ex.metadata.get("category")
    if isinstance(category, str) and category:
        out[f"category:{category}"] = float(shares[0])
    return out


def _detect(row: Row, keys: Collection[str]) -> bool:
    return isinstance(row.get("turns"), list)


METRIC = Metric(name="mt_bench", scale="1-10", source=SOURCE, values=_values)

TASK = Task(
    name="mtbench",
    detect=_detect,
    build=_build_mtbench,  # type: ignore[arg-type]
    metric=RUBRIC,
    reference_per_turn=True,
    protocols={"1-10": RATING_1_10},
)
