"""Issue 13: the agreement statistics from counts (results/summary.AgreementCounts, stats.*_counts) equal the
list-based definitions over the full list of judgments, and the summary's judge accumulator keeps counts whose
size does not grow with the number of judgments."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from itertools import combinations
from typing import Any

import oracles
import pytest
from msgspec.structs import replace
from test_agreement import unit

from rubricrun.results import stats
from rubricrun.results.summary import AgreementCounts
from rubricrun.tasks.judge_eval import cohen_kappa_counts
from rubricrun.types import Criterion, Judgment

# ---------------------------------------------------------------------------------------------------------------
# The list-based definitions as they were before issue 13 (one pass over every unit), the oracle here.


def ref_percent_agreement(items: Sequence[Sequence[Hashable]]) -> float | None:
    shares = [
        sum(c * (c - 1) for c in Counter(item).values()) / (len(item) * (len(item) - 1))
        for item in items
        if len(item) >= 2
    ]
    return math.fsum(shares) / len(shares) if shares else None


def ref_fleiss_kappa(items: Sequence[Sequence[Hashable]], categories: Sequence[Hashable] = ("met", "not_met")):
    sizes = Counter(len(item) for item in items if len(item) >= 2)
    if not sizes:
        return None
    n = max(sizes, key=lambda size: (sizes[size], size))
    used = [Counter(item) for item in items if len(item) == n]
    if len(used) < 2:
        return None
    big_n = len(used)
    p_e = sum((sum(c[cat] for c in used) / (big_n * n)) ** 2 for cat in set(categories))
    if 1.0 - p_e <= 1e-12:
        return None
    p_bar = math.fsum((sum(v * v for v in c.values()) - n) / (n * (n - 1)) for c in used) / big_n
    return (p_bar - p_e) / (1.0 - p_e)


def ref_krippendorff(items: Sequence[Sequence[Hashable]]) -> float | None:
    observed = 0.0
    totals: Counter[Hashable] = Counter()
    for item in items:
        if len(item) < 2:
            continue
        counts = Counter(item)
        observed += (len(item) ** 2 - sum(v * v for v in counts.values())) / (len(item) - 1)
        totals.update(counts)
    n = sum(totals.values())
    expected = n * n - sum(v * v for v in totals.values())
    return None if n == 0 or expected == 0 else 1.0 - (n - 1) * observed / expected


def ref_cohen(pairs: Sequence[tuple[str, str]]) -> float | None:
    n = len(pairs)
    if n == 0:
        return None
    p_o = sum(a == b for a, b in pairs) / n
    ca, cb = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    p_e = sum(ca[c] * cb[c] for c in ca) / (n * n)
    return None if 1.0 - p_e <= 1e-12 else (p_o - p_e) / (1.0 - p_e)


def ref_units(judgments: Sequence[Judgment], criteria: dict[tuple[str, str], Criterion]):
    """Every voted judgment's valid verdicts; per judge pair the verdict pairs; per text its units and first id."""
    items = [[v["verdict"] for v in j.votes if v["verdict"] != "error"] for j in judgments if j.votes]
    pairs: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    by_text: dict[str, list[list[str]]] = defaultdict(list)
    first: dict[str, str] = {}
    for j in judgments:
        votes = {v["judge"]: v["verdict"] for v in j.votes if v["verdict"] != "error"}
        for a, b in combinations(sorted(votes), 2):
            pairs[(a, b)].append((votes[a], votes[b]))
        if len(votes) >= 2:
            c = criteria.get((j.example_id, j.criterion_id))
            text = c.text if c else j.criterion_id
            first.setdefault(text, j.criterion_id)
            by_text[text].append(list(votes.values()))
    return items, pairs, by_text, first


# ---------------------------------------------------------------------------------------------------------------


def judgment(eid: str, cid: str, votes: Sequence[tuple[str, str]], verdict: str) -> Judgment:
    """test_agreement's unit, with votes that may repeat a judge and the verdict given."""
    return replace(
        unit(eid, cid, {}),
        judge="+".join(j for j, _ in votes),
        verdict=verdict,  # type: ignore[arg-type]
        votes=tuple({"judge": j, "verdict": v, "explanation": "x", "error": None} for j, v in votes),
    )


def random_panel(rng: random.Random, examples: int) -> tuple[list[list[Judgment]], dict[tuple[str, str], Criterion]]:
    """Per example its judgments: a panel of 1-5 judges drawn from 6 votes met / not_met / error on 1-4 criteria.
    Criterion ids repeat with different texts across examples (per-example rubrics), some are unknown to
    `criteria`, a few judgments carry no votes and a judge now and then votes twice."""
    judges = [f"j{i}" for i in range(6)]
    texts = ["Says hi.", "Names the dose.", "Warns of risks.", "Cites a source."]
    criteria: dict[tuple[str, str], Criterion] = {}
    out = []
    for e in range(examples):
        eid = f"e{e}"
        js = []
        for c in range(rng.randint(1, 4)):
            cid = f"c{c}"
            if rng.random() < 0.9:
                criteria[(eid, cid)] = Criterion(cid, rng.choice(texts))
            panel = rng.sample(judges, rng.randint(1, 5))
            if rng.random() < 0.05:
                panel.append(panel[0])
            weights = rng.choice([(5, 4, 1), (1, 1, 1), (9, 1, 0), (1, 9, 2)])
            votes = [(j, rng.choices(("met", "not_met", "error"), weights)[0]) for j in panel]
            if rng.random() < 0.05:
                votes = []
            js.append(judgment(eid, cid, votes, rng.choice(("met", "not_met", "error"))))
        out.append(js)
    return out, criteria


def close(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 1e-12)


@pytest.mark.parametrize("seed", range(40))
def test_counts_equal_the_list_definitions_over_random_panels(seed: int) -> None:
    rng = random.Random(seed)
    by_example, criteria = random_panel(rng, rng.choice([1, 3, 20, 200]))
    everything = [j for js in by_example for j in js]
    acc = AgreementCounts()
    for js in by_example:  # as SummaryAcc feeds it: one example at a time
        acc.add(js, {k: v for k, v in criteria.items() if k[0] == js[0].example_id})
    counts = acc
    items, pairs, by_text, first = ref_units(everything, criteria)

    assert counts.units.total() == len(items)
    assert counts.ties_to_error == sum(1 for j in everything if j.votes and j.verdict == "error")
    for got, want in [
        (stats.percent_agreement_counts(counts.units), ref_percent_agreement(items)),
        (stats.fleiss_kappa_counts(counts.units), ref_fleiss_kappa(items)),
        (stats.krippendorff_alpha_counts(counts.units), ref_krippendorff(items)),
        (oracles.percent_agreement(items), ref_percent_agreement(items)),
        (oracles.fleiss_kappa(items), ref_fleiss_kappa(items)),
        (oracles.krippendorff_alpha_nominal(items), ref_krippendorff(items)),
    ]:
        assert close(got, want), (got, want)
    assert set(counts.pairs) == set(pairs)
    for key, verdicts in pairs.items():
        assert counts.pairs[key].total() == len(verdicts)
        assert close(cohen_kappa_counts(counts.pairs[key]), ref_cohen(verdicts))
        assert close(oracles.cohen_kappa(verdicts), ref_cohen(verdicts))
    assert set(counts.criteria) == set(by_text) and counts.first_id == first
    for text, units in by_text.items():
        assert close(stats.percent_agreement_counts(counts.criteria[text]), ref_percent_agreement(units))
        assert close(stats.krippendorff_alpha_counts(counts.criteria[text]), ref_krippendorff(units))
    # The summary's judge statistics are the accumulated ones.
    assert oracles.judge_stats(everything, criteria) == acc.summary()


def test_fleiss_counts_reject_an_unknown_category_as_the_list_form_does() -> None:
    with pytest.raises(ValueError, match="not in categories"):
        stats.fleiss_kappa_counts(oracles.compositions([["met", "error"], ["met", "met"]]))


def footprint(obj: Any, seen: set[int] | None = None) -> int:
    """Entries held in containers reachable from `obj`'s attributes; fails on any Judgment in there."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, str | int | float | bool | type(None)):
        return 0
    seen.add(id(obj))
    assert not isinstance(obj, Judgment), "the accumulator holds a Judgment"
    if isinstance(obj, dict):
        return len(obj) + sum(footprint(k, seen) + footprint(v, seen) for k, v in obj.items())
    if isinstance(obj, list | tuple | frozenset | set):
        return len(obj) + sum(footprint(x, seen) for x in obj)
    if hasattr(obj, "__dict__"):
        return sum(footprint(v, seen) for v in vars(obj).values())
    return 0


def test_judge_accumulator_memory_does_not_grow_with_the_judgments() -> None:
    # 3 judges on 5 criteria (one shared text each), random verdicts: 100 examples and 10,000 hold the same
    # kinds of keys, so the same few counters; the old accumulator kept one slim Judgment per voted unit.
    crits = [Criterion(f"c{i}", f"criterion {i}") for i in range(5)]

    def fed(examples: int) -> AgreementCounts:
        rng = random.Random(7)
        acc = AgreementCounts()
        for e in range(examples):
            eid = f"e{e}"
            js = [
                judgment(eid, c.id, [(j, rng.choice(("met", "not_met", "error"))) for j in ("a", "b", "c")], "met")
                for c in crits
            ]
            acc.add(js, {(eid, c.id): c for c in crits})
        return acc

    small, big = fed(100), fed(10_000)
    assert footprint(big) <= footprint(small) + 10  # the 100-example run may not have met every composition yet
    assert big.units.total() == 50_000
    # Compositions of up to 3 verdicts in 2 categories: at most 1 + 2 + 3 + 4 = 10 keys; per judge pair at most 4
    # verdict pairs; per criterion text at most 3 + 4 compositions of 2 or 3 verdicts.
    assert len(big.units) <= 10 and len(big.pairs) == 3 and len(big.criteria) == 5
    assert all(len(p) <= 4 for p in big.pairs.values())
    assert all(len(c) <= 7 for c in big.criteria.values())
