"""The tally in a second process (engine/second_process.py): a run whose tally is fed in a child process writes
the same files as one whose tally runs in the runner's process; the rows read back from their lines equal the
rows they were written from (codec.decode_lines); a SIGTERM to both processes still ends in the
partial summary and report; the child's end is reported, not hung on. Real run.py over the fake server."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from conftest import model_entry, read_jsonl, run_dir, start_cli
from fakeserver import FakeOpenAIServer
from test_operations import rubric_data, wait_for
from test_tally import CASES, _responder

from rubricrun import codec
from rubricrun.config import load_config
from rubricrun.engine import second_process
from rubricrun.engine.second_process import TallyProcess, open_tally, read_lines
from rubricrun.results.tally import Tally
from rubricrun.types import Criterion, Example, Judgment, PairJudgment, Response, Usage

# What differs between two reruns of one run whatever the tally: the times, and the calls a rerun makes again (a
# failed call is never cached; how many are asked again varies with the threads' order) with their costs.
_CALL_FACTS = re.compile(r"<dt>(report generated|wall time \(s\)|calls made|cache hits|call errors)</dt><dd>[^<]*</dd>")
_COSTS = re.compile(r'<section id="costs">.*?</section>', re.S)
_NOT_THE_TALLYS = ("calls", "costs", "wall_s")


def _files(run: Path) -> dict[str, Any]:
    """Every file a run writes but its logs and trace; in summary.json and report.html, what the tally computed."""
    out: dict[str, Any] = {}
    for p in sorted(run.rglob("*")):
        name = str(p.relative_to(run))
        if p.is_file() and not name.startswith(".") and not name.startswith(("run.log", "trace.jsonl")):
            text = p.read_text(encoding="utf-8")
            if name == "summary.json":
                out[name] = {k: v for k, v in json.loads(text).items() if k not in _NOT_THE_TALLYS}
            else:
                out[name] = _COSTS.sub("", _CALL_FACTS.sub("", text)) if name == "report.html" else text
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_tally_in_a_second_process_writes_the_same_files(
    case: str, tmp_path: Path, make_config: Any, cli_main: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAIServer(responder=_responder) as server:
        extra = CASES[case](tmp_path, server)
        path = make_config(server, retry={"max_attempts": 1}, export={"formats": ["sft", "dpo", "kto"]}, **extra)
        files = []
        for mode in ("off", "off", "on"):  # a run, then its rerun from the cache with the tally here and there
            monkeypatch.setenv(second_process.ENV, mode)
            rc, _, err = cli_main(["--config", str(path), "--run-id", "r"])
            assert rc == 0, err
            files.append(_files(run_dir(tmp_path, "r")))
    here, there = files[1], files[2]
    assert "export/sft.jsonl" in here and "report.html" in here
    assert list(there) == list(here)
    for name in here:
        assert there[name] == here[name], name
    assert there["summary.json"]["examples"] > 0 and there["summary.json"]["datasets"]  # the child read the rows


def test_rows_read_back_from_their_lines_equal_the_rows(tmp_path: Path, make_config: Any, cli_main: Any) -> None:
    """read_lines reads an example's lines as the runner wrote them (judgments.jsonl's: its judgments, then its
    pairwise rows), each as the row type a file of any version reads as (codec.convert of the parsed line)."""
    with FakeOpenAIServer(responder=_responder) as server:
        for case in ("votes", "pairwise"):
            path = make_config(server, retry={"max_attempts": 1}, **CASES[case](tmp_path, server))
            rc, _, err = cli_main(["--config", str(path), "--run-id", case])
            assert rc == 0, err
            run = run_dir(tmp_path, case)
            lines = {
                n: (run / f"{n}.jsonl").read_bytes().split(b"\n")[:-1] for n in ("examples", "responses", "judgments")
            }
            pairs = [ln + b"\n" for ln in lines["judgments"] if json.loads(ln).get("kind") == "pairwise"]
            plain = [ln + b"\n" for ln in lines["judgments"] if json.loads(ln).get("kind") != "pairwise"]
            responses = [ln + b"\n" for ln in lines["responses"][:3]]
            ex, rs, js, ps = read_lines(lines["examples"][0] + b"\n", b"".join(responses), b"".join(plain[:2]),
                                        b"".join(pairs[:2]))  # fmt: skip
            assert ex == codec.convert(json.loads(lines["examples"][0]), Example)
            assert rs == [codec.convert(json.loads(ln), Response) for ln in responses] and len(rs) == 3
            assert js == [codec.convert(json.loads(ln), Judgment) for ln in plain[:2]] and len(js) == 2
            assert ps == [codec.convert(json.loads(ln), PairJudgment) for ln in pairs[:2]]
            assert len(ps) == (2 if case == "pairwise" else 0)
    assert any(read_jsonl(run_dir(tmp_path, "votes") / "examples.jsonl")[i]["rubric"] for i in range(3))


def test_rows_take_defaults_and_ignore_unknown_keys() -> None:
    line = b'{"id": "e", "dataset": "d", "source": "f:1", "messages": [{"role": "user"}], "new": 1}'
    ex = codec.decode(line, Example)
    assert ex == Example("e", "d", "f:1", ({"role": "user"},)) and ex.metadata == {} and ex.rubric == ()
    crit = {"id": "c", "text": "t", "weight": -2, "tags": ["a", "b"], "category": None}
    ex = codec.decode(json.dumps({"id": "e", "dataset": "d", "source": "", "messages": [], "rubric": [crit],
                                  "choices": None}), Example)  # fmt: skip
    assert ex.rubric == (Criterion("c", "t", -2, ("a", "b"), None),) and ex.choices is None
    r = codec.decode(json.dumps({"id": "r", "example_id": "e", "candidate": "c", "model": "m", "sample_index": 0,
                                 "status": "ok", "text": "x", "error": None, "finish_reason": None, "cache_hit": True,
                                 "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}), Response)  # fmt: skip
    assert r.usage == Usage(1, 2, 3) and r.turn == 1


def test_open_tally_picks_the_process_by_size_and_by_the_variable(
    tmp_path: Path, make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large run (preflight.large_run, the rule --validate's count takes too) whose metrics preflight counted (no
    synthesis) feeds its tally in a second process."""
    cfg = load_config(make_config(None))
    counts = {"d": Counter(rubric=10)}

    def tally(large: bool, metric_counts: Any = counts) -> Any:
        make = partial(Tally, cfg, "r", metric_counts=metric_counts, spool=False)
        return open_tally(make, live=metric_counts is not None, large=large)

    small, large = False, True

    monkeypatch.delenv(second_process.ENV, raising=False)
    assert type(tally(small)) is Tally
    assert type(tally(large, None)) is Tally  # synthesis: nothing counted
    big_one = tally(large)
    try:
        assert isinstance(big_one, TallyProcess) == ((os.cpu_count() or 1) > 1)
    finally:
        big_one.close()
    monkeypatch.setenv(second_process.ENV, "off")
    assert type(tally(large)) is Tally
    monkeypatch.setenv(second_process.ENV, "on")
    on = tally(small)
    try:
        assert isinstance(on, TallyProcess)
        assert (on.n_responses, on.any_ok, on.first_error) == (0, False, None)  # asked of the child
    finally:
        on.close()
    assert not on.proc.is_alive()


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the child through /proc")
def test_sigterm_to_both_processes_still_ends_in_the_partial_summary(tmp_path: Path, make_config: Any) -> None:
    """`kill` of the whole process group (docker stop, SLURM): the child ignores it and answers the runner."""
    env = {second_process.ENV: "on"}
    with FakeOpenAIServer(latency_s=0.3) as server:
        cfg = make_config(server, datasets=rubric_data(tmp_path, 16), judges=[model_entry("j1", "openai/j", server)])
        args = ["--config", str(cfg), "--run-id", "term"]
        p = start_cli(args, logs=tmp_path / "logs", env=env)
        wait_for(server, 10, p)
        kids = _children(p.popen.pid)
        assert kids, "no tally process"
        for pid in [p.popen.pid, *kids]:
            os.kill(pid, signal.SIGTERM)
        assert p.wait(timeout=15) == 143, p.stderr
        assert "Traceback" not in p.stderr
        out = run_dir(tmp_path, "term")
        s = json.loads((out / "summary.json").read_text())
        assert s["status"] == "interrupted" and s["responses_not_done"] > 0
        assert "interrupted" in (out / "report.html").read_text()
        p2 = start_cli(args, logs=tmp_path / "logs", env=env)
        assert p2.wait(timeout=120) == 0, p2.stderr
        assert json.loads((out / "summary.json").read_text())["status"] == "complete"


def test_the_childs_end_is_an_error_with_the_rows_kept(tmp_path: Path, make_config: Any) -> None:
    """The child killed during the run: one error line naming the rerun, every row written, no hang."""
    with FakeOpenAIServer(latency_s=0.2) as server:
        cfg = make_config(server, datasets=rubric_data(tmp_path, 12), judges=[model_entry("j1", "openai/j", server)])
        args = ["--config", str(cfg), "--run-id", "died"]
        p = start_cli(args, logs=tmp_path / "logs", env={second_process.ENV: "on"})
        wait_for(server, 6, p)
        deadline = time.monotonic() + 10
        while not _children(p.popen.pid):
            assert time.monotonic() < deadline, "no tally process"
            time.sleep(0.05)
        for pid in _children(p.popen.pid):
            os.kill(pid, signal.SIGKILL)
        rc = p.wait(timeout=60)
        assert rc not in (0, 143), p.stderr
        assert "Traceback" not in p.stderr
        assert "tally's process ended" in p.stderr and "--run-id" in p.stderr
        out = run_dir(tmp_path, "died")
        assert len(read_jsonl(out / "responses.jsonl")) == 2 * 12  # the run went on: every row is there
