"""HealthBench (openai/simple-evals): conversations judged on physician-written rubrics with signed points.

Metric `healthbench`, as healthbench_eval.py computes it. Per response `calculate_score`: achieved points (met
weights, negatives included) / total positive points (may be negative); headline `_compute_clipped_stats(values,
"mean")` = clip(mean, 0, 1); rubric tags (axis:*, level:*) and example tags (theme:*, physician_agreed_category:*)
scored the same way; std is the std (ddof 0) of the clipped means of bootstrap resamples.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean
from typing import Any

from ..data.schemas import Built, Fail, Row, _messages, _required, rubric_of, type_name
from ..types import Criterion, Example
from .rubric import by_label, points_share
from .spec import Agg, Marks, Metric, Task, Values

SOURCE = "openai/simple-evals healthbench_eval.py (calculate_score, _compute_clipped_stats)"


def clip01(x: float) -> float:
    return min(1.0, max(0.0, x))


def _values(ex: Example, criteria: Sequence[Criterion], met: Marks, turn: int) -> Values:
    overall = points_share(criteria, met)  # simple-evals' calculate_score
    if overall is None:  # simple-evals asserts here: an example needs a positive criterion
        return {}
    # Same namespace and order as grade_sample's metrics: example tags, then rubric tags (which win a clash).
    out = {"score": overall, **{f"tag:{t}": overall for t in ex.metadata.get("example_tags") or ()}}
    out.update(by_label(criteria, met, points_share, "tag", lambda c: dict.fromkeys(c.tags)))
    return out


def aggregate(agg: Agg) -> dict[str, Any]:
    """The unclipped mean beside the clipped headline, and every tag's clipped score (grade_sample's metrics)."""
    headline = agg.headline
    return {
        "mean_unclipped": fmean(headline) if len(headline) else None,
        "by_tag": agg.groups("tag:", clip01),
    }


def _build(r: Row, fail: Fail) -> Built:
    prompt = _required(r, "prompt", "healthbench", fail)
    messages = _messages(prompt, r.key("prompt"), fail)
    rubric = rubric_of(r, "rubrics", fail, require_weight="HealthBench criteria carry points")
    metadata: dict[str, Any] = {}
    tags = r.get("example_tags")
    if tags is not None:
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            fail(r.key("example_tags"), f"expected a list of strings, got {type_name(tags)}")
        metadata["example_tags"] = tags
    if r.get("prompt_id") is not None:
        metadata["prompt_id"] = r.get("prompt_id")
    reference = None
    ideal = r.row.get("ideal_completions_data")
    if isinstance(ideal, dict) and isinstance(ideal.get("ideal_completion"), str):
        reference = ideal["ideal_completion"]
    return Built(
        messages=messages,
        messages_key=r.key("prompt"),
        id_key=r.key("prompt_id"),
        rubric=rubric,
        metadata=metadata,
        reference=reference,
    )


METRIC = Metric(
    name="healthbench",
    scale="binary",
    source=SOURCE,
    values=_values,
    clip=clip01,
    aggregate=aggregate,
)

TASK = Task(
    name="healthbench",
    title="HealthBench",
    detect=lambda row, keys: "rubrics" in keys or ("prompt_id" in keys and isinstance(row.get("prompt"), list)),
    build=_build,
    metric=METRIC,
    native_fields=("rubrics", "prompt_id", "example_tags"),
    reference_in_auto=False,  # an ideal completion is one physician's answer, not a key: shown only when asked
)
