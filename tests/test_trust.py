"""Trust nothing that is read, leak nothing that is written (issue 28, rows 2-12 and 14-16; rows 1 and 13, the cache, are
the codec's). Each test names its row. Bad config and data that are refused before any call are in the corpus of
tests/test_bad_input.py (rows 5-10, 15); what needs a run, a rerun or a look at the run folder is here.

The secret tests scan the raw bytes of every file of the run folder, and the console, for each credential; the fake
server's request log (or the Hub stand-in's commit) is the positive control that the credential was really there.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any, get_type_hints

import msgspec
import pytest
import yaml
from conftest import read_jsonl, run_cli, subprocess_env, write_jsonl
from fakeserver import FakeOpenAIServer
from hubserver import HubStandIn

from rubricrun import config as config_module
from rubricrun.config import load_config
from rubricrun.errors import InputError
from rubricrun.providers import trace as trace_module
from rubricrun.providers.trace import Tracer

KEY_ENV = "RUBRICRUN_TRUST_KEY"


@pytest.fixture
def fake() -> Any:
    srv = FakeOpenAIServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(autouse=True)
def _no_secrets_left() -> Any:
    yield
    from rubricrun.providers import redact

    redact.use([])  # what a test registered does not mask the next test's text


def entry(name: str, model: str, url: str | None, **extra: Any) -> dict[str, Any]:
    e: dict[str, Any] = {"name": name, "model": model, "timeout_s": 10}
    if url is not None:
        e["api_base"] = url
    e.update(extra)
    return e


def write_cfg(tmp: Path, *, candidates: list[dict[str, Any]], n: int = 3, **over: Any) -> Path:
    data = write_jsonl(tmp / "data.jsonl", [{"id": f"e{i}", "prompt": f"Question {i}?"} for i in range(n)])
    cfg: dict[str, Any] = {
        "candidates": candidates,
        "datasets": [{"path": str(data)}],
        "run": {"output_dir": str(tmp / "outputs"), "progress": False, "concurrency": 2, "bootstrap_samples": 20},
        "cache": {"dir": str(tmp / "cache")},
        "retry": {"initial_wait_s": 0.01, "max_wait_s": 0.1, "max_attempts": 2},
    }
    cfg.update(over)
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def holding(root: Path, needle: str | re.Pattern[bytes]) -> list[str]:
    """Files under root whose raw bytes hold the needle (a string, or a bytes pattern)."""
    found = []
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            hit = needle.search(data) if isinstance(needle, re.Pattern) else needle.encode() in data
            if hit:
                found.append(str(p.relative_to(root)))
    return found


# --------------------------------------------------------------------------------------------------
# Row 2: every key the process can send is redacted, the provider's own variable and short keys included


def test_provider_variable_key_echoed_in_an_error_is_never_written(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    key = "sk-provider-OWNKEY-77a"
    fake.add_rule("cand-echo", 401, message=f"Incorrect API key provided: {key}.")
    # No api_key_env: LiteLLM reads OPENAI_API_KEY by itself for an openai/ model.
    cfg = write_cfg(tmp_path, candidates=[entry("a", "openai/cand-echo", fake.base_url)])
    p = run_cli(["--config", str(cfg), "--run-id", "r2"], full_env=subprocess_env(tmp_path, {"OPENAI_API_KEY": key}))
    assert p.returncode == 1, p.stderr  # every candidate call failed: the run says so
    assert {r.headers.get("Authorization") for r in fake.requests} == {f"Bearer {key}"}  # the key was sent
    run_dir = tmp_path / "outputs" / "r2"
    assert "Incorrect API key provided: ***" in (run_dir / "responses.jsonl").read_text()
    assert holding(run_dir, key) == [] and holding(run_dir, "OWNKEY") == []
    assert "OWNKEY" not in p.stdout + p.stderr


def test_a_short_key_is_redacted_where_it_stands_alone(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    short = "QzX9"  # shorter than the 6 characters the old redaction needed
    fake.add_rule("cand-a", 401, message=f"Invalid key: {short}. Request id {short}abc-1, see Bearer {short}")
    cfg = write_cfg(tmp_path, candidates=[entry("a", "openai/cand-a", fake.base_url, api_key_env=KEY_ENV)])
    p = run_cli(["--config", str(cfg), "--run-id", "r2s"], full_env=subprocess_env(tmp_path, {KEY_ENV: short}))
    assert p.returncode == 1, p.stderr
    assert {r.headers.get("Authorization") for r in fake.requests} == {f"Bearer {short}"}
    run_dir = tmp_path / "outputs" / "r2s"
    alone = re.compile(rb"(?<![A-Za-z0-9_-])" + short.encode() + rb"(?![A-Za-z0-9_-])")
    assert holding(run_dir, alone) == []
    assert not alone.search((p.stdout + p.stderr).encode())
    # The text the key is part of is left as it is: only the key itself is masked.
    errors = {r["error"] for r in read_jsonl(run_dir / "responses.jsonl")}
    assert any(f"Invalid key: ***. Request id {short}abc-1, see Bearer ***" in e for e in errors), errors


def test_redact_masks_short_secrets_as_words_and_long_ones_anywhere() -> None:
    from rubricrun.providers import redact

    redact.use([("abc", "$SHORT"), ("sk-a-long-secret-value", "$LONG")])
    assert redact.redact("key abc, abcd, xabc, abc-d, (abc).") == "key ***, abcd, xabc, abc-d, (***)."
    assert redact.redact("Bearer sk-a-long-secret-value9") == "Bearer ***9"
    assert redact.redact("http://al:pw@h/v1?api-key=Q1&max_tokens=5") == "http://***@h/v1?api-key=***&max_tokens=5"
    assert redact.found_in(b"token=abc;") == "$SHORT" and redact.found_in(b"abcdef") is None


def test_litellm_provider_variables_are_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """For every provider LiteLLM 1.106.2's validate_environment names keys for, the variables it asks for are among
    those redact.provider_variables treats as that provider's own (so they are redacted at any length)."""
    import litellm

    from rubricrun.providers import redact

    names = {"openai", "anthropic", "cohere", "openrouter", "gemini", "groq", "mistral", "deepseek", "xai"}
    names |= {"together_ai", "fireworks_ai", "huggingface", "bedrock", "perplexity", "azure", "cerebras"}
    for var in list(os.environ):
        if redact.credential_name(var):
            monkeypatch.delenv(var)
    for provider in sorted(names):
        missing = litellm.validate_environment(model=f"{provider}/some-model")["missing_keys"]
        secret = [n for n in missing if redact.credential_name(n)]
        assert secret, provider
        env = dict.fromkeys(secret, "x")
        assert redact.provider_variables(provider, env) == sorted(secret), provider


# --------------------------------------------------------------------------------------------------
# Row 3: credentials in a URL reach no file, no console and no Hub upload


def test_credentials_in_api_base_are_redacted_everywhere_and_pushed_redacted(
    tmp_path: Path, fake: FakeOpenAIServer
) -> None:
    password, query_key = "pa55w0rdZZ", "QUERYKEY123"
    with_user = fake.base_url.replace("http://", "http://alice:" + password + "@")
    cands = [
        entry("a", "openai/cand-a", with_user, api_key_env=KEY_ENV),
        entry("b", "openai/cand-b", fake.base_url + f"?api-key={query_key}", api_key_env=KEY_ENV),  # a 404 echoes it
    ]
    cfg = write_cfg(tmp_path, candidates=cands, export={"formats": ["sft"], "sft_threshold": 0.0})
    hub = HubStandIn().start()
    try:
        env = subprocess_env(tmp_path, {KEY_ENV: "sk-trust-key-0123456789", "HF_ENDPOINT": hub.url})
        env["HF_TOKEN"] = "hf_trust_token_0123456789"
        p = run_cli(["--config", str(cfg), "--run-id", "r3", "--push-to-hub", "me/ds"], full_env=env)
    finally:
        hub.stop()
    assert p.returncode == 0, p.stderr
    assert fake.count(model="cand-a", status=200) == 3  # the URL with its user worked
    run_dir = tmp_path / "outputs" / "r3"
    assert "key=***" in (run_dir / "responses.jsonl").read_text()  # b's calls failed with the URL in the error
    for secret in (password, query_key):
        assert holding(run_dir, secret) == [], secret
        assert secret not in p.stdout + p.stderr
    written = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert written["candidates"][0]["api_base"] == fake.base_url.replace("http://", "http://***@")
    # The upload happened (the positive control), and its config.yaml is the redacted one.
    (commit,) = hub.commits
    uploaded = commit["files"]
    assert set(uploaded) >= {"config.yaml", "data/sft.jsonl", "README.md"}
    for data in uploaded.values():
        raw = data if isinstance(data, bytes) else str(data).encode()
        assert password.encode() not in raw and query_key.encode() not in raw


def test_batches_json_names_the_server_without_its_password(tmp_path: Path, cli_main: Any) -> None:
    from fakebatch import FakeBatchServer

    password = "b4tchPASSWORD"
    with FakeBatchServer() as server:
        url = server.base_url.replace("http://", f"http://bob:{password}@")
        cands = [entry("a", "openai/cand-a", url, api_key_env="RUBRICRUN_TEST_KEY", batch=True)]
        cfg = write_cfg(tmp_path, candidates=cands, batch={"poll_interval_s": 0.02})
        rc, out, err = cli_main(["--config", str(cfg), "--run-id", "b"])
        assert rc == 0, err
        assert server.submitted  # the jobs went to the server: the URL the config gives was used
    run_dir = tmp_path / "outputs" / "b"
    jobs = json.loads((run_dir / "batches.json").read_text())["jobs"]
    assert jobs and all(j["api_base"].startswith("http://***@") for j in jobs)
    assert holding(run_dir, password) == [] and password not in out + err


# --------------------------------------------------------------------------------------------------
# Row 4: a Router entry's cache key holds its deployments' models and params, not their servers


def test_router_cache_key_follows_deployment_model_and_params(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    def router(*deployments: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"name": "r", "deployments": list(deployments), "timeout_s": 10}]

    def dep(model: str, url: str, **params: Any) -> dict[str, Any]:
        return {"model": model, "api_base": url, "api_key_env": "RUBRICRUN_TEST_KEY", "params": params}

    url = fake.base_url
    other_server = url.replace("127.0.0.1", "localhost")  # the same server under another name: a new deployment
    steps = [
        ("first run", router(dep("openai/cand-a", url)), 3),
        ("model changed", router(dep("openai/cand-zzz", url)), 3),
        ("params changed", router(dep("openai/cand-zzz", url, temperature=0.9)), 3),
        ("a server added", router(dep("openai/cand-zzz", url, temperature=0.9), dep("openai/cand-zzz", other_server, temperature=0.9)), 0),
        ("back to the first", router(dep("openai/cand-a", other_server)), 0),
    ]  # fmt: skip
    for what, cands, calls in steps:
        before = fake.count()
        cfg = write_cfg(tmp_path, candidates=cands)
        p = run_cli(["--config", str(cfg), "--run-id", "r4"], full_env=subprocess_env(tmp_path, {}))
        assert p.returncode == 0, (what, p.stderr)
        assert fake.count() - before == calls, what


# --------------------------------------------------------------------------------------------------
# Row 5 and row 9: every number of the config is checked, finite and in range (the CLI cases are in the corpus)


def _numeric_fields() -> list[tuple[type, str]]:
    out = []
    for cls in (c for c in vars(config_module).values() if isinstance(c, type) and issubclass(c, msgspec.Struct)):
        hints = get_type_hints(cls)
        for f in msgspec.structs.fields(cls):
            text = str(hints[f.name])
            if f.name not in ("path", "lines") and re.search(r"\b(int|float)\b", text) and "dict" not in text:
                out.append((cls, f.name))
    return out


def test_every_number_of_the_config_has_a_range() -> None:
    fields = _numeric_fields()
    assert len(fields) > 40
    ranged = {(c, n) for c, n in fields if "Meta(" in str(get_type_hints(c, include_extras=True)[n])}
    missing = [f"{c.__name__}.{n}" for c, n in fields if (c, n) not in ranged]
    assert missing == ["CriterionConfig.weight"]  # any finite number: a negative weight is a penalty


NUMBERS = [
    ("run", "bootstrap_samples", 0),
    ("run", "bootstrap_samples", 10**9),
    ("run", "concurrency", 10**12),
    ("run", "judge_parallel_workers", 0),
    ("run", "seed", -1),
    ("run", "judge_rate_limit_rpm", math.nan),
    ("run", "budget_usd", math.nan),
    ("run", "budget_usd", -1),
    ("run", "progress_interval_s", math.inf),
    ("run", "max_examples", 0),
    ("run", "max_examples", -3),
    ("retry", "initial_wait_s", -1),
    ("retry", "max_wait_s", math.nan),
    ("judging", "pass_threshold", math.nan),
    ("judging", "pass_threshold", 5),
    ("judging", "max_explanation_chars", -1),
    ("batch", "poll_interval_s", -0.5),
    ("candidates[0]", "rpm", math.nan),
    ("candidates[0]", "tpm", math.inf),
    ("candidates[0]", "timeout_s", 0),
    ("candidates[0]", "timeout_s", math.nan),
    ("candidates[0]", "timeout_s", 10**400),
    ("candidates[0].price", "input_per_mtok", -1),
    ("candidates[0].price", "batch_output_per_mtok", math.nan),
    ("export", "sft_threshold", 1.5),
    ("export", "min_margin", -0.1),
    ("synthesize", "num_subtopics", 10**6),
    ("synthesize", "over_generation_buffer", math.inf),
    ("datasets[0]", "limit", 0),
]


@pytest.mark.parametrize(("section", "name", "value"), NUMBERS, ids=[f"{s}.{n}={str(v)[:12]}" for s, n, v in NUMBERS])
def test_a_number_out_of_range_names_its_file_line_and_key(tmp_path: Path, section: str, name: str, value: Any) -> None:
    cfg: dict[str, Any] = {
        "candidates": [{"name": "a", "model": "openai/x", "price": {}}],
        "datasets": [{"path": "d.jsonl"}],
        "export": {},
        "synthesize": {"main_topic": "t"},
    }
    if section.startswith("candidates[0]"):
        target = cfg["candidates"][0] if section == "candidates[0]" else cfg["candidates"][0]["price"]
    elif section == "datasets[0]":
        target = cfg["datasets"][0]
    else:
        target = cfg.setdefault(section, {})
    target[name] = value
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    with pytest.raises(InputError) as exc:
        load_config(path)
    key = f"{section}.{name}"
    line = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if ln.strip().startswith(f"{name}:"))
    assert f"{path}:{line}: key '{key}'" in str(exc.value)


def test_weights_that_overflow_or_are_all_zero_are_refused(tmp_path: Path) -> None:
    def refused(rubric: list[dict[str, Any]], models: list[dict[str, Any]] | None = None) -> str:
        cand = {"name": "a", "models": models} if models else {"name": "a", "model": "openai/x"}
        cfg = {"candidates": [cand], "datasets": [{"path": "d.jsonl"}], "judging": {"default_rubric": rubric}}
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
        with pytest.raises(InputError) as exc:
            load_config(tmp_path / "c.yaml")
        return str(exc.value)

    assert "past the largest number" in refused([{"text": "a", "weight": 1e308}, {"text": "b", "weight": 1e308}])
    assert "past the largest number" in refused([{"text": "a", "weight": 1e308}, {"text": "b", "weight": -1e308}])
    assert "every weight is 0" in refused([{"text": "a", "weight": 0}, {"text": "b", "weight": 0.0}])
    assert "finite" in refused([{"text": "a", "weight": math.nan}])
    heavy = [{"model": "openai/x", "weight": 1e308}, {"model": "openai/y", "weight": 1e308}]
    assert "candidates[0].models" in refused([{"text": "a"}], heavy)


# --------------------------------------------------------------------------------------------------
# Row 6: text that is not valid Unicode


def test_a_reply_with_a_lone_surrogate_is_written_as_a_replacement_character(
    tmp_path: Path, fake: FakeOpenAIServer
) -> None:
    choice = {"index": 0, "message": {"role": "assistant", "content": "bad \\ud800 text"}, "finish_reason": "stop"}
    usage = {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    body = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice], "usage": usage}
    raw = json.dumps(body).replace("\\\\ud800", "\\ud800")  # the escape itself, as a server writes it
    for _ in range(3):
        fake.enqueue({"raw": raw})
    cfg = write_cfg(tmp_path, candidates=[entry("a", "openai/cand-a", fake.base_url, api_key_env="RUBRICRUN_TEST_KEY")])
    p = run_cli(["--config", str(cfg), "--run-id", "r6"], full_env=subprocess_env(tmp_path, {}))
    assert p.returncode == 0, p.stderr
    texts = {r["text"] for r in read_jsonl(tmp_path / "outputs" / "r6" / "responses.jsonl")}
    assert texts == {"bad \ufffd text"}


def test_a_judge_reply_whose_json_writes_a_lone_surrogate_is_valid_text(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    for _ in range(3):  # the reply's text holds the JSON escape itself: the judge's JSON decodes it
        fake.enqueue('{"explanation": "odd \\ud800 char", "criteria_met": true}', model="judge-1")
    cand = entry("a", "openai/cand-a", fake.base_url, api_key_env="RUBRICRUN_TEST_KEY")
    judges = [entry("j", "openai/judge-1", fake.base_url, api_key_env="RUBRICRUN_TEST_KEY")]
    rubric = {"default_rubric": [{"text": "Good."}]}
    cfg = write_cfg(tmp_path, candidates=[cand], judges=judges, judging=rubric)
    p = run_cli(["--config", str(cfg), "--run-id", "r6j"], full_env=subprocess_env(tmp_path, {}))
    assert p.returncode == 0, p.stderr
    rows = read_jsonl(tmp_path / "outputs" / "r6j" / "judgments.jsonl")
    assert {(r["verdict"], r["explanation"]) for r in rows} == {("met", "odd \ufffd char")}


def test_synthesized_prompts_with_a_lone_surrogate_are_valid_text() -> None:
    from rubricrun.data.synth import parse_json_list

    assert parse_json_list('["a \\ud800 b", "fine"]') == ["a \ufffd b", "fine"]


# --------------------------------------------------------------------------------------------------
# Row 11: run ids


@pytest.mark.parametrize("run_id", ["a\nb", "   ", "<x>", "$(id)", "x" * 300, "-rf", "é" * 100, "a b", "a\x1b[31m"])
def test_run_ids_are_plain_bounded_folder_names(run_id: str, tmp_path: Path, cli_main: Any) -> None:
    rc, out, err = cli_main(["--config", str(tmp_path / "not-read.yaml"), f"--run-id={run_id}"])
    assert rc == 2, err
    assert err.count("\n") == 1 and "--run-id" in err and "\x1b" not in err
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("run_id", ["20261126-101500", "exp_1.b-2", "résumé", "x" * 128])
def test_a_plain_run_id_is_accepted(run_id: str, tmp_path: Path, cli_main: Any) -> None:
    rc, _, err = cli_main(["--config", str(tmp_path / "not-here.yaml"), f"--run-id={run_id}"])
    assert rc == 2 and "config file not found" in err  # the next check


# --------------------------------------------------------------------------------------------------
# Row 12: trace.jsonl


def test_a_torn_last_line_is_cut_before_the_next_run_appends(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    cfg = write_cfg(tmp_path, candidates=[entry("a", "openai/cand-a", fake.base_url, api_key_env="RUBRICRUN_TEST_KEY")])
    args = ["--config", str(cfg), "--run-id", "t"]
    env = subprocess_env(tmp_path, {})
    assert run_cli(args, full_env=env).returncode == 0
    trace = tmp_path / "outputs" / "t" / "trace.jsonl"
    whole = trace.read_bytes()
    with open(trace, "ab") as fh:
        fh.write(b'{"ts": 1, "role": "cand')  # what kill -9 in the middle of a write leaves
    assert run_cli(args, full_env=env).returncode == 0
    lines = trace.read_text().splitlines()
    assert [json.loads(line)["key"] for line in lines]  # every line parses
    assert trace.read_bytes().startswith(whole)  # what was whole before stays
    assert len({json.loads(line)["invocation"] for line in lines}) == 2


def test_the_trace_rotates_at_its_size_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_module, "MAX_BYTES", 2000, raising=False)
    path = tmp_path / "trace.jsonl"
    for invocation in range(6):
        tracer = Tracer(path, invocation=str(invocation))
        for i in range(12):
            tracer.emit(
                role="candidate", model="m", key=f"k{i}", cache_hit=False, attempt=0, latency_ms=1.0, status="ok"
            )
            tracer.flush()  # a write a line: the bound is looked at after each write
        tracer.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["trace.1.jsonl", "trace.2.jsonl", "trace.3.jsonl", "trace.jsonl"]
    for p in tmp_path.iterdir():
        assert p.stat().st_size < 2000 + 400  # the write that passes the bound is the file's last
        assert all(json.loads(line) for line in p.read_text().splitlines())
    newest = [
        json.loads(line)["invocation"]
        for name in ("trace.1.jsonl", "trace.jsonl")
        for line in (tmp_path / name).read_text().splitlines()
    ]
    assert newest[-1] == "5"  # the latest event is in trace.jsonl, or in trace.1.jsonl when its write filled it


def test_a_run_rotates_its_trace(
    tmp_path: Path, fake: FakeOpenAIServer, cli_main: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace_module, "MAX_BYTES", 1500, raising=False)
    cfg = write_cfg(tmp_path, candidates=[entry("a", "openai/cand-a", fake.base_url, api_key_env="RUBRICRUN_TEST_KEY")])
    for _ in range(4):
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "t"])
        assert rc == 0, err
    run_dir = tmp_path / "outputs" / "t"
    assert (run_dir / "trace.1.jsonl").exists()
    assert sum(1 for p in run_dir.glob("trace*.jsonl")) <= 4  # trace.jsonl and 3 older ones


# --------------------------------------------------------------------------------------------------
# Row 14: bounded YAML and a bounded --validate


ALIAS_BOMB = "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['x'] * 9)}]\n"
    for p, c in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)


def test_an_alias_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)  # 9 ** 9 values once expanded
    p = run_cli(["--config", str(path), "--validate"], timeout=30, full_env=subprocess_env(tmp_path, {}))
    assert p.returncode == 2
    assert p.stderr.startswith(f"error: {path}: the config expands to more than")


def test_a_huge_or_self_containing_config_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (5 << 20) + "\n")  # past the 4 MiB bound
    with pytest.raises(InputError, match="larger than"):
        load_config(big)
    loop = tmp_path / "loop.yaml"
    loop.write_text("a: &a [1, *a]\n")
    with pytest.raises(InputError, match="expands to more than"):
        load_config(loop)
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(InputError, match="nested too deeply|expands"):
        load_config(deep)


def test_validate_counts_ten_million_samples_by_arithmetic(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    cands = [entry("a", "openai/cand-a", fake.base_url, api_key_env="RUBRICRUN_TEST_KEY", samples_per_prompt=10**7)]
    judges = [entry("j", "openai/judge-1", fake.base_url, api_key_env="RUBRICRUN_TEST_KEY")]
    cfg = write_cfg(tmp_path, candidates=cands, judges=judges, judging={"default_rubric": [{"text": "Good."}]})
    p = run_cli(["--config", str(cfg), "--validate"], timeout=120, full_env=subprocess_env(tmp_path, {}))
    assert p.returncode == 0, p.stderr
    counts = json.loads(p.stdout)
    assert counts["candidate_calls"] == 3 * 10**7 and counts["judge_calls"] == 3 * 10**7
    assert counts["judge_calls_at_most"] == 2 * 3 * 10**7
    assert fake.count() == 0


def test_arithmetic_counts_equal_counting_one_by_one(
    tmp_path: Path, fake: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rubricrun.engine import estimate
    from rubricrun.engine.estimate import count_calls

    price = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    cands = [
        entry("a", "openai/cand-a", fake.base_url, samples_per_prompt=7, price=price, params={"max_tokens": 20}),
        entry("b", "openai/cand-b", fake.base_url, samples_per_prompt=2, price=price),
    ]
    judges = [entry(f"j{i}", f"openai/judge-{i}", fake.base_url, price=price) for i in (1, 2, 3)]
    rubric = [{"text": "Good."}, {"text": "Short.", "weight": -1}]
    over = {"judges": judges, "judging": {"default_rubric": rubric, "judges_per_criterion": 2, "on_tie": "judge"}}
    cfg = load_config(write_cfg(tmp_path, candidates=cands, **over))
    exact = count_calls(cfg, None)
    monkeypatch.setattr(estimate, "EXACT_SAMPLES", 2)
    by_arithmetic = count_calls(cfg, None)
    assert by_arithmetic.pop("cost_upper_bound_usd") == pytest.approx(exact.pop("cost_upper_bound_usd"))
    assert by_arithmetic == exact
    assert exact["candidate_calls"] == 3 * 9


# --------------------------------------------------------------------------------------------------
# Row 16: the report bounds every field; no raw control character reaches the console; the lock files are 0644


def test_a_huge_row_makes_a_bounded_page(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    big = "B" * (5 * 2**20)
    data = write_jsonl(tmp_path / "big.jsonl", [{"id": "x1", "prompt": big, "rubric": [{"text": "C" * 2**20}]}])
    judges = [entry("j", "openai/judge-1", fake.base_url, api_key_env="RUBRICRUN_TEST_KEY")]
    cand = entry("a", "openai/cand-a", fake.base_url, api_key_env="RUBRICRUN_TEST_KEY")
    cfg = write_cfg(tmp_path, candidates=[cand], judges=judges, datasets=[{"path": str(data)}])
    p = run_cli(["--config", str(cfg), "--run-id", "r16"], full_env=subprocess_env(tmp_path, {}))
    assert p.returncode == 0, p.stderr
    page = (tmp_path / "outputs" / "r16" / "report.html").read_text()
    assert len(page) < 400_000  # a page of the usual size with a few fields of 20,000 characters
    assert f"{5 * 2**20 - 20_000:,} more characters: the full text is in examples.jsonl" in page
    assert big in (tmp_path / "outputs" / "r16" / "examples.jsonl").read_text()  # the file keeps it whole


def test_control_characters_never_reach_the_console(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    # A name from the config is refused (one line, escaped); a row id from the data is logged escaped.
    cfg = write_cfg(tmp_path, candidates=[entry("\x1b[31mRED\x1b[0m", "openai/cand-a", fake.base_url)])
    p = run_cli(["--config", str(cfg), "--validate"], full_env=subprocess_env(tmp_path, {}))
    assert p.returncode == 2 and "\x1b" not in p.stderr and "\\x1b[31mRED" in p.stderr
    evil = {"id": "\x1b]0;owned\x07\u202eevil", "prompt": "Evil?"}
    rows = [{"id": "ok", "prompt": "Fine?"}, evil, evil]  # the second one is skipped: "duplicate id '<its id>'"
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    cand = entry("a", "openai/cand-a", fake.base_url, api_key_env="RUBRICRUN_TEST_KEY")
    run = {"output_dir": str(tmp_path / "outputs"), "progress": False, "on_bad_row": "skip"}
    cfg = write_cfg(tmp_path, candidates=[cand], datasets=[{"path": str(data)}], run=run)
    p = run_cli(["--config", str(cfg), "--run-id", "c"], full_env=subprocess_env(tmp_path, {}))
    assert p.returncode == 0, p.stderr
    assert "skipped bad row" in p.stderr
    for ch in ("\x1b", "\x07", "\u202e"):
        assert ch not in p.stdout + p.stderr
        assert ch not in (tmp_path / "outputs" / "c" / "run.log").read_text()


def test_lock_files_are_not_executable(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    cfg = write_cfg(tmp_path, candidates=[entry("a", "openai/cand-a", fake.base_url, api_key_env="RUBRICRUN_TEST_KEY")])
    p = run_cli(["--config", str(cfg), "--run-id", "l"], full_env=subprocess_env(tmp_path, {}))
    assert p.returncode == 0, p.stderr
    locks = sorted((tmp_path / "outputs" / "l").glob(".*lock"))
    assert {x.name for x in locks} >= {".lock", ".__run.lock", ".__run.log.jsonl.lock"}
    for lock in locks:
        assert stat.S_IMODE(lock.stat().st_mode) & 0o111 == 0, lock.name


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
