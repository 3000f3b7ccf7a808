"""Schema-constrained judge output for open models (judges' `structured_output`): OpenAI's response_format
json_schema, or vLLM's guided_json in the body; the fake server records each request body and answers in JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import KEY_ENV, model_entry, read_jsonl, write_jsonl
from factories import one_candidate
from fakeserver import FakeOpenAIServer

from rubricrun.judging.protocol import graded_schema, judge_schema

RUBRIC = [{"id": "c1", "text": "Says hello."}, {"id": "c2", "text": "Names the team."}]


def judge_bodies(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.method == "POST" and r.body.get("model") == "judge-model"]


def run(tmp_path: Path, server: FakeOpenAIServer, make_config, cli_main, judge: dict[str, Any], **extra: Any):
    data = write_jsonl(tmp_path / "rubric.jsonl", [{"id": "r1", "prompt": "Say hello to the team.", "rubric": RUBRIC}])
    cfg = make_config(
        server,
        candidates=one_candidate(server),
        judges=[judge],
        datasets=[{"path": str(data)}],
        **extra,
    )
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "s1"])
    assert rc == 0, err
    return read_jsonl(tmp_path / "outputs" / "s1" / "judgments.jsonl")


@pytest.mark.parametrize("mode", ["auto", "json_schema", "on"])
def test_vllm_judge_asks_response_format_json_schema(tmp_path, server, make_config, cli_main, mode) -> None:
    judge = model_entry("j", "hosted_vllm/judge-model", server, structured_output=mode)
    judgments = run(tmp_path, server, make_config, cli_main, judge)
    bodies = judge_bodies(server)
    assert len(bodies) == 2
    for body in bodies:
        rf = body["response_format"]
        assert rf["type"] == "json_schema"
        assert rf["json_schema"]["schema"] == judge_schema(400)  # what parse_judge_reply reads
        assert "guided_json" not in body
    assert len(judgments) == 2 and all(j["verdict"] in ("met", "not_met") for j in judgments)


def test_guided_json_puts_the_schema_in_the_body(tmp_path, server, make_config, cli_main) -> None:
    judge = model_entry("j", "hosted_vllm/judge-model", server, structured_output="guided_json")
    judgments = run(tmp_path, server, make_config, cli_main, judge)
    bodies = judge_bodies(server)
    assert len(bodies) == 2
    for body in bodies:
        assert body["guided_json"] == judge_schema(400)
        assert "response_format" not in body and "extra_body" not in body
    assert all(j["verdict"] in ("met", "not_met") for j in judgments)  # the JSON reply is read as before


def test_guided_json_keeps_the_judges_own_extra_body(tmp_path, server, make_config, cli_main) -> None:
    judge = model_entry(
        "j", "openai/judge-model", server, structured_output="guided_json", params={"extra_body": {"top_k": 5}}
    )
    run(tmp_path, server, make_config, cli_main, judge)
    for body in judge_bodies(server):
        assert body["top_k"] == 5 and body["guided_json"]["required"] == ["explanation", "criteria_met"]


def test_guided_json_on_the_graded_scale(tmp_path, server, make_config, cli_main) -> None:
    judge = model_entry("j", "hosted_vllm/judge-model", server, structured_output="guided_json")
    run(tmp_path, server, make_config, cli_main, judge, judging={"scale": "1-5"})
    bodies = judge_bodies(server)
    assert bodies and all(b["guided_json"] == graded_schema(400) for b in bodies)


def test_off_sends_text_and_the_reply_is_still_read(tmp_path, server, make_config, cli_main) -> None:
    judge = model_entry("j", "hosted_vllm/judge-model", server, structured_output="off")
    judgments = run(tmp_path, server, make_config, cli_main, judge)
    for body in judge_bodies(server):
        assert "response_format" not in body and "guided_json" not in body
    assert all(j["verdict"] in ("met", "not_met") for j in judgments)


def test_router_judge_auto_asks_json_schema_when_every_deployment_takes_it(
    tmp_path, server, make_config, cli_main
) -> None:
    judge = {
        "name": "pool",
        "deployments": [{"model": "hosted_vllm/judge-model", "api_base": server.base_url, "api_key_env": KEY_ENV}],
    }
    judgments = run(tmp_path, server, make_config, cli_main, judge)
    bodies = judge_bodies(server)
    assert len(bodies) == 2 and all(b["response_format"]["json_schema"]["schema"] == judge_schema(400) for b in bodies)
    assert {j["judge"] for j in judgments} == {"pool"}
