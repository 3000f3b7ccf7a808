"""Real llama.cpp inference through run.py on the bundled SmolLM2: responses, schema-constrained judge
JSON, a scored summary, and a rerun that makes zero model calls. No server, no key, no network."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import read_jsonl, run_cli, write_jsonl

pytest.importorskip(
    "llama_cpp", reason="llama-cpp-python is not installed (pip install --no-deps -r requirements-local.txt)"
)
pytestmark = pytest.mark.slow


def test_local_model_end_to_end(tmp_path):
    data = write_jsonl(
        tmp_path / "tiny.jsonl",
        [
            {
                "id": "capital",
                "prompt": "What is the capital of France? Answer in one sentence.",
                "rubric": [
                    {"id": "paris", "text": "The response says the capital is Paris.", "weight": 2},
                    {"id": "short", "text": "The response is one sentence long.", "weight": 1},
                ],
            },
            {"id": "sum", "question": "What is 2 + 3?", "answer": "2 + 3 = 5 #### 5"},
        ],
    )
    config = {
        "run": {"output_dir": str(tmp_path / "out"), "progress": False, "concurrency": 2, "judge_parallel_workers": 2},
        "cache": {"dir": str(tmp_path / "cache")},
        "datasets": [{"path": str(data), "name": "tiny", "format": "auto"}],
        "candidates": [
            {"name": "smol", "model": "local/smollm2", "params": {"temperature": 0.0, "max_tokens": 48}},
        ],
        "judges": [{"name": "smol-judge", "model": "local/smollm2", "params": {"max_tokens": 160}}],
        "judging": {"max_explanation_chars": 200},
    }
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(config), encoding="utf-8")

    rc, _, err = run_cli(["--config", str(cfg_path), "--run-id", "local"], timeout=600)
    assert rc == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err  # the model is freed before shutdown
    out = tmp_path / "out" / "local"
    responses = read_jsonl(out / "responses.jsonl")
    assert len(responses) == 2
    assert all(r["status"] == "ok" and r["text"].strip() for r in responses)
    assert all(r["usage"]["completion_tokens"] > 0 for r in responses)

    judgments = read_jsonl(out / "judgments.jsonl")
    rubric_j = [j for j in judgments if j["judge"] == "smol-judge"]
    assert len(rubric_j) == 2  # one judge call per criterion
    # Schema-constrained decoding: the replies parse as JSON, so the verdicts are met/not_met, not error.
    assert all(j["verdict"] in ("met", "not_met") for j in rubric_j), rubric_j
    auto = [j for j in judgments if j["judge"] == "auto:match"]
    assert len(auto) == 1 and auto[0]["verdict"] in ("met", "not_met")

    summary = json.loads((out / "summary.json").read_text())
    cand = summary["datasets"]["tiny"]["candidates"]["smol"]
    assert cand["expected"] == 2 and cand["scored"] >= 1 and cand["score"] is not None
    assert summary["calls"]["made"] >= 4  # 2 candidate + 2 judge calls at least

    trace = read_jsonl(out / "trace.jsonl")
    assert {e["role"] for e in trace} == {"candidate", "judge"}
    assert all(e["status"] == "ok" for e in trace)

    rc, _, err = run_cli(["--config", str(cfg_path), "--run-id", "local"], timeout=600)
    assert rc == 0, err
    again = json.loads((out / "summary.json").read_text())
    assert again["calls"]["made"] == 0
    assert again["calls"]["cache_hits"] == summary["calls"]["made"]
    # Same verdicts; model judgments now come from the cache (judge-free ones never touch it).
    assert read_jsonl(out / "judgments.jsonl") == judgments  # cache_hit is not in the rows (issue 13)
