"""Unit tests of results/scoring.py's score_response: points, normalized and clipped scores, error verdicts,
breakdowns. Every expected number is worked out by hand in the comments next to it.
"""

from __future__ import annotations

import pytest

from rubricrun.results.scoring import score_response
from rubricrun.types import Criterion


def crit(cid: str, weight: float, category: str | None = None, tags: tuple[str, ...] = ()) -> Criterion:
    return Criterion(id=cid, text=f"criterion {cid}", weight=weight, tags=tags, category=category)


def test_all_positive_weights() -> None:
    cs = [crit("a", 3), crit("b", 2), crit("c", 1)]
    s = score_response(cs, ["met", "not_met", "met"])
    # points = 3 + 1 = 4;  P = 3 + 2 + 1 = 6;  N = 0
    # normalized = (4 - 0) / (6 - 0) = 2/3;  clipped = clamp(4 / 6) = 2/3
    assert s.points == 4
    assert s.normalized == pytest.approx(2 / 3)
    assert s.clipped == pytest.approx(2 / 3)
    assert (s.met, s.not_met, s.errors) == (2, 1, 0)


def test_all_met_and_none_met() -> None:
    cs = [crit("a", 3), crit("b", 2)]
    assert score_response(cs, ["met", "met"]).normalized == 1.0  # (5 - 0) / (5 - 0)
    none = score_response(cs, ["not_met", "not_met"])
    assert none.normalized == 0.0 and none.clipped == 0.0 and none.points == 0  # 0 / 5


def test_negative_weight_met() -> None:
    cs = [crit("a", 5), crit("b", 3), crit("bad", -4)]
    s = score_response(cs, ["met", "met", "met"])
    # points = 5 + 3 - 4 = 4;  P = 8;  N = -4
    # PRBench normalized = (points - N) / (P - N) = (4 + 4) / (8 + 4) = 8/12 = 2/3
    # HealthBench clipped = clamp(points / P) = clamp(4 / 8) = 0.5
    assert s.points == 4
    assert s.normalized == pytest.approx(2 / 3)
    assert s.clipped == pytest.approx(0.5)


def test_negative_weight_not_met() -> None:
    cs = [crit("a", 5), crit("b", 3), crit("bad", -4)]
    s = score_response(cs, ["met", "not_met", "not_met"])
    # points = 5;  P = 8;  N = -4
    # normalized = (5 + 4) / (8 + 4) = 9/12 = 0.75;  clipped = 5 / 8 = 0.625
    assert s.points == 5
    assert s.normalized == pytest.approx(0.75)
    assert s.clipped == pytest.approx(0.625)


def test_worst_case_penalty_only_clips_to_zero() -> None:
    cs = [crit("a", 5), crit("b", 3), crit("bad", -4)]
    s = score_response(cs, ["not_met", "not_met", "met"])
    # points = -4;  normalized = (-4 + 4) / 12 = 0;  clipped = clamp(-4 / 8) = clamp(-0.5) = 0
    assert s.points == -4
    assert s.normalized == 0.0
    assert s.clipped == 0.0


def test_clipped_caps_at_one() -> None:
    # A zero-weight criterion is neither P nor N; weights [2, 0] both met: points 2, P 2 -> clipped 1, normalized 1.
    s = score_response([crit("a", 2), crit("z", 0)], ["met", "met"])
    assert s.clipped == 1.0 and s.normalized == 1.0


def test_error_verdicts_are_excluded_and_counted() -> None:
    cs = [crit("a", 5), crit("b", 3), crit("bad", -4)]
    s = score_response(cs, ["met", "error", "not_met"])
    # b (3) is left out of everything: points = 5;  P = 5;  N = -4
    # normalized = (5 + 4) / (5 + 4) = 1.0;  clipped = 5 / 5 = 1.0
    # (had the error been counted as not_met: P = 8 -> normalized 9/12 = 0.75, clipped 0.625)
    assert s.normalized == pytest.approx(1.0)
    assert s.clipped == pytest.approx(1.0)
    assert (s.met, s.not_met, s.errors) == (1, 1, 1)

    s2 = score_response(cs, ["met", "not_met", "error"])
    # the penalty is unknown: points = 5;  P = 8;  N = 0 -> normalized = 5/8 = 0.625, clipped = 0.625
    assert s2.normalized == pytest.approx(0.625)
    assert s2.clipped == pytest.approx(0.625)
    assert s2.errors == 1


def test_all_error_gives_none() -> None:
    cs = [crit("a", 5), crit("bad", -4)]
    s = score_response(cs, ["error", "error"])
    assert s.normalized is None
    assert s.clipped is None
    assert (s.met, s.not_met, s.errors) == (0, 0, 2)


def test_only_negative_rubric() -> None:
    cs = [crit("x", -2), crit("y", -3)]
    s = score_response(cs, ["not_met", "met"])
    # points = -3;  P = 0;  N = -5
    # normalized = (-3 + 5) / (0 + 5) = 2/5 = 0.4;  clipped: P = 0 -> None
    assert s.points == -3
    assert s.normalized == pytest.approx(0.4)
    assert s.clipped is None


def test_categories_and_tags_leave_the_score_as_it_is() -> None:
    cs = [
        crit("c1", 4, "accuracy", ("axis:accuracy",)),
        crit("c2", 2, "accuracy"),
        crit("c3", -3, "safety", ("axis:accuracy", "level:example")),
        crit("c4", 1, "style", ("level:example",)),
    ]
    s = score_response(cs, ["met", "not_met", "met", "met"])
    # overall: points = 4 - 3 + 1 = 2;  P = 7;  N = -3 -> normalized = (2 + 3) / (7 + 3) = 0.5;  clipped = 2/7
    assert s.normalized == pytest.approx(0.5)
    assert s.clipped == pytest.approx(2 / 7)


def test_one_verdict_per_criterion() -> None:
    with pytest.raises(ValueError):
        score_response([crit("a", 1)], ["met", "met"])
