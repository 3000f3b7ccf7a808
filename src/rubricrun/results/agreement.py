"""Judge agreement you can act on: per judge pair (Cohen's kappa) and per criterion (Krippendorff's alpha),
and the criteria on which judges disagree most. Error votes carry no verdict and are left out of every figure.

A *unit* is one criterion of one response that two or more judges voted on (`Judgment.votes`). A *criterion* is
identified by its text: per-example rubrics (HealthBench) reuse ids such as `c1` for different texts. Every figure
reads a unit only through counts (`AgreementCounts`), so memory depends on the judges, compositions and criterion
texts seen, not on the number of judgments.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import combinations

from ..tasks.judge_eval import cohen_kappa_counts as cohen_kappa_counts  # the one definition (re-exported)
from ..types import Criterion, Judgment
from .stats import Composition, composition, krippendorff_alpha_counts, percent_agreement_counts, rounded
from .summary_types import CriterionAgreement, JudgePairAgreement

MOST_DISAGREED = 10  # how many criteria `AgreementCounts.report` lists


def _valid_votes(j: Judgment) -> dict[str, str]:
    """judge -> verdict for one unit, error votes left out."""
    return {v["judge"]: v["verdict"] for v in j.votes if v["verdict"] != "error"}


class AgreementCounts:
    """What the agreement figures read of the judgments that carry votes, kept as counts.

    `units`: every voted judgment's valid verdicts as a composition (the overall figures; a judgment whose votes
    all failed counts too, with an empty one); `ties_to_error`: voted judgments whose combined verdict is error;
    `pairs`: (judge a, judge b) -> (verdict a, verdict b) -> units; `criteria`: criterion text -> composition ->
    units with >= 2 valid votes, and `first_id` the first criterion id seen for each text."""

    def __init__(self) -> None:
        self.units: Counter[Composition] = Counter()
        self.ties_to_error = 0
        self.pairs: defaultdict[tuple[str, str], Counter[tuple[str, str]]] = defaultdict(Counter)
        self.criteria: defaultdict[str, Counter[Composition]] = defaultdict(Counter)
        self.first_id: dict[str, str] = {}

    def add(self, j: Judgment, criterion: Criterion | None) -> None:
        """One judgment (nothing if it has no votes) and the criterion it was judged on, if known."""
        if not j.votes:
            return
        self.units[composition(v["verdict"] for v in j.votes if v["verdict"] != "error")] += 1
        self.ties_to_error += j.verdict == "error"
        votes = _valid_votes(j)
        for a, b in combinations(sorted(votes), 2):
            self.pairs[(a, b)][(votes[a], votes[b])] += 1
        if len(votes) < 2:
            return
        text = criterion.text if criterion is not None else j.criterion_id
        self.first_id.setdefault(text, j.criterion_id)
        self.criteria[text][composition(votes.values())] += 1

    def pair_rows(self) -> list[JudgePairAgreement]:
        """One row per pair of judges that voted together on at least one unit: n, percent agreement, kappa."""
        rows = []
        for (a, b), pairs in sorted(self.pairs.items()):
            n = sum(pairs.values())
            agree = sum(k for (x, y), k in pairs.items() if x == y)
            rows.append(JudgePairAgreement(a, b, n, rounded(agree / n), rounded(cohen_kappa_counts(pairs))))
        return rows

    def criterion_rows(self) -> list[CriterionAgreement]:
        """One row per criterion text with at least one unit: its first id, text, units, share of units where the
        judges split, percent agreement and Krippendorff's alpha over its units."""
        rows = []
        for text, units in sorted(self.criteria.items()):
            n = sum(units.values())
            split = sum(k for comp, k in units.items() if len(comp) > 1)
            rows.append(
                CriterionAgreement(
                    criterion_id=self.first_id[text],
                    text=text,
                    units=n,
                    split_rate=rounded(split / n),
                    percent_agreement=rounded(percent_agreement_counts(units)),
                    krippendorff_alpha=rounded(krippendorff_alpha_counts(units)),
                )
            )
        return rows

    def report(self, top: int = MOST_DISAGREED) -> dict[str, tuple]:
        """summary.json's `pairs` and `criteria` rows, and `most_disagreed`: the `top` criteria rows with the highest
        split rate (then more units, then lower alpha), only those where the judges split at least once."""
        rows = self.criterion_rows()
        split = [c for c in rows if c.split_rate]
        split.sort(key=lambda c: (-c.split_rate, -c.units, c.krippendorff_alpha or 0.0, c.text))  # type: ignore[operator]
        return {"pairs": tuple(self.pair_rows()), "criteria": tuple(rows), "most_disagreed": tuple(split[:top])}
