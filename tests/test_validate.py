"""--validate counts the calls the run's own code builds (stages.py over engine/estimate.py): cached tie-breaks and re-asks
of unreadable judge replies as the run makes them, a bound for the uncached ones, and it never stores. Through the
fake server; each count is checked against the calls the server saw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import DATA, DEFAULT_RUBRIC, model_entry, write_jsonl
from factories import one_candidate
from fakeserver import FakeOpenAIServer, default_reply, is_judge_request
from msgspec.structs import replace

from rubricrun.config import load_config
from rubricrun.engine import estimate
from rubricrun.engine.estimate import DRY_PAIR
from rubricrun.judging.pairwise import read_pair_reply
from rubricrun.judging.protocol import JUDGE_PARSE_ATTEMPTS
from rubricrun.providers.base import BaseProvider
from rubricrun.providers.stack import open_cache
from rubricrun.tasks import registry
from rubricrun.types import LLMResponse

ROW = {"id": "r1", "prompt": "Say hello to the team.", "rubric": [{"id": "c1", "text": "Greets.", "weight": 1}]}


def _judge_calls(server: FakeOpenAIServer) -> int:
    return sum(1 for r in server.requests if (r.model or "").startswith("judge"))


def _one_row(tmp_path: Path, server: FakeOpenAIServer, make_config: Any, **overrides: Any) -> Any:
    judges = overrides.pop("judges", [model_entry("j1", "openai/judge-one", server)])
    path = make_config(
        server,
        candidates=one_candidate(server),
        judges=judges,
        datasets=[{"path": str(write_jsonl(tmp_path / "rows.jsonl", [ROW]))}],
        run={"judge_parallel_workers": 1, "concurrency": 1},
        **overrides,
    )
    return path


def test_a_cached_tie_break_is_counted(tmp_path: Path, make_config: Any, cli_main: Any) -> None:
    """Two judges split on the criterion and a third breaks the tie (judging.on_tie: judge). After the run all three
    replies are cached, and --validate counts three judge calls, all cached (before: two, the tie-break missed)."""
    asked = {"n": 0}

    def responder(body: dict[str, Any]) -> str:
        if not is_judge_request(body):
            return default_reply(body)
        asked["n"] += 1  # first judge met, second not met, the tie-break met
        return json.dumps({"explanation": "", "criteria_met": asked["n"] != 2})

    with FakeOpenAIServer(responder=responder) as server:
        judges = [model_entry(f"j{i}", f"openai/judge-{i}", server) for i in (1, 2, 3)]
        path = _one_row(
            tmp_path, server, make_config, judges=judges, judging={"judges_per_criterion": 2, "on_tie": "judge"}
        )
        cfg = load_config(path)
        before = estimate.count_calls(cfg, None)
        rc, _, err = cli_main(["--config", str(path), "--run-id", "tie"])
        assert rc == 0, err
        assert _judge_calls(server) == 3
        # before the run: two votes that agree, or a tie-break (asked again once) and each vote asked again once
        assert (before["judge_calls"], before["judge_cached"]) == (2, 0)
        after = estimate.count_calls(cfg, None)
    assert (after["judge_calls"], after["judge_cached"]) == (3, 3)  # before this change: (2, 2)
    assert after["judge_calls_at_most"] == 3
    assert before["judge_calls_at_most"] == 2 * JUDGE_PARSE_ATTEMPTS + JUDGE_PARSE_ATTEMPTS >= 3
    assert after["cost_upper_bound_usd"] == 0


def test_a_cached_unreadable_judge_reply_counts_its_reask(tmp_path: Path, make_config: Any, cli_main: Any) -> None:
    """The judge's first reply cannot be read and its re-ask can: both stay cached, and --validate counts both (the
    run replays both; before: one)."""

    def responder(body: dict[str, Any]) -> str:
        if is_judge_request(body) and not body.get("temperature"):
            return "I read it and it is fine."
        return default_reply(body)

    with FakeOpenAIServer(responder=responder) as server:
        path = _one_row(tmp_path, server, make_config)
        cfg = load_config(path)
        rc, _, err = cli_main(["--config", str(path), "--run-id", "reask"])
        assert rc == 0, err
        assert _judge_calls(server) == 2
        counts = estimate.count_calls(cfg, None)
        server.reset_log()
        rc, _, err = cli_main(["--config", str(path), "--run-id", "reask"])
        assert rc == 0, err
        assert server.requests == []  # the rerun replays both replies
    assert (counts["candidate_calls"], counts["candidate_cached"]) == (1, 1)
    assert (counts["judge_calls"], counts["judge_cached"]) == (2, 2)  # before this change: (1, 1)
    assert counts["judge_calls_at_most"] == 2


def test_counts_before_the_run_are_the_calls_it_makes(tmp_path: Path, make_config: Any, cli_main: Any) -> None:
    """Multi-turn and single-turn rows, two judges on each criterion, pairwise judging over two candidates: before
    the run --validate counts what the server then gets (every reply readable, votes agreeing), within the bound;
    after it, every call is cached and a rerun makes none."""

    def responder(body: dict[str, Any]) -> str:  # a pairwise judge picks A; each candidate answers in its own words
        if "[[A]]" in json.dumps(body.get("messages")):
            return "A is better. [[A]]"
        return default_reply(body) if is_judge_request(body) else f"{body['model']}: {default_reply(body)}"

    with FakeOpenAIServer(responder=responder) as server:

        def entry(name: str, model: str) -> dict[str, Any]:
            return model_entry(name, model, server, system_prompt=f"You are {name}.")  # no two requests alike

        data = [{"path": str(DATA / name)} for name in ("mtbench_sample.jsonl", "generic_sample.jsonl")]
        path = make_config(
            server,
            candidates=[entry("alpha", "openai/cand-alpha"), entry("beta", "openai/cand-beta")],
            judges=[entry("j1", "openai/judge-one"), entry("j2", "openai/judge-two")],
            datasets=data,
            judging={"judges_per_criterion": 2, "default_rubric": DEFAULT_RUBRIC, "pairwise": {"all_pairs": True}},
        )
        cfg = load_config(path)
        before = estimate.count_calls(cfg, None)
        rc, _, err = cli_main(["--config", str(path), "--run-id", "golden"])
        assert rc == 0, err
        made = len(server.requests)
        after = estimate.count_calls(cfg, None)
        server.reset_log()
        rc, _, err = cli_main(["--config", str(path), "--run-id", "golden"])
        assert rc == 0, err
        assert server.requests == []
    counted = [before[f"{k}_calls"] for k in ("candidate", "judge", "pairwise")]
    assert before["candidate_calls"] > before["examples"] > 0  # two candidates, and later turns
    assert made == sum(counted) > 0
    assert before["judge_calls"] < before["judge_calls_at_most"]
    assert before["pairwise_calls"] < before["pairwise_calls_at_most"]
    for k in ("candidate", "judge", "pairwise"):
        assert (
            after[f"{k}_cached"]
            == after[f"{k}_calls"]
            == after[f"{k}_calls_at_most" if k != "candidate" else f"{k}_calls"]
            == before[f"{k}_calls"]
        )


def test_validate_never_stores(tmp_path: Path, make_config: Any, cli_main: Any) -> None:
    """A cache that answers some calls and not others (a second judge added after the run): counting reads it and
    writes nothing."""
    with FakeOpenAIServer() as server:
        path = _one_row(tmp_path, server, make_config)
        rc, _, err = cli_main(["--config", str(path), "--run-id", "filled"])
        assert rc == 0, err
        judges = [model_entry("j1", "openai/judge-one", server), model_entry("j2", "openai/judge-two", server)]
        cfg = load_config(_one_row(tmp_path, server, make_config, judges=judges, judging={"judges_per_criterion": 2}))
        cache = open_cache(cfg)
        assert cache is not None
        stored = len(cache._cache)
        counts = estimate.count_calls(cfg, None)
        assert len(cache._cache) == stored == 2
        cache.close()
    assert (counts["judge_calls"], counts["judge_cached"], counts["judge_calls_at_most"]) == (2, 1, 3)


def test_dry_replies_read_as_verdicts(make_config: Any) -> None:
    """A dry vote is readable on every scale, so a count assumes no re-ask it did not see."""
    for scale in ("binary", "1-5", "1-10"):
        cfg = load_config(make_config(None, judging={"scale": scale}, filename=f"{scale}.yaml"))
        judging = registry.judging_for(cfg, BaseProvider())
        reading, why = judging.reading(LLMResponse(text=judging.protocol.dry_reply))
        assert reading is not None, (scale, why)
    assert read_pair_reply(LLMResponse(text=DRY_PAIR))[0] == "C"


# --------------------------------------------------------------------------------------------------
# The count in a second process (estimate.ProcessDriver, second_process.py)


def _mixed_config(tmp_path: Path, server: FakeOpenAIServer, make_config: Any) -> Path:
    """Every sample dataset, two candidates, two judges voting (a tie broken by a third), pairwise judging: counts
    of every kind, priced."""
    price = {"price": {"input_per_mtok": 1.0, "output_per_mtok": 3.0}}
    judges = [model_entry(f"j{i}", f"openai/judge-{i}", server, **price) for i in (1, 2, 3)]
    return make_config(
        server,
        candidates=[model_entry(n, f"openai/cand-{n}", server, **price) for n in ("alpha", "beta")],
        judges=judges,
        judging={
            "judges_per_criterion": 2, "on_tie": "judge", "default_rubric": DEFAULT_RUBRIC,
            "pairwise": {"all_pairs": True},
        },
    )  # fmt: skip


def _here_and_in_a_child(path: Path, cli_main: Any, monkeypatch: Any) -> dict[str, Any]:
    """--validate's JSON with the count here ("off") and in a second process ("on")."""
    from rubricrun.engine import second_process

    got = {}
    for mode in ("off", "on"):
        monkeypatch.setenv(second_process.ENV, mode)
        rc, out, err = cli_main(["--config", str(path), "--validate"])
        assert rc == 0, err
        got[mode] = json.loads(out)
    return got


def test_the_count_in_a_second_process_is_the_count_here(
    tmp_path: Path, make_config: Any, cli_main: Any, monkeypatch: Any, capsys: Any
) -> None:
    """Before any call, after a run and with one more judge (part cached): the same JSON, with the count here and in
    the child, at a chunk of 3 examples (so many chunks cross the pipe)."""

    monkeypatch.setattr(estimate, "COUNT_CHUNK", 3)
    with FakeOpenAIServer() as server:
        path = _mixed_config(tmp_path, server, make_config)
        outputs = []
        for step in ("cold", "warm"):
            if step == "warm":
                rc, _, err = cli_main(["--config", str(path), "--run-id", "r"])
                assert rc == 0, err
            got = _here_and_in_a_child(path, cli_main, monkeypatch)
            assert got["on"] == got["off"], step
            outputs.append(got["on"])
    cold, warm = outputs
    assert cold["judge_calls"] > 0 and cold["pairwise_calls"] > 0 and cold["cost_upper_bound_usd"] > 0
    assert warm["candidate_cached"] == warm["candidate_calls"] > 0
    assert warm["cost_upper_bound_usd"] < cold["cost_upper_bound_usd"]


def test_leaves_made_in_the_main_process_count_as_the_childs(
    tmp_path: Path, make_config: Any, cli_main: Any, monkeypatch: Any
) -> None:
    """A judge-free run (every call a leaf), one example in 2 keyed and priced in the main process (LEAD_SHARE),
    the cache part filled: the same JSON as the count here (calls, cached, the bound of prompts of every length)."""

    monkeypatch.setattr(estimate, "COUNT_CHUNK", 3)
    monkeypatch.setattr(estimate, "LEAD_SHARE", 2)
    price = {"price": {"input_per_mtok": 1000.0, "output_per_mtok": 3.0}}  # a prompt token shows in the bound
    rows = [{"id": f"r{i}", "prompt": "Question? " * (i + 1)} for i in range(11)]
    with FakeOpenAIServer() as server:
        candidates = [
            model_entry("alpha", "openai/cand-alpha", server, **price),
            model_entry("beta", "openai/cand-beta", server, samples_per_prompt=2, **price),
        ]
        data = [{"path": str(write_jsonl(tmp_path / "rows.jsonl", rows))}]
        path = make_config(server, candidates=candidates, judges=[], datasets=data)
        rc, _, err = cli_main(["--config", str(path), "--max-examples", "5", "--run-id", "r"])
        assert rc == 0, err
        got = _here_and_in_a_child(path, cli_main, monkeypatch)
    assert got["on"] == got["off"]
    assert got["on"]["candidate_calls"] == 33 and got["on"]["candidate_cached"] == 15
    assert got["on"]["cost_upper_bound_usd"] > 0


def test_a_bad_row_is_reported_with_the_count_in_a_second_process(
    tmp_path: Path, make_config: Any, cli_main: Any, monkeypatch: Any
) -> None:
    """The child counts a chunk behind preflight: a bad row late in the file is still the one error, exit 2."""
    from rubricrun.engine import second_process

    monkeypatch.setattr(estimate, "COUNT_CHUNK", 2)
    monkeypatch.setenv(second_process.ENV, "on")
    rows: list[Any] = [{"id": f"r{i}", "prompt": f"Question {i}?"} for i in range(9)] + ['{"id": "bad", "prompt": ']
    path = make_config(None, judges=[], datasets=[{"path": str(write_jsonl(tmp_path / "rows.jsonl", rows))}])
    rc, _, err = cli_main(["--config", str(path), "--validate"])
    assert rc == 2
    assert "rows.jsonl:10" in err and "malformed JSON" in err and "Traceback" not in err


def test_large_local_datasets_get_the_second_process(tmp_path: Path, make_config: Any, monkeypatch: Any) -> None:
    """One rule for a large run (preflight.large_run), for the --validate count and the run's tally alike."""
    from rubricrun.engine import second_process
    from rubricrun.engine.preflight import LARGE_BYTES, large_run

    monkeypatch.delenv(second_process.ENV, raising=False)
    small = write_jsonl(tmp_path / "small.jsonl", [ROW])
    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * LARGE_BYTES)
    cfg = load_config(make_config(None, datasets=[{"path": str(small)}]))
    assert not large_run(cfg, None)
    cfg = load_config(make_config(None, datasets=[{"path": str(small)}, {"path": str(big)}]))
    assert large_run(cfg, None) and not large_run(cfg, 100)
    assert not large_run(replace(cfg, run=replace(cfg.run, max_examples=100)), None)
    assert second_process.wanted(True) == ((__import__("os").cpu_count() or 1) > 1) and not second_process.wanted(False)
    monkeypatch.setenv(second_process.ENV, "on")
    assert second_process.wanted(False)
    monkeypatch.setenv(second_process.ENV, "off")
    assert not second_process.wanted(True)


def test_a_run_never_imports_the_validate_machinery(tmp_path: Path, server: FakeOpenAIServer, make_config: Any) -> None:
    """engine/estimate.py (--validate's dry provider, drivers and count) is imported only for --validate: a whole run
    through run.py, in a fresh interpreter, leaves it out of sys.modules; --validate brings it in."""
    import subprocess
    import sys

    from conftest import REPO, cli_env

    path = _one_row(tmp_path, server, make_config)
    code = (
        "import runpy, sys\n"
        "sys.argv = ['run.py', *sys.argv[1:]]\n"
        "try:\n    runpy.run_path('run.py', run_name='__main__')\nexcept SystemExit as e:\n    code = e.code\n"
        "print('ESTIMATE', code, 'rubricrun.engine.estimate' in sys.modules)\n"
    )
    for args, imported in ((["--run-id", "lean"], False), (["--validate"], True)):
        argv = [sys.executable, "-c", code, "--config", str(path), *args]
        out = subprocess.run(argv, cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=120)
        assert f"ESTIMATE 0 {imported}" in out.stdout, out.stdout + out.stderr
