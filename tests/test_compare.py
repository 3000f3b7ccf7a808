"""Compare two runs (issue 12, item 8): two runs against the fake server whose judge answers differently; the
comparison recomputes each run's scores, pairs the shared examples, and lists the verdicts that flipped."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from conftest import FAKE_KEY, KEY_ENV, read_jsonl, run_cli, run_dir, subprocess_env, write_config, write_jsonl
from fakeserver import FakeOpenAIServer, is_judge_request, message_text

from rubricrun.results.compare import compare_runs, load_run

RUBRIC = [
    {"id": "short", "text": "The response is short.", "weight": 1},
    {"id": "polite", "text": "The response says please.", "weight": 1},
]
QUESTIONS = [f"Question number {i}?" for i in range(6)]
MC = [{"question": f"Pick the letter {x}.", "choices": ["p", "q"], "answer": x} for x in ("A", "B")]


def _responder(strict: bool):
    """Candidates answer by model; the judge meets `short` always, `polite` only when lenient. The MC candidate
    answers A in run A and B in run B (one judge-free `correct` verdict flips each way)."""

    def reply(body: dict) -> str:
        text = message_text(body["messages"][-1])
        if is_judge_request(body):
            met = "short." in text.split("# Rubric item")[-1] or not strict
            return json.dumps({"explanation": "strict" if strict else "lenient", "criteria_met": met})
        if "Pick the letter" in text:
            return "Answer: B" if strict else "Answer: A"
        return f"{body['model']} says hi"

    return reply


def _run(tmp_path, run_id: str, strict: bool) -> None:
    data = write_jsonl(tmp_path / "open.jsonl", [{"id": f"q{i}", "prompt": q} for i, q in enumerate(QUESTIONS)])
    mc = write_jsonl(tmp_path / "mc.jsonl", MC)
    with FakeOpenAIServer(responder=_responder(strict)) as server:
        entry = {"api_base": server.base_url, "api_key_env": KEY_ENV}
        cfg = write_config(
            tmp_path,
            server,
            filename=f"{run_id}.yaml",
            candidates=[{"name": "alpha", "model": "openai/cand-alpha", **entry}],
            judges=[{"name": "j", "model": "openai/judge", **entry}],
            datasets=[{"path": str(data), "name": "open"}, {"path": str(mc), "name": "mc"}],
            judging={"default_rubric": RUBRIC},
            cache={"dir": str(tmp_path / f"cache-{run_id}")},  # the judge's answer is what differs: no shared cache
        )
        env = subprocess_env(tmp_path, {KEY_ENV: FAKE_KEY})
        rc, _, err = run_cli(["--config", str(cfg), "--run-id", run_id], full_env=env)
    assert rc == 0, err


@pytest.fixture(scope="module")
def _runs(tmp_path_factory):
    """The two runs, made once for the module (tests that alter a run work on a copy)."""
    tmp = tmp_path_factory.mktemp("runs")
    _run(tmp, "lenient", strict=False)
    _run(tmp, "strict", strict=True)
    return run_dir(tmp, "lenient"), run_dir(tmp, "strict")


@pytest.fixture
def two_runs(_runs, tmp_path):
    """Copies of the two runs in this test's folder."""
    out = []
    for src in _runs:
        dst = tmp_path / "outputs" / src.name
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".lock"))
        out.append(dst)
    return tuple(out)


def test_compare_shows_the_change_and_the_flips(two_runs, cli_main, tmp_path) -> None:
    a, b = two_runs
    rc, out, err = cli_main(["compare", str(a), str(b)])
    assert rc == 0, err
    folder = a.parent / "compare-lenient-vs-strict"
    assert out.strip() == str(folder / "compare.html")
    data = json.loads((folder / "compare.json").read_text())
    open_ = data["datasets"]["open"]
    (alpha,) = open_["candidates"]
    # Lenient: both criteria met, normalized 1.0; strict: `polite` not met, 0.5 on every example.
    assert (alpha["score_a"], alpha["score_b"], alpha["n_shared"]) == (1.0, 0.5, 6)
    assert alpha["mean_diff"] == pytest.approx(-0.5) and alpha["ci_low"] == alpha["ci_high"] == pytest.approx(-0.5)
    assert alpha["significant"] and alpha["losses"] == 6 and alpha["flips_to_not_met"] == 6
    assert {(f["criterion_id"], f["a"], f["b"]) for f in open_["flips"]} == {("polite", "met", "not_met")}
    assert open_["flips"][0]["criterion"] == "The response says please."
    # The recomputed headlines are the ones each run reported.
    for side, folder_ in (("score_a", a), ("score_b", b)):
        reported = json.loads((folder_ / "summary.json").read_text())["datasets"]["open"]["candidates"]["alpha"]
        assert alpha[side] == pytest.approx(reported["score"])
    mc = data["datasets"]["mc"]
    assert mc["metric"] == "accuracy" and mc["candidates"][0]["mean_diff"] == 0.0
    assert sorted((f["a"], f["b"], f["judge_b"]) for f in mc["flips"]) == [
        ("met", "not_met", "auto:choice"),
        ("not_met", "met", "auto:choice"),
    ]
    html = (folder / "compare.html").read_text()
    assert "The response says please." in html and "Flipped verdicts (6)" in html
    assert not re.search(r"https?://|src=|<link", html)  # self-contained: no network reference


def test_compare_flag_and_out(two_runs, tmp_path) -> None:
    a, b = two_runs
    rc, out, err = run_cli(["--compare", str(a), str(b), "--out", str(tmp_path / "cmp")])
    assert rc == 0, err
    assert (tmp_path / "cmp" / "compare.json").exists() and (tmp_path / "cmp" / "compare.html").exists()


def test_compare_html_escapes_model_text(two_runs, tmp_path, cli_main) -> None:
    a, b = two_runs
    path = b / "judgments.jsonl"
    rows = read_jsonl(path)
    for r in rows:
        r["explanation"] = "<script>alert(1)</script>"
    write_jsonl(path, rows)
    rc, _, err = cli_main(["compare", str(a), str(b), "--out", str(tmp_path / "esc")])
    assert rc == 0, err
    html = (tmp_path / "esc" / "compare.html").read_text()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)" in html


def test_bad_run_folders_are_one_line_exit_2(two_runs, tmp_path, cli_main) -> None:
    a, b = two_runs
    broken = tmp_path / "broken"
    shutil.copytree(b, broken)
    (broken / "judgments.jsonl").unlink()
    cases = [
        ([str(tmp_path / "nope"), str(b)], "nope: not a run folder"),
        ([str(tmp_path), str(b)], "summary.json: missing"),
        ([str(a), str(broken)], "judgments.jsonl: missing"),
    ]
    for args, msg in cases:
        rc, _, err = cli_main(["compare", *args])
        assert rc == 2 and msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    rc, _, err = cli_main(["--compare", str(a), str(b), "--config", "x.yaml"])
    assert rc == 2 and "--compare takes no --config" in err
    rc, _, err = cli_main(["compare", str(a)])
    assert rc == 2 and "error: command line" in err


def test_load_run_reads_back_typed_rows(two_runs) -> None:
    a, b = two_runs
    # A head-to-head row (judging.pairwise) in judgments.jsonl is not a criterion verdict: it is left out.
    pair = {"kind": "pairwise", "id": "x", "example_id": "open/q0", "a": "alpha", "b": "beta", "winner": "tie"}
    write_jsonl(b / "judgments.jsonl", [*read_jsonl(b / "judgments.jsonl"), pair])
    assert all(j.id != "x" for j in load_run(b).judgments)
    changes = compare_runs(load_run(a), load_run(b))
    assert list(changes) == ["open", "mc"]
