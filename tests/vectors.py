"""Each metric's test vectors: cases from the source it reproduces (its `Metric.source`), worked by hand, that
`values(example, criteria, marks, 1)` must give exactly (tests/test_tasks.py). A key mapped to None must be absent.
Every registered metric that scores responses one at a time has some (the judge meta-evaluation's figures need
every row: tests/test_meta_eval_task.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rubricrun.judging.answers import AUTO_CRITERION
from rubricrun.tasks.mt_bench import RATING_CRITERION
from rubricrun.types import Criterion, Example


@dataclass(frozen=True)
class Vector:
    name: str
    criteria: tuple[Criterion, ...]
    marks: tuple[bool | float, ...]
    expected: Mapping[str, float | None]
    example: Example | None = None  # when values() reads the example (tags, field, category)


def _example(eid: str, **metadata: object) -> Example:
    return Example(
        id=eid,
        dataset=eid.split("/")[0],
        source="vector",
        messages=({"role": "user", "content": "q"},),
        metadata=metadata,
    )


def _hb(cid: str, weight: float, *tags: str) -> Criterion:
    return Criterion(id=cid, text=cid, weight=weight, tags=("level:example", *tags))


_MC = (AUTO_CRITERION,)
_WEIGHTED = (
    Criterion("a", "a", 2.0, category="style"),
    Criterion("b", "b", 1.0, category="facts"),
    Criterion("pen", "a penalty", -1.0, category="facts"),
)
_BURN = (_hb("c1", 7, "axis:accuracy"), _hb("c2", 5, "axis:completeness"), _hb("c3", -6, "axis:accuracy"))
_BURN += (_hb("c4", 2, "axis:communication_quality"),)
_FIN = (
    Criterion("r1", "r1", 10, category="Financial Accuracy"),
    Criterion("r2", "r2", 5, category="Process Transparency"),
    Criterion("r3", "r3", 2, category="Supplemental Insight"),
    Criterion("r4", "r4", -5, category="Financial Accuracy"),
)

VECTORS: dict[str, tuple[Vector, ...]] = {
    "accuracy": (
        Vector("the extracted letter is the answer", _MC, (True,), {"score": 1.0}),
        Vector("another letter", _MC, (False,), {"score": 0.0}),
        Vector("no `correct` criterion: not scored", (Criterion("c", "judged"),), (True,), {"score": None}),
    ),
    # calculate_score by hand on data/healthbench_sample.jsonl's rubrics (tests/test_metrics.py's HealthBench cases).
    "healthbench": (
        Vector(
            "burn: c1 and the c3 penalty met",
            _BURN,
            (True, False, True, False),
            {
                "score": 1 / 14,  # (7 - 6) / (7 + 5 + 2)
                "tag:theme:emergency_referrals": 1 / 14,  # an example tag carries the overall score
                "tag:level:example": 1 / 14,
                "tag:axis:accuracy": 1 / 7,  # (7 - 6) / 7
                "tag:axis:completeness": 0.0,
                "tag:axis:communication_quality": 0.0,
            },
            _example("hb/burn", format="healthbench", example_tags=["theme:emergency_referrals"]),
        ),
        Vector(
            "fever: a negative score, unclipped per response",
            (_hb("c1", 6), _hb("c2", 7), _hb("c3", -9)),
            (True, False, True),
            {"score": -3 / 13},
        ),
        Vector("only a penalty: no positive points, unscorable", (_hb("p", -3),), (True,), {"score": None}),
    ),
    # get_clipped_points and get_normalized_points by hand (tests/test_metrics.py's PRBench cases).
    "prbench": (
        Vector(
            "fin: r1 and the r3 bonus met",
            _FIN,
            (True, False, True, False),
            {
                "score": 12 / 17,  # (10 + 2) / (10 + 5 + 2)
                "normalized": 17 / 22,  # (12 + 5) / (17 + 5)
                "field:Finance": 12 / 17,
                "field_normalized:Finance": 17 / 22,
                "category:Financial Accuracy": 1.0,  # 10 / 10
                "category:Process Transparency": 0.0,
                "category:Supplemental Insight": 1.0,
            },
            _example("pr/fin", format="prbench", field="Finance"),
        ),
        Vector(
            "law: only the penalty met, no per-response clip",
            (Criterion("r1", "r1", 9), Criterion("r2", "r2", 4), Criterion("r3", "r3", -8)),
            (False, False, True),
            {"score": -8 / 13, "normalized": 0.0},  # (-8 + 8) / (13 + 8)
        ),
    ),
    "rubric": (
        # (points - N) / (P - N): (2 - (-1)) / (3 - (-1)) = 3/4; facts: (0 - (-1)) / (1 - (-1)) = 1/2.
        Vector(
            "a met, b not, no penalty",
            _WEIGHTED,
            (True, False, False),
            {"score": 0.75, "category:style": 1.0, "category:facts": 0.5},
        ),
        Vector("only the penalty met", _WEIGHTED, (False, False, True), {"score": 0.0, "category:facts": 0.0}),
        Vector("no weight at all: unscorable", (Criterion("z", "z", 0.0),), (True,), {"score": None}),
    ),
    # One rating per response, as its share of the 1-10 scale (the driver adds the `rating:` keys on the scale).
    "mt_bench": (
        Vector(
            "a rating of 8",
            (RATING_CRITERION,),
            (7 / 9,),
            {"score": 7 / 9, "turn:1": 7 / 9, "category:math": 7 / 9},
            _example("mt/102", format="mtbench", category="math"),
        ),
        Vector("a rating of 1, no category", (RATING_CRITERION,), (0.0,), {"score": 0.0, "turn:1": 0.0}),
    ),
    "rubric_graded": (
        # shares x of each criterion's weight: (2 * 0.5 + 1 * 1 - 1 * 0.25 - (-1)) / 4 = 2.75 / 4.
        Vector(
            "halves and quarters",
            _WEIGHTED,
            (0.5, 1.0, 0.25),
            {"score": 2.75 / 4, "category:style": 0.5, "category:facts": (1.0 - 0.25 + 1) / 2},
        ),
    ),
}
