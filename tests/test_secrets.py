"""API keys never land on disk or in the console.

A full run with a distinctive key in the env var the config names (api_key_env), with faults so errors are logged too
(401 on one candidate, random 500s retried), then the raw bytes of every file the run wrote are scanned: the run
folder (run.log, trace.jsonl, config.yaml, summary.json, every artifact), the cache directory (the SQLite db and
anything beside it), HOME (LiteLLM must not write the key anywhere either), and the process's stdout and stderr.
The server's own request log is the positive control: the key really was sent in the Authorization header.

Redaction of the run folder's config.yaml (providers/redact.py: redacted_config) covers: any string value whose mapping
key contains (case-insensitive, "-" read as "_") "api_key", "apikey", "token", "secret", "password", "authorization"
or "cookie", at any depth (params, extra_headers, nested lists), except keys ending in "_env" (those hold env var
NAMES, kept as is). Besides, every secret the config's calls can send (secrets_of: the keys its api_key_env variables and its providers'
own variables hold, credentials written in an api_base, the values under a secret-looking params key) is *** wherever
it appears, and so are a URL's user and password and key-like query parameters. `params.api_key` is refused (the key
belongs in the variable api_key_env names). Provider error messages that echo a key have it replaced by *** before
they are recorded. tests/test_trust.py has the rest of issue 28's secret tests (provider variables, short keys, URLs,
the Hub upload, batches.json).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli, subprocess_env
from fakeserver import FakeOpenAIServer

KEY_ENV = "RUBRICRUN_SECRET_TEST_KEY"
SECRET = "sk-test-SECRET-9f8e7d"
FRAGMENTS = (SECRET, "SECRET-9f8e7d")  # the whole key, and its distinctive tail (catches a half-masked key)
INLINE = "sk-inline-SECRET-1a2b3c"


def _env(tmp: Path) -> dict[str, str]:
    return subprocess_env(tmp, {KEY_ENV: SECRET})


def write_config(tmp: Path, url: str, *, cand_params: dict[str, Any] | None = None, n: int = 6) -> Path:
    data = tmp / "data.jsonl"
    rows = [f'{{"id": "s{i}", "prompt": "Secret-free question {i}?"}}' for i in range(n)]
    data.write_text("\n".join(rows) + "\n")

    def model(name: str, **extra: Any) -> dict[str, Any]:
        return {
            "name": name,
            "model": f"openai/{name}",
            "api_base": url,
            "api_key_env": KEY_ENV,
            "timeout_s": 5,
            **extra,
        }

    cfg = {
        "candidates": [model("cand-a", params=cand_params or {}), model("cand-b")],
        "judges": [model("judge-1")],
        "datasets": [{"path": str(data)}],
        "judging": {"default_rubric": [{"text": "Answers the question."}, {"text": "Is short."}]},
        "run": {"output_dir": str(tmp / "outputs"), "progress": False, "concurrency": 4, "bootstrap_samples": 20},
        "cache": {"dir": str(tmp / "cache")},
        "retry": {"initial_wait_s": 0.05, "max_wait_s": 1, "max_attempts": 6},
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def files_containing(root: Path, needles: tuple[str, ...]) -> list[str]:
    """Every file under root whose raw bytes contain any needle (as UTF-8, UTF-16 or JSON-escaped bytes)."""
    hits = []
    encoded = [n.encode() for n in needles] + [n.encode("utf-16-le") for n in needles]
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            if any(e in data for e in encoded):
                hits.append(str(p.relative_to(root)))
    return hits


@pytest.fixture
def fake() -> Any:
    srv = FakeOpenAIServer(p_500=0.2, seed=99).start()
    try:
        yield srv
    finally:
        srv.stop()


def test_key_from_env_never_written(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    # cand-b's key is "refused" with OpenAI's wording, which echoes a masked key (first and last characters).
    fake.add_rule("cand-b", 401, message=f"Incorrect API key provided: {SECRET[:5]}************{SECRET[-4:]}.")
    cfg = write_config(tmp_path, fake.base_url)
    args = ["--config", str(cfg), "--run-id", "sec"]
    outputs = []
    for extra in ([], ["--validate"]):  # a run, then a validation (which reads the cache)
        p = run_cli(args + extra, full_env=_env(tmp_path))
        assert p.returncode == 0, p.stderr
        outputs.append(p)

    # The positive control: the key was really used, and errors really were logged.
    auth = {r.headers.get("Authorization") or r.headers.get("authorization") for r in fake.requests}
    assert auth == {f"Bearer {SECRET}"}
    assert fake.count(status=401) > 0 and fake.count(status=500) > 0
    run_dir = tmp_path / "outputs" / "sec"
    trace = (run_dir / "trace.jsonl").read_text()
    assert "HTTP 401" in trace and "HTTP 500" in trace
    assert "Incorrect API key" in (run_dir / "responses.jsonl").read_text()

    assert files_containing(run_dir, FRAGMENTS) == []
    assert files_containing(tmp_path / "cache", FRAGMENTS) == []
    assert list((tmp_path / "cache").iterdir()), "the cache dir holds files (the scan saw them)"
    assert files_containing(tmp_path, FRAGMENTS) == []  # anything else the run wrote, HOME included
    for p in outputs:
        for stream in (p.stdout, p.stderr):
            assert not any(f in stream for f in FRAGMENTS)


def test_inline_secret_in_params_redacted_in_run_config(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    fake.configure(p_500=0.0)
    params = {
        "temperature": 0.0,
        "extra_headers": {"Authorization": f"Bearer {INLINE}", "X-Trace": "visible-value"},
        "metadata": {"tokens": [INLINE]},  # a list under a secret-looking key
    }
    cfg = write_config(tmp_path, fake.base_url, cand_params=params, n=2)
    p = run_cli(["--config", str(cfg), "--run-id", "inl"], full_env=_env(tmp_path))
    assert p.returncode == 0, p.stderr
    run_dir = tmp_path / "outputs" / "inl"
    written = yaml.safe_load((run_dir / "config.yaml").read_text())
    got = written["candidates"][0]["params"]
    assert got["extra_headers"]["Authorization"] == "***"
    assert got["metadata"]["tokens"] == ["***"]
    assert got["extra_headers"]["X-Trace"] == "visible-value"  # not a secret: kept
    assert got["temperature"] == 0.0
    assert written["candidates"][0]["api_key_env"] == KEY_ENV  # an env var NAME is kept
    # Nowhere else either: not in the run folder, the cache, or the console.
    assert files_containing(run_dir, (INLINE,)) == []
    assert files_containing(tmp_path / "cache", (INLINE,)) == []
    assert INLINE not in p.stdout + p.stderr
    # The inline header really went to the server (the positive control).
    assert any(r.headers.get("Authorization") == f"Bearer {INLINE}" for r in fake.requests)


def test_hyphenated_api_key_headers_redacted(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    fake.configure(p_500=0.0)
    headers = {"x-api-key": INLINE, "api-key": INLINE}
    cfg = write_config(tmp_path, fake.base_url, cand_params={"extra_headers": headers}, n=1)
    p = run_cli(["--config", str(cfg), "--run-id", "hy"], full_env=_env(tmp_path))
    assert p.returncode == 0, p.stderr
    assert files_containing(tmp_path / "outputs" / "hy", (INLINE,)) == []


def test_key_echoed_by_provider_error_is_not_written(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    fake.configure(p_500=0.0)
    fake.add_rule("cand-b", 401, message=f"Invalid proxy server token passed. Received API Key = {SECRET}")
    cfg = write_config(tmp_path, fake.base_url, n=1)
    p = run_cli(["--config", str(cfg), "--run-id", "echo"], full_env=_env(tmp_path))
    assert p.returncode == 0, p.stderr
    assert files_containing(tmp_path / "outputs" / "echo", FRAGMENTS) == []
    assert not any(f in p.stdout + p.stderr for f in FRAGMENTS)
