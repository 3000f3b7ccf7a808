"""The stages of a run, each a list of independent calls on a thread pool through the provider stack
(providers/stack.py): synthesized prompts -> candidate responses -> per-criterion judgments.

Rows come back in input order whatever order the calls finish in, so a rerun writes byte-identical
artifacts (timings aside). A stage stopped early (Ctrl+C, budget) returns what it finished.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .config import Config, ModelConfig
from .data.answers_file import Answers, load_replays, replay_model, replayed_answer
from .data.turns import turn_view
from .errors import NotDone, ProviderError
from .judging.answers import quality_flags, split_reasoning
from .judging.auto import auto_judgment
from .judging.pairwise import PairJudging, pair_items
from .judging.rubric import Judging, judge_items, rubric_for
from .pool import Interrupted, Progress, run_pool
from .providers.base import BaseProvider
from .providers.cache import cache_key
from .providers.routing import model_request, route_for
from .types import Example, Judgment, LLMRequest, LLMResponse, PairJudgment, Response, Usage, to_row

log = logging.getLogger("rubricrun")

Replays = dict[str, Answers]  # a responses_from candidate's answers file, by candidate name


# ---------------------------------------------------------------------------------------------------
# Candidate responses


@dataclass(frozen=True)
class GenTask:
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


def generation_tasks(cfg: Config, examples: Sequence[Example], replays: Replays | None = None) -> list[GenTask]:
    """Every conversation's first turn, in input order (later turns: next_turn_tasks)."""
    replays = load_replays(cfg) if replays is None else replays
    pairs = [(ex, cand, s) for ex in examples for cand in cfg.candidates for s in range(cand.samples_per_prompt)]
    return [turn_task(cfg, ex, cand, s, (), i, replays) for i, (ex, cand, s) in enumerate(pairs)]


def next_turn_tasks(
    cfg: Config, tasks: Sequence[GenTask], done: dict[str, Response], replays: Replays, examples: dict[str, Example]
) -> list[GenTask]:
    """The next turn of every conversation whose turn in `tasks` was answered; a failed turn ends its conversation."""
    out = []
    for t in tasks:
        r = done.get(t.response_id)
        ex = examples[t.example.id]
        if r is None or r.status != "ok" or t.turn >= ex.turns:
            continue
        out.append(turn_task(cfg, ex, t.candidate, t.sample_index, (*t.answers, r.text or ""), t.order, replays))
    return out


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
        cache_hit=resp.cache_hit if resp else False,
        key=key,
        flags=flags,
        reasoning=reasoning,
    )


def generate(
    tasks: Sequence[GenTask],
    stack: BaseProvider,
    *,
    workers: int,
    stop: threading.Event,
    progress: bool = True,
    label: str = "generate",
) -> tuple[list[Response], bool]:
    """Every task's response row, in task order (a task cut short by a stop or the budget has none), and
    whether the stage was interrupted."""

    done, interrupted = _stage(
        lambda t: generate_one(t, stack), tasks, workers=workers, stop=stop, label=label, progress=progress
    )
    return [r for r in done if r is not None], interrupted


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


def _stage(fn: Any, items: Sequence[Any], **pool: Any) -> tuple[list[Any], bool]:
    """`run_pool(fn, items, **pool)`'s results and False; on Ctrl+C, what finished (None for the rest) and True."""
    try:
        return run_pool(fn, items, **pool), False
    except Interrupted as exc:
        return exc.results, True


def converse(
    cfg: Config, stack: BaseProvider, examples: Sequence[Example], *, stop: threading.Event
) -> tuple[list[Response], bool, int]:
    """Every conversation turn by turn: round k asks turn k of each conversation whose turn k-1 was answered, with
    the candidate's own earlier answers in the context. Returns the response rows in input order (a conversation's
    turns together, in turn order), whether a round was interrupted, and how many turns the run expects (a
    conversation ended by a failed turn expects no more)."""
    replays = load_replays(cfg)
    by_id = {ex.id: ex for ex in examples}
    tasks = generation_tasks(cfg, examples, replays)
    expected = sum(t.example.turns for t in tasks)
    out: list[Response] = []
    interrupted = False
    while tasks and not interrupted:
        turn = tasks[0].turn
        label = "generate" if turn == 1 else f"generate turn {turn}"
        done, interrupted = generate(
            tasks, stack, workers=cfg.run.concurrency, stop=stop, progress=cfg.run.progress, label=label
        )
        out += done
        finished = {r.id: r for r in done}
        ended = [t for t in tasks if t.response_id in finished and finished[t.response_id].status != "ok"]
        cut = sum(by_id[t.example.id].turns - t.turn for t in ended)
        if cut:
            log.warning("%d conversations ended at a failed turn %d: %d later turns not asked", len(ended), turn, cut)
        expected -= cut
        tasks = [] if interrupted else next_turn_tasks(cfg, tasks, finished, replays, by_id)
    # Turn-1 rows come first and in input order: a conversation's place is that of its first turn.
    first = {(r.example_id, r.candidate, r.sample_index): i for i, r in enumerate(out) if r.turn == 1}
    out.sort(key=lambda r: (first[(r.example_id, r.candidate, r.sample_index)], r.turn))
    return out, interrupted, expected


# ---------------------------------------------------------------------------------------------------
# Judging


def turn_views(examples: dict[str, Example], responses: Sequence[Response]) -> dict[str, Example]:
    """For each later-turn response, by response id, the conversation its judge sees: the example up to that turn,
    with the candidate's own earlier answers (the same conversation the candidate was asked)."""
    texts = {(r.example_id, r.candidate, r.sample_index, r.turn): r.text or "" for r in responses if r.status == "ok"}
    views: dict[str, Example] = {}
    for r in responses:
        chain = [texts.get((r.example_id, r.candidate, r.sample_index, k)) for k in range(1, r.turn)]
        if r.turn > 1 and None not in chain:
            views[r.id] = turn_view(examples[r.example_id], [t for t in chain if t is not None])
    return views


def judge(
    cfg: Config,
    stack: BaseProvider,
    examples: dict[str, Example],
    responses: Sequence[Response],
    *,
    stop: threading.Event,
) -> tuple[list[Judgment], bool]:
    """Every response's judgments in response order, then rubric order, its judge-free verdict last; and
    whether the stage was interrupted."""
    j = Judging(cfg, stack)
    views = turn_views(examples, responses)
    items = judge_items(cfg, examples, responses, views)
    judged, interrupted = _stage(
        j.judge_item, items, workers=cfg.run.judge_parallel_workers, stop=stop, label="judge", progress=cfg.run.progress
    )
    by_id = {jd.id: jd for jd in judged if jd is not None}
    out: list[Judgment] = []
    for r in responses:
        ex = views.get(r.id) or examples[r.example_id]
        out.extend(by_id[f"{r.id}#{c.id}"] for c in rubric_for(ex, cfg) if f"{r.id}#{c.id}" in by_id)
        auto = auto_judgment(ex, r)
        if auto is not None:
            out.append(auto)
    return out, interrupted


def judge_pairs(
    cfg: Config,
    stack: BaseProvider,
    examples: dict[str, Example],
    responses: Sequence[Response],
    *,
    stop: threading.Event,
) -> tuple[list[PairJudgment], bool]:
    """judging.pairwise: every comparison (both orders) in pair_items order; and whether the stage was
    interrupted. Nothing when judging.pairwise is not set."""
    if cfg.judging.pairwise is None:
        return [], False
    pj = PairJudging(cfg, stack)
    items = pair_items(cfg, examples, responses)
    done, interrupted = _stage(
        pj.judge_pair,
        items,
        workers=cfg.run.judge_parallel_workers,
        stop=stop,
        label="pairwise",
        progress=cfg.run.progress,
    )
    return [p for p in done if p is not None], interrupted


# ---------------------------------------------------------------------------------------------------
# Synthesis


def synthesis_entry(cfg: Config) -> tuple[str, ModelConfig]:
    """The (section, model entry) that synthesizes: `synthesize.model` by name, else the first candidate."""
    scfg = cfg.synthesize
    assert scfg is not None
    entries = [("candidate", m) for m in cfg.candidates] + [("judge", m) for m in cfg.judge_pool]
    if not scfg.model:
        return entries[0]
    found = [e for e in entries if e[1].name == scfg.model]
    if not found:
        raise cfg.fail("synthesize.model", f"no candidate or judge named '{scfg.model}'")
    return found[0]


def synthesis_request(cfg: Config, messages: list[dict], attempt: int) -> LLMRequest:
    section, model = synthesis_entry(cfg)
    route = route_for(model, "synthesize", 0, cfg.run.seed)
    return model_request(model, route, messages, role="synthesis", section=section, sample_index=attempt)


class _Stopped(ProviderError):
    """Ctrl+C or the budget stopped a synthesis call: the step records it as its error and the next steps stop
    at once, so the steps done so far are kept."""


def synthesize(
    cfg: Config,
    stack: BaseProvider,
    *,
    stop: threading.Event,
    on_examples: Callable[[list[Example]], None] = lambda new: None,
) -> tuple[list[Example], list[dict[str, Any]], bool]:
    """Prompts synthesized from a topic, through the same cached stack as every other call; the synthesis log;
    and whether Ctrl+C interrupted it (then the examples and log are those of the steps that finished).
    `on_examples` gets each step's new examples as soon as the step ends (they flow into generation)."""
    from .data.synth import synthesize as run_synthesis

    scfg = cfg.synthesize
    assert scfg is not None
    synthesis_entry(cfg)  # an unknown synthesize.model is an InputError before any call

    def call(messages: list[dict], attempt: int) -> LLMResponse:
        try:
            return stack.generate(synthesis_request(cfg, messages, attempt))
        except NotDone as exc:
            raise _Stopped(f"stopped: {exc or type(exc).__name__}") from None

    examples: list[Example] = []
    logs: list[Any] = []
    lock = threading.Lock()
    bar = Progress("synthesize", 1 + scfg.num_subtopics, cfg.run.progress)  # one step per ask-and-dedupe

    def on_step(entry: Any, new: list[Example]) -> None:
        with lock:
            logs.append(entry)
            examples.extend(new)
        bar.update()
        if new:
            on_examples(list(new))

    def whole(_: None) -> None:
        try:
            run_synthesis(scfg, call, log=log.info, on_step=on_step)
        except _Stopped:  # while asking for subtopics: nothing was synthesized
            pass

    # On the pool (one item) so that Ctrl+C stops it as it stops the other stages: the call in flight gets the
    # pool's grace period, later steps see the stop and end at once, and the steps finished so far are kept (a
    # call still hanging after the grace period is left behind, its step missing from the log).
    try:
        run_pool(whole, [None], workers=1, stop=stop, label="synthesize", progress=False)
        interrupted = False
    except Interrupted:
        interrupted = True
    finally:
        bar.close()
    with lock:  # a copy: a thread left behind must not change what is written
        examples, logs = list(examples), list(logs)
    return examples, [to_row(entry) for entry in logs], interrupted or stop.is_set()
