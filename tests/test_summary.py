"""results/summary.py build_summary on hand-made rows: the typed summary, its JSON round trip (no pooled fields),
each bootstrap computed once, and the console lines."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest
from factories import example, judgment, response
from oracles import build_summary

from rubricrun import codec
from rubricrun.config import load_config
from rubricrun.results import stats
from rubricrun.results import summary as summary_mod
from rubricrun.results.report import write_report_from_dir
from rubricrun.results.summary import log_summary
from rubricrun.results.summary_types import Summary, read_summary, summary_data
from rubricrun.types import Criterion, Example, Judgment, Response

GOOD = Criterion(id="good", text="Gives the dose.", weight=5.0, category="Safety", tags=("axis:accuracy",))
BAD = Criterion(id="bad", text="Recommends a dangerous dose.", weight=-5.0, category="Safety", tags=("axis:accuracy",))


def _cfg(tmp_path: Any, candidates: tuple[str, ...]) -> Any:
    lines = ["candidates:"] + [f"  - {{name: {c}, model: openai/{c}}}" for c in candidates]
    lines += ["judge: {name: j, model: openai/j}", "datasets: [{path: d.jsonl}]", "run: {bootstrap_samples: 50}"]
    path = tmp_path / "config.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_config(path)


def _rows(cands: tuple[str, ...], verdicts: dict[str, list[tuple[str, str]]]) -> tuple[list, list, list]:
    """Examples e0..e{n-1}; `verdicts[cand][i]` is (good, bad) for example i. Responses are listed in reverse example
    order, so an order-dependent bootstrap would differ from one over sorted example ids."""
    n = len(next(iter(verdicts.values())))
    examples = [example(f"e{i}", source=f"d.jsonl:{i + 1}", prompt="q", rubric=(GOOD, BAD)) for i in range(n)]
    responses, judgments = [], []
    for cand in cands:
        for i in reversed(range(n)):
            r = response(f"e{i}", cand, "text", key="k")
            responses.append(r)
            for crit, v in zip((GOOD, BAD), verdicts[cand][i], strict=True):
                judgments.append(judgment(r, crit.id, v, weight=crit.weight))
    return examples, responses, judgments


def _summary(tmp_path: Any, verdicts: dict[str, list[tuple[str, str]]]) -> Summary:
    cands = tuple(verdicts)
    cfg = _cfg(tmp_path, cands)
    examples, responses, judgments = _rows(cands, verdicts)
    criteria = {(ex.id, c.id): c for ex in examples for c in ex.rubric}
    return build_summary(cfg, "run-1", examples, responses, judgments, criteria)


VERDICTS = {
    # "harmful" meets the penalty everywhere and the good criterion nowhere; "careful" the reverse.
    "harmful": [("not_met", "met")] * 3 + [("met", "met")],
    "careful": [("met", "not_met")] * 3 + [("not_met", "not_met")],
}


def test_each_bootstrap_once_and_the_leaderboard_shows_the_candidates_ci(tmp_path: Any, monkeypatch: Any) -> None:
    calls = {"mean_ci": 0, "paired_diff": 0}

    def counted(name: str) -> Any:
        real = getattr(stats, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(summary_mod.stats, "mean_ci", counted("mean_ci"))
    monkeypatch.setattr(summary_mod.stats, "paired_diff", counted("paired_diff"))
    mm, mn, nm, nn = ("met", "met"), ("met", "not_met"), ("not_met", "met"), ("not_met", "not_met")
    s = _summary(
        tmp_path,
        {"harmful": [nm, nm, mm, nm, nn, mm], "careful": [mn, mn, nn, mn, mm, mn], "mixed": [mm, mn, nn, mn, nm, mn]},
    )
    d = s.datasets["d"]
    for row in d.leaderboard:  # the leaderboard shows the candidate's own CI, not a second bootstrap's
        c = d.candidates[row.candidate]
        assert (row.score, row.n) == (c.score, 6)
        assert (row.ci_low, row.ci_high) == c.ci
    # 3 candidates: one headline bootstrap each on the one dataset; 3 pairs: one paired bootstrap each (the
    # leaderboard's noise relation).
    assert calls == {"mean_ci": 3, "paired_diff": 3}
    assert d.leaderboard[0].candidate == "careful"


def test_summary_json_round_trips_and_omits_what_it_has_nothing_for(tmp_path: Any) -> None:
    s = _summary(tmp_path, VERDICTS)
    data = json.loads(codec.pretty(summary_data(s)))
    assert read_summary(data) == s
    # The per-dataset results and the run-level sections; the pooled candidates / leaderboard / metric are gone.
    assert list(data) == ["run_id", "pass_threshold", "examples", "datasets", "overall", "judges"]
    # No run facts were added and one judge judged each criterion: those keys are absent, not null.
    assert "status" not in data and "export" not in data and "agreement" not in data["judges"]
    # A summary written before the pooled fields went still reads: they are ignored.
    assert read_summary({**data, "candidates": {"harmful": {}}, "leaderboard": [], "metric": "normalized"}) == s
    # A summary written by an older version (keys missing) still reads; a key of the wrong type does not.
    assert read_summary({"run_id": "old", "surprise": 1}).run_id == "old"
    assert read_summary({k: v for k, v in data.items() if k != "overall"}).overall is None
    with pytest.raises(codec.DecodeError, match="examples"):
        read_summary({"run_id": "old", "examples": "many"})


def test_log_summary_prints_one_line_per_dataset_and_candidate(tmp_path: Any, caplog: Any) -> None:
    s = _summary(tmp_path, VERDICTS)
    with caplog.at_level(logging.INFO, logger="rubricrun"):
        log_summary(s)
    lines = [r.getMessage() for r in caplog.records]
    # harmful, per example (points - N) / (P - N) with P = 5, N = -5: three times (-5 + 5) / 10 = 0 and once
    # (5 - 5 + 5) / 10 = 0.5, so 0.125; every response fully judged.
    words = lines[0].split()
    assert words[:4] == ["d", "harmful", "rubric", "0.1250"] and words[6:] == ["n", "4", "coverage", "1.0000"] + [
        "partial",
        "0",
    ]
    assert len(lines) == 2 and lines[1].split()[:3] == ["d", "careful", "rubric"]


# ---------------------------------------------------------------------------------------------------------------
# Through a real run: sample datasets of every kind, two candidates, the fake server.


def test_run_reports_each_dataset_with_its_own_metric(server: Any, make_config: Any, cli_main: Any) -> None:
    from conftest import read_jsonl
    from oracles import dataset_results

    judges = [{"name": "j1", "model": "openai/judge-one", "api_base": server.base_url}]
    rubric = [{"id": "helpful", "text": "The response answers the question.", "weight": 1}]
    cfg_path = make_config(server, judges=judges, judging={"default_rubric": rubric})
    rc, _, err = cli_main(["--config", str(cfg_path), "--run-id", "ds"])
    assert rc == 0, err
    out = cfg_path.parent / "outputs" / "ds"
    data = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    metrics = {name: d["metric"] for name, d in data["datasets"].items()}
    assert metrics == {
        "generic_sample": "rubric",
        "healthbench_sample": "healthbench",
        "mc_sample": "accuracy",
        "mtbench_sample": "rubric",
        "prbench_sample": "prbench",
        "qa_sample": "accuracy",
    }
    assert data["datasets"]["prbench_sample"]["on_error"] == "not_met"  # PRBench's own rule, said in the summary
    prb = data["datasets"]["prbench_sample"]["candidates"]["alpha"]
    assert list(prb)[:8] == ["score", "ci", "std", "n", "coverage", "partial", "scored", "expected"]
    assert "mean_normalized" in prb and "by_category" in prb  # the metric's own fields sit beside the headline
    assert [r["candidate"] for r in data["datasets"]["mc_sample"]["leaderboard"]] in (
        ["alpha", "beta"],
        ["beta", "alpha"],
    )
    assert data["overall"]["macro_average_of"] == "dataset headlines"
    assert not {"candidates", "leaderboard", "metric", "pairwise"} & set(data)  # no pooled view beside the datasets

    # The numbers are results/metrics.py's, at full precision, for the rows the run wrote.
    s = read_summary(data)
    cfg = load_config(cfg_path)
    rows = [read_jsonl(out / f"{n}.jsonl") for n in ("examples", "responses", "judgments")]
    typed = [[codec.convert(r, cls) for r in rs] for cls, rs in zip((Example, Response, Judgment), rows, strict=True)]
    for d in dataset_results(cfg, *typed):
        for cand, c in d.candidates.items():
            got = s.datasets[d.name].candidates[cand]
            assert (got.score, got.ci, got.n, got.coverage) == (c.score, c.ci, c.n, c.coverage)

    # The console: one line per dataset and candidate, with the dataset's own metric.
    log = (out / "run.log").read_text(encoding="utf-8")
    lines = [ln.split("INFO MainThread ")[-1].split() for ln in log.splitlines() if " coverage " in ln]
    assert [(w[0], w[1], w[2]) for w in lines] == [(n, c, metrics[n]) for n in metrics for c in ("alpha", "beta")]

    # The report: a section per dataset, each with its own leaderboard.
    page = (out / "report.html").read_text(encoding="utf-8")
    for i, name in enumerate(metrics, 1):
        block = page[page.index(f'<div class="dataset" id="dataset-{i}">') :]
        assert block.startswith(f'<div class="dataset" id="dataset-{i}"><h3>{name} <span class="chip">{metrics[name]}')
        assert block.index('<table class="board">') < block.index("</div>")

    # Rebuilt from the run's files (summary.json read back into the typed summary, per-response scores rebuilt
    # from judgments.jsonl), the page is the one the run wrote.
    stamp = re.compile(r"<dt>report generated</dt><dd>[^<]*</dd>")
    write_report_from_dir(out)
    assert stamp.sub("", (out / "report.html").read_text(encoding="utf-8")) == stamp.sub("", page)


def test_run_reports_judge_agreement_and_draws_pictures(tmp_path, make_config, cli_main) -> None:
    """Issue 15: agreement per judge pair and per criterion, the most-disagreed criteria, a histogram per dataset
    and candidate and a radar where rows have categories (the MT-Bench sample: writing, math, reasoning)."""
    import json

    from conftest import read_jsonl
    from fakeserver import FakeOpenAIServer, default_reply, fingerprint

    def contrary_second_judge(body: dict) -> str:
        """judge-two contradicts judge-one on about a third of the criteria (picked by a hash of the request)."""
        reply = default_reply(body)
        if body["model"] != "judge-two" or int(fingerprint(body["messages"])[:4], 16) % 3:
            return reply
        verdict = json.loads(reply)
        return json.dumps({**verdict, "criteria_met": not verdict["criteria_met"]})

    with FakeOpenAIServer(responder=contrary_second_judge) as server:
        # A split vote counts as not met (on_tie), so every response is scored and every category is drawn.
        cfg = make_config(server, judging={"judges_per_criterion": 2, "on_tie": "not_met"})
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "agree"])
    assert rc == 0, err
    out = tmp_path / "outputs" / "agree"
    s = json.loads((out / "summary.json").read_text())
    ag = s["judges"]["agreement"]
    voted = [j for j in read_jsonl(out / "judgments.jsonl") if j["votes"]]
    both = [j for j in voted if all(v["verdict"] != "error" for v in j["votes"])]
    assert [(p["a"], p["b"], p["n"]) for p in ag["pairs"]] == [("j1", "j2", len(both))]
    agree = sum(j["votes"][0]["verdict"] == j["votes"][1]["verdict"] for j in both)
    assert ag["pairs"][0]["percent_agreement"] == round(agree / len(both), 4)
    assert sum(c["units"] for c in ag["criteria"]) == len(both)
    assert ag["most_disagreed"] and all(c["split_rate"] > 0 for c in ag["most_disagreed"])
    rates = [c["split_rate"] for c in ag["most_disagreed"]]
    assert rates == sorted(rates, reverse=True)
    mt = s["datasets"]["mtbench_sample"]["candidates"]["alpha"]
    assert sum(mt["histogram"]) == mt["n"] and len(mt["histogram"]) == 10
    assert set(mt["by_example_category"]) == {"writing", "math", "reasoning"}
    page = (out / "report.html").read_text()
    assert page.count('<svg class="hist"') == sum(
        1 for d in s["datasets"].values() for c in d["candidates"].values() if c["histogram"]
    )
    assert '<svg class="radar"' in page and "Criteria the judges disagree on most" in page
