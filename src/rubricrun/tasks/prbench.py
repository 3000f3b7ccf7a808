"""PRBench (scaleapi/PRBench): professional-reasoning conversations judged on weighted rubrics.

Metric `prbench`. Per response `get_clipped_points` = point_total / sum of positive weights (no per-response
clip), headline `mean_clipped` = max(0, mean) (evals.py), and `get_normalized_points` = (point_total - N) / (P - N)
averaged as `mean_normalized` beside it. PRBench's grader counts a reply it cannot read as not met
(`on_error: not_met` by default).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from typing import Any

from ..data.schemas import Built, Fail, Row, _number, rubric_of, type_name
from ..types import Criterion, Example
from .rubric import by_label, graded_normalized, points_share
from .spec import Agg, Marks, Metric, Task, Values

SOURCE = "scaleapi/PRBench evals.py (get_clipped_points, get_normalized_points, mean_clipped)"
_PROMPT = re.compile(r"prompt_(\d+)$")
_METADATA = ("id", "task", "field", "topic", "title", "turns")


def floor0(x: float) -> float:
    return max(0.0, x)


def _values(ex: Example, criteria: Sequence[Criterion], met: Marks, turn: int) -> Values:
    clipped, normalized = points_share(criteria, met), graded_normalized(criteria, met)
    if clipped is None or normalized is None:
        return {}
    out = {"score": clipped, "normalized": normalized}
    field_name = ex.metadata.get("field")
    if isinstance(field_name, str) and field_name:
        out[f"field:{field_name}"] = clipped
        out[f"field_normalized:{field_name}"] = normalized
    out.update(by_label(criteria, met, points_share))
    return out


def aggregate(agg: Agg) -> dict[str, Any]:
    """evals.py's mean_normalized, the unfloored mean, std_clipped / std_normalized (np.std, ddof 0, of the
    per-example points), and the floored score by criterion category and by the row's field."""
    normalized = memoryview(agg.values("normalized"))  # Python floats, for the standard library
    points = memoryview(agg.headline)
    by_field = agg.groups("field:", floor0)
    for f, d in agg.groups("field_normalized:").items():
        by_field[f]["mean_normalized"] = d["score"]
    return {
        "mean_normalized": statistics.fmean(normalized) if len(normalized) else None,
        "mean_clipped_unfloored": statistics.fmean(points) if len(points) else None,
        "std_clipped": statistics.pstdev(points) if len(points) else None,
        "std_normalized": statistics.pstdev(normalized) if len(normalized) else None,
        "by_category": agg.groups("category:", floor0),
        "by_field": by_field,
    }


def _build(r: Row, fail: Fail) -> Built:
    row = r.row
    last = max((int(m.group(1)) for k in row if (m := _PROMPT.match(k))), default=-1)
    messages: list[dict[str, Any]] = []
    last_prompt = None
    for i in range(last + 1):
        for key, role in ((f"prompt_{i}", "user"), (f"response_{i}", "assistant")):
            text = row.get(key)
            if text is not None and not isinstance(text, str):
                fail(key, f"expected a string, got {type_name(text)}")
            if not (text and text.strip()):
                continue
            if role == "user":
                refs = row.get(f"reference_texts_{i}")
                text = text if refs is None else _with_references(refs, f"reference_texts_{i}", fail) + text
                last_prompt = i
            elif not messages:
                fail(key, "an assistant response comes before any prompt")
            messages.append({"role": role, "content": text})
    if last_prompt is None:
        fail("prompt_0", "missing prompt (no non-empty prompt_N)")
    if messages[-1]["role"] != "user":
        fail(
            f"response_{last_prompt}",
            f"the last prompt (prompt_{last_prompt}) already has a response; nothing to answer",
        )
    return {
        "messages": messages,
        "messages_key": f"prompt_{last_prompt}",
        "id_key": "id" if row.get("id") is not None else "task" if row.get("task") is not None else None,
        "rubric": rubric_of(r, "rubric", fail),
        "metadata": {k: row[k] for k in _METADATA if row.get(k) is not None},
    }


def _with_references(refs: Any, key: str, fail: Fail) -> str:
    if isinstance(refs, str):
        refs = [refs]
    if not isinstance(refs, list) or not all(isinstance(t, str) for t in refs):
        fail(key, f"expected a string or a list of strings, got {type_name(refs)}")
    return "".join(
        f"--- Reference text {n} ---\n{t.strip()}\n--- End of reference text {n} ---\n\n" for n, t in enumerate(refs, 1)
    )


def criterion_reader(item: dict[str, Any], k: str, fail: Fail) -> tuple[str, float, list[str], str | None] | None:
    """A PRBench criterion (title, annotations: weight_class, <class>_weight, criteria_category, ...), in any row's
    rubric; None for an item without `annotations`."""
    if "annotations" not in item:
        return None
    ann = item["annotations"]
    if not isinstance(ann, dict):
        fail(f"{k}.annotations", f"expected an object, got {type_name(ann)}")
    text = item.get("title")
    if not isinstance(text, str) or not text.strip():
        text = ann.get("criteria_description")
        if not isinstance(text, str) or not text.strip():
            fail(f"{k}.title", "missing criterion text (title or annotations.criteria_description)")
    weight_class = ann.get("weight_class")
    if "weight" in item:
        weight = _number(item["weight"], f"{k}.weight", fail)
    else:
        if not isinstance(weight_class, str) or not weight_class.strip():
            fail(f"{k}.annotations.weight_class", "missing (it names the <class>_weight annotation to use)")
        wkey = weight_class.strip().replace(" ", "_") + "_weight"
        if wkey not in ann:
            fail(f"{k}.annotations.{wkey}", f"missing (weight_class is '{weight_class}')")
        weight = _number(ann[wkey], f"{k}.annotations.{wkey}", fail)
    category = next((v for a, v in ann.items() if "criteria_category" in a and isinstance(v, str) and v), None)
    tags = [f"weight_class:{weight_class.strip().replace(' ', '_')}"] if isinstance(weight_class, str) else []
    if isinstance(ann.get("field_for_category"), str) and ann["field_for_category"]:
        tags.append(f"field_for_category:{ann['field_for_category']}")
    return text, weight, tags, category


METRIC = Metric(
    name="prbench",
    scale="binary",
    source=SOURCE,
    values=_values,
    clip=floor0,
    aggregate=aggregate,
    on_error="not_met",  # PRBench's grader counts a reply it cannot read as not met
)

TASK = Task(
    name="prbench",
    title="PRBench",
    detect=lambda row, keys: "prompt_0" in keys,
    build=_build,
    metric=METRIC,
    native_fields=("task", "field"),
    criterion_reader=criterion_reader,
)
