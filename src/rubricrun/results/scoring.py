"""Pure scoring: a response's rubric score from its criteria's verdicts: points, normalized as PRBench, clipped as
HealthBench (the formulas: docs/statistics.md, "A response's score"). Criteria judged `error` are left out of the
numerator and the denominators, counted in `errors`."""

from __future__ import annotations

from collections.abc import Sequence

from ..types import Criterion, Judgment, Response, Score


def score_response(criteria: Sequence[Criterion], verdicts: Sequence[str]) -> Score:
    """Score one response from its criteria and their verdicts ('met', 'not_met', 'error'), in order."""
    if len(criteria) != len(verdicts):
        raise ValueError("one verdict per criterion")
    points = pos = neg = 0.0
    met = not_met = errors = 0
    for c, v in zip(criteria, verdicts, strict=True):
        if v == "error":
            errors += 1
            continue
        is_met = v == "met"
        met += is_met
        not_met += not is_met
        if c.weight > 0:
            pos += c.weight
        else:
            neg += c.weight
        if is_met:
            points += c.weight
    scored = met + not_met
    return Score(
        points=points,
        normalized=(points - neg) / (pos - neg) if scored and pos - neg > 0 else None,
        clipped=min(1.0, max(0.0, points / pos)) if scored and pos > 0 else None,
        met=met,
        not_met=not_met,
        errors=errors,
    )


def score_all(
    responses: Sequence[Response], judgments: Sequence[Judgment], rubric: Sequence[Criterion]
) -> dict[str, Score]:
    """Each answered, judged response's Score: the responses answer one example, scored on `rubric` (its criteria,
    tasks.registry.criteria_for's)."""
    by_response: dict[str, dict[str, Judgment]] = {}
    for jd in judgments:
        by_response.setdefault(jd.response_id, {})[jd.criterion_id] = jd
    scores: dict[str, Score] = {}
    for r in responses:
        got = by_response.get(r.id)
        if r.status != "ok" or not got:
            continue
        criteria = [c for c in rubric if c.id in got]
        scores[r.id] = score_response(criteria, [got[c.id].verdict for c in criteria])
    return scores
