"""The whole pipeline through the real CLI and the real LiteLLM HTTP path against FakeOpenAIServer on 127.0.0.1.

The headline runs (full run, rerun, --validate, two processes on one run id) are `python run.py` subprocesses.
The fault-injection runs call `rubricrun.cli.main([...])` in-process (`cli_main`): the same code path from the
argument parser down to the HTTP request, but LiteLLM's ~4 s import is paid once per session instead of once per run.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import (
    DEFAULT_RUBRIC,
    FAKE_KEY,
    KEY_ENV,
    SAMPLE_DATASETS,
    read_jsonl,
    run_cli,
    start_cli,
    write_config,
    write_jsonl,
)
from factories import one_candidate
from fakeserver import FakeOpenAIServer, Rule, default_reply, is_judge_request, message_text

from rubricrun.judging.protocol import JUDGE_PARSE_ATTEMPTS

EXAMPLE_FIELDS = {"id", "dataset", "source", "messages", "reference", "choices", "answer", "rubric"}
CRITERION_FIELDS = {"id", "text", "weight", "tags"}
RESPONSE_FIELDS = {
    "id", "example_id", "candidate", "model", "sample_index", "status", "text", "error", "finish_reason", "usage",
}  # fmt: skip
JUDGMENT_FIELDS = {
    "id", "response_id", "example_id", "candidate", "criterion_id", "weight", "judge", "verdict", "explanation",
    "error",
}  # fmt: skip
TRACE_FIELDS = {"role", "model", "key", "cache_hit", "attempt", "latency_ms", "status", "error", "usage"}
DATASET_CANDIDATE_FIELDS = {"score", "ci", "std", "n", "coverage", "partial", "scored", "expected", "histogram"}
ARTIFACTS = ("examples.jsonl", "responses.jsonl", "judgments.jsonl", "trace.jsonl", "summary.json", "config.yaml",
             "run.log")  # fmt: skip


def by_model_responder(body: dict[str, Any]) -> str:
    """Judges get the server's default JSON verdict; candidates answer with their model name in the text, so two
    candidates never produce the same response (and their judge calls never share a cache key)."""
    if is_judge_request(body):
        return default_reply(body)
    return f"[{body.get('model')}] {default_reply(body)}"


def load_run(out: Path) -> dict[str, Any]:
    return {
        "examples": read_jsonl(out / "examples.jsonl"),
        "responses": read_jsonl(out / "responses.jsonl"),
        "judgments": read_jsonl(out / "judgments.jsonl"),
        "trace": read_jsonl(out / "trace.jsonl"),
        "summary": json.loads((out / "summary.json").read_text(encoding="utf-8")),
    }


def expected_judgments_per_response(example: dict[str, Any]) -> int:
    """One judgment per criterion for a rubric example; one auto 'correct' judgment for MC / QA; one per
    default-rubric criterion for open examples (base_config has a default rubric)."""
    if example["rubric"]:
        return len(example["rubric"])
    if example["choices"] or example["answer"] is not None:
        return 1
    return len(DEFAULT_RUBRIC)


def data_rows(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def data_turns(path: Path) -> int:
    """Conversation turns in a data file: MT-Bench rows ask each of their `turns` (issue 12), the others one."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sum(len(r["turns"]) if isinstance(r.get("turns"), list) else 1 for r in rows)


def example_turns(examples: list[dict]) -> int:
    return sum(1 + len(e["later_turns"]) for e in examples)


def row_counts(run: dict[str, Any], cand: str) -> dict[str, int]:
    """A candidate's responses and failed rows, counted in the run's files (summary.json has per-dataset scores)."""
    rs = [r for r in run["responses"] if r["candidate"] == cand]
    js = [j for j in run["judgments"] if j["candidate"] == cand]
    return {
        "responses": len(rs),
        "response_errors": sum(r["status"] == "error" for r in rs),
        "judgment_errors": sum(j["verdict"] == "error" for j in js),
    }


def headline(run: dict[str, Any], dataset: str, cand: str) -> dict[str, Any]:
    return run["summary"]["datasets"][dataset]["candidates"][cand]


# ---------------------------------------------------------------------------------------------------
# One full run over the sample datasets, shared by the tests that inspect it (a subprocess, ~5 s)


@dataclass
class FullRun:
    server: FakeOpenAIServer
    tmp: Path
    config: Path
    out: Path
    rc: int
    stdout: str
    stderr: str
    requests: int  # server requests the first run made
    first: dict[str, Any]  # the first run's rows, read before anything reruns
    files: dict[str, bytes]  # the first run's artifacts, byte for byte


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FullRun]:
    tmp = tmp_path_factory.mktemp("fullrun")
    home = tmp_path_factory.mktemp("fullrun-home")
    env = {KEY_ENV: FAKE_KEY, "HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with FakeOpenAIServer(responder=by_model_responder) as server:
        cfg = write_config(tmp, server)
        rc, stdout, stderr = run_cli(["--config", str(cfg), "--run-id", "full"], env=env)
        out = tmp / "outputs" / "full"
        files = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} if out.is_dir() else {}
        first = load_run(out) if rc == 0 else {}
        yield FullRun(server, tmp, cfg, out, rc, stdout, stderr, server.count(), first, files)


def test_full_run_writes_every_artifact(full_run: FullRun) -> None:
    assert full_run.rc == 0, full_run.stderr
    for name in ARTIFACTS:
        assert (full_run.out / name).is_file(), name
        assert (full_run.out / name).stat().st_size > 0, name
    assert "Traceback" not in full_run.stderr


def test_full_run_row_counts(full_run: FullRun) -> None:
    assert full_run.rc == 0, full_run.stderr
    run = full_run.first
    examples, responses, judgments = run["examples"], run["responses"], run["judgments"]
    # Every sample row is a valid example.
    assert len(examples) == sum(data_rows(p) for p in SAMPLE_DATASETS)
    assert {e["dataset"] for e in examples} == {p.stem for p in SAMPLE_DATASETS}
    # responses = turns x candidates, all ok, one per (example, candidate, turn)
    assert len(responses) == example_turns(examples) * 2
    assert {(r["example_id"], r["candidate"], r["turn"]) for r in responses} == {
        (e["id"], c, t) for e in examples for c in ("alpha", "beta") for t in range(1, 2 + len(e["later_turns"]))
    }
    assert all(r["status"] == "ok" for r in responses)
    # judgments = per ok response: one per criterion (rubric) or one "correct" (MC / QA)
    by_id = {e["id"]: e for e in examples}
    expected = sum(expected_judgments_per_response(by_id[r["example_id"]]) for r in responses if r["status"] == "ok")
    assert len(judgments) == expected
    auto = [j for j in judgments if j["criterion_id"] == "correct"]
    n_auto_examples = sum(1 for e in examples if not e["rubric"] and (e["choices"] or e["answer"] is not None))
    assert len(auto) == n_auto_examples * 2
    assert all(j["judge"].startswith("auto:") for j in auto)
    rubric_j = [j for j in judgments if j["criterion_id"] != "correct"]
    assert {j["judge"] for j in rubric_j} == {"j1", "j2"}  # the pool is used
    assert all(j["verdict"] in ("met", "not_met") for j in judgments)  # nothing failed
    # each rubric judgment is one criterion of its example, with its weight
    for j in rubric_j:
        crit = {c["id"]: c for c in by_id[j["example_id"]]["rubric"] or DEFAULT_RUBRIC}
        assert crit[j["criterion_id"]]["weight"] == j["weight"]


def test_full_run_field_names(full_run: FullRun) -> None:
    assert full_run.rc == 0, full_run.stderr
    run = full_run.first
    for e in run["examples"]:
        assert EXAMPLE_FIELDS <= set(e), e
        for c in e["rubric"]:
            assert CRITERION_FIELDS <= set(c), c
    for r in run["responses"]:
        assert RESPONSE_FIELDS <= set(r), r
        assert set(r["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens"}
        assert r["usage"]["completion_tokens"] > 0  # the fake server's usage made it through
    for j in run["judgments"]:
        assert JUDGMENT_FIELDS <= set(j), j
    for t in run["trace"]:
        assert TRACE_FIELDS <= set(t), t
    summary = run["summary"]
    assert summary["run_id"] == "full"
    assert set(summary["overall"]["candidates"]) == {"alpha", "beta"}
    for name in ("alpha", "beta"):
        want = {"responses": example_turns(run["examples"]), "response_errors": 0, "judgment_errors": 0}
        assert row_counts(run, name) == want
    for d in summary["datasets"].values():
        assert set(d["candidates"]) == {"alpha", "beta"}
        for name, c in d["candidates"].items():
            assert DATASET_CANDIDATE_FIELDS <= set(c), (name, sorted(c))
            assert c["coverage"] == 1.0 and c["partial"] == 0
            assert 0.0 <= c["score"] <= 1.0


def test_full_run_trace_has_one_event_per_server_request(full_run: FullRun) -> None:
    assert full_run.rc == 0, full_run.stderr
    trace = full_run.first["trace"]
    calls = [t for t in trace if not t["cache_hit"]]
    assert len(calls) == full_run.requests
    assert full_run.requests > 0
    # candidate calls = responses; judge calls = rubric judgments (one judge each, all parsed first time)
    assert sum(t["role"] == "candidate" for t in calls) == len(full_run.first["responses"])
    rubric_j = [j for j in full_run.first["judgments"] if not j["judge"].startswith("auto:")]
    assert sum(t["role"] == "judge" for t in calls) == len(rubric_j)
    assert all(t["status"] == "ok" and t["attempt"] == 1 for t in calls)
    # the trace key of each response is the key in its row
    assert {r["key"] for r in full_run.first["responses"]} <= {t["key"] for t in calls}


def test_full_run_leaks_no_key(full_run: FullRun) -> None:
    assert full_run.rc == 0, full_run.stderr
    config_text = (full_run.out / "config.yaml").read_text(encoding="utf-8")
    assert FAKE_KEY not in config_text
    saved = yaml.safe_load(config_text)
    assert saved["candidates"][0]["api_key_env"] == KEY_ENV  # the variable's name, not its value
    for name, data in full_run.files.items():
        assert FAKE_KEY.encode() not in data, name
    for p in (full_run.tmp / "cache").rglob("*"):
        if p.is_file():
            assert FAKE_KEY.encode() not in p.read_bytes(), p
    assert FAKE_KEY not in full_run.stdout + full_run.stderr


# What legitimately differs between a paid run and its cached rerun; everything else must be identical:
#   responses.jsonl / judgments.jsonl rows: "cache_hit".
#   summary.json: "wall_s" (timing); "calls" (made / cache_hits / errors of this invocation); candidates.*.cache_hits;
#   the spend of this invocation: costs.total_usd, costs.saved_usd, and per costs.by_model entry "calls" (paid
#   calls), "cached", "prompt_tokens", "completion_tokens" (paid tokens), "cached_prompt_tokens",
#   "cached_completion_tokens", "usd", "saved_usd"; budget.spent_usd. (The paid/cached split is checked below.)
_COST_ROW_KEYS = ("calls", "cached", "prompt_tokens", "completion_tokens", "cached_prompt_tokens",
                  "cached_completion_tokens", "usd", "saved_usd")  # fmt: skip


def comparable_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "cache_hit"} for r in rows]


def comparable_summary(summary: dict[str, Any]) -> dict[str, Any]:
    s = json.loads(json.dumps(summary))
    s.pop("wall_s", None)
    s.pop("calls", None)
    costs = s.get("costs") or {}
    costs.pop("total_usd", None)
    costs.pop("saved_usd", None)
    for row in (costs.get("by_model") or {}).values():
        for k in _COST_ROW_KEYS:
            row.pop(k, None)
    (s.get("budget") or {}).pop("spent_usd", None)
    return s


def test_rerun_same_run_id_is_free_and_identical(full_run: FullRun) -> None:
    assert full_run.rc == 0, full_run.stderr
    before = full_run.server.count()
    rc, _, err = run_cli(["--config", str(full_run.config), "--run-id", "full"])
    assert rc == 0, err
    assert full_run.server.count() == before  # ZERO new requests
    again = load_run(full_run.out)
    first = full_run.first

    assert (full_run.out / "examples.jsonl").read_bytes() == full_run.files["examples.jsonl"]
    # cache_hit is not in the rows (issue 13: a rerun writes byte-identical rows; trace.jsonl and summary keep it)
    assert not any("cache_hit" in r for r in [*again["responses"], *again["judgments"]])
    for name in ("responses.jsonl", "judgments.jsonl"):
        assert (full_run.out / name).read_bytes() == full_run.files[name], name
    assert comparable_rows(again["responses"]) == comparable_rows(first["responses"])
    assert comparable_rows(again["judgments"]) == comparable_rows(first["judgments"])
    assert comparable_summary(again["summary"]) == comparable_summary(first["summary"])
    assert again["summary"]["calls"]["made"] == 0
    assert again["summary"]["calls"]["cache_hits"] > 0
    # every call and token of the first run is a cached one now, and nothing was paid
    first_costs = first["summary"].get("costs", {}).get("by_model", {})
    again_costs = again["summary"].get("costs", {}).get("by_model", {})
    assert set(again_costs) == set(first_costs)
    for key, row in again_costs.items():
        was = first_costs[key]
        assert row["calls"] == row["prompt_tokens"] == row["completion_tokens"] == 0, key
        assert row["cached"] == was["calls"] + was["cached"], key
        assert row["cached_prompt_tokens"] == was["prompt_tokens"] + was["cached_prompt_tokens"], key
        assert row["cached_completion_tokens"] == was["completion_tokens"] + was["cached_completion_tokens"], key

    # trace.jsonl is appended: the rerun's events are all cache hits, one per call the first run completed
    new_events = again["trace"][len(first["trace"]) :]
    assert again["trace"][: len(first["trace"])] == first["trace"]
    assert new_events and all(t["cache_hit"] and t["status"] == "ok" for t in new_events)
    assert len(new_events) == sum(1 for t in first["trace"] if t["status"] == "ok")


def test_validate_after_run_reports_everything_cached(full_run: FullRun) -> None:
    assert full_run.rc == 0, full_run.stderr
    before = full_run.server.count()
    rc, out, err = run_cli(["--config", str(full_run.config), "--validate"])
    assert rc == 0, err
    report = json.loads(out)
    n_examples = len(full_run.first["examples"])
    assert report["valid"] is True
    assert report["examples"] == n_examples
    turns = example_turns(full_run.first["examples"])
    assert report["candidate_calls"] == report["candidate_cached"] == turns * 2
    rubric_j = [j for j in full_run.first["judgments"] if not j["judge"].startswith("auto:")]
    assert report["judge_calls"] == report["judge_cached"] == len(rubric_j)
    assert full_run.server.count() == before


def test_validate_before_any_run(tmp_path: Path, server: FakeOpenAIServer, make_config) -> None:
    cfg = make_config(server)
    rc, out, err = run_cli(["--config", str(cfg), "--validate"])
    assert rc == 0, err
    report = json.loads(out)
    n_examples = sum(data_rows(p) for p in SAMPLE_DATASETS)
    assert report["examples"] == n_examples
    assert report["candidate_calls"] == sum(data_turns(p) for p in SAMPLE_DATASETS) * 2
    assert report["candidate_cached"] == 0 and report["judge_cached"] == 0
    assert report["judge_calls"] > 0
    assert server.count() == 0
    assert not (tmp_path / "outputs").exists()  # --validate writes no run folder

    # with --max-examples the counts shrink accordingly
    rc, out, err = run_cli(["--config", str(cfg), "--validate", "--max-examples", "1"])
    assert rc == 0, err
    assert json.loads(out)["candidate_calls"] == (len(SAMPLE_DATASETS) + 1) * 2  # the MT-Bench row: two turns
    assert server.count() == 0


# ---------------------------------------------------------------------------------------------------
# Small runs in-process


QA_ROW = {"id": "q1", "question": "What is 6 x 7?", "answer": "42"}


def qa_dataset(tmp_path: Path) -> list[dict[str, Any]]:
    return [{"path": str(write_jsonl(tmp_path / "qa.jsonl", [QA_ROW]))}]


def rubric_dataset(tmp_path: Path, rubric: list[dict[str, Any]]) -> list[dict[str, Any]]:
    row = {"id": "r1", "prompt": "Say hello to the team.", "rubric": rubric}
    return [{"path": str(write_jsonl(tmp_path / "rubric.jsonl", [row]))}]


def events(trace: list[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    return [t for t in trace if t["model"] == model and not t["cache_hit"]]


def test_max_examples_limits_each_dataset(tmp_path: Path, server: FakeOpenAIServer, make_config, cli_main) -> None:
    cfg = make_config(server)  # judges kept: rubric datasets with no judge are an error since issue 11
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "m1", "--max-examples", "1"])
    assert rc == 0, err
    run = load_run(tmp_path / "outputs" / "m1")
    assert len(run["examples"]) == len(SAMPLE_DATASETS)
    assert sorted(e["dataset"] for e in run["examples"]) == sorted(p.stem for p in SAMPLE_DATASETS)
    assert all(e["source"].endswith(":1") for e in run["examples"])  # the first row of each file
    turns = example_turns(run["examples"])  # the MT-Bench row asks two turns
    assert len(run["responses"]) == turns * 2 == (len(SAMPLE_DATASETS) + 1) * 2
    assert server.count(model="cand-alpha") + server.count(model="cand-beta") == turns * 2


def test_429_retry_after_is_honoured(tmp_path: Path, make_config, cli_main) -> None:
    with FakeOpenAIServer(rules=[Rule("cand-alpha", 429, count=1, retry_after_s=1)]) as server:
        cfg = make_config(
            server, candidates=one_candidate(server), judges=[],
            datasets=qa_dataset(tmp_path),
        )  # fmt: skip
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "r429"])
        assert rc == 0, err
        reqs = [r for r in server.requests if r.method == "POST"]
    assert [r.status for r in reqs] == [429, 200]
    assert reqs[1].t - reqs[0].t >= 0.95  # waited at least Retry-After (1 s), minus clock granularity
    run = load_run(tmp_path / "outputs" / "r429")
    ev = events(run["trace"], "openai/cand-alpha")
    assert [(t["attempt"], t["status"], t.get("status_code")) for t in ev] == [(1, "error", 429), (2, "ok", None)]
    assert ev[0]["retry_in_s"] >= 1.0
    assert "429" in ev[0]["error"]
    assert run["responses"][0]["status"] == "ok"
    assert row_counts(run, "alpha")["response_errors"] == 0


def test_500_once_is_retried(tmp_path: Path, make_config, cli_main) -> None:
    with FakeOpenAIServer(rules=[Rule("cand-alpha", 500, count=1)]) as server:
        cfg = make_config(
            server, candidates=one_candidate(server), judges=[],
            datasets=qa_dataset(tmp_path),
        )  # fmt: skip
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "r500"])
        assert rc == 0, err
        assert [r.status for r in server.requests] == [500, 200]
    run = load_run(tmp_path / "outputs" / "r500")
    ev = events(run["trace"], "openai/cand-alpha")
    assert [(t["attempt"], t["status"]) for t in ev] == [(1, "error"), (2, "ok")]
    assert run["responses"][0]["status"] == "ok"


def test_500_always_stops_at_max_attempts_and_resumes(tmp_path: Path, make_config, cli_main) -> None:
    with FakeOpenAIServer(rules=[Rule("cand-alpha", 500)]) as server:
        cfg = make_config(server, judges=[], datasets=qa_dataset(tmp_path), retry={"max_attempts": 3})
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "dead"])
        assert rc == 0, err
        assert server.count(model="cand-alpha") == 3  # retry.max_attempts
        assert server.count(model="cand-beta") == 1
        run = load_run(tmp_path / "outputs" / "dead")
        alpha = next(r for r in run["responses"] if r["candidate"] == "alpha")
        assert alpha["status"] == "error" and alpha["text"] is None
        assert "500" in alpha["error"]
        assert not [j for j in run["judgments"] if j["response_id"] == alpha["id"]]  # not scored
        assert row_counts(run, "alpha")["response_errors"] == 1 and headline(run, "qa", "alpha")["scored"] == 0
        assert headline(run, "qa", "alpha")["score"] is None  # not scored, not zero
        assert row_counts(run, "beta")["response_errors"] == 0 and headline(run, "qa", "beta")["scored"] == 1
        ev = events(run["trace"], "openai/cand-alpha")
        assert [t["attempt"] for t in ev] == [1, 2, 3]
        assert [t["retry_in_s"] is not None for t in ev] == [True, True, False]  # no wait after the last

        # Failures are not cached: once the server recovers, a rerun pays for the failed call only.
        server.clear_rules()
        server.reset_log()
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "dead"])
        assert rc == 0, err
        assert server.count(model="cand-alpha") == 1 and server.count() == 1
    run = load_run(tmp_path / "outputs" / "dead")
    assert all(r["status"] == "ok" for r in run["responses"])
    assert headline(run, "qa", "alpha")["scored"] == 1


def test_400_is_not_retried(tmp_path: Path, make_config, cli_main) -> None:
    with FakeOpenAIServer(rules=[Rule("cand-alpha", 400)]) as server:
        cfg = make_config(server, judges=[], datasets=qa_dataset(tmp_path))
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "r400"])
        assert rc == 0, err
        assert server.count(model="cand-alpha") == 1
        assert server.count(model="cand-beta") == 1
    run = load_run(tmp_path / "outputs" / "r400")
    alpha = next(r for r in run["responses"] if r["candidate"] == "alpha")
    assert alpha["status"] == "error" and "400" in alpha["error"]
    ev = events(run["trace"], "openai/cand-alpha")
    assert [(t["attempt"], t["status_code"], t["retry_in_s"]) for t in ev] == [(1, 400, None)]
    assert row_counts(run, "alpha")["response_errors"] == 1


RUBRIC4 = [
    {"id": "c1", "text": "Greets the team.", "weight": 2},
    {"id": "c2", "text": "Uses a friendly tone.", "weight": 1},
    {"id": "c3", "text": "Insults someone.", "weight": -1},
    {"id": "c4", "text": "Signs with a name.", "weight": 3},
]


def test_judge_reply_that_is_not_json_is_an_error_verdict(tmp_path: Path, make_config, cli_main) -> None:
    def responder(body: dict[str, Any]) -> str:
        if is_judge_request(body) and body["model"] == "judge-one":
            return "I have looked at the response and I think it does what the rubric item asks."
        return default_reply(body)

    with FakeOpenAIServer(responder=responder) as server:
        cfg = make_config(
            server, candidates=one_candidate(server),
            datasets=rubric_dataset(tmp_path, RUBRIC4),
        )  # fmt: skip
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "prose"])
        assert rc == 0, err
        run = load_run(tmp_path / "outputs" / "prose")
        js = run["judgments"]
        assert len(js) == 4
        bad = [j for j in js if j["judge"] == "j1"]
        good = [j for j in js if j["judge"] == "j2"]
        assert len(bad) == 2 and len(good) == 2  # round-robin over the pool of 2
        for j in bad:
            assert j["verdict"] == "error"  # never "not_met"
            assert "not the expected JSON" in j["error"]
            assert j["explanation"] is None
        assert all(j["verdict"] in ("met", "not_met") and j["error"] is None for j in good)
        # an unreadable reply is asked again once, then recorded as an error
        assert server.count(model="judge-one") == 2 * JUDGE_PARSE_ATTEMPTS
        assert server.count(model="judge-two") == 2

    assert row_counts(run, "alpha")["judgment_errors"] == 2
    # judging.on_error exclude (the rubric metric's default): a response with an error verdict is partial, not scored
    d = headline(run, "rubric", "alpha")
    assert (d["partial"], d["scored"], d["score"]) == (1, 0, None)


def test_judge_http_400_is_an_error_verdict_not_retried(tmp_path: Path, make_config, cli_main) -> None:
    with FakeOpenAIServer(rules=[Rule("judge-two", 400)]) as server:
        cfg = make_config(
            server, candidates=one_candidate(server),
            datasets=rubric_dataset(tmp_path, RUBRIC4),
        )  # fmt: skip
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "j400"])
        assert rc == 0, err
        assert server.count(model="judge-two") == 2  # one request per criterion it judges: a 400 is final
    run = load_run(tmp_path / "outputs" / "j400")
    bad = [j for j in run["judgments"] if j["judge"] == "j2"]
    assert len(bad) == 2
    assert all(j["verdict"] == "error" and "400" in j["error"] for j in bad)
    counts = row_counts(run, "alpha")
    assert counts["judgment_errors"] == 2 and counts["response_errors"] == 0
    d = headline(run, "rubric", "alpha")
    assert (d["partial"], d["scored"], d["score"]) == (1, 0, None)  # on_error exclude


def test_two_judges_per_criterion_vote(tmp_path: Path, make_config, cli_main) -> None:
    rubric = [
        {"id": "agree-met", "text": "AGREE-MET: greets the team.", "weight": 2},
        {"id": "agree-not", "text": "AGREE-NOT: writes a poem.", "weight": 1},
        {"id": "split", "text": "SPLIT: is short.", "weight": 1},
    ]

    def responder(body: dict[str, Any]) -> str:
        if not is_judge_request(body):
            return default_reply(body)
        text = message_text(body["messages"][-1])
        if "AGREE-MET" in text:
            met = True
        elif "AGREE-NOT" in text:
            met = False
        else:
            met = body["model"] == "judge-one"
        return json.dumps({"explanation": f"{body['model']} says {met}", "criteria_met": met})

    with FakeOpenAIServer(responder=responder) as server:
        cfg = make_config(
            server, candidates=one_candidate(server),
            datasets=rubric_dataset(tmp_path, rubric), judging={"judges_per_criterion": 2},
        )  # fmt: skip
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "votes"])
        assert rc == 0, err
        assert server.count(model="judge-one") == 3 and server.count(model="judge-two") == 3
    run = load_run(tmp_path / "outputs" / "votes")
    js = {j["criterion_id"]: j for j in run["judgments"]}
    assert set(js) == {"agree-met", "agree-not", "split"}
    for j in js.values():
        assert sorted(j["judge"].split("+")) == ["j1", "j2"]
        assert sorted(v["judge"] for v in j["votes"]) == ["j1", "j2"]
    assert js["agree-met"]["verdict"] == "met"
    assert {v["verdict"] for v in js["agree-met"]["votes"]} == {"met"}
    assert js["agree-not"]["verdict"] == "not_met"
    assert {v["judge"]: v["verdict"] for v in js["split"]["votes"]} == {"j1": "met", "j2": "not_met"}
    assert js["split"]["verdict"] == "error"  # a tie is undecided, never silently not_met
    s = run["summary"]
    # The tie is an error verdict: under on_error exclude the response is partial, out of the score.
    assert row_counts(run, "alpha")["judgment_errors"] == 1
    assert s["datasets"]["rubric"]["candidates"]["alpha"]["partial"] == 1
    assert s["judges"]["agreement"]["criteria_with_votes"] == 3
    assert s["judges"]["agreement"]["ties_to_error"] == 1


# ---------------------------------------------------------------------------------------------------
# Two processes on one run id


def test_second_process_on_the_same_run_id_is_refused(tmp_path: Path, make_config) -> None:
    arrived, gate = threading.Event(), threading.Event()

    def held(body: dict[str, Any]) -> str:
        arrived.set()
        gate.wait(60)  # the first run stays in flight until the test lets it go
        return default_reply(body)

    with FakeOpenAIServer(responder=held) as server:
        cfg = make_config(
            server, candidates=one_candidate(server), judges=[],
            datasets=qa_dataset(tmp_path),
        )  # fmt: skip
        first = start_cli(["--config", str(cfg), "--run-id", "shared"], logs=tmp_path / "proc_logs")
        try:
            assert arrived.wait(60), "the first run never reached the server"
            rc, out, err = run_cli(["--config", str(cfg), "--run-id", "shared"])
        finally:
            gate.set()
            first.wait(timeout=60)
            first_err = first.stderr
        assert rc == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), err
        assert "in use" in err and "shared" in err
        assert "Traceback" not in err
        assert first.returncode == 0, first_err
        assert server.count() == 1  # the second process called nothing
    assert read_jsonl(tmp_path / "outputs" / "shared" / "responses.jsonl")[0]["status"] == "ok"
