"""The judge meta-evaluation as a benchmark module (tasks/meta_eval.py, issue 22): the demo sample run through the
CLI with two fake judges whose verdicts are known, figures checked against counts worked out by hand; no candidate
call; the console lines, summary.json and report.html; --validate's count; a bad row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, DELETE, REPO, model_entry, write_jsonl
from factories import example, judgment, response
from fakeserver import FakeOpenAIServer, message_text
from msgspec.structs import replace

from rubricrun.config import load_config
from rubricrun.engine.estimate import count_calls
from rubricrun.tasks import meta_eval
from rubricrun.tasks.judge_eval import judge_meta_eval
from rubricrun.tasks.spec import AccSpec

SAMPLE = DATA / "meta_eval_demo.jsonl"
ROWS = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
# The fake judges' verdicts on rows 1-8 (None: an unreadable reply, every time it is asked).
VERDICTS: dict[str, list[bool | None]] = {
    "judge-one": [True, True, False, False, True, False, True, True],
    "judge-two": [True, True, True, False, True, True, None, True],
}


PARIS = "The response is the capital of France, Paris."


def known_verdicts(body: dict[str, Any], met_criterion: str | None = None) -> str:
    """The judge's verdict on the row whose criterion the prompt shows (criterion texts are unique in the sample);
    `met_criterion` (another dataset's) is always met."""
    prompt = "\n".join(message_text(m) for m in body["messages"])
    if met_criterion is not None and met_criterion in prompt:
        return json.dumps({"explanation": "yes", "criteria_met": True})
    (row,) = [i for i, r in enumerate(ROWS) if r["rubric"] in prompt]
    met = VERDICTS[body["model"]][row]
    return "I cannot say." if met is None else json.dumps({"explanation": "known", "criteria_met": met})


def meta_config(tmp_path: Path, server: FakeOpenAIServer | None, make_config: Any, path: Path = SAMPLE) -> Path:
    return make_config(
        server,
        candidates=[],
        judges=[model_entry("j1", "openai/judge-one", server), model_entry("j2", "openai/judge-two", server)],
        datasets=[{"name": "meta", "path": str(path)}],
        judging={"default_rubric": DELETE},
        run={"bootstrap_samples": 200},
    )


@pytest.fixture
def meta_run(tmp_path: Path, make_config: Any, cli_main: Any) -> tuple[Path, str, FakeOpenAIServer]:
    with FakeOpenAIServer(responder=known_verdicts) as server:
        rc, _, err = cli_main(["--config", str(meta_config(tmp_path, server, make_config)), "--run-id", "m"])
        assert rc == 0, err
        yield tmp_path / "outputs" / "m", err, server


# By hand, from the sample's labels and the verdicts above. Pairs (judge label, human label) per row, as (tp, fp,
# fn, tn): j1 sums to (8, 4, 2, 6): F1 met = 2 * (8/12 * 8/10) / (8/12 + 8/10) = 8/11, F1 not met = 2 * (6/8 * 6/10)
# / (6/8 + 6/10) = 2/3, balanced (8/11 + 2/3) / 2 = 23/33. j2 (row 7 failed) sums to (10, 6, 0, 2): 10/13 and 2/5,
# balanced 38/65. Majorities: row 2 splits 1-1 (no majority); j1 against the other 7: 6 agree, 4 and 3 met, kappa
# (6/7 - 24/49) / (1 - 24/49) = 18/25; j2 on 6 rows: 4 agree, 5 and 3 met, kappa (4/6 - 1/2) / (1/2) = 1/3.
# Humans' met share per row: 1, 1/2, 1/3, 0, 1, 1/3, 0, 2/3 (sum 23/6).
J1 = {"score": 23 / 33, "n": 8, "f1_n": 26, "kappa": 18 / 25, "kappa_n": 7, "kappa_ties": 1, "failures": 0,
      "judge_met": 5 / 8, "human_met": 23 / 48, "leniency": 7 / 48}  # fmt: skip
J2 = {"score": 38 / 65, "n": 7, "f1_n": 24, "kappa": 1 / 3, "kappa_n": 6, "kappa_ties": 1, "failures": 1,
      "judge_met": 6 / 7, "human_met": 23 / 42, "leniency": 13 / 42}  # fmt: skip
# Per category: emergency referrals (rows 1-4) and context seeking (rows 5-8). j1: (4, 1, 1, 4) -> 0.8 and (4, 3, 1, 2)
# -> (2/3 + 1/2) / 2 = 7/12; j2: (5, 3, 0, 2) -> (10/13 + 4/7) / 2 = 61/91, and no not-met verdict in context seeking
# (rows 5, 6, 8 all met, row 7 failed) -> no balanced F1.
BY_CATEGORY = {
    "j1": {"cluster:emergency_referrals": (0.8, 4), "cluster:context_seeking": (7 / 12, 4)},
    "j2": {"cluster:emergency_referrals": (61 / 91, 4), "cluster:context_seeking": (None, 3)},
}
# Physicians, leave one out: phys-1 (4, 4, 1, 2) -> (8/13 + 4/9) / 2 = 62/117 on n 16; phys-2 (3, 1, 3, 4) -> 19/30 on
# n 15; phys-3 (3, 2, 3, 2) -> 49/99 on n 15. Weighted by n; pooled (10, 7, 7, 8) -> (10/17 + 8/15) / 2 = 143/255.
HUMANS_WEIGHTED = (62 / 117 * 16 + 19 / 30 * 15 + 49 / 99 * 15) / 46
HUMANS_POOLED = 143 / 255


def test_every_judge_grades_every_row_and_no_candidate_is_called(meta_run: Any) -> None:
    run, _, server = meta_run
    models = [r.model for r in server.requests]
    # j1 once per row; j2 once per row plus one re-ask of its unreadable reply on row 7.
    assert sorted(set(models)) == ["judge-one", "judge-two"]
    assert (models.count("judge-one"), models.count("judge-two")) == (8, 9)
    responses = [json.loads(line) for line in (run / "responses.jsonl").read_text().splitlines()]
    assert [r["text"] for r in responses] == [r["completion"] for r in ROWS]
    assert {r["candidate"] for r in responses} == {"completion"} and all(not r["key"] for r in responses)


def test_figures_by_hand(meta_run: Any) -> None:
    run, _, _ = meta_run
    d = json.loads((run / "summary.json").read_text())["datasets"]["meta"]
    assert d["metric"] == "judge_meta_eval"
    for name, want in (("j1", J1), ("j2", J2)):
        got = d["candidates"][name]
        for key, value in want.items():
            assert got[key] == pytest.approx(value, abs=1e-12), (name, key)
        lo, hi = got["ci"]
        assert lo <= got["score"] <= hi
        for cat, (score, n) in BY_CATEGORY[name].items():
            c = got["by_category"][cat]
            assert (c["score"], c["n"]) == (pytest.approx(score, abs=1e-12) if score is not None else None, n)
    assert [r["candidate"] for r in d["leaderboard"]] == ["j1", "j2"]
    base = d["extra"]["human_baseline"]
    assert base["weighted"]["score"] == pytest.approx(HUMANS_WEIGHTED, abs=1e-12)
    assert base["weighted"]["n"] == 46 and base["raters"] == 3
    assert base["pooled"]["score"] == pytest.approx(HUMANS_POOLED, abs=1e-12)
    # The interval is the row bootstrap of tasks/judge_eval.py, with the run's resamples and seed.
    humans = [r["binary_labels"] for r in ROWS]
    cats = [r["category"] for r in ROWS]
    want = judge_meta_eval(VERDICTS["judge-one"], humans, cats, n_boot=200, seed=0)
    assert tuple(d["candidates"]["j1"]["ci"]) == pytest.approx(want.overall.ci, abs=1e-12)


def test_console_lines_and_report_section(meta_run: Any) -> None:
    run, err, _ = meta_run
    lines = [line for line in err.splitlines() if "judge j" in line]
    assert len(lines) == 2
    assert "judge j1: balanced F1 0.6970 [" in lines[0] and "(n=8), kappa 0.7200, leniency +0.1458" in lines[0]
    assert "failures 0" in lines[0]
    assert "judge j2: balanced F1 0.5846 [" in lines[1] and "kappa 0.3333" in lines[1] and "failures 1" in lines[1]
    assert "humans (leave one out): balanced F1 0.5522 weighted over 3 raters, pooled 0.5608 [" in err
    html = (run / "report.html").read_text()
    assert "Judges against the human labels" in html
    assert html.index("<b>j1</b>") < html.index("<b>j2</b>")  # ranked
    assert "humans, weighted mean (leave one out)" in html and "0.552" in html and "0.697" in html


def test_validate_counts_one_judge_call_per_judge_and_row(tmp_path: Path, make_config: Any, cli_main: Any) -> None:
    rc, out, err = cli_main(["--config", str(meta_config(tmp_path, None, make_config)), "--validate"])
    assert rc == 0, err
    counted = json.loads(out)
    assert (counted["examples"], counted["candidate_calls"], counted["judge_calls"]) == (8, 0, 16)


def test_a_bad_row_is_one_line_naming_file_line_and_key(tmp_path: Path, make_config: Any, cli_main: Any) -> None:
    rows = [dict(r) for r in ROWS]
    rows[2]["binary_labels"] = [False, "maybe", True]
    bad = write_jsonl(tmp_path / "bad.jsonl", rows)
    rc, _, err = cli_main(["--config", str(meta_config(tmp_path, None, make_config, bad)), "--validate"])
    assert rc == 2
    (line,) = [x for x in err.splitlines() if x.strip()]
    assert f"{bad}:3: key 'binary_labels[1]'" in line and "'maybe'" in line
    twice = write_jsonl(tmp_path / "twice.jsonl", [*ROWS, ROWS[4]])  # the same completion and criterion again
    rc, _, err = cli_main(["--config", str(meta_config(tmp_path, None, make_config, twice)), "--validate"])
    assert rc == 2 and f"{twice}:9: key 'completion_id': duplicate id 'demo-c5/" in err and "first on line 5" in err


def test_beside_other_datasets_candidates_answer_only_theirs(tmp_path: Path, make_config: Any, cli_main: Any) -> None:
    """A meta-eval dataset in a run with candidates (as the demo has): the candidate answers the other dataset only,
    the overall average leaves the judges' dataset out, and the export holds no meta-eval row."""
    other = write_jsonl(tmp_path / "open.jsonl", [{"id": "q1", "prompt": "What is the capital of France?"}])
    with FakeOpenAIServer(
        responder=lambda body: "Paris." if body["model"] == "cand-alpha" else known_verdicts(body, PARIS)
    ) as server:
        cfg = make_config(
            server,
            candidates=[model_entry("alpha", "openai/cand-alpha", server)],
            judges=[model_entry("j1", "openai/judge-one", server), model_entry("j2", "openai/judge-one", server)],
            datasets=[{"name": "open", "path": str(other)}, {"name": "meta", "path": str(SAMPLE)}],
            judging={"default_rubric": [{"id": "r", "text": PARIS}]},
            export={"formats": ["sft"], "sft_threshold": 0.0},
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "mix"])
        assert rc == 0, err
        assert server.count(model="cand-alpha") == 1
    summary = json.loads((tmp_path / "outputs" / "mix" / "summary.json").read_text())
    assert summary["overall"]["datasets"] == ["open"] and summary["overall"]["candidates"]["alpha"]["datasets"] == 1
    assert set(summary["datasets"]["meta"]["candidates"]) == {"j1", "j2"}
    exported = (tmp_path / "outputs" / "mix" / "export" / "sft.jsonl").read_text().splitlines()
    assert len(exported) == 1 and "meta/" not in exported[0]


def test_a_generic_file_with_fields_and_no_candidates_key(tmp_path: Path, make_config: Any, cli_main: Any) -> None:
    rows = [
        {"conv": r["prompt"], "answer": r["completion"], "check": r["rubric"], "human": {"v": r["binary_labels"]}}
        for r in ROWS
    ]
    data = write_jsonl(tmp_path / "graded.jsonl", rows)
    fields = {"messages": "conv", "response": "answer", "criterion": "check", "labels": "human.v"}
    with FakeOpenAIServer(responder=known_verdicts) as server:
        cfg = make_config(
            server,
            candidates=DELETE,
            judges=[model_entry("j1", "openai/judge-one", server)],
            datasets=[{"name": "g", "path": str(data), "format": "meta_eval", "fields": fields}],
            judging={"default_rubric": DELETE},
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "g"])
        assert rc == 0, err
    d = json.loads((tmp_path / "outputs" / "g" / "summary.json").read_text())["datasets"]["g"]
    assert d["candidates"]["j1"]["score"] == pytest.approx(J1["score"], abs=1e-12)  # no categories, same rows
    assert d["extra"]["human_baseline"]["raters"] is None  # no rater ids: no per-rater baseline
    assert "judge j1: balanced F1 0.6970" in err and "(no rater ids)" in err


@pytest.mark.parametrize(
    ("overrides", "key", "words"),
    [
        ({"judges": DELETE}, "judges", "has every judge grade every row: add judges"),
        ({"judging": {"scale": "1-5", "default_rubric": DELETE}}, "judging.scale", "set judging.scale binary"),
    ],
)
def test_what_a_meta_eval_needs_is_checked_before_any_call(
    tmp_path: Path, make_config: Any, cli_main: Any, overrides: dict, key: str, words: str
) -> None:
    cfg = make_config(None, **{**{"candidates": [], "datasets": [{"path": str(SAMPLE)}]}, **overrides})
    rc, _, err = cli_main(["--config", str(cfg), "--validate"])
    assert rc == 2 and f"key '{key}'" in err and words in err, err


def test_the_shipped_meta_eval_config_counts_judges_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # its paths are relative to the repository root
    cfg = load_config("config.meta_eval.yaml")
    cfg = replace(cfg, cache=replace(cfg.cache, dir=str(tmp_path / "cache")))  # nothing written into the repo
    counted = count_calls(cfg, None)
    assert (counted["examples"], counted["candidate_calls"], counted["judge_calls"]) == (8, 0, 16)
    assert cfg.candidates == [] and len(cfg.judge_pool) == 2


def test_a_judge_that_always_says_met_has_no_balanced_f1_and_says_why(
    tmp_path: Path, make_config: Any, cli_main: Any
) -> None:
    """As the demo's 135M judge does: the not-met class has no pair, so HealthBench gives no balanced F1."""
    always = json.dumps({"explanation": "fine", "criteria_met": True})
    with FakeOpenAIServer(responder=lambda body: always) as server:
        cfg = make_config(
            server,
            candidates=[],
            judges=[model_entry("yes", "openai/judge-yes", server)],
            datasets=[{"name": "meta", "path": str(SAMPLE)}],
            judging={"default_rubric": DELETE},
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "y"])
        assert rc == 0, err
    d = json.loads((tmp_path / "outputs" / "y" / "summary.json").read_text())["datasets"]["meta"]["candidates"]["yes"]
    assert (d["score"], d["kappa"], d["judge_met"]) == (None, 0.0, 1.0)
    assert d["leniency"] == pytest.approx(1 - 23 / 48, abs=1e-12)
    assert "judge yes: balanced F1 – [–, –] (n=8; the judge said met on every row), kappa 0.0000" in err
    assert "the judge said met on every row" in (tmp_path / "outputs" / "y" / "report.html").read_text()


def test_a_verdict_never_given_counts_as_a_failure_of_that_judge_only() -> None:
    """MetaEvalAcc on rows fed directly: a judge missing from a row (its call never made: a stop, the budget) is
    a failure of its own on that row, and a judge that appears only on later rows gets None before them."""
    acc = meta_eval.MetaEvalAcc(AccSpec("m", meta_eval.METRIC, "exclude", 100, 0, None, None))
    labels = [[True, True], [False, False], [True, False, True]]
    for i, hs in enumerate(labels):
        ex = example(f"m/{i}", metadata={"labels": hs, "rater_ids": [f"r{k}" for k in range(len(hs))]})
        r = response(ex.id, "completion")
        votes = [{"judge": "a", "verdict": "met" if i != 1 else "not_met"}] + (
            [{"judge": "b", "verdict": "error"}] if i == 2 else []
        )
        acc.add(ex, [r], [judgment(r, "c1", votes=tuple(votes), judge="+".join(v["judge"] for v in votes))])
    assert acc.verdicts == {"a": [True, False, True], "b": [None, None, None]}
    result = acc.result()
    a, b = result.candidates["a"], result.candidates["b"]
    assert (a.n, a.partial, a.extra["failures"]) == (3, 0, 0)
    assert (b.score, b.n, b.partial, b.extra["f1_note"]) == (None, 0, 3, "no row judged")
    assert result.extra["human_baseline"]["raters"] == 3


def test_compare_lists_the_judges_with_their_balanced_f1(meta_run: Any, cli_main: Any, tmp_path: Path) -> None:
    """`rubricrun compare` recomputes a meta-eval dataset with its own accumulator: its rows are the judges, each
    with the run's balanced F1 (before: one candidate `completion` with no figures)."""
    run, _, _ = meta_run
    rc, _, err = cli_main(["compare", str(run), str(run), "--out", str(tmp_path / "cmp")])
    assert rc == 0, err
    datasets = json.loads((tmp_path / "cmp" / "compare.json").read_text())["datasets"]
    assert list(datasets) == ["meta"] and datasets["meta"]["metric"] == "judge_meta_eval"
    rows = {c["candidate"]: c for c in datasets["meta"]["candidates"]}
    assert sorted(rows) == ["j1", "j2"]
    assert rows["j1"]["score_a"] == pytest.approx(J1["score"]) and rows["j1"]["n_a"] == J1["n"]
    assert rows["j2"]["score_b"] == pytest.approx(J2["score"]) and rows["j2"]["n_b"] == J2["n"]
