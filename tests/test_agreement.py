"""results/summary.py's AgreementCounts against numbers computed by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import pytest
from oracles import cohen_kappa, counted

from rubricrun.results.summary_types import CriterionAgreement
from rubricrun.types import Criterion, Judgment


def unit(example: str, cid: str, votes: dict[str, str], response: str = "r") -> Judgment:
    return Judgment(
        id=f"{example}#{response}#{cid}",
        response_id=f"{example}#{response}",
        example_id=example,
        candidate="alpha",
        criterion_id=cid,
        weight=1.0,
        judge="+".join(votes),
        verdict="met",
        explanation=None,
        error=None,
        votes=tuple(
            {"judge": j, "verdict": v, "explanation": None, "error": None, "key": "k"} for j, v in votes.items()
        ),
    )


def test_cohen_kappa_by_hand() -> None:
    # 10 units. Agree on 1-4 (met) and 7-9 (not_met): p_o = 7/10.
    # Rater a: 6 met, 4 not_met; rater b: 5 met (1-4, 10), 5 not_met. p_e = (6*5 + 4*5) / 100 = 0.5.
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    m, n = "met", "not_met"
    pairs = [(m, m)] * 4 + [(m, n)] * 2 + [(n, n)] * 3 + [(n, m)]
    assert cohen_kappa(pairs) == pytest.approx(0.4, abs=1e-12)


def test_cohen_kappa_undefined_cases() -> None:
    assert cohen_kappa([]) is None
    assert cohen_kappa([("met", "met")] * 3) is None  # p_e = 1: both raters use one category only
    assert cohen_kappa([("met", "not_met"), ("not_met", "met")]) == pytest.approx(-1.0)  # p_o 0, p_e 0.5


def test_pair_agreement_skips_error_votes_and_names_each_pair() -> None:
    js = [
        unit("e1", "c1", {"j1": "met", "j2": "met", "j3": "error"}),
        unit("e2", "c1", {"j1": "met", "j2": "not_met", "j3": "met"}),
    ]
    rows = {(r.a, r.b): r for r in counted(js).summary().agreement.pairs}
    assert rows[("j1", "j2")].n == 2 and rows[("j1", "j2")].percent_agreement == 0.5
    assert rows[("j1", "j3")].n == 1  # j3's error vote on e1 is not a rating
    assert rows[("j2", "j3")].percent_agreement == 0.0


def test_criterion_agreement_by_hand_and_grouped_by_text() -> None:
    hi = Criterion("d1", "Says hi.")
    crit = {("e1", "d1"): hi, ("e2", "d1"): hi, ("e3", "d1"): hi}
    crit |= {("e1", "c1"): Criterion("c1", "Names the dose."), ("e2", "c1"): Criterion("c1", "Warns of risks.")}
    js = [
        unit("e1", "d1", {"j1": "met", "j2": "met"}),
        unit("e2", "d1", {"j1": "met", "j2": "not_met"}),
        unit("e3", "d1", {"j1": "not_met", "j2": "not_met"}),
        unit("e1", "c1", {"j1": "met", "j2": "not_met"}),
        unit("e2", "c1", {"j1": "met", "j2": "met"}),
    ]
    rows = {r.text: r for r in counted(js, crit).summary().agreement.criteria}
    assert set(rows) == {"Says hi.", "Names the dose.", "Warns of risks."}  # c1 is two criteria, d1 one
    hi_row = rows["Says hi."]
    # Units [m, m], [m, n], [n, n]: split 1/3; percent agreement mean(1, 0, 1) = 2/3.
    # Krippendorff: observed = 0 + (4 - 2)/1 + 0 = 2; totals met 3, not_met 3, n = 6; expected = 36 - 18 = 18;
    # alpha = 1 - (6 - 1) * 2 / 18 = 0.4444
    assert hi_row == CriterionAgreement(
        criterion_id="d1",
        text="Says hi.",
        units=3,
        split_rate=0.3333,
        percent_agreement=0.6667,
        krippendorff_alpha=0.4444,
    )


def test_most_disagreed_lists_only_criteria_with_splits_worst_first() -> None:
    crit = {(f"e{i}", "d1"): Criterion("d1", "A.") for i in range(3)} | {
        (f"e{i}", "d2"): Criterion("d2", "B.") for i in range(3)
    }
    js = [unit(f"e{i}", "d1", {"j1": "met", "j2": "met"}) for i in range(3)]  # never split
    js += [unit("e0", "d2", {"j1": "met", "j2": "not_met"}), unit("e1", "d2", {"j1": "met", "j2": "met"})]
    report = counted(js, crit).summary().agreement
    assert [r.text for r in report.most_disagreed] == ["B."]
    assert report.most_disagreed[0].split_rate == 0.5
    assert {r.text for r in report.criteria} == {"A.", "B."}
