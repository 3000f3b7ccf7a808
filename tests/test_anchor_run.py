"""Scores anchored to human labels, the whole path (issue 31): a run judged by a lenient judge of known error (the
fake server's judge says met to nearly every answer, right or wrong), the labelling sheet on a quarter of the
responses, filled with the true verdicts, the rerun with `datasets[].labels` (no call), and the summary's anchored
interval: it holds the true mean, excludes the judge's score, and equals ppi-python on the same arrays."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shutil
import signal

import numpy as np
import pytest
import yaml
from conftest import FAKE_KEY, read_jsonl, run_dir, write_config, write_jsonl
from factories import KEY_ENV, model_entry
from fakeserver import FakeOpenAIServer, is_judge_request, message_text

ppi_py = pytest.importorskip("ppi_py")

N_EXAMPLES = 120
RUBRIC = [{"id": "correct", "text": "The response is right.", "weight": 1}]
_Q = re.compile(r"Question (\d+)\?")


def good(model: str, i: int) -> bool:
    """The truth: alpha answers every 4th question right, beta every 2nd."""
    return i % (4 if "alpha" in model else 2) == 0


def lenient(i: int, text: str) -> bool:
    """The judge: met for a right answer, and for a wrong one too unless i % 16 == 1 (its only catch)."""
    return "RIGHT" in text or i % 16 != 1


def _reply(body: dict) -> str:
    text = "\n".join(message_text(m) for m in body["messages"])
    i = int(_Q.search(text).group(1))
    if is_judge_request(body):
        return json.dumps({"explanation": "lenient", "criteria_met": lenient(i, text)})
    return f"Answer {i}: {'RIGHT' if good(body['model'], i) else 'WRONG'}"


def _main(args: list[str]) -> tuple[int, str]:
    """rubricrun.cli.main in this process (as the cli_main fixture runs it): exit code and stderr."""
    from conftest import _close_log_handlers

    from rubricrun.cli import main

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = main(args)
    finally:
        _close_log_handlers()
        for s, h in handlers.items():
            signal.signal(s, h)
    return rc, err.getvalue()


@pytest.fixture(scope="module")
def labelled_run(tmp_path_factory):
    """The run, its labelling sheet (30 of 120 examples, both candidates: a quarter of the responses) filled in with
    the truth, and the rerun with the labels. Returns (folder, stderr of the rerun, the config path)."""
    tmp = tmp_path_factory.mktemp("anchor")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, FAKE_KEY)  # the autouse fixture's, which a module fixture runs before
        mp.setenv("HOME", str(tmp / "home"))
        return _labelled_run(tmp)


def _labelled_run(tmp):
    data = write_jsonl(tmp / "q.jsonl", [{"id": f"q{i}", "prompt": f"Question {i}?"} for i in range(N_EXAMPLES)])
    with FakeOpenAIServer(responder=_reply) as server:
        cfg = write_config(
            tmp,
            server,
            candidates=[
                model_entry("alpha", "openai/cand-alpha", server),
                model_entry("beta", "openai/cand-beta", server),
            ],
            judges=[model_entry("j1", "openai/judge-one", server)],
            datasets=[{"path": str(data), "name": "q"}],
            judging={"default_rubric": RUBRIC},
        )
        assert _main(["--config", str(cfg), "--run-id", "r"])[0] == 0
        run = run_dir(tmp, "r")
        assert _main(["--label-sheet", str(run), "--sheet-size", "30"])[0] == 0
        sheet = list(csv.DictReader(open(run / "label_sheet.csv", encoding="utf-8")))
        for row in sheet:
            i = int(row["example_id"].split("/q")[1])
            row["met"] = "true" if good(f"cand-{row['candidate']}", i) else "false"
            row["rater"] = "r1"
        labels = tmp / "labels.csv"
        with open(labels, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=list(sheet[0]))
            w.writeheader()
            w.writerows(sheet)
        raw = yaml.safe_load(cfg.read_text())
        raw["datasets"][0]["labels"] = str(labels)
        cfg.write_text(yaml.safe_dump(raw))
        before = server.count()
        rc, err = _main(["--config", str(cfg), "--run-id", "r"])
        assert rc == 0, err
        assert server.count() == before  # attaching labels to a finished run makes no call
    return run, err, cfg


def _arrays(run, cand: str):
    """Y, Yhat (labelled) and Yhat (unlabelled) for `cand`, rebuilt from the run folder by hand."""
    labels = {r["response_id"]: r["met"] == "true" for r in csv.DictReader(open(run.parent.parent / "labels.csv"))}
    verdict = {j["response_id"]: j["verdict"] == "met" for j in read_jsonl(run / "judgments.jsonl")}
    y, yhat, unl = [], [], []
    for r in read_jsonl(run / "responses.jsonl"):
        if r["candidate"] != cand:
            continue
        if r["id"] in labels:
            y.append(float(labels[r["id"]]))
            yhat.append(float(verdict[r["id"]]))
        else:
            unl.append(float(verdict[r["id"]]))
    return np.array(y), np.array(yhat), np.array(unl)


def test_the_sheet_is_a_stratified_quarter_without_the_judges_verdict(labelled_run) -> None:
    run, _, _ = labelled_run
    rows = read_jsonl(run / "label_sheet.jsonl")
    assert len(rows) == 60  # 30 examples x 2 candidates x 1 criterion
    assert {r["candidate"] for r in rows[:2]} == {"alpha", "beta"}  # example by example, every candidate
    assert sum(r["candidate"] == "alpha" for r in rows) == 30
    assert all(r["met"] is None and r["criterion"] == "The response is right." for r in rows)
    assert len({r["example_id"] for r in rows}) == 30
    judged = {j["explanation"] for j in read_jsonl(run / "judgments.jsonl")}
    assert not any(v in json.dumps(rows) for v in judged)  # no judge explanation, no verdict field
    assert not any(k in rows[0] for k in ("verdict", "judge", "explanation"))
    assert list(csv.DictReader(open(run / "label_sheet.csv")))[0]["response_id"] == rows[0]["response_id"]


@pytest.mark.parametrize("cand", ["alpha", "beta"])
def test_the_anchored_interval_holds_the_truth_and_excludes_the_lenient_judge(labelled_run, cand) -> None:
    run, _, _ = labelled_run
    d = json.loads((run / "summary.json").read_text())["datasets"]["q"]
    p = d["candidates"][cand]["ppi"]
    truth = np.mean([good(f"cand-{cand}", i) for i in range(N_EXAMPLES)])
    judge = d["candidates"][cand]["score"]
    assert judge > truth + 0.4  # the judge's bias: it says met nearly always
    assert p["ci"][0] <= truth <= p["ci"][1]
    assert not p["ci"][0] <= judge <= p["ci"][1] and p["judge_outside"]
    assert (p["n_labelled"], p["n_unlabelled"]) == (30, 90)
    assert p["judge_only"] == {"estimate": judge, "ci": d["candidates"][cand]["ci"]}
    # the same arrays through ppi-python: estimate and interval to 1e-6
    y, yhat, unl = _arrays(run, cand)
    assert len(y) == 30 and len(unl) == 90
    est = float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, unl)))
    lo, hi = (float(np.squeeze(x)) for x in ppi_py.ppi_mean_ci(y, yhat, unl, alpha=0.05))
    assert p["estimate"] == pytest.approx(est, abs=1e-6)
    assert p["ci"] == pytest.approx([lo, hi], abs=1e-6)
    clo, chi = ppi_py.classical_mean_ci(y, alpha=0.05)
    assert p["classical"]["ci"] == pytest.approx([clo, chi], abs=1e-6)
    # the judge's agreement on the labelled items: it says met where the humans say not met
    j1 = p["judges"]["j1"]
    assert j1["items"] == 30 and j1["human_met"] == pytest.approx(y.mean())
    assert j1["leniency"] == pytest.approx(yhat.mean() - y.mean()) and j1["leniency"] > 0.25
    assert d["labels"]["responses"] == 60 and d["labels"]["unknown_response"] == 0 and d["labels"]["rows"] == 60


def test_the_paired_difference_and_the_console_line(labelled_run) -> None:
    run, err, _ = labelled_run
    d = json.loads((run / "summary.json").read_text())["datasets"]["q"]
    (diff,) = d["ppi_paired"]
    assert (diff["a"], diff["b"], diff["n_labelled"], diff["n_unlabelled"]) == ("alpha", "beta", 30, 90)
    assert diff["ci"][0] <= -0.25 <= diff["ci"][1]  # truth: alpha 0.25 - beta 0.5
    ya, yha, ua = _arrays(run, "alpha")
    yb, yhb, ub = _arrays(run, "beta")
    lo, hi = ppi_py.ppi_mean_ci(ya - yb, yha - yhb, ua - ub, alpha=0.05)
    assert diff["ci"] == pytest.approx([float(np.squeeze(lo)), float(np.squeeze(hi))], abs=1e-6)
    line = next(ln for ln in err.splitlines() if "alpha" in ln and "human-anchored" in ln and " - " not in ln)
    assert "on 30 labelled of 120 responses" in line and "outside the anchored interval" in line
    assert "alpha - beta human-anchored" in err
    assert f"labels {run.parent.parent / 'labels.csv'}: 60 verdicts, 60 responses labelled in full\n" in err
    page = (run / "report.html").read_text()
    assert "human-anchored" in page


def test_a_bad_label_row_is_bad_input_before_any_call(labelled_run, tmp_path, cli_main) -> None:
    run, _, cfg = labelled_run
    bad = tmp_path / "bad.jsonl"
    write_jsonl(bad, [{"response_id": "q/q1#alpha#0", "criterion_id": "correct", "met": True}, {"response_id": "x"}])
    raw = yaml.safe_load(cfg.read_text())
    raw["datasets"][0]["labels"] = str(bad)
    other = tmp_path / "c.yaml"
    other.write_text(yaml.safe_dump(raw))
    rc, _, err = cli_main(["--config", str(other), "--run-id", "bad"])
    assert rc == 2
    assert f"{bad}:2: key 'criterion_id'" in err
    assert not (run.parent / "bad").exists()
    shutil.rmtree(run.parent / "bad", ignore_errors=True)


def test_the_tally_in_a_second_process_anchors_the_same(labelled_run, monkeypatch) -> None:
    """The summary fed in the child process (engine/second_process.py) reads the labels there: the same summary."""
    run, _, cfg = labelled_run
    monkeypatch.setenv("RUBRICRUN_SECOND_PROCESS", "on")
    rc, err = _main(["--config", str(cfg), "--run-id", "r2"])
    assert rc == 0, err
    one, two = (json.loads((run.parent / r / "summary.json").read_text())["datasets"] for r in ("r", "r2"))
    assert two == one and "ppi" in two["q"]["candidates"]["alpha"]
