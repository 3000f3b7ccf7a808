"""--validate: what a run would call and what it would cost at most, counted without calling anything (`count_calls`).

The run's own stages (stages.py) driven inline over a dry provider, which answers each call from the cache, else with
a placeholder, and counts and prices it; it never stores. An uncached reply is unknown, so what follows from it is
counted as when replies are readable and votes agree, and bounded besides (the `*_at_most` counts: each uncached vote
asked again once, each possible tie broken). A generation whose reply no call reads is only looked up in the cache
(ResponseCache.fresh_many), which keeps 1,000,000 judge-free rows fast.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..config import Config, ModelConfig, SynthesizeConfig
from ..judging.protocol import JUDGE_PARSE_ATTEMPTS
from ..judging.rubric import JudgeItem, tie_breaker
from ..providers.base import BaseProvider
from ..providers.cache import ResponseCache, cache_key
from ..providers.pricing import call_cost, estimate_prompt_tokens, max_tokens_of, price_table, price_terms, unit_prices
from ..providers.stack import open_cache
from ..tasks import registry
from ..types import Example, LLMRequest, LLMResponse
from . import second_process
from .calls import candidate_request, synthesis_request
from .preflight import large_run, preflight
from .stages import Stages, Turn, Unit, Vote, Work, conversations, reply_feeds_calls

DRY_MARK = "\ue000rubricrun-dry\ue000"  # starts a placeholder answer: a request carrying one is never looked up
DRY_PAIR = "[[C]]"  # a pairwise judge's placeholder reply (a rubric judge's: its protocol's `dry_reply`)
EXACT_SAMPLES = 1000  # samples of a candidate on an example counted one by one; the rest by arithmetic


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
        self.cost(*price_terms(request), times)

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


class DryStack(BaseProvider):
    """What --validate calls through for one role (`candidate`, `judge`, `pairwise`): the cache, else a placeholder
    (a candidate's answer max_tokens long; a judge's `reply`: its protocol's `dry_reply`, or DRY_PAIR); counted and
    priced, never stored."""

    def __init__(self, counts: Counts, role: str, reply: str = "") -> None:
        self.counts, self.role, self.reply = counts, role, reply
        self.first_asks = 0  # votes asked (first asks, cached or not): the driver sees a tie-break by them

    def generate(self, request: LLMRequest) -> LLMResponse:
        counts, role = self.counts, self.role
        counts.calls[role] += 1
        first = role != "candidate" and request.sample_index == 0  # a judge's attempt is its sample_index
        self.first_asks += first
        cache = counts.cache
        if cache is not None and not any(DRY_MARK in str(m.get("content")) for m in request.messages):
            hit = cache.get(cache_key(request))
            if hit is not None:  # its real text: a re-ask or a tie-break follows as in the run
                counts.cached[role] += 1
                return hit
        if first:
            counts.dry_votes[role] += 1
        counts.priced(request, JUDGE_PARSE_ATTEMPTS if first else 1)
        return LLMResponse(text=_placeholder(request) if role == "candidate" else self.reply)


class InlineDriver:
    """Runs stages.Stages inline, depth first, an example at a time; a generation whose reply no call reads is a
    leaf: its request is kept and asked for presence only, `chunk` examples at a time (`flush`). The cache and the
    judge prompts are opened with the first full chunk (or at `flush`), so a small dataset's bad row is reported
    before a bad template, as the run reports it."""

    def __init__(self, cfg: Config, chunk: int) -> None:
        self.cfg, self.chunk = cfg, chunk
        self.counts: Counts | None = None
        self.examples: list[Example | tuple[Leaf, ...]] = []
        self.leaves: list[LLMRequest | Leaf] = []
        self.n = 0

    def start(self) -> Counts:
        if self.counts is None:
            cfg = self.cfg
            online = price_table(cfg, batch=False) if any(m.batch for m in [*cfg.candidates, *cfg.judge_pool]) else None
            counts = self.counts = Counts(open_cache(cfg), price_table(cfg), online_prices=online)
            self.judges = DryStack(counts, "judge", registry.protocol_for(cfg.judging.scale).dry_reply)
            self.stacks = (DryStack(counts, "candidate"), self.judges, DryStack(counts, "pairwise", DRY_PAIR))
            dry = {"judge": self.judges, "pairwise": self.stacks[2]}
            self.stages = Stages(cfg, self.stacks[0], self.submit, lambda turn, cut: None, dry)
        return self.counts

    def close(self) -> None:
        if self.counts is not None and self.counts.cache is not None:
            self.counts.cache.close()

    def take(self, ex: Example | tuple[Leaf, ...]) -> None:
        """An example, or the leaves ProcessDriver made of one (counted as the example would be)."""
        self.examples.append(ex)
        if len(self.examples) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        counts = self.start()
        for ex in self.examples:
            if type(ex) is tuple:
                self.leaves.extend(ex)
                continue
            convs = conversations(self.cfg, ex, EXACT_SAMPLES)
            for c in registry.candidates_for(self.cfg, ex):
                if c.samples_per_prompt > EXACT_SAMPLES:
                    self._times(ex, c, c.samples_per_prompt - EXACT_SAMPLES)
            if only_leaves(self.cfg, ex, convs):
                self.leaves.extend(self.stages.first_turn(ex, c, s).request for c, s in convs)
                continue
            unit = Unit(ex, convs)
            self.stages.start(unit)
            self.stages.compare(unit)  # the run compares once the last answer landed: inline, that is now
        self.n += len(self.examples)
        self.examples = []
        leaves, self.leaves = self.leaves, []
        keys = [leaf[0] if type(leaf) is tuple else cache_key(leaf) for leaf in leaves]
        fresh = counts.cache.fresh_many(keys) if counts.cache is not None else set()
        counts.calls["candidate"] += len(leaves)
        counts.cached["candidate"] += len(fresh)
        for leaf, key in zip(leaves, keys, strict=True):
            if key not in fresh and type(leaf) is tuple:
                counts.cost(*leaf[1:])
            elif key not in fresh:
                counts.priced(leaf)

    def result(self) -> tuple[int, Counts]:
        """(examples counted, their Counts without the cache), once every example is taken."""
        self.flush()
        return self.n, replace(self.start(), cache=None)

    def _times(self, ex: Example, candidate: Any, times: int) -> None:
        """`times` samples of `candidate` on `ex` past the first EXACT_SAMPLES, counted from one of them: it is run
        through the stages as not cached (a placeholder reply, dry votes), its leaves priced as not cached, and its
        counts added `times` over. Pairwise judging reads sample 0 only: nothing to compare here."""
        main = self.counts
        assert main is not None
        one = Counts(None, main.prices, online_prices=main.online_prices)
        mark = len(self.leaves)
        self._count_into(one)
        try:
            if reply_feeds_calls(self.cfg, ex, 1):
                self.stages.start(Unit(ex, [(candidate, EXACT_SAMPLES)]))
            else:
                self.leaves.append(self.stages.first_turn(ex, candidate, EXACT_SAMPLES).request)
            for request in self.leaves[mark:]:
                one.calls["candidate"] += 1
                one.priced(request)
            del self.leaves[mark:]
        finally:
            self._count_into(main)
        main.add(one, times)

    def _count_into(self, counts: Counts) -> None:
        self.counts = counts
        for stack in self.stacks:
            stack.counts = counts

    def submit(self, work: Work) -> None:
        """stages.Submit: a leaf generation is kept for `flush`; anything else runs now."""
        if isinstance(work, Turn):
            task = work.task
            if task.replay is None and not reply_feeds_calls(self.cfg, task.example, task.turn):
                self.leaves.append(task.request)
                return
        if not isinstance(work, Vote):
            self.stages.run(work)
            return
        assert self.counts is not None  # (start made the stages that submit)
        votes = self.counts.dry_votes
        asks, dry = self.judges.first_asks, votes["judge"]
        self.stages.run(work)
        self._tie_possible(work.item, self.judges.first_asks - asks, votes["judge"] - dry)

    def _tie_possible(self, item: JudgeItem, asked: int, dry: int) -> None:
        """A criterion voted by an even number of judges, one of them uncached, whose dry votes agreed (no tie-break
        was asked): with the real replies it may tie, and its tie-break is priced as asked twice."""
        if item.on_tie == "judge" and dry and len(item.judges) % 2 == 0 and asked == len(item.judges):
            assert self.counts is not None
            self.counts.ties_possible += 1
            pool = self.cfg.judge_pool
            breaker = pool[tie_breaker(item.judges, len(pool))]
            self.counts.priced(self.stages.judging.request(breaker, item, 0), JUDGE_PARSE_ATTEMPTS)


def only_leaves(cfg: Config, ex: Example, convs: list[tuple[ModelConfig, int]]) -> bool:
    """Whether the example's calls are its first turns alone: no judge, pairwise or later turn, no replayed answer."""
    return not reply_feeds_calls(cfg, ex, 1) and not any(c.replays for c, _ in convs)


class ProcessDriver(second_process.Child):
    """An InlineDriver in a second process, for a large `--validate`: it counts preflight's examples (one in LEAD_SHARE
    keyed and priced here), in the order read, while preflight parses the next chunk, so every count and sum is the
    one an InlineDriver here makes (tests/test_validate.py). An error of the count is raised by `result`, after
    preflight's own."""

    def __init__(self, cfg: Config, chunk: int) -> None:
        ended = "the call count's process ended (exit code {code}); nothing was called: run --validate again"
        super().__init__(InlineDriver, (cfg, chunk), "rubricrun-count", ended, rows=chunk)
        self.cfg, self.seen = cfg, 0

    def take(self, ex: Example) -> None:
        """preflight's `visit`: one example, sent with its chunk; one in LEAD_SHARE as its leaves, made here."""
        self.seen += 1
        self.put(self._leaves(ex) if self.seen % LEAD_SHARE == 0 else ex)

    def _leaves(self, ex: Example) -> Example | tuple[Leaf, ...]:
        """The example's leaves (its requests' keys and prices' terms), as InlineDriver.flush makes them; the
        example itself when it has other calls, samples past EXACT_SAMPLES, or raises (the child raises it in turn)."""
        cfg = self.cfg
        try:
            convs = conversations(cfg, ex, EXACT_SAMPLES)
            if not only_leaves(cfg, ex, convs) or any(c.samples_per_prompt > EXACT_SAMPLES for c, _ in convs):
                return ex
            requests = [candidate_request(c, ex, s, cfg.run.seed) for c, s in convs]
            return tuple((cache_key(r), *price_terms(r)) for r in requests)
        except Exception:  # noqa: BLE001 - the child meets it again, in the order the run reports it
            return ex

    def result(self) -> tuple[int, Counts]:
        return self.ask("result")


# A leaf made in the main process: (cache key, model, prompt tokens, max_tokens), priced if not cached.
Leaf = tuple[str, str, int, int]
# The main process makes the leaves of one example in LEAD_SHARE (ProcessDriver), so that both processes work about
# as long: the child looks up every key (the longest part), the main process reads the rows (plan 023, round 4).
LEAD_SHARE = 3


# ---------------------------------------------------------------------------------------------------
# count_calls: what --validate prints


def count_calls(cfg: Config, max_examples: int | None) -> dict[str, Any]:
    """--validate: the calls the run would make (synthesis, candidates, judges), how many are cached, and an upper
    bound on the cost of the rest (see the module's docstring). Calls nothing, stores nothing. The count runs on the
    other core for a large run without synthesis (whose count needs the cache)."""
    in_child = cfg.synthesize is None and second_process.wanted(large_run(cfg, max_examples))
    driver = ProcessDriver(cfg, COUNT_CHUNK) if in_child else InlineDriver(cfg, COUNT_CHUNK)
    synthesis: dict[str, int] = {}
    try:
        # the same checks a run makes before its first call, in the same pass that counts the examples' calls
        prepared = preflight(cfg, max_examples, visit=driver.take)
        if cfg.synthesize is not None:
            assert isinstance(driver, InlineDriver)
            synthesized, synthesis = _count_synthesis(cfg, cfg.synthesize, driver.start())
            for ex in synthesized:
                driver.take(ex)
        n, counts = driver.result()
    finally:
        driver.close()
    return _counted(cfg, n, len(prepared.skipped), synthesis, counts)


def _counted(cfg: Config, n: int, skipped: int, synthesis: dict[str, int], counts: Counts) -> dict[str, Any]:
    out: dict[str, Any] = {"examples": n, "skipped_rows": skipped, **synthesis}
    for role in ("candidate", "judge", "pairwise") if cfg.judging.pairwise else ("candidate", "judge"):
        out[f"{role}_calls"], out[f"{role}_cached"] = counts.calls[role], counts.cached[role]
        if role != "candidate":
            out[f"{role}_calls_at_most"] = counts.at_most(role)
    out["cost_upper_bound_usd"] = round(counts.bound, 4)
    if counts.online_prices is not None:
        out.update(cost_upper_bound_online_usd=round(counts.online_bound, 4), batch_prices=batch_prices(cfg))
    out["unpriced_models"] = sorted(counts.unpriced)
    return out


def batch_prices(cfg: Config) -> dict[str, Any]:
    """For each model an entry batches: USD per million tokens online and in a batch job (None: no known price)."""
    online, batch = price_table(cfg, batch=False), price_table(cfg)
    out: dict[str, Any] = {}
    for m in [*cfg.candidates, *cfg.judge_pool]:
        for model in [m.model] + [w.model for w in m.models] if m.batch else []:
            if model:
                out[model] = {name: _per_mtok(model, table) for name, table in (("online", online), ("batch", batch))}
    return out


def _per_mtok(model: str, prices: dict[str, Any]) -> dict[str, float] | None:
    p = unit_prices(model, prices.get(model))
    return None if p is None else {"input_per_mtok": round(p[0] * 1e6, 6), "output_per_mtok": round(p[1] * 1e6, 6)}


COUNT_CHUNK = 1000  # examples counted at a time: every count is per example, so chunks add up to the whole


class _NotCached(Exception):
    """A synthesis call (its request) that --validate cannot replay from the cache (not a ProviderError: it ends the
    replay)."""


def _count_synthesis(cfg: Config, scfg: SynthesizeConfig, tally: Counts) -> tuple[Iterable[Example], dict[str, int]]:
    """The synthesis calls and the examples they give. When every call is cached the synthesis is replayed and
    both are exact. Otherwise they are bounds: each step (subtopics, then prompts per subtopic) asks once and
    retries at most once; a call's prompt holds the template plus at most two replies (the subtopic and the
    exclusions), so at most its rendered length + 2 x max_tokens; and the run gets num_subtopics x
    prompts_per_subtopic prompts, each at most one reply (max_tokens) long."""
    from ..data.synth import synthesize

    hits: list[LLMResponse] = []  # the calls answered from the cache, until the first one it cannot answer

    def replay(messages: list[dict], attempt: int) -> LLMResponse:
        request = synthesis_request(cfg, messages, attempt)
        hit = tally.cache.get(cache_key(request)) if tally.cache else None
        if hit is None:
            raise _NotCached(request)
        hits.append(hit)
        return hit

    try:
        examples, _ = synthesize(scfg, replay, log=lambda _: None)
        return examples, {"synthesis_calls": len(hits), "synthesis_cached": len(hits)}
    except _NotCached as exc:
        missed: LLMRequest = exc.args[0]
    calls = 2 * (1 + scfg.num_subtopics)
    reply = max_tokens_of(missed.params)
    prompt = estimate_prompt_tokens(list(missed.messages)) + 2 * reply
    for _ in range(calls - len(hits)):
        tally.cost(missed.model, prompt, reply)
    content = "x" * (3 * reply)  # ~reply tokens (estimate_prompt_tokens); one string for every planned prompt
    planned = (  # made as they are counted: memory does not grow with num_subtopics x prompts_per_subtopic
        Example(
            id=f"{scfg.dataset_name}/planned-{i}",
            dataset=scfg.dataset_name,
            source=f"synthesize:planned:{i}",
            messages=({"role": "user", "content": content},),
        )
        for i in range(scfg.num_subtopics * scfg.prompts_per_subtopic)
    )
    return planned, {"synthesis_calls": calls, "synthesis_cached": len(hits)}
