"""Provider batch jobs (`batch: true`, providers/batch.py) against tests/fakebatch.py: artifacts equal to an online
run's, an expired batch, a half-failed batch, resume after kill -9 without a duplicate submission, costs at the
batch price, and bad config lines."""

from __future__ import annotations

import collections
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, model_entry, read_jsonl, run_dir, start_cli, write_config
from fakebatch import FakeBatchServer

from rubricrun.config import load_config
from rubricrun.errors import InputError
from rubricrun.providers.pricing import price_table, unit_prices


def rows(path: Path) -> list[dict[str, Any]]:
    """The rows of responses.jsonl / judgments.jsonl, with the one field that may differ between two runs of the same
    requests: `cache_hit` of a row whose key another row shares (the task that asks second reads the first one's
    reply; which one is second depends on thread timing, online as in batch)."""
    out = read_jsonl(path)
    keys = collections.Counter(r["key"] for r in out)
    return [{k: v for k, v in r.items() if k != "cache_hit" or keys[r["key"]] == 1} for r in out]


@pytest.fixture
def bserver():
    srv = FakeBatchServer().start()
    try:
        yield srv
    finally:
        srv.stop()


def batch_config(tmp: Path, server: FakeBatchServer, *, batched: bool = True, **overrides: Any) -> Path:
    """Two candidates and one judge on the fake batch server, every entry batched (or none)."""
    tmp.mkdir(parents=True, exist_ok=True)
    extra = {"batch": True} if batched else {}
    cfg: dict[str, Any] = {
        "candidates": [
            model_entry("alpha", "openai/cand-alpha", server, **extra),
            model_entry("beta", "openai/cand-beta", server, **extra),
        ],
        "judges": [model_entry("j1", "openai/judge-one", server, **extra)],
        "datasets": [{"path": str(DATA / "healthbench_sample.jsonl")}, {"path": str(DATA / "mtbench_sample.jsonl")}],
        "cache": {"dir": str(tmp / "cache")},
        "run": {"output_dir": str(tmp / "outputs")},
        "batch": {"poll_interval_s": 0.02},
    }
    cfg.update(overrides)
    return write_config(tmp, server, filename=f"{'batch' if batched else 'online'}.yaml", **cfg)


def state(tmp: Path, run_id: str) -> dict[str, Any]:
    return json.loads((run_dir(tmp, run_id) / "batches.json").read_text())


def test_batch_run_equals_online_run(tmp_path, bserver, cli_main):
    rc, _, err = cli_main(["--config", str(batch_config(tmp_path / "a", bserver, batched=False)), "--run-id", "on"])
    assert rc == 0, err
    online_calls = len(bserver.fingerprint_counts())  # distinct requests
    assert online_calls > 0 and not bserver.submitted
    bserver.reset_log()
    rc, _, err = cli_main(["--config", str(batch_config(tmp_path / "b", bserver)), "--run-id", "b"])
    assert rc == 0, err
    assert bserver.count() == 0  # no chat call: every request went in a batch job
    assert len(bserver.submitted) == online_calls and bserver.duplicate_submissions() == 0
    on, b = run_dir(tmp_path / "a", "on"), run_dir(tmp_path / "b", "b")
    for name in ("responses.jsonl", "judgments.jsonl"):
        assert rows(b / name) == rows(on / name), name
    s_on, s_b = (json.loads((d / "summary.json").read_text()) for d in (on, b))
    # Every task asked once: paid or a hit (online, two tasks asking for one key at once may both pay).
    assert sum(s_b["calls"].values()) == sum(s_on["calls"].values()) and s_b["calls"]["errors"] == 0
    for name in ("responses.jsonl", "judgments.jsonl"):  # issue 13: cache_hit is not in the rows (trace.jsonl has it)
        assert not any("cache_hit" in r for r in read_jsonl(b / name))
    jobs = state(tmp_path / "b", "b")["jobs"]
    assert jobs and all(j["collected"] and j["status"] == "completed" for j in jobs)
    # One job per model and pass: turn 1 of both candidates, their judges, turn 2 (MT-Bench), ...
    assert {j["model"] for j in jobs} == {"openai/cand-alpha", "openai/cand-beta", "openai/judge-one"}
    # A rerun is served from the cache: nothing submitted again.
    before = len(bserver.submitted)
    rc, _, err = cli_main(["--config", str(batch_config(tmp_path / "b", bserver)), "--run-id", "b"])
    assert rc == 0, err
    assert len(bserver.submitted) == before


def test_limits_split_jobs(tmp_path, bserver, cli_main):
    cfg = batch_config(tmp_path, bserver, batch={"poll_interval_s": 0.02, "max_requests": 2})
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "s"])
    assert rc == 0, err
    jobs = state(tmp_path, "s")["jobs"]
    assert max(len(j["keys"]) for j in jobs) == 2
    assert bserver.duplicate_submissions() == 0


def test_expired_batch_retried_online(tmp_path, bserver, cli_main):
    bserver.expire_batches, bserver.expire_keep = 1, 1  # the first job answers one line, then expires
    rc, _, err = cli_main(["--config", str(batch_config(tmp_path, bserver)), "--run-id", "x"])
    assert rc == 0, err
    first = state(tmp_path, "x")["jobs"][0]
    assert first["status"] == "expired"
    expired = len(first["keys"]) - 1
    assert bserver.count(status=200) == expired  # the expired requests, sent online once each
    trace = read_jsonl(run_dir(tmp_path, "x") / "trace.jsonl")
    failures = [e for e in trace if e["status"] == "error" and "batch_expired" in (e.get("error") or "")]
    assert len(failures) == expired
    responses = read_jsonl(run_dir(tmp_path, "x") / "responses.jsonl")
    assert responses and all(r["status"] == "ok" for r in responses)


def test_half_failed_batch_retried_in_a_new_batch(tmp_path, bserver, cli_main):
    failed: set[str] = set()

    def fail_once(body: dict[str, Any]) -> bool:  # every other request fails the first time it is sent
        fp = json.dumps(body["messages"], sort_keys=True)
        if len(fp) % 2 or fp in failed:
            return False
        failed.add(fp)
        return True

    bserver.fail_line = fail_once
    cfg = batch_config(tmp_path, bserver, batch={"poll_interval_s": 0.02, "on_failed": "batch"})
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "h"])
    assert rc == 0, err
    assert failed and bserver.count() == 0  # nothing online
    assert bserver.duplicate_submissions() == len(failed)  # each failed line sent again once, in a later job
    trace = read_jsonl(run_dir(tmp_path, "h") / "trace.jsonl")
    assert sum(1 for e in trace if e["status"] == "error" and e["status_code"] == 500) == len(failed)
    assert all(r["status"] == "ok" for r in read_jsonl(run_dir(tmp_path, "h") / "responses.jsonl"))


def test_resume_after_kill_submits_nothing_twice(tmp_path, bserver, cli_main):
    bserver.complete_after_s = 60.0  # pending until the test lets it finish
    cfg = batch_config(tmp_path, bserver)
    p = start_cli(["--config", str(cfg), "--run-id", "k"], logs=tmp_path / "logs")
    path = run_dir(tmp_path, "k") / "batches.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        jobs = json.loads(path.read_text())["jobs"] if path.exists() else []
        if jobs and all(j["batch_id"] for j in jobs) and len(jobs) == 2:
            break
        time.sleep(0.05)
    else:
        p.popen.kill()
        raise AssertionError(f"no batch submitted: {p.stderr}")
    p.popen.send_signal(signal.SIGKILL)
    p.wait(30)
    submitted = len(bserver.submitted)
    bserver.complete_after_s = 0.0
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "k"])
    assert rc == 0, err
    assert bserver.duplicate_submissions() == 0
    assert len(bserver.submitted) > submitted  # the later passes (judges, turn 2) were submitted by the resume
    assert all(r["status"] == "ok" for r in read_jsonl(run_dir(tmp_path, "k") / "responses.jsonl"))


def test_killed_between_create_and_recording_the_id(tmp_path, bserver, cli_main):
    """A job whose batch was created but whose id never reached batches.json is found by its input file."""
    bserver.complete_after_s = 60.0
    cfg = batch_config(tmp_path, bserver)
    p = start_cli(["--config", str(cfg), "--run-id", "c"], logs=tmp_path / "logs")
    path = run_dir(tmp_path, "c") / "batches.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
        path.exists() and all(j["batch_id"] for j in state(tmp_path, "c")["jobs"])
    ):
        time.sleep(0.05)
    p.popen.send_signal(signal.SIGKILL)
    p.wait(30)
    saved = state(tmp_path, "c")
    for j in saved["jobs"]:
        j.update(batch_id=None, status="uploading")  # as if killed right after create_batch returned
    path.write_text(json.dumps(saved))
    bserver.complete_after_s = 0.0
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "c"])
    assert rc == 0, err
    assert bserver.duplicate_submissions() == 0


def test_batch_price(tmp_path, bserver):
    assert unit_prices("openai/gpt-4o-mini", batch=True) == (7.5e-08, 3e-07)  # half LiteLLM's online price
    price = {"input_per_mtok": 2.0, "output_per_mtok": 8.0, "batch_input_per_mtok": 1.0}
    cands = [model_entry("alpha", "openai/cand-alpha", bserver, batch=True, price=price)]
    cands.append(model_entry("mini", "openai/gpt-4o-mini", bserver, batch=True))
    cfg = load_config(batch_config(tmp_path, bserver, candidates=cands))
    table = price_table(cfg)
    assert (table["openai/cand-alpha"].input_per_mtok, table["openai/cand-alpha"].output_per_mtok) == (1.0, 8.0)
    assert table["openai/gpt-4o-mini"].input_per_mtok == pytest.approx(0.075)


def test_costs_at_batch_price(tmp_path, bserver, cli_main):
    price = {"input_per_mtok": 2.0, "output_per_mtok": 8.0, "batch_input_per_mtok": 1.0, "batch_output_per_mtok": 4.0}
    online = batch_config(tmp_path / "a", bserver, batched=False)
    batched = batch_config(tmp_path / "b", bserver)
    for path in (online, batched):
        text = path.read_text().replace("api_key_env:", f"price: {json.dumps(price)}\n  api_key_env:")
        path.write_text(text)
    totals = []
    for path, rid in ((online, "on"), (batched, "b")):
        rc, _, err = cli_main(["--config", str(path), "--run-id", rid])
        assert rc == 0, err
        costs = json.loads((run_dir(path.parent, rid) / "summary.json").read_text())["costs"]
        rows = costs["by_model"].values()
        at_online_price = sum(r["prompt_tokens"] * 2e-6 + r["completion_tokens"] * 8e-6 for r in rows)
        totals.append(costs["total_usd"] / at_online_price)
    assert totals == pytest.approx([1.0, 0.5], rel=1e-4)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"model": "local/smollm2", "batch": True}, "embedded llama.cpp model has no batch API"),
        ({"model": "anthropic/claude-3-haiku", "batch": True}, "provider 'anthropic' has no batch API"),
        ({"model": "openai/x", "batch": "yes"}, "batch"),
    ],
)
def test_bad_batch_config(tmp_path, bserver, entry, message):
    cfg = write_config(tmp_path, bserver, candidates=[{"name": "c", **entry}], filename="bad.yaml")
    with pytest.raises(InputError) as exc:
        load_config(cfg)
    assert message in str(exc.value) and "bad.yaml:" in str(exc.value) and "candidates[0].batch" in str(exc.value)


def test_bad_batch_settings_exit_2(tmp_path, bserver, cli_main):
    for settings, key in (({"max_requests": 0}, "batch.max_requests"), ({"on_failed": "retry"}, "batch.on_failed")):
        cfg = batch_config(tmp_path, bserver, batch=settings)
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "bad"])
        assert rc == 2 and key in err and "Traceback" not in err, err
    cfg = batch_config(tmp_path, bserver, cache={"enabled": False, "dir": str(tmp_path / "c")})
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "bad"])
    assert rc == 2 and "candidates[0].batch" in err and "cache.enabled" in err, err


def test_validate_shows_both_prices(tmp_path, bserver, cli_main):
    cands = [model_entry("mini", "openai/gpt-4o-mini", bserver, batch=True, params={"max_tokens": 100})]
    cfg = batch_config(tmp_path, bserver, candidates=cands, judges=[model_entry("j", "openai/gpt-4o-mini", bserver)])
    rc, out, err = cli_main(["--config", str(cfg), "--validate"])
    assert rc == 0, err
    shown = json.loads(out)
    assert shown["batch_prices"] == {
        "openai/gpt-4o-mini": {
            "online": {"input_per_mtok": 0.15, "output_per_mtok": 0.6},
            "batch": {"input_per_mtok": 0.075, "output_per_mtok": 0.3},
        }
    }
    # The judge entry is not batched, but it is the same model: it is priced at the batch price too (price_table).
    assert shown["cost_upper_bound_usd"] == pytest.approx(shown["cost_upper_bound_online_usd"] / 2, abs=2e-4)


def test_ctrl_c_while_polling_exits_130_and_resumes(tmp_path, bserver, cli_main):
    bserver.complete_after_s = 60.0
    cfg = batch_config(tmp_path, bserver)
    p = start_cli(["--config", str(cfg), "--run-id", "i"], logs=tmp_path / "logs")
    path = run_dir(tmp_path, "i") / "batches.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        jobs = state(tmp_path, "i")["jobs"] if path.exists() else []
        if len(jobs) == 2 and all(j["batch_id"] for j in jobs):
            break  # both batches created: the run is polling them now
        time.sleep(0.05)
    p.popen.send_signal(signal.SIGINT)
    assert p.wait(30) == 130, p.stderr
    assert "resume polling" in p.stderr
    assert all(j["batch_id"] and not j["collected"] for j in state(tmp_path, "i")["jobs"])
    bserver.complete_after_s = 0.0
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "i"])
    assert rc == 0, err
    assert bserver.duplicate_submissions() == 0


def test_synthesis_through_batch_jobs(tmp_path, cli_main):
    from test_costs import synth_responder

    with FakeBatchServer(responder=synth_responder) as server:
        synth = {"main_topic": "personal finance", "num_subtopics": 2, "prompts_per_subtopic": 2}
        cands = [model_entry("alpha", "openai/cand-alpha", server, batch=True)]
        cfg = batch_config(tmp_path, server, datasets=[], synthesize=synth, candidates=cands, judges=[])
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "syn"])
        assert rc == 0, err
        assert server.count() == 0 and len(server.submitted) == 3 + 4 and server.duplicate_submissions() == 0
        assert len(read_jsonl(run_dir(tmp_path, "syn") / "responses.jsonl")) == 4


def test_budget_bounds_what_is_submitted(tmp_path, bserver, cli_main):
    """Each submitted request is reserved at its upper bound (about $0.00028 here) until its reply is charged at its
    cost (about $0.00004): the jobs go one or two requests at a time until the next bound no longer fits."""
    price = {"input_per_mtok": 2.0, "output_per_mtok": 8.0, "batch_input_per_mtok": 1.0, "batch_output_per_mtok": 4.0}
    cands = [model_entry("alpha", "openai/cand-alpha", bserver, batch=True, price=price, params={"max_tokens": 64})]
    data = tmp_path / "qa.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "prompt": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(8)
        )
    )
    datasets = [{"path": str(data), "format": "generic"}]
    cfg = batch_config(tmp_path, bserver, candidates=cands, judges=[], datasets=datasets, run={"budget_usd": 0.0004})
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "bud"])
    assert rc == 3, err
    assert 0 < len(bserver.submitted) < 8 and bserver.count() == 0
    summary = json.loads((run_dir(tmp_path, "bud") / "summary.json").read_text())
    assert summary["budget"]["stopped"] and 0 < summary["budget"]["spent_usd"] <= 0.0004


def test_a_batch_line_is_the_online_calls_body_without_the_calls_options() -> None:
    from rubricrun.providers.batch import line_body
    from rubricrun.types import LLMRequest

    schema = {"type": "object", "properties": {"met": {"type": "boolean"}}}
    request = LLMRequest(
        model="openai/gpt-4o-mini",
        messages=({"role": "user", "content": "hi"},),
        params={"temperature": 0, "timeout": 5, "num_retries": 3},
        response_schema=schema,
    )
    assert line_body(request) == {
        "temperature": 0,
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "judgment", "schema": schema, "strict": True},
        },
    }
    assert list(line_body(request)) == ["temperature", "model", "messages", "response_format"]
