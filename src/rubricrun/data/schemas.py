"""What a row schema is (`RowSchema`, whose `build` returns a `Built`), the row view builders read through, and the
readers they share (messages, text, numbers, ids, rubrics). The builders are the tasks' own (tasks/<name>.py
`_build`); `loaders.RowParser` turns a `Built` into an `Example`. `fail(key, message)` raises the `InputError` that names the
file, line and key. The schemas are described in data/README.md.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Collection, Sequence
from typing import Any, NoReturn, Protocol, TypedDict

from ..errors import InputError, type_name
from ..types import Criterion, Turn, rubric_weights_problem

_PART_TYPES = ("text", "image_url", "input_audio", "file")
MISSING = object()  # what `resolve` gives for a path the row does not have


def resolve(row: dict[str, Any], path: str) -> Any:
    """The value at a row key, or at a dotted path into nested objects (`choices.text`; a number indexes a list).
    A key that itself contains dots (a flattened column `choices.text`) wins over the path."""
    if path in row:
        return row[path]
    value: Any = row
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


class Row:
    """A row seen through the `fields` mapping: .get('prompt') reads the row key mapped to 'prompt'. `readers`: the
    criterion readers a rubric in it is read with (rubric_of's; the loader passes its schemas')."""

    __slots__ = ("row", "fields", "readers")

    def __init__(self, row: dict[str, Any], fields: dict[str, str], readers: Sequence[CriterionReader] = ()):
        self.row, self.fields, self.readers = row, fields, readers

    def key(self, name: str) -> str:
        return self.fields.get(name, name)

    def get(self, name: str, default: Any = None) -> Any:
        path = self.fields.get(name)
        if path is None:
            return self.row.get(name, default)
        value = resolve(self.row, path)
        return default if value is MISSING or value is None else value


Fail = Callable[..., NoReturn]


def fail_at(file: str | None, line: int | None) -> Fail:
    """The `fail(key, message)` that raises the InputError naming `file`, `line` and the key."""

    def fail(key: str | None, message: str) -> NoReturn:
        raise InputError(message, file=file, line=line, key=key)

    return fail


def content_id(value: Any) -> str:
    """An id made from content, the same on every run: sha256 of `value` as canonical JSON, 12 hex digits."""
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def native_id(value: Any, key: str, fail: Fail) -> str | int:
    """A row's own id: a non-empty string or an integer."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        fail(key, f"expected a non-empty string or integer id, got {value!r}")
    return value


class Built(TypedDict, total=False):
    """What a schema's `build` returns; `loaders.RowParser` turns it into an Example."""

    messages: list[dict[str, Any]]  # required
    messages_key: str
    id_key: str | None  # the row key holding the native id
    id: str  # an explicit native id
    reference: str | None
    choices: tuple[str, ...] | None
    answer: str | None
    rubric: tuple[Criterion, ...] | None
    later_turns: tuple[Turn, ...]
    metadata: dict[str, Any]
    prefilled: dict[str, Any]  # replayed columns the schema supplies itself


class RowSchema(Protocol):
    """A row schema, as the loader uses it (tasks.spec.Task implements it)."""

    name: str
    reference_per_turn: bool  # an explicit `reference` key is per turn (the builder reads it)
    detect: Callable[[Row, Collection[str]], bool]
    build: Callable[[Row, Fail], Built]
    criterion_reader: CriterionReader | None  # criteria of its own shape, in any row's rubric
    native_fields: tuple[str, ...]  # its own keys, which `fields:` may map too


# A reader of criteria of one benchmark's own shape: (text, weight, tags, category) for an item it recognises,
# else None.
CriterionReader = Callable[[dict[str, Any], str, Fail], "tuple[str, float, list[str], str | None] | None"]


def _messages(value: Any, key: str, fail: Fail) -> list[dict[str, Any]]:
    if isinstance(value, str):
        if not value.strip():
            fail(key, "the prompt is empty")
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        fail(key, f"expected a string or a list of messages, got {type_name(value)}")
    if not value:
        fail(key, "the message list is empty")
    out = []
    for i, m in enumerate(value):
        k = f"{key}[{i}]"
        if not isinstance(m, dict):
            fail(k, f"expected a message object {{role, content}}, got {type_name(m)}")
        role, content = m.get("role"), m.get("content")
        if not isinstance(role, str) or not role.strip():
            fail(f"{k}.role", "missing role" if role is None else f"expected a role string, got {role!r}")
        if isinstance(content, list):
            content = _content_parts(content, f"{k}.content", fail)
        elif not isinstance(content, str):
            fail(
                f"{k}.content",
                "missing content"
                if content is None
                else f"expected a string or content parts, got {type_name(content)}",
            )
        out.append({"role": role, "content": content})
    return out


def _content_parts(parts: list[Any], key: str, fail: Fail) -> list[dict[str, Any]]:
    """OpenAI content parts, kept as they are (LiteLLM passes them on): text parts need `text`, image parts
    `image_url.url` (or `image_url` as a string); audio and file parts are passed through unchecked."""
    if not parts:
        fail(key, "the content part list is empty")
    for j, part in enumerate(parts):
        k = f"{key}[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in _PART_TYPES:
            got = f"type {kind!r}" if isinstance(part, dict) else type_name(part)
            fail(f"{k}.type", f"expected a content part of type {', '.join(_PART_TYPES)}, got {got}")
        if kind == "text" and not isinstance(part.get("text"), str):
            fail(f"{k}.text", f"expected a string, got {type_name(part.get('text'))}")
        if kind == "image_url":
            img = part.get("image_url")
            url = img.get("url") if isinstance(img, dict) else img
            if not isinstance(url, str) or not url.strip():
                fail(f"{k}.image_url.url", f"expected an image URL (http(s) or data:), got {type_name(url)}")
    return parts


def text_value(value: Any, key: str, fail: Fail) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n\n".join(value)
    fail(key, f"expected a string, got {type_name(value)}")


def _required(r: Row, name: str, fmt: str, fail: Fail) -> Any:
    value = r.get(name)
    if value is None:
        fail(r.key(name), f"missing (format '{fmt}' needs it; to use another key add fields: {{{name}: <key>}})")
    return value


def _number(value: Any, key: str, fail: Fail) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail(key, f"expected a number, got {value!r}")
    if not math.isfinite(value):
        fail(key, f"expected a finite number, got {value!r}")
    return float(value)


def rubric_of(r: Row, name: str, fail: Fail, *, require_weight: str | None = None) -> tuple[Criterion, ...] | None:
    """The rubric under the row's `name` key, None when it has none: items of a benchmark's own shape (one of the
    row's criterion readers recognises them), HealthBench's (criterion, points, tags) or normalized (text, weight,
    tags, category). `require_weight`: why a missing weight/points is an error (the schema's own words), else 1.0."""
    items, key = r.get(name), r.key(name)
    if items is None:
        return None
    if not isinstance(items, list):
        fail(key, f"expected a list of criteria, got {type_name(items)}")
    if not items:
        fail(key, "the rubric is present but has no criteria")
    out: list[Criterion] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        k = f"{key}[{i}]"
        if not isinstance(item, dict):
            fail(k, f"expected a criterion object, got {type_name(item)}")
        category = item.get("category")
        native = next((got for read in r.readers if (got := read(item, k, fail)) is not None), None)
        if native is not None:
            text, weight, tags, native_category = native
            category = category if category is not None else native_category
        else:
            text_key = "criterion" if "criterion" in item and "text" not in item else "text"
            text = item.get(text_key)
            weight_key = "points" if "points" in item and "weight" not in item else "weight"
            if weight_key in item:
                weight = _number(item[weight_key], f"{k}.{weight_key}", fail)
            elif require_weight:
                fail(f"{k}.points", f"missing ({require_weight})")
            else:
                weight = 1.0
            tags = item.get("tags") or []
            if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
                fail(f"{k}.tags", f"expected a list of strings, got {tags!r}")
            if not isinstance(text, str) or not text.strip():
                fail(
                    f"{k}.{text_key}", "missing criterion text" if text is None else f"expected a string, got {text!r}"
                )
        if category is None:
            category = next((t.split(":", 1)[1] for t in tags if t.startswith("axis:")), None)
        elif not isinstance(category, str):
            fail(f"{k}.category", f"expected a string, got {category!r}")
        cid = f"c{i + 1}" if item.get("id") is None else str(native_id(item["id"], f"{k}.id", fail))
        if cid in seen:
            fail(f"{k}.id", f"duplicate criterion id '{cid}'")
        seen.add(cid)
        out.append(Criterion(id=cid, text=text, weight=weight, tags=tuple(tags), category=category))
    if why := rubric_weights_problem([c.weight for c in out]):
        fail(key, why)
    return tuple(out)
