"""Judge agreement you can act on: per judge pair (Cohen's kappa) and per criterion (Krippendorff's alpha),
and the criteria on which judges disagree most. Error votes carry no verdict and are left out of every figure.

A *unit* is one criterion of one response that two or more judges voted on (`Judgment.votes`). A *criterion* is
identified by its text: per-example rubrics (HealthBench) reuse ids such as `c1` for different texts. Every figure
reads a unit only through counts (`AgreementCounts`), so memory depends on the judges, compositions and criterion
texts seen, not on the number of judgments.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from ..tasks.judge_eval import cohen_kappa_counts as cohen_kappa_counts  # the one definition (re-exported)
from ..types import Criterion, Judgment
from .stats import (
    Composition,
    composition,
    fleiss_kappa_counts,
    krippendorff_alpha_counts,
    percent_agreement_counts,
    rate,
    rounded,
)
from .summary_types import Agreement, CriterionAgreement, JudgePairAgreement, JudgeRates, JudgeSummary

MOST_DISAGREED = 10  # how many criteria `AgreementCounts.summary` lists


@dataclass(slots=True)
class _JudgeCounts:
    met: int = 0
    judged: int = 0  # met or not met
    errors: int = 0


class AgreementCounts:
    """The judges' figures fed judgments as they come, kept as counts (issue 13). `per_judge`: judge -> met / judged /
    errors, over every vote (a judgment without votes: its own verdict; judge-free `auto:` verdicts left out). Of
    the judgments that carry votes: `units`, their valid verdicts as a composition (a judgment whose votes all
    failed counts too, with an empty one); `ties_to_error`, those whose combined verdict is error; `pairs`: (judge
    a, judge b) -> (verdict a, verdict b) -> units; `criteria`: criterion text -> composition -> units with >= 2
    valid votes, and `first_id` the first criterion id seen for each text."""

    def __init__(self) -> None:
        self.per_judge: defaultdict[str, _JudgeCounts] = defaultdict(_JudgeCounts)
        self.units: Counter[Composition] = Counter()
        self.ties_to_error = 0
        self.pairs: defaultdict[tuple[str, str], Counter[tuple[str, str]]] = defaultdict(Counter)
        self.criteria: defaultdict[str, Counter[Composition]] = defaultdict(Counter)
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
            self.units[composition(v["verdict"] for v in j.votes if v["verdict"] != "error")] += 1
            self.ties_to_error += j.verdict == "error"
            votes = {v["judge"]: v["verdict"] for v in j.votes if v["verdict"] != "error"}  # judge -> valid verdict
            for a, b in combinations(sorted(votes), 2):
                self.pairs[(a, b)][(votes[a], votes[b])] += 1
            if len(votes) >= 2:
                criterion = criteria.get((j.example_id, j.criterion_id))
                text = criterion.text if criterion is not None else j.criterion_id
                self.first_id.setdefault(text, j.criterion_id)
                self.criteria[text][composition(votes.values())] += 1

    def summary(self, top: int = MOST_DISAGREED) -> JudgeSummary:
        """summary.json's `judges`: met rates per judge; agreement where judgments carry votes: per pair of judges
        that voted together, per criterion text, and `most_disagreed`, the `top` criteria with the highest split
        rate (then more units, then lower alpha) among those where the judges split at least once."""
        per = {
            name: JudgeRates(met_rate=rounded(rate(c.met, c.judged)), judged=c.judged, errors=c.errors)
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
                    percent_agreement=rounded(percent_agreement_counts(units)),
                    krippendorff_alpha=rounded(krippendorff_alpha_counts(units)),
                )
            )
        worst = sorted(
            (c for c in criteria if c.split_rate),
            key=lambda c: (-c.split_rate, -c.units, c.krippendorff_alpha or 0.0, c.text),  # type: ignore[operator]
        )
        overall = Agreement(
            criteria_with_votes=self.units.total(),
            percent_agreement=rounded(percent_agreement_counts(self.units)),
            fleiss_kappa=rounded(fleiss_kappa_counts(self.units)),
            krippendorff_alpha=rounded(krippendorff_alpha_counts(self.units)),
            ties_to_error=self.ties_to_error,
            pairs=tuple(pairs),
            criteria=tuple(criteria),
            most_disagreed=tuple(worst[:top]),
        )
        return JudgeSummary(per_judge=per, agreement=overall)
