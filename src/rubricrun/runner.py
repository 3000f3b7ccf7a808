"""One run: lock the run folder, run the stages (pipeline.py), score, write every artifact.

The runner only conducts: each step is one call into the wing that owns it. Artifacts are written at
the end of the run and also when it stops early (Ctrl+C, budget): every call already paid for is in
the cache, so a rerun of the same run id picks up where this one stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from . import pipeline
from .config import Config, config_to_dict
from .errors import RubricrunError
from .plan import Prepared, preflight
from .providers.batch import open_batcher
from .providers.budget import Budget
from .providers.cache import ResponseCache
from .providers.pricing import price_table
from .providers.stack import build_stack, open_cache
from .providers.trace import Tracer
from .results import artifacts
from .results.costs import cost_report
from .results.hub import hub_card
from .results.summary import log_summary
from .results.tally import Tally
from .types import (
    BudgetSummary,
    Calls,
    CostSummary,
    Example,
    Judgment,
    PairJudgment,
    Response,
    Summary,
    from_row,
    summary_row,
)

log = logging.getLogger("rubricrun")


@dataclass
class Outcome:
    exit_code: int
    run_dir: Path
    summary: Summary


@dataclass(frozen=True)
class Extras:
    """What the CLI adds on top of the config: export formats and a Hub push."""

    export_formats: tuple[str, ...] = ()
    push_to_hub: str | None = None
    dry_run: bool = False
    private: bool = False  # the Hub dataset repo is created private


@dataclass
class _Run:
    """One run's state as the stages fill it in."""

    cfg: Config
    run_id: str
    run_dir: Path
    stop: threading.Event
    tracer: Tracer
    cache: ResponseCache | None
    t0: float = field(default_factory=time.monotonic)
    examples: list[Example] = field(default_factory=list)
    responses: list[Response] = field(default_factory=list)
    judgments: list[Judgment] = field(default_factory=list)
    pairs: list[PairJudgment] = field(default_factory=list)
    tasks: int = 0
    interrupted: bool = False
    synthesis: list[Any] = field(default_factory=list)


def execute(
    cfg: Config,
    run_id: str,
    *,
    max_examples: int | None = None,
    extras: Extras = Extras(),
    prepared: Prepared | None = None,
) -> Outcome:
    prepared = prepared or preflight(cfg, max_examples)
    run_dir = Path(cfg.run.output_dir) / run_id
    lock = artifacts.RunLock(run_dir)
    lock.acquire()
    stop = threading.Event()
    tracer = Tracer(run_dir / "trace.jsonl", invocation=f"{int(time.time())}", on_error=lambda _: stop.set())
    cache = open_cache(cfg)
    try:
        return _execute(_Run(cfg, run_id, run_dir, stop, tracer, cache), prepared, extras)
    finally:
        tracer.close()
        if cache:
            cache.close()
        lock.release()


def _execute(run: _Run, prepared: Prepared, extras: Extras) -> Outcome:
    cfg = run.cfg
    for s in prepared.skipped:
        log.warning("skipped bad row: %s", s)
    artifacts.write_text(run.run_dir / "config.yaml", yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
    batcher = open_batcher(cfg, run.run_dir / "batches.json", artifacts.write_json, run.tracer)
    stack, budget = build_stack(cfg, run.tracer, run.stop, run.cache, batcher)
    while True:  # one pass without batch entries; with them, passes until no call waits for a batch job
        _run_stages(run, prepared, stack)
        if batcher is None or run.interrupted or run.stop.is_set() or run.tracer.error is not None:
            break
        settled = batcher.settle()
        run.interrupted = settled == "interrupted"
        if settled != "again":
            break
    if run.tracer.error is not None:
        raise RubricrunError(
            f"{run.run_dir / 'trace.jsonl'}: cannot write ({run.tracer.error.strerror or run.tracer.error}); the run "
            f"stopped. Every call answered so far is in the cache: free space and rerun with --run-id {run.run_id}"
        )
    summary = _write_results(run, budget, prepared, extras)
    return _outcome(run, budget, summary)


def _run_stages(run: _Run, prepared: Prepared, stack: Any) -> None:
    """Synthesis (if configured), generation, judging: each stage's rows land on `run`."""
    cfg = run.cfg
    run.examples = list(prepared.examples)
    if cfg.synthesize is not None:
        synthesized, run.synthesis, run.interrupted = pipeline.synthesize(cfg, stack, stop=run.stop)
        run.examples += synthesized
    artifacts.write_jsonl(run.run_dir / "examples.jsonl", run.examples)
    if run.interrupted:  # Ctrl+C during synthesis: write what was synthesized, generate nothing
        return
    log.info(
        "run %s: %d examples, %d candidates, %d judges",
        run.run_id,
        len(run.examples),
        len(cfg.candidates),
        len(cfg.judge_pool),
    )
    run.responses, run.interrupted, run.tasks = pipeline.converse(cfg, stack, run.examples, stop=run.stop)
    if not run.interrupted:
        by_id = {ex.id: ex for ex in run.examples}
        run.judgments, run.interrupted = pipeline.judge(cfg, stack, by_id, run.responses, stop=run.stop)
        if not run.interrupted:
            run.pairs, run.interrupted = pipeline.judge_pairs(cfg, stack, by_id, run.responses, stop=run.stop)


def _tally(run: _Run) -> Tally:
    """The run's rows, example by example in input order."""
    tally = Tally(run.cfg, run.run_id)
    responses: dict[str, list[Response]] = {}
    judgments: dict[str, list[Judgment]] = {}
    pairs: dict[str, list[PairJudgment]] = {}
    for r in run.responses:
        responses.setdefault(r.example_id, []).append(r)
    for j in run.judgments:
        judgments.setdefault(j.example_id, []).append(j)
    for p in run.pairs:
        pairs.setdefault(p.example_id, []).append(p)
    for ex in run.examples:
        tally.add(ex, responses.get(ex.id, []), judgments.get(ex.id, []), pairs.get(ex.id, []))
    return tally


def _write_results(run: _Run, budget: Budget, prepared: Prepared, extras: Extras) -> Summary:
    """Scores, summary.json, the row artifacts, export, report.html and the Hub push."""
    cfg, run_dir = run.cfg, run.run_dir
    tally = _tally(run)
    summary = _with_facts(tally.summary(), run, tally, budget, prepared)
    formats = list(dict.fromkeys([*(cfg.export.formats if cfg.export else []), *extras.export_formats]))
    if formats and not run.interrupted:
        summary = replace(summary, export=tally.export(run_dir, formats))
    artifacts.write_jsonl(run_dir / "responses.jsonl", run.responses)
    artifacts.write_jsonl(run_dir / "judgments.jsonl", [*run.judgments, *run.pairs])  # pairwise rows last
    artifacts.write_json(run_dir / "summary.json", summary_row(summary))
    tally.report(run_dir, summary)
    if extras.push_to_hub and not run.interrupted:
        from .results.hub import push_to_hub

        card = hub_card(cfg, summary_row(summary))
        paths = push_to_hub(run_dir, extras.push_to_hub, private=extras.private, dry_run=extras.dry_run, card=card)
        verb = "would upload" if extras.dry_run else "uploaded"
        log.info("hub %s: %s %s", extras.push_to_hub, verb, ", ".join(paths))
    log_summary(summary)
    return summary


def _with_facts(summary: Summary, run: _Run, tally: Tally, budget: Budget, prepared: Prepared) -> Summary:
    """The run's facts beside what the rows say: status, this invocation's calls, costs and budget."""
    counts = run.tracer.counts
    return replace(
        summary,
        status="interrupted" if run.interrupted else "stopped_on_budget" if budget.stopped else "complete",
        calls=Calls(made=counts["calls"], cache_hits=counts["cache_hits"], errors=counts["errors"]),
        responses_not_done=run.tasks - tally.n_responses,
        skipped_rows=len(prepared.skipped),
        wall_s=round(time.monotonic() - run.t0, 2),
        costs=from_row(
            CostSummary, cost_report(run.tracer.by_model, price_table(run.cfg), budget.provider_usd), strict=True
        ),
        budget=BudgetSummary(run.cfg.run.budget_usd, round(budget.spent, 6), budget.stopped),
        synthesis=tuple(run.synthesis) if run.cfg.synthesize is not None else None,  # also when Ctrl+C stopped it
    )


def _outcome(run: _Run, budget: Budget, summary: Summary) -> Outcome:
    """The exit code: 130 interrupted, 3 stopped on budget, 1 every candidate call failed, else 0."""
    cfg, run_id = run.cfg, run.run_id
    if run.interrupted:
        log.warning("interrupted: artifacts written for what was done; rerun with --run-id %s to resume", run_id)
        return Outcome(130, run.run_dir, summary)
    if budget.stopped:
        log.warning(
            "stopped on budget: $%.4f spent of $%g; %d responses not generated. Raise run.budget_usd and rerun "
            "with --run-id %s to continue from the cache",
            budget.spent,
            cfg.run.budget_usd,
            run.tasks - len(run.responses),
            run_id,
        )
        return Outcome(3, run.run_dir, summary)
    if run.tasks and not any(r.status == "ok" for r in run.responses):
        first = next((r.error for r in run.responses if r.error), "no response")
        log.error("every candidate call failed (first error: %s); artifacts written", first)
        return Outcome(1, run.run_dir, summary)
    return Outcome(0, run.run_dir, summary)
