"""Fault tests: the real `python run.py` as a subprocess against FakeOpenAIServer on 127.0.0.1.

Soak under random 429/500/hang/bad-JSON faults, a deterministic failure that must stop at retry.max_attempts, Ctrl+C
and kill -9 mid-run followed by a resume, two processes on one run id, and unwritable / full cache and output dirs.

How server requests and trace events are matched (test_soak_with_faults): every HTTP request the server logs is one
attempt in trace.jsonl (an event with cache_hit false) and vice versa, model by model:
    server 429 (random p_429)                           == trace errors with status_code 429
    server 500 (random p_500 and rules) + p_bad_json    == trace errors with status_code 500
                                                           (a 200 whose body is not JSON: LiteLLM raises
                                                           InternalServerError)
    server p_hang (logged 200 on arrival, replies after
    hang_s = 3 s, the client gave up after timeout_s = 1) == trace errors with status_code 408 (litellm.Timeout)
    server 200 without a fault                          == trace events with status "ok" and cache_hit false
"""

from __future__ import annotations

import collections
import json
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Proc, read_jsonl, run_cli, start_cli, subprocess_env
from fakeserver import FakeOpenAIServer, LoggedRequest, default_reply, is_judge_request, message_text

KEY_ENV = "RUBRICRUN_FAULTS_KEY"
RETRY_AFTER_S = 1.0
CLOCK_SLACK_S = 0.02  # server log times and the client's sleeps come from the same machine clock


# --------------------------------------------------------------------------------------------------
# Helpers (running the CLI, its environment and read_jsonl come from conftest.py)


def _env(tmp: Path) -> dict[str, str]:
    return subprocess_env(tmp, {KEY_ENV: "sk-faults-fake"})


def responder(body: dict[str, Any]) -> str:
    """Judges get the server's deterministic verdict; candidates a reply that names the model, so the two candidates'
    responses (and so every judge request) differ and a fingerprint identifies one logical call."""
    if is_judge_request(body):
        text = json.dumps(body.get("messages"))
        if "cand-a answer to: Question number 5?" in text and "Criterion 1 for question 5." in text:
            # Met, whatever the prompt's layout: the soak's failed judgment (criterion 2 of this response) must
            # change the response's score when counted as not met, which a hash verdict of 0 met would not.
            return json.dumps({"explanation": "fixed for the soak", "criteria_met": True})
        return default_reply(body)
    users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    return f"{body.get('model')} answer to: {message_text(users[-1])[:80] if users else ''}"


def write_data(path: Path, n_examples: int, n_criteria: int) -> Path:
    rows = [
        {
            "id": f"e{i}",
            "prompt": f"Question number {i}?",
            "rubric": [
                {"id": f"c{k}", "text": f"Criterion {k} for question {i}.", "weight": k}
                for k in range(1, 1 + n_criteria)
            ],
        }
        for i in range(n_examples)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def make_config(
    tmp: Path,
    url: str,
    *,
    name: str = "config.yaml",
    n_examples: int = 10,
    n_criteria: int = 2,
    candidates: tuple[str, ...] = ("cand-a", "cand-b"),
    judges: tuple[str, ...] = ("judge-1",),
    timeout_s: float = 5,
    out: Path | str | None = None,
    cache: Path | str | None = None,
    run: dict[str, Any] | None = None,
    retry: dict[str, Any] | None = None,
) -> Path:
    data = write_data(tmp / "data" / "qs.jsonl", n_examples, n_criteria)

    def model(m: str) -> dict[str, Any]:
        return {"name": m, "model": f"openai/{m}", "api_base": url, "api_key_env": KEY_ENV, "timeout_s": timeout_s}

    cfg = {
        "candidates": [model(m) for m in candidates],
        "judges": [model(m) for m in judges],
        "datasets": [{"path": str(data)}],
        "run": {
            "output_dir": str(out if out is not None else tmp / "outputs"),
            "progress": False,
            "concurrency": 4,
            "judge_parallel_workers": 4,
            "bootstrap_samples": 50,
            **(run or {}),
        },
        "cache": {"dir": str(cache if cache is not None else tmp / "cache")},
        "retry": {"initial_wait_s": 0.05, "max_wait_s": 2, "max_attempts": 4, **(retry or {})},
    }
    path = tmp / name
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def posts(srv: FakeOpenAIServer) -> list[LoggedRequest]:
    return [r for r in srv.requests if r.method == "POST"]


def wait_for_requests(srv: FakeOpenAIServer, n: int, proc: Proc, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while srv.count() < n:
        if proc.popen.poll() is not None:
            raise AssertionError(f"run.py exited ({proc.popen.returncode}) before {n} requests:\n{proc.stderr}")
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {n} requests after {timeout} s")
        time.sleep(0.02)


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, f"expected one 'error:' line:\n{stderr}"
    return errors[0]


@pytest.fixture
def server_factory() -> Iterator[Any]:
    servers: list[FakeOpenAIServer] = []

    def make(**kwargs: Any) -> FakeOpenAIServer:
        kwargs.setdefault("responder", responder)
        srv = FakeOpenAIServer(**kwargs).start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        srv.stop()


# --------------------------------------------------------------------------------------------------
# Soak with random faults


def test_soak_with_faults(tmp_path: Path, server_factory: Any) -> None:
    max_attempts = 6
    srv = server_factory(
        p_429=0.20, p_500=0.05, p_hang=0.01, p_bad_json=0.01, hang_s=3.0, retry_after_s=RETRY_AFTER_S, seed=20240611
    )
    # Deterministic permanent failures, so the soak always has a failed response and a failed judgment:
    # cand-b's call for question 3, and the judge call on cand-a's answer to question 5, criterion 2.
    srv.add_rule(lambda b: b.get("model") == "cand-b" and "Question number 3?" in json.dumps(b["messages"]), 500)
    srv.add_rule(
        lambda b: (
            is_judge_request(b)
            and "cand-a answer to: Question number 5?" in json.dumps(b["messages"])
            and "Criterion 2 for question 5." in json.dumps(b["messages"])
        ),
        500,
    )
    n_examples, n_criteria = 24, 3
    cfg = make_config(
        tmp_path,
        srv.base_url,
        n_examples=n_examples,
        n_criteria=n_criteria,
        judges=("judge-1", "judge-2"),
        timeout_s=1,
        run={"concurrency": 8, "judge_parallel_workers": 8},
        retry={"max_attempts": max_attempts},
    )
    p = run_cli(["--config", str(cfg), "--run-id", "soak"], timeout=240, full_env=_env(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    run_dir = tmp_path / "outputs" / "soak"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "complete"

    log = posts(srv)
    trace = read_jsonl(run_dir / "trace.jsonl")
    paid = [e for e in trace if not e["cache_hit"]]
    faults = collections.Counter(r.fault for r in log)
    assert faults["p_429"] > 20 and faults["p_500"] > 3, faults  # the soak really exercised the faults

    # 1. Every request the server saw is one attempt in the trace, and every failure is there with its cause.
    assert len(paid) == len(log), (len(paid), len(log))
    for model in {r.model for r in log}:
        srv_m = [r for r in log if r.model == model]
        tr_m = [e for e in paid if e["model"] == f"openai/{model}"]
        codes = collections.Counter(e["status_code"] for e in tr_m if e["status"] == "error")
        assert codes[429] == sum(r.status == 429 for r in srv_m), model
        assert codes[500] == sum(r.status == 500 or r.fault == "p_bad_json" for r in srv_m), model
        # A timeout (408) is a hang, or (on a loaded machine) a normal reply slower than timeout_s: the server
        # logged that one as a plain 200, so it is counted on both sides.
        hangs = sum(r.fault == "p_hang" for r in srv_m)
        slow = codes[408] - hangs
        assert slow >= 0, model
        ok = sum(e["status"] == "ok" for e in tr_m)
        assert ok + slow == sum(r.status == 200 and r.fault is None for r in srv_m), model
        assert set(codes) <= {429, 500, 408}, codes
    assert summary["calls"]["made"] == len(paid)
    assert summary["calls"]["errors"] == sum(e["status"] == "error" for e in trace)

    # 2. A retry after a 429 waited at least Retry-After (measured on the server's clock), and the trace says so.
    by_fp: dict[str, list[LoggedRequest]] = collections.defaultdict(list)
    for r in log:
        by_fp[r.fingerprint].append(r)
    checked = 0
    for reqs in by_fp.values():
        reqs.sort(key=lambda r: r.t)
        assert len(reqs) <= max_attempts
        for prev, nxt in zip(reqs, reqs[1:], strict=False):
            if prev.status == 429:
                assert nxt.t - prev.t >= RETRY_AFTER_S - CLOCK_SLACK_S, (nxt.t - prev.t, prev.fingerprint)
                checked += 1
    assert checked >= 10
    for e in paid:
        if e["status_code"] == 429 and e["retry_in_s"] is not None:
            assert e["retry_in_s"] >= RETRY_AFTER_S
    attempts = collections.Counter(e["key"] for e in paid)
    assert max(attempts.values()) <= max_attempts

    # 3. What failed after all retries is an error row, never a zero, and the summary counts match the rows.
    responses = read_jsonl(run_dir / "responses.jsonl")
    judgments = read_jsonl(run_dir / "judgments.jsonl")
    assert len(responses) == 2 * n_examples
    errored = {r["id"] for r in responses if r["status"] == "error"}
    assert "qs/e3#cand-b#0" in errored
    for r in responses:
        if r["status"] == "error":
            assert r["text"] is None and r["error"], r
            last = [e for e in paid if e["key"] == r["key"]]
            assert len(last) == max_attempts and all(e["status"] == "error" for e in last), r["id"]
    assert not [j for j in judgments if j["response_id"] in errored], "an errored response was judged"
    bad_j = [j for j in judgments if j["verdict"] == "error"]
    assert any(j["id"] == "qs/e5#cand-a#0#c2" for j in bad_j)
    for j in bad_j:
        assert j["error"] and j["explanation"] is None
    ok_ids = {r["id"] for r in responses if r["status"] == "ok"}
    assert len(judgments) == len(ok_ids) * n_criteria

    for cand in ("cand-a", "cand-b"):
        rs = [r for r in responses if r["candidate"] == cand]
        js = [j for j in judgments if j["candidate"] == cand]
        s = summary["datasets"]["qs"]["candidates"][cand]
        assert s["expected"] == len(rs)
        # judging.on_error exclude: a response with an error verdict is partial and left out of the score, never
        # counted as not met (weights are all positive here: normalized = met weight / weight).
        per_resp: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        for j in js:
            per_resp[j["response_id"]].append(j)
        right, as_zero = [], []
        for jj in per_resp.values():
            if all(j["verdict"] != "error" for j in jj):
                right.append(sum(j["weight"] for j in jj if j["verdict"] == "met") / sum(j["weight"] for j in jj))
            as_zero.append(sum(j["weight"] for j in jj if j["verdict"] == "met") / sum(j["weight"] for j in jj))
        assert s["scored"] == len(right) and s["partial"] == len(per_resp) - len(right)
        assert s["score"] == pytest.approx(sum(right) / len(right))
        if cand == "cand-a":  # it has the failed judgment: counting it as not met would give another mean
            assert sum(as_zero) / len(as_zero) != pytest.approx(sum(right) / len(right), abs=1e-4)


# --------------------------------------------------------------------------------------------------
# A deterministic failure stops at max_attempts


def test_deterministic_failure_stops_at_max_attempts(tmp_path: Path, server_factory: Any) -> None:
    srv = server_factory()
    srv.add_rule("cand-b", 500)  # every call to cand-b fails the same way
    srv.add_rule("cand-c", 400)  # not retryable: one attempt
    max_attempts, n = 4, 3
    cfg = make_config(
        tmp_path, srv.base_url, n_examples=n, n_criteria=1, candidates=("cand-a", "cand-b", "cand-c"),
        retry={"max_attempts": max_attempts},
    )  # fmt: skip
    p = run_cli(["--config", str(cfg), "--run-id", "det"], timeout=120, full_env=_env(tmp_path))
    assert p.returncode == 0, p.stderr
    fps_b = collections.Counter(r.fingerprint for r in posts(srv) if r.model == "cand-b")
    fps_c = collections.Counter(r.fingerprint for r in posts(srv) if r.model == "cand-c")
    assert len(fps_b) == n and set(fps_b.values()) == {max_attempts}, fps_b
    assert len(fps_c) == n and set(fps_c.values()) == {1}, fps_c
    run_dir = tmp_path / "outputs" / "det"
    trace = read_jsonl(run_dir / "trace.jsonl")
    for e in trace:
        if e["model"] == "openai/cand-b":
            assert e["status_code"] == 500
            assert (e["retry_in_s"] is None) == (e["attempt"] == max_attempts), e
    responses = read_jsonl(run_dir / "responses.jsonl")
    assert [r["status"] for r in responses if r["candidate"] != "cand-a"] == ["error"] * (2 * n)
    summary = json.loads((run_dir / "summary.json").read_text())
    (b,) = [d["candidates"]["cand-b"] for d in summary["datasets"].values()]
    assert b["expected"] == n and b["scored"] == 0
    assert b["score"] is None  # not scored, not zero


# --------------------------------------------------------------------------------------------------
# Ctrl+C mid-run, then resume


def _fingerprints_answered_twice(log: list[LoggedRequest]) -> dict[str, list[LoggedRequest]]:
    by_fp: dict[str, list[LoggedRequest]] = collections.defaultdict(list)
    for r in log:
        if r.status == 200 and r.fault is None:
            by_fp[r.fingerprint].append(r)
    return {fp: sorted(rs, key=lambda r: r.t) for fp, rs in by_fp.items() if len(rs) > 1}


def test_ctrl_c_then_resume(tmp_path: Path, server_factory: Any) -> None:
    latency = 0.3
    srv = server_factory(latency_s=latency)
    n_examples, n_criteria = 16, 2
    cfg = make_config(tmp_path, srv.base_url, n_examples=n_examples, n_criteria=n_criteria)
    args = ["--config", str(cfg), "--run-id", "intr"]
    p = start_cli(args, logs=tmp_path / "proc_logs", full_env=_env(tmp_path))
    wait_for_requests(srv, 10, p)
    t_sig = time.time()
    p.popen.send_signal(signal.SIGINT)
    rc = p.wait(timeout=15)  # bounded: the pool gives in-flight calls a 3 s grace period, then leaves
    t_exit = time.time()
    assert rc == 130, p.stderr
    assert t_exit - t_sig < 15
    assert "Traceback" not in p.stderr
    srv.configure(latency_s=0.0)  # the rerun need not be slow
    run_dir = tmp_path / "outputs" / "intr"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert summary["responses_not_done"] > 0, "the signal came too late to interrupt anything"
    assert "--run-id intr" in p.stderr  # the user is told how to resume
    assert (run_dir / "examples.jsonl").exists() and (run_dir / "judgments.jsonl").exists()
    responses = read_jsonl(run_dir / "responses.jsonl")
    first_log = posts(srv)
    # Every candidate call the server answered before the signal has its row (the rows are what was done).
    answered = {
        responder(r.body) for r in first_log if r.status == 200 and not is_judge_request(r.body) and r.t < t_sig
    }
    assert answered <= {r["text"] for r in responses}
    assert all(r["status"] == "ok" for r in responses)
    # Calls started after Ctrl+C: at most the ones already on their way (one per worker thread).
    assert sum(r.t > t_sig + 0.1 for r in first_log) <= 4

    p2 = run_cli(args, timeout=120, full_env=_env(tmp_path))
    assert p2.returncode == 0, p2.stderr
    summary2 = json.loads((run_dir / "summary.json").read_text())
    assert summary2["status"] == "complete"
    assert len(read_jsonl(run_dir / "responses.jsonl")) == 2 * n_examples
    assert len(read_jsonl(run_dir / "judgments.jsonl")) == 2 * n_examples * n_criteria
    # Nothing paid for twice. The pool gives calls in flight at Ctrl+C a grace period and caches what they return,
    # so every reply the server sent while the first process was alive (arrival + latency, with a 0.5 s margin for
    # the client to store it) must be a cache hit in the rerun. Only a reply still on its way when the process left
    # (abandoned after the grace period) may legitimately be asked for again.
    twice = _fingerprints_answered_twice(posts(srv))
    paid_twice = {fp: rs for fp, rs in twice.items() if rs[0].t + latency < t_exit - 0.5}
    assert not paid_twice, f"{len(paid_twice)} calls paid twice"
    # Both invocations appended to one valid trace.
    trace = read_jsonl(run_dir / "trace.jsonl")
    assert len({e["invocation"] for e in trace}) == 2


def test_ctrl_c_with_hung_calls_exits_promptly(tmp_path: Path, server_factory: Any) -> None:
    """Every call in flight hangs (server sleeps 30 s, client timeout 60 s): Ctrl+C must not wait for them."""
    srv = server_factory(p_hang=1.0, hang_s=30)
    cfg = make_config(tmp_path, srv.base_url, n_examples=6, n_criteria=1, timeout_s=60)
    p = start_cli(["--config", str(cfg), "--run-id", "hung"], logs=tmp_path / "proc_logs", full_env=_env(tmp_path))
    wait_for_requests(srv, 4, p)  # one per worker thread, all hanging
    t_sig = time.time()
    p.popen.send_signal(signal.SIGINT)
    rc = p.wait(timeout=15)
    assert rc == 130, p.stderr
    assert time.time() - t_sig < 15
    assert "Traceback" not in p.stderr
    run_dir = tmp_path / "outputs" / "hung"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert summary["responses_not_done"] == 12
    assert read_jsonl(run_dir / "responses.jsonl") == []  # nothing was done, and nothing is written as an error
    assert srv.count() == 4  # no call started after the signal


# --------------------------------------------------------------------------------------------------
# kill -9 at random points, then resume: same artifacts as an uninterrupted run

# Fields that legitimately differ between a resumed run and a clean one:
#   responses / judgments: cache_hit (a resumed run reads earlier answers from the cache).
#   summary: wall_s (time), calls (this invocation's paid/cached/failed attempts),
#            costs (per-model paid vs cached token counts and the USD split between them; their sums are compared).
IGNORED_ROW_FIELDS = ("cache_hit",)
IGNORED_SUMMARY_FIELDS = ("wall_s", "calls", "costs")


def _comparable_rows(path: Path) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in IGNORED_ROW_FIELDS} for r in read_jsonl(path)]


def _comparable_summary(path: Path) -> dict[str, Any]:
    s = json.loads(path.read_text())
    for k in IGNORED_SUMMARY_FIELDS:
        s.pop(k, None)
    return s


def _cost_sums(path: Path) -> dict[str, tuple[int, int, int]]:
    by_model = json.loads(path.read_text())["costs"]["by_model"]
    return {
        k: (
            v["calls"] + v["cached"],
            v["prompt_tokens"] + v["cached_prompt_tokens"],
            v["completion_tokens"] + v["cached_completion_tokens"],
        )
        for k, v in by_model.items()
    }


@pytest.mark.slow
def test_kill9_repeatedly_then_resume_matches_clean_run(tmp_path: Path, server_factory: Any) -> None:
    latency = 0.1
    srv = server_factory(latency_s=latency)
    rng = random.Random(1234)
    n_examples, n_criteria = 24, 2
    kw = {"n_examples": n_examples, "n_criteria": n_criteria, "judges": ("judge-1", "judge-2")}
    cfg = make_config(tmp_path, srv.base_url, **kw)
    args = ["--config", str(cfg), "--run-id", "k9"]
    kills: list[tuple[float, float]] = []  # (signal sent, process seen dead)
    for i in range(3):
        p = start_cli(args, logs=tmp_path / "proc_logs", full_env=_env(tmp_path))
        if i > 0:  # from the first request on: kill mid-call (the first one dies during start-up)
            seen = srv.count()
            try:
                wait_for_requests(srv, seen + 1, p, timeout=60)
            except AssertionError:
                if p.popen.poll() == 0:
                    break  # it finished everything already
                raise
        time.sleep(rng.uniform(0.5, 3.0))
        t_signal = time.time()
        p.popen.send_signal(signal.SIGKILL)
        rc = p.wait(timeout=10)
        # A request can still reach the server between the signal and the process's death: answered, never stored.
        kills.append((t_signal, time.time()))
        assert rc in (-signal.SIGKILL, 0), p.stderr
    final = run_cli(args, timeout=120, full_env=_env(tmp_path))
    assert final.returncode == 0, final.stderr
    run_dir = tmp_path / "outputs" / "k9"
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "complete"
    resumed_log = posts(srv)

    # No call answered 200 twice, except ones whose answer may not have reached the cache before a kill.
    def in_flight_at_a_kill(r: LoggedRequest) -> bool:
        return any(k - latency - 1.5 <= r.t <= dead for k, dead in kills)

    # The kills were real: at least one landed while calls were going out.
    assert any(any(k - 1.0 <= r.t <= k for r in resumed_log) for k, _ in kills), "no kill hit the run mid-traffic"
    twice = _fingerprints_answered_twice(resumed_log)
    paid_twice = {fp: rs for fp, rs in twice.items() if not all(in_flight_at_a_kill(r) for r in rs[:-1])}
    assert not paid_twice, f"{len(paid_twice)} calls answered before a kill were paid again"
    # Candidate and judge calls overlap (graph.py): up to concurrency + judge_parallel_workers = 4 + 4 in flight.
    assert len(twice) <= 8 * len(kills), "more repeats than calls that can be in flight at the kills"
    # Every trace line is whole JSON (an append-only log survives kill -9).
    read_jsonl(run_dir / "trace.jsonl")

    # A clean, uninterrupted run of the same config (own output dir and cache) writes the same artifacts.
    ref_cfg = make_config(
        tmp_path, srv.base_url, name="ref.yaml", out=tmp_path / "ref_out", cache=tmp_path / "ref_cache", **kw
    )
    ref = run_cli(["--config", str(ref_cfg), "--run-id", "k9"], timeout=120, full_env=_env(tmp_path))
    assert ref.returncode == 0, ref.stderr
    ref_dir = tmp_path / "ref_out" / "k9"
    for name in ("responses.jsonl", "judgments.jsonl", "examples.jsonl"):
        assert _comparable_rows(run_dir / name) == _comparable_rows(ref_dir / name), name
    assert _comparable_summary(run_dir / "summary.json") == _comparable_summary(ref_dir / "summary.json")
    assert _cost_sums(run_dir / "summary.json") == _cost_sums(ref_dir / "summary.json")


# --------------------------------------------------------------------------------------------------
# Two processes on the same run id


def test_second_process_on_same_run_id_is_refused(tmp_path: Path, server_factory: Any) -> None:
    srv = server_factory(latency_s=0.2)
    n_examples = 8
    cfg = make_config(tmp_path, srv.base_url, n_examples=n_examples, n_criteria=1, run={"concurrency": 2})
    args = ["--config", str(cfg), "--run-id", "shared"]
    first = start_cli(args, logs=tmp_path / "proc_logs", full_env=_env(tmp_path))
    wait_for_requests(srv, 1, first)
    second = run_cli(args, timeout=60, full_env=_env(tmp_path))
    assert first.popen.poll() is None, "the first run should still be running"
    assert second.returncode == 2
    line = one_error_line(second.stderr)
    assert "in use by another rubricrun process" in line and str(tmp_path / "outputs" / "shared") in line
    assert first.wait(timeout=120) == 0, first.stderr
    run_dir = tmp_path / "outputs" / "shared"
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "complete"
    assert len(read_jsonl(run_dir / "responses.jsonl")) == 2 * n_examples
    # The refused process called nothing: every call was made once.
    assert set(srv.fingerprint_counts().values()) == {1}
    assert len({e["invocation"] for e in read_jsonl(run_dir / "trace.jsonl")}) == 1


# --------------------------------------------------------------------------------------------------
# Unwritable cache / output dirs, full disks


def test_cache_dir_under_a_file(tmp_path: Path, server_factory: Any) -> None:
    srv = server_factory()
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory")
    cfg = make_config(tmp_path, srv.base_url, n_examples=3, n_criteria=1, cache=blocker / "cache")
    p = run_cli(["--config", str(cfg), "--run-id", "c1"], timeout=60, full_env=_env(tmp_path))
    assert p.returncode == 1
    line = one_error_line(p.stderr)
    assert str(blocker / "cache") in line
    assert srv.count() == 0
    # Fixed path: the run works.
    cfg = make_config(tmp_path, srv.base_url, n_examples=3, n_criteria=1, cache=tmp_path / "cache_ok")
    p = run_cli(["--config", str(cfg), "--run-id", "c1"], timeout=120, full_env=_env(tmp_path))
    assert p.returncode == 0, p.stderr


def test_output_dir_under_a_file(tmp_path: Path, server_factory: Any) -> None:
    srv = server_factory()
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory")
    cfg = make_config(tmp_path, srv.base_url, n_examples=3, n_criteria=1, out=blocker / "out")
    p = run_cli(["--config", str(cfg), "--run-id", "o1"], timeout=60, full_env=_env(tmp_path))
    assert srv.count() == 0
    assert p.returncode == 1, p.stderr
    line = one_error_line(p.stderr)
    assert str(blocker / "out") in line


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (needs root and mount permission; skipped otherwise)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("a full disk needs a tmpfs mount: not root or no mount(8)")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to simulate a full disk: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill_disk(mnt: Path) -> Path:
    """Write zeros until the filesystem is full; returns the filler file (unlink it to free the space)."""
    filler = mnt / "filler"
    with open(filler, "wb") as fh:
        for _ in range(4096):  # 4 MiB tmpfs / 64 KiB chunks = 64 chunks; bounded well above that
            try:
                fh.write(b"\0" * 65536)
                fh.flush()
            except OSError:
                break
    return filler


def test_full_output_disk_at_start(tmp_path: Path, server_factory: Any, tmpfs: Path) -> None:
    srv = server_factory()
    cfg = make_config(tmp_path, srv.base_url, n_examples=3, n_criteria=1, out=tmpfs / "out")
    filler = fill_disk(tmpfs)
    p = run_cli(["--config", str(cfg), "--run-id", "f1"], timeout=60, full_env=_env(tmp_path))
    assert srv.count() == 0
    assert p.returncode == 1, p.stderr
    filler.unlink()
    p2 = run_cli(["--config", str(cfg), "--run-id", "f1"], timeout=120, full_env=_env(tmp_path))
    assert p2.returncode == 0, p2.stderr
    one_error_line(p.stderr)


def _disk_fills_mid_run(tmp_path: Path, srv: FakeOpenAIServer, cfg: Path, tmpfs: Path, concurrency: int) -> None:
    """Start a run, fill the disk once it is under way, free it, rerun. The rerun must work (nothing corrupt); the
    failed run must say so in one line, stop calling, and lose nothing it paid for."""
    args = ["--config", str(cfg), "--run-id", "mid"]
    p = start_cli(args, logs=tmp_path / "proc_logs", full_env=_env(tmp_path))
    wait_for_requests(srv, 8, p)
    t_full = time.time()
    filler = fill_disk(tmpfs)
    rc = p.wait(timeout=120)
    after = sum(r.t > t_full for r in posts(srv))
    assert rc == 1, p.stderr
    filler.unlink()
    p2 = run_cli(args, timeout=120, full_env=_env(tmp_path))
    assert p2.returncode == 0, p2.stderr
    run_dir = Path(yaml.safe_load(cfg.read_text())["run"]["output_dir"]) / "mid"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["calls"]["cache_hits"] > 0
    # The failed run's own behaviour, all problems listed in one message.
    problems = []
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    if "Traceback" in p.stderr or len(errors) != 1:
        problems.append(f"not one clean 'error:' line:\n{p.stderr[-1500:]}")
    # It stopped calling once it could not store answers: only calls already on their way went out.
    if after > 2 * concurrency:
        problems.append(f"{after} calls made after the disk was full")
    # A rerun pays again for at most the calls in flight when the disk filled.
    twice = _fingerprints_answered_twice(posts(srv))
    if len(twice) > 2 * concurrency:
        problems.append(f"{len(twice)} calls paid twice")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_cache_disk_fills_mid_run(tmp_path: Path, server_factory: Any, tmpfs: Path) -> None:
    srv = server_factory(latency_s=0.2)
    cfg = make_config(tmp_path, srv.base_url, n_examples=12, n_criteria=1, cache=tmpfs / "cache")
    _disk_fills_mid_run(tmp_path, srv, cfg, tmpfs, concurrency=4)


@pytest.mark.slow
def test_output_disk_fills_mid_run(tmp_path: Path, server_factory: Any, tmpfs: Path) -> None:
    srv = server_factory(latency_s=0.2)
    cfg = make_config(tmp_path, srv.base_url, n_examples=12, n_criteria=1, out=tmpfs / "out")
    _disk_fills_mid_run(tmp_path, srv, cfg, tmpfs, concurrency=4)
