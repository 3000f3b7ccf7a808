"""Graded scales: MT-Bench single-answer grading (1-10, one judge call per response) and a 1-5 score per rubric
criterion with reasoning (as VellumForge2 scores its rubric).

The 1-10 prompts are MT-Bench's own (lm-sys/FastChat, fastchat/llm_judge/data/judge_prompts.jsonl, Apache-2.0:
single-v1, single-math-v1 when the example has a reference, and their -multi-turn variants when the judged answer
follows earlier turns), and the rating is read as FastChat's `run_judge_single` reads it: the first `[[N]]`, else
the first `[N]`. A reply with neither is an error verdict (re-asked once, then left out), where FastChat records -1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..data.jsonread import repaired_values, strict_values, walk
from ..types import Criterion, Example
from .prompt import DATA_NOTICE, content_text, defuse_markers

# The one criterion of a 1-10 judgment: MT-Bench rates the whole answer, not rubric items.
RATING_CRITERION = Criterion(id="rating", text="MT-Bench single-answer rating (1-10)", weight=1.0)

SCALES: dict[str, tuple[float, float]] = {"1-5": (1.0, 5.0), "1-10": (1.0, 10.0)}

MT_BENCH_PARAMS = {"temperature": 0.0, "max_tokens": 2048}  # FastChat's judge: temperature 0, max_tokens 2048

_RATING_ASK = (
    "After providing your explanation, you must rate the response on a scale of 1 to 10 by strictly following this "
    'format: "[[rating]]", for example: "Rating: [[5]]".'
)
_SINGLE_V1 = (
    "[Instruction]\nPlease act as an impartial judge and evaluate the quality of the response provided by an AI "
    "assistant to the user question displayed below. Your evaluation should consider factors such as the helpfulness, "
    "relevance, accuracy, depth, creativity, and level of detail of the response. Begin your evaluation by providing "
    f"a short explanation. Be as objective as possible. {_RATING_ASK}\n\n"
    "[Question]\n{question}\n\n[The Start of Assistant's Answer]\n{answer}\n[The End of Assistant's Answer]"
)
_SINGLE_MATH_V1 = (
    "[Instruction]\nPlease act as an impartial judge and evaluate the quality of the response provided by an AI "
    "assistant to the user question displayed below. Your evaluation should consider correctness and helpfulness. "
    "You will be given a reference answer and the assistant's answer. Begin your evaluation by comparing the "
    "assistant's answer with the reference answer. Identify and correct any mistakes. Be as objective as possible. "
    f"{_RATING_ASK}\n\n"
    "[Question]\n{question}\n\n[The Start of Reference Answer]\n{ref_answer_1}\n[The End of Reference Answer]\n\n"
    "[The Start of Assistant's Answer]\n{answer}\n[The End of Assistant's Answer]"
)
_MULTI_SYSTEM = (
    "Please act as an impartial judge and evaluate the quality of the response provided by an AI assistant to the "
    "user question displayed below. Your evaluation should consider factors such as the helpfulness, relevance, "
    "accuracy, depth, creativity, and level of detail of the response. You evaluation should focus on the "
    "assistant's answer to the second user question. Begin your evaluation by providing a short explanation. Be as "
    f"objective as possible. {_RATING_ASK}\n\n"
)
_MULTI_MATH_SYSTEM = (
    "Please act as an impartial judge and evaluate the quality of the response provided by an AI assistant to the "
    "user question. Your evaluation should consider correctness and helpfulness. You will be given a reference "
    "answer and the assistant's answer. You evaluation should focus on the assistant's answer to the second question. "
    "Begin your evaluation by comparing the assistant's answer with the reference answer. Identify and correct any "
    f"mistakes. Be as objective as possible. {_RATING_ASK}\n\n"
)
_SINGLE_SYSTEM = "You are a helpful assistant."

_RATING = re.compile(r"\[\[(\d+\.?\d*)\]\]")  # FastChat one_score_pattern
_RATING_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")  # FastChat one_score_pattern_backup


@dataclass(frozen=True)
class ParsedScore:
    score: float | None  # None: could not be read
    explanation: str | None
    error: str | None


# ---------------------------------------------------------------------------------------------------
# 1-10: MT-Bench single-answer grading


def _turns(example: Example, answer: str) -> list[tuple[str, str]]:
    """(question, answer) per user turn of the conversation, the judged answer last. A user turn without an
    assistant reply after it (other than the last) is shown with an empty answer."""
    pairs: list[tuple[str, str]] = []
    for m in example.messages:
        role, text = m.get("role"), content_text(m.get("content"))
        if role == "user":
            pairs.append((text, ""))
        elif role == "assistant" and pairs:
            pairs[-1] = (pairs[-1][0], text)
    pairs[-1] = (pairs[-1][0], answer)
    return [(q, defuse_markers(a)) for q, a in pairs]  # the answers are the judged model's text


def mt_bench_messages(example: Example, answer: str, references: list[str | None]) -> list[dict[str, str]]:
    """MT-Bench's judge messages for `answer` to the example's last user turn. `references`: one reference answer
    per user turn (None where absent); the math (reference) variant is used when the judged turn has one."""
    pairs = _turns(example, answer)
    refs = (list(references) + [None] * len(pairs))[: len(pairs)]
    with_ref = refs[-1] is not None
    if len(pairs) == 1:
        template = _SINGLE_MATH_V1 if with_ref else _SINGLE_V1
        prompt = template.format(question=pairs[0][0], answer=pairs[0][1], ref_answer_1=refs[0])
        return [{"role": "system", "content": _SINGLE_SYSTEM}, {"role": "user", "content": prompt}]
    # FastChat's multi-turn templates hold two turns; longer conversations repeat the same blocks.
    blocks = []
    if with_ref:
        ref_turns = "".join(
            f"### User:\n{q}\n\n### Reference answer:\n{r if r is not None else '(none)'}\n\n"
            for (q, _), r in zip(pairs, refs, strict=True)
        )
        blocks.append(f"<|The Start of Reference Answer|>\n\n{ref_turns}<|The End of Reference Answer|>\n\n\n")
    convo = "".join(f"### User:\n{q}\n\n### Assistant A:\n{a}\n\n" for q, a in pairs)
    blocks.append(
        "<|The Start of Assistant A's Conversation with User|>\n\n"
        f"{convo}<|The End of Assistant A's Conversation with User|>"
    )
    system = _MULTI_MATH_SYSTEM if with_ref else _MULTI_SYSTEM
    return [{"role": "system", "content": system}, {"role": "user", "content": "".join(blocks)}]


def parse_rating(text: str | None, finish_reason: str | None = None) -> ParsedScore:
    """FastChat's reading of a single-answer judgment: the first `[[N]]`, else the first `[N]`; the rating must lie
    on the 1-10 scale (FastChat keeps any number; a rating of 0 or 42 is a misread here, an error)."""
    if not text or not text.strip():
        return ParsedScore(None, None, "empty judge reply")
    match = _RATING.search(text) or _RATING_BACKUP.search(text)
    if match is None:
        if finish_reason == "length":
            return ParsedScore(None, None, "judge reply cut off at max_tokens before the rating")
        tail = text.strip().replace("\n", " ")[-120:]
        return ParsedScore(None, None, f"no 'Rating: [[N]]' in the judge reply: {tail!r}")
    score = float(match.group(1))
    if not 1.0 <= score <= 10.0:
        return ParsedScore(None, None, f"rating {match.group(1)} is outside the 1-10 scale")
    return ParsedScore(score, text[: match.start()].strip() or None, None)


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


def _scored(text: str) -> dict[str, Any] | None:
    """The first object with a `score` key: complete JSON first, else what json-repair reads when a `}` follows
    the key (a reply cut off right after it would be a guess)."""
    for value in strict_values(text, "{"):
        for obj in walk(value):
            if isinstance(obj, dict) and "score" in obj:
                return obj
    for value, chunk in repaired_values(text):
        for obj in walk(value):
            if isinstance(obj, dict) and "score" in obj and "}" in chunk[chunk.rfind("score") :]:
                return obj
    return None


def parse_graded_reply(text: str | None, finish_reason: str | None = None) -> ParsedScore:
    """Read `{reasoning, score}` (score 1-5) out of a judge reply; robust to fences and stray text."""
    if not text or not text.strip():
        return ParsedScore(None, None, "empty judge reply")
    obj = _scored(text)
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
