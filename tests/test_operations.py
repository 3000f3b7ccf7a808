"""Operations a cluster and a newcomer expect (issue 23): SIGTERM stops a run like Ctrl+C (exit 143, partial summary
and report, a rerun pays for nothing twice), and a config without judges is a generation run. Real run.py over the
fake server."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

from conftest import DELETE, model_entry, read_jsonl, run_dir, start_cli, write_jsonl
from fakeserver import FakeOpenAIServer


def rubric_data(tmp_path: Path, n: int) -> list[dict[str, Any]]:
    rows = [
        {"id": f"q{i}", "prompt": f"Question {i}?", "rubric": [{"id": "c1", "text": "Answers it.", "weight": 1}]}
        for i in range(n)
    ]
    return [{"path": str(write_jsonl(tmp_path / "data" / "rubric.jsonl", rows))}]


def prompts_data(tmp_path: Path, n: int) -> list[dict[str, Any]]:
    rows = [{"id": f"p{i}", "prompt": f"Write line {i}."} for i in range(n)]
    return [{"path": str(write_jsonl(tmp_path / "data" / "prompts.jsonl", rows))}]


def wait_for(server: FakeOpenAIServer, n: int, proc: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while server.count() < n:
        assert proc.popen.poll() is None, proc.stderr
        assert time.monotonic() < deadline, f"fewer than {n} requests after {timeout} s"
        time.sleep(0.02)


# --------------------------------------------------------------------------------------------------
# SIGTERM: docker stop, Kubernetes, SLURM


def test_sigterm_stops_like_ctrl_c_and_the_rerun_pays_nothing_twice(tmp_path: Path, make_config) -> None:
    latency = 0.3  # calls in flight at the signal land within the 3 s grace period, in the cache
    with FakeOpenAIServer(latency_s=latency) as server:
        cfg = make_config(server, datasets=rubric_data(tmp_path, 16), judges=[model_entry("j1", "openai/j", server)])
        args = ["--config", str(cfg), "--run-id", "term"]
        p = start_cli(args, logs=tmp_path / "logs")
        wait_for(server, 10, p)
        t_sig = time.time()
        p.popen.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=15)
        t_exit = time.time()
        assert rc == 143, p.stderr
        assert t_exit - t_sig < 10  # inside docker stop's default grace period
        assert "Traceback" not in p.stderr and "--run-id term" in p.stderr
        out = run_dir(tmp_path, "term")
        s = json.loads((out / "summary.json").read_text())
        assert s["status"] == "interrupted" and s["stopped_by"] == "SIGTERM"
        assert s["responses_not_done"] > 0, "the signal came too late to interrupt anything"
        assert (out / "report.html").exists() and "interrupted" in (out / "report.html").read_text()
        assert all(r["status"] == "ok" for r in read_jsonl(out / "responses.jsonl"))
        first = list(server.requests)
        answered = {r.fingerprint for r in first if r.status == 200 and r.t + latency < t_exit - 0.5}

        p2 = start_cli(args, logs=tmp_path / "logs")
        assert p2.wait(timeout=120) == 0, p2.stderr
        again = [r for r in server.requests[len(first) :] if r.fingerprint in answered]
        assert not again, f"{len(again)} calls paid twice"
        s2 = json.loads((out / "summary.json").read_text())
        assert s2["status"] == "complete" and "stopped_by" not in s2
        assert len(read_jsonl(out / "responses.jsonl")) == 2 * 16


def test_a_second_sigterm_ends_at_once(tmp_path: Path, make_config) -> None:
    with FakeOpenAIServer(p_hang=1.0, hang_s=30) as server:  # every call hangs: the grace period runs in full
        cfg = make_config(
            server,
            datasets=prompts_data(tmp_path, 4),
            candidates=[model_entry("alpha", "openai/a", server, timeout_s=60)],
            judges=DELETE,
        )
        p = start_cli(["--config", str(cfg), "--run-id", "twice"], logs=tmp_path / "logs")
        wait_for(server, 4, p)
        p.popen.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        t = time.monotonic()
        p.popen.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=10)
        assert rc == -signal.SIGTERM, p.stderr  # killed by the signal itself
        assert time.monotonic() - t < 2


# --------------------------------------------------------------------------------------------------
# Generation runs: candidates and no judges


def test_a_config_without_judges_is_a_generation_run(tmp_path: Path, make_config, cli_main) -> None:
    with FakeOpenAIServer() as server:
        cfg = make_config(
            server,
            datasets=prompts_data(tmp_path, 5),
            candidates=[model_entry("teacher", "openai/teacher", server, samples_per_prompt=2)],
            judges=DELETE,
            judging=DELETE,
            export={"formats": ["sft", "prompts"]},
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "gen"])
        assert rc == 0, err
        assert "generation only: nothing judged" in err and "prompts              teacher          not scored" in err
        out = run_dir(tmp_path, "gen")
        responses = read_jsonl(out / "responses.jsonl")
        assert len(responses) == 10 and all(r["status"] == "ok" for r in responses)
        assert read_jsonl(out / "judgments.jsonl") == []
        s = json.loads((out / "summary.json").read_text())
        assert s["status"] == "complete" and s["note"] == "generation only: nothing judged"
        sft = read_jsonl(out / "export" / "sft.jsonl")
        assert len(sft) == 10 and {r["score"] for r in sft} == {None}
        assert sft[0]["completion"][0]["content"] == "Answer to: Write line 0."
        assert s["export"]["sft"]["written"] == 10 and len(read_jsonl(out / "export" / "prompts.jsonl")) == 5
        page = (out / "report.html").read_text()
        assert "generation only: nothing judged" in page and "Answer to: Write line 4." in page
        assert "Not scored (generation only: nothing judged)" in page and 'id="cols-1"' not in page
        assert len(server.requests) == 10


def test_judges_with_nothing_they_can_score_is_still_refused(tmp_path: Path, make_config, cli_main) -> None:
    cfg = make_config(None, datasets=prompts_data(tmp_path, 3), judging=DELETE)
    rc, _, err = cli_main(["--config", str(cfg), "--validate"])
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "key 'datasets[0]'" in err and "nothing can score its 3 examples" in err and "remove judges:" in err
