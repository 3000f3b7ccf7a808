"""Every check that needs data and no model call, and the examples it reads: `preflight`, which the run and
`--validate` (engine/estimate.py) both go through, so bad input is found the same way by both."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..config import Config, generation_only
from ..data.answers_file import load_replays
from ..data.loaders import IdHashes, first_seen, iter_dataset
from ..data.readers import source_label
from ..data.spool import Spool
from ..errors import InputError
from ..judging.pairwise import PairJudging
from ..providers.base import BaseProvider
from ..providers.pricing import price_table, unit_prices
from ..providers.routing import declared
from ..results.anchor import check_labels
from ..tasks import registry
from ..types import Example


class Examples:
    """The run's examples in input order, from the spool preflight kept of them (data/spool.py) or read from the
    dataset files again each time (none held between uses: issue 13), without a check repeated; `len()`: their count."""

    def __init__(self, cfg: Config, max_examples: int | None, count: int, spool: Spool | None = None) -> None:
        self.cfg, self.max_examples, self.count, self.spool = cfg, max_examples, count, spool

    def __iter__(self) -> Iterator[Example]:
        if self.spool is not None and self.spool.ok:
            return iter(self.spool)
        return itertools.chain.from_iterable(_datasets(self.cfg, self.max_examples, [], check_ids=False))

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
    large: bool = False  # large_run


def _datasets(
    cfg: Config,
    max_examples: int | None,
    skipped: list[str],
    *,
    check_ids: bool = True,
    elsewhere: list[Example] | None = None,
) -> Iterator[Iterator[Example]]:
    """Every dataset's examples; a problem with a dataset entry names its config key. Ids are checked across
    datasets with one set of hashes: a hit not in the example's own dataset goes to `elsewhere` (see iter_dataset)."""
    cap = max_examples if max_examples is not None else cfg.run.max_examples
    keep = sorted({c.response_column for c in cfg.candidates if c.response_column})
    seen = IdHashes()
    for i, d in enumerate(cfg.datasets):
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
        yield _config_errors(cfg, i, source_label(d), rows)


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
    for i, examples in enumerate(_datasets(cfg, max_examples, skipped, elsewhere=elsewhere)):
        start, scorable = count, False
        for ex in examples:
            scorable = scorable or _scorable(cfg, ex)
            while elsewhere:
                if (first := _first_source(cfg, max_examples, other := elsewhere.pop(), i)) is not None:
                    raise InputError(f"example id '{other.id}' also at {first}", file=other.source, key="id")
            registry.check_example(cfg, ex)
            count += 1
            if metrics is not None:
                metrics.setdefault(ex.dataset, Counter())[registry.metric_of(ex)] += 1
            if visit is not None:
                visit(ex)
        _check_scorable(cfg, i, count - start, scorable)
    return count, skipped


def _first_source(cfg: Config, max_examples: int | None, ex: Example, upto: int) -> str | None:
    """The source of an earlier dataset's example with ex's id (None: a hash collision, no such example)."""
    for examples in itertools.islice(_datasets(cfg, max_examples, [], check_ids=False), upto):
        if (source := first_seen(examples, ex.id)) is not None:
            return source
    return None


def _check_scorable(cfg: Config, i: int, n: int, any_scorable: bool) -> None:
    """A dataset none of whose `n` examples can get a score is refused before any call is paid for, when the config
    has judges: every candidate call would be spent on responses nothing judges (e.g. MT-Bench rows without
    `judging.default_rubric`). A config without judges asked for no judging: it passes."""
    if not n or generation_only(cfg) or any_scorable:
        return
    raise cfg.fail(
        f"datasets[{i}]",
        f"{source_label(cfg.datasets[i])}: nothing can score its {n} examples: no rubric in the rows, no "
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
    for where, m, _, _, env, _ in declared(cfg.entries()):
        if env and not os.environ.get(env):
            raise cfg.fail(f"{where}.api_key_env", f"environment variable {env} is not set (model '{m.name}')")


def check_prices(cfg: Config) -> None:
    """With run.budget_usd set, every model has a price (its `price:` or LiteLLM's map): an unpriced model would
    count as $0 and the budget would never stop it."""
    if cfg.run.budget_usd is None:
        return
    prices = price_table(cfg)
    for key, m in cfg.entries():
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
    `spool`: keep the examples read for the run (data/spool.py), which then does not read the files again (the run
    spools, --validate visits: never both)."""
    registry.check_config(cfg)
    check_keys(cfg)
    check_prices(cfg)
    metrics: dict[str, Counter[str]] = {}
    kept = Spool("rubricrun-examples-", Example) if spool else None
    if kept is not None:
        assert visit is None
        visit = kept.add
    count, skipped = validate_examples(cfg, max_examples, visit, metrics)
    if kept is not None:
        kept.seal()
    check_labels(cfg, metrics)
    load_replays(cfg, registry.ANSWER_READERS)  # a bad responses_from file is bad input, found before any call
    registry.judging_for(cfg, BaseProvider())
    if cfg.judging.pairwise is not None:
        PairJudging(cfg, BaseProvider())  # reads the pairwise template
    if cfg.synthesize is not None:
        from ..data.synth import load_template

        load_template(cfg.synthesize.subtopic_template, "subtopics.j2")
        load_template(cfg.synthesize.prompt_template, "prompts.j2")
    metric_counts = None if cfg.synthesize is not None else metrics
    return Prepared(Examples(cfg, max_examples, count, kept), skipped, metric_counts, large_run(cfg, max_examples))


# A large run: from these sizes on a second process pays for its start (0.3-0.5 s of the other core).
LARGE_BYTES = 4 << 20  # of local dataset files: about 20,000 short rows
LARGE_EXAMPLES = 20_000  # a cap on each dataset below it (--max-examples, run.max_examples) makes a run small


def large_run(cfg: Config, max_examples: int | None) -> bool:
    """A large run, for which a second process pays for its start (engine/second_process.py: the tally, --validate's
    count), by one rule known before the data is read: the local dataset files hold LARGE_BYTES or more, and no cap
    holds each dataset below LARGE_EXAMPLES. (A Hub dataset's size is not known before it is read: it counts as 0.)"""
    cap = max_examples if max_examples is not None else cfg.run.max_examples
    if cap is not None and cap < LARGE_EXAMPLES:
        return False
    size = 0
    for d in cfg.datasets:
        if d.path and not d.hf:
            with contextlib.suppress(OSError):  # (a file that is not there: preflight names it)
                size += os.path.getsize(d.path)
    return size >= LARGE_BYTES
