"""The whole vocabulary of rubricrun: every row written to disk is one of these frozen msgspec Structs.

They are plain declarations: codec.py writes and reads them (JSON through msgspec), field order being the key order
in each file. summary.json's types live with the results (results/summary_types.py).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from msgspec import UNSET, Struct, UnsetType, field

Role = Literal["candidate", "judge", "synthesis"]
Verdict = Literal["met", "not_met", "error"]


class Criterion(Struct, frozen=True):
    """One rubric item. `weight` may be negative (a penalty when the criterion is met)."""

    id: str
    text: str
    weight: float = 1.0
    tags: tuple[str, ...] = ()
    category: str | None = None


def weights_add_up(values: list[float]) -> bool:
    """Whether finite weights can be scored: their positive part minus their negative part (what a rubric score
    divides by) is finite. Two weights of 1e308 overflow (math.fsum raises, a plain sum is inf)."""
    try:
        pos = math.fsum(v for v in values if v > 0)
        neg = math.fsum(v for v in values if v < 0)
    except OverflowError:
        return False
    return math.isfinite(pos - neg)


def rubric_weights_problem(weights: list[float]) -> str | None:
    """Why a rubric's weights cannot score a response (None: they can)."""
    if not weights_add_up(weights):
        return "the weights add up past the largest number"
    return None if any(weights) else "every weight is 0: nothing could be scored"


class Turn(Struct, frozen=True):
    """A later user turn of a multi-turn conversation (MT-Bench `turns`), asked after the candidate's own answer to
    the turn before it; `reference` is that turn's reference answer."""

    message: dict[str, Any]
    reference: str | None = None


class Example(Struct, frozen=True):
    """One normalized dataset row, whatever schema it came from. A multi-turn row keeps its first user turn in
    `messages` and the others in `later_turns` (engine/calls.turn_view builds the conversation for each turn)."""

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


class Usage(Struct, frozen=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )


class LLMRequest(Struct, frozen=True, dict=True):
    """What a provider is asked. Only `cache_fields()` enter the cache key (`dict=True`: providers/base.py keeps the
    key it computed beside the fields, computed once per request)."""

    model: str  # a LiteLLM model string, e.g. "openai/gpt-4o-mini" or "local/smollm2"
    messages: tuple[dict[str, Any], ...]
    params: dict[str, Any] = field(default_factory=dict)  # temperature, max_tokens, seed, ...
    api_base: str | None = None
    api_key_env: str | None = None  # name of the env var holding the key; the key itself never lands here
    timeout_s: float = 120.0
    response_schema: dict[str, Any] | None = None  # JSON schema for structured output (judges)
    sample_index: int = 0
    # A Router entry's deployments as they change its answers: each one's model and params, never its server or key
    # (providers/routing.py). Empty for every other request, whose keys it leaves as they were.
    deployments: tuple[str, ...] = ()
    # Not part of the key: bookkeeping for traces and throttles.
    role: Role = "candidate"
    limiter: str = ""  # name of the rate-limit bucket (the config's model entry name)

    def cache_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "model": self.model,
            "api_base": self.api_base,
            "messages": list(self.messages),
            # temperature: 0 and temperature: 0.0 are the same request: integral floats enter the key as ints.
            "params": {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in self.params.items()},
            "response_schema": self.response_schema,
        }
        if self.sample_index:
            fields["sample_index"] = self.sample_index
        if self.deployments:
            fields["deployments"] = list(self.deployments)
        return fields


class LLMResponse(Struct, frozen=True):
    text: str
    finish_reason: str | None = None
    usage: Usage = Usage()
    model: str | None = None  # the model that answered, as the provider reports it
    cost_usd: float | None = None
    cache_hit: bool = False  # answered from the cache (never stored: the cache's row is codec.StoredReply)
    latency_ms: float = 0.0
    # The provider's separate reasoning channel (`reasoning_content`), kept raw like `text`: a `<think>` block inside
    # `text` is split out only when the response row is built, so cached replies of any age read the same way.
    reasoning: str | None = None
    deployment: str | None = None  # which deployment of a Router entry served it (never a key); not cached
    worker: str | None = None  # the process ("host:pid") that made the attempt; not cached


class Response(Struct, frozen=True):
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
    key: str = ""  # cache key of the call that made it
    flags: dict[str, Any] = field(default_factory=dict)  # quality flags (truncated, empty, ...)
    # What the model thought before answering (`<think>` blocks, the provider's reasoning channel). `text` is the
    # answer without it: what is scored, exported and shown to judges.
    reasoning: str | None = None
    turn: int = 1  # 1-based turn of a multi-turn conversation; 1 for single-turn rows


class Judgment(Struct, frozen=True):
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
    # Graded scales (judging.scale 1-5 / 1-10): the judge's number; the verdict is then met when the score is in
    # the upper half of the scale, not_met below it, error when no score could be read.
    score: float | None = None
    scale: str = "binary"


PairVerdict = Literal["A", "B", "C", "error"]  # MT-Bench's [[A]] / [[B]] / [[C]] (tie), or unreadable


class PairJudgment(Struct, frozen=True):
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
    response_ids: tuple[str, str] = ("", "")


class TraceEvent(Struct, frozen=True):
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
    invocation: str | UnsetType = UNSET  # the run's invocation (its start time); no key when the tracer has none


class Score(Struct, frozen=True):
    """A response's rubric score (see scoring.score_response)."""

    points: float
    normalized: float | None
    clipped: float | None
    met: int
    not_met: int
    errors: int
