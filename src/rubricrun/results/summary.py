"""summary.json: per dataset, each candidate's headline with its bootstrap CI and the dataset's leaderboard
(results/metrics.py); their macro average (`overall`); judge met rates and agreement (`AgreementCounts`); pairwise
judging. A pure function of the run's rows; the run's cost report (`cost_report`) beside it. Its types are in
results/summary_types.py."""

from __future__ import annotations

import logging
from array import array
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from statistics import fmean

import numpy as np
from msgspec import structs

from ..config import Config, Price
from ..providers.pricing import call_cost
from ..tasks import registry
from ..tasks.judge_eval import cohen_kappa_counts
from ..tasks.spec import CandidateResult, DatasetResult, figure, interval
from ..types import Criterion, Example, Judgment, PairJudgment, Response
from . import metrics, stats
from .accum import ByExample, ExampleIds
from .anchor import anchor_results, anchored_line, anchors_for, dataset_lines
from .charts import histogram_bins
from .pairwise import pairwise_results
from .stats import rounded
from .summary_types import (
    Agreement,
    CostSummary,
    CriterionAgreement,
    DatasetCandidate,
    DatasetRankRow,
    DatasetSummary,
    JudgePairAgreement,
    JudgeRates,
    JudgeSummary,
    MacroScore,
    ModelCost,
    Overall,
    Summary,
    summary_data,
)

log = logging.getLogger("rubricrun")
MOST_DISAGREED = 10  # how many criteria `AgreementCounts.summary` lists


class SummaryAcc:
    """The summary of a run's rows, fed one example at a time: per dataset a metrics.DatasetAcc, and the judges'
    counts. `counts`: dataset -> metric -> rows calling for it, known before the first example (majority vote)."""

    def __init__(self, cfg: Config, counts: Mapping[str, Mapping[str, int]]) -> None:
        self.cfg = cfg
        self.ids = ExampleIds()
        self.examples = 0
        self.datasets = metrics.dataset_accs(cfg, counts, self.ids)
        self.categories: dict[str, int] = {}  # the examples' string `category` values -> their codes
        self.category_of = array("i")  # by the example's position in `ids`: its category's code, -1 without one
        self.judges = AgreementCounts()
        self.anchors = anchors_for(cfg, self.datasets)  # datasets with human labels (`datasets[].labels`)

    def add(
        self,
        ex: Example,
        rs: Sequence[Response],
        js: Sequence[Judgment],
        criteria: Mapping[tuple[str, str], Criterion],
        rubric: Sequence[Criterion],
    ) -> None:
        """One example's rows; `criteria` holds at least this example's; `rubric`: its registry.criteria_for."""
        pos = self.ids.add(ex.id)
        self.judges.add(js, criteria)
        self.examples += 1
        category = ex.metadata.get("category")
        named = isinstance(category, str) and category
        self.category_of.append(self.categories.setdefault(category, len(self.categories)) if named else -1)
        if ex.dataset in self.datasets:
            self.datasets[ex.dataset].add(ex, rs, js, rubric, pos)
            if ex.dataset in self.anchors:
                self.anchors[ex.dataset].add(ex, rs, js, rubric)

    def summary(
        self,
        run_id: str,
        pairs: Sequence[PairJudgment],
        dataset_of: Mapping[str, str],
        text_len: Mapping[str, int],
    ) -> Summary:
        """The summary; `pairs` with their examples' datasets and the compared responses' lengths (pairwise.py)."""
        cfg = self.cfg
        results = {name: d.result() for name, d in self.datasets.items()}
        categories = np.frombuffer(self.category_of, dtype=np.int32) if self.categories else None
        datasets = {name: _dataset(cfg, r, categories, list(self.categories)) for name, r in results.items()}
        pairwise = pairwise_results(cfg, dataset_of, pairs, text_len)
        anchor_results(cfg, self.anchors, results, datasets, pairwise, pairs, dataset_of)
        return Summary(
            run_id=run_id,
            pass_threshold=cfg.judging.pass_threshold,
            examples=self.examples,
            datasets=datasets,
            overall=_overall(datasets, [c.name for c in cfg.candidates]),
            judges=self.judges.summary(),
            pairwise_judging=pairwise,
        )


def _dataset(cfg: Config, result: DatasetResult, categories: np.ndarray | None, names: list[str]) -> DatasetSummary:
    """One dataset's headline per candidate (full precision: the official formulas are matched to 1e-9) and its
    leaderboard, whose noise relation is a paired bootstrap over the dataset's examples, one per pair.
    `categories` (each example's category code, by position; None: no example has one) and their `names` give the
    per-category scores the radar draws."""
    rows = {}
    for name, c in result.candidates.items():
        pe = result.per_example.get(name)  # none for a judge meta-evaluation's judges
        if pe is not None:
            by_category = _category_means(pe, categories, names)
            c = structs.replace(c, histogram=tuple(histogram_bins(pe.vals)), by_example_category=by_category)
        rows[name] = DatasetCandidate(**structs.asdict(c))
    separated = _separated(cfg, result)
    extra = dict(result.extra) or None
    return DatasetSummary(result.metric, result.on_error, rows, leaderboard(result.candidates, separated), extra)


def leaderboard(cands: Mapping[str, CandidateResult], separated: set[frozenset[str]]) -> tuple[DatasetRankRow, ...]:
    """By score descending, then name, no score last; equal scores share a rank ("1224"); `within_noise_of`, in
    leaderboard order, the candidates not told apart from this one (the pair is not in `separated`)."""
    order = sorted(cands, key=lambda name: (cands[name].score is None, -(cands[name].score or 0.0), name))
    rows: list[DatasetRankRow] = []
    for pos, name in enumerate(order):
        c = cands[name]
        rank = rows[-1].rank if rows and rows[-1].score == c.score else pos + 1
        noise = tuple(o for o in order if o != name and frozenset((name, o)) not in separated)
        rows.append(DatasetRankRow(rank, name, c.score, *c.ci, c.n, noise))
    return tuple(rows)


def _separated(cfg: Config, result: DatasetResult) -> set[frozenset[str]]:
    """The pairs of leaderboard rows told apart: a paired bootstrap over the examples both have; rows without
    per-example values (a judge meta-evaluation's judges) by their CIs not overlapping."""
    out = set()
    for a, b in combinations(result.candidates, 2):
        pe_a, pe_b = result.per_example.get(a, {}), result.per_example.get(b, {})
        if not pe_a and not pe_b:
            (lo_a, hi_a), (lo_b, hi_b) = result.candidates[a].ci, result.candidates[b].ci
            apart = None not in (lo_a, hi_a, lo_b, hi_b) and (hi_a < lo_b or hi_b < lo_a)  # type: ignore[operator]
        else:
            apart = stats.paired_diff(pe_a, pe_b, n_boot=cfg.run.bootstrap_samples, seed=cfg.run.seed)["significant"]
        if apart:
            out.add(frozenset((a, b)))
    return out


def _category_means(per_example: ByExample, categories: np.ndarray | None, names: list[str]) -> dict[str, float]:
    """Mean per-example score per example category (examples without a string `category` are left out)."""
    if categories is None:
        return {}
    groups: dict[str, list[float]] = defaultdict(list)
    for code, v in zip(categories[per_example.pos].tolist(), per_example.vals.tolist(), strict=True):
        if code >= 0:
            groups[names[code]].append(v)
    return {cat: fmean(vs) for cat, vs in sorted(groups.items())}


def _overall(datasets: Mapping[str, DatasetSummary], names: Sequence[str]) -> Overall | None:
    """The macro average of each candidate's per-dataset headlines; None for a candidate missing a headline on
    some dataset (an average over fewer datasets would not compare). Datasets whose rows are judges (a judge
    meta-evaluation) are not averaged; with no other dataset there is no overall."""
    out = {}
    # not a judge meta-evaluation (a metric this version does not know: as before)
    datasets = {n: d for n, d in datasets.items() if registry.section_of(d.metric).rows == "candidate"}
    if not datasets:
        return None
    for name in names:
        got = [d.candidates[name].score for d in datasets.values() if name in d.candidates]
        values = [v for v in got if v is not None]
        score = fmean(values) if values and len(values) == len(datasets) else None
        out[name] = MacroScore(score=score, datasets=len(values))
    return Overall(datasets=tuple(datasets), candidates=out)


@dataclass(slots=True)
class _JudgeCounts:
    met: int = 0
    judged: int = 0  # met or not met
    errors: int = 0


class AgreementCounts:
    """Judge agreement you can act on: per judge pair (Cohen's kappa), per criterion (Krippendorff's alpha), the
    criteria the judges disagree on most; error votes carry no verdict and are left out of every figure. A *unit* is
    one criterion of one response that two or more judges voted on (`Judgment.votes`); a criterion is identified by
    its text (per-example rubrics, HealthBench's, reuse ids such as `c1` for different texts). Fed judgments as they
    come and kept as counts (issue 13): memory depends on the judges, compositions and criterion texts seen, not on
    the number of judgments. `per_judge`: judge -> met / judged / errors, over every vote (a judgment without votes:
    its own verdict; judge-free `auto:` verdicts left out). Of the judgments that carry votes: `units`, their valid verdicts as a composition (a judgment whose votes all
    failed counts too, with an empty one); `ties_to_error`, those whose combined verdict is error; `pairs`: (judge
    a, judge b) -> (verdict a, verdict b) -> units; `criteria`: criterion text -> composition -> units with >= 2
    valid votes, and `first_id` the first criterion id seen for each text."""

    def __init__(self) -> None:
        self.per_judge: defaultdict[str, _JudgeCounts] = defaultdict(_JudgeCounts)
        self.units: Counter[stats.Composition] = Counter()
        self.ties_to_error = 0
        self.pairs: defaultdict[tuple[str, str], Counter[tuple[str, str]]] = defaultdict(Counter)
        self.criteria: defaultdict[str, Counter[stats.Composition]] = defaultdict(Counter)
        self.first_id: dict[str, str] = {}

    def add(self, judgments: Sequence[Judgment], criteria: Mapping[tuple[str, str], Criterion]) -> None:
        """Judgments, and the criteria they were judged on by (example id, criterion id), where known."""
        for j in judgments:
            if j.judge.startswith("auto:"):
                continue
            for v in j.votes or ({"judge": j.judge, "verdict": j.verdict},):
                counts = self.per_judge[v["judge"]]
                if v["verdict"] == "error":
                    counts.errors += 1
                else:
                    counts.met += v["verdict"] == "met"
                    counts.judged += 1
            if not j.votes:
                continue
            self.units[stats.composition(v["verdict"] for v in j.votes if v["verdict"] != "error")] += 1
            self.ties_to_error += j.verdict == "error"
            votes = {v["judge"]: v["verdict"] for v in j.votes if v["verdict"] != "error"}  # judge -> valid verdict
            for a, b in combinations(sorted(votes), 2):
                self.pairs[(a, b)][(votes[a], votes[b])] += 1
            if len(votes) >= 2:
                criterion = criteria.get((j.example_id, j.criterion_id))
                text = criterion.text if criterion is not None else j.criterion_id
                self.first_id.setdefault(text, j.criterion_id)
                self.criteria[text][stats.composition(votes.values())] += 1

    def summary(self, top: int = MOST_DISAGREED) -> JudgeSummary:
        """summary.json's `judges`: met rates per judge; agreement where judgments carry votes: per pair of judges
        that voted together, per criterion text, and `most_disagreed`, the `top` criteria with the highest split
        rate (then more units, then lower alpha) among those where the judges split at least once."""
        per = {
            name: JudgeRates(met_rate=rounded(stats.rate(c.met, c.judged)), judged=c.judged, errors=c.errors)
            for name, c in sorted(self.per_judge.items())
        }
        if not self.units:
            return JudgeSummary(per_judge=per)
        pairs = []
        for (a, b), verdicts in sorted(self.pairs.items()):
            n = sum(verdicts.values())
            agree = sum(k for (x, y), k in verdicts.items() if x == y)
            pairs.append(JudgePairAgreement(a, b, n, rounded(agree / n), rounded(cohen_kappa_counts(verdicts))))
        criteria = []
        for text, units in sorted(self.criteria.items()):
            n = sum(units.values())
            split = sum(k for comp, k in units.items() if len(comp) > 1)
            criteria.append(
                CriterionAgreement(
                    criterion_id=self.first_id[text],
                    text=text,
                    units=n,
                    split_rate=rounded(split / n),
                    percent_agreement=rounded(stats.percent_agreement_counts(units)),
                    krippendorff_alpha=rounded(stats.krippendorff_alpha_counts(units)),
                )
            )
        worst = sorted(
            (c for c in criteria if c.split_rate),
            key=lambda c: (-c.split_rate, -c.units, c.krippendorff_alpha or 0.0, c.text),  # type: ignore[operator]
        )
        overall = Agreement(
            criteria_with_votes=self.units.total(),
            percent_agreement=rounded(stats.percent_agreement_counts(self.units)),
            fleiss_kappa=rounded(stats.fleiss_kappa_counts(self.units)),
            krippendorff_alpha=rounded(stats.krippendorff_alpha_counts(self.units)),
            ties_to_error=self.ties_to_error,
            pairs=tuple(pairs),
            criteria=tuple(criteria),
            most_disagreed=tuple(worst[:top]),
        )
        return JudgeSummary(per_judge=per, agreement=overall)


_COUNTS = ("calls", "cached", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "cached_completion_tokens")


def cost_report(
    by_model: Mapping[tuple[str, str], Mapping[str, int]],
    prices: Mapping[str, Price],
    provider_usd: Mapping[tuple[str, str], float] | None = None,
) -> CostSummary:
    """summary.json's "costs": per model and role, from the tracer's token counts; `provider_usd` is what the
    provider itself reported for the paid calls, by (role, model) (None where it reported nothing)."""
    provider_usd = provider_usd or {}
    rows: dict[str, ModelCost] = {}
    total = saved = 0.0
    unpriced = []
    for (role, model), c in sorted(by_model.items()):
        paid = call_cost(model, c["prompt_tokens"], c["completion_tokens"], prices)
        cached = call_cost(model, c["cached_prompt_tokens"], c["cached_completion_tokens"], prices)
        if paid is None:
            unpriced.append(model)
        total += paid or 0.0
        saved += cached or 0.0
        rows[f"{role}:{model}"] = ModelCost(
            role=role,
            model=model,
            **{k: c[k] for k in _COUNTS},
            usd=None if paid is None else round(paid, 6),
            saved_usd=None if cached is None else round(cached, 6),
            provider_usd=round(provider_usd[(role, model)], 6) if (role, model) in provider_usd else None,
        )
    return CostSummary(
        total_usd=round(total, 6),
        saved_usd=round(saved, 6),
        provider_total_usd=round(sum(provider_usd.values()), 6) if provider_usd else None,
        by_model=rows,
        unpriced=tuple(sorted(set(unpriced))),
    )


def log_summary(summary: Summary) -> None:
    """The console's closing lines: calls, then one line per dataset and candidate (its own metric, never a
    score blended across datasets), then per pair of candidates and dataset and the dataset's position bias."""
    if summary.note:
        log.info("%s", summary.note)
    if summary.calls is not None:
        c = summary.calls
        log.info("calls: %d made, %d from cache, %d failed attempts", c.made, c.cache_hits, c.errors)
    for name, d in summary.datasets.items():
        console = registry.section_of(d.metric).console
        if console is not None:  # the metric's own lines (a judge meta-evaluation: one per judge)
            for line in console(name, summary_data(d)):
                log.info("%s", line)
            continue
        for cand, r in d.candidates.items():
            head = f"{name:<20} {cand:<16}"
            if summary.note and not r.scored:  # a generation run: a score line of dashes would read as a failure
                log.info("%s not scored", head)
                continue
            scored = f"{figure(r.score)} {interval(r.ci)}  n {r.n}  coverage {figure(r.coverage)}  partial {r.partial}"
            log.info("%s %-11s %s", head, d.metric, scored)
            if r.extra.get("rating") is not None:  # graded scales: the same result on its own scale
                rating = f"{figure(r.extra['rating'])} on {r.extra.get('scale')} {interval(r.extra.get('rating_ci'))}"
                log.info("%s rating %s", head, rating)
            if r.ppi:
                log.info("%s %s", head, anchored_line(r.ppi))
        for line in dataset_lines(d):
            log.info("%-20s %s", name, line)
    for name, pj in (summary.pairwise_judging or {}).items():
        for p in pj.pairs:
            head = f"{name:<20} pairwise {p.a} vs {p.b}:"
            rates = f"win {figure(p.win_rate)} tie {figure(p.tie_rate)} loss {figure(p.loss_rate)}  n {p.n}"
            lc_why = f" ({p.lc_note})" if p.lc_note else " (one side always longer)" if p.lc_one_side_longer else ""
            lc = f"LC win {figure(p.lc_win_rate)} ± {figure(p.lc_win_rate_se)}{lc_why}"
            log.info("%s %s  errors %d  %s  longer won %s", head, rates, p.errors, lc, figure(p.longer_share))
            if p.ppi:
                log.info("%s win rate %s", head, anchored_line(p.ppi, "comparisons"))
        bias = figure(pj.position_bias)
        log.info("%-20s pairwise position bias %s (%d decisive verdicts)", name, bias, pj.decisive_verdicts)
