"""Multi-turn conversations (each turn the candidate's own) and answers you already have (`responses_from`,
`response_column`), driven through LiteLLM against the fake server (issue 12)."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import Any

from conftest import DEFAULT_RUBRIC, REPO, model_entry, read_jsonl, run_cli, start_cli, write_jsonl
from fakeserver import FakeOpenAIServer, message_text
from msgspec.structs import replace
from oracles import load_examples

from rubricrun.config import load_config
from rubricrun.data.answers_file import load_replays, replayed_answer
from rubricrun.tasks import registry
from rubricrun.tasks.registry import ANSWER_READERS

CONVERSATIONS = [
    {"question_id": 1, "category": "writing", "turns": ["Write a haiku.", "Make it sadder.", "Now in French."]},
    {"question_id": 2, "category": "math", "turns": ["What is 2+2?", "Times three?"], "reference": ["4", "12"]},
]


def candidate_posts(server: FakeOpenAIServer, model: str = "cand-alpha") -> list[Any]:
    return [r for r in server.requests if r.method == "POST" and r.model == model]


def turns_config(tmp_path: Path, server: FakeOpenAIServer, data: Path, **extra: Any) -> Path:
    cfg: dict[str, Any] = {
        "candidates": [model_entry("alpha", "openai/cand-alpha", server)],
        "judges": [model_entry("j1", "openai/judge-one", server)],
        "datasets": [{"path": str(data)}],
        "run": {"output_dir": str(tmp_path / "outputs"), "progress": False, "concurrency": 2, "bootstrap_samples": 20},
        "cache": {"dir": str(tmp_path / "cache")},
        "retry": {"initial_wait_s": 0.05, "max_wait_s": 1, "max_attempts": 2},
        "judging": {"default_rubric": DEFAULT_RUBRIC},
    }
    cfg.update(extra)
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(cfg), encoding="utf-8")  # JSON is YAML
    return path


def test_turn_two_carries_the_candidates_own_turn_one_reply(tmp_path: Path, server: FakeOpenAIServer, cli_main):
    data = write_jsonl(tmp_path / "mt.jsonl", CONVERSATIONS)
    cfg = turns_config(tmp_path, server, data)
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "t"])
    assert rc == 0, err
    asked = [[(m["role"], message_text(m)) for m in r.body["messages"]] for r in candidate_posts(server)]
    assert len(asked) == 5  # 3 + 2 turns, each asked once
    haiku = [("user", "Write a haiku.")]
    # the fake server answers "Answer to: <last user turn>": turn 2 carries that very reply, turn 3 both
    assert haiku in asked
    assert [*haiku, ("assistant", "Answer to: Write a haiku."), ("user", "Make it sadder.")] in asked
    assert [
        *haiku,
        ("assistant", "Answer to: Write a haiku."),
        ("user", "Make it sadder."),
        ("assistant", "Answer to: Make it sadder."),
        ("user", "Now in French."),
    ] in asked

    out = tmp_path / "outputs" / "t"
    responses = read_jsonl(out / "responses.jsonl")
    assert [(r["example_id"], r["turn"]) for r in responses] == [
        ("mt/1", 1),
        ("mt/1", 2),
        ("mt/1", 3),
        ("mt/2", 1),
        ("mt/2", 2),
    ]
    assert [r["id"] for r in responses][:3] == ["mt/1#alpha#0", "mt/1#alpha#0#t2", "mt/1#alpha#0#t3"]
    assert len({r["key"] for r in responses}) == 5  # each turn its own cache key
    # each turn judged on its own: the judge sees the conversation up to and including that turn's answer
    judgments = read_jsonl(out / "judgments.jsonl")
    assert [j["response_id"] for j in judgments] == [r["id"] for r in responses]
    judge_prompts = [json.dumps(r.body["messages"]) for r in server.requests if r.model == "judge-one"]
    turn3 = [p for p in judge_prompts if "Now in French." in p]
    assert len(turn3) == 1 and "Answer to: Write a haiku." in turn3[0] and "Answer to: Now in French." in turn3[0]

    # results per turn and per MT-Bench category, in summary.json and in the report's dataset section
    summary = json.loads((out / "summary.json").read_text())
    alpha = summary["datasets"]["mt"]["candidates"]["alpha"]
    assert {t: d["n"] for t, d in alpha["by_turn"].items()} == {"1": 2, "2": 2, "3": 1}
    assert set(alpha["by_category"]) == {"writing", "math"} and alpha["expected"] == 5
    report = (out / "report.html").read_text()
    assert "rubric by turn (3)" in report and "rubric by category (2)" in report
    data = re.search(r'<script type="application/json" id="data">(.*?)</script>', report, re.S)
    assert data and [r[7] for r in json.loads(data.group(1))["ex"][0]["r"]] == [1, 2, 3]  # the view labels turns

    # the rerun pays for nothing and writes the same rows (but for cache_hit)
    def rows() -> dict[str, list[dict[str, Any]]]:
        names = ("responses.jsonl", "judgments.jsonl", "examples.jsonl")
        return {n: [{k: v for k, v in r.items() if k != "cache_hit"} for r in read_jsonl(out / n)] for n in names}

    before, first = server.count(), rows()
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "t"])
    assert rc == 0, err
    assert server.count() == before
    assert rows() == first
    assert not any("cache_hit" in r for r in read_jsonl(out / "responses.jsonl"))  # issue 13: not in the rows


def test_validate_counts_every_turn(tmp_path: Path, server: FakeOpenAIServer, cli_main):
    data = write_jsonl(tmp_path / "mt.jsonl", CONVERSATIONS)
    cfg = turns_config(tmp_path, server, data)
    rc, out, err = run_cli(["--config", str(cfg), "--validate"])
    assert rc == 0, err
    report = json.loads(out)
    assert (report["candidate_calls"], report["candidate_cached"], report["judge_calls"]) == (5, 0, 5)
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "v"])
    assert rc == 0, err
    rc, out, err = run_cli(["--config", str(cfg), "--validate"])
    report = json.loads(out)
    assert (report["candidate_calls"], report["candidate_cached"]) == (5, 5)
    assert report["judge_calls"] == report["judge_cached"] == 5


def test_a_failed_turn_ends_its_conversation(tmp_path: Path, server: FakeOpenAIServer, cli_main):
    data = write_jsonl(tmp_path / "mt.jsonl", CONVERSATIONS)
    cfg = turns_config(tmp_path, server, data)
    server.add_rule(lambda body: message_text(body["messages"][-1]) == "Make it sadder.", 400)
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "f"])
    assert rc == 0, err
    responses = read_jsonl(tmp_path / "outputs" / "f" / "responses.jsonl")
    assert [(r["example_id"], r["turn"], r["status"]) for r in responses] == [
        ("mt/1", 1, "ok"),
        ("mt/1", 2, "error"),  # turn 3 is never asked: it would follow an answer that does not exist
        ("mt/2", 1, "ok"),
        ("mt/2", 2, "ok"),
    ]
    assert not any("Now in French." in json.dumps(r.body) for r in candidate_posts(server))
    assert "conversations ended at a failed turn 2: 1 later turns not asked" in err
    summary = json.loads((tmp_path / "outputs" / "f" / "summary.json").read_text())
    assert summary["responses_not_done"] == 0


def test_kill9_mid_conversation_resumes_without_paying_twice(tmp_path: Path):
    rows = [{"question_id": i, "turns": [f"Q{i} turn one", f"Q{i} turn two"]} for i in range(6)]
    data = write_jsonl(tmp_path / "mt.jsonl", rows)
    with FakeOpenAIServer(latency_s=0.3) as server:
        cfg = turns_config(tmp_path, server, data)
        proc = start_cli(["--config", str(cfg), "--run-id", "k"], logs=tmp_path / "logs")
        deadline = time.monotonic() + 60
        # kill once turn 2 is under way: every turn 1 answered, some turn 2 calls answered, others out
        while sum("turn two" in json.dumps(r.body) for r in candidate_posts(server)) < 4:
            assert proc.popen.poll() is None, proc.stderr
            assert time.monotonic() < deadline, "turn 2 never started"
            time.sleep(0.02)
        killed_at = time.time()
        proc.popen.send_signal(signal.SIGKILL)
        proc.wait(30)
        first = candidate_posts(server)
        rc, _, err = run_cli(["--config", str(cfg), "--run-id", "k"])
        assert rc == 0, err
        resumed = candidate_posts(server)[len(first) :]
    # the resume asks only the turns whose answer was not cached: no turn 1 again, and no turn 2 answered
    # well before the kill (a call in flight at the kill, within its 0.3 s latency, may be asked again)
    assert not any("turn two" not in json.dumps(r.body) for r in resumed)
    answered_before = {r.fingerprint for r in first if r.status == 200 and r.t < killed_at - 0.8}
    assert not answered_before & {r.fingerprint for r in resumed}
    assert answered_before and len(resumed) < 6
    responses = read_jsonl(tmp_path / "outputs" / "k" / "responses.jsonl")
    assert [(r["example_id"], r["turn"]) for r in responses] == [(f"mt/{i}", t) for i in range(6) for t in (1, 2)]
    assert all(r["status"] == "ok" for r in responses)


# --------------------------------------------------------------------------------------------------
# Answers you already have


def test_responses_from_makes_no_calls_and_is_judged(tmp_path: Path, server: FakeOpenAIServer, cli_main):
    data = write_jsonl(tmp_path / "mt.jsonl", CONVERSATIONS)
    mt_answers = write_jsonl(
        tmp_path / "model_answer.jsonl",
        [{"question_id": 1, "model_id": "gpt-4", "choices": [{"index": 0, "turns": ["H1", "H2", "H3"]}]}],
    )
    generic = write_jsonl(
        tmp_path / "answers.jsonl",
        [{"id": "mt/1", "response": "G1"}, {"id": 1, "turn": 2, "response": "G2"}, {"id": "2", "response": "G2.1"}],
    )
    cfg = turns_config(
        tmp_path,
        server,
        data,
        candidates=[
            {"name": "mtb", "responses_from": str(mt_answers)},
            {"name": "gen", "responses_from": str(generic)},
        ],
    )
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "r"])
    assert rc == 0, err
    assert all(r.model == "judge-one" for r in server.requests if r.method == "POST")  # no candidate call
    responses = read_jsonl(tmp_path / "outputs" / "r" / "responses.jsonl")
    got = [(r["candidate"], r["example_id"], r["turn"], r["text"], r["error"]) for r in responses]
    assert got == [
        ("mtb", "mt/1", 1, "H1", None),
        ("mtb", "mt/1", 2, "H2", None),
        ("mtb", "mt/1", 3, "H3", None),
        ("gen", "mt/1", 1, "G1", None),  # joined on the full example id
        ("gen", "mt/1", 2, "G2", None),  # or on the native question_id, with its turn
        ("gen", "mt/1", 3, None, f"no answer in {generic} for mt/1 turn 3"),
        ("mtb", "mt/2", 1, None, f"no answer in {mt_answers} for mt/2 turn 1"),
        ("gen", "mt/2", 1, "G2.1", None),
        ("gen", "mt/2", 2, None, f"no answer in {generic} for mt/2 turn 2"),
    ]
    assert {r["model"] for r in responses if r["candidate"] == "gen"} == {f"file:{generic}"}
    assert all(r["usage"]["total_tokens"] == 0 and "cache_hit" not in r for r in responses)  # issue 13: not in rows
    judged = {j["response_id"] for j in read_jsonl(tmp_path / "outputs" / "r" / "judgments.jsonl")}
    assert judged == {r["id"] for r in responses if r["status"] == "ok"}
    # the judge of turn 3 sees the replayed conversation
    turn3 = [json.dumps(r.body) for r in server.requests if "Now in French." in json.dumps(r.body)]
    assert len(turn3) == 1 and "H1" in turn3[0] and "H2" in turn3[0] and "H3" in turn3[0]


def test_response_column_replays_the_rows_own_answers(tmp_path: Path, server: FakeOpenAIServer, cli_main):
    rows = [
        {"id": "a", "prompt": "Say hi.", "final_response": "Hi!"},
        {"id": "b", "prompt": "Say bye."},
    ]
    data = write_jsonl(tmp_path / "gen.jsonl", rows)
    mt = write_jsonl(tmp_path / "mt.jsonl", [{**CONVERSATIONS[1], "answers": ["Four.", "Twelve."]}])
    cfg = turns_config(
        tmp_path,
        server,
        data,
        datasets=[{"path": str(data)}, {"path": str(mt)}],
        candidates=[
            {"name": "col", "response_column": "final_response"},
            {"name": "ans", "response_column": "answers"},
        ],
    )
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "c"])
    assert rc == 0, err
    responses = read_jsonl(tmp_path / "outputs" / "c" / "responses.jsonl")
    got = {(r["candidate"], r["example_id"], r["turn"]): (r["text"], r["error"], r["model"]) for r in responses}
    assert got[("col", "gen/a", 1)] == ("Hi!", None, "column:final_response")
    assert got[("col", "gen/b", 1)] == (None, "no answer in column 'final_response' for gen/b", "column:final_response")
    assert got[("ans", "mt/2", 1)][0] == "Four." and got[("ans", "mt/2", 2)][0] == "Twelve."
    assert all(r.model == "judge-one" for r in server.requests if r.method == "POST")


def test_a_bad_answers_file_is_one_line_exit_2(tmp_path: Path, server: FakeOpenAIServer):
    data = write_jsonl(tmp_path / "mt.jsonl", CONVERSATIONS)
    bad = write_jsonl(tmp_path / "answers.jsonl", [{"id": "1", "response": "ok"}, {"id": "2", "text": "no"}])
    cfg = turns_config(tmp_path, server, data, candidates=[{"name": "f", "responses_from": str(bad)}])
    rc, _, err = run_cli(["--config", str(cfg), "--validate"])
    assert rc == 2 and "Traceback" not in err
    assert f"{bad}:2" in err and "{id, response}" in err
    assert server.count() == 0


def test_a_replayed_candidate_names_no_model(tmp_path: Path, server: FakeOpenAIServer):
    data = write_jsonl(tmp_path / "mt.jsonl", CONVERSATIONS)
    answers = write_jsonl(tmp_path / "answers.jsonl", [{"id": "1", "response": "ok"}])
    entry = {"name": "f", "responses_from": str(answers), "model": "openai/x"}
    cfg = turns_config(tmp_path, server, data, candidates=[entry])
    rc, _, err = run_cli(["--config", str(cfg), "--validate"])
    assert rc == 2 and "candidates[0].model" in err and "not both responses_from and model" in err


def test_the_demo_replays_an_answer_for_every_turn_of_every_example(monkeypatch) -> None:
    monkeypatch.chdir(REPO)  # the example config's paths are relative to the repository root
    cfg = load_config("config.example.yaml")
    # Every row of the six sample files, not only the demo's slice (generic is commented out of the demo).
    datasets = [*cfg.datasets, replace(cfg.datasets[0], name="generic", path="data/generic_sample.jsonl")]
    cfg = replace(cfg, datasets=[replace(d, limit=None) for d in datasets])
    examples, _ = load_examples(cfg, 1000)
    examples = [ex for ex in examples if not registry.answers_itself(ex)]  # the meta-eval rows replay their own
    (cand,) = [c for c in cfg.candidates if c.responses_from]
    answers = load_replays(cfg, ANSWER_READERS)[cand.name]
    missing = [
        (ex.id, t)
        for ex in examples
        for t in range(1, ex.turns + 1)
        if replayed_answer(cand, answers, ex, t)[0] is None
    ]
    assert not missing and len(examples) == 20


def test_export_pairs_only_first_turns(tmp_path: Path, server: FakeOpenAIServer, cli_main):
    data = write_jsonl(tmp_path / "mt.jsonl", CONVERSATIONS)
    cfg = turns_config(tmp_path, server, data, candidates=[model_entry(n, f"openai/cand-{n}", server) for n in "ab"])
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "e", "--export", "sft", "--export", "reward"])
    assert rc == 0, err
    rows = read_jsonl(tmp_path / "outputs" / "e" / "export" / "reward.jsonl")
    assert rows and all("#t" not in rid for r in rows for rid in r["provenance"]["response_ids"])
