"""The per-example work of a run, one typed piece at a time: a conversation's turn (`Turn`), a judge call on one
criterion of an answer (`Vote`), a pairwise comparison of two answers (`Comparison`). Each piece, run by
`Stages.run`, hands the pieces that follow it to `submit`; the caller decides where they run: graph.py on thread
pools (the run), engine/estimate.py inline on the calling thread (--validate, which so counts the calls the run's own
code builds). Nothing here knows about threads beyond the unit's lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from ..config import Config, ModelConfig
from ..data.answers_file import load_replays
from ..judging.answers import auto_judgment
from ..judging.pairwise import PairItem, PairJudging, pair_items
from ..judging.rubric import JudgeItem
from ..providers.base import BaseProvider
from ..tasks import registry
from ..types import Example, Judgment, PairJudgment, Response
from .calls import GenTask, generate_one, turn_task


@dataclass
class Conversation:
    """One candidate x sample of an example: its rows in turn order, each with its judgments' slots."""

    candidate: ModelConfig
    sample_index: int
    rows: list[Response] = field(default_factory=list)
    # per row: one slot per rubric item, then its judge-free verdict (None: none), in the order the files keep
    judged: list[list[Judgment | None]] = field(default_factory=list)


class Unit:
    """One example's work. `pending` counts its calls submitted and not finished; at 0 the unit is finished."""

    def __init__(self, example: Example, convs: list[tuple[ModelConfig, int]]) -> None:  # (candidate, sample index)
        self.example, self.conversations = example, [Conversation(c, s) for c, s in convs]
        self.pairs: list[PairJudgment | None] = []
        self.pending = 0
        self.generating = 0  # candidate calls in flight: the comparisons wait for 0
        self.finished = False
        self.lock = threading.Lock()

    def rows(self) -> tuple[list[Response], list[Judgment], list[PairJudgment]]:
        """What is done, in the order the files keep: conversations in config order, a conversation's turns
        together; each response's judgments in rubric order, its judge-free verdict last."""
        responses: list[Response] = []
        judgments: list[Judgment] = []
        with self.lock:
            for c in self.conversations:
                for row, judged in zip(c.rows, c.judged, strict=True):
                    responses.append(row)
                    judgments.extend(j for j in judged if j is not None)
            return responses, judgments, [p for p in self.pairs if p is not None]


@dataclass(slots=True)
class Turn:
    """A candidate's turn in one conversation of the unit (a call, unless its answer is replayed)."""

    unit: Unit
    conv: Conversation
    task: GenTask
    kind: ClassVar[str] = "generate"


@dataclass(slots=True)
class Vote:
    """The judge calls on one criterion of an answer (JudgeItem: its judges, its tie rule); the judgment fills
    `slots[i]`."""

    unit: Unit
    slots: list[Judgment | None]
    i: int
    item: JudgeItem
    kind: ClassVar[str] = "judge"


@dataclass(slots=True)
class Comparison:
    """One pairwise comparison of two of the unit's answers; the verdict fills `unit.pairs[i]`."""

    unit: Unit
    i: int
    item: PairItem
    kind: ClassVar[str] = "pairwise"


Work = Turn | Vote | Comparison
Submit = Callable[[Work], None]  # run the work some time later (or now)


def conversations(cfg: Config, ex: Example, at_most: int | None = None) -> list[tuple[ModelConfig, int]]:
    """(candidate, sample index) of every conversation `ex` gets (its task's candidates, else the config's), in
    config order; with `at_most`, a candidate's first `at_most` samples only."""
    cands = registry.candidates_for(cfg, ex)
    return [(c, s) for c in cands for s in range(min(c.samples_per_prompt, at_most or c.samples_per_prompt))]


def reply_feeds_calls(cfg: Config, example: Example, turn: int) -> bool:
    """Whether a call reads this turn's reply: the conversation's next turn, a judge call or a pairwise comparison.
    When none does, the reply leads to no other call (graph.py asks for no judge items; --validate only asks the
    cache whether it holds the reply)."""
    return (
        turn < example.turns
        or cfg.judging.pairwise is not None
        or (bool(cfg.judge_pool) and bool(registry.rubric_for(example, cfg)))
    )


class Stages:
    """The pieces of an example's work. `submit(work)` runs `run(work)` some time later (or now); `ended(turn, cut)`
    hears of a conversation that a failed turn ended, with its later turns not asked. Every call goes through
    `stack`, or the provider `by_role` names for its kind ("judge", "pairwise": --validate counts each apart)."""

    def __init__(
        self,
        cfg: Config,
        stack: BaseProvider,
        submit: Submit,
        ended: Callable[[int, int], None],
        by_role: Mapping[str, BaseProvider] | None = None,
    ) -> None:
        self.cfg, self.stack, self.submit, self.ended = cfg, stack, submit, ended
        by_role = by_role or {}
        self.replays = load_replays(cfg, registry.ANSWER_READERS)
        self.judging = registry.judging_for(cfg, by_role.get("judge", stack))
        self.pairing = PairJudging(cfg, by_role.get("pairwise", stack)) if cfg.judging.pairwise is not None else None
        self._do: dict[type, Callable] = {Turn: self.generate, Vote: self.judge, Comparison: self.pair}

    def run(self, work: Work) -> None:
        """One piece of work; it submits the pieces that follow it."""
        self._do[type(work)](work)

    def start(self, unit: Unit) -> None:
        """The first turn of every conversation of the unit."""
        for conv in unit.conversations:
            self.submit(Turn(unit, conv, self.first_turn(unit.example, conv.candidate, conv.sample_index)))

    def first_turn(self, ex: Example, candidate: ModelConfig, sample_index: int) -> GenTask:
        return turn_task(self.cfg, ex, candidate, sample_index, (), 0, self.replays)

    def generate(self, turn: Turn) -> None:
        """One turn; then its judge calls and the conversation's next turn (a failed turn ends the conversation)."""
        unit, conv, task = turn.unit, turn.conv, turn.task
        row = generate_one(task, self.stack)
        if row is None:  # not done (stop, budget): a rerun picks it up
            return
        ex = unit.example
        view = task.example if row.turn > 1 else ex  # what the judge sees: the conversation up to this turn
        feeds = reply_feeds_calls(self.cfg, view, row.turn)  # False: no judge item either (a judge-free run)
        items = registry.judge_items(self.cfg, view, row) if feeds else []
        # the judge-free verdict is a pure function of the example and the row: made here, not under the unit's lock
        slots: list[Judgment | None] = [None] * len(items) + [auto_judgment(view, row)]
        with unit.lock:
            conv.rows.append(row)
            conv.judged.append(slots)
        for i, item in enumerate(items):
            self.submit(Vote(unit, slots, i, item))
        if row.turn >= ex.turns:
            return
        if row.status == "ok":
            answers = (*task.answers, row.text or "")
            nxt = turn_task(self.cfg, ex, conv.candidate, conv.sample_index, answers, 0, self.replays)
            self.submit(Turn(unit, conv, nxt))
        else:
            self.ended(row.turn, ex.turns - row.turn)

    def judge(self, vote: Vote) -> None:
        judgment = self.judging.judge_item(vote.item)
        with vote.unit.lock:
            vote.slots[vote.i] = judgment

    def compare(self, unit: Unit) -> None:
        """The example's pairwise comparisons, once its last answer landed."""
        if self.pairing is None:
            return
        responses, _, _ = unit.rows()
        items = pair_items(self.cfg, unit.example, responses)
        with unit.lock:
            unit.pairs = [None] * len(items)
        for i, item in enumerate(items):
            self.submit(Comparison(unit, i, item))

    def pair(self, c: Comparison) -> None:
        done = self.pairing.judge_pair(c.item) if self.pairing is not None else None
        with c.unit.lock:
            c.unit.pairs[c.i] = done
