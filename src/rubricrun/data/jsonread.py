"""The one lenient-JSON reader: JSON values in a model's reply (judge verdicts, synthesis lists). Two passes, so
that broken JSON is repaired by a library, not by us:
1. strict: the standard library's decoder at every opening bracket, fenced ```json blocks first, then the reply;
2. repaired: json-repair over the same chunks, for what the decoder refuses: single quotes, stray or missing commas,
   Python's True/False/None, a value cut off at max_tokens (completed: callers decide whether to trust that,
   `quoted_in`).
Callers take the first node they want (`first`). A lone surrogate in a string (`"\\ud800"`, which no
UTF-8 file can hold) comes back as U+FFFD.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_DECODER = json.JSONDecoder(strict=False)  # strict=False: raw newlines inside strings are accepted
SURROGATE = re.compile("[\ud800-\udfff]")  # a lone surrogate: no UTF-8 file can hold one
T = TypeVar("T")


def chunks(text: str) -> list[str]:
    """Where a reply may hold JSON, in the order to look: fenced blocks first, then the whole reply."""
    return [m.group(1) for m in _FENCE.finditer(text)] + [text]


def strict_values(text: str, opens: str = "{[") -> Iterator[Any]:
    """Every complete JSON value that starts at one of the `opens` characters, in chunk then text order."""
    for chunk in chunks(text):
        for i, ch in enumerate(chunk):
            if ch in opens:
                try:
                    value = _DECODER.raw_decode(chunk, i)[0]
                except ValueError:
                    continue
                yield valid(value) if "\\u" in chunk else value


def repaired_values(text: str) -> Iterator[tuple[Any, str]]:
    """(value, chunk) for what json-repair reads in each chunk: one value, or a list of the several values it
    found one after another (of two objects with the same keys it keeps the later, as the model's correction)."""
    import json_repair  # only replies the standard decoder cannot read get here (import about 0.1 s)

    for chunk in chunks(text):
        value = json_repair.loads(chunk)
        if isinstance(value, (dict, list)) and value:
            yield valid(value) if "\\u" in chunk else value, chunk


def valid(value: Any) -> Any:
    """A parsed value with every lone surrogate in its strings and keys replaced by U+FFFD."""
    if isinstance(value, str):
        return SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [valid(v) for v in value]
    if isinstance(value, dict):
        return {valid(k): valid(v) for k, v in value.items()}
    return value


def walk(value: Any) -> Iterator[Any]:
    """The value and everything nested in it, parents before children, in document order."""
    yield value
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for child in children:
        yield from walk(child)


def first(text: str, pick: Callable[[Any, str | None], T | None], opens: str = "{[") -> T | None:
    """The first `pick(node, chunk)` that is not None: over every node of the complete values (chunk None), then
    of the values json-repair reads (with the chunk it read them from)."""
    for value in strict_values(text, opens):
        for node in walk(value):
            if (got := pick(node, None)) is not None:
                return got
    for value, chunk in repaired_values(text):
        for node in walk(value):
            if (got := pick(node, chunk)) is not None:
                return got
    return None


def object_with(text: str, key: str) -> dict[str, Any] | None:
    """The first object holding `key` (a judge's verdict): complete JSON first; else one json-repair reads, unless
    the reply was cut off after the key (no closing brace follows it), which would be a guess at what was meant."""

    def pick(node: Any, chunk: str | None) -> dict[str, Any] | None:
        if isinstance(node, dict) and key in node and (chunk is None or "}" in chunk[chunk.rfind(key) :]):
            return node
        return None

    return first(text, pick, "{")


def quoted_in(item: str, text: str) -> bool:
    """Whether `text` holds `item` as a complete double-quoted JSON string (as written, or escaped). A repaired
    string that fails this was a bare word, single-quoted, or cut off before its closing quote."""
    return any(form in text for form in (f'"{item}"', json.dumps(item), json.dumps(item, ensure_ascii=False)))
