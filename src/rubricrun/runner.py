"""One run: lock the run folder, load examples, generate, judge, score, write every artifact.

Artifacts are written at the end of the run and also when it stops early (Ctrl+C, budget): every
call already paid for is in the cache, so a rerun of the same run id picks up where this one stopped.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import artifacts
from .cache import CachingProvider, ResponseCache, cache_key
from .config import Config, config_to_dict
from .costs import (
    Budget,
    call_cost,
    cost_report,
    estimate_prompt_tokens,
    max_tokens_of,
    price_table,
    unit_prices,
    upper_bound,
)
from .errors import InputError, RubricrunError
from .loaders import load_dataset
from .pipeline import (
    AUTO_CRITERION,
    Judging,
    auto_judgment,
    generate,
    generation_tasks,
    judge,
    judge_items,
    model_request,
    response_row,
    route_for,
    rubric_for,
    score_all,
)
from .pool import Interrupted
from .providers import BaseProvider, LiteLLMProvider
from .ratelimit import ThrottledProvider, TokenBucket
from .retry import RetryingProvider
from .summary import build_summary
from .trace import Tracer
from .types import Example, Judgment, LLMResponse, Response, to_row

log = logging.getLogger("rubricrun")


@dataclass
class Outcome:
    exit_code: int
    run_dir: Path
    summary: dict[str, Any] = field(default_factory=dict)


def load_examples(cfg: Config, max_examples: int | None) -> tuple[list[Example], list[str]]:
    """All datasets' examples (each dataset capped at max_examples), and the skipped bad rows."""
    examples: list[Example] = []
    skipped: list[str] = []
    seen: dict[str, str] = {}
    cap = max_examples if max_examples is not None else cfg.run.max_examples
    for i, d in enumerate(cfg.datasets):
        try:
            res = load_dataset(d, on_bad_row=cfg.run.on_bad_row, max_examples=cap)
        except InputError as exc:
            if exc.line is None and exc.file == d.path:  # about the config entry, not a row: point at it
                reason = str(exc).rsplit(": ", 1)[-1]
                key = f"datasets[{i}].{exc.key}" if exc.key else f"datasets[{i}].path"
                raise cfg.fail(key, f"{d.path}: {reason}") from None
            raise
        for ex in res.examples:
            if ex.id in seen:
                raise InputError(f"example id '{ex.id}' also at {seen[ex.id]}", file=ex.source, key="id")
            seen[ex.id] = ex.source
        examples.extend(res.examples)
        skipped.extend(res.skipped)
    return examples, skipped


def build_stack(
    cfg: Config, tracer: Tracer, stop: threading.Event, cache: ResponseCache | None
) -> tuple[BaseProvider, Budget]:
    """Cache(Budget(Retry(Throttle(LiteLLM)))): a cache hit is free, pays no throttle and no budget."""
    buckets = {}
    for m in cfg.candidates:
        if m.rpm:
            buckets[f"candidate:{m.name}"] = TokenBucket(m.rpm)
    for m in cfg.judge_pool:
        if m.rpm:
            buckets[f"judge:{m.name}"] = TokenBucket(m.rpm)
    judge_bucket = TokenBucket(cfg.run.judge_rate_limit_rpm) if cfg.run.judge_rate_limit_rpm else None
    inner = ThrottledProvider(LiteLLMProvider(), buckets, judge_bucket, stop)
    budget = Budget(RetryingProvider(inner, cfg.retry, tracer, stop), cfg.run.budget_usd, price_table(cfg))
    return CachingProvider(budget, cache, tracer), budget


def open_cache(cfg: Config) -> ResponseCache | None:
    return ResponseCache(cfg.cache.dir) if cfg.cache.enabled else None


def check_keys(cfg: Config) -> None:
    """Every api_key_env named in the config is set: detected before any call is paid for."""
    for section, entries in (("candidates", cfg.candidates), ("judges", cfg.judge_pool)):
        for i, m in enumerate(entries):
            envs = [m.api_key_env] + [w.api_key_env for w in m.models]
            for env in envs:
                if env and not os.environ.get(env):
                    key = f"{section}[{i}].api_key_env" if m is not cfg.judge else "judge.api_key_env"
                    raise cfg.fail(key, f"environment variable {env} is not set (model '{m.name}')")


def synthesize_examples(cfg: Config, stack: BaseProvider) -> tuple[list[Example], list[dict[str, Any]]]:
    """Prompts synthesized from a topic, through the same cached stack as every other call."""
    from .synth import synthesize

    scfg = cfg.synthesize
    assert scfg is not None
    entries = [("candidate", m) for m in cfg.candidates] + [("judge", m) for m in cfg.judge_pool]
    role, model = entries[0]
    if scfg.model:
        found = [e for e in entries if e[1].name == scfg.model]
        if not found:
            raise InputError(f"no candidate or judge named '{scfg.model}'", file=cfg.path, key="synthesize.model")
        role, model = found[0]
    route = route_for(model, "synthesize", 0, cfg.run.seed)

    def call(messages: list[dict], attempt: int) -> LLMResponse:
        return stack.generate(
            model_request(model, route, messages, role="synthesis", section=role, sample_index=attempt)
        )

    examples, logs = synthesize(scfg, call, log=log.info)
    return examples, [to_row(entry) for entry in logs]


def _criteria_index(cfg: Config, examples: list[Example]) -> dict[tuple[str, str], Any]:
    out = {}
    for ex in examples:
        for c in rubric_for(ex, cfg) or ((AUTO_CRITERION,) if ex.kind != "open" else ()):
            out[(ex.id, c.id)] = c
    return out


@dataclass(frozen=True)
class Extras:
    """What the CLI adds on top of the config: export formats and a Hub push."""

    export_formats: tuple[str, ...] = ()
    push_to_hub: str | None = None
    dry_run: bool = False


def export_all(
    cfg: Config,
    run_dir: Path,
    formats: list[str],
    examples: list[Example],
    responses: list[Response],
    judgments: list[Judgment],
    scores: dict[str, Any],
) -> dict[str, Any]:
    from .config import ExportConfig
    from .export import build_export, write_export

    ecfg = cfg.export or ExportConfig()
    out = {}
    for fmt in formats:
        rows, counts = build_export(fmt, examples, responses, judgments, scores, ecfg)
        path = write_export(run_dir, fmt, rows)
        log.info("export %s: %d rows -> %s", fmt, len(rows), path)
        out[fmt] = counts
    return out


def hub_card(cfg: Config, summary: dict[str, Any]) -> dict[str, Any]:
    ecfg = cfg.export
    return {
        "run_id": summary["run_id"],
        "models": sorted({m.model or w.model for m in cfg.candidates for w in (m.models or [None]) if m.model or w}),
        "candidates": [c.name for c in cfg.candidates],
        "judges": [f"{j.name} ({j.model})" for j in cfg.judge_pool],
        "thresholds": {
            "score": ecfg.score if ecfg else "normalized",
            "sft_threshold": ecfg.sft_threshold if ecfg else None,
            "kto_threshold": ecfg.kto_threshold if ecfg else None,
            "min_margin": ecfg.min_margin if ecfg else None,
        },
        "export": summary.get("export", {}),
    }


@dataclass(frozen=True)
class Prepared:
    """What preflight found: everything a run needs that can be checked without calling a model."""

    examples: list[Example]
    skipped: list[str]


def preflight(cfg: Config, max_examples: int | None) -> Prepared:
    """Every check that needs no model call, before the run folder is touched: API key variables, every
    dataset row, the judge template, the synthesis templates. Raises InputError."""
    check_keys(cfg)
    examples, skipped = load_examples(cfg, max_examples)
    Judging(cfg, BaseProvider())
    if cfg.synthesize is not None:
        from .synth import load_template

        load_template(cfg.synthesize.subtopic_template, "subtopics.j2")
        load_template(cfg.synthesize.prompt_template, "prompts.j2")
    return Prepared(examples, skipped)


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
        return _execute(cfg, run_id, run_dir, stop, tracer, cache, prepared, extras)
    finally:
        tracer.close()
        if cache:
            cache.close()
        lock.release()


def _execute(
    cfg: Config,
    run_id: str,
    run_dir: Path,
    stop: threading.Event,
    tracer: Tracer,
    cache: ResponseCache | None,
    prepared: Prepared,
    extras: Extras,
) -> Outcome:
    t0 = time.monotonic()
    formats = list(dict.fromkeys([*(cfg.export.formats if cfg.export else []), *extras.export_formats]))
    examples, skipped = prepared.examples, prepared.skipped
    for s in skipped:
        log.warning("skipped bad row: %s", s)
    artifacts.write_text(run_dir / "config.yaml", yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
    stack, budget = build_stack(cfg, tracer, stop, cache)
    stack_calls = tracer.counts

    synth_logs: list[Any] = []
    if cfg.synthesize is not None:
        synthesized, synth_logs = synthesize_examples(cfg, stack)
        examples = examples + synthesized
    artifacts.write_jsonl(run_dir / "examples.jsonl", examples)
    by_id = {ex.id: ex for ex in examples}
    log.info(
        "run %s: %d examples, %d candidates, %d judges", run_id, len(examples), len(cfg.candidates), len(cfg.judge_pool)
    )

    interrupted = False
    tasks = generation_tasks(cfg, examples)
    try:
        gen = generate(tasks, stack, workers=cfg.run.concurrency, stop=stop, progress=cfg.run.progress)
    except Interrupted as exc:
        gen, interrupted = exc.results, True
    responses: list[Response] = [r for r in gen if r is not None]

    judgments: list[Judgment] = []
    if not interrupted:
        items = judge_items(cfg, by_id, responses)
        try:
            judged = judge(cfg, stack, items, stop=stop, progress=cfg.run.progress)
        except Interrupted as exc:
            judged, interrupted = exc.results, True
        rubric_j = {j.id: j for j in judged if j is not None}
        for r in responses:  # keep response order, then rubric order
            ex = by_id[r.example_id]
            for c in rubric_for(ex, cfg):
                j = rubric_j.get(f"{r.id}#{c.id}")
                if j is not None:
                    judgments.append(j)
            auto = auto_judgment(ex, r)
            if auto is not None:
                judgments.append(auto)

    if tracer.error is not None:
        raise RubricrunError(
            f"{run_dir / 'trace.jsonl'}: cannot write ({tracer.error.strerror or tracer.error}); the run stopped. "
            f"Every call answered so far is in the cache: free space and rerun with --run-id {run_id}"
        )
    scores = score_all(cfg, by_id, responses, judgments)
    not_done = len(tasks) - len(responses)
    status = "interrupted" if interrupted else "stopped_on_budget" if budget.stopped else "complete"
    extra = {
        "status": status,
        "calls": {
            "made": stack_calls["calls"],
            "cache_hits": stack_calls["cache_hits"],
            "errors": stack_calls["errors"],
        },
        "responses_not_done": not_done,
        "skipped_rows": len(skipped),
        "wall_s": round(time.monotonic() - t0, 2),
        "costs": cost_report(tracer.by_model, price_table(cfg)),
        "budget": {"budget_usd": cfg.run.budget_usd, "spent_usd": round(budget.spent, 6), "stopped": budget.stopped},
    }
    if synth_logs:
        extra["synthesis"] = synth_logs
    criteria = _criteria_index(cfg, examples)
    summary = build_summary(cfg, run_id, examples, responses, judgments, scores, criteria, extra)
    if formats and not interrupted:
        summary["export"] = export_all(cfg, run_dir, formats, examples, responses, judgments, scores)
    artifacts.write_jsonl(run_dir / "responses.jsonl", responses)
    artifacts.write_jsonl(run_dir / "judgments.jsonl", judgments)
    artifacts.write_json(run_dir / "summary.json", summary)
    write_report_safely(run_dir, summary, examples, responses, judgments, criteria)
    if extras.push_to_hub and not interrupted:
        from .hub import push_to_hub

        paths = push_to_hub(run_dir, extras.push_to_hub, dry_run=extras.dry_run, card=hub_card(cfg, summary))
        verb = "would upload" if extras.dry_run else "uploaded"
        log.info("hub %s: %s %s", extras.push_to_hub, verb, ", ".join(paths))
    _log_summary(summary)
    if interrupted:
        log.warning("interrupted: artifacts written for what was done; rerun with --run-id %s to resume", run_id)
        return Outcome(130, run_dir, summary)
    if budget.stopped:
        log.warning(
            "stopped on budget: $%.4f spent of $%g; %d responses not generated. Raise run.budget_usd and rerun "
            "with --run-id %s to continue from the cache",
            budget.spent,
            cfg.run.budget_usd,
            not_done,
            run_id,
        )
        return Outcome(3, run_dir, summary)
    if tasks and not any(r.status == "ok" for r in responses):
        first = next((r.error for r in responses if r.error), "no response")
        log.error("every candidate call failed (first error: %s); artifacts written", first)
        return Outcome(1, run_dir, summary)
    return Outcome(0, run_dir, summary)


def write_report_safely(
    run_dir: Path, summary: dict[str, Any], examples: Any, responses: Any, judgments: Any, criteria: Any
) -> None:
    """report.html is a view: a bug in it must never cost the run its other artifacts."""
    from .report import write_report

    try:
        write_report(run_dir, summary, examples, responses, judgments, criteria=criteria)
    except Exception as exc:  # noqa: BLE001
        log.error("report.html not written: %s: %s", type(exc).__name__, exc)


def _log_summary(summary: dict[str, Any]) -> None:
    calls = summary["calls"]
    log.info("calls: %d made, %d from cache, %d failed attempts", calls["made"], calls["cache_hits"], calls["errors"])
    for name, c in summary["candidates"].items():
        ci = c["normalized_ci"]
        log.info(
            "%-16s score %s [%s, %s]  pass %s  scored %d/%d  response errors %d  judgment errors %d",
            name,
            c["mean_normalized"],
            ci[0],
            ci[1],
            c["pass_rate"],
            c["scored"],
            c["responses"],
            c["response_errors"],
            c["judgment_errors"],
        )


def count_calls(cfg: Config, max_examples: int | None) -> dict[str, Any]:
    """--validate: how many calls the run would make, how many are already cached, and an upper bound on
    the cost of the rest (every reply at its max_tokens). Calls nothing."""
    prepared = preflight(cfg, max_examples)  # the same checks a run makes before its first call
    examples, skipped = prepared.examples, prepared.skipped
    judging = Judging(cfg, BaseProvider())  # builds the judge requests whose cache keys are looked up
    by_id = {ex.id: ex for ex in examples}
    prices = price_table(cfg)
    cache = open_cache(cfg)
    tasks = generation_tasks(cfg, examples)
    gen_cached = judge_calls = judge_cached = 0
    bound = 0.0
    unpriced: set[str] = set()
    template_tokens = len(judging.template) // 3
    pool = cfg.judge_pool
    for t in tasks:
        ex = t.example
        hit = cache.get(cache_key(t.request)) if cache else None
        if hit is None:
            c = upper_bound(t.request, prices)
            bound += c
            if unit_prices(t.request.model, prices.get(t.request.model)) is None:
                unpriced.add(t.request.model)
        else:
            gen_cached += 1
        resp = response_row(t, "", hit or LLMResponse(text=""), None)
        for item in judge_items(cfg, by_id, [resp]):
            for ji in item.judges:
                judge_calls += 1
                judge_cfg = pool[ji]
                req = judging.request(judge_cfg, item, 0)
                if hit is not None and cache is not None and cache_key(req) in cache:
                    judge_cached += 1
                    continue
                response_tokens = hit.usage.completion_tokens if hit else max_tokens_of(t.request.params)
                prompt_tokens = template_tokens + estimate_prompt_tokens(list(ex.messages)) + response_tokens + 50
                c = call_cost(req.model, prompt_tokens, max_tokens_of(req.params), prices)
                if c is None:
                    unpriced.add(req.model)
                bound += c or 0.0
    if cache:
        cache.close()
    return {
        "examples": len(examples),
        "skipped_rows": len(skipped),
        "candidate_calls": len(tasks),
        "candidate_cached": gen_cached,
        "judge_calls": judge_calls,
        "judge_cached": judge_cached,
        "cost_upper_bound_usd": round(bound, 4),
        "unpriced_models": sorted(unpriced),
    }
