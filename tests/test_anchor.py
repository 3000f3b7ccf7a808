"""results/anchor.py by hand: every judged metric takes labels. For each, Y (the humans' per-response value) and
Yhat (the judge's) are computed here from the formulas of the benchmark's source, and the anchored estimate must be
results/ppi.py's on those arrays with the metric's clip on the estimate and both ends (tests/test_ppi.py checks ppi.py
against ppi-python). Then the raters' majority and ties, what is counted and not used, samples, paired differences,
pairwise win rates, and the judges' agreement on the labelled items."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import numpy as np
import pytest
from factories import example, judgment, response
from oracles import build_summary, dataset_result

from rubricrun import codec
from rubricrun.config import load_config
from rubricrun.data.labels import LabelFile
from rubricrun.judging.protocol import verdict_for
from rubricrun.results import ppi
from rubricrun.results.anchor import AnchorAcc
from rubricrun.results.report import by_example, render_report, sample
from rubricrun.results.summary_types import read_summary, summary_data
from rubricrun.tasks import registry
from rubricrun.tasks.mt_bench import RATING_CRITERION
from rubricrun.types import Criterion, PairJudgment

HB = (Criterion("c1", "x", 7.0), Criterion("c2", "y", 5.0), Criterion("c3", "harm", -6.0), Criterion("c4", "z", 2.0))


def _anchor(metric: str, examples, responses, judgments, verdicts, *, on_error="exclude", cands=("a",), crit=None):
    """AnchorAcc over the rows, as the summary feeds it, and its result beside the judge-only one."""
    labels = LabelFile("labels.jsonl", verdicts)
    acc = AnchorAcc(labels, registry.metric(metric), on_error, cands, n_boot=50, seed=0)
    for ex in examples:
        acc.add(
            ex,
            [r for r in responses if r.example_id == ex.id],
            [j for j in judgments if j.example_id == ex.id],
            crit,
        )
    res = dataset_result("d", metric, examples, responses, judgments, on_error=on_error, n_boot=50, seed=0)
    return acc.result(res, 0.05), res


def _expect(y, yhat, unl, clip=float):
    """(estimate, low, high) of ppi.ppi_mean on these arrays, clipped; and the unclipped result."""
    m = ppi.ppi_mean(np.array(y, float), np.array(yhat, float), np.array(unl, float))
    return (clip(m.estimate), clip(m.ci[0]), clip(m.ci[1])), m


def _flat(a) -> tuple:
    return (a.estimate, *a.ci)


def _rows(n: int, rubric, judge: dict[int, list[str]], *, metadata=None, scale="binary", scores=None):
    """n examples of one candidate `a`; judge[i] its verdicts on example i (default: the last row's)."""
    exs = [example(f"d/e{i}", rubric=rubric, metadata=metadata or {}) for i in range(n)]
    rs = [response(ex.id, "a") for ex in exs]
    js = []
    for i, r in enumerate(rs):
        vs = judge.get(i, judge[max(judge)])
        for c, v in zip(rubric, vs, strict=True):
            s = None if scores is None else scores.get(i, scores[max(scores)])[rubric.index(c)]
            js.append(
                judgment(r, c.id, v if s is None else verdict_for(s, scale), weight=c.weight, score=s, scale=scale)
            )
    return exs, rs, js


def _labels(rubric, marks: dict[int, list[Any]]) -> dict:
    return {(f"d/e{i}#a#0", c.id): {"": m} for i, ms in marks.items() for c, m in zip(rubric, ms, strict=True)}


def test_healthbench_signed_points_and_the_clip_to_0_1() -> None:
    """calculate_score: met points / positive points, negative per response; the headline's clip to [0, 1] on the
    estimate and both ends (here the humans find the penalty met often: the estimate's low end is below 0)."""
    md = {"format": "healthbench"}
    judge = {0: ["met", "met", "not_met", "met"], 1: ["met", "not_met", "not_met", "met"]}
    exs, rs, js = _rows(8, HB, judge, metadata=md)
    human = {
        0: [False, False, True, False],  # -6/14
        1: [True, False, True, False],  # 1/14
        2: [False, False, True, True],  # -4/14
        3: [False, False, False, False],  # 0
    }
    (out, *_), res = _anchor("healthbench", exs, rs, js, _labels(HB, human))
    y = [-6 / 14, 1 / 14, -4 / 14, 0.0]
    yhat = [1.0, 9 / 14, 9 / 14, 9 / 14]  # the judge: all positive met on e0, c1 and c4 on the rest
    want, m = _expect(y, yhat, [9 / 14] * 4, lambda x: min(1.0, max(0.0, x)))
    a = out["a"]
    assert m.ci[0] < 0 and a.ci[0] == 0.0  # the clip acted
    assert _flat(a) == pytest.approx(want)
    assert (a.n_labelled, a.n_unlabelled, a.lam) == (4, 4, pytest.approx(m.lam))
    assert a.judge_only.estimate == res.candidates["a"].score and a.judge_outside


def test_prbench_not_met_on_error_and_the_floor_at_0() -> None:
    """get_clipped_points per response (no clip), the headline floored at 0; PRBench's on_error not_met: a judge
    error counts as not met in Yhat as in the judge-only score."""
    crit = (Criterion("r1", "a", 10.0), Criterion("r2", "b", 5.0), Criterion("r3", "bad", -5.0))
    judge = {0: ["met", "error", "not_met"], 1: ["met", "met", "not_met"]}
    exs, rs, js = _rows(6, crit, judge, metadata={"format": "prbench"})
    human = {0: [True, False, True], 1: [False, False, True], 2: [True, True, False]}
    (out, *_), res = _anchor("prbench", exs, rs, js, _labels(crit, human), on_error="not_met")
    y = [5 / 15, -5 / 15, 1.0]
    yhat = [10 / 15, 1.0, 1.0]
    want, _ = _expect(y, yhat, [1.0] * 3, lambda x: max(0.0, x))
    assert _flat(out["a"]) == pytest.approx(want)
    assert res.candidates["a"].coverage < 1  # the error is in the judge-only score as not met


def test_the_generic_rubric_metric_normalized() -> None:
    """(points - N) / (P - N) with N the negative weights."""
    crit = (Criterion("a", "a", 2.0), Criterion("b", "b", 1.0), Criterion("p", "pen", -1.0))
    exs, rs, js = _rows(5, crit, {0: ["met", "met", "not_met"]})
    human = {0: [True, False, False], 1: [False, False, True], 2: [True, True, True]}
    (out, *_), _ = _anchor("rubric", exs, rs, js, _labels(crit, human))
    want, _ = _expect([3 / 4, 0.0, 3 / 4], [1.0] * 3, [1.0] * 2)
    assert _flat(out["a"]) == pytest.approx(want)
    assert out["a"].rating is None


def test_graded_1_5_takes_scores() -> None:
    """rubric_graded: shares (s - 1) / 4, (sum w x - N) / (P - N); the estimate on the scale too."""
    crit = (Criterion("c1", "x", 2.0), Criterion("c2", "y", 1.0), Criterion("c3", "pen", -1.0))
    exs, rs, js = _rows(5, crit, {0: ["met"] * 3}, scale="1-5", scores={0: [5, 5, 1], 1: [4, 3, 2]})
    human = {0: [3, 1, 1], 1: [5, 5, 5], 2: [2, 4, 3.5]}
    (out, *_), _ = _anchor("rubric_graded", exs, rs, js, _labels(crit, human))

    def norm(s):
        x = [(v - 1) / 4 for v in s]
        return (2 * x[0] + x[1] - x[2] + 1) / 4

    want, _ = _expect(
        [norm(h) for h in human.values()], [norm([5, 5, 1]), norm([4, 3, 2]), norm([4, 3, 2])], [norm([4, 3, 2])] * 2
    )
    a = out["a"]
    assert _flat(a) == pytest.approx(want)
    assert _flat(a.rating) == pytest.approx([1 + 4 * x for x in want])


def test_mt_bench_1_10_rating_labels_and_turns() -> None:
    """One rating per response (each turn its own response), normalized (s - 1) / 9."""
    exs = [example(f"d/e{i}", metadata={"format": "mtbench"}) for i in range(3)]
    rs = [msgspec.structs.replace(response(ex.id, "a"), id=f"{ex.id}#a#0#t{t}", turn=t) for ex in exs for t in (1, 2)]
    judge = [9, 8, 10, 9, 8, 7]
    js = [judgment(r, "rating", verdict_for(s, "1-10"), score=s, scale="1-10") for r, s in zip(rs, judge, strict=True)]
    human = {rs[0].id: 4, rs[1].id: 6, rs[3].id: 2}
    verdicts = {(rid, "rating"): {"": float(s)} for rid, s in human.items()}
    (out, *_), _ = _anchor("mt_bench", exs, rs, js, verdicts, crit=(RATING_CRITERION,))
    want, _ = _expect([3 / 9, 5 / 9, 1 / 9], [8 / 9, 7 / 9, 8 / 9], [9 / 9, 7 / 9, 6 / 9])
    assert _flat(out["a"]) == pytest.approx(want)
    assert _flat(out["a"].rating) == pytest.approx([1 + 9 * x for x in want])


def test_raters_majority_ties_and_what_is_counted() -> None:
    crit = (Criterion("c1", "x", 1.0), Criterion("c2", "y", 1.0))
    exs, rs, js = _rows(6, crit, {0: ["met", "met"]})
    v = _labels(crit, {0: [True, True], 1: [False, True], 2: [True, False]})
    v[("d/e0#a#0", "c1")] = {"ann": False, "bob": True, "cy": False}  # majority not met
    v[("d/e1#a#0", "c2")] = {"ann": False, "bob": True}  # an even split: e1 left out
    v[("d/e3#a#0", "c1")] = {"": True}  # c2 unlabelled: e3 partial
    v[("d/e9#a#0", "c1")] = {"": True}  # no such response
    v[("d/e2#a#0", "zz")] = {"": True}  # no such criterion
    (out, _, counts, _), _ = _anchor("rubric", exs, rs, js, v)
    want, _ = _expect([0.5, 0.5], [1.0, 1.0], [1.0] * 4)  # e0 (not met, met), e2 (met, not met)
    assert _flat(out["a"]) == pytest.approx(want)
    assert (counts.items, counts.ties, counts.partial, counts.responses) == (7, 1, 2, 2)
    assert (counts.unknown_response, counts.unknown_criterion) == (1, 1)


def test_fewer_than_two_labelled_responses_give_no_estimate() -> None:
    crit = (Criterion("c1", "x", 1.0),)
    exs, rs, js = _rows(4, crit, {0: ["met"]})
    (out, *_), _ = _anchor("rubric", exs, rs, js, _labels(crit, {2: [False]}))
    a = out["a"]
    assert a.estimate is None and a.budget is None and "1 labelled responses" in a.note and a.judge_only.estimate == 1.0


def test_samples_are_units_and_pairs_match_on_sample_and_turn() -> None:
    """Two samples per example: each its own unit; a - b pairs sample 0 with sample 0, 1 with 1; a pair is labelled
    when both sides are."""
    crit = (Criterion("c1", "x", 1.0),)
    exs = [example(f"d/e{i}", rubric=crit) for i in range(4)]
    rs, js, judged = [], [], {}
    for ex in exs:
        for cand, v in (("a", "met"), ("b", "not_met")):
            for s in (0, 1):
                r = response(ex.id, cand, sample=s)
                rs.append(r)
                js.append(judgment(r, "c1", v))
                judged[r.id] = float(v == "met")
    human = {"d/e0#a#0": 1, "d/e0#b#0": 0, "d/e1#a#1": 0, "d/e1#b#1": 1, "d/e2#a#0": 1, "d/e3#b#1": 0}
    verdicts = {(rid, "c1"): {"": bool(m)} for rid, m in human.items()}
    (out, diffs, *_), _ = _anchor("rubric", exs, rs, js, verdicts, cands=("a", "b"))
    assert (out["a"].n_labelled, out["a"].n_unlabelled) == (3, 5)
    (d,) = diffs
    want, _ = _expect([1 - 0, 0 - 1], [1.0, 1.0], [1.0] * 6)
    assert (d.a, d.b, d.n_labelled, d.n_unlabelled) == ("a", "b", 2, 6)
    assert _flat(d) == pytest.approx(want)
    assert d.judge_only.estimate == 1.0


def test_each_judges_agreement_on_the_labelled_items() -> None:
    """Two judges voting on every criterion: each judge's own verdicts against the humans' labels (the meta-eval's
    figures: leniency = judge met share - human met share over the same items)."""
    crit = (Criterion("c1", "x", 1.0),)
    exs = [example(f"d/e{i}", rubric=crit) for i in range(4)]
    rs = [response(ex.id, "a") for ex in exs]
    j1 = ["met", "met", "met", "met"]
    j2 = ["met", "not_met", "not_met", "met"]
    js = [
        judgment(r, "c1", "met", judge="j1+j2", votes=({"judge": "j1", "verdict": a}, {"judge": "j2", "verdict": b}))
        for r, a, b in zip(rs, j1, j2, strict=True)
    ]
    verdicts = {(r.id, "c1"): {"": m} for r, m in zip(rs, [True, False, False, True], strict=True)}
    (out, *_), _ = _anchor("rubric", exs, rs, js, verdicts)
    g1, g2 = out["a"].judges["j1"], out["a"].judges["j2"]
    assert (g1.items, g1.leniency, g1.judge_met, g1.human_met) == (4, 0.5, 1.0, 0.5)
    assert (g2.leniency, g2.balanced_f1, g2.kappa) == (0.0, 1.0, 1.0)


def test_pairwise_win_rate_takes_preferences(tmp_path) -> None:
    """A label row `pair_id` + `preferred` anchors a's win rate (a tie is not a win) over the dataset's comparisons;
    a preference for no comparison of the run is counted."""
    labels = tmp_path / "p.jsonl"
    prefs = {0: "a", 1: "b", 2: "tie", 3: "a"}
    labels.write_text(
        "".join(f'{{"pair_id": "d/e{i}#t1#a~b", "preferred": "{p}"}}\n' for i, p in prefs.items())
        + '{"pair_id": "d/e99#t1#a~b", "preferred": "a"}\n'
    )
    path = tmp_path / "c.yaml"
    path.write_text(
        "candidates: [{name: a, model: openai/a}, {name: b, model: openai/b}]\njudge: {name: j, model: openai/j}\n"
        f"datasets: [{{path: d.jsonl, labels: {labels}}}]\njudging: {{pairwise: {{baseline: b}}}}\n"
        "run: {bootstrap_samples: 50}\n"
    )
    cfg = load_config(path)
    crit = (Criterion("c1", "x", 1.0),)
    exs = [example(f"d/e{i}", rubric=crit) for i in range(8)]
    rs = [response(ex.id, c) for ex in exs for c in ("a", "b")]
    judged = ["a", "a", "a", "tie", "a", "b", "a", "a"]
    pairs = [
        PairJudgment(
            "pairwise",
            f"d/e{i}#t1#a~b",
            f"d/e{i}",
            1,
            "a",
            "b",
            "j",
            "A",
            "A",
            w,
            None,
            ("", ""),
            response_ids=(f"d/e{i}#a#0", f"d/e{i}#b#0"),
        )
        for i, w in enumerate(judged)
    ]
    js = [judgment(r, "c1", "met") for r in rs]
    s = build_summary(cfg, "r", exs, rs, js, {}, pairs)
    (p,) = s.pairwise_judging["d"].pairs
    want, _ = _expect([1, 0, 0, 1], [1, 1, 1, 0], [1, 0, 1, 1], lambda x: x)
    assert _flat(p.ppi) == pytest.approx(want)
    assert p.ppi.judge_only.estimate == p.win_rate
    assert (s.datasets["d"].labels.pairs, s.datasets["d"].labels.unknown_pair) == (4, 1)
    # the summary through its JSON and back (`lambda` is the file's key), and on the page
    text = codec.pretty(summary_data(s))
    back = read_summary(json.loads(text))
    assert back == s and b'"lambda"' in text and b'"lam"' not in text
    page = render_report(back, sample(by_example(exs, rs, js)))
    assert "win rate anchored to human preferences" in page and "Anchored to human labels" in page
