"""A judge reply that cannot be read is not replayed from the cache: a rerun of the same run id asks again,
while every readable reply (candidate and judge) still comes from the cache. Through the fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import model_entry, read_jsonl, write_jsonl
from factories import one_candidate
from fakeserver import FakeOpenAIServer, default_reply, is_judge_request, message_text

from rubricrun.judging.protocol import JUDGE_PARSE_ATTEMPTS

RUBRIC = [
    {"id": "g1", "text": "GOOD-ONE: greets the team.", "weight": 1},
    {"id": "g2", "text": "GOOD-TWO: is polite.", "weight": 1},
    {"id": "fl", "text": "FLAKY: mentions the date.", "weight": 1},
]
GARBAGE = "I read the response carefully and it is fine, I think."


def _flaky(body: dict[str, Any]) -> bool:
    return is_judge_request(body) and any("FLAKY" in message_text(m) for m in body.get("messages") or [])


def _config(tmp_path: Path, server: FakeOpenAIServer, make_config) -> Path:
    row = {"id": "r1", "prompt": "Say hello to the team.", "rubric": RUBRIC}
    return make_config(
        server,
        candidates=one_candidate(server),
        judges=[model_entry("j1", "openai/judge-one", server)],
        datasets=[{"path": str(write_jsonl(tmp_path / "rubric.jsonl", [row]))}],
    )


def _verdicts(tmp_path: Path, run_id: str) -> dict[str, str]:
    return {j["criterion_id"]: j["verdict"] for j in read_jsonl(tmp_path / "outputs" / run_id / "judgments.jsonl")}


def test_unreadable_judge_reply_is_asked_again_on_rerun(tmp_path: Path, make_config, cli_main) -> None:
    broken = {"on": True}

    def responder(body: dict[str, Any]) -> str:
        return GARBAGE if broken["on"] and _flaky(body) else default_reply(body)

    with FakeOpenAIServer(responder=responder) as server:
        cfg = str(_config(tmp_path, server, make_config))
        rc, _, err = cli_main(["--config", cfg, "--run-id", "rerun"])
        assert rc == 0, err
        first = _verdicts(tmp_path, "rerun")
        assert first["fl"] == "error" and first["g1"] != "error" and first["g2"] != "error"
        assert sum(_flaky(r.body) for r in server.requests) == JUDGE_PARSE_ATTEMPTS  # asked, re-asked once

        server.reset_log()
        broken["on"] = False
        rc, _, err = cli_main(["--config", cfg, "--run-id", "rerun"])
        assert rc == 0, err
        # Only the unreadable criterion is asked again (its first attempt now reads); the candidate call and
        # the two readable judge replies come from the cache.
        assert [_flaky(r.body) for r in server.requests] == [True]
        second = _verdicts(tmp_path, "rerun")
        assert second["fl"] in ("met", "not_met")
        assert {k: second[k] for k in ("g1", "g2")} == {k: first[k] for k in ("g1", "g2")}

        server.reset_log()
        rc, _, err = cli_main(["--config", cfg, "--run-id", "rerun"])
        assert rc == 0, err
        assert server.requests == []  # the good reply is now cached: a third run pays for nothing
        assert _verdicts(tmp_path, "rerun") == second


def test_unreadable_first_reply_read_on_the_reask_replays_for_free(tmp_path: Path, make_config, cli_main) -> None:
    def responder(body: dict[str, Any]) -> str:
        if _flaky(body) and not body.get("temperature"):  # garbage at temperature 0, readable on the re-ask
            return GARBAGE
        if _flaky(body):
            return json.dumps({"explanation": "It mentions the date.", "criteria_met": True})
        return default_reply(body)

    with FakeOpenAIServer(responder=responder) as server:
        cfg = str(_config(tmp_path, server, make_config))
        rc, _, err = cli_main(["--config", cfg, "--run-id", "reask"])
        assert rc == 0, err
        assert _verdicts(tmp_path, "reask")["fl"] == "met"
        assert sum(_flaky(r.body) for r in server.requests) == 2
        server.reset_log()
        rc, _, err = cli_main(["--config", cfg, "--run-id", "reask"])
        assert rc == 0, err
        assert server.requests == []
        assert _verdicts(tmp_path, "reask")["fl"] == "met"
