"""HealthBench (openai/simple-evals): conversations judged on physician-written rubrics with signed points.

Metric `healthbench`, as healthbench_eval.py computes it. Per response `calculate_score`: achieved points (met
weights, negatives included) / total positive points (may be negative); headline `_compute_clipped_stats(values,
"mean")` = clip(mean, 0, 1); rubric tags (axis:*, level:*) and example tags (theme:*, physician_agreed_category:*)
scored the same way; std is the std (ddof 0) of the clipped means of bootstrap resamples.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Sequence

from ..data.schemas import Row, _build_healthbench
from ..types import Criterion, Example
from .spec import Marks, Metric, Task, Values

SOURCE = "openai/simple-evals healthbench_eval.py"


def healthbench_score(criteria: Sequence[Criterion], met: Sequence[bool]) -> float | None:
    """simple-evals `calculate_score`: sum of met points / sum of positive points; None when no positive points."""
    total = math.fsum(c.weight for c in criteria if c.weight > 0)
    if total == 0:
        return None
    return math.fsum(c.weight for c, m in zip(criteria, met, strict=True) if m) / total


def clip01(x: float) -> float:
    return min(1.0, max(0.0, x))


def _values(ex: Example, criteria: Sequence[Criterion], met: Marks, turn: int) -> Values:
    overall = healthbench_score(criteria, met)  # type: ignore[arg-type]
    if overall is None:  # simple-evals asserts here: an example needs a positive criterion
        return {}
    # Same namespace and order as grade_sample's metrics: example tags, then rubric tags (which win a clash).
    out = {"score": overall, **{f"tag:{t}": overall for t in ex.metadata.get("example_tags") or ()}}
    tagged: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(criteria):
        for t in dict.fromkeys(c.tags):
            tagged[t].append(i)
    for t, idx in tagged.items():
        s = healthbench_score([criteria[i] for i in idx], [met[i] for i in idx])  # type: ignore[misc]
        if s is not None:
            out[f"tag:{t}"] = s
    return out


def _detect(row: Row, keys: Collection[str]) -> bool:
    return "rubrics" in keys or ("prompt_id" in keys and isinstance(row.get("prompt"), list))


METRIC = Metric(name="healthbench", scale="binary", source=SOURCE, values=_values, clip=clip01)

TASK = Task(name="healthbench", detect=_detect, build=_build_healthbench, metric=METRIC)  # type: ignore[arg-type]
