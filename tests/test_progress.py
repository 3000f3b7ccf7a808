"""Progress people expect: a tqdm bar on a terminal, progress lines in the log elsewhere; run.log.jsonl."""

from __future__ import annotations

import io
import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import DELETE, run_dir
from fakeserver import FakeOpenAIServer, default_reply, message_text

from rubricrun.engine import progress
from rubricrun.engine.progress import Progress, progress_line


def synth_responder(body: dict[str, Any]) -> str:
    """Synthesis asks get a JSON list of prompts; every other call the fake server's default reply."""
    text = message_text(body["messages"][-1])
    if "subtopics of the topic" in text:
        return '["Budgeting", "Saving"]'
    if "questions or requests" in text:
        return json.dumps([f"Question {i} about {len(text)}?" for i in range(3)])
    return default_reply(body)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_by_hand() -> None:
    # 40 of 100 in 5 s: 8.0/s, 60 left -> 7.5 s -> "00:07" (truncated, as tqdm does)
    assert progress_line("generate", 40, 100, 5.0) == "generate 40/100 (40%) 8.0/s ETA 00:07"
    assert progress_line("judge", 0, 10, 1.0) == "judge 0/10 (0%) 0.0/s ETA ?"
    assert progress_line("judge", 3, 3, 0.0) == "judge 3/3 (100%) 0.0/s ETA ?"
    # 1 of 3601 in 1 s: 3600 left at 1.0/s -> one hour
    assert progress_line("judge", 1, 3601, 1.0) == "judge 1/3601 (0%) 1.0/s ETA 1:00:00"


def test_terminal_gets_a_tqdm_bar_with_rate_and_eta(caplog: pytest.LogCaptureFixture) -> None:
    term = _Terminal()
    bar = Progress("judge", 3, stream=term)
    bar.interval_s = 0.0
    for _ in range(3):
        bar.update()
    bar.close()
    out = term.getvalue()
    assert "judge" in out and "3/3" in out and "call/s" in out and "<" in out  # tqdm: [elapsed<eta, rate]
    assert not [r for r in caplog.records if r.getMessage().startswith("progress ")]  # the bar, not log lines


def test_not_a_terminal_logs_progress_lines(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)  # every completion passes the interval
    logger = logging.getLogger("rubricrun")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="rubricrun"):
            bar = Progress("generate", 4, stream=io.StringIO())
            for _ in range(4):
                bar.update()
            bar.close()
    finally:
        logger.removeHandler(caplog.handler)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("progress generate")]
    assert lines and lines[-1].startswith("progress generate 4/4 (100%)") and "/s ETA" in lines[-1]


def test_disabled_progress_is_silent(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)
    term = _Terminal()
    bar = Progress("judge", 3, enabled=False, stream=term)
    bar.update(3)
    bar.close()
    assert term.getvalue() == "" and not caplog.records


def test_run_log_has_progress_lines_and_jsonl_records(tmp_path: Path, make_config, cli_main) -> None:
    """A run whose stderr is not a terminal: progress lines for every stage in run.log and run.log.jsonl, and
    every run.log.jsonl line is a JSON object with time, level and message."""
    with FakeOpenAIServer(responder=synth_responder, latency_s=0.6) as server:  # slower than the 0.5 s tick
        cfg = make_config(
            server,
            run={"progress": True, "progress_interval_s": 0},
            datasets=DELETE,
            synthesize={"main_topic": "personal finance", "num_subtopics": 2, "prompts_per_subtopic": 2},
            judging={"default_rubric": [{"id": "c", "text": "Says please.", "weight": 1}]},
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "p1"])
    assert rc == 0, err
    out = run_dir(tmp_path, "p1")
    text = (out / "run.log").read_text()
    for stage in ("synthesize", "generate", "judge"):
        assert f"progress {stage} " in text, stage
    assert "progress pairwise" not in text  # no pairwise judging configured: no empty bar
    records = [json.loads(line) for line in (out / "run.log.jsonl").read_text().splitlines()]
    assert records and all({"time", "level", "message"} <= r.keys() for r in records)
    assert all(datetime.fromisoformat(r["time"]).tzinfo is not None for r in records)
    assert any(r["message"].startswith("progress judge ") and r["level"] == "INFO" for r in records)
    assert all(r["message"] in text for r in records)  # the same records as the text log


def test_a_finished_stage_is_not_repeated(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # Before issue 23: "generate 42/42 (100%) ... ETA 00:00" every interval for minutes while judging ran.
    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)
    logger = logging.getLogger("rubricrun")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="rubricrun"):
            bar = Progress("generate", 0, stream=io.StringIO(), grows=True)
            bar.add(2)
            bar.update()
            bar.update()  # done: said once
            for _ in range(5):
                bar.tick()  # the conductor's ticks while later stages run: nothing
            bar.add(1)  # more work found (a next turn): running again
            bar.tick()
            bar.update()
            bar.close()  # already said how it ended
    finally:
        logger.removeHandler(caplog.handler)
    lines = [r.getMessage().split(" (")[0] for r in caplog.records if r.getMessage().startswith("progress ")]
    assert lines == ["progress generate 1/2", "progress generate 2/2", "progress generate 2/3", "progress generate 3/3"]
