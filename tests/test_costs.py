"""USD arithmetic, the budget stop (exit 3), unpriced models under a budget, provider-reported costs, synthesis in
--validate, and Ctrl+C during synthesis: real run.py over the fake server, totals computed by hand."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import DELETE, model_entry, read_jsonl, run_dir, start_cli, write_jsonl
from factories import one_candidate
from fakeserver import FakeOpenAIServer, is_judge_request, message_text

CANDIDATE_USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
JUDGE_USAGE = {"prompt_tokens": 2000, "completion_tokens": 100, "total_tokens": 2100}


def fixed_usage(body: dict[str, Any]) -> dict[str, Any]:
    """Every reply reports the same token counts per role, so the USD figures can be worked out by hand."""
    if is_judge_request(body):
        return {"content": json.dumps({"explanation": "ok", "criteria_met": True}), "usage": JUDGE_USAGE}
    return {"content": "Hello, team.", "usage": CANDIDATE_USAGE}


def rubric_rows(tmp_path: Path, n: int) -> list[dict[str, Any]]:
    rows = [
        {"id": f"r{i}", "prompt": f"Greet team {i}.", "rubric": [{"id": "c1", "text": "Says hello.", "weight": 1}]}
        for i in range(n)
    ]
    return [{"path": str(write_jsonl(tmp_path / "rubric.jsonl", rows))}]


def summary_of(tmp_path: Path, run_id: str) -> dict[str, Any]:
    return json.loads((run_dir(tmp_path, run_id) / "summary.json").read_text())


def one_error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def test_usd_totals_from_config_prices(tmp_path: Path, make_config, cli_main) -> None:
    with FakeOpenAIServer(responder=fixed_usage) as server:
        cfg = make_config(
            server,
            datasets=rubric_rows(tmp_path, 2),
            candidates=one_candidate(server, price={"input_per_mtok": 2, "output_per_mtok": 8}),
            judges=[model_entry("j1", "openai/judge-one", server, price={"input_per_mtok": 1, "output_per_mtok": 4})],
            run={"budget_usd": 10},
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "usd"])
        assert rc == 0, err
        costs = summary_of(tmp_path, "usd")["costs"]
        # candidate: 1000 x $2/M + 500 x $8/M = $0.002 + $0.004 = $0.006 a call, 2 calls = $0.012
        # judge:     2000 x $1/M + 100 x $4/M = $0.002 + $0.0004 = $0.0024 a call, 2 calls = $0.0048
        assert costs["by_model"]["candidate:openai/cand-alpha"]["usd"] == pytest.approx(0.012)
        assert costs["by_model"]["judge:openai/judge-one"]["usd"] == pytest.approx(0.0048)
        assert costs["total_usd"] == pytest.approx(0.0168)
        assert costs["saved_usd"] == 0
        budget = summary_of(tmp_path, "usd")["budget"]
        assert budget["spent_usd"] == pytest.approx(0.0168) and budget["stopped"] is False

        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "usd"])  # all from the cache
        assert rc == 0, err
        costs = summary_of(tmp_path, "usd")["costs"]
        assert costs["total_usd"] == 0 and costs["saved_usd"] == pytest.approx(0.0168)


def test_budget_stops_the_run_with_exit_3(tmp_path: Path, make_config, cli_main) -> None:
    # Each row carries an answer, so it is scored without a judge (a rubric with no judge is refused up front).
    rows = [{"id": f"g{i}", "prompt": f"q{i}", "answer": "answer"} for i in range(1, 9)]
    with FakeOpenAIServer(
        responder=lambda body: {"content": "answer", "usage": {"prompt_tokens": 10, "completion_tokens": 10}}
    ) as server:
        cfg = make_config(
            server,
            datasets=[{"path": str(write_jsonl(tmp_path / "g.jsonl", rows))}],
            candidates=one_candidate(
                server, price={"input_per_mtok": 1000, "output_per_mtok": 1000}, params={"max_tokens": 10}
            ),  # $0.001 a token
            judges=[],
            run={"budget_usd": 0.1, "concurrency": 1},
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "b"])
        assert rc == 3, err
        # Each call costs (10 + 10) x $0.001 = $0.02. Before it, the budget reserves its upper bound: the prompt
        # [{"role": "user", "content": "qN"}] is 35 JSON chars -> 35 // 3 + 8 = 19 tokens, plus max_tokens 10:
        # 29 x $0.001 = $0.029. Call 5 would reach 4 x 0.02 + 0.029 = $0.109 > $0.1: four calls are made.
        assert server.count() == 4
        s = summary_of(tmp_path, "b")
        assert s["status"] == "stopped_on_budget"
        assert s["budget"] == {"budget_usd": 0.1, "spent_usd": pytest.approx(0.08), "stopped": True}
        assert s["costs"]["total_usd"] == pytest.approx(0.08)
        assert s["responses_not_done"] == 4
        assert len(read_jsonl(run_dir(tmp_path, "b") / "responses.jsonl")) == 4


@pytest.mark.parametrize("validate", [True, False])
def test_budget_with_an_unpriced_model_is_bad_input(tmp_path: Path, make_config, cli_main, validate: bool) -> None:
    with FakeOpenAIServer() as server:
        cfg = make_config(server, run={"budget_usd": 1.0})
        rc, out, err = cli_main(["--config", str(cfg), *(["--validate"] if validate else ["--run-id", "u"])])
        assert rc == 2, out + err
        line = one_error_line(err)
        assert re.search(r"config\.yaml:\d+: key 'candidates\[0\]\.model'", line), line
        assert "openai/cand-alpha" in line and "price" in line
        assert server.count() == 0
    assert not (tmp_path / "outputs").exists()


def test_budget_accepts_models_priced_by_config_or_litellm(tmp_path: Path, make_config, cli_main) -> None:
    with FakeOpenAIServer() as server:
        price = {"input_per_mtok": 1, "output_per_mtok": 1}
        cfg = make_config(
            server,
            candidates=[
                model_entry("a", "openai/gpt-4o-mini", server),
                model_entry("b", "openai/x", server, price=price),
            ],
            judges=[model_entry("j", "local/smollm2", None)],
            run={"budget_usd": 1.0},
        )
        rc, out, err = cli_main(["--config", str(cfg), "--validate"])
        assert rc == 0, err
        assert json.loads(out)["unpriced_models"] == []


def test_provider_reported_cost_is_recorded_beside_ours(tmp_path: Path, make_config, cli_main) -> None:
    with FakeOpenAIServer(responder=fixed_usage) as server:
        cfg = make_config(
            server,
            datasets=rubric_rows(tmp_path, 2),
            candidates=[model_entry("mini", "openai/gpt-4o-mini", server)],  # priced by LiteLLM's map
            judges=[model_entry("j1", "openai/judge-one", server)],  # no price anywhere
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "p"])
        assert rc == 0, err
        costs = summary_of(tmp_path, "p")["costs"]
        # gpt-4o-mini in LiteLLM's map: $0.15/M prompt, $0.60/M completion. 1000 x 0.15e-6 + 500 x 0.6e-6 = $0.00045
        # a call, 2 calls = $0.0009, by our count and by LiteLLM's response_cost alike.
        mini = costs["by_model"]["candidate:openai/gpt-4o-mini"]
        assert mini["usd"] == pytest.approx(0.0009) and mini["provider_usd"] == pytest.approx(0.0009)
        assert costs["by_model"]["judge:openai/judge-one"]["provider_usd"] is None
        assert costs["provider_total_usd"] == pytest.approx(0.0009)
        page = (tmp_path / "outputs" / "p" / "report.html").read_text()
        assert "<th>provider USD</th>" in page and "not reported" in page  # the judge's row: no provider cost


# --------------------------------------------------------------------------------------------------
# Synthesis: counted by --validate, and stopped by Ctrl+C with what was done written


def synth_responder(body: dict[str, Any]) -> Any:
    text = message_text(body["messages"][-1])
    if "subtopics of the topic" in text:
        return json.dumps(["Budgeting", "Saving"])
    if "questions or requests" in text:
        sub = re.search(r'about "([^"]+)"', text).group(1)  # type: ignore[union-attr]
        return json.dumps([f"How do I start {sub}?", f"Why {sub}?"])
    return "An answer."


def synth_config(make_config, server: FakeOpenAIServer, **extra: Any) -> Path:
    return make_config(
        server,
        datasets=DELETE,
        synthesize={"main_topic": "personal finance", "num_subtopics": 2, "prompts_per_subtopic": 2},
        candidates=one_candidate(server),
        judges=[],
        **extra,
    )


def test_validate_counts_synthesis_calls(tmp_path: Path, make_config, cli_main) -> None:
    with FakeOpenAIServer(responder=synth_responder) as server:
        cfg = synth_config(make_config, server)
        rc, out, err = cli_main(["--config", str(cfg), "--validate"])
        assert rc == 0, err
        report = json.loads(out)
        # Nothing cached: 3 steps (subtopics, prompts for each of 2 subtopics), each at most an ask and a retry.
        assert report["synthesis_calls"] == 6 and report["synthesis_cached"] == 0
        assert report["examples"] == 4 and report["candidate_calls"] == 4
        assert server.count() == 0

        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "s"])
        assert rc == 0, err
        made = server.count()
        assert made == 3 + 4  # three synthesis asks (no shortfall), four candidate calls
        rc, out, err = cli_main(["--config", str(cfg), "--validate"])
        assert rc == 0, err
        report = json.loads(out)
        assert report["synthesis_calls"] == report["synthesis_cached"] == 3  # replayed from the cache: exact
        assert report["examples"] == 4 and report["candidate_calls"] == report["candidate_cached"] == 4
        assert server.count() == made


def test_ctrl_c_during_synthesis_writes_what_was_done(tmp_path: Path, make_config) -> None:
    slow_asked = threading.Event()

    def slow_second(body: dict[str, Any]) -> Any:
        text = message_text(body["messages"][-1])
        if "questions or requests" in text and '"Saving"' in text:
            slow_asked.set()
            return {"content": "[]", "delay_s": 30.0}  # still in flight when the pool's grace period ends
        return synth_responder(body)

    with FakeOpenAIServer(responder=slow_second) as server:
        cfg = synth_config(make_config, server)
        p = start_cli(["--config", str(cfg), "--run-id", "si"], logs=tmp_path / "logs")
        deadline = time.monotonic() + 60
        while not slow_asked.wait(0.05):  # subtopics and Budgeting's prompts are done; Saving's hang
            assert p.popen.poll() is None and time.monotonic() < deadline, p.stderr
        p.popen.send_signal(signal.SIGINT)
        p.wait(timeout=30)
        err = p.stderr
        assert p.returncode == 130, err
        assert "Traceback" not in err
        out = run_dir(tmp_path, "si")
        s = json.loads((out / "summary.json").read_text())
        assert s["status"] == "interrupted"
        steps = [x["step"] for x in s["synthesis"]]
        assert steps[:2] == ["subtopics", "prompts[0] Budgeting"]
        assert s["synthesis"][1]["final"] == 2
        examples = read_jsonl(out / "examples.jsonl")
        assert [e["metadata"]["sub_topic"] for e in examples] == ["Budgeting", "Budgeting"]
        # Synthesized prompts flow into generation as they come (issue 13): Budgeting's may have answers; nothing
        # was generated after the interruption.
        responses = read_jsonl(out / "responses.jsonl")
        assert {r["example_id"] for r in responses} <= {e["id"] for e in examples}
        assert all(r["status"] == "ok" for r in responses)
        assert "--run-id si" in err


def test_budget_stop_during_synthesis_exits_3_with_a_summary(tmp_path: Path, make_config, cli_main) -> None:
    with FakeOpenAIServer(responder=synth_responder) as server:
        price = {"input_per_mtok": 1000, "output_per_mtok": 1000}  # $0.001 a token: no call fits in $0.01
        cfg = make_config(
            server,
            datasets=DELETE,
            synthesize={"main_topic": "personal finance", "num_subtopics": 2, "prompts_per_subtopic": 2},
            candidates=one_candidate(server, price=price),
            judges=[],
            run={"budget_usd": 0.01},
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "sb"])
        assert rc == 3, err
        assert server.count() == 0
        s = summary_of(tmp_path, "sb")
        assert s["status"] == "stopped_on_budget" and s["budget"]["stopped"] is True
        assert s["synthesis"] == []  # stopped at the first step: nothing synthesized
