"""results/metrics.py against numbers computed by hand (the arithmetic is in the comments).

The formulas are the benchmarks' own (sources quoted in .agent/plans/007-faithful-scores.md):
HealthBench = openai/simple-evals healthbench_eval.py `calculate_score` + `_compute_clipped_stats`;
PRBench = scaleapi/PRBench util.py `get_clipped_points` / `get_normalized_points` + evals.py `mean_clipped`.
"""

from __future__ import annotations

import statistics
import typing
from collections import Counter
from pathlib import Path

import msgspec
import numpy as np
import pytest
import yaml
from factories import example, response
from oracles import dataset_result

from rubricrun.config import DatasetConfig, load_config
from rubricrun.errors import InputError
from rubricrun.results import stats
from rubricrun.results.scoring import score_response
from rubricrun.tasks import registry
from rubricrun.tasks.rubric import graded_normalized, points_share
from rubricrun.tasks.spec import CandidateResult, DatasetResult
from rubricrun.types import Criterion, Example, Judgment, Response, Turn

TOL = 1e-9
N_BOOT, SEED = 200, 7


# --------------------------------------------------------------------------------------------------
# Builders: examples, responses and verdicts as the run writes them


def ex(eid: str, fmt: str, rubric: list[Criterion] = (), **metadata) -> Example:
    kw = {}
    if fmt == "mc":
        kw = {"choices": ("a", "b"), "answer": "A"}
    return example(eid, rubric=tuple(rubric), metadata={"format": fmt, **metadata}, **kw)


def crit(cid: str, weight: float, tags: tuple[str, ...] = (), category: str | None = None) -> Criterion:
    return Criterion(id=cid, text=cid, weight=weight, tags=tags, category=category)


def resp(eid: str, cand: str, sample: int = 0, status: str = "ok") -> Response:
    text = "x" if status == "ok" else None
    return response(eid, cand, text, sample=sample, status=status, model="m", finish_reason="stop", key="k")


def judged(r: Response, verdicts: dict[str, str], weights: dict[str, float] | None = None) -> list[Judgment]:
    return [
        Judgment(
            id=f"{r.id}#{cid}",
            response_id=r.id,
            example_id=r.example_id,
            candidate=r.candidate,
            criterion_id=cid,
            weight=(weights or {}).get(cid, 1.0),
            judge="j",
            verdict=v,  # type: ignore[arg-type]
            explanation=None,
            error="unreadable" if v == "error" else None,
        )
        for cid, v in verdicts.items()
    ]


def run(metric: str, examples, plan: dict[str, dict[str, list[dict[str, str]]]], **kw) -> DatasetResult:
    """plan: candidate -> example id -> one verdict dict per sample ({} for a failed response)."""
    responses, judgments = [], []
    for cand, per_ex in plan.items():
        for eid, samples in per_ex.items():
            for i, verdicts in enumerate(samples):
                r = resp(eid, cand, i, "ok" if verdicts is not None else "error")
                responses.append(r)
                if verdicts:
                    judgments += judged(r, verdicts)
    kw.setdefault("on_error", default_on_error(metric))
    return dataset_result("d", metric, examples, responses, judgments, n_boot=N_BOOT, seed=SEED, **kw)


def approx(x: float) -> object:
    return pytest.approx(x, abs=TOL)


# --------------------------------------------------------------------------------------------------
# HealthBench: the rubrics of data/healthbench_sample.jsonl

HB = [
    ex(
        "burn",
        "healthbench",
        [
            crit("c1", 7, ("level:example", "axis:accuracy")),
            crit("c2", 5, ("level:example", "axis:completeness")),
            crit("c3", -6, ("level:example", "axis:accuracy")),
            crit("c4", 2, ("level:example", "axis:communication_quality")),
        ],
        example_tags=["theme:emergency_referrals"],
    ),
    ex(
        "fever",
        "healthbench",
        [
            crit("c1", 6, ("level:example", "axis:accuracy")),
            crit("c2", 7, ("level:example", "axis:completeness")),
            crit("c3", -9, ("level:example", "axis:accuracy")),
        ],
        example_tags=["theme:context_seeking"],
    ),
    ex(
        "water",
        "healthbench",
        [
            crit("c1", 5, ("level:example", "axis:context_awareness")),
            crit("c2", 5, ("level:example", "axis:accuracy")),
            crit("c3", -4, ("level:example", "axis:accuracy")),
            crit("c4", 2, ("level:example", "axis:communication_quality")),
        ],
        example_tags=["theme:global_health"],
    ),
]
M, N = "met", "not_met"
SILENT = {
    "burn": [{"c1": N, "c2": N, "c3": N, "c4": N}],
    "fever": [{"c1": N, "c2": N, "c3": N}],
    "water": [{"c1": N, "c2": N, "c3": N, "c4": N}],
}
B = {
    "burn": [{"c1": M, "c2": N, "c3": M, "c4": N}],  # (7 - 6) / (7+5+2) = 1/14
    "fever": [{"c1": M, "c2": N, "c3": M}],  # (6 - 9) / (6+7) = -3/13
    "water": [{"c1": M, "c2": N, "c3": M, "c4": M}],  # (5 - 4 + 2) / (5+5+2) = 3/12
}


def test_healthbench_says_nothing_scores_zero_where_normalized_gave_a_third() -> None:
    res = run("healthbench", HB, {"silent": SILENT}).candidates["silent"]
    # Every positive criterion not met, no penalty hit: 0 / 14, 0 / 13, 0 / 12 -> mean 0 -> clip 0.
    assert res.score == 0.0
    assert res.n == 3 and res.coverage == 1.0 and res.partial == 0
    # What the old headline (mean of (points - N) / (P - N)) gives the same verdicts:
    # burn (0+6)/(14+6) = 0.3, fever 9/22 = 0.40909..., water 4/16 = 0.25 -> mean 0.319696...
    old = [score_response(e.rubric, [N] * len(e.rubric)).normalized for e in HB]
    assert statistics.fmean(old) == approx((0.3 + 9 / 22 + 0.25) / 3)


def test_healthbench_overall_and_tags_as_simple_evals() -> None:
    res = run("healthbench", HB, {"b": B}).candidates["b"]
    # mean(1/14, -3/13, 3/12) = (0.0714285714 - 0.2307692308 + 0.25) / 3 = 0.0302197802; inside [0, 1].
    assert res.score == approx((1 / 14 - 3 / 13 + 3 / 12) / 3)
    assert res.extra["mean_unclipped"] == approx((1 / 14 - 3 / 13 + 3 / 12) / 3)
    tags = res.extra["by_tag"]
    # Example tags carry the example's overall score; one example each (fever's -3/13 clips to 0).
    assert tags["theme:emergency_referrals"]["score"] == approx(1 / 14)
    assert tags["theme:context_seeking"]["score"] == 0.0
    assert tags["theme:global_health"]["score"] == approx(0.25)
    # axis:accuracy: burn (7 - 6)/7, fever (6 - 9)/6, water (0 - 4)/5 -> mean(1/7, -1/2, -4/5) < 0 -> clip 0.
    assert (tags["axis:accuracy"]["score"], tags["axis:accuracy"]["n"]) == (0.0, 3)
    # axis:communication_quality: burn 0/2, water 2/2 -> 0.5 over 2 examples; context_awareness: water 5/5.
    assert tags["axis:communication_quality"]["score"] == approx(0.5)
    assert tags["axis:communication_quality"]["n"] == 2
    assert tags["axis:context_awareness"]["score"] == 1.0 and tags["axis:context_awareness"]["n"] == 1
    assert tags["axis:completeness"]["score"] == 0.0
    # level:example covers every criterion: the overall score again.
    assert tags["level:example"]["score"] == approx(res.score)


def test_healthbench_negative_mean_clips_to_zero_and_so_does_its_ci() -> None:
    penalties = {e.id: [{c.id: (M if c.weight < 0 else N) for c in e.rubric}] for e in HB}
    res = run("healthbench", HB, {"bad": penalties}).candidates["bad"]
    # -6/14, -9/13, -4/12 -> mean -0.4848...; every bootstrap mean is negative too.
    assert res.extra["mean_unclipped"] == approx((-6 / 14 - 9 / 13 - 4 / 12) / 3)
    assert res.score == 0.0 and res.ci == (0.0, 0.0) and res.std == 0.0


def test_healthbench_example_without_positive_points_is_unscorable() -> None:
    only_penalty = ex("pen", "healthbench", [crit("p", -3)])
    res = run("healthbench", [*HB, only_penalty], {"b": {**B, "pen": [{"p": M}]}}).candidates["b"]
    # calculate_score returns None (simple-evals asserts): the example is left out of n.
    assert points_share(only_penalty.rubric, [True]) is None
    assert res.n == 3 and res.extra["unscorable"] == 1
    assert res.score == approx((1 / 14 - 3 / 13 + 3 / 12) / 3)


def test_healthbench_bootstrap_std_and_ci() -> None:
    res = run("healthbench", HB, {"b": B}).candidates["b"]
    values = [1 / 14, -3 / 13, 3 / 12]  # sorted example ids: burn, fever, water
    ci = stats.mean_ci(values, n_boot=N_BOOT, seed=SEED)
    assert res.ci == (max(0.0, ci["ci_low"]), min(1.0, ci["ci_high"]))
    # std: np.std (ddof 0) of the clipped means of the same resamples mean_ci draws (n indexes a resample from
    # numpy's PCG64 stream, as stats.resample_indexes draws them).
    rng = np.random.Generator(np.random.PCG64(SEED))
    picks = [rng.integers(0, 3, size=3, dtype=np.uint32) for _ in range(N_BOOT)]
    means = [min(1.0, max(0.0, sum(values[i] for i in idx) / 3)) for idx in picks]
    assert res.std == approx(statistics.pstdev(means))
    again = run("healthbench", HB, {"b": B}).candidates["b"]
    assert (again.ci, again.std) == (res.ci, res.std)  # deterministic with the seed


# --------------------------------------------------------------------------------------------------
# Judge failures: exclude vs not_met

THREE = [ex("e1", "generic", [crit("a", 1), crit("b", 1), crit("c", 1)])]


def test_two_of_three_errored_is_partial_under_exclude_and_a_third_under_not_met() -> None:
    plan = {"lucky": {"e1": [{"a": M, "b": "error", "c": "error"}]}, "full": {"e1": [{"a": M, "b": M, "c": N}]}}
    # Today's per-response score skips errors: 1 met of 1 judged -> 1.0, above the fully judged 2/3.
    assert score_response(THREE[0].rubric, [M, "error", "error"]).normalized == 1.0
    excl = run("rubric", THREE, plan, on_error="exclude")
    assert excl.on_error == "exclude"
    lucky = excl.candidates["lucky"]
    assert (lucky.score, lucky.n, lucky.partial, lucky.coverage, lucky.scored) == (None, 0, 1, 0.0, 0)
    assert excl.candidates["full"].score == approx(2 / 3)  # (2 - 0) / (3 - 0)
    nm = run("rubric", THREE, plan, on_error="not_met").candidates["lucky"]
    # Errors count as not met: 1 / 3; still partial (not fully judged), coverage 0.
    assert (nm.score, nm.partial, nm.coverage) == (approx(1 / 3), 1, 0.0)


def test_missing_verdicts_count_as_errors() -> None:
    # An interrupted run: only a is judged. exclude -> partial; not_met -> 1/3.
    plan = {"x": {"e1": [{"a": M}]}}
    assert run("rubric", THREE, plan, on_error="exclude").candidates["x"].partial == 1
    assert run("rubric", THREE, plan, on_error="not_met").candidates["x"].score == approx(1 / 3)


def test_healthbench_error_under_both_policies() -> None:
    b = {**B, "burn": [{"c1": M, "c2": "error", "c3": M, "c4": N}]}
    excl = run("healthbench", HB, {"b": b}, on_error="exclude").candidates["b"]
    # burn left out: mean(-3/13, 3/12) = 0.0096153846
    assert excl.n == 2 and excl.partial == 1 and excl.coverage == approx(2 / 3)
    assert excl.score == approx((-3 / 13 + 3 / 12) / 2)
    nm = run("healthbench", HB, {"b": b}, on_error="not_met").candidates["b"]
    assert nm.score == approx((1 / 14 - 3 / 13 + 3 / 12) / 3)  # c2 was not met anyway


def test_on_error_defaults() -> None:
    assert default_on_error("prbench") == "not_met"
    assert [default_on_error(m) for m in ("accuracy", "healthbench", "rubric")] == ["exclude"] * 3


# --------------------------------------------------------------------------------------------------
# PRBench

PR = [
    ex(
        "fin",
        "prbench",
        [
            crit("r1", 10, category="Financial Accuracy"),
            crit("r2", 5, category="Process Transparency"),
            crit("r3", 2, category="Supplemental Insight"),
            crit("r4", -5, category="Financial Accuracy"),
        ],
        field="Finance",
    ),
    ex("law", "prbench", [crit("r1", 9, category="Legal Accuracy"), crit("r2", 4), crit("r3", -8)], field="Legal"),
]
PR_PLAN = {
    # fin: 10 + 2 = 12 -> clipped 12/17, normalized (12 + 5)/(17 + 5) = 17/22
    "fin": [{"r1": M, "r2": N, "r3": M, "r4": N}],
    # law: -8 -> clipped -8/13 (no per-example clip), normalized (-8 + 8)/(13 + 8) = 0
    "law": [{"r1": N, "r2": N, "r3": M}],
}


def test_prbench_mean_clipped_and_mean_normalized() -> None:
    met = [True, False, True, False]
    assert (points_share(PR[0].rubric, met), graded_normalized(PR[0].rubric, met)) == (approx(12 / 17), approx(17 / 22))
    res = run("prbench", PR, {"p": PR_PLAN}).candidates["p"]
    # mean_clipped = max(0, mean(12/17, -8/13)) = max(0, (0.7058823529 - 0.6153846154) / 2) = 0.0452488688
    assert res.score == approx((12 / 17 - 8 / 13) / 2)
    assert res.extra["mean_normalized"] == approx((17 / 22 + 0) / 2)
    # evals.py std_clipped = np.std (ddof 0) of [12/17, -8/13]: half their distance.
    assert res.extra["std_clipped"] == approx((12 / 17 + 8 / 13) / 2)
    assert res.extra["std_normalized"] == approx(17 / 22 / 2)
    # By field: Finance 12/17; Legal max(0, -8/13) = 0.
    assert res.extra["by_field"]["Finance"]["score"] == approx(12 / 17)
    assert res.extra["by_field"]["Legal"]["score"] == 0.0
    assert res.extra["by_field"]["Legal"]["mean_normalized"] == 0.0
    # By category (same formula restricted to the category): Financial Accuracy 10/10, Process 0/5,
    # Supplemental 2/2, Legal Accuracy 0/9.
    cats = res.extra["by_category"]
    assert {k: v["score"] for k, v in cats.items()} == {
        "Financial Accuracy": 1.0,
        "Legal Accuracy": 0.0,
        "Process Transparency": 0.0,
        "Supplemental Insight": 1.0,
    }


def test_prbench_negative_mean_floors_at_zero_and_error_is_not_met_by_default() -> None:
    plan = {"fin": [{"r1": "error", "r2": N, "r3": N, "r4": M}], "law": [{"r1": N, "r2": N, "r3": M}]}
    res = run("prbench", PR, {"p": plan})
    assert res.on_error == "not_met"
    c = res.candidates["p"]
    # fin: r1 error -> not met; -5/17. law -8/13. mean < 0 -> 0.0; CI floored too.
    assert c.score == 0.0 and c.ci == (0.0, 0.0)
    assert c.extra["mean_clipped_unfloored"] == approx((-5 / 17 - 8 / 13) / 2)
    assert (c.n, c.partial, c.coverage) == (2, 1, 0.5)


# --------------------------------------------------------------------------------------------------
# Accuracy, samples, coverage

MC = [ex("q1", "mc"), ex("q2", "mc")]


def test_accuracy_averages_samples_per_example_first() -> None:
    # q1: met, not_met -> 0.5; q2: met, failed response -> 1.0. Per example first: (0.5 + 1) / 2 = 0.75
    # (pooling the three scored responses would give 2/3).
    plan = {"a": {"q1": [{"correct": M}, {"correct": N}], "q2": [{"correct": M}, None]}}
    res = run("accuracy", MC, plan, samples_per_prompt={"a": 2}).candidates["a"]
    assert res.score == approx(0.75)
    assert (res.n, res.scored, res.expected, res.partial) == (2, 3, 4, 0)
    assert res.coverage == approx(3 / 4)


def test_candidates_come_from_samples_per_prompt_even_without_rows() -> None:
    res = run("accuracy", MC, {"a": {"q1": [{"correct": M}]}}, samples_per_prompt={"a": 1, "ghost": 1})
    assert list(res.candidates) == ["a", "ghost"]
    ghost = res.candidates["ghost"]
    assert (ghost.score, ghost.ci, ghost.std, ghost.n, ghost.coverage) == (None, (None, None), None, 0, 0.0)
    assert res.candidates["a"].coverage == 0.5  # q2 never answered


def test_default_rubric_criteria_are_inferred_from_judgments_or_given() -> None:
    open_ex = [ex("o1", "generic")]
    plan = {"a": {"o1": [{"d1": M, "d2": N}]}}
    assert run("rubric", open_ex, plan).candidates["a"].score == approx(0.5)
    # Given the criteria (criteria_for), a missing d3 makes the response partial.
    given = {"o1": [crit("d1", 1), crit("d2", 1), crit("d3", 1)]}
    assert run("rubric", open_ex, plan, criteria=given).candidates["a"].partial == 1


def test_other_datasets_rows_are_ignored() -> None:
    plan = {"a": {"q1": [{"correct": M}], "elsewhere": [{"correct": N}]}}
    res = run("accuracy", MC, plan)
    assert res.candidates["a"].score == 1.0 and res.candidates["a"].expected == 1


def test_result_types_are_frozen() -> None:
    res = run("accuracy", MC, {"a": {"q1": [{"correct": M}]}})
    assert isinstance(res.candidates["a"], CandidateResult)
    with pytest.raises(AttributeError):
        res.metric = "x"  # type: ignore[misc]


# --------------------------------------------------------------------------------------------------
# Detection and config


def default_on_error(metric: str) -> str:
    return registry.on_error_for(None, metric)


def detect_metric(example: Example) -> str:
    return registry.metric_of(example)


def dataset_metric(examples, override=None) -> str:
    return registry.metric_of_counts(Counter(registry.metric_of(e) for e in examples), override)


def test_detect_metric_from_schema() -> None:
    assert detect_metric(ex("a", "mc")) == "accuracy"
    assert detect_metric(ex("a", "qa")) == "accuracy"
    assert detect_metric(HB[0]) == "healthbench"
    assert detect_metric(PR[0]) == "prbench"
    assert detect_metric(ex("a", "mtbench")) == "rubric"
    assert detect_metric(ex("a", "generic", [crit("c", 1)])) == "rubric"
    assert detect_metric(ex("a", "mc", [crit("c", 1)])) == "rubric"  # judged on its own rubric
    assert dataset_metric([HB[0], HB[1], ex("x", "generic")]) == "healthbench"
    assert dataset_metric(HB, "rubric") == "rubric"
    with pytest.raises(ValueError, match="unknown metric"):
        dataset_metric(HB, "bleu")


def test_config_metric_is_checked_against_the_registry(tmp_path: Path) -> None:
    tp = typing.get_type_hints(DatasetConfig)["metric"]
    assert typing.get_args(tp) == (str, type(None))  # no second list of metric names in the config
    for name in registry.METRICS:
        registry.check_config(
            load_config(
                _config(
                    tmp_path,
                    {"metric": name},
                    {
                        "scale": registry.METRICS[name].scale
                        if registry.METRICS[name].scale in ("1-5", "1-10")
                        else "binary"
                    },
                )
            )
        )


def _config(tmp_path: Path, dataset: dict, judging: dict | None = None) -> Path:
    cfg = {"candidates": [{"name": "a", "model": "openai/x"}], "datasets": [{"path": "d.jsonl", **dataset}]}
    if judging:
        cfg["judging"] = judging
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def test_config_metric_and_on_error_keys(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path, {"metric": "prbench"}, {"on_error": "not_met"}))
    assert cfg.datasets[0].metric == "prbench" and cfg.judging.on_error == "not_met"
    cfg = load_config(_config(tmp_path, {}))
    assert cfg.datasets[0].metric is None and cfg.judging.on_error is None
    with pytest.raises(InputError, match=r"c\.yaml:6: key 'datasets\[0\]\.metric': expected one of 'accuracy'"):
        registry.check_config(load_config(_config(tmp_path, {"metric": "bleu"})))
    with pytest.raises(InputError, match=r"c\.yaml:\d+: key 'judging\.on_error': expected one of 'exclude'"):
        load_config(_config(tmp_path, {}, {"on_error": "skip"}))


# --------------------------------------------------------------------------------------------------
# The run's datasets, as loaded from the sample files


def test_dataset_results_on_the_sample_files(tmp_path: Path) -> None:
    from conftest import DATA
    from oracles import dataset_results, load_dataset

    from rubricrun.tasks.registry import TASKS, criteria_for

    files = ["healthbench_sample", "prbench_sample", "mc_sample"]
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(
        yaml.safe_dump(
            {
                "candidates": [{"name": "silent", "model": "openai/x"}],
                "datasets": [{"path": str(DATA / f"{f}.jsonl")} for f in files],
                "run": {"bootstrap_samples": 50},
            }
        ),
        encoding="utf-8",
    )
    cfg = load_config(cfg_path)
    examples = [e for d in cfg.datasets for e in load_dataset(d, schemas=TASKS).examples]
    responses, judgments = [], []
    for e in examples:  # a candidate that says nothing: every criterion (and every answer) not met
        r = resp(e.id, "silent")
        responses.append(r)
        judgments += judged(r, {c.id: N for c in criteria_for(e, cfg)}, {c.id: c.weight for c in e.rubric})
    results = {d.name: d for d in dataset_results(cfg, examples, responses, judgments)}
    assert [(d.metric, d.on_error) for d in results.values()] == [
        ("healthbench", "exclude"),
        ("prbench", "not_met"),
        ("accuracy", "exclude"),
    ]
    hb = results["healthbench_sample"].candidates["silent"]
    assert (hb.score, hb.n, hb.coverage) == (0.0, 3, 1.0)
    assert set(hb.extra["by_tag"]) >= {"theme:emergency_referrals", "axis:accuracy", "level:example"}
    pr = results["prbench_sample"].candidates["silent"]
    assert pr.score == 0.0 and pr.extra["mean_normalized"] > 0  # penalties avoided still earn "normalized"
    assert set(pr.extra["by_field"]) == {"Finance", "Legal"}
    assert results["mc_sample"].candidates["silent"].score == 0.0


# ---------------------------------------------------------------------------------------------------
# Multi-turn (issue 12): turn 1, turn 2 and their average, per MT-Bench category


def test_multi_turn_by_turn_and_by_category_by_hand() -> None:
    later = (Turn({"role": "user", "content": "again"}),)
    writing = ex("w", "mtbench", [crit("h", 1, category="style")], category="writing")
    math_ = ex("m", "mtbench", [crit("h", 1, category="style")], category="math")
    examples = [msgspec.structs.replace(e, later_turns=later) for e in (writing, math_)]
    verdicts = {("w", 1): "met", ("w", 2): "not_met", ("m", 1): "met", ("m", 2): "met"}
    responses, judgments = [], []
    for (eid, turn), v in verdicts.items():
        r = msgspec.structs.replace(resp(eid, "c"), turn=turn, id=f"{eid}#c#0" + (f"#t{turn}" if turn > 1 else ""))
        responses.append(r)
        judgments += judged(r, {"h": v})
    res = dataset_result("d", "rubric", examples, responses, judgments, on_error="exclude", n_boot=N_BOOT, seed=SEED)
    c = res.candidates["c"]
    # per example the mean over its turns: w = (1 + 0) / 2, m = (1 + 1) / 2; headline (MT-Bench's average) 0.75
    assert c.score == approx(0.75) and c.n == 2 and c.scored == 4
    assert {t: (d["score"], d["n"]) for t, d in c.extra["by_turn"].items()} == {"1": (1.0, 2), "2": (0.5, 2)}
    # the example's own category replaces the criterion's ("style") on MT-Bench rows
    assert {k: d["score"] for k, d in c.extra["by_category"].items()} == {"math": 1.0, "writing": 0.5}
    # a two-turn example expects two responses
    res = dataset_result(
        "d",
        "rubric",
        examples,
        responses[:3],
        judgments[:3],
        on_error="exclude",
        n_boot=N_BOOT,
        seed=SEED,
        samples_per_prompt={"c": 1},
    )
    assert res.candidates["c"].expected == 4 and res.candidates["c"].coverage == approx(0.75)


def test_single_turn_has_no_by_turn() -> None:
    res = run("rubric", [ex("a", "generic", [crit("c1", 1)])], {"c": {"a": [{"c1": "met"}]}})
    assert "by_turn" not in res.candidates["c"].extra
