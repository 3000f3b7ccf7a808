"""What one call of a run is, through the provider stack (providers/stack.py): a candidate turn (GenTask,
its request and its response row), and a synthesis call (prompts from a topic). graph.py decides when each call is
made (stages.py builds them); --validate counts them by running those same stages over a dry provider (engine/estimate.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from msgspec import Struct, structs

from ..config import Config, ModelConfig
from ..data.answers_file import Answers, replay_model, replayed_answer
from ..errors import NotDone, ProviderError
from ..judging.answers import quality_flags, split_reasoning
from ..providers.base import BaseProvider
from ..providers.cache import cache_key
from ..providers.routing import model_request, route_for
from ..types import Example, LLMRequest, LLMResponse, Response, Usage

log = logging.getLogger("rubricrun")

Replays = dict[str, Answers]  # a responses_from candidate's answers file, by candidate name


# ---------------------------------------------------------------------------------------------------
# Candidate responses


class GenTask(Struct, frozen=True):  # a Struct: one is built per candidate call (plan 018)
    """One turn of one conversation: the example, the candidate, the sample, and the candidate's own answers to
    the turns before this one (empty at turn 1). `order` is the conversation's place in input order."""

    example: Example
    candidate: ModelConfig
    sample_index: int
    request: LLMRequest
    turn: int = 1
    answers: tuple[str, ...] = ()
    order: int = 0
    replay: tuple[str | None, str | None] | None = None  # a replayed candidate's (answer, error): no call

    @property
    def response_id(self) -> str:
        rid = f"{self.example.id}#{self.candidate.name}#{self.sample_index}"
        return rid if self.turn == 1 else f"{rid}#t{self.turn}"


def candidate_request(cand: ModelConfig, example: Example, sample_index: int, seed: int) -> LLMRequest:
    """The call for `example` (a turn_view at later turns: the conversation so far). A replayed candidate's request
    is never sent; its model names where the answers come from."""
    messages = list(example.messages)
    if cand.system_prompt:
        messages = [{"role": "system", "content": cand.system_prompt}, *messages]
    if cand.replays:
        return LLMRequest(model=replay_model(cand), messages=tuple(messages), role="candidate")
    route = route_for(cand, example.id, sample_index, seed)
    return model_request(cand, route, messages, role="candidate", section="candidate", sample_index=sample_index)


def turn_task(
    cfg: Config, ex: Example, cand: ModelConfig, s: int, answers: tuple[str, ...], order: int, replays: Replays
) -> GenTask:
    view = turn_view(ex, answers)
    turn = len(answers) + 1
    replay = replayed_answer(cand, replays.get(cand.name), ex, turn) if cand.replays else None
    request = candidate_request(cand, view, s, cfg.run.seed)
    return GenTask(view, cand, s, request, turn, answers, order, replay)


def turn_view(ex: Example, answers: Sequence[str]) -> Example:
    """The example as asked at turn len(answers) + 1, each turn the model's own: the first turn, then per earlier turn
    the candidate's own answer and the next user message; that turn's reference, `metadata.turn`. Turn 1: `ex`."""
    if not answers:
        return ex
    k = len(answers) + 1
    if k > ex.turns:
        raise ValueError(f"{ex.id} has {ex.turns} turns, asked for turn {k}")
    messages = list(ex.messages)
    for answer, later in zip(answers, ex.later_turns, strict=False):
        messages += [{"role": "assistant", "content": answer}, later.message]
    later = ex.later_turns[k - 2]
    return structs.replace(ex, messages=tuple(messages), reference=later.reference, metadata={**ex.metadata, "turn": k})


def response_row(task: GenTask, key: str, resp: LLMResponse | None, error: str | None) -> Response:
    """The responses.jsonl row for a task: its reply, or (resp None) the error that ended it. The reply's reasoning
    (`<think>` blocks, the provider's reasoning channel) goes to `reasoning`; `text` is the answer alone."""
    text: str | None = None
    reasoning: str | None = None
    flags: dict[str, object] = {}
    if resp is not None:
        text, reasoning, unclosed = split_reasoning(resp.text, resp.reasoning)
        flags = quality_flags(text, resp.finish_reason, resp.usage.completion_tokens, unclosed_reasoning=unclosed)
    return Response(
        turn=task.turn,
        id=task.response_id,
        example_id=task.example.id,
        candidate=task.candidate.name,
        model=task.request.model,
        sample_index=task.sample_index,
        status="ok" if resp else "error",
        text=text,
        error=error,
        finish_reason=resp.finish_reason if resp else None,
        usage=resp.usage if resp else Usage(),
        key=key,
        flags=flags,
        reasoning=reasoning,
    )


def generate_one(task: GenTask, stack: BaseProvider) -> Response | None:
    """A task's response row: its reply or its error; None when the call was not made (a stop, the budget)."""
    if task.replay is not None:  # answers you already have: no call, no usage
        text, error = task.replay
        return response_row(task, "", LLMResponse(text=text) if text is not None else None, error)
    key = cache_key(task.request)
    try:
        return response_row(task, key, stack.generate(task.request), None)
    except NotDone:
        return None  # not done: a rerun picks it up
    except ProviderError as exc:
        return response_row(task, key, None, str(exc))


# ---------------------------------------------------------------------------------------------------
# Synthesis


def synthesis_request(cfg: Config, messages: list[dict], attempt: int) -> LLMRequest:
    """A synthesis call, to the entry `synthesize.model` names, else to the first candidate."""
    scfg = cfg.synthesize
    assert scfg is not None
    entries = [("candidate", m) for m in cfg.candidates] + [("judge", m) for m in cfg.judge_pool]
    # config.py checked that synthesize.model names one of them, and that there is a candidate
    section, model = next((e for e in entries if e[1].name == scfg.model), entries[0]) if scfg.model else entries[0]
    route = route_for(model, "synthesize", 0, cfg.run.seed)
    return model_request(model, route, messages, role="synthesis", section=section, sample_index=attempt)


class _Stopped(ProviderError):
    """Ctrl+C or the budget stopped a synthesis call: the step records it as its error and the next steps stop
    at once, so the steps done so far are kept."""


def synthesize(cfg: Config, stack: BaseProvider, on_step: Callable[[Any, list[Example]], None]) -> None:
    """Prompts synthesized from a topic (data/synth.py), each call through the same cached stack as every other;
    `on_step(entry, new examples)` hears of each step as soon as it ends (its prompts flow into generation). A stop
    or the budget ends it: the next call is not made, its step records why, the later steps stop at once."""
    from ..data.synth import synthesize as run_synthesis

    scfg = cfg.synthesize
    assert scfg is not None

    def call(messages: list[dict], attempt: int) -> LLMResponse:
        try:
            return stack.generate(synthesis_request(cfg, messages, attempt))
        except NotDone as exc:
            raise _Stopped(f"stopped: {exc or type(exc).__name__}") from None

    try:
        run_synthesis(scfg, call, log=log.info, on_step=on_step)
    except _Stopped:  # while asking for subtopics: nothing was synthesized
        pass
