"""One run: lock the run folder, run the stages (graph.py over engine/calls.py), score, write every artifact.

The runner only conducts: each step is one call into the wing that owns it. examples.jsonl, responses.jsonl and
judgments.jsonl are appended as examples finish, in input order (kill -9 leaves the finished rows); summary.json,
the export and report.html are written at the end and also when the run stops early (Ctrl+C, budget). Every call
already paid for is in the cache, so a rerun of the same run id starts the files afresh and pays for nothing twice.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from msgspec.structs import replace

from ..config import Config, generation_only
from ..errors import RubricrunError
from ..providers import redact
from ..providers.batch import Batcher, batch_entries
from ..providers.cache import ResponseCache
from ..providers.executor import Executor, describe, open_executor
from ..providers.pricing import Budget, price_table
from ..providers.stack import build_stack, open_cache
from ..providers.trace import Tracer
from ..results import artifacts
from ..results.hub import hub_card
from ..results.summary import cost_report, log_summary
from ..results.summary_types import BudgetSummary, Calls, ExecutorSummary, Summary, summary_data
from ..results.tally import RunTally, Tally
from .graph import Graph
from .preflight import Prepared, preflight
from .second_process import open_tally
from .stop import stop_exit_code, stopped_by

log = logging.getLogger("rubricrun")
GENERATION_ONLY = "generation only: nothing judged"  # a config without judges (issue 23)


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
    executor: Executor
    t0: float = field(default_factory=time.monotonic)
    tasks: int = 0
    interrupted: bool = False
    synthesis: list[Any] = field(default_factory=list)
    formats: tuple[str, ...] = ()  # the export formats: the config's, then the CLI's


def execute(
    cfg: Config,
    run_id: str,
    *,
    max_examples: int | None = None,
    extras: Extras = Extras(),
    prepared: Prepared | None = None,
    executor: Executor | None = None,
) -> Outcome:
    """`executor`: who makes the attempts (default: the config's, opened here and closed at the end; one given is
    the caller's to close)."""
    redact.use(redact.secrets_of(cfg))  # as the CLI does: no artifact holds what the run can send
    prepared = prepared or preflight(cfg, max_examples, spool=True)
    run_dir = Path(cfg.run.output_dir) / run_id
    lock = artifacts.RunLock(run_dir)
    lock.acquire()
    with contextlib.ExitStack() as closing:  # closed last first: the executor, the tracer, the cache, the lock
        closing.callback(lock.release)
        own = None if executor is not None else open_executor(cfg)  # a cluster that cannot be reached: bad input
        stop = threading.Event()
        tracer = Tracer(run_dir / "trace.jsonl", invocation=f"{int(time.time())}", on_error=lambda _: stop.set())
        cache = open_cache(cfg)
        if cache:
            closing.callback(cache.close)
        closing.callback(tracer.close)
        if own is not None:
            closing.callback(own.close)  # threads still waiting on an attempt get Cancelled
            executor = own
        return _execute(_Run(cfg, run_id, run_dir, stop, tracer, cache, executor), prepared, extras)


def _execute(run: _Run, prepared: Prepared, extras: Extras) -> Outcome:
    cfg = run.cfg
    run.formats = tuple(dict.fromkeys([*(cfg.export.formats if cfg.export else []), *extras.export_formats]))
    for s in prepared.skipped:
        log.warning("skipped bad row: %s", s)
    artifacts.write_text(run.run_dir / "config.yaml", yaml.safe_dump(redact.redacted_config(cfg), sort_keys=False))
    batches = run.run_dir / "batches.json"  # the jobs' state, when an entry has `batch: true`
    batcher = Batcher(cfg, batches, artifacts.write_json, run.tracer) if batch_entries(cfg) else None
    stack, budget = build_stack(cfg, run.tracer, run.stop, run.cache, batcher, run.executor)
    tally: RunTally | None = None
    try:
        while True:  # one pass without batch entries; with them, passes until no call waits for a batch job
            if tally is not None:
                tally.close()
            tally = _run_stages(run, prepared, stack)  # each pass writes the row files afresh
            if batcher is None or run.interrupted or run.stop.is_set() or run.tracer.error is not None:
                break
            settled = batcher.settle()
            run.interrupted = settled == "interrupted"
            if settled != "again":
                break
        if run.tracer.error is not None:
            raise RubricrunError(
                f"{run.run_dir / 'trace.jsonl'}: cannot write ({run.tracer.error.strerror or run.tracer.error}); the "
                f"run stopped. Every call answered so far is in the cache: free space and rerun with --run-id "
                f"{run.run_id}"
            )
        summary = _write_results(run, tally, budget, prepared, extras)
        return _outcome(run, tally, budget, summary)
    finally:
        if tally is not None:
            tally.close()


def _run_stages(run: _Run, prepared: Prepared, stack: Any) -> RunTally:
    """Synthesis (if configured), generation, judging and comparisons, overlapped (graph.py); every finished
    example's rows are appended to the artifacts in input order and fed to the tally as the run goes."""
    cfg = run.cfg
    judges = f"; {GENERATION_ONLY}" if generation_only(cfg) else f", {len(cfg.judge_pool)} judges"
    log.info("run %s: %d candidates%s; attempts on %s", run.run_id, len(cfg.candidates), judges, describe(run.executor))
    # The summary and the report's sample are fed as the run goes when preflight counted every example's metric;
    # rows are then spooled only for an export (results/tally.py).
    counts = prepared.metric_counts
    make = partial(Tally, cfg, run.run_id, metric_counts=counts, spool=bool(run.formats))
    # With the dask engine the run's process is what bounds its speed: its tally goes to a second core at any size.
    large = prepared.large or run.executor.engine == "dask"
    tally = open_tally(make, live=counts is not None, large=large)
    sink = artifacts.RowFiles(run.run_dir, tally.take)
    try:
        graph = Graph(cfg, stack, run.stop, sink, run.executor)
        run.interrupted = graph.run(prepared.examples)  # then the synthesized examples, as they come
        run.tasks, run.synthesis = graph.expected, graph.synthesis
    except BaseException:
        run.stop.set()  # whatever still runs stops too
        tally.close()
        raise
    finally:
        sink.close()
    return tally


def _write_results(run: _Run, tally: RunTally, budget: Budget, prepared: Prepared, extras: Extras) -> Summary:
    """Scores, summary.json, export, report.html and the Hub push (the row artifacts are written as the run goes).
    The summary has the run's facts beside what the rows say: status, this invocation's calls, costs and budget."""
    cfg, run_dir, counts = run.cfg, run.run_dir, run.tracer.counts
    summary = replace(
        tally.summary(),
        status="interrupted" if run.interrupted else "stopped_on_budget" if budget.stopped else "complete",
        stopped_by=stopped_by() if run.interrupted else None,
        note=GENERATION_ONLY if generation_only(cfg) else None,
        calls=Calls(made=counts["calls"], cache_hits=counts["cache_hits"], errors=counts["errors"]),
        responses_not_done=run.tasks - tally.n_responses,
        skipped_rows=len(prepared.skipped),
        wall_s=round(time.monotonic() - run.t0, 2),
        costs=cost_report(run.tracer.by_model, price_table(cfg), budget.provider_usd),
        budget=BudgetSummary(cfg.run.budget_usd, round(budget.spent, 6), budget.stopped),
        synthesis=tuple(run.synthesis) if cfg.synthesize is not None else None,  # also when Ctrl+C stopped it
        executor=ExecutorSummary(run.executor.engine, run.executor.workers),
    )
    formats = list(run.formats)
    if formats and not run.interrupted:
        summary = replace(summary, export=tally.export(run_dir, formats))
    artifacts.write_json(run_dir / "summary.json", summary_data(summary))
    tally.report(run_dir, summary)
    if extras.push_to_hub and not run.interrupted:
        from ..results.hub import push_to_hub

        card = hub_card(cfg, summary_data(summary))
        paths = push_to_hub(run_dir, extras.push_to_hub, private=extras.private, dry_run=extras.dry_run, card=card)
        verb = "would upload" if extras.dry_run else "uploaded"
        log.info("hub %s: %s %s", extras.push_to_hub, verb, ", ".join(paths))
    log_summary(summary)
    return summary


def _outcome(run: _Run, tally: RunTally, budget: Budget, summary: Summary) -> Outcome:
    """The exit code: 130 interrupted (143 by SIGTERM), 3 stopped on budget, 1 every candidate call failed, else 0."""
    cfg, run_id = run.cfg, run.run_id
    if run.interrupted:
        log.warning(
            "interrupted (%s): artifacts written for what was done; rerun with --run-id %s to resume",
            stopped_by() or "stop",
            run_id,
        )
        return Outcome(stop_exit_code(), run.run_dir, summary)
    if budget.stopped:
        log.warning(
            "stopped on budget: $%.4f spent of $%g; %d responses not generated. Raise run.budget_usd and rerun "
            "with --run-id %s to continue from the cache",
            budget.spent,
            cfg.run.budget_usd,
            run.tasks - tally.n_responses,
            run_id,
        )
        return Outcome(3, run.run_dir, summary)
    if run.tasks and not tally.any_ok:
        first = tally.first_error or "no response"
        log.error("every candidate call failed (first error: %s); artifacts written", first)
        return Outcome(1, run.run_dir, summary)
    return Outcome(0, run.run_dir, summary)
