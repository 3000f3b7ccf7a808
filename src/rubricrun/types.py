"""The whole vocabulary of rubricrun: every row written to disk is one of these frozen dataclasses.

Rows are written with `to_row()` (a plain dict in field order) and never from ad-hoc dicts. summary.json's types live
with the results (results/summary_types.py); they are written with `summary_row()` and read back with `from_row()`,
which are here because they only walk dataclasses (compare.py reads rows back with `from_row()` too).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["candidate", "judge", "synthesis"]
Verdict = Literal["met", "not_met", "error"]


_ATOMS = frozenset({str, int, float, bool, type(None)})


# A field with this metadata is kept in memory but left out of the row (to_row): `cache_hit` on responses and
# judgments, which differs between a run and its rerun (and between racing threads), so that a rerun writes
# byte-identical artifacts. trace.jsonl and summary.json keep the cache hits (ExecPlan 009, Decision Log).
NOT_IN_ROW = {"row": False}


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


@functools.cache
@functools.cache
def _row_names(cls: type) -> tuple[str, ...]:
    """A row type's fields that go in its row, in order (once per type: it runs for every row and trace line)."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("row", True))


def _plain(v: Any) -> Any:
    t = type(v)
    if t in _ATOMS:
        return v
    if t is dict:
        return {k: _plain(x) for k, x in v.items()}
    if t is tuple or t is list:
        return t(_plain(x) for x in v)
    if hasattr(t, "__dataclass_fields__"):
        return to_row(v)
    return copy.deepcopy(v)


def shallow_row(obj: Any) -> dict[str, Any]:
    """A dataclass's row fields as a dict, values as they are (a JSON encoder's `default`: it meets the nested
    dataclasses itself, so nothing is copied on the way to the file)."""
    return {name: getattr(obj, name) for name in _row_names(type(obj))}


def to_row(obj: Any) -> dict[str, Any]:
    """A dataclass as a dict in field order, nested dataclasses as dicts, containers copied (what
    `dataclasses.asdict` returns, at a fifth of its cost: it runs for every trace event and cache write)."""
    return {name: _plain(getattr(obj, name)) for name in _row_names(type(obj))}


def json_encoder(
    default: Callable[[Any], Any] | None = None, *, sort_keys: bool = False, separators: tuple[str, str] = (", ", ": ")
) -> Callable[[Any], str]:
    """`JSONEncoder(ensure_ascii=False, check_circular=False, ...).encode`, its C encoder built once: the encoder's
    own `encode` builds a new one (and a dict of markers) on every call, about 1 us a row (plan 012). For data of
    ours, which is never circular; the same bytes (a top-level str too: the C encoder escapes it the same way)."""
    enc = json.JSONEncoder(
        ensure_ascii=False, check_circular=False, default=default, sort_keys=sort_keys, separators=separators
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the C accelerator
        return enc.encode
    item_sep, key_sep = separators
    c_encode = make(None, enc.default, json.encoder.encode_basestring, None, key_sep, item_sep, sort_keys, False, True)

    def encode(obj: Any) -> str:
        return "".join(c_encode(obj, 0))

    return encode


@dataclass(frozen=True)
class Criterion:
    """One rubric item. `weight` may be negative (a penalty when the criterion is met)."""

    id: str
    text: str
    weight: float = 1.0
    tags: tuple[str, ...] = ()
    category: str | None = None


@dataclass(frozen=True)
class Turn:
    """A later user turn of a multi-turn conversation (MT-Bench `turns`), asked after the candidate's own answer to
    the turn before it; `reference` is that turn's reference answer."""

    message: dict[str, Any]
    reference: str | None = None


@dataclass(frozen=True)
class Example:
    """One normalized dataset row, whatever schema it came from. A multi-turn row keeps its first user turn in
    `messages` and the others in `later_turns` (data/turns.py builds the conversation for each turn)."""

    id: str
    dataset: str
    source: str  # "path/to/file.jsonl:LINE"
    messages: tuple[dict[str, Any], ...]  # chat messages, multi-turn allowed; the last is the user turn
    reference: str | None = None  # reference answer (QA, MT-Bench reference)
    choices: tuple[str, ...] | None = None  # multiple choice options, in order (A, B, C, ...)
    answer: str | None = None  # correct choice letter for MC, final answer for QA
    rubric: tuple[Criterion, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    later_turns: tuple[Turn, ...] = ()
    # Dataset columns a `response_column:` candidate replays (column -> the row's value), kept from the raw row.
    prefilled: dict[str, Any] = field(default_factory=dict)

    @property
    def turns(self) -> int:
        return 1 + len(self.later_turns)

    @property
    def kind(self) -> str:
        """How the example is scored without a rubric: 'mc', 'qa' or 'open'."""
        if self.choices:
            return "mc"
        if self.answer is not None:
            return "qa"
        return "open"


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )


def _int_if_integral(v: Any) -> Any:
    return int(v) if isinstance(v, float) and v.is_integer() else v


@dataclass(frozen=True)
class LLMRequest:
    """What a provider is asked. Only `cache_fields()` enter the cache key."""

    model: str  # a LiteLLM model string, e.g. "openai/gpt-4o-mini" or "local/smollm2"
    messages: tuple[dict[str, Any], ...]
    params: dict[str, Any] = field(default_factory=dict)  # temperature, max_tokens, seed, ...
    api_base: str | None = None
    api_key_env: str | None = None  # name of the env var holding the key; the key itself never lands here
    timeout_s: float = 120.0
    response_schema: dict[str, Any] | None = None  # JSON schema for structured output (judges)
    sample_index: int = 0
    # Not part of the key: bookkeeping for traces and throttles.
    role: Role = "candidate"
    limiter: str = ""  # name of the rate-limit bucket (the config's model entry name)

    def cache_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "model": self.model,
            "api_base": self.api_base,
            "messages": list(self.messages),
            # temperature: 0 and temperature: 0.0 are the same request: integral floats enter the key as ints.
            "params": {k: _int_if_integral(v) for k, v in self.params.items()},
            "response_schema": self.response_schema,
        }
        if self.sample_index:
            fields["sample_index"] = self.sample_index
        return fields


@dataclass(frozen=True)
class LLMResponse:
    text: str
    finish_reason: str | None = None
    usage: Usage = Usage()
    model: str | None = None  # the model that answered, as the provider reports it
    cost_usd: float | None = None
    cache_hit: bool = False
    latency_ms: float = 0.0
    # The provider's separate reasoning channel (`reasoning_content`), kept raw like `text`: a `<think>` block inside
    # `text` is split out only when the response row is built, so cached replies of any age read the same way.
    reasoning: str | None = None
    deployment: str | None = None  # which deployment of a Router entry served it (never a key); not cached
    worker: str | None = None  # the process ("host:pid") that made the attempt; not cached


@dataclass(frozen=True)
class Response:
    """One candidate response row (responses.jsonl)."""

    id: str
    example_id: str
    candidate: str
    model: str
    sample_index: int
    status: Literal["ok", "error"]
    text: str | None
    error: str | None
    finish_reason: str | None
    usage: Usage
    cache_hit: bool = field(default=False, metadata=NOT_IN_ROW)  # defaults: rows read back have no cache_hit
    key: str = ""  # cache key of the call that made it
    flags: dict[str, Any] = field(default_factory=dict)  # quality flags (truncated, empty, ...)
    # What the model thought before answering (`<think>` blocks, the provider's reasoning channel). `text` is the
    # answer without it: what is scored, exported and shown to judges.
    reasoning: str | None = None
    turn: int = 1  # 1-based turn of a multi-turn conversation; 1 for single-turn rows


@dataclass(frozen=True)
class Judgment:
    """One criterion's verdict on one response (judgments.jsonl)."""

    id: str
    response_id: str
    example_id: str
    candidate: str
    criterion_id: str
    weight: float
    judge: str
    verdict: Verdict
    explanation: str | None
    error: str | None
    key: str | None = None  # cache key of the judge call (None for rubric-free auto scoring)
    votes: tuple[dict[str, Any], ...] = ()  # per-judge verdicts when several judges vote
    usage: Usage = Usage()
    cache_hit: bool = field(default=False, metadata=NOT_IN_ROW)
    # Graded scales (judging.scale 1-5 / 1-10): the judge's number; the verdict is then met when the score is in
    # the upper half of the scale, not_met below it, error when no score could be read.
    score: float | None = None
    scale: str = "binary"


PairVerdict = Literal["A", "B", "C", "error"]  # MT-Bench's [[A]] / [[B]] / [[C]] (tie), or unreadable


@dataclass(frozen=True)
class PairJudgment:
    """One head-to-head comparison of candidates a and b on one example (and turn), judged in both orders
    (judgments.jsonl, after the rubric judgments). `ab` is the judge's verdict with a shown first, `ba` with b
    shown first, both as positions; `winner` combines them in candidate terms: a candidate's name when both
    orders pick it, `tie` when they disagree or say [[C]], `error` when either could not be read."""

    kind: Literal["pairwise"]
    id: str
    example_id: str
    turn: int | None
    a: str
    b: str
    judge: str
    ab: PairVerdict
    ba: PairVerdict
    winner: str
    error: str | None
    keys: tuple[str, str]  # cache keys of the two calls (a first, b first)
    usage: Usage = Usage()
    cache_hit: bool = field(default=False, metadata=NOT_IN_ROW)
    response_ids: tuple[str, str] = ("", "")


@dataclass(frozen=True)
class TraceEvent:
    """One model call attempt (trace.jsonl)."""

    ts: float
    role: str
    model: str
    key: str
    cache_hit: bool
    attempt: int
    latency_ms: float
    status: Literal["ok", "error"]
    error: str | None = None
    usage: Usage | None = None
    status_code: int | None = None
    retry_in_s: float | None = None
    deployment: str | None = None  # the deployment of a Router entry that served or failed it (never a key)
    worker: str | None = None  # the process ("host:pid") that made the attempt: the run's own, or a Dask worker


@dataclass(frozen=True)
class Score:
    """A response's rubric score (see scoring.score_response)."""

    points: float
    normalized: float | None
    clipped: float | None
    met: int
    not_met: int
    errors: int
    by_category: dict[str, float] = field(default_factory=dict)
    by_tag: dict[str, float] = field(default_factory=dict)


def summary_row(obj: Any) -> Any:
    """A summary type as JSON-ready data: like to_row, but a field named in its class's OMIT_IF_NONE is left out
    when it is None (summary.json has always omitted keys it had nothing for)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        omit, flat = getattr(obj, "OMIT_IF_NONE", frozenset()), getattr(obj, "FLATTEN", None)
        values = ((n, getattr(obj, n)) for n in _names(type(obj)))
        out = {n: summary_row(v) for n, v in values if not (v is None and n in omit) and n != flat}
        return out | summary_row(getattr(obj, flat)) if flat else out
    if isinstance(obj, dict):
        return {k: summary_row(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [summary_row(v) for v in obj]
    return obj


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_row(cls: type[Any], row: Any, *, strict: bool = False) -> Any:
    """A row or summary type from its JSON data (the inverse of summary_row). A missing key takes the field's default;
    an unknown key is ignored (a file written by another version), or with `strict` raises TypeError."""
    names, flat = _names(cls), getattr(cls, "FLATTEN", None)
    unknown = {k: v for k, v in row.items() if k not in names}
    if flat:  # the flattened field takes every key that is not a field
        row = {**{k: v for k, v in row.items() if k in names and k != flat}, flat: unknown}
    elif strict and unknown:
        raise TypeError(f"{cls.__name__}: unknown keys {sorted(unknown)}")
    hints = _hints(cls)
    return cls(**{n: _typed(hints[n], row[n], strict) for n in names if n in row})


def _typed(hint: Any, value: Any, strict: bool) -> Any:
    """`value` converted to the type `hint` names: dataclasses built, dicts and tuples of them converted."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _typed(inner[0], value, strict) if len(inner) == 1 else value
    if dataclasses.is_dataclass(hint):
        return from_row(hint, value, strict=strict)
    if origin is dict:
        return {k: _typed(args[1], v, strict) for k, v in value.items()}
    if origin is tuple:
        return tuple(_typed(args[0], v, strict) for v in value)
    return value


@functools.cache
def row_reader(cls: type) -> Callable[[dict[str, Any]], Any]:
    """`from_row(cls, row)` for a row type, each field's conversion decided once instead of for every value (the
    tally's second process reads every row of a run back: engine/tally_process.py). Equal results
    (tests/test_tally_process.py): a missing key takes the field's default, an unknown key is ignored. A dict's
    values are kept as read (from_row copies them: equal, and a row just parsed from JSON is nobody else's)."""
    if getattr(cls, "FLATTEN", None):
        raise TypeError(f"row_reader: {cls.__name__} flattens a field; use from_row")
    hints = _hints(cls)
    convs = tuple((n, _converter(hints[n])) for n in _names(cls))

    def read(row: dict[str, Any]) -> Any:
        kw = {}
        for name, conv in convs:
            if name in row:
                v = row[name]
                kw[name] = v if conv is None or v is None else conv(v)
        return cls(**kw)

    return read


def _converter(hint: Any) -> Callable[[Any], Any] | None:
    """What `_typed(hint, value)` does to a value that is not None, as a function; None where it returns the value
    itself (or a dict equal to it)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _converter(inner[0]) if len(inner) == 1 else None
    if dataclasses.is_dataclass(hint):
        return row_reader(hint)  # type: ignore[arg-type]
    if origin is dict:
        conv = _converter(args[1])
        return None if conv is None else (lambda v: {k: None if x is None else conv(x) for k, x in v.items()})
    if origin is tuple:
        conv = _converter(args[0])
        return tuple if conv is None else (lambda v: tuple(None if x is None else conv(x) for x in v))
    return None


# ---------------------------------------------------------------------------------------------------
# Construction


_FACTORY = object()  # a field with a default_factory that the caller left out


def direct_init(cls: type) -> type:
    """Give a frozen dataclass an __init__ that writes the instance dict directly: the one dataclasses generates
    calls object.__setattr__ for every field (frozen), about 0.2 us a field, and a warm rerun builds a response row,
    a judgment, a request, a reply and a task per call (plan 012). Same signature, defaults and default factories,
    the same instance dict in field order; assignment after __init__ still raises."""
    made = list(inspect.signature(cls.__init__).parameters.values())[1:]  # type: ignore[misc]
    plain = [p.name for p in made if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    if hasattr(cls, "__post_init__") or plain != [f.name for f in dataclasses.fields(cls)]:
        raise TypeError(f"direct_init: {cls.__name__}'s __init__ does more than set its fields")
    params, body, env = [], [], {"_FACTORY": _FACTORY}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            env[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            body.append(f"    if {f.name} is _FACTORY:\n        {f.name} = _factory_{f.name}()\n")
        else:
            params.append(f.name)
        body.append(f"    __d[{f.name!r}] = {f.name}\n")
    src = f"def __init__(self, {', '.join(params)}):\n    __d = self.__dict__\n{''.join(body)}"
    exec(src, env)  # noqa: S102 - our own field names, as dataclasses itself does
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[misc]
    return cls


for _cls in (
    Criterion,
    Turn,
    Example,
    Usage,
    LLMRequest,
    LLMResponse,
    Response,
    Judgment,
    PairJudgment,
    TraceEvent,
    Score,
):
    direct_init(_cls)
