"""Rows for a judge meta-evaluation (tasks/meta_eval.py, figures in tasks/judge_eval.py): one conversation, one
completion, one rubric criterion and the human labels (met / not met) of that criterion on that completion. Pure:
rows in, `MetaRow`s out. The names it reads (META_FIELDS; `fields:` maps them as a dataset's does): data/README.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .schemas import Fail, Row, _messages, fail_at, type_name

META_FIELDS = tuple(
    "messages prompt response criterion labels category rater_ids prompt_id completion_id".split()  # generic names
)
_LABEL_WORDS = {"met": True, "not met": False, "not_met": False, "true": True, "false": False}


@dataclass(frozen=True)
class MetaRow:
    prompt_id: str
    completion_id: str
    messages: tuple[dict[str, Any], ...]  # the conversation before the completion
    completion: str
    criterion: str
    category: str  # "" when the row names none
    labels: tuple[bool, ...]  # the humans' verdicts: True met
    rater_ids: tuple[str, ...]  # one per label, or () when the row names no raters


def _label(value: Any, key: str, fail: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _LABEL_WORDS:
        return _LABEL_WORDS[value.strip().lower()]
    fail(key, f"expected a label (true/false, 1/0, met/not met), got {value!r}")


def _labels(r: Row, fail: Any) -> tuple[tuple[bool, ...], tuple[str, ...]]:
    raw = r.get("labels")
    if raw is None:
        fail(r.key("labels"), "missing (the human labels of the criterion)")
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        fail(r.key("labels"), "the label list is empty")
    labels = tuple(_label(v, f"{r.key('labels')}[{i}]", fail) for i, v in enumerate(items))
    ids = r.get("rater_ids")
    if ids is None:
        return labels, ()
    if not isinstance(ids, list) or len(ids) != len(labels):
        fail(r.key("rater_ids"), f"expected a list of {len(labels)} rater ids (one per label), got {ids!r}")
    return labels, tuple(str(i) for i in ids)


def _text(r: Row, name: str, fail: Any, *, required: bool = True) -> str:
    value = r.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        fail(r.key(name), "missing" if value is None else f"expected a non-empty string, got {type_name(value)}")
    return value


def meta_row(
    row: Mapping[str, Any],
    *,
    fields: Mapping[str, str] | None = None,
    fail: Fail | None = None,
    file: str = "",
    line: int = 0,
) -> MetaRow:
    """One row as a MetaRow (its names mapped by `fields`); a problem calls `fail(key, message)`, by default an
    InputError naming `file`, `line` and the key."""

    fail = fail or fail_at(file or None, line or None)
    if not isinstance(row, Mapping):
        fail(None, f"expected a JSON object, got {type_name(row)}")
    for name in fields or {}:
        if name not in META_FIELDS:
            fail(f"fields.{name}", f"unknown field name (accepted: {', '.join(META_FIELDS)})")
    r = Row(dict(row), dict(fields or {}))
    name = "messages" if r.get("messages") is not None else "prompt"
    prompt = r.get(name)
    if prompt is None:
        fail(r.key("prompt"), "missing (the conversation before the completion)")
    labels, rater_ids = _labels(r, fail)
    return MetaRow(
        prompt_id=str(r.get("prompt_id", line)),
        completion_id=str(r.get("completion_id", line)),
        messages=tuple(_messages(prompt, r.key(name), fail)),
        completion=_text(r, "response", fail),
        criterion=_text(r, "criterion", fail),
        category=_text(r, "category", fail, required=False),
        labels=labels,
        rater_ids=rater_ids,
    )
