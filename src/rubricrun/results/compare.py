"""Compare two finished runs (`rubricrun compare RUN_A RUN_B`): per dataset and candidate, each run's headline
recomputed from its rows and the change B - A with a paired bootstrap CI; every verdict that flipped between met and
not_met. Writes compare.json and compare.html into `--out`; docs/statistics.md ("Comparing runs") is the reference."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..judging.answers import AUTO_CRITERION
from ..tasks import registry
from ..tasks.spec import DatasetResult
from ..types import Criterion, Example
from . import artifacts, metrics, stats
from .artifacts import RunData, load_run
from .report import _env, by_example

log = logging.getLogger("rubricrun")
FLIP_SHOWN = 200  # flips listed per dataset on the page (compare.json has them all)
# One criterion verdict of one response that differs between run A and run B, as compare.json holds it.
Flip = dict[str, Any]
# One candidate on one dataset in both runs, as compare.json holds it: headlines (recomputed), and B - A paired over
# the shared examples (paired_diff's fields: wins are the examples where B scored higher), flips each way.
CandidateChange = dict[str, Any]


def _scored_on(run: RunData, ex: Example) -> tuple[Criterion, ...]:
    """What an example was scored on: its rubric, else the run's default rubric for an open example (none:
    metrics.expected_criteria infers it from the judgments), else judge-free `correct`."""
    return ex.rubric or (run.default_rubric if ex.kind == "open" else (AUTO_CRITERION,))


def _result(run: RunData, name: str, exs: list[Example]) -> DatasetResult:
    recorded = run.summary["datasets"].get(name) or {}
    metric = recorded.get("metric")
    if metric not in registry.METRICS:
        metric = registry.metric_of_counts(Counter(registry.metric_of(ex) for ex in exs))
    on_error = recorded.get("on_error") if recorded.get("on_error") in metrics.ON_ERROR else None
    acc = metrics.dataset_acc(name, metric, on_error, run.bootstrap_samples, run.seed, None)
    for ex, rs, js, _, _ in by_example(exs, run.responses, run.judgments):
        acc.add(ex, rs, js, _scored_on(run, ex) or None)
    return acc.result()


def _flips(name: str, a: RunData, b: RunData, ids: set[str], texts: Mapping[tuple[str, str], str]) -> list[Flip]:
    """Verdicts met <-> not_met between the runs, for the same response id and criterion."""
    before = {(j.response_id, j.criterion_id): j for j in a.judgments if j.example_id in ids}
    out = []
    for j in b.judgments:
        old = before.get((j.response_id, j.criterion_id))
        if old is None or {old.verdict, j.verdict} != {"met", "not_met"}:
            continue
        out.append(
            {
                "dataset": name,
                "example_id": j.example_id,
                "candidate": j.candidate,
                "response_id": j.response_id,
                "criterion_id": j.criterion_id,
                "criterion": texts.get((j.example_id, j.criterion_id), ""),
                "weight": float(j.weight),
                "a": old.verdict,
                "b": j.verdict,
                "judge_a": old.judge,
                "judge_b": j.judge,
                "explanation_b": j.explanation,
            }
        )
    return sorted(out, key=lambda f: (f["example_id"], f["candidate"], f["response_id"], f["criterion_id"]))


def _candidate_change(
    cand: str, res_a: DatasetResult, res_b: DatasetResult, flips: Sequence[Flip], a: RunData
) -> CandidateChange:
    ra, rb = res_a.candidates.get(cand), res_b.candidates.get(cand)
    pe_a, pe_b = res_a.per_example.get(cand, {}), res_b.per_example.get(cand, {})
    d = stats.paired_diff(pe_b, pe_a, n_boot=a.bootstrap_samples, seed=a.seed)  # mean_diff, its CI, wins, ties, losses
    mine = [f for f in flips if f["candidate"] == cand]
    return {
        "candidate": cand,
        "score_a": ra.score if ra else None,
        "score_b": rb.score if rb else None,
        "n_a": ra.n if ra else 0,
        "n_b": rb.n if rb else 0,
        "n_shared": d.pop("n"),
        **d,
        "flips_to_met": sum(1 for f in mine if f["b"] == "met"),
        "flips_to_not_met": sum(1 for f in mine if f["b"] == "not_met"),
    }


def _groups(run: RunData) -> dict[str, list[Example]]:
    out: dict[str, list[Example]] = {}
    for ex in run.examples:
        out.setdefault(ex.dataset, []).append(ex)
    return out


def compare_runs(a: RunData, b: RunData) -> dict[str, dict[str, Any]]:
    """compare.json's `datasets`: every dataset of either run (A's order, then B's new ones), each candidate of
    either run; `only_in` is "a" or "b" when the dataset is in one run only (nothing is compared)."""
    ga, gb = _groups(a), _groups(b)
    # Each criterion's text by (example id, criterion id), from either run (B's where both have it).
    texts = {(ex.id, c.id): c.text for run in (a, b) for ex in run.examples for c in _scored_on(run, ex)}
    out = {}
    for name in list(ga) + [n for n in gb if n not in ga]:
        if name not in ga or name not in gb:
            metric = (a if name in ga else b).summary["datasets"].get(name, {}).get("metric", "")
            only_in = "a" if name in ga else "b"
            out[name] = {"metric": metric, "on_error": "", "candidates": [], "flips": [], "only_in": only_in}
            continue
        res_a, res_b = _result(a, name, ga[name]), _result(b, name, gb[name])
        shared_ids = {ex.id for ex in ga[name]} & {ex.id for ex in gb[name]}
        flips = _flips(name, a, b, shared_ids, texts)
        cands = list(res_a.candidates) + [c for c in res_b.candidates if c not in res_a.candidates]
        changes = [_candidate_change(c, res_a, res_b, flips, a) for c in cands]
        note = "" if res_a.metric == res_b.metric else f" (run B: {res_b.metric})"
        out[name] = {
            "metric": res_a.metric + note,
            "on_error": res_a.on_error,
            "candidates": changes,
            "flips": flips,
            "only_in": None,
        }
    return out


def comparison_row(a: RunData, b: RunData, changes: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """compare.json's data."""
    return {
        "run_a": str(a.path),
        "run_b": str(b.path),
        "change": "B - A, paired over the examples both runs scored (95% percentile bootstrap CI)",
        "bootstrap_samples": a.bootstrap_samples,
        "seed": a.seed,
        "datasets": changes,
    }


def write_compare(run_a: str | Path, run_b: str | Path, out: str | Path | None = None) -> Path:
    """Load both runs, compare, write compare.json and compare.html; returns the folder."""
    a, b = load_run(run_a), load_run(run_b)
    folder = Path(out) if out else a.path.parent / f"compare-{a.path.name}-vs-{b.path.name}"
    changes = compare_runs(a, b)
    data = comparison_row(a, b, changes)
    artifacts.write_json(folder / "compare.json", data)
    page = _env().get_template("compare.html.j2").render(c=data, shown=FLIP_SHOWN)  # the report's environment
    artifacts.write_text(folder / "compare.html", page)
    for name, d in changes.items():
        for c in d["candidates"]:
            log.info("%s %s: %s", name, c["candidate"], _line(c))
    return folder


def _line(c: CandidateChange) -> str:
    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    flips = c["flips_to_met"] + c["flips_to_not_met"]
    return (
        f"{f(c['score_a'])} -> {f(c['score_b'])}, change {f(c['mean_diff'])} [{f(c['ci_low'])}, {f(c['ci_high'])}] "
        f"over {c['n_shared']} shared examples, {flips} flipped verdicts"
    )
