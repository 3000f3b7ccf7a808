"""PRBench (scaleapi/PRBench): professional-reasoning conversations judged on weighted rubrics.

Metric `prbench`. Per response `get_clipped_points` = point_total / sum of positive weights (no per-response
clip), headline `mean_clipped` = max(0, mean) (evals.py), and `get_normalized_points` = (point_total - N) / (P - N)
averaged as `mean_normalized` beside it. PRBench's grader counts a reply it cannot read as not met
(`on_error: not_met` by default).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from ..data.schemas import Row, _build_prbench
from ..types import Criterion, Example
from .rubric import by_category, rubric_normalized
from .spec import Marks, Metric, Task, Values

SOURCE = "scaleapi/PRBench evals.py"


def prbench_points(criteria: Sequence[Criterion], met: Sequence[bool]) -> tuple[float | None, float | None]:
    """PRBench (get_clipped_points, get_normalized_points) of one response; None where the denominator is 0."""
    point_total = math.fsum(c.weight for c, m in zip(criteria, met, strict=True) if m)
    max_w = math.fsum(c.weight for c in criteria if c.weight > 0)
    clipped = point_total / max_w if max_w != 0 else None
    return clipped, rubric_normalized(criteria, met)


def floor0(x: float) -> float:
    return max(0.0, x)


def _values(ex: Example, criteria: Sequence[Criterion], met: Marks, turn: int) -> Values:
    clipped, normalized = prbench_points(criteria, met)  # type: ignore[arg-type]
    if clipped is None or normalized is None:
        return {}
    out = {"score": clipped, "normalized": normalized}
    field_name = ex.metadata.get("field")
    if isinstance(field_name, str) and field_name:
        out[f"field:{field_name}"] = clipped
        out[f"field_normalized:{field_name}"] = normalized
    out.update(by_category(criteria, met, lambda cs, ms: prbench_points(cs, ms)[0]))
    return out


def _detect(row: Row, keys: Collection[str]) -> bool:
    return "prompt_0" in keys


METRIC = Metric(name="prbench", scale="binary", source=SOURCE, values=_values, clip=floor0, on_error="not_met")

TASK = Task(name="prbench", detect=_detect, build=_build_prbench, metric=METRIC)  # type: ignore[arg-type]
