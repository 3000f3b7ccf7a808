"""--validate's run: the stages of a run (stages.py) driven inline on the calling thread over a dry provider, which
answers each call from the cache, else with a placeholder, and counts and prices it; it never stores. So the calls
counted are the ones the run's own code builds: cached tie-breaks and re-asks of unreadable judge replies included.

An uncached reply is unknown, so what follows from it is counted as the run makes it when the reply is readable and
votes agree (a placeholder of max_tokens for a candidate, a readable verdict for a judge), and bounded besides: each
uncached judge or pairwise vote asked again once, and each criterion with an even number of voters and an uncached
vote given a tie-break when `judging.on_tie: judge` (the `*_at_most` counts of preflight.count_calls). A generation whose
reply no call reads (stages.reply_feeds_calls) is not run: the cache is asked only whether it holds the reply, for
many keys a query (ResponseCache.fresh_many), which keeps 1,000,000 judge-free rows fast.

A candidate's samples past the first EXACT_SAMPLES of an example are counted by arithmetic, not one by one: their
requests differ only by the sample index, so one of them is run through the stages, as not cached, and its counts are
added once per sample (`InlineDriver._times`). Time and memory stay bounded whatever `samples_per_prompt` says; those
samples count as not cached (the cost bound stays a bound; `candidate_cached` counts the first EXACT_SAMPLES).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..config import Config
from ..judging.ask import JUDGE_PARSE_ATTEMPTS
from ..judging.rubric import JudgeItem, tie_breaker
from ..providers.base import BaseProvider
from ..providers.cache import ResponseCache, cache_key
from ..providers.pricing import call_cost, estimate_prompt_tokens, max_tokens_of
from ..tasks import registry
from ..types import Example, LLMRequest, LLMResponse
from . import second_process
from .stages import Stages, Unit, conversations, new_unit, reply_feeds_calls

DRY_MARK = "\ue000rubricrun-dry\ue000"  # starts a placeholder answer: a request carrying one is never looked up
DRY_PAIR = "[[C]]"  # a pairwise judge's placeholder reply (a rubric judge's: its protocol's `dry_reply`)
EXACT_SAMPLES = 1000  # samples of a candidate on an example counted one by one; the rest by arithmetic
ROLES = {"generate": "candidate", "judge": "judge", "pairwise": "pairwise"}


@dataclass
class Counts:
    """What --validate counted: calls and cache hits by role (`candidate`, `judge`, `pairwise`), the cost bound of
    the uncached calls (every reply at its max_tokens), the models without a price; `dry_votes` by role: uncached
    first asks of a judge or pairwise vote (each may be asked again once); `ties_possible`: criteria whose vote
    could tie once its uncached votes are known (each may get a tie-break, itself asked again once)."""

    cache: ResponseCache | None
    prices: dict[str, Any]
    online_prices: dict[str, Any] | None = None  # with batch entries: the prices they would pay online
    calls: Counter[str] = field(default_factory=Counter)
    cached: Counter[str] = field(default_factory=Counter)
    dry_votes: Counter[str] = field(default_factory=Counter)
    ties_possible: int = 0
    bound: float = 0.0
    online_bound: float = 0.0
    unpriced: set[str] = field(default_factory=set)

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int, times: int = 1) -> None:
        c = call_cost(model, prompt_tokens, completion_tokens, self.prices)
        if c is None:
            self.unpriced.add(model)
        self.bound += (c or 0.0) * times
        if self.online_prices is not None:
            online = call_cost(model, prompt_tokens, completion_tokens, self.online_prices)
            self.online_bound += (online or 0.0) * times

    def priced(self, request: LLMRequest, times: int = 1) -> None:
        """An uncached call, `times` over, at its prompt and its max_tokens."""
        self.cost(request.model, estimate_prompt_tokens(list(request.messages)), max_tokens_of(request.params), times)

    def add(self, other: Counts, times: int) -> None:
        """`other`'s counts, `times` over (a sample counted once for many: see InlineDriver._times)."""
        for mine, theirs in ((self.calls, other.calls), (self.cached, other.cached), (self.dry_votes, other.dry_votes)):
            for role, n in theirs.items():
                mine[role] += n * times
        self.ties_possible += other.ties_possible * times
        self.bound += other.bound * times
        self.online_bound += other.online_bound * times
        self.unpriced |= other.unpriced

    def at_most(self, role: str) -> int:
        """The most calls of a judging role the run can make: every uncached vote asked again, every possible tie
        broken (and that vote asked again)."""
        extra = self.dry_votes[role] * (JUDGE_PARSE_ATTEMPTS - 1)
        if role == "judge":
            extra += self.ties_possible * JUDGE_PARSE_ATTEMPTS
        return self.calls[role] + extra


def _placeholder(request: LLMRequest) -> str:
    """A candidate's unknown answer: max_tokens long (about 3 characters a token), as the next turn and the judges
    would see it at most."""
    n = 3 * max_tokens_of(request.params)
    return DRY_MARK + "x" * max(0, n - len(DRY_MARK))


def _carries_placeholder(request: LLMRequest) -> bool:
    return any(DRY_MARK in str(m.get("content")) for m in request.messages)


class DryStack(BaseProvider):
    """What --validate calls through: the cache, else a placeholder; counted and priced, never stored. `kind` (the
    stage asking: generate, judge, pairwise) is set by the driver, on its one thread; `verdict` is a rubric judge's
    placeholder reply (the judging protocol's `dry_reply`)."""

    def __init__(self, counts: Counts, verdict: str = "") -> None:
        self.counts, self.kind, self.verdict = counts, "generate", verdict
        self.first_asks = 0  # judge votes asked (first asks, cached or not): the driver sees a tie-break by them

    def generate(self, request: LLMRequest) -> LLMResponse:
        counts, role = self.counts, ROLES[self.kind]
        counts.calls[role] += 1
        first = role != "candidate" and request.sample_index == 0  # a judge's attempt is its sample_index
        self.first_asks += first
        cache = counts.cache
        if cache is not None and not _carries_placeholder(request):
            hit = cache.get(cache_key(request))
            if hit is not None:  # its real text: a re-ask or a tie-break follows as in the run
                counts.cached[role] += 1
                return hit
        if first:
            counts.dry_votes[role] += 1
        counts.priced(request, JUDGE_PARSE_ATTEMPTS if first else 1)
        if role == "candidate":
            return LLMResponse(text=_placeholder(request))
        return LLMResponse(text=self.verdict if role == "judge" else DRY_PAIR)


class InlineDriver:
    """Runs stages.Stages inline, depth first, an example at a time; a generation whose reply no call reads is a
    leaf: its request is kept and asked for presence only, `chunk` examples at a time (`flush`). The cache and the
    judge prompts are opened with the first full chunk (or at `flush`), so a small dataset's bad row is reported
    before a bad template, as the run reports it."""

    def __init__(self, cfg: Config, open_counts: Callable[[], Counts], chunk: int) -> None:
        self.cfg, self.open_counts, self.chunk = cfg, open_counts, chunk
        self.counts: Counts | None = None
        self.examples: list[Example] = []
        self.leaves: list[LLMRequest] = []
        self.n = 0

    def start(self) -> Counts:
        if self.counts is None:
            self.counts = self.open_counts()
            self.stack = DryStack(self.counts)
            self.stages = Stages(self.cfg, self.stack, self.submit, lambda turn, cut: None)
            self.stack.verdict = self.stages.judging.protocol.dry_reply
        return self.counts

    def add(self, ex: Example) -> None:
        self.examples.append(ex)
        if len(self.examples) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        counts = self.start()
        for ex in self.examples:
            convs = conversations(self.cfg, ex, EXACT_SAMPLES)
            for c in registry.candidates_for(self.cfg, ex):
                if c.samples_per_prompt > EXACT_SAMPLES:
                    self._times(ex, c, c.samples_per_prompt - EXACT_SAMPLES)
            if not reply_feeds_calls(self.cfg, ex, 1) and not any(c.replays for c, _ in convs):  # only leaves
                self.leaves.extend(self.stages.first_turn(ex, c, s).request for c, s in convs)
                continue
            unit = new_unit(ex, convs)
            self.stages.start(unit)
            self.stages.compare(unit)  # the run compares once the last answer landed: inline, that is now
        self.n += len(self.examples)
        self.examples = []
        leaves, self.leaves = self.leaves, []
        keys = [cache_key(r) for r in leaves]
        fresh = counts.cache.fresh_many(keys) if counts.cache is not None else set()
        counts.calls["candidate"] += len(leaves)
        counts.cached["candidate"] += len(fresh)
        for request, key in zip(leaves, keys, strict=True):
            if key not in fresh:
                counts.priced(request)

    def _times(self, ex: Example, candidate: Any, times: int) -> None:
        """`times` samples of `candidate` on `ex` past the first EXACT_SAMPLES, counted from one of them: it is run
        through the stages as not cached (a placeholder reply, dry votes), its leaves priced as not cached, and its
        counts added `times` over. Pairwise judging reads sample 0 only: nothing to compare here."""
        main = self.counts
        assert main is not None
        one = Counts(None, main.prices, online_prices=main.online_prices)
        mark = len(self.leaves)
        self.counts = self.stack.counts = one
        try:
            if reply_feeds_calls(self.cfg, ex, 1):
                self.stages.start(new_unit(ex, [(candidate, EXACT_SAMPLES)]))
            else:
                self.leaves.append(self.stages.first_turn(ex, candidate, EXACT_SAMPLES).request)
            for request in self.leaves[mark:]:
                one.calls["candidate"] += 1
                one.priced(request)
            del self.leaves[mark:]
        finally:
            self.counts = self.stack.counts = main
        main.add(one, times)

    def submit(self, kind: str, unit: Unit, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        """stages.Submit: a leaf generation is kept for `flush`; anything else runs now."""
        if kind == "generate":
            task = args[2]
            if task.replay is None and not reply_feeds_calls(self.cfg, task.example, task.turn):
                self.leaves.append(task.request)
                return
        stack = self.stack
        asks, dry = stack.first_asks, self.counts.dry_votes["judge"] if self.counts else 0
        previous, stack.kind = stack.kind, kind
        try:
            fn(*args)
        finally:
            stack.kind = previous
        if kind == "judge" and self.counts is not None:
            self._tie_possible(args[3], stack.first_asks - asks, self.counts.dry_votes["judge"] - dry)

    def _tie_possible(self, item: JudgeItem, asked: int, dry: int) -> None:
        """A criterion voted by an even number of judges, one of them uncached, whose dry votes agreed (no tie-break
        was asked): with the real replies it may tie, and its tie-break is priced as asked twice."""
        on_tie = item.on_tie if item.on_tie is not None else self.cfg.judging.on_tie
        if on_tie == "judge" and dry and len(item.judges) % 2 == 0 and asked == len(item.judges):
            assert self.counts is not None
            self.counts.ties_possible += 1
            pool = self.cfg.judge_pool
            breaker = pool[tie_breaker(item.judges, len(pool))]
            self.counts.priced(self.stages.judging.request(breaker, item, 0), JUDGE_PARSE_ATTEMPTS)


class ProcessDriver(second_process.Child):
    """An InlineDriver in a second process (second_process.py), for a large `--validate`: preflight's examples are sent a
    chunk at a time (pickled) and counted there while preflight parses the next chunk, on the other core; `result`
    waits for the count. The child counts the examples in the order preflight read them, so every count and every
    sum of the cost bound is the one an InlineDriver here makes (tests/test_validate.py). An error of the count is
    raised by `result`, after preflight: a bad row is reported before it, as the run reports it."""

    def __init__(self, cfg: Config, open_counts: Callable[[Config], Counts], chunk: int) -> None:
        super().__init__(_count, (cfg, open_counts, chunk), "rubricrun-count", _COUNT_ENDED, rows=chunk)

    def add(self, ex: Example) -> None:
        """preflight's `visit`: one example, sent with its chunk."""
        self.put(ex)

    def result(self) -> tuple[int, Counts]:
        """(examples counted, their Counts, without a cache)."""
        return self.ask(None)[0]


_COUNT_ENDED = "the call count's process ended (exit code {code}); nothing was called: run --validate again"


def _count(conn: Any, cfg: Config, open_counts: Callable[[Config], Counts], chunk: int) -> None:
    """The child of a ProcessDriver: an InlineDriver fed the chunks until None, then its (n, Counts) sent back."""
    second_process.detach()
    driver = InlineDriver(cfg, lambda: open_counts(cfg), chunk)
    with second_process.serving():
        try:
            conn.send(("ok", "up"))
            failed = _counted_chunks(conn, driver)
            if failed is not None:
                second_process.send_error(conn, failed)
            else:
                assert driver.counts is not None
                conn.send(("ok", (driver.n, replace(driver.counts, cache=None))))
        finally:
            if driver.counts is not None and driver.counts.cache is not None:
                driver.counts.cache.close()
            conn.close()


def _counted_chunks(conn: Any, driver: InlineDriver) -> BaseException | None:
    """Every chunk until None, counted; the first error, kept until then (the sender waits for no answer)."""
    failed: BaseException | None = None
    while (msg := conn.recv()) is not None:
        if failed is None:
            try:
                for ex in msg:
                    driver.add(ex)
            except Exception as exc:  # noqa: BLE001 - answered once every chunk is read
                failed = exc
    if failed is None:
        try:
            driver.flush()
        except Exception as exc:  # noqa: BLE001 - answered by the caller
            failed = exc
    return failed
