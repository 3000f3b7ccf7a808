"""The list-based references the tests check the streaming code against, and the loader's conveniences that only
tests use. None of this is in src: a run reads its datasets one row at a time (data/loaders.iter_dataset) and
summarizes one example at a time (results/summary.SummaryAcc).

- `load_dataset(cfg, ...)`: every example of one dataset in a list, with the skipped rows' messages (`LoadResult`);
  `normalize_row(row, fmt, ...)`: one row read as the loader reads it; `detect_format(row)`: the schema it detects.
- `load_examples(cfg, max_examples)`: every dataset's examples through preflight's checks, in a list.
- `first_turns(cfg, examples)`: every conversation's first turn (engine/calls.GenTask), in input order.
- `build_summary(...)`: the summary of rows given as lists (SummaryAcc fed example by example);
  `dataset_results(...)`: each dataset's metric results over lists, `dataset_result(...)` one dataset's;
  `criteria_index(cfg, examples)`.
- `counted(judgments, criteria)`: the agreement counts of a list of judgments; `compositions`, `percent_agreement`,
  `fleiss_kappa`, `krippendorff_alpha_nominal`, `cohen_kappa`: the agreement statistics of lists of ratings (the
  summary's are computed from counts: results/stats.py `*_counts`).
- `leaderboard(per_candidate)`: summary.leaderboard over candidates' per-example scores, as the summary ranks them.
- `judge_stats(judgments)`: the summary's judge statistics of a list; `meta_rows(rows)`: judge meta-eval rows.
- `extract_final_number(text)`: the number a response commits to.
- `bradley_terry(comparisons, names)`: the scalar Bradley-Terry fit (results/pairwise.py fits them vectorized).
- `build_export(fmt, examples, responses, ...)`: export.build_export over a run's rows given as lists.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from rubricrun.config import Config, DatasetConfig
from rubricrun.data.loaders import RowParser, iter_dataset
from rubricrun.data.readers import RawRow
from rubricrun.data.schemas import Row
from rubricrun.engine.calls import GenTask, turn_task
from rubricrun.engine.preflight import Examples, validate_examples
from rubricrun.judging.answers import final_answer, span_number
from rubricrun.results import export, metrics, stats, summary
from rubricrun.results.summary import AgreementCounts, SummaryAcc
from rubricrun.results.summary_types import Summary
from rubricrun.tasks import registry
from rubricrun.tasks.judge_eval import cohen_kappa_counts
from rubricrun.tasks.meta_eval import meta_row
from rubricrun.tasks.registry import TASKS
from rubricrun.tasks.spec import CandidateResult, DatasetResult
from rubricrun.types import Criterion, Example, Judgment, PairJudgment, Response

# ---------------------------------------------------------------------------------------------------------------
# Reading datasets


@dataclass(frozen=True)
class LoadResult:
    examples: list[Example]
    skipped: list[str]  # one "file:line: key 'x': reason" string per skipped row


def load_dataset(cfg: DatasetConfig, *, schemas: Sequence[Any] = TASKS, **kw: Any) -> LoadResult:
    """Every example of one dataset (iter_dataset's, in a list) and the skipped rows' messages."""
    skipped: list[str] = []
    return LoadResult(list(iter_dataset(cfg, schemas=schemas, skipped=skipped, **kw)), skipped)


def normalize_row(
    row: dict, fmt: str, *, dataset: str, source: str, fields: dict[str, str], schemas: Sequence[Any] = TASKS
) -> Example:
    """One row of schema `fmt` as the loader reads it; `source` is "path:line"."""
    file, _, line = source.rpartition(":")
    parse = RowParser(DatasetConfig(path=file, name=dataset, format=fmt, fields=fields), schemas)
    return parse(RawRow(file, int(line), row))[0]


def detect_format(row: Any, schemas: Sequence[Any] = TASKS) -> str | None:
    """The schema a row looks like, from its keys: the name of the first of `schemas` that takes it, or None."""
    if not isinstance(row, dict):
        return None
    schema = next((s for s in schemas if s.detect(Row(row, {}), row.keys())), None)  # as RowParser detects
    return None if schema is None else schema.name


def load_examples(cfg: Config, max_examples: int | None) -> tuple[list[Example], list[str]]:
    """All datasets' examples (each dataset capped at max_examples) in a list, and the skipped bad rows."""
    count, skipped = validate_examples(cfg, max_examples)
    return list(Examples(cfg, max_examples, count)), skipped


def first_turns(cfg: Config, examples: Sequence[Example]) -> list[GenTask]:
    """Every conversation's first turn, in input order (no replayed answers)."""
    pairs = [
        (ex, c, s) for ex in examples for c in registry.candidates_for(cfg, ex) for s in range(c.samples_per_prompt)
    ]
    return [turn_task(cfg, ex, c, s, (), i, {}) for i, (ex, c, s) in enumerate(pairs)]


# ---------------------------------------------------------------------------------------------------------------
# Results over lists


def _grouped(
    examples: Sequence[Example], responses: Sequence[Response], judgments: Sequence[Judgment]
) -> dict[str, tuple[list[Response], list[Judgment]]]:
    groups: dict[str, tuple[list[Response], list[Judgment]]] = {ex.id: ([], []) for ex in examples}
    for r in responses:
        groups.setdefault(r.example_id, ([], []))[0].append(r)
    for j in judgments:
        groups.setdefault(j.example_id, ([], []))[1].append(j)
    return groups


def _metric_counts(examples: Sequence[Example]) -> dict[str, Counter]:
    counts: dict[str, Counter] = {}
    for ex in examples:
        counts.setdefault(ex.dataset, Counter())[registry.metric_of(ex)] += 1
    return counts


def build_summary(
    cfg: Config,
    run_id: str,
    examples: Sequence[Example],
    responses: Sequence[Response],
    judgments: Sequence[Judgment],
    criteria: Mapping[tuple[str, str], Criterion],
    pairs: Sequence[PairJudgment] = (),
    text_len: Mapping[str, int] | None = None,
) -> Summary:
    """What the rows say (the runner adds the run's facts). `criteria` maps (example_id, criterion_id) to the
    criterion judged; `pairs` are the pairwise judgments; `text_len` (response id -> len(text)) is computed from the
    responses when not given. The rows go through SummaryAcc example by example, as results/tally.py feeds it."""
    acc = SummaryAcc(cfg, _metric_counts(examples))
    by_id = {ex.id: ex for ex in examples}
    for eid, (rs, js) in _grouped(examples, responses, judgments).items():
        if eid in by_id:
            acc.add(by_id[eid], rs, js, criteria, registry.criteria_for(by_id[eid], cfg))
        else:  # rows of no known example: counted for the judges only
            acc.judges.add(js, criteria)
    if text_len is None:
        compared = {rid for p in pairs for rid in p.response_ids}
        text_len = {r.id: len(r.text or "") for r in responses if r.id in compared}
    return acc.summary(run_id, pairs, {ex.id: ex.dataset for ex in examples}, text_len)


def dataset_result(
    name: str,
    metric: str,
    examples: Sequence[Example],
    responses: Sequence[Response],
    judgments: Sequence[Judgment],
    *,
    on_error: str,
    n_boot: int,
    seed: int,
    criteria: Mapping[str, Sequence[Criterion]] | None = None,
    samples_per_prompt: Mapping[str, int] | None = None,
) -> DatasetResult:
    """Every candidate's `metric` on this dataset's `examples` (rows of other datasets are ignored), as the run
    computes it (DatasetAcc, or the metric's own accumulator). `criteria`: example id -> the criteria its responses
    are scored on (else expected_criteria infers them); `samples_per_prompt` as metrics.dataset_acc's."""
    acc = metrics.dataset_acc(name, metric, on_error, n_boot, seed, samples_per_prompt)
    groups = _grouped(examples, responses, judgments)
    for eid, ex in {ex.id: ex for ex in examples}.items():
        acc.add(ex, *groups[eid], None if criteria is None else criteria.get(eid))
    return acc.result()


def dataset_results(
    cfg: Config, examples: Sequence[Example], responses: Sequence[Response], judgments: Sequence[Judgment]
) -> list[DatasetResult]:
    """One DatasetResult per dataset (config order, then synthesized ones), each with its metric."""
    accs = metrics.dataset_accs(cfg, _metric_counts(examples))
    groups = _grouped(examples, responses, judgments)
    for ex in examples:
        accs[ex.dataset].add(ex, *groups[ex.id], registry.criteria_for(ex, cfg))
    return [acc.result() for acc in accs.values()]


def criteria_index(cfg: Config, examples: Sequence[Example]) -> dict[tuple[str, str], Criterion]:
    """(example id, criterion id) -> the criterion its responses are scored on."""
    return {(ex.id, c.id): c for ex in examples for c in registry.criteria_for(ex, cfg)}


def counted(
    judgments: Sequence[Judgment], criteria: Mapping[tuple[str, str], Criterion] | None = None
) -> AgreementCounts:
    """The agreement counts of `judgments`; `criteria` maps (example id, criterion id) to the criterion judged."""
    acc = AgreementCounts()
    acc.add(judgments, criteria or {})
    return acc


def compositions(items: Iterable[Iterable[Hashable]]) -> Counter:
    """Items of ratings as the counts the `*_counts` statistics take: composition -> how many items have it."""
    return Counter(stats.composition(item) for item in items)


def percent_agreement(items: Sequence[Sequence[str]]) -> float | None:
    return stats.percent_agreement_counts(compositions(items))


def fleiss_kappa(
    items: Sequence[Sequence[Hashable]], categories: Sequence[Hashable] = ("met", "not_met")
) -> float | None:
    return stats.fleiss_kappa_counts(compositions(items), categories)


def krippendorff_alpha_nominal(items: Sequence[Sequence[Hashable]]) -> float | None:
    return stats.krippendorff_alpha_counts(compositions(items))


def cohen_kappa(pairs: Sequence[tuple[Hashable, Hashable]]) -> float | None:
    """Cohen's kappa of two raters, their (a, b) verdicts over the units both rated."""
    return cohen_kappa_counts(Counter(pairs))


def judge_stats(judgments: Sequence[Judgment], criteria: Mapping[tuple[str, str], Criterion] | None = None) -> Any:
    """The summary's judge statistics (met rates, agreement) of a list of judgments."""
    return counted(judgments, criteria).summary()


def meta_rows(rows: Sequence[Mapping[str, Any]], *, fields: Mapping[str, str] | None = None, file: str = "") -> list:
    """Every row (numbered from 1, as the lines of a JSONL file) as a MetaRow."""
    return [meta_row(row, fields=fields, file=file, line=i) for i, row in enumerate(rows, start=1)]


def extract_final_number(text: str) -> float | None:
    """The number a response commits to (judging.answers.final_answer), or None."""
    span = final_answer(text)
    return span_number(span) if span is not None else None


def leaderboard(per_candidate: Mapping[str, Mapping[str, float]], *, n_boot: int = 1000, seed: int = 0) -> list[dict]:
    """Candidates ranked by mean score (one score per example id), best first (summary.leaderboard): two are told apart when
    their paired_diff CI (over shared example ids) excludes 0; fewer than two shared ids leave them undecided."""
    names = list(per_candidate)
    cis = {
        name: stats.mean_ci([per_candidate[name][i] for i in sorted(per_candidate[name])], n_boot=n_boot, seed=seed)
        for name in names
    }
    separated = {
        frozenset((x, y))
        for i, x in enumerate(names)
        for y in names[i + 1 :]
        if stats.paired_diff(per_candidate[x], per_candidate[y], n_boot=n_boot, seed=seed)["significant"]
    }
    cands = {
        name: CandidateResult(score=ci["mean"], ci=(ci["ci_low"], ci["ci_high"]), n=ci["n"]) for name, ci in cis.items()
    }
    return [msgspec.structs.asdict(row) for row in summary.leaderboard(cands, separated)]


def _strongly_connected(names: Sequence[str], beats: Mapping[str, set[str]]) -> bool:
    """Every candidate reaches every other along "scored against" edges, both ways (Ford's condition for the
    maximum-likelihood strengths to exist and be finite)."""

    def reach(edges: Mapping[str, set[str]]) -> set[str]:
        seen, todo = {names[0]}, [names[0]]
        while todo:
            for nxt in edges.get(todo.pop(), set()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    back: dict[str, set[str]] = defaultdict(set)
    for i, js in beats.items():
        for j in js:
            back[j].add(i)
    return len(reach(beats)) == len(names) == len(reach(back))


def bradley_terry(
    comparisons: Sequence[tuple[str, str, float]],
    names: Sequence[str],
    *,
    prior: float = 0.0,
    max_iter: int = 10_000,
    tol: float = 1e-10,
) -> dict[str, float] | None:
    """Ratings (1000 + 400 log10 strength) of `names` from the comparisons (a, b, a's score: 1 win, 0.5 tie, 0 loss),
    fitted one pair at a time as results/pairwise.py's module docstring says (the reference for its vectorized
    `fit_strengths`), or None when the maximum-likelihood fit does not exist (a candidate that never scored against the rest, or one that never lost to them).
    `prior` adds that many virtual ties between every two names."""
    wins: dict[str, float] = dict.fromkeys(names, 0.0)
    games: dict[tuple[str, str], float] = defaultdict(float)
    beats: dict[str, set[str]] = defaultdict(set)
    for a, b, s in comparisons:
        wins[a] += s
        wins[b] += 1.0 - s
        games[(a, b)] += 1.0
        games[(b, a)] += 1.0
        if s > 0:
            beats[a].add(b)
        if s < 1:
            beats[b].add(a)
    if prior > 0:
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                wins[a] += prior / 2
                wins[b] += prior / 2
                games[(a, b)] += prior
                games[(b, a)] += prior
                beats[a].add(b)
                beats[b].add(a)
    if len(names) < 2 or not _strongly_connected(names, beats):
        return None
    p = dict.fromkeys(names, 1.0)
    for _ in range(max_iter):
        new = {
            i: wins[i] / math.fsum(games[(i, j)] / (p[i] + p[j]) for j in names if j != i and games[(i, j)])
            for i in names
        }
        g = math.exp(math.fsum(math.log(v) for v in new.values()) / len(names))
        new = {i: v / g for i, v in new.items()}
        done = max(abs(math.log(new[i] / p[i])) for i in names) < tol
        p = new
        if done:
            break
    return {i: 1000.0 + 400.0 * math.log10(p[i]) for i in names}


def build_export(
    fmt: str,
    examples: Sequence[Example],
    responses: Sequence[Response],
    judgments: Sequence[Judgment],
    scores: Mapping[str, Any],
    cfg: Any,
    **kwargs: bool,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """export.build_export over rows given as lists (a run feeds it one example at a time): the rows in example
    order, the counts summed; a response whose example is not in the list counts as `no_example`."""
    counts = export.empty_counts(fmt)
    rows: list[dict[str, Any]] = []
    for ex in examples:
        rs = [r for r in responses if r.example_id == ex.id]
        ids = {r.id for r in rs}
        js = [j for j in judgments if j.response_id in ids]
        got, part = export.build_export(fmt, ex, rs, js, scores, cfg, **kwargs)
        rows += got
        counts.update({k: counts[k] + v for k, v in part.items()})
    known = {ex.id for ex in examples}
    orphans = sum(1 for r in responses if r.example_id not in known)
    if "responses_no_example" in counts:
        counts["responses_no_example"] += orphans
    elif "skipped_no_example" in counts:
        counts["considered"] += orphans
        counts["skipped_no_example"] += orphans
    return rows, counts
