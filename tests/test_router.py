"""Entries with `deployments:` served by a litellm.Router (providers/router.py): config checks, a run over three
local servers one of which fails, the trace naming the serving deployment, and a warm rerun from the cache."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FAKE_KEY, KEY_ENV, model_entry, read_jsonl, write_jsonl
from fakeserver import FakeOpenAIServer

from rubricrun.config import load_config
from rubricrun.errors import InputError
from rubricrun.providers.routing import routes
from rubricrun.providers.stack import account_limits


def deployment(server: FakeOpenAIServer, **extra: Any) -> dict[str, Any]:
    return {"model": "openai/fake-model", "api_base": server.base_url, "api_key_env": KEY_ENV, **extra}


def qa_rows(n: int) -> list[dict[str, Any]]:
    return [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(n)]


def write(tmp_path: Path, cfg: dict[str, Any]) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def router_config(tmp_path: Path, entry: dict[str, Any], n: int = 30, **extra: Any) -> Path:
    data = write_jsonl(tmp_path / "qa.jsonl", qa_rows(n))
    return write(
        tmp_path,
        {
            "candidates": [entry],
            "datasets": [{"path": str(data)}],
            "run": {"output_dir": str(tmp_path / "outputs"), "progress": False, "concurrency": 4},
            "cache": {"dir": str(tmp_path / "cache")},
            "retry": {"initial_wait_s": 0.05, "max_wait_s": 1, "max_attempts": 4},
            **extra,
        },
    )


# --------------------------------------------------------------------------------------------------
# Config


@pytest.mark.parametrize(
    ("entry", "key", "words"),
    [
        ({"model": "openai/x", "deployments": [{"model": "openai/x"}]}, "candidates[0].model", "not both"),
        ({"deployments": [{"api_base": "http://h/v1"}]}, "candidates[0].deployments[0].model", "missing required"),
        ({"deployments": [{"model": "x"}]}, "candidates[0].deployments[0].model", "provider prefix"),
        ({"deployments": [{"model": "local/smollm2"}]}, "candidates[0].deployments[0].model", "in-process"),
        (
            {"deployments": [{"model": "openai/x", "rpm": 0}]},
            "candidates[0].deployments[0].rpm",
            "expected a number > 0.0, got 0",
        ),
        ({"deployments": [{"model": "openai/x", "colour": 1}]}, "candidates[0].deployments[0].colour", "unknown"),
        ({"model": "openai/x", "router": {"cooldown_s": 5}}, "candidates[0].router", "deployments"),
        (
            {"deployments": [{"model": "openai/x"}], "router": {"fallbacks": ["nobody"]}},
            "candidates[0].router.fallbacks[0]",
            "not a candidate",
        ),
        (
            {"deployments": [{"model": "openai/x"}], "router": {"strategy": "fastest"}},
            "candidates[0].router.strategy",
            "expected one of",
        ),
        ({"deployments": [{"model": "openai/x"}], "batch": True}, "candidates[0].batch", "Router"),
    ],
)
def test_bad_router_entries_name_file_line_and_key(tmp_path: Path, entry, key, words) -> None:
    path = router_config(tmp_path, {"name": "alpha", **entry})
    with pytest.raises(InputError) as exc:
        load_config(path)
    assert exc.value.key == key
    assert exc.value.line is not None and exc.value.file == str(path)
    assert words in str(exc.value)


def test_router_entry_is_one_logical_model_with_summed_limits(tmp_path: Path) -> None:
    entry = {
        "name": "pool",
        "deployments": [
            {"model": "openai/a", "api_base": f"http://h{i}/v1", "rpm": 300, "tpm": 1000} for i in range(3)
        ],
    }
    cfg = load_config(router_config(tmp_path, entry))
    [(route, _)] = routes(cfg.candidates[0])
    assert (route.model, route.api_base, route.api_key_env) == ("router/pool", None, None)
    assert account_limits(cfg)[route] == (900, 3000)


def test_missing_deployment_key_is_found_before_any_call(tmp_path: Path, cli_main, monkeypatch) -> None:
    monkeypatch.delenv("ROUTER_TEST_MISSING", raising=False)
    entry = {"name": "pool", "deployments": [{"model": "openai/a", "api_key_env": "ROUTER_TEST_MISSING"}]}
    rc, _, err = cli_main(["--config", str(router_config(tmp_path, entry)), "--run-id", "k"])
    assert rc == 2
    assert "candidates[0].deployments[0].api_key_env" in err and "ROUTER_TEST_MISSING" in err
    assert "Traceback" not in err


# --------------------------------------------------------------------------------------------------
# A run over three servers, one of which fails


def test_failing_deployment_is_cooled_down_and_trace_names_the_server(tmp_path: Path, cli_main) -> None:
    servers = [FakeOpenAIServer().start() for _ in range(3)]
    try:
        servers[2].add_rule("fake-model", 500)  # every call to the third deployment fails
        entry = {
            "name": "pool",
            "deployments": [deployment(s) for s in servers],
            "router": {"strategy": "simple-shuffle", "allowed_fails": 1, "cooldown_s": 60},
        }
        cfg = router_config(tmp_path, entry, n=60)
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "r1"])
        assert rc == 0, err
        out = tmp_path / "outputs" / "r1"
        responses = read_jsonl(out / "responses.jsonl")
        assert len(responses) == 60 and all(r["status"] == "ok" for r in responses)
        assert {r["model"] for r in responses} == {"router/pool"}  # rows name the logical model
        # Cooled down after its failures: without it a third of 60+ calls would reach the failing server; with it,
        # at most the calls already in flight (concurrency 4) when its allowed failures were used up.
        assert 1 <= servers[2].count() <= 1 + 4 + 1
        assert servers[0].count(status=200) + servers[1].count(status=200) == 60
        trace = read_jsonl(out / "trace.jsonl")
        served = collections.Counter(t["deployment"] for t in trace if t["status"] == "ok")
        assert served == {
            f"openai/fake-model@{servers[0].base_url}": servers[0].count(status=200),
            f"openai/fake-model@{servers[1].base_url}": servers[1].count(status=200),
        }
        failed = [t for t in trace if t["status"] == "error"]
        assert failed and {t["deployment"] for t in failed} == {f"openai/fake-model@{servers[2].base_url}"}
        assert all(t["status_code"] == 500 for t in failed)
        for f in out.rglob("*"):  # the key the Router holds never reaches an artifact or the log
            assert not f.is_file() or FAKE_KEY not in f.read_text(encoding="utf-8", errors="replace"), f

        # A warm rerun: every reply comes from the cache, whichever deployment gave it.
        before = [s.count() for s in servers]
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "r2"])
        assert rc == 0, err
        assert [s.count() for s in servers] == before
        rerun = read_jsonl(tmp_path / "outputs" / "r2" / "responses.jsonl")
        assert [r["text"] for r in rerun] == [r["text"] for r in responses]
    finally:
        for s in servers:
            s.stop()


def test_fallback_to_another_entry_when_every_deployment_fails(tmp_path: Path, cli_main) -> None:
    with FakeOpenAIServer() as bad, FakeOpenAIServer() as good:
        bad.add_rule("fake-model", 500)
        entry = {
            "name": "pool",
            "deployments": [deployment(bad)],
            "router": {"fallbacks": ["backup"], "allowed_fails": 100},
        }
        backup = model_entry("backup", "openai/backup-model", good)
        data = write_jsonl(tmp_path / "qa.jsonl", qa_rows(3))
        cfg = write(
            tmp_path,
            {
                "candidates": [entry, backup],
                "datasets": [{"path": str(data)}],
                "run": {"output_dir": str(tmp_path / "outputs"), "progress": False},
                "cache": {"dir": str(tmp_path / "cache")},
                "retry": {"max_attempts": 1},
            },
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "f1"])
        assert rc == 0, err
        responses = read_jsonl(tmp_path / "outputs" / "f1" / "responses.jsonl")
        pool = [r for r in responses if r["candidate"] == "pool"]
        assert len(pool) == 3 and all(r["status"] == "ok" for r in pool)
        assert bad.count() >= 3  # each was tried on the pool first, within one attempt of ours
        trace = read_jsonl(tmp_path / "outputs" / "f1" / "trace.jsonl")
        assert {t["deployment"] for t in trace if t["model"] == "router/pool" and t["status"] == "ok"} == {
            f"openai/backup-model@{good.base_url}"
        }


def test_no_deployment_left_is_a_retryable_429_not_a_crash(tmp_path: Path, cli_main) -> None:
    with FakeOpenAIServer() as bad:
        bad.add_rule("fake-model", 500)
        entry = {"name": "pool", "deployments": [deployment(bad)], "router": {"allowed_fails": 0, "cooldown_s": 60}}
        cfg = router_config(tmp_path, entry, n=1, retry={"initial_wait_s": 0.05, "max_wait_s": 0.2, "max_attempts": 3})
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "n1"])
        assert bad.count() == 1  # cooled down after its first failure: the Router sends nothing more
    assert "Traceback" not in err
    trace = read_jsonl(tmp_path / "outputs" / "n1" / "trace.jsonl")
    assert [(t["attempt"], t["status_code"]) for t in trace] == [(1, 500), (2, 429), (3, 429)]
    assert "no deployment available" in trace[1]["error"]
    [row] = read_jsonl(tmp_path / "outputs" / "n1" / "responses.jsonl")
    assert row["status"] == "error"


def test_budget_needs_a_price_for_a_router_entry(tmp_path: Path, cli_main) -> None:
    entry = {"name": "gpt-4o-mini", "deployments": [{"model": "openai/gpt-4o-mini", "api_base": "http://h/v1"}]}
    cfg = router_config(tmp_path, entry, run={"output_dir": str(tmp_path / "out"), "budget_usd": 1.0})
    rc, _, err = cli_main(["--config", str(cfg), "--validate"])
    assert rc == 2  # its name is no price: router/gpt-4o-mini is not looked up as gpt-4o-mini
    assert "candidates[0].deployments" in err and "router/gpt-4o-mini" in err and "price" in err
    entry["price"] = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    rc, out, err = cli_main(["--config", str(router_config(tmp_path, entry, run={"budget_usd": 1.0})), "--validate"])
    assert rc == 0, err
