"""Every type written to disk, to bytes and back, through one library: msgspec (typed JSON and MessagePack in C;
ExecPlan 018 measured it beside the standard library and pydantic v2).

The types are declared once, as msgspec Structs: the vocabulary's rows (types.py), summary.json's
(results/summary_types.py) and the cache's stored reply (`StoredReply`, here). JSON is written compact, in UTF-8,
field order being key order; a NaN or an infinity is written as null (JSON has neither). Rows of another version
read back: unknown keys are ignored and a missing key takes its field's default. The cache KEY is not made here
(providers/base.py: the standard library's JSON of the request as every key was made, by msgspec where it matches).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, TypeVar

import msgspec

from .types import LLMResponse, Usage

T = TypeVar("T")
DecodeError = msgspec.DecodeError  # bytes that are not JSON, or not the type asked for (ValidationError)


def _enc_hook(obj: Any) -> Any:
    """A float of another type (numpy's float64, out of a statistic) is written as the float it is."""
    if isinstance(obj, float):
        return float(obj)
    raise TypeError(f"cannot write a {type(obj).__name__} as JSON")


_JSON = msgspec.json.Encoder(enc_hook=_enc_hook)
_PACK = msgspec.msgpack.Encoder(enc_hook=_enc_hook)


def lines(rows: Iterable[Any]) -> bytes:
    """JSON lines, one per row (each ends in a newline)."""
    return _JSON.encode_lines(rows)


def pretty(obj: Any) -> bytes:
    """A JSON file's content, indented by two (summary.json, compare.json, batches.json)."""
    return msgspec.json.format(_JSON.encode(obj), indent=2) + b"\n"


def to_data(obj: Any) -> Any:
    """The JSON data of `obj` (dicts, lists, str, numbers): what a reader of its file gets."""
    return msgspec.to_builtins(obj, enc_hook=_enc_hook)


@functools.cache
def _decoder(cls: Any) -> msgspec.json.Decoder:
    return msgspec.json.Decoder(cls)


@functools.cache
def _unpacker(cls: Any) -> msgspec.msgpack.Decoder:
    return msgspec.msgpack.Decoder(cls)


def decode(data: bytes | str, cls: type[T]) -> T:
    """One JSON value as `cls`; DecodeError if it is not one."""
    return _decoder(cls).decode(data)


def decode_lines(data: bytes | str, cls: type[T]) -> list[T]:
    """JSON lines (as `lines` writes them), each as `cls`."""
    return _decoder(cls).decode_lines(data)


def convert(data: Any, cls: type[T]) -> T:
    """JSON data already parsed (json.loads of a file of any version) as `cls`; DecodeError if it is not one."""
    return msgspec.convert(data, cls)


def pack(obj: Any) -> bytes:
    """MessagePack bytes of `obj`, for a spool: a file of this process's own (data/spool.py, results/tally.py)."""
    return _PACK.encode(obj)


def unpack(data: bytes | memoryview, cls: type[T]) -> T:
    return _unpacker(cls).decode(data)


# The cache's row

CACHE_FORMAT = 2  # the stored reply's shape (1 was a pickled dict); a row of another format is a miss


class StoredReply(msgspec.Struct, frozen=True):
    """What the cache stores for a reply: its content, not what belongs to the call that got it (its latency, the
    deployment that served it, the worker that made it, whether it was a hit)."""

    format: int
    text: str
    finish_reason: str | None = None
    usage: Usage = Usage()
    model: str | None = None
    cost_usd: float | None = None
    reasoning: str | None = None  # absent from replies stored before it existed


def stored_reply(r: LLMResponse) -> bytes:
    return _JSON.encode(StoredReply(CACHE_FORMAT, r.text, r.finish_reason, r.usage, r.model, r.cost_usd, r.reasoning))


def read_reply(value: Any) -> LLMResponse | None:
    """A stored value as the reply it holds (a cache hit); None for anything that is not JSON bytes of this format:
    an older row, another program's, a planted one. Only parsed, never run."""
    if type(value) is not bytes:
        return None
    try:
        s = _decoder(StoredReply).decode(value)
    except DecodeError:
        return None
    if s.format != CACHE_FORMAT:
        return None
    return LLMResponse(s.text, s.finish_reason, s.usage, s.model, s.cost_usd, cache_hit=True, reasoning=s.reasoning)
