"""The run folder's rows as the viewer reads them: whole JSONL lines at byte offsets.

A run appends examples.jsonl, responses.jsonl and judgments.jsonl as it goes (docs/run-folder.md), so a reader
takes the whole lines before the last newline and leaves a line still being written for later. The index keeps
each row's (offset, length) and reads a row back with one `pread`. The few fields the index needs are decoded
with msgspec into the structs below (unknown fields are skipped in C); a page decodes its rows whole, as plain
dicts, so they are exactly what the files hold.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

BLOCK = 1 << 23  # bytes read at a time while indexing


class ExampleHead(msgspec.Struct):
    id: str
    dataset: str = ""
    messages: list[Any] = []
    later_turns: list[Any] = []
    rubric: list[Any] = []


class ResponseHead(msgspec.Struct):
    id: str
    example_id: str
    candidate: str = ""
    sample_index: int = 0
    status: str = "ok"
    text: str | None = None
    reasoning: str | None = None
    error: str | None = None
    turn: int = 1


class JudgmentHead(msgspec.Struct):
    example_id: str
    kind: str | None = None
    response_id: str = ""
    criterion_id: str = ""
    judge: str = ""
    verdict: str = "error"
    weight: float = 1.0
    explanation: str | None = None
    error: str | None = None
    votes: list[Any] = []


DECODERS = {
    "examples": msgspec.json.Decoder(ExampleHead),
    "responses": msgspec.json.Decoder(ResponseHead),
    "judgments": msgspec.json.Decoder(JudgmentHead),
}


def whole_lines(path: Path, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(offset, line without its newline) for every whole line in [start, end); `end` is at a line's end."""
    with open(path, "rb") as fh:
        fh.seek(start)
        pos, rest = start, b""
        while pos < end:
            block = fh.read(min(BLOCK, end - pos))
            if not block:
                return
            pos += len(block)
            buf = rest + block
            cut = buf.rfind(b"\n") + 1
            at = pos - len(buf)
            for line in buf[:cut].split(b"\n")[:-1]:
                if line.strip():
                    yield at, line
                at += len(line) + 1
            rest = buf[cut:]


def complete_end(path: Path, size: int) -> int:
    """The offset just after the last newline in the file's first `size` bytes (what a reader may take)."""
    if size <= 0:
        return 0
    with open(path, "rb") as fh:
        pos = size
        while pos > 0:
            step = min(1 << 16, pos)
            fh.seek(pos - step)
            chunk = fh.read(step)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                return pos - step + cut + 1
            pos -= step
    return 0


class StaleIndex(ValueError):
    """A span of the index no longer holds a row: the run was started again since the index last looked."""


def read_spans(path: Path, spans: Iterable[tuple[int, int]]) -> list[bytes]:
    """The bytes at each (offset, length), in order."""
    spans = list(spans)
    if not spans:
        return []
    fd = os.open(path, os.O_RDONLY)
    try:
        return [os.pread(fd, length, off) for off, length in spans]
    finally:
        os.close(fd)


def tail(path: Path, offset: int, size: int = 64) -> bytes:
    """The `size` bytes before `offset` (what refresh checks to tell a file appended to from one written afresh)."""
    start = max(0, offset - size)
    got = read_spans(path, [(start, offset - start)]) if offset else []
    return got[0] if got else b""


def read_rows(path: Path, spans: Iterable[tuple[int, int]]) -> list[dict[str, Any]]:
    """The rows at each (offset, length): one line each (a span of several lines gives each of its rows)."""
    out = []
    for chunk in read_spans(path, spans):
        try:
            out.extend(json.loads(line) for line in chunk.split(b"\n") if line.strip())
        except ValueError:
            raise StaleIndex(f"{path} changed under the index") from None
    return out


def text_of(content: Any) -> str:
    """A message's searchable text: a string as is; the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""
