"""What a run will do, known before any call: preflight checks, call counts and the cost bound.

`preflight` is every check that needs no model call; the run and `--validate` both go through it, so
bad input is found the same way by both. `count_calls` is what `--validate` prints.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .config import Config, generation_only
from .data.answers_file import load_replays
from .data.idset import IdHashes
from .data.loaders import iter_dataset
from .data.readers import source_label
from .data.spool import ExampleSpool
from .errors import InputError
from .judging.pairwise import PairJudging, pair_items
from .judging.rubric import Judging
from .pipeline import generation_tasks, next_turn_tasks, response_row, synthesis_entry, synthesis_request
from .providers.base import BaseProvider
from .providers.cache import ResponseCache, cache_key
from .providers.pricing import call_cost, estimate_prompt_tokens, max_tokens_of, price_table, unit_prices, upper_bound
from .providers.stack import open_cache
from .tasks import registry
from .types import Example, LLMRequest, LLMResponse, Response


class Examples:
    """The run's examples in input order, read from the dataset files again each time they are iterated, so that
    none is held between uses (issue 13: memory does not grow with the dataset), or from the spool preflight kept
    of them (data/spool.py). `len()` is the count preflight's validating pass found; iterating repeats none of its
    checks."""

    def __init__(self, cfg: Config, max_examples: int | None, count: int, spool: ExampleSpool | None = None) -> None:
        self.cfg, self.max_examples, self.count, self.spool = cfg, max_examples, count, spool

    def __iter__(self) -> Iterator[Example]:
        if self.spool is not None and self.spool.ok:
            yield from self.spool
            return
        for _, _, examples in _datasets(self.cfg, self.max_examples, [], check_ids=False):
            yield from examples

    def __len__(self) -> int:
        return self.count


@dataclass(frozen=True)
class Prepared:
    """What preflight found: everything a run needs that can be checked without calling a model."""

    examples: Examples
    skipped: list[str]
    # dataset -> metric -> examples calling for it (tasks/registry.metric_of), counted in the validating pass;
    # None when the run also synthesizes examples preflight cannot see. Lets the tally summarize as the run goes.
    metric_counts: dict[str, Counter[str]] | None = None


def _datasets(
    cfg: Config,
    max_examples: int | None,
    skipped: list[str],
    *,
    check_ids: bool = True,
    elsewhere: list[Example] | None = None,
) -> Iterator[tuple[int, Any, Iterator[Example]]]:
    """(index, dataset config, its examples) for every dataset; a problem with a dataset entry names its config key.
    Ids are checked across datasets with one set of hashes: a hit not in the example's own dataset goes to
    `elsewhere` (see iter_dataset)."""
    cap = max_examples if max_examples is not None else cfg.run.max_examples
    keep = sorted({c.response_column for c in cfg.candidates if c.response_column})
    seen = IdHashes()
    for i, d in enumerate(cfg.datasets):
        label = source_label(d)
        rows = iter_dataset(
            d,
            schemas=registry.TASKS,
            on_bad_row=cfg.run.on_bad_row,
            max_examples=cap,
            keep=keep,
            skipped=skipped,
            check_ids=check_ids,
            seen=seen,
            elsewhere=elsewhere,
        )
        yield i, d, _config_errors(cfg, i, label, rows)


def _config_errors(cfg: Config, i: int, label: str, rows: Iterator[Example]) -> Iterator[Example]:
    try:
        yield from rows
    except InputError as exc:
        if exc.line is None and exc.file == label:  # about the config entry, not a row: point at it
            d = cfg.datasets[i]
            where = f"{label}: key '{exc.key}'" if exc.key else label
            reason = str(exc)[len(where) + 2 :]
            key = f"datasets[{i}].{exc.key}" if exc.key else f"datasets[{i}].{'hf' if d.hf else 'path'}"
            raise cfg.fail(key, f"{label}: {reason}") from None
        raise


def validate_examples(
    cfg: Config,
    max_examples: int | None,
    visit: Callable[[Example], None] | None = None,
    metrics: dict[str, Counter[str]] | None = None,
) -> tuple[int, list[str]]:
    """One pass over every dataset's examples (each capped at max_examples) that keeps none of them: bad rows,
    duplicate ids across datasets (a set of id hashes; a hit is confirmed by reading again), datasets nothing can
    score. `visit` sees each example as it is read (--validate counts its calls in the same pass); `metrics` gets
    each dataset's count of examples per detected metric. Returns the count and the skipped rows' messages."""
    skipped: list[str] = []
    elsewhere: list[Example] = []  # examples whose id hash was seen in an earlier dataset
    count = 0
    for i, _, examples in _datasets(cfg, max_examples, skipped, elsewhere=elsewhere):
        scorable = Scorable(cfg)
        for ex in examples:
            scorable.add(ex)
            while elsewhere:
                if (first := _first_source(cfg, max_examples, other := elsewhere.pop(), i)) is not None:
                    raise InputError(f"example id '{other.id}' also at {first}", file=other.source, key="id")
            registry.check_example(cfg, ex)
            count += 1
            if metrics is not None:
                metrics.setdefault(ex.dataset, Counter())[registry.metric_of(ex)] += 1
            if visit is not None:
                visit(ex)
        scorable.check(i)
    return count, skipped


def _first_source(cfg: Config, max_examples: int | None, ex: Example, upto: int) -> str | None:
    """The source of an earlier dataset's example with ex's id (None: a hash collision, no such example)."""
    for i, _, examples in _datasets(cfg, max_examples, [], check_ids=False):
        if i >= upto:
            return None
        for other in examples:
            if other.id == ex.id:
                return other.source
    return None


def load_examples(cfg: Config, max_examples: int | None) -> tuple[list[Example], list[str]]:
    """All datasets' examples (each dataset capped at max_examples) in a list, and the skipped bad rows."""
    count, skipped = validate_examples(cfg, max_examples)
    return list(Examples(cfg, max_examples, count)), skipped


def model_entries(cfg: Config) -> list[tuple[str, Any]]:
    """(config key, entry) for every candidate and judge, keyed as the config spells them."""
    out: list[tuple[str, Any]] = [(f"candidates[{i}]", m) for i, m in enumerate(cfg.candidates)]
    out += [(f"judges[{i}]", m) for i, m in enumerate(cfg.judges)]
    if cfg.judge is not None:
        out.append(("judge", cfg.judge))
    return out


class Scorable:
    """check_scorable over a stream: a dataset none of whose examples can get a score is refused before any call
    is paid for, when the config has judges: every candidate call would be spent on responses nothing judges (e.g.
    MT-Bench rows without `judging.default_rubric`). A config without judges asked for no judging: it passes."""

    def __init__(self, cfg: Config) -> None:
        self.cfg, self.n, self.any_scorable = cfg, 0, False

    def add(self, ex: Example) -> None:
        self.n += 1
        if not self.any_scorable:
            self.any_scorable = _scorable(self.cfg, ex)

    def check(self, i: int) -> None:
        cfg = self.cfg
        if not self.n or generation_only(cfg) or self.any_scorable:
            return
        raise cfg.fail(
            f"datasets[{i}]",
            f"{source_label(cfg.datasets[i])}: nothing can score its {self.n} examples: no rubric in the rows, no "
            "judging.default_rubric and no answer to match (add judging.default_rubric, or a rubric or answer to the "
            "rows; or remove judges: to only collect responses)",
        )


def _scorable(cfg: Config, ex: Example) -> bool:
    """Judged on a rubric (its own or the default one) by a judge, or matched without one (MC, QA answers), or
    compared head to head (judging.pairwise, which config.py allows only with a judge)."""
    if cfg.judging.pairwise is not None:
        return True
    if ex.rubric or ex.kind == "open":
        return bool(registry.rubric_for(ex, cfg)) and bool(cfg.judge_pool)
    return ex.answer is not None


def check_keys(cfg: Config) -> None:
    """Every api_key_env named in the config is set: detected before any call is paid for."""
    for key, m in model_entries(cfg):
        envs = [(f"{key}.api_key_env", m.api_key_env)] + [(f"{key}.api_key_env", w.api_key_env) for w in m.models]
        envs += [(f"{key}.deployments[{j}].api_key_env", d.api_key_env) for j, d in enumerate(m.deployments)]
        for k, env in envs:
            if env and not os.environ.get(env):
                raise cfg.fail(k, f"environment variable {env} is not set (model '{m.name}')")


def check_prices(cfg: Config) -> None:
    """With run.budget_usd set, every model has a price (its `price:` or LiteLLM's map): an unpriced model would
    count as $0 and the budget would never stop it."""
    if cfg.run.budget_usd is None:
        return
    prices = price_table(cfg)
    for key, m in model_entries(cfg):
        models = [(f"{key}.model", m.model), (f"{key}.deployments", m.routed)]
        models += [(f"{key}.models[{j}].model", w.model) for j, w in enumerate(m.models)]
        for k, model in models:
            if model and unit_prices(model, prices.get(model)) is None:
                raise cfg.fail(
                    k,
                    f"model '{model}' has no known price, so run.budget_usd cannot bound it: give this entry "
                    "price: {input_per_mtok, output_per_mtok} (USD), or remove run.budget_usd",
                )


def preflight(
    cfg: Config, max_examples: int | None, visit: Callable[[Example], None] | None = None, *, spool: bool = False
) -> Prepared:
    """Every check that needs no model call, before the run folder is touched: API key variables, every
    dataset row, the judge template, the synthesis templates. Raises InputError. `visit`: see validate_examples.
    `spool`: keep the examples read for the run (data/spool.py), which then does not read the files again."""
    registry.check_config(cfg)
    check_keys(cfg)
    check_prices(cfg)
    metrics: dict[str, Counter[str]] = {}
    kept = ExampleSpool() if spool else None
    if kept is not None:
        visit = _and_keep(visit, kept)
    count, skipped = validate_examples(cfg, max_examples, visit, metrics)
    if kept is not None:
        kept.seal()
    load_replays(cfg, registry.ANSWER_READERS)  # a bad responses_from file is bad input, found before any call
    registry.judging_for(cfg, BaseProvider())
    if cfg.judging.pairwise is not None:
        PairJudging(cfg, BaseProvider())  # reads the pairwise template
    if cfg.synthesize is not None:
        from .data.synth import load_template

        synthesis_entry(cfg)
        load_template(cfg.synthesize.subtopic_template, "subtopics.j2")
        load_template(cfg.synthesize.prompt_template, "prompts.j2")
    metric_counts = None if cfg.synthesize is not None else metrics
    return Prepared(Examples(cfg, max_examples, count, kept), skipped, metric_counts)


def _and_keep(visit: Callable[[Example], None] | None, kept: ExampleSpool) -> Callable[[Example], None]:
    if visit is None:
        return kept.add

    def both(ex: Example) -> None:
        visit(ex)
        kept.add(ex)

    return both


@dataclass
class _Tally:
    """Running totals of `count_calls`."""

    cache: ResponseCache | None
    prices: dict[str, Any]
    candidate_calls: int = 0
    candidate_cached: int = 0
    judge_calls: int = 0
    judge_cached: int = 0
    pairwise_calls: int = 0
    pairwise_cached: int = 0
    bound: float = 0.0
    unpriced: set[str] = field(default_factory=set)
    online_prices: dict[str, Any] | None = None  # with batch entries: the prices they would pay online
    online_bound: float = 0.0

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> None:
        c = call_cost(model, prompt_tokens, completion_tokens, self.prices)
        if c is None:
            self.unpriced.add(model)
        self.bound += c or 0.0
        if self.online_prices is not None:
            self.online_bound += call_cost(model, prompt_tokens, completion_tokens, self.online_prices) or 0.0


def count_calls(cfg: Config, max_examples: int | None) -> dict[str, Any]:
    """--validate: how many calls the run would make (synthesis, candidates, judges), how many are already cached,
    and an upper bound on the cost of the rest (every reply at its max_tokens). Calls nothing."""
    counter = _Counter(cfg)
    try:
        # the same checks a run makes before its first call, in the same pass that counts the examples' calls
        prepared = preflight(cfg, max_examples, visit=counter.add)
        tally = counter.start()
        synthesized, synthesis = _count_synthesis(cfg, tally)
        for ex in synthesized:
            counter.add(ex)
        counter.flush()
        n = counter.n
    finally:
        counter.close()
    return {
        "examples": n,
        "skipped_rows": len(prepared.skipped),
        **synthesis,
        "candidate_calls": tally.candidate_calls,
        "candidate_cached": tally.candidate_cached,
        "judge_calls": tally.judge_calls,
        "judge_cached": tally.judge_cached,
        **(
            {"pairwise_calls": tally.pairwise_calls, "pairwise_cached": tally.pairwise_cached}
            if cfg.judging.pairwise
            else {}
        ),
        "cost_upper_bound_usd": round(tally.bound, 4),
        **(
            {"cost_upper_bound_online_usd": round(tally.online_bound, 4), "batch_prices": batch_prices(cfg)}
            if tally.online_prices is not None
            else {}
        ),
        "unpriced_models": sorted(tally.unpriced),
    }


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


class _Counter:
    """count_calls' running totals over examples fed one at a time, counted COUNT_CHUNK at a time. The cache, the
    judge requests and the replays are opened with the first full chunk (or at `start`), so a small dataset's bad
    row is still reported before a bad template, as the run reports it."""

    def __init__(self, cfg: Config) -> None:
        self.cfg, self.n, self.chunk = cfg, 0, []  # type: ignore[var-annotated]
        self.tally: _Tally | None = None
        self.judging: Judging | None = None
        self.replays: Any = None

    def start(self) -> _Tally:
        if self.tally is None:
            self.judging = registry.judging_for(
                self.cfg, BaseProvider()
            )  # builds the judge requests whose keys are looked up
            self.replays = load_replays(self.cfg, registry.ANSWER_READERS)
            batched = any(m.batch for m in [*self.cfg.candidates, *self.cfg.judge_pool])
            online = price_table(self.cfg, batch=False) if batched else None
            self.tally = _Tally(open_cache(self.cfg), price_table(self.cfg), online_prices=online)
        return self.tally

    def add(self, ex: Example) -> None:
        self.chunk.append(ex)
        if len(self.chunk) >= COUNT_CHUNK:
            self.flush()

    def flush(self) -> None:
        tally = self.start()
        if self.chunk:
            assert self.judging is not None
            _count_examples(self.cfg, self.judging, self.chunk, self.replays, tally)
            self.n += len(self.chunk)
            self.chunk = []

    def close(self) -> None:
        if self.tally is not None and self.tally.cache is not None:
            self.tally.cache.close()


def _count_examples(cfg: Config, judging: Judging, examples: list[Example], replays: Any, tally: _Tally) -> None:
    """The calls of these examples' conversations, turn by turn as the run asks them, their judges and pairs."""
    by_id = {ex.id: ex for ex in examples}
    tasks = generation_tasks(cfg, examples, replays)
    answered: list[tuple[Response | None, int | None]] = []
    while tasks:
        read = [_reply_read(cfg, by_id, t) for t in tasks]
        fresh = _fresh_unread(tasks, read, tally.cache)
        done = {
            t.response_id: _count_task(cfg, judging, by_id, t, r, tally, fresh)
            for t, r in zip(tasks, read, strict=True)
        }
        answered += done.values()
        tally.candidate_calls += sum(1 for t in tasks if not t.candidate.replays)
        # the next turn carries each answer: one not generated yet counts as max_tokens (~3 characters a token)
        carried = {
            rid: dataclasses.replace(r, text="x" * (3 * n)) if n else r for rid, (r, n) in done.items() if r is not None
        }
        tasks = next_turn_tasks(cfg, tasks, carried, replays, by_id)
    _count_pairs(cfg, by_id, answered, tally)


class _NotCached(Exception):
    """A synthesis call that --validate cannot replay from the cache (not a ProviderError: it ends the replay)."""


class _CacheReplay(BaseProvider):
    """Answers from the cache only, counting hits and keeping the first request it could not answer."""

    def __init__(self, cache: ResponseCache | None):
        self.cache, self.hits = cache, 0
        self.missed: LLMRequest | None = None

    def generate(self, request: LLMRequest) -> LLMResponse:
        hit = self.cache.get(cache_key(request)) if self.cache else None
        if hit is None:
            self.missed = request
            raise _NotCached
        self.hits += 1
        return hit


def _count_synthesis(cfg: Config, tally: _Tally) -> tuple[list[Example], dict[str, int]]:
    """The synthesis calls and the examples they give. When every call is cached the synthesis is replayed and
    both are exact. Otherwise they are bounds: each step (subtopics, then prompts per subtopic) asks once and
    retries at most once; a call's prompt holds the template plus at most two replies (the subtopic and the
    exclusions), so at most its rendered length + 2 x max_tokens; and the run gets num_subtopics x
    prompts_per_subtopic prompts, each at most one reply (max_tokens) long."""
    scfg = cfg.synthesize
    if scfg is None:
        return [], {}
    from .data.synth import synthesize

    replay = _CacheReplay(tally.cache)
    try:
        examples, _ = synthesize(scfg, lambda m, a: replay.generate(synthesis_request(cfg, m, a)), log=lambda _: None)
        return examples, {"synthesis_calls": replay.hits, "synthesis_cached": replay.hits}
    except _NotCached:
        pass
    missed = replay.missed
    assert missed is not None
    calls = 2 * (1 + scfg.num_subtopics)
    reply = max_tokens_of(missed.params)
    prompt = estimate_prompt_tokens(list(missed.messages)) + 2 * reply
    for _ in range(calls - replay.hits):
        tally.cost(missed.model, prompt, reply)
    planned = [
        Example(
            id=f"{scfg.dataset_name}/planned-{i}",
            dataset=scfg.dataset_name,
            source=f"synthesize:planned:{i}",
            messages=({"role": "user", "content": "x" * (3 * reply)},),  # ~reply tokens (estimate_prompt_tokens)
        )
        for i in range(scfg.num_subtopics * scfg.prompts_per_subtopic)
    ]
    return planned, {"synthesis_calls": calls, "synthesis_cached": replay.hits}


def _fresh_unread(tasks: list[Any], read: list[bool], cache: ResponseCache | None) -> set[str]:
    """The cached keys of the tasks whose reply nothing reads (whether it is cached is all _count_task needs)."""
    if cache is None:
        return set()
    return cache.fresh_many(
        [cache_key(t.request) for t, r in zip(tasks, read, strict=True) if t.replay is None and not r]
    )


def _count_task(
    cfg: Config, judging: Judging, by_id: dict[str, Example], t: Any, read: bool, tally: _Tally, fresh: set[str]
) -> tuple[Response | None, int | None]:
    """One generation task (one turn) and the judge calls its response would get; returns its response (empty text
    when it is not cached; None when nothing reads it) and, when it is not cached, its max_tokens.
    An uncached judge call is priced on the judge prompt rendered around an empty answer plus the answer's tokens
    (its max_tokens when it is not generated yet). A replayed candidate makes no call; its judge calls are counted
    on its replayed answer. `fresh`: the cached keys of the tasks whose reply nothing reads (_fresh_unread)."""
    cache = tally.cache
    if t.replay is not None:
        text, error = t.replay
        resp = response_row(t, "", LLMResponse(text=text) if text is not None else None, error)
        _count_judging(cfg, judging, by_id, t.example, resp, True, 0, tally)
        return resp, None
    if not read:  # nothing reads the reply (_reply_read): whether it is cached is all there is to count
        cached = cache_key(t.request) in fresh
        _count_candidate(t, cached, tally)
        return None, None if cached else max_tokens_of(t.request.params)
    hit = cache.get(cache_key(t.request)) if cache else None
    _count_candidate(t, hit is not None, tally)
    resp = response_row(t, "", hit or LLMResponse(text=""), None)
    _count_judging(
        cfg, judging, by_id, t.example, resp, hit is not None, 0 if hit else max_tokens_of(t.request.params), tally
    )
    return resp, None if hit else max_tokens_of(t.request.params)


def _reply_read(cfg: Config, by_id: dict[str, Example], t: Any) -> bool:
    """Whether counting needs the task's reply: judges read it, pairwise judging compares it, a next turn
    carries it."""
    return bool(cfg.judge_pool) or cfg.judging.pairwise is not None or t.turn < by_id[t.example.id].turns


def _count_candidate(t: Any, cached: bool, tally: _Tally) -> None:
    if not cached:
        tally.bound += upper_bound(t.request, tally.prices)
        if tally.online_prices is not None:
            tally.online_bound += upper_bound(t.request, tally.online_prices)
        if unit_prices(t.request.model, tally.prices.get(t.request.model)) is None:
            tally.unpriced.add(t.request.model)
    else:
        tally.candidate_cached += 1


def _count_judging(
    cfg: Config,
    judging: Judging,
    by_id: dict[str, Example],
    view: Example,
    resp: Response,
    known: bool,
    answer_tokens: int,
    tally: _Tally,
) -> None:
    cache = tally.cache
    views = {resp.id: view}  # the conversation up to this turn, as the task asked it
    for item in registry.judge_items(cfg, by_id, [resp], views):
        for ji in item.judges:
            tally.judge_calls += 1
            req = judging.request(cfg.judge_pool[ji], item, 0)
            if known and cache is not None and cache_key(req) in cache:
                tally.judge_cached += 1
                continue
            tally.cost(req.model, estimate_prompt_tokens(list(req.messages)) + answer_tokens, max_tokens_of(req.params))


def _count_pairs(
    cfg: Config, by_id: dict[str, Example], answered: list[tuple[Response | None, int | None]], tally: _Tally
) -> None:
    """judging.pairwise: two calls (both orders) per comparison. A call is cached only when both answers are (its
    prompt holds them); an uncached one is priced with each answer not yet generated at its max_tokens."""
    if cfg.judging.pairwise is None:
        return
    pj = PairJudging(cfg, BaseProvider())
    pending = {r.id: tokens for r, tokens in answered if r is not None}  # with pairwise judging, every reply is read
    for item in pair_items(cfg, by_id, [r for r, _ in answered if r is not None]):
        missing = [pending[item.a.id], pending[item.b.id]]
        for order in (0, 1):
            tally.pairwise_calls += 1
            req = pj.request(cfg.judge_pool[item.judge], item, order, 0)
            if missing == [None, None] and tally.cache is not None and cache_key(req) in tally.cache:
                tally.pairwise_cached += 1
                continue
            prompt = estimate_prompt_tokens(list(req.messages)) + sum(m or 0 for m in missing)
            tally.cost(req.model, prompt, max_tokens_of(req.params))
