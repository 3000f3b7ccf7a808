"""A judge's system_prompt reaches the judge and keys the cache; judging.on_tie decides a split vote (error,
not_met, or one more judge from the pool). Real run.py over the fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import model_entry, read_jsonl, run_dir, write_jsonl
from factories import one_candidate
from fakeserver import FakeOpenAIServer, default_reply, is_judge_request

RUBRIC = [{"id": "c1", "text": "Greets the team.", "weight": 1}]


def rubric_dataset(tmp_path: Path) -> list[dict[str, Any]]:
    row = {"id": "r1", "prompt": "Say hello to the team.", "rubric": RUBRIC}
    return [{"path": str(write_jsonl(tmp_path / "rubric.jsonl", [row]))}]


def judge_bodies(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.method == "POST" and is_judge_request(r.body)]


def test_judge_system_prompt_is_sent_and_enters_the_cache_key(tmp_path: Path, make_config, cli_main) -> None:
    with FakeOpenAIServer() as server:

        def config(system_prompt: str) -> Path:
            return make_config(
                server,
                datasets=rubric_dataset(tmp_path),
                candidates=one_candidate(server),
                judges=[model_entry("j1", "openai/judge-one", server, system_prompt=system_prompt)],
            )

        rc, _, err = cli_main(["--config", str(config("Be strict.")), "--run-id", "a"])
        assert rc == 0, err
        (body,) = judge_bodies(server)
        assert body["messages"][0] == {"role": "system", "content": "Be strict."}
        assert body["messages"][1]["role"] == "user"

        server.reset_log()
        rc, _, err = cli_main(["--config", str(config("Be lenient.")), "--run-id", "b"])
        assert rc == 0, err
        # The candidate call comes from the cache; the judge call does not: another system prompt, another key.
        assert [b["messages"][0]["content"] for b in judge_bodies(server)] == ["Be lenient."]
        assert server.count() == 1


JUDGES = ["j1", "j2", "j3", "j4"]
VERDICT_OF = {"judge-j1": True, "judge-j2": False, "judge-j3": True, "judge-j4": False}


def alternating(body: dict[str, Any]) -> str:
    """j1 and j3 say met, j2 and j4 say not met: any two judges next to each other in the pool split."""
    if not is_judge_request(body):
        return default_reply(body)
    met = VERDICT_OF[body["model"]]
    return json.dumps({"explanation": f"{body['model']} says {met}", "criteria_met": met})


@pytest.mark.parametrize("on_tie", ["error", "not_met", "judge"])
def test_on_tie(tmp_path: Path, make_config, cli_main, on_tie: str) -> None:
    with FakeOpenAIServer(responder=alternating) as server:
        cfg = make_config(
            server,
            datasets=rubric_dataset(tmp_path),
            candidates=one_candidate(server),
            judges=[model_entry(j, f"openai/judge-{j}", server) for j in JUDGES],
            judging={"judges_per_criterion": 2, "on_tie": on_tie},
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "tie"])
        assert rc == 0, err
        (j,) = read_jsonl(run_dir(tmp_path, "tie") / "judgments.jsonl")
        first, second = (JUDGES.index(v["judge"]) for v in j["votes"][:2])
        assert second == (first + 1) % 4  # two neighbours in the pool: a split vote
        assert {v["verdict"] for v in j["votes"][:2]} == {"met", "not_met"}
        if on_tie == "error":
            assert j["verdict"] == "error" and len(j["votes"]) == 2 and len(judge_bodies(server)) == 2
        elif on_tie == "not_met":
            assert j["verdict"] == "not_met" and len(j["votes"]) == 2 and len(judge_bodies(server)) == 2
        else:
            # One more judge: the next round-robin after the two voters, which votes like the first voter.
            assert len(j["votes"]) == 3 and len(judge_bodies(server)) == 3
            breaker = j["votes"][2]
            assert breaker["judge"] == JUDGES[(second + 1) % 4]
            assert j["verdict"] == breaker["verdict"] == j["votes"][0]["verdict"]
            assert j["judge"] == "+".join(v["judge"] for v in j["votes"])
