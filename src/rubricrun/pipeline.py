"""The run, top to bottom: examples -> candidate responses -> per-criterion judgments -> scores.

Each stage is a list of independent calls run on a thread pool through the provider stack
Cache(Retry(Throttle(LiteLLM))). Rows are built in input order whatever order the calls finish in,
so a rerun writes byte-identical artifacts (timings aside).
"""

from __future__ import annotations

import hashlib
import logging
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .config import Config, ModelConfig
from .errors import BudgetExceeded, Cancelled, ProviderError
from .judge import assign_judges, judge_messages, judge_schema, load_template, parse_judge_reply
from .pool import run_pool
from .providers import BaseProvider
from .scoring import extract_choice, qa_correct, quality_flags, score_response
from .stats import majority_vote
from .types import Criterion, Example, Judgment, LLMRequest, LLMResponse, Response, Score, Usage

log = logging.getLogger("rubricrun")

JUDGE_PARSE_ATTEMPTS = 2  # a reply that is not the expected JSON is asked again once, then recorded as error
RETRY_TEMPERATURE = 0.7  # the second ask samples: at temperature 0 it would get the same unreadable reply
JUDGE_DEFAULT_PARAMS = {"temperature": 0.0, "max_tokens": 512}
# Providers whose LiteLLM route accepts an OpenAI-style JSON schema (structured_output: auto).
SCHEMA_PREFIXES = ("local/", "openai/", "azure/", "gemini/", "vertex_ai/", "anthropic/", "hosted_vllm/", "ollama_chat/")


@dataclass(frozen=True)
class Route:
    model: str
    api_base: str | None
    api_key_env: str | None


def routes(m: ModelConfig) -> list[tuple[Route, float]]:
    if m.models:
        return [(Route(w.model, w.api_base or m.api_base, w.api_key_env or m.api_key_env), w.weight) for w in m.models]
    return [(Route(m.model, m.api_base, m.api_key_env), 1.0)]


def route_for(m: ModelConfig, example_id: str, sample_index: int, seed: int) -> Route:
    """Which model of a weighted candidate serves this sample: deterministic given the run's seed."""
    options = routes(m)
    if len(options) == 1:
        return options[0][0]
    rng = random.Random(f"{seed}|{m.name}|{example_id}|{sample_index}")
    return rng.choices([r for r, _ in options], weights=[w for _, w in options], k=1)[0]


def _stable_offset(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


# ---------------------------------------------------------------------------------------------------
# Candidate responses


@dataclass(frozen=True)
class GenTask:
    example: Example
    candidate: ModelConfig
    sample_index: int
    request: LLMRequest

    @property
    def response_id(self) -> str:
        return f"{self.example.id}#{self.candidate.name}#{self.sample_index}"


def model_request(
    m: ModelConfig,
    route: Route,
    messages: Sequence[dict[str, Any]],
    *,
    role: str,
    section: str,
    sample_index: int = 0,
    params: dict[str, Any] | None = None,
    response_schema: dict[str, Any] | None = None,
) -> LLMRequest:
    """A request to one model entry; `section` (candidate or judge) names its rate-limit bucket."""
    return LLMRequest(
        model=route.model,
        messages=tuple(messages),
        params=dict(m.params) if params is None else params,
        api_base=route.api_base,
        api_key_env=route.api_key_env,
        timeout_s=m.timeout_s,
        response_schema=response_schema,
        sample_index=sample_index,
        role=role,  # type: ignore[arg-type]
        limiter=f"{section}:{m.name}",
    )


def candidate_request(cand: ModelConfig, example: Example, sample_index: int, seed: int) -> LLMRequest:
    messages = list(example.messages)
    if cand.system_prompt:
        messages = [{"role": "system", "content": cand.system_prompt}, *messages]
    route = route_for(cand, example.id, sample_index, seed)
    return model_request(cand, route, messages, role="candidate", section="candidate", sample_index=sample_index)


def generation_tasks(cfg: Config, examples: Sequence[Example]) -> list[GenTask]:
    return [
        GenTask(ex, cand, s, candidate_request(cand, ex, s, cfg.run.seed))
        for ex in examples
        for cand in cfg.candidates
        for s in range(cand.samples_per_prompt)
    ]


def response_row(task: GenTask, key: str, resp: LLMResponse | None, error: str | None) -> Response:
    """The responses.jsonl row for a task: its reply, or (resp None) the error that ended it."""
    return Response(
        id=task.response_id,
        example_id=task.example.id,
        candidate=task.candidate.name,
        model=task.request.model,
        sample_index=task.sample_index,
        status="ok" if resp else "error",
        text=resp.text if resp else None,
        error=error,
        finish_reason=resp.finish_reason if resp else None,
        usage=resp.usage if resp else Usage(),
        cache_hit=resp.cache_hit if resp else False,
        key=key,
        flags=quality_flags(resp.text, resp.finish_reason, resp.usage.completion_tokens) if resp else {},
    )


def generate(
    tasks: Sequence[GenTask], stack: BaseProvider, *, workers: int, stop: threading.Event, progress: bool = True
) -> list[Response | None]:
    from .cache import cache_key

    def one(task: GenTask) -> Response | None:
        key = cache_key(task.request)
        try:
            return response_row(task, key, stack.generate(task.request), None)
        except (Cancelled, BudgetExceeded):
            return None  # not done: a rerun picks it up
        except ProviderError as exc:
            return response_row(task, key, None, str(exc))

    return run_pool(one, tasks, workers=workers, stop=stop, label="generate", progress=progress)


# ---------------------------------------------------------------------------------------------------
# Judging


@dataclass(frozen=True)
class JudgeItem:
    """One criterion of one response, with the judges (indexes into the pool) that vote on it."""

    response: Response
    example: Example
    criterion: Criterion
    judges: tuple[int, ...]


@dataclass(frozen=True)
class Vote:
    judge: str
    verdict: str
    explanation: str | None
    error: str | None
    key: str
    usage: Usage = Usage()
    cache_hit: bool = False


def rubric_for(example: Example, cfg: Config) -> tuple[Criterion, ...]:
    """The example's own rubric; else, for open-ended examples, the config's default rubric."""
    if example.rubric:
        return example.rubric
    if example.kind == "open" and cfg.judging.default_rubric:
        return tuple(
            Criterion(id=c.id or f"d{i + 1}", text=c.text, weight=c.weight, tags=tuple(c.tags), category=c.category)
            for i, c in enumerate(cfg.judging.default_rubric)
        )
    return ()


def judge_items(cfg: Config, examples: dict[str, Example], responses: Sequence[Response]) -> list[JudgeItem]:
    pool = cfg.judge_pool
    items = []
    for r in responses:
        if r.status != "ok":
            continue
        ex = examples[r.example_id]
        rubric = rubric_for(ex, cfg)
        if not rubric or not pool:
            continue
        offset = _stable_offset(ex.id) % len(pool)
        assignment = assign_judges(len(rubric), len(pool), cfg.judging.judges_per_criterion, offset)
        for c, js in zip(rubric, assignment, strict=True):
            items.append(JudgeItem(r, ex, c, tuple(js)))
    return items


def uses_schema(judge: ModelConfig, model: str) -> bool:
    if judge.structured_output == "on":
        return True
    if judge.structured_output == "off":
        return False
    return model.startswith(SCHEMA_PREFIXES)


class Judging:
    def __init__(self, cfg: Config, stack: BaseProvider):
        self.cfg, self.stack = cfg, stack
        self.template = load_template(cfg.judging.prompt_template)
        self.max_chars = cfg.judging.max_explanation_chars

    @staticmethod
    def params(judge: ModelConfig, attempt: int) -> dict[str, Any]:
        params = {**JUDGE_DEFAULT_PARAMS, **judge.params}
        if attempt > 0:
            params["temperature"] = max(float(params.get("temperature") or 0.0), RETRY_TEMPERATURE)
        return params

    def request(self, judge: ModelConfig, item: JudgeItem, attempt: int) -> LLMRequest:
        r = route_for(judge, item.response.id, 0, self.cfg.run.seed)
        return model_request(
            judge,
            r,
            judge_messages(self.template, item.example, item.response.text or "", item.criterion, self.max_chars),
            role="judge",
            section="judge",
            sample_index=attempt,
            params=self.params(judge, attempt),
            response_schema=judge_schema(self.max_chars) if uses_schema(judge, r.model) else None,
        )

    def vote(self, judge: ModelConfig, item: JudgeItem) -> Vote | None:
        from .cache import cache_key

        usage = Usage()
        error = "no attempt made"
        key = ""
        hit = True
        for attempt in range(JUDGE_PARSE_ATTEMPTS):
            req = self.request(judge, item, attempt)
            key = key or cache_key(req)
            try:
                resp = self.stack.generate(req)
            except (Cancelled, BudgetExceeded):
                return None
            except ProviderError as exc:
                return Vote(judge.name, "error", None, str(exc), key, usage, False)
            usage = Usage(
                usage.prompt_tokens + resp.usage.prompt_tokens,
                usage.completion_tokens + resp.usage.completion_tokens,
                usage.total_tokens + resp.usage.total_tokens,
            )
            hit = hit and resp.cache_hit
            parsed = parse_judge_reply(resp.text, resp.finish_reason)
            if parsed.criteria_met is not None:
                verdict = "met" if parsed.criteria_met else "not_met"
                return Vote(judge.name, verdict, parsed.explanation, None, key, usage, hit)
            error = parsed.error or "unreadable judge reply"
        return Vote(judge.name, "error", None, error, key, usage, hit)

    def judge_item(self, item: JudgeItem) -> Judgment | None:
        pool = self.cfg.judge_pool
        votes = []
        for j in item.judges:
            v = self.vote(pool[j], item)
            if v is None:
                return None
            votes.append(v)
        return judgment_from_votes(item, votes)


def judgment_from_votes(item: JudgeItem, votes: Sequence[Vote]) -> Judgment:
    verdict = votes[0].verdict if len(votes) == 1 else majority_vote([v.verdict for v in votes])
    agreeing = [v for v in votes if v.verdict == verdict]
    explanation = agreeing[0].explanation if agreeing and verdict != "error" else None
    error = None
    if verdict == "error":
        errs = [f"{v.judge}: {v.error}" for v in votes if v.error]
        error = "; ".join(errs) if errs else "judges tied"
    usage = Usage(
        sum(v.usage.prompt_tokens for v in votes),
        sum(v.usage.completion_tokens for v in votes),
        sum(v.usage.total_tokens for v in votes),
    )
    return Judgment(
        id=f"{item.response.id}#{item.criterion.id}",
        response_id=item.response.id,
        example_id=item.example.id,
        candidate=item.response.candidate,
        criterion_id=item.criterion.id,
        weight=item.criterion.weight,
        judge="+".join(v.judge for v in votes),
        verdict=verdict,  # type: ignore[arg-type]
        explanation=explanation,
        error=error,
        key=votes[0].key,
        votes=tuple(
            {"judge": v.judge, "verdict": v.verdict, "explanation": v.explanation, "error": v.error, "key": v.key}
            for v in votes
        )
        if len(votes) > 1
        else (),
        usage=usage,
        cache_hit=all(v.cache_hit for v in votes),
    )


def judge(
    cfg: Config, stack: BaseProvider, items: Sequence[JudgeItem], *, stop: threading.Event, progress: bool = True
) -> list[Judgment | None]:
    j = Judging(cfg, stack)
    return run_pool(
        j.judge_item, items, workers=cfg.run.judge_parallel_workers, stop=stop, label="judge", progress=progress
    )


def auto_judgment(example: Example, response: Response) -> Judgment | None:
    """Judge-free verdict for multiple choice (letter extraction) and QA (numeric / normalized match)."""
    if response.status != "ok" or example.rubric or example.kind == "open" or example.answer is None:
        return None
    text = response.text or ""
    if example.kind == "mc":
        got = extract_choice(text, len(example.choices or ()))
        met = got == example.answer
        judge_name, expl = "auto:choice", f"extracted {got or 'no letter'}, expected {example.answer}"
    else:
        met = qa_correct(text, example.answer)
        judge_name, expl = "auto:match", f"expected {example.answer!r}"
    return Judgment(
        id=f"{response.id}#correct",
        response_id=response.id,
        example_id=example.id,
        candidate=response.candidate,
        criterion_id="correct",
        weight=1.0,
        judge=judge_name,
        verdict="met" if met else "not_met",
        explanation=expl,
        error=None,
    )


AUTO_CRITERION = Criterion(id="correct", text="The response gives the correct final answer.", weight=1.0)


def score_all(
    cfg: Config, examples: dict[str, Example], responses: Sequence[Response], judgments: Sequence[Judgment]
) -> dict[str, Score]:
    by_response: dict[str, dict[str, Judgment]] = {}
    for jd in judgments:
        by_response.setdefault(jd.response_id, {})[jd.criterion_id] = jd
    scores: dict[str, Score] = {}
    for r in responses:
        got = by_response.get(r.id)
        if r.status != "ok" or not got:
            continue
        ex = examples[r.example_id]
        rubric = rubric_for(ex, cfg) or (AUTO_CRITERION,)
        criteria = [c for c in rubric if c.id in got]
        scores[r.id] = score_response(criteria, [got[c.id].verdict for c in criteria])
    return scores


@dataclass
class StageResult:
    responses: list[Response] = field(default_factory=list)
    judgments: list[Judgment] = field(default_factory=list)
    interrupted: bool = False
