"""Scores anchored to human labels (issue 31): prediction-powered inference on a dataset's own metric.

The unit is a response (an example's answer, one turn of it, or one of its samples). For each candidate, Y is the
dataset's per-response value computed from the human verdicts and Yhat the same value from the judge's, both by
the metric's own code (`metrics.response_values`, the benchmark module's `values`); a response enters when the
judge-only score counts it (scored, as `on_error` says), labelled when the humans gave a verdict on every criterion
it is scored on. results/ppi.py gives the PPI++ estimate and its 95 % interval, and the metric's clip (HealthBench's
[0, 1], PRBench's floor at 0) is applied to the estimate and both ends, as to the judge-only headline.

Several raters on one item: the majority of their `met` (an even split is left out and counted as a tie), the
mean of their `score` on a graded scale, the plurality of their `preferred` (a tie for first is left out). Beside
each estimate: the labelled responses alone (classical), the judge-only headline, how many labels alone would give
the same width, the label budget, and each judge's agreement with the humans on the labelled items
(tasks/judge_eval.py, the judge meta-evaluation's figures). Every two candidates get a paired difference over the
response pairs both have (same example, turn and sample), and a pairwise comparison with `pair_id` labels gets its
win rate anchored the same way (results/pairwise.py's rows; a tie or a loss is 0, as in `win_rate`).
"""

from __future__ import annotations

import logging
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from msgspec import UNSET
from msgspec.structs import replace

from ..config import Config
from ..data.labels import LabelFile, label_paths, load_labels
from ..errors import InputError
from ..judging.protocol import SCALES, verdict_for
from ..tasks import registry
from ..tasks.judge_eval import judge_agreement, majority
from ..tasks.spec import DatasetResult, Metric, figure, interval
from ..types import Criterion, Example, Judgment, PairJudgment, Response
from . import metrics, ppi, stats
from .metrics import expected_criteria, response_values, verdicts_for
from .ppi import Anchored, AnchoredDiff, Estimate, JudgeOnLabels, LabelBudget, LabelCounts
from .summary_types import DatasetSummary, PairOutcome, PairwiseJudging

MIN_LABELS = 2  # labelled units an estimate needs (one gives no spread)
_VERDICT = {"met": True, "not_met": False}  # error: None
Unit = tuple[int, int]  # (turn, sample index) of a response within its example
log = logging.getLogger("rubricrun")


@dataclass
class _Values:
    """One candidate's (or one pair's) units so far: the labelled ones' human and judge values, the others' judge
    values, and per judge its verdicts on the labelled items beside the humans' labels."""

    y: array = field(default_factory=lambda: array("d"))
    yhat: array = field(default_factory=lambda: array("d"))
    yhat_unl: array = field(default_factory=lambda: array("d"))
    judges: dict[str, tuple[list[bool | None], list[list[bool]]]] = field(default_factory=dict)

    def add(self, yhat: float, y: float | None) -> None:
        if y is None:
            self.yhat_unl.append(yhat)
        else:
            self.y.append(y)
            self.yhat.append(yhat)


def resolve(votes: Mapping[str, bool | float]) -> bool | float | None:
    """The raters' verdict on one item: the majority of met (None on an even split), the mean of scores."""
    values = list(votes.values())
    if all(isinstance(v, bool) for v in values):
        return majority(values)  # type: ignore[arg-type]
    return sum(values) / len(values)


def preferred(votes: Mapping[str, str]) -> str | None:
    """The raters' preference on one comparison: the most frequent one, None when two share the top count."""
    top = Counter(votes.values()).most_common(2)
    return None if len(top) > 1 and top[0][1] == top[1][1] else top[0][0]


class AnchorAcc:
    """One dataset with a labels file, fed example by example (as metrics.DatasetAcc is, with the same criteria):
    per candidate its units' values (`_Values`), per two candidates the differences of the units both have."""

    def __init__(
        self, labels: LabelFile, spec: Metric, on_error: str, candidates: Sequence[str], *, n_boot: int, seed: int
    ) -> None:
        self.labels, self.spec, self.on_error = labels, spec, on_error
        self.n_boot, self.seed = n_boot, seed
        self.labelled: dict[str, list[str]] = defaultdict(list)  # response id -> its labelled criterion ids
        for rid, cid in labels.verdicts:
            self.labelled[rid].append(cid)
        self.cands = {c: _Values() for c in candidates}
        self.pairs = {(a, b): _Values() for a, b in combinations(candidates, 2)}
        self.seen: set[str] = set()  # labelled responses this dataset has
        self.matched: set[tuple[str, str]] = set()  # labelled items of criteria their response is scored on
        self.counts: Counter[str] = Counter()

    def add(
        self,
        ex: Example,
        responses: Sequence[Response],
        judgments: Sequence[Judgment],
        criteria: Sequence[Criterion] | None = None,
    ) -> None:
        crit = expected_criteria(ex, judgments, criteria)
        by_response: dict[str, list[Judgment]] = defaultdict(list)
        for j in judgments:
            by_response[j.response_id].append(j)
        units: dict[str, dict[Unit, tuple[float, float | None]]] = defaultdict(dict)
        for r in responses:
            values = self.cands.get(r.candidate)
            if values is None:
                continue
            js = by_response.get(r.id, ())
            y = self._human(ex, crit, r, js, values) if r.id in self.labelled else None
            yhat = self._judged(ex, crit, r, js) if r.status == "ok" else None
            if yhat is None:
                self.counts["not_scored"] += y is not None
                continue
            values.add(yhat, y)
            units[r.candidate][(r.turn, r.sample_index)] = (yhat, y)
        for (a, b), diffs in self.pairs.items():
            for unit, (yhat_a, y_a) in units.get(a, {}).items():
                if unit in units.get(b, {}):
                    yhat_b, y_b = units[b][unit]
                    diffs.add(yhat_a - yhat_b, None if y_a is None or y_b is None else y_a - y_b)

    def _judged(self, ex: Example, crit: Sequence[Criterion], r: Response, js: Sequence[Judgment]) -> float | None:
        """The judge's value of the response, as metrics.DatasetAcc scores it (None: not in the judge-only score)."""
        met, _ = verdicts_for(crit, {j.criterion_id: j.verdict for j in js}, self.on_error)
        if met is None:
            return None
        scores = {j.criterion_id: j.score for j in js if j.score is not None}
        return response_values(self.spec, ex, crit, met, r.turn, scores).get("score")

    def _human(
        self, ex: Example, crit: Sequence[Criterion], r: Response, js: Sequence[Judgment], values: _Values
    ) -> float | None:
        """The humans' value of the response (None unless every criterion has a verdict), and each judge's verdicts on
        its labelled items beside the humans' labels."""
        self.seen.add(r.id)
        verdicts: dict[str, bool | float] = {}
        items = 0
        for c in crit:
            votes = self.labels.verdicts.get((r.id, c.id))
            if votes is None:
                continue
            self.matched.add((r.id, c.id))
            items += 1
            self._agreement(values, [j for j in js if j.criterion_id == c.id], votes)
            v = resolve(votes)
            if v is None:
                self.counts["ties"] += 1
            else:
                verdicts[c.id] = v
        self.counts["items"] += items
        if len(verdicts) < len(crit):
            self.counts["partial"] += items > 0  # a criterion unlabelled, or its raters split evenly
            return None
        if self.spec.scale in SCALES:
            scores = {cid: float(v) for cid, v in verdicts.items()}
            met = [verdict_for(scores[c.id], self.spec.scale) == "met" for c in crit]
            return response_values(self.spec, ex, crit, met, r.turn, scores).get("score")
        return response_values(self.spec, ex, crit, [bool(verdicts[c.id]) for c in crit], r.turn, {}).get("score")

    def _agreement(self, values: _Values, js: Sequence[Judgment], votes: Mapping[str, bool | float]) -> None:
        """Each judge's verdict on one labelled item beside the raters' labels (met / not met)."""
        scale = self.spec.scale
        humans = [v if isinstance(v, bool) else verdict_for(v, scale) == "met" for v in votes.values()]
        for j in js:
            for vote in j.votes or ({"judge": j.judge, "verdict": j.verdict},):
                column = values.judges.setdefault(vote["judge"], ([], []))
                column[0].append(_VERDICT.get(vote["verdict"]))
                column[1].append(humans)

    def result(
        self,
        result: DatasetResult,
        half_width: float,
        pairs: Sequence[PairOutcome] = (),
        rows: Sequence[PairJudgment] = (),
    ) -> tuple[dict[str, Anchored], tuple[AnchoredDiff, ...], LabelCounts, tuple[PairOutcome, ...]]:
        """Per candidate its anchored score, per two candidates their anchored difference, the label counts, and
        the dataset's pairwise outcomes with their anchored win rates (`rows`: its pairwise rows)."""
        cands = result.candidates
        clip = self.spec.clip
        out = {
            c: anchored(v, clip, Estimate(cands[c].score, cands[c].ci), half_width, self.spec.scale, self._judges(v))
            for c, v in self.cands.items()
            if c in cands
        }
        diffs = tuple(self._diff(a, b, v, result) for (a, b), v in self.pairs.items() if a in cands and b in cands)
        anchored_pairs, used, unknown = self._pairwise(pairs, rows, half_width)
        counts = self._counts(sum(len(v.y) for v in self.cands.values()), used, unknown)
        return out, diffs, counts, anchored_pairs

    def _judges(self, v: _Values) -> dict[str, JudgeOnLabels]:
        out = {}
        for judge, (verdicts, humans) in sorted(v.judges.items()):
            e = judge_agreement(verdicts, humans, n_boot=self.n_boot, seed=self.seed)
            out[judge] = JudgeOnLabels(
                items=e.rows - e.failures - e.no_labels,
                balanced_f1=e.overall.f1_balanced.value,
                ci=e.overall.ci or (None, None),
                kappa=e.kappa,
                kappa_ties=e.kappa_ties,
                leniency=e.leniency,
                judge_met=e.judge_met,
                human_met=e.human_met,
                failures=e.failures,
            )
        return out

    def _diff(self, a: str, b: str, v: _Values, result: DatasetResult) -> AnchoredDiff:
        pe = result.per_example
        judged = stats.paired_diff(pe.get(a, {}), pe.get(b, {}), n_boot=self.n_boot, seed=self.seed)
        judge_only = Estimate(judged["mean_diff"], (judged["ci_low"], judged["ci_high"]))
        if len(v.y) < MIN_LABELS:
            return AnchoredDiff(
                a=a,
                b=b,
                estimate=None,
                ci=(None, None),
                n_labelled=len(v.y),
                n_unlabelled=len(v.yhat_unl),
                lam=None,
                judge_only=judge_only,
                note=_too_few(len(v.y), "response pairs"),
            )
        m = ppi.ppi_mean(v.y, v.yhat, v.yhat_unl)
        note = f"the {m.n} labelled differences do not vary: no width to measure; label more" if m.se == 0 else None
        return AnchoredDiff(
            a=a,
            b=b,
            estimate=m.estimate,
            ci=m.ci,
            n_labelled=m.n,
            n_unlabelled=m.N,
            lam=m.lam,
            judge_only=judge_only,
            note=note,
        )

    def _pairwise(
        self, pairs: Sequence[PairOutcome], rows: Sequence[PairJudgment], half_width: float
    ) -> tuple[tuple[PairOutcome, ...], int, int]:
        """Each comparison of candidates with its win rate anchored to the human preferences (ties, as win_rate
        counts them, are not wins); the preferences used and those naming no comparison of the dataset."""
        prefs = self.labels.preferences
        by_pair: dict[tuple[str, str], _Values] = defaultdict(_Values)
        known, ties = set(), 0
        for row in rows:
            known.add(row.id)
            if row.winner == "error":  # out of the judge-only win rate too
                continue
            votes = prefs.get(row.id)
            human = preferred(votes) if votes else None
            ties += bool(votes) and human is None
            by_pair[(row.a, row.b)].add(float(row.winner == row.a), None if human is None else float(human == row.a))
        self.counts["ties"] += ties
        out = tuple(
            replace(p, ppi=anchored(by_pair[(p.a, p.b)], float, Estimate(p.win_rate, p.win_ci), half_width, "binary"))
            if (p.a, p.b) in by_pair
            else p
            for p in pairs
        )
        return out, sum(len(v.y) for v in by_pair.values()), sum(1 for pid in prefs if pid not in known)

    def _counts(self, responses: int, pairs: int, unknown_pair: int) -> LabelCounts:
        lab, c = self.labels, self.counts
        unknown_response = sum(1 for rid, _ in lab.verdicts if rid not in self.seen)
        return LabelCounts(
            file=lab.path,
            rows=lab.rows,
            blank=lab.blank,
            superseded=lab.superseded,
            items=c["items"],
            ties=c["ties"],
            responses=responses,
            partial=c["partial"],
            not_scored=c["not_scored"],
            unknown_response=unknown_response,
            unknown_criterion=len(lab.verdicts) - unknown_response - len(self.matched),
            pairs=pairs,
            unknown_pair=unknown_pair,
        )


def _too_few(n: int, what: str = "responses") -> str:
    return f"{n} labelled {what}: an anchored estimate needs at least {MIN_LABELS}"


def anchored(
    v: _Values,
    clip: Callable[[float], float],
    judge_only: Estimate,
    half_width: float,
    scale: str,
    judges: dict[str, JudgeOnLabels] | None = None,
) -> Anchored:
    """The PPI++ estimate of one candidate's (or comparison's) mean, with everything beside it."""
    n, N = len(v.y), len(v.yhat_unl)  # noqa: N806
    if n < MIN_LABELS:
        return Anchored(
            estimate=None,
            ci=(None, None),
            n_labelled=n,
            n_unlabelled=N,
            lam=None,
            classical=Estimate(),
            judge_only=judge_only,
            judge_outside=False,
            effective_labels=None,
            judges=judges or {},
            note=_too_few(n),
        )
    m = ppi.ppi_mean(v.y, v.yhat, v.yhat_unl)
    c = ppi.classical_mean(v.y)
    lo, hi = clip(m.ci[0]), clip(m.ci[1])
    budget, note = None, None
    if m.se == 0:  # a normal interval of no width: it measures nothing (ppi_py gives it too)
        note = f"the {n} labelled values do not vary (nor the judge's on them): no width to measure; label more"
    else:
        needed = ppi.labels_needed(v.y, v.yhat, n + N, half_width)
        budget = LabelBudget(half_width, needed, None if needed is None else max(0, needed - n))
    rating = None
    if scale in SCALES:
        s_lo, s_hi = SCALES[scale]
        on_scale = lambda x: s_lo + (s_hi - s_lo) * clip(x)  # noqa: E731
        rating = Estimate(on_scale(m.estimate), (on_scale(m.ci[0]), on_scale(m.ci[1])))
    j = judge_only.estimate
    return Anchored(
        estimate=clip(m.estimate),
        ci=(lo, hi),
        n_labelled=n,
        n_unlabelled=N,
        lam=m.lam,
        classical=Estimate(clip(c.estimate), (clip(c.ci[0]), clip(c.ci[1]))),
        judge_only=judge_only,
        judge_outside=m.se > 0 and j is not None and not lo <= j <= hi,
        effective_labels=ppi.effective_labels(v.y, m.se),
        budget=budget,
        rating=rating,
        judges=judges or {},
        note=note,
    )


def check_labels(cfg: Config, counts: dict[str, Counter[str]]) -> None:
    """Preflight's check: every `datasets[].labels` file read as the summary will read it (data/labels.py): a
    malformed row is bad input, and so is a labels file where nothing could use it (a metric whose rows carry their
    own labels, or pairwise verdicts without judging.pairwise)."""
    paths = label_paths(cfg)
    if not paths:
        return
    metric_of = metrics.dataset_metrics(cfg, counts)
    scales = {}
    for name, (i, _) in paths.items():
        if name not in metric_of:
            continue
        spec = registry.metric(metric_of[name])
        if spec.accumulator is not None:
            raise cfg.fail(f"datasets[{i}].labels", f"{spec.name} reads the human labels its rows carry: remove it")
        scales[name] = SCALES.get(spec.scale)
    for name, labels in load_labels(cfg, scales).items():
        if labels.preferences and cfg.judging.pairwise is None:
            key = f"datasets[{paths[name][0]}].labels"
            raise cfg.fail(key, f"{labels.path} has pairwise verdicts (pair_id) but judging.pairwise is not set")


# ---------------------------------------------------------------------------------------------------
# The summary's part (results/summary.py): the labelled datasets, their results, their console lines


def anchors_for(cfg: Config, datasets: Mapping[str, Any]) -> dict[str, AnchorAcc]:
    """An AnchorAcc per dataset with a labels file whose rows are candidates' responses (a judge meta-evaluation's
    rows carry their own labels: preflight refuses a labels file there). A labels file that became unreadable
    since preflight checked it leaves the run without anchored scores, logged: the rows are written already."""
    paths = label_paths(cfg)
    labelled = {n: d for n, d in datasets.items() if n in paths and isinstance(d, metrics.DatasetAcc)}
    if not labelled:
        return {}
    try:
        files = load_labels(cfg, {n: SCALES.get(d.spec.scale) for n, d in labelled.items()})
    except InputError as exc:
        log.error("no scores anchored to human labels: %s", exc)
        return {}
    names, n_boot, seed = [c.name for c in cfg.candidates], cfg.run.bootstrap_samples, cfg.run.seed
    return {
        n: AnchorAcc(f, labelled[n].spec, labelled[n].on_error, names, n_boot=n_boot, seed=seed)
        for n, f in files.items()
    }


def anchor_results(
    cfg: Config,
    anchors: Mapping[str, AnchorAcc],
    results: Mapping[str, DatasetResult],
    datasets: dict[str, DatasetSummary],
    pairwise: dict[str, PairwiseJudging] | None,
    pairs: Sequence[PairJudgment],
    dataset_of: Mapping[str, str],
) -> None:
    """Each labelled dataset's anchored scores into `datasets` (and its pairwise outcomes into `pairwise`)."""
    paths = label_paths(cfg)
    for name, acc in anchors.items():
        if name not in results:
            continue
        pj = (pairwise or {}).get(name)
        rows = [p for p in pairs if dataset_of.get(p.example_id) == name] if pj else []
        half_width = cfg.datasets[paths[name][0]].label_half_width
        per_cand, diffs, counts, outcomes = acc.result(results[name], half_width, pj.pairs if pj else (), rows)
        d = datasets[name]
        cands = {c: replace(dc, ppi=per_cand.get(c, UNSET)) for c, dc in d.candidates.items()}
        datasets[name] = replace(d, candidates=cands, labels=counts, ppi_paired=diffs or None)
        if pairwise is not None and pj is not None:
            pairwise[name] = replace(pj, pairs=outcomes)


_LEFT_OUT = ("ties", "partial", "not_scored", "unknown_response", "unknown_criterion", "unknown_pair", "blank")


def labels_line(c: LabelCounts) -> str:
    """What a labels file held and what of it was left out (counted, never fatal)."""
    left = [f"{getattr(c, k)} {k.replace('_', ' ')}" for k in _LEFT_OUT if getattr(c, k)]
    pairs = f", {c.pairs} comparisons" if c.pairs else ""
    return (
        f"labels {c.file}: {c.rows} verdicts, {c.responses} responses labelled in full{pairs}"
        f"{'; left out: ' + ', '.join(left) if left else ''}"
    )


def anchored_line(a: Anchored, units: str = "responses") -> str:
    """One candidate's score (or comparison's win rate) anchored to human labels, as the console says it."""
    j = a.judge_only
    judge = f"judge-only {figure(j.estimate)} {interval(j.ci)}"
    if a.estimate is None:
        return f"human-anchored: none ({a.note}); {judge}"
    worth = "–" if a.effective_labels is None else a.effective_labels
    out = (
        f"human-anchored {figure(a.estimate)} {interval(a.ci)} on {a.n_labelled} labelled of "
        f"{a.n_labelled + a.n_unlabelled} {units} (lambda {figure(a.lam)}, as narrow as {worth} labels alone); {judge}"
    )
    if a.judge_outside:
        out += ", outside the anchored interval"
    b = a.budget
    if b is not None:
        more = f"{b.more} more labels" if b.more is not None else f"more labels than there are {units}"
        out += f"; +/-{b.half_width:g} needs {more}"
    return out + (f" ({a.note})" if a.note else "")


def paired_line(d: AnchoredDiff) -> str:
    """Two candidates' anchored difference beside the judge-only one."""
    judge = f"judge-only {figure(d.judge_only.estimate, True)} {interval(d.judge_only.ci, True)}"
    if d.estimate is None:
        return f"{d.a} - {d.b} human-anchored: none ({d.note}); {judge}"
    return (
        f"{d.a} - {d.b} human-anchored {figure(d.estimate, True)} {interval(d.ci, True)} on {d.n_labelled} "
        f"labelled pairs of {d.n_labelled + d.n_unlabelled}; {judge}" + (f" ({d.note})" if d.note else "")
    )


def dataset_lines(d: DatasetSummary) -> list[str]:
    """A labelled dataset's console lines after its candidates': each anchored difference, then its labels' counts."""
    lines = [paired_line(diff) for diff in d.ppi_paired or ()]
    if d.labels is not None:
        lines.append(labels_line(d.labels))
    return lines
