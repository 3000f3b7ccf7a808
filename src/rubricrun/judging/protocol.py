"""Judging protocols: how a judge is asked about one criterion of one response and how its reply is read.

A `JudgeProtocol` is what `judging.rubric.Judging` builds its requests from: the default template, the judge's
default parameters, the messages, the JSON schema asked for and the reader of the reply. The binary and 1-5
protocols are generic machinery and live here; a benchmark that judges its own way (one rating replacing the
rubric, its own prompts) defines its protocol in its task module (tasks/), and `tasks.registry.protocol_for`
finds it by `judging.scale`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..types import Criterion, Example
from .graded import GRADED_TEMPLATE, ParsedScore, graded_schema, parse_graded_reply, verdict_for
from .prompt import DEFAULT_TEMPLATE, judge_messages, judge_schema, parse_judge_reply


@dataclass(frozen=True)
class JudgeInput:
    """What one judge request is built from: the (turn's view of the) example, the judged text, the criterion, the
    reference shown (None: none), the loaded template and the explanation's length limit."""

    example: Example
    text: str
    criterion: Criterion
    reference: str | None
    template: str
    max_chars: int


@dataclass(frozen=True)
class JudgeProtocol:
    scale: str  # "binary" | "1-5" | "1-10"
    params: Mapping[str, Any]  # under the judge entry's own params
    template: str | None  # the default template; None: the protocol takes no prompt_template
    messages: Callable[[JudgeInput], list[dict[str, Any]]]
    schema: Callable[[int], dict[str, Any] | None]  # max_chars -> the JSON schema asked for, or None
    read: Callable[[str | None, str | None], tuple[str, ParsedScore]]  # (text, finish_reason) -> (verdict, reading)
    rating_criterion: Criterion | None = None  # one rating of the whole answer replaces the rubric
    dry_reply: str = ""  # the shortest reply `read` takes as a verdict


def _template_messages(j: JudgeInput) -> list[dict[str, Any]]:
    return judge_messages(j.template, j.example, j.text, j.criterion, j.max_chars, j.reference)


def _read_binary(text: str | None, finish_reason: str | None) -> tuple[str, ParsedScore]:
    p = parse_judge_reply(text, finish_reason)
    verdict = "error" if p.criteria_met is None else ("met" if p.criteria_met else "not_met")
    return verdict, ParsedScore(None, p.explanation, p.error)


def _read_1_5(text: str | None, finish_reason: str | None) -> tuple[str, ParsedScore]:
    parsed = parse_graded_reply(text, finish_reason)
    return verdict_for(parsed.score, "1-5"), parsed


JUDGE_DEFAULT_PARAMS = {"temperature": 0.0, "max_tokens": 512}  # under the judge's own params

BINARY = JudgeProtocol(
    scale="binary",
    params=JUDGE_DEFAULT_PARAMS,
    template=DEFAULT_TEMPLATE,
    messages=_template_messages,
    schema=judge_schema,
    read=_read_binary,
    dry_reply='{"criteria_met": true}',
)

GRADED_1_5 = JudgeProtocol(
    scale="1-5",
    params=JUDGE_DEFAULT_PARAMS,
    template=GRADED_TEMPLATE,
    messages=_template_messages,
    schema=graded_schema,
    read=_read_1_5,
    dry_reply='{"score": 3}',
)
