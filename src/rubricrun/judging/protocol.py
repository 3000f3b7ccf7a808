"""Judging protocols: how a judge is asked about one criterion of one response and how its reply is read.

The binary (met / not met) and 1-5 protocols live here; a benchmark that judges its own way defines its protocol in
its task module (tasks/), found by `judging.scale` (`tasks.registry.protocol_for`; MT-Bench's 1-10 rating is
tasks/mt_bench.py's). A reply that cannot be read (data/jsonread.py reads fenced, stray and broken JSON) is an error
verdict, never `not_met`.

`ask_until_readable`, the one ask loop of rubric and pairwise judging, asks an unreadable reply again once; when it
still ends unreadable (or a provider error ends it) the unreadable replies leave the cache, so a rerun asks again;
when the re-ask was readable the first reply stays, so a rerun replays the same path from the cache for nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..data.jsonread import object_with
from ..errors import NotDone, ProviderError
from ..providers.base import BaseProvider, cache_key
from ..types import Criterion, LLMRequest, LLMResponse, Usage
from .prompt import DEFAULT_TEMPLATE, GRADED_TEMPLATE, JudgeInput, judge_messages

SCALES: dict[str, tuple[float, float]] = {"1-5": (1.0, 5.0), "1-10": (1.0, 10.0)}


@dataclass(frozen=True)
class Reading:
    """A judge reply as a protocol reads it: met / not_met (on a graded scale: verdict_for its score), or error
    with why it cannot be read."""

    verdict: str
    score: float | None = None  # graded scales only
    explanation: str | None = None
    error: str | None = None


def normalized(score: float, scale: str) -> float:
    """(s - min) / (max - min): a score on its scale as a share of [0, 1]."""
    lo, hi = SCALES[scale]
    return (score - lo) / (hi - lo)


def verdict_for(score: float | None, scale: str) -> str:
    """The binary reading of a graded score, for what reads verdicts (judge met rates, agreement, exports): met in
    the upper half of the scale (3-5 of 5, 5.5-10 of 10), not_met below; error when there is no score."""
    if score is None:
        return "error"
    return "met" if normalized(score, scale) >= 0.5 else "not_met"


@dataclass(frozen=True)
class JudgeProtocol:
    scale: str  # "binary" | "1-5" | "1-10"
    params: Mapping[str, Any]  # under the judge entry's own params
    template: str | None  # the default template; None: the protocol takes no prompt_template
    messages: Callable[[JudgeInput], list[dict[str, Any]]]
    schema: Callable[[int], dict[str, Any] | None]  # max_chars -> the JSON schema asked for, or None
    read: Callable[[str | None, str | None], Reading]  # (text, finish_reason) -> its reading
    rating_criterion: Criterion | None = None  # one rating of the whole answer replaces the rubric
    dry_reply: str = ""  # the shortest reply `read` takes as a verdict


def _schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def judge_schema(max_chars: int) -> dict[str, Any]:
    """The JSON schema binary judges are asked to follow. The explanation's length is bounded so a small model
    that loops inside the string is cut by the schema, not by max_tokens."""
    return _schema({"explanation": {"type": "string", "maxLength": max_chars}, "criteria_met": {"type": "boolean"}})


def graded_schema(max_chars: int) -> dict[str, Any]:
    """The JSON schema a 1-5 judge is asked to follow (reasoning first, so the score follows from it)."""
    score = {"type": "integer", "minimum": 1, "maximum": 5}
    return _schema({"reasoning": {"type": "string", "maxLength": max_chars}, "score": score})


def unreadable(text: str | None, finish_reason: str | None, cut_before: str, missing: str, head: bool = False) -> str:
    """Why a judge reply gives no verdict: it is empty, it was cut off at max_tokens before `cut_before`, else
    `missing` and the reply's last 120 characters (`head`: its first)."""
    if not text or not text.strip():
        return "empty judge reply"
    if finish_reason == "length":
        return f"judge reply cut off at max_tokens before {cut_before}"
    snippet = text.strip().replace("\n", " ")
    return f"{missing}: {snippet[:120] if head else snippet[-120:]!r}"


def _reply_object(text: str | None, finish_reason: str | None, key: str) -> tuple[dict[str, Any] | None, str]:
    """The object holding `key` in a judge reply, or None and why there is none."""
    obj = object_with(text, key) if text and text.strip() else None
    if obj is not None:
        return obj, ""
    why = unreadable(text, finish_reason, "the JSON was complete", "judge reply is not the expected JSON", head=True)
    return None, why


_BOOL = {"true": True, "yes": True, "met": True, "1": True, "false": False, "no": False, "not_met": False, "0": False}


def parse_judge_reply(text: str | None, finish_reason: str | None = None) -> Reading:
    """Read `{explanation, criteria_met}` out of a judge reply."""
    obj, why = _reply_object(text, finish_reason, "criteria_met")
    if obj is None:
        return Reading("error", error=why)
    met = obj["criteria_met"]
    if isinstance(met, str):
        met = _BOOL.get(met.strip().lower())
    if not isinstance(met, bool):
        return Reading("error", error=f"criteria_met is not a boolean: {obj['criteria_met']!r}")
    expl = obj.get("explanation")
    return Reading("met" if met else "not_met", explanation=expl if isinstance(expl, str) else None)


def parse_graded_reply(text: str | None, finish_reason: str | None = None) -> Reading:
    """Read `{reasoning, score}` (score 1-5) out of a judge reply."""
    obj, why = _reply_object(text, finish_reason, "score")
    if obj is None:
        return Reading("error", error=why)
    raw = obj["score"]
    try:
        score = float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        return Reading("error", error=f"score is not a number: {raw!r}")
    if isinstance(raw, bool) or not 1.0 <= score <= 5.0:
        return Reading("error", error=f"score {raw!r} is outside the 1-5 scale")
    reasoning = obj.get("reasoning")
    return Reading(verdict_for(score, "1-5"), score, reasoning if isinstance(reasoning, str) else None)


JUDGE_DEFAULT_PARAMS = {"temperature": 0.0, "max_tokens": 512}  # under the judge's own params

BINARY = JudgeProtocol(
    scale="binary",
    params=JUDGE_DEFAULT_PARAMS,
    template=DEFAULT_TEMPLATE,
    messages=judge_messages,
    schema=judge_schema,
    read=parse_judge_reply,
    dry_reply='{"criteria_met": true}',
)

GRADED_1_5 = JudgeProtocol(
    scale="1-5",
    params=JUDGE_DEFAULT_PARAMS,
    template=GRADED_TEMPLATE,
    messages=judge_messages,
    schema=graded_schema,
    read=parse_graded_reply,
    dry_reply='{"score": 3}',
)


JUDGE_PARSE_ATTEMPTS = 2  # a reply that is not the expected JSON is asked again once, then recorded as error
RETRY_TEMPERATURE = 0.7  # the second ask samples: at temperature 0 it would get the same unreadable reply

T = TypeVar("T")


@dataclass(frozen=True)
class Asked(Generic[T]):
    """What asking one judge came to: the reading of its reply, or (reading None) why there is none. `key` is the
    first ask's cache key; `usage` sums every ask."""

    reading: T | None
    error: str | None
    key: str
    usage: Usage


def judge_offset(item_id: str) -> int:
    """Where round-robin over the judge pool starts for an item: a stable hash, so a rerun asks the same judges."""
    return int(hashlib.sha256(item_id.encode("utf-8")).hexdigest()[:8], 16)


def judge_params(own: Mapping[str, Any], attempt: int, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The judge entry's `own` params over `defaults`; a re-ask (attempt > 0) samples at RETRY_TEMPERATURE at least."""
    params = {**defaults, **own}
    if attempt > 0:
        params["temperature"] = max(float(params.get("temperature") or 0.0), RETRY_TEMPERATURE)
    return params


def ask_until_readable(
    stack: BaseProvider,
    build: Callable[[int], LLMRequest],
    read: Callable[[LLMResponse], tuple[T | None, str | None]],
) -> Asked[T] | None:
    """Ask `build(attempt)` until `read` gives a reading (else None and why not), at most JUDGE_PARSE_ATTEMPTS
    times. None when a stop or the budget cut the ask (NotDone); a provider error ends it as an error."""
    usage, key, error = Usage(), "", "no attempt made"
    unread: list[LLMRequest] = []  # the asks whose reply could not be read
    for attempt in range(JUDGE_PARSE_ATTEMPTS):
        req = build(attempt)
        key = key or cache_key(req)
        try:
            resp = stack.generate(req)
        except NotDone:
            return None
        except ProviderError as exc:
            error = str(exc)
            break
        usage = usage + resp.usage
        reading, why = read(resp)
        if reading is not None:
            return Asked(reading, None, key, usage)
        unread.append(req)
        error = why or "unreadable judge reply"
    for req in unread:  # out of the store that gave them (BaseProvider.forget; the cache defers it in try_cached)
        stack.forget(req)
    return Asked(None, error, key, usage)
