"""Rubric judging: one judge call per criterion of each response, criteria assigned round-robin to the
judge pool, several judges' votes combined by majority."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import Config, ModelConfig
from ..providers.base import BaseProvider
from ..providers.routing import model_request, route_for
from ..types import Criterion, Example, Judgment, LLMRequest, LLMResponse, Response, Usage
from .answers import split_reasoning
from .prompt import DEFAULT_TEMPLATE, load_template, reference_for
from .protocol import JudgeInput, JudgeProtocol, Reading, ask_until_readable, judge_params, verdict_for

# Providers whose LiteLLM route accepts an OpenAI-style JSON schema (structured_output: auto).
SCHEMA_PREFIXES = ("local/", "openai/", "azure/", "gemini/", "vertex_ai/", "anthropic/", "hosted_vllm/", "ollama_chat/")


@dataclass(frozen=True)
class JudgeItem:
    """One criterion of one response, with the judges (indexes into the pool) that vote on it."""

    response: Response
    example: Example
    criterion: Criterion
    judges: tuple[int, ...]
    on_tie: str  # a split vote's rule (judging.on_tie, or the task's own)


def assign_judges(n_criteria: int, n_judges: int, per_criterion: int = 1, offset: int = 0) -> list[list[int]]:
    """Judge indexes for each criterion, round-robin in rubric order: criterion i gets judges (offset + i*k + j) mod
    n for j < k, so the criteria are spread evenly and each gets k distinct judges."""
    k = min(per_criterion, n_judges)
    return [[(offset + i * k + j) % n_judges for j in range(k)] for i in range(n_criteria)]


def schema_mode(judge: ModelConfig, model: str) -> str | None:
    """How a judge is asked for JSON: `json_schema` (OpenAI's response_format), `guided_json` (vLLM's extra body
    field, for vLLM servers before 0.12 that lack response_format), or None (free text, parsed all the same). `auto`
    asks json_schema where every model behind the entry (a Router entry's deployments) takes it."""
    mode = judge.structured_output
    if mode != "auto":
        return {"off": None, "on": "json_schema"}.get(mode, mode)  # json_schema, guided_json: as they are
    models = [d.model for d in judge.deployments] or [model]
    return "json_schema" if all(m.startswith(SCHEMA_PREFIXES) for m in models) else None


class Judging:
    """Judge requests and verdicts on one protocol (judging/protocol.py). `hidden_reference(example)`: the
    example's reference is not shown under judging.reference auto."""

    def __init__(
        self,
        cfg: Config,
        stack: BaseProvider,
        protocol: JudgeProtocol,
        hidden_reference: Callable[[Example], bool] | None = None,
    ):
        self.cfg, self.stack, self.protocol, self.hidden = cfg, stack, protocol, hidden_reference
        default = protocol.template if protocol.template is not None else DEFAULT_TEMPLATE
        self.template = load_template(cfg.judging.prompt_template, default)
        self.max_chars = cfg.judging.max_explanation_chars

    def request(self, judge: ModelConfig, item: JudgeItem, attempt: int) -> LLMRequest:
        r = route_for(judge, item.response.id, 0, self.cfg.run.seed)
        ex = item.example
        reference = reference_for(ex, self.cfg.judging.reference, self.hidden)
        j = JudgeInput(ex, item.response.text or "", item.criterion, reference, self.template, self.max_chars)
        messages = self.protocol.messages(j)
        if judge.system_prompt:
            messages = [{"role": "system", "content": judge.system_prompt}, *messages]
        params = judge_params(judge.params, attempt, self.protocol.params)
        mode = schema_mode(judge, r.model)
        schema = self.protocol.schema(self.max_chars) if mode else None
        if schema is not None and mode == "guided_json":
            # vLLM reads guided_json from the body: extra_body puts it there through LiteLLM (and into the cache key).
            params = {**params, "extra_body": {**(params.get("extra_body") or {}), "guided_json": schema}}
            schema = None
        return model_request(
            judge, r, messages, role="judge", section="judge", sample_index=attempt, params=params,
            response_schema=schema,
        )  # fmt: skip

    def vote(self, judge: ModelConfig, item: JudgeItem) -> tuple[dict[str, Any], Usage] | None:
        """One judge's vote as Judgment.votes holds it (with its score on a graded scale), and what it cost."""
        asked = ask_until_readable(self.stack, lambda attempt: self.request(judge, item, attempt), self.reading)
        if asked is None:
            return None
        r = asked.reading or Reading("error", error=asked.error)
        vote = dict(judge=judge.name, verdict=r.verdict, explanation=r.explanation, error=r.error, key=asked.key)
        return (vote if self.protocol.scale == "binary" else {**vote, "score": r.score}), asked.usage

    def reading(self, resp: LLMResponse) -> tuple[Reading | None, str | None]:
        """The reading of a reply, or None and why it cannot be read."""
        # A judge that thinks aloud in <think> (not moved out by LiteLLM) is read on its answer only.
        r = self.protocol.read(split_reasoning(resp.text)[0], resp.finish_reason)
        return (r, None) if r.verdict != "error" else (None, r.error)

    def judge_item(self, item: JudgeItem) -> Judgment | None:
        pool = self.cfg.judge_pool
        cast = []
        for j in item.judges:
            v = self.vote(pool[j], item)
            if v is None:
                return None
            cast.append(v)
        verdicts = [v["verdict"] for v, _ in cast]
        if item.on_tie == "judge" and 0 < verdicts.count("met") == verdicts.count("not_met"):
            v = self.vote(pool[tie_breaker(item.judges, len(pool))], item)
            if v is None:
                return None
            cast.append(v)
        return judgment_from_votes(item, [v for v, _ in cast], sum((u for _, u in cast), Usage()), self.protocol.scale)


def tie_breaker(judges: Sequence[int], pool_size: int) -> int:
    """The judge that breaks a tie: the next one round-robin after the last voter that is not already voting."""
    for step in range(1, pool_size + 1):
        j = (judges[-1] + step) % pool_size
        if j not in judges:
            return j
    raise ValueError("no judge outside the vote")  # config.py requires a pool larger than judges_per_criterion


def judgment_from_votes(item: JudgeItem, votes: Sequence[dict[str, Any]], usage: Usage, scale: str) -> Judgment:
    score = None
    if scale != "binary":  # several judges on a graded scale: the mean of the scores that could be read
        scores = [v["score"] for v in votes if v["score"] is not None]
        score = sum(scores) / len(scores) if scores else None
        verdict = verdict_for(score, scale)
    else:
        verdict = majority_vote([v["verdict"] for v in votes], item.on_tie)
    agreeing = [v for v in votes if v["verdict"] == verdict] or [v for v in votes if v["verdict"] != "error"]
    explanation = agreeing[0]["explanation"] if agreeing and verdict != "error" else None
    return Judgment(
        id=f"{item.response.id}#{item.criterion.id}",
        response_id=item.response.id,
        example_id=item.example.id,
        candidate=item.response.candidate,
        criterion_id=item.criterion.id,
        weight=item.criterion.weight,
        judge="+".join(v["judge"] for v in votes),
        verdict=verdict,  # type: ignore[arg-type]
        explanation=explanation,
        error=("; ".join(f"{v['judge']}: {v['error']}" for v in votes if v["error"]) or "judges tied")
        if verdict == "error"
        else None,
        key=votes[0]["key"],
        votes=tuple(votes) if len(votes) > 1 else (),
        usage=usage,
        score=score,
        scale=scale,
    )


def majority_vote(verdicts: Sequence[str], on_tie: str = "error") -> str:
    """The verdict with a strict majority of the votes that are not "error"; else "error" (an undecided criterion
    is never silently "not_met"), unless a tie is to count as not met (`on_tie`, judging.on_tie)."""
    met, not_met = verdicts.count("met"), verdicts.count("not_met")
    if met > not_met:
        return "met"
    if not_met > met or (met and on_tie == "not_met"):
        return "not_met"
    return "error"
