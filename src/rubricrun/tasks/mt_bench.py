"""MT-Bench (lm-sys/FastChat llm_judge): multi-turn questions, each user turn asked after the candidate's own
answer to the one before, judged by single-answer grading (judging.scale 1-10).

The 1-10 prompts are FastChat's own (fastchat/llm_judge/data/judge_prompts.jsonl, Apache-2.0: single-v1,
single-math-v1 with a reference, their -multi-turn variants after earlier turns). Metric `mt_bench`: the rating on
its own scale (`rating`, `rating_ci`, by category and turn, as show_result.py averages) and, as `score`,
(rating - 1) / 9. At scale binary its rows get the rubric metric.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..data.schemas import Built, Fail, Row, _required, native_id, text_value, type_name
from ..judging.prompt import content_text, defuse_markers
from ..judging.protocol import JudgeInput, JudgeProtocol, Reading, unreadable, verdict_for
from ..types import Criterion, Example, Turn
from .rubric import RUBRIC
from .spec import Agg, Marks, Metric, Task, Values

SOURCE = "lm-sys/FastChat fastchat/llm_judge (judge_prompts.jsonl, run_judge_single, show_result.py)"

# The one criterion of a 1-10 judgment: MT-Bench rates the whole answer, not rubric items.
RATING_CRITERION = Criterion(id="rating", text="MT-Bench single-answer rating (1-10)", weight=1.0)

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
_NO_RATING = "no 'Rating: [[N]]' in the judge reply"


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
    with_ref = references[-1] is not None
    if len(pairs) == 1:
        template = _SINGLE_MATH_V1 if with_ref else _SINGLE_V1
        prompt = template.format(question=pairs[0][0], answer=pairs[0][1], ref_answer_1=references[0])
        return [{"role": "system", "content": _SINGLE_SYSTEM}, {"role": "user", "content": prompt}]
    # FastChat's multi-turn templates hold two turns; longer conversations repeat the same blocks.
    blocks = []
    if with_ref:
        ref_turns = "".join(
            f"### User:\n{q}\n\n### Reference answer:\n{r if r is not None else '(none)'}\n\n"
            for (q, _), r in zip(pairs, references, strict=True)
        )
        blocks.append(f"<|The Start of Reference Answer|>\n\n{ref_turns}<|The End of Reference Answer|>\n\n\n")
    convo = "".join(f"### User:\n{q}\n\n### Assistant A:\n{a}\n\n" for q, a in pairs)
    blocks.append(
        "<|The Start of Assistant A's Conversation with User|>\n\n"
        f"{convo}<|The End of Assistant A's Conversation with User|>"
    )
    system = _MULTI_MATH_SYSTEM if with_ref else _MULTI_SYSTEM
    return [{"role": "system", "content": system}, {"role": "user", "content": "".join(blocks)}]


def parse_rating(text: str | None, finish_reason: str | None = None) -> Reading:
    """FastChat's reading of a single-answer judgment (run_judge_single): the first `[[N]]`, else the first `[N]`;
    the rating must lie on the 1-10 scale. FastChat keeps any number and records -1 for none; here a rating of 0 or
    42 is a misread and no rating an error (re-asked once, then left out)."""
    match = text and (_RATING.search(text) or _RATING_BACKUP.search(text))
    if not match:
        return Reading("error", error=unreadable(text, finish_reason, "the rating", _NO_RATING))
    score = float(match.group(1))
    if not 1.0 <= score <= 10.0:
        return Reading("error", error=f"rating {match.group(1)} is outside the 1-10 scale")
    return Reading(verdict_for(score, "1-10"), score, text[: match.start()].strip() or None)


def _rating_messages(j: JudgeInput) -> list[dict[str, Any]]:
    """MT-Bench's messages with one reference per user turn: `metadata.references` (joined from
    `datasets[].references`) for the earlier turns, the example's own (shown) reference for the last; none at all
    when it is not shown."""
    n = sum(1 for m in j.example.messages if m.get("role") == "user")
    references: list[str | None] = [None] * n
    if j.reference is not None:
        joined = j.example.metadata.get("references")
        earlier = list(joined[: n - 1]) if isinstance(joined, list) else []
        references = [*(earlier + [None] * n)[: n - 1], j.reference]
    return mt_bench_messages(j.example, j.text, references)


PROTOCOL_1_10 = JudgeProtocol(
    scale="1-10",
    params=MT_BENCH_PARAMS,
    template=None,
    messages=_rating_messages,
    schema=lambda max_chars: None,
    read=parse_rating,
    rating_criterion=RATING_CRITERION,
    dry_reply="[[5]]",
)


def _values(ex: Example, criteria: Sequence[Criterion], shares: Marks, turn: int) -> Values:
    out = {"score": float(shares[0]), f"turn:{turn}": float(shares[0])}
    category = ex.metadata.get("category")
    if isinstance(category, str) and category:
        out[f"category:{category}"] = float(shares[0])
    return out


def aggregate(agg: Agg) -> dict[str, Any]:
    """The rating on its own scale with its CI, by category and by turn (show_result.py's tables)."""
    return agg.rated(("category", "turn"))


def regroup(ex: Example, values: Values) -> Values:
    """The example's own category (writing, math, ...) in place of criterion categories, under any metric."""
    category = ex.metadata.get("category")
    if not (isinstance(category, str) and category):
        return values
    out = {k: v for k, v in values.items() if not k.startswith(("category:", "rating:category:"))}
    out[f"category:{category}"] = values["score"]
    if "rating:score" in values:  # a graded metric: the same regrouping on its own scale
        out[f"rating:category:{category}"] = values["rating:score"]
    return out


def _build(r: Row, fail: Fail) -> Built:
    """Every user turn is asked, each after the candidate's own answer to the one before (engine/calls.turn_view). A row's
    pre-written `answers` are not a context: a candidate with `response_column: answers` replays them."""
    tkey = r.key("turns")
    turns = _required(r, "turns", "mtbench", fail)
    if not isinstance(turns, list) or not turns:
        fail(tkey, f"expected a non-empty list of user turns, got {type_name(turns)}")
    for i, t in enumerate(turns):
        if not isinstance(t, str) or not t.strip():
            fail(f"{tkey}[{i}]", f"expected a non-empty string, got {t!r}")
    answers = r.get("answers")
    if answers is not None and (not isinstance(answers, list) or not all(isinstance(a, str) for a in answers)):
        fail(r.key("answers"), f"expected a list of assistant answers (strings), got {type_name(answers)}")
    refs: list[str | None] = [None] * len(turns)
    ref = r.get("reference")
    if isinstance(ref, list):
        if not all(isinstance(x, str) for x in ref):
            fail(r.key("reference"), "expected a list of strings (one per turn)")
        refs = [ref[i] if i < len(ref) else None for i in range(len(turns))]
    elif ref is not None:
        refs[0] = text_value(ref, r.key("reference"), fail)
    category = r.get("category")
    later = tuple(Turn({"role": "user", "content": t}, refs[i]) for i, t in enumerate(turns[1:], 1))
    return Built(
        messages=[{"role": "user", "content": turns[0]}],
        messages_key=tkey,
        id_key=r.key("question_id"),
        reference=refs[0],
        later_turns=later,
        metadata={"category": category} if category is not None else {},
    )


def read_answers(row: Mapping[str, Any], fail: Fail) -> list[tuple[tuple[str, int], str]] | None:
    """FastChat's model_answer rows {question_id, model_id, choices: [{index, turns: [...]}]}: the first choice's
    turns, one per turn; None for a row of another shape."""
    if not ("question_id" in row and "choices" in row):
        return None
    choices = row["choices"]
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        fail("choices", f"expected a non-empty list of {{index, turns}}, got {type_name(choices)}")
    turns = choices[0].get("turns")
    if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
        fail("choices[0].turns", f"expected a list of strings, got {type_name(turns)}")
    id_ = str(native_id(row["question_id"], "question_id", fail))
    return [((id_, k), t) for k, t in enumerate(turns, 1)]


METRIC = Metric(name="mt_bench", scale="1-10", source=SOURCE, values=_values, aggregate=aggregate)

TASK = Task(
    name="mtbench",
    title="MT-Bench",
    detect=lambda row, keys: isinstance(row.get("turns"), list),
    build=_build,
    metric=RUBRIC,
    native_fields=("turns", "answers", "question_id", "category"),
    reference_per_turn=True,
    regroup=regroup,
    answers=read_answers,
    answers_shape="MT-Bench model_answer rows {question_id, choices: [{turns: [...]}]}",
    protocols={"1-10": PROTOCOL_1_10},
)
