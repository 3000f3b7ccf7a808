"""Overlapped stages and streaming artifacts (issue 13, items 1 and 3; graph.py): judge calls start while
candidates are still being asked, finished examples' rows are on disk as the run goes (kill -9 leaves whole
rows), rows come out in input order whatever order calls finish in, and a rerun writes the same bytes."""

from __future__ import annotations

import hashlib
import json
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

from conftest import DEFAULT_RUBRIC, model_entry, read_jsonl, run_cli, start_cli, subprocess_env, write_jsonl
from fakeserver import FakeOpenAIServer, default_reply, message_text

ROW_FILES = ("examples.jsonl", "responses.jsonl", "judgments.jsonl")
PROMPTS = [{"id": f"p{i:03d}", "prompt": f"Question number {i}: say something."} for i in range(40)]
CONVERSATIONS = [
    {"question_id": i, "category": "writing", "turns": [f"Write line {i}.", "Make it shorter.", "Now in French."]}
    for i in range(6)
]


def _config(tmp_path: Path, server: FakeOpenAIServer, data: Path, name: str = "config.yaml", **run: Any) -> Path:
    cfg: dict[str, Any] = {
        "candidates": [model_entry("alpha", "openai/cand-alpha", server)],
        "judges": [model_entry("j1", "openai/judge-one", server)],
        "datasets": [{"path": str(data)}],
        "run": {"output_dir": str(tmp_path / "outputs"), "progress": False, "bootstrap_samples": 20, **run},
        "cache": {"dir": str(tmp_path / "cache")},
        "retry": {"initial_wait_s": 0.05, "max_wait_s": 1, "max_attempts": 2},
        "judging": {"default_rubric": DEFAULT_RUBRIC},
    }
    path = tmp_path / name
    path.write_text(json.dumps(cfg), encoding="utf-8")  # JSON is YAML
    return path


def _bytes(run: Path) -> dict[str, bytes]:
    """The row files and the export files, byte for byte."""
    files = {n: (run / n).read_bytes() for n in ROW_FILES}
    return files | {f"export/{p.name}": p.read_bytes() for p in sorted((run / "export").glob("*.jsonl"))}


def test_judge_calls_begin_before_generation_ends(tmp_path: Path, cli_main) -> None:
    """Trace timestamps: the first judge call starts before the last candidate call ends (sequential stages
    started every judge call after the last candidate call)."""
    with FakeOpenAIServer(latency_s=0.05) as server:
        data = write_jsonl(tmp_path / "p.jsonl", PROMPTS)
        cfg = _config(tmp_path, server, data, concurrency=2, judge_parallel_workers=2)
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "o"])
    assert rc == 0, err
    trace = [e for e in read_jsonl(tmp_path / "outputs" / "o" / "trace.jsonl") if not e["cache_hit"]]
    cand_ends = [e["ts"] for e in trace if e["role"] == "candidate"]
    judge_starts = [e["ts"] - e["latency_ms"] / 1000 for e in trace if e["role"] == "judge"]
    assert len(cand_ends) == len(judge_starts) == len(PROMPTS)
    assert min(judge_starts) < max(cand_ends)
    # most of the judging happened while candidates were still being asked
    assert sum(t < max(cand_ends) for t in judge_starts) > len(PROMPTS) // 2


def _random_latency(seed: int) -> Any:
    """Replies after a random delay (0-40 ms), so calls finish out of order; pairwise judges pick by hash."""
    rng, lock = random.Random(seed), threading.Lock()

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        with lock:
            delay = rng.random() * 0.04
        text = message_text(body["messages"][-1])
        if "[The Start of Assistant A's Answer]" in text:
            content = "[[A]]" if hashlib.sha256(text.encode()).digest()[0] & 1 else "[[B]]"
        elif body["model"] == "cand-beta" and "Make it shorter." in text:
            content = "BETA " + default_reply(body)
        else:
            content = default_reply(body)
        return {"content": content, "delay_s": delay}

    return reply


def _mixed_config(tmp_path: Path, server: FakeOpenAIServer, name: str, **run: Any) -> Path:
    """Open prompts and three-turn conversations, two candidates (two samples of one), pairwise judging."""
    prompts = write_jsonl(tmp_path / "p.jsonl", PROMPTS[:12])
    mt = write_jsonl(tmp_path / "mt.jsonl", CONVERSATIONS)
    cfg: dict[str, Any] = {
        "candidates": [
            model_entry("alpha", "openai/cand-alpha", server, samples_per_prompt=2, params={"temperature": 0.7}),
            model_entry("beta", "openai/cand-beta", server),
        ],
        "judges": [model_entry("j1", "openai/judge-one", server), model_entry("j2", "openai/judge-two", server)],
        "datasets": [{"path": str(prompts)}, {"path": str(mt)}],
        "run": {"output_dir": str(tmp_path / "outputs"), "progress": False, "bootstrap_samples": 20, **run},
        "cache": {"dir": str(tmp_path / f"cache-{name}")},
        "retry": {"initial_wait_s": 0.05, "max_wait_s": 1, "max_attempts": 2},
        "judging": {"default_rubric": DEFAULT_RUBRIC, "pairwise": {"baseline": "beta"}},
        "export": {"formats": ["sft", "dpo", "reward"]},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def test_rows_in_input_order_and_reruns_byte_identical(tmp_path: Path, cli_main) -> None:
    """Random per-request latency, 16 threads a pool, multi-turn and pairwise: the rows equal those of a run with one
    thread a pool (its own cache), byte for byte; a warm rerun writes the same bytes and pays for nothing; so does
    another cold run."""
    with FakeOpenAIServer(responder=_random_latency(1)) as server:
        wide = _mixed_config(tmp_path, server, "wide", concurrency=16, judge_parallel_workers=16)
        narrow = _mixed_config(tmp_path, server, "narrow", concurrency=1, judge_parallel_workers=1)
        again = _mixed_config(tmp_path, server, "again", concurrency=16, judge_parallel_workers=16)
        for cfg, run_id in ((wide, "w"), (narrow, "n"), (wide, "w"), (again, "a")):
            rc, _, err = cli_main(["--config", str(cfg), "--run-id", run_id])
            assert rc == 0, err
    out = tmp_path / "outputs"
    responses = read_jsonl(out / "n" / "responses.jsonl")
    # example-major, a conversation's turns together, pairwise rows after their example's judgments
    ids = [e["id"] for e in read_jsonl(out / "n" / "examples.jsonl")]
    assert [r["example_id"] for r in responses] == sorted((r["example_id"] for r in responses), key=ids.index)
    assert len(responses) == 12 * 3 + 6 * 3 * 3
    pair_rows = [j for j in read_jsonl(out / "n" / "judgments.jsonl") if j.get("kind") == "pairwise"]
    assert len(pair_rows) == 12 + 6 * 3
    assert {"export/sft.jsonl", "export/dpo.jsonl", "export/reward.jsonl"} <= _bytes(out / "n").keys()
    assert _bytes(out / "w") == _bytes(out / "n")  # the warm rerun wrote its files afresh, the same bytes
    assert json.loads((out / "w" / "summary.json").read_text())["calls"]["made"] == 0
    assert _bytes(out / "a") == _bytes(out / "n")  # cold vs cold (another cache, other latencies)


def test_kill9_leaves_whole_rows_of_finished_examples(tmp_path: Path) -> None:
    """SIGKILL mid-run against a slow server: responses.jsonl and judgments.jsonl hold whole rows of the finished
    examples, in input order, a prefix of what the completed run writes."""
    env = subprocess_env(tmp_path)
    with FakeOpenAIServer(latency_s=0.15) as server:
        data = write_jsonl(tmp_path / "p.jsonl", PROMPTS)
        cfg = _config(tmp_path, server, data, concurrency=2, judge_parallel_workers=2)
        args = ["--config", str(cfg), "--run-id", "k"]
        proc = start_cli(args, logs=tmp_path / "logs", full_env=env)
        run = tmp_path / "outputs" / "k"
        deadline = time.monotonic() + 60
        while not (run / "judgments.jsonl").exists() or len(read_jsonl(run / "judgments.jsonl")) < 5:
            assert proc.popen.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.05)
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait(timeout=10)
        killed = {n: (run / n).read_text(encoding="utf-8") for n in ROW_FILES}
        server.configure(latency_s=0.0)
        done = run_cli(args, timeout=120, full_env=env)
        assert done.returncode == 0, done.stderr
    complete = {n: (run / n).read_text(encoding="utf-8") for n in ROW_FILES}
    for n in ROW_FILES:
        assert killed[n].endswith("\n") and all(json.loads(line) for line in killed[n].splitlines()), n
    responses = [json.loads(line) for line in killed["responses.jsonl"].splitlines()]
    assert 5 <= len(responses) < len(PROMPTS)
    assert [r["example_id"] for r in responses] == [f"p/{p['id']}" for p in PROMPTS[: len(responses)]]
    for n in ROW_FILES:  # what the kill left is the start of what the whole run writes
        assert complete[n].startswith(killed[n]), n
    assert (
        len(complete["judgments.jsonl"].splitlines()) == len(complete["responses.jsonl"].splitlines()) == len(PROMPTS)
    )
