"""Pairwise judging with position swap, as MT-Bench does it (FastChat llm_judge, prompt `pair-v2`): one judge sees
each pair of answers in both orders (a first, then b first), each order its own call with its own cache key, and ends
its reply with `[[A]]`, `[[B]]` or `[[C]]` (tie). As FastChat's show_result.py combines them, a candidate wins only
when both orders pick it; a verdict that flips with the order is a tie. An unreadable reply is asked again once
(judging/protocol.py); one that still cannot be read makes the comparison `error`, and its replies leave the cache so
that a rerun asks again.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import Config, ModelConfig
from ..providers.base import BaseProvider
from ..providers.routing import model_request, route_for
from ..types import Example, LLMRequest, LLMResponse, PairJudgment, Response
from .prompt import content_text, defuse_markers, load_template
from .protocol import JUDGE_DEFAULT_PARAMS, Asked, ask_until_readable, judge_offset, judge_params, unreadable

# MT-Bench's pair-v2 system prompt and user prompt (FastChat fastchat/llm_judge/data/judge_prompts.jsonl).
PAIR_SYSTEM = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI assistants to "
    "the user question displayed below. You should choose the assistant that follows the user's instructions and "
    "answers the user's question better. Your evaluation should consider factors such as the helpfulness, "
    "relevance, accuracy, depth, creativity, and level of detail of their responses. Begin your evaluation by "
    "comparing the two responses and provide a short explanation. Avoid any position biases and ensure that the "
    "order in which the responses were presented does not influence your decision. Do not allow the length of the "
    "responses to influence your evaluation. Do not favor certain names of the assistants. Be as objective as "
    'possible. After providing your explanation, output your final verdict by strictly following this format: "[[A]]" '
    'if assistant A is better, "[[B]]" if assistant B is better, and "[[C]]" for a tie.'
)
PAIR_TEMPLATE = (
    "[User Question]\n{question}\n\n"
    "[The Start of Assistant A's Answer]\n{answer_a}\n[The End of Assistant A's Answer]\n\n"
    "[The Start of Assistant B's Answer]\n{answer_b}\n[The End of Assistant B's Answer]"
)
_PLACEHOLDERS = ("question", "answer_a", "answer_b")

# MT-Bench gives its judge 2048 tokens: pair-v2 asks for an explanation before the verdict, and 512 (the rubric
# judges' default) can cut the reply before it. A judge's own params still win.
PAIR_PARAMS = {**JUDGE_DEFAULT_PARAMS, "max_tokens": 2048}

_VERDICT = re.compile(r"\[\[([ABC])\]\]")
_VERDICTS = "[[A]]/[[B]]/[[C]]"


def read_pair_reply(resp: LLMResponse) -> tuple[str | None, str | None]:
    """The verdict `A`, `B` or `C` a judge reply ends on, or None and why it has none. The last `[[X]]` counts: a
    judge that restates the format in its explanation still ends on its own verdict."""
    found = _VERDICT.findall(resp.text or "")
    if found:
        return found[-1], None
    return None, unreadable(
        resp.text, resp.finish_reason, f"its {_VERDICTS} verdict", f"no {_VERDICTS} verdict in the judge reply"
    )


def combine(ab: str, ba: str, a: str, b: str) -> str:
    """The comparison's winner from the two orders' verdicts: a candidate's name when both orders pick it, `tie`
    when they disagree or both say tie, `error` when either is an error."""
    if "error" in (ab, ba):
        return "error"
    first = {"A": a, "B": b, "C": "tie"}[ab]
    second = {"A": b, "B": a, "C": "tie"}[ba]  # b was shown first
    return first if first == second else "tie"


def candidate_pairs(cfg: Config) -> list[tuple[str, str]]:
    """(a, b) in config order: every candidate against the baseline (the baseline is b), or every pair."""
    p = cfg.judging.pairwise
    if p is None:
        return []
    names = [c.name for c in cfg.candidates]
    if p.baseline is not None:
        return [(n, p.baseline) for n in names if n != p.baseline]
    return list(itertools.combinations(names, 2))


@dataclass(frozen=True)
class PairItem:
    example: Example
    turn: int
    a: Response
    b: Response
    judge: int  # index into the judge pool

    @property
    def id(self) -> str:
        return f"{self.example.id}#t{self.turn}#{self.a.candidate}~{self.b.candidate}"


def pair_items(cfg: Config, ex: Example, responses: Sequence[Response]) -> list[PairItem]:
    """The example's comparisons, by turn (in response order), then pair. Each candidate's first sample is compared
    (MT-Bench has one answer per model); a pair where either answer failed is left out. Judges are assigned
    round-robin over the pool from a stable offset per example and turn; one judge sees both orders."""
    pairs, pool = candidate_pairs(cfg), cfg.judge_pool
    if not pairs or not pool:
        return []
    answers: dict[int, dict[str, Response]] = {}
    for r in responses:
        if r.sample_index == 0 and r.status == "ok":
            answers.setdefault(r.turn, {})[r.candidate] = r
    items = []
    for turn, by_cand in answers.items():
        offset = judge_offset(f"{ex.id}#{turn}")
        for i, (a, b) in enumerate(pairs):
            if a in by_cand and b in by_cand:
                items.append(PairItem(ex, turn, by_cand[a], by_cand[b], (offset + i) % len(pool)))
    return items


def question_text(example: Example, turn: int) -> str:
    """What the judge is shown as the question: the user message of the turn (turns count from 1; every example
    has a user message, the loader checks it)."""
    if turn >= 2:  # a later MT-Bench turn (engine/calls.turn_view)
        return content_text(example.later_turns[turn - 2].message.get("content"))
    return content_text(next(m for m in example.messages if m.get("role") == "user").get("content"))


class PairJudging:
    def __init__(self, cfg: Config, stack: BaseProvider):
        assert cfg.judging.pairwise is not None
        self.cfg, self.stack = cfg, stack
        # The built-in pair-v2 prompt, or a text file with the three placeholders (then the whole prompt: no
        # system prompt is added).
        self.template = load_template(
            cfg.judging.pairwise.prompt_template,
            PAIR_TEMPLATE,
            placeholders=_PLACEHOLDERS,
            required=_PLACEHOLDERS,
            what="pairwise template",
            key="judging.pairwise.prompt_template",
        )

    def request(self, judge: ModelConfig, item: PairItem, order: int, attempt: int) -> LLMRequest:
        """The call with a shown first (order 0) or b shown first (order 1)."""
        first, second = (item.a, item.b) if order == 0 else (item.b, item.a)
        prompt = self.template.format(
            question=question_text(item.example, item.turn),
            answer_a=defuse_markers(first.text or ""),
            answer_b=defuse_markers(second.text or ""),
        )
        messages = [{"role": "user", "content": prompt}]
        if self.template is PAIR_TEMPLATE:
            messages.insert(0, {"role": "system", "content": PAIR_SYSTEM})
        if judge.system_prompt:
            messages.insert(0, {"role": "system", "content": judge.system_prompt})
        params = judge_params(judge.params, attempt, PAIR_PARAMS)
        route = route_for(judge, item.id, 0, self.cfg.run.seed)  # one model sees both orders
        return model_request(judge, route, messages, role="judge", section="judge", sample_index=attempt, params=params)

    def judge_pair(self, item: PairItem) -> PairJudgment | None:
        judge = self.cfg.judge_pool[item.judge]
        asked: list[Asked[str]] = []
        for order in (0, 1):  # each order asked again once when unreadable; None: a stop or the budget cut it
            got = ask_until_readable(self.stack, functools.partial(self.request, judge, item, order), read_pair_reply)
            if got is None:
                return None
            asked.append(got)
        ab, ba = asked
        a, b = item.a.candidate, item.b.candidate
        v_ab, v_ba = ab.reading or "error", ba.reading or "error"
        errors = [f"{name}: {o.error}" for name, o in (("a first", ab), ("b first", ba)) if o.error]
        return PairJudgment(
            kind="pairwise",
            id=item.id,
            example_id=item.example.id,
            turn=item.turn,
            a=a,
            b=b,
            judge=judge.name,
            ab=v_ab,  # type: ignore[arg-type]
            ba=v_ba,  # type: ignore[arg-type]
            winner=combine(v_ab, v_ba, a, b),
            error="; ".join(errors) or None,
            keys=(ab.key, ba.key),
            usage=ab.usage + ba.usage,
            response_ids=(item.a.id, item.b.id),
        )
