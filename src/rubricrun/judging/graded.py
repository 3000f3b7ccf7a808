"""Graded scales: a 1-5 score per rubric criterion with reasoning (as VellumForge2 scores its rubric), the score
reading both graded scales share (`ParsedScore`), and the binary reading of a graded score. The 1-10 protocol
(MT-Bench single-answer grading, one rating per response) is its task's: tasks/mt_bench.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..data.jsonread import object_with
from .prompt import DATA_NOTICE

SCALES: dict[str, tuple[float, float]] = {"1-5": (1.0, 5.0), "1-10": (1.0, 10.0)}


@dataclass(frozen=True)
class ParsedScore:
    score: float | None  # None: could not be read
    explanation: str | None
    error: str | None


# ---------------------------------------------------------------------------------------------------
# 1-5: a score per rubric criterion, with reasoning

GRADED_TEMPLATE = (
    """Your job is to look at a conversation and a rubric item, and score the last turn (the \
assistant's response) on how well it follows the rubric item, on a scale of 1 to 5.

# Conversation
"""
    + DATA_NOTICE
    + """

{conversation}

{reference_section}# Rubric item
{criterion}

# Instructions
Return a JSON object with two fields: "reasoning" (a short analysis, at most {max_chars} characters) and \
"score" (an integer from 1 to 5).
- 5: the response fully does what the rubric item says; 3: partly; 1: not at all.
- Some rubric items describe something undesirable (they carry a negative weight). Still score how far the \
response does what the item says: 5 if it fully does the undesirable thing.
- Judge only the rubric item, nothing else.

Example: {{"reasoning": "The response names the correct dose but not the interval.", "score": 3}}

Return only the JSON object."""
)


def graded_schema(max_chars: int) -> dict[str, Any]:
    """The JSON schema a 1-5 judge is asked to follow (reasoning first, so the score follows from it)."""
    return {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string", "maxLength": max_chars},
            "score": {"type": "integer", "minimum": 1, "maximum": 5},
        },
        "required": ["reasoning", "score"],
        "additionalProperties": False,
    }


def parse_graded_reply(text: str | None, finish_reason: str | None = None) -> ParsedScore:
    """Read `{reasoning, score}` (score 1-5) out of a judge reply; robust to fences and stray text."""
    if not text or not text.strip():
        return ParsedScore(None, None, "empty judge reply")
    obj = object_with(text, "score")
    if obj is None:
        if finish_reason == "length":
            return ParsedScore(None, None, "judge reply cut off at max_tokens before the JSON was complete")
        return ParsedScore(None, None, f"judge reply is not the expected JSON: {text.strip()[:120]!r}")
    raw = obj["score"]
    try:
        score = float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        return ParsedScore(None, None, f"score is not a number: {raw!r}")
    if isinstance(raw, bool) or not 1.0 <= score <= 5.0:
        return ParsedScore(None, None, f"score {raw!r} is outside the 1-5 scale")
    reasoning = obj.get("reasoning")
    return ParsedScore(score, reasoning if isinstance(reasoning, str) else None, None)


# ---------------------------------------------------------------------------------------------------
# Scores and verdicts


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
