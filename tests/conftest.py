"""Shared fixtures for the rubricrun test suite.

- Every test runs with HOME / XDG_CACHE_HOME pointed at its own tmp folder and RUBRICRUN_TEST_KEY set to a fake key,
  so nothing a test does lands in the repo or the user's home.
- `server`: a started FakeOpenAIServer (tests/fakeserver.py) on 127.0.0.1.
- `make_config(server, **overrides) -> Path`: a YAML config whose cache.dir and run.output_dir live under tmp_path,
  with candidates and judges pointing at the fake server (`write_config` is the same as a plain function); the
  row and entry builders are in tests/factories.py (`model_entry` and `KEY_ENV` are also importable from here).
- `run_cli(args, env=None, timeout=120, full_env=None) -> CliResult` (unpacks as (returncode, stdout, stderr)):
  `python run.py ...` as a subprocess from the repo root; `start_cli(args, logs=tmp_path)` starts one in the
  background (a `Proc` whose output goes to files); `subprocess_env(tmp, overrides)` builds a whole environment.
- `cli_main` fixture: `rubricrun.cli.main(args)` in-process, same return shape (LiteLLM is imported once per session
  instead of once per subprocess, which keeps the integration tests fast).
- `read_jsonl(path)`.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from factories import KEY_ENV, model_entry
from fakeserver import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
SAMPLE_DATASETS = sorted(DATA.glob("*_sample.jsonl"))
FAKE_KEY = "sk-rubricrun-FAKE-test-key-7f3a9c"  # must never appear in any artifact

DELETE = object()  # an override value that removes the key
DEFAULT_RUBRIC = [{"id": "helpful", "text": "The response answers the question.", "weight": 1}]


# --------------------------------------------------------------------------------------------------
# Environment


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point HOME-ish state away from the repo and the user's home, and set the fake API key."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM: no network fetch of the price map
    # The fake server is on 127.0.0.1: make sure no proxy setting routes it elsewhere.
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


# Where a run would land if a test forgot to point it at its tmp folder (cwd is the repo for run.py subprocesses).
_GUARDED = ("outputs", ".cache", "data", "export")


def _repo_snapshot() -> dict[str, tuple[int, int]]:
    out = {}
    for name in _GUARDED:
        root = REPO / name
        for p in root.rglob("*") if root.exists() else ():
            if p.is_file():
                st = p.stat()
                out[str(p.relative_to(REPO))] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture(autouse=True, scope="session")
def _no_writes_into_the_repo() -> Iterator[None]:
    """Every test writes under its own tmp folder: fail the session if outputs/, .cache/, data/ or export/ in the
    repo changed while it ran."""
    before = _repo_snapshot()
    yield
    after = _repo_snapshot()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"tests wrote into the repository: {changed[:10]}"


# --------------------------------------------------------------------------------------------------
# Fake server


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer().start()
    try:
        yield srv
    finally:
        srv.stop()


# --------------------------------------------------------------------------------------------------
# Configs and data


def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Overrides merge into mapping sections (run, cache, retry, judging, ...); lists and scalars replace."""
    out = dict(base)
    for k, v in overrides.items():
        if v is DELETE:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def base_config(tmp_path: Path, server: FakeOpenAIServer | None) -> dict[str, Any]:
    return {
        "candidates": [
            model_entry("alpha", "openai/cand-alpha", server),
            model_entry("beta", "openai/cand-beta", server),
        ],
        "judges": [
            model_entry("j1", "openai/judge-one", server),
            model_entry("j2", "openai/judge-two", server),
        ],
        "datasets": [{"path": str(p)} for p in SAMPLE_DATASETS],
        "run": {
            "output_dir": str(tmp_path / "outputs"),
            "progress": False,
            "concurrency": 4,
            "judge_parallel_workers": 4,
            "bootstrap_samples": 50,
        },
        "cache": {"dir": str(tmp_path / "cache")},
        "retry": {"initial_wait_s": 0.05, "max_wait_s": 2, "max_attempts": 3},
        # The MT-Bench sample has no rubric: without a default one nothing could score it (an error since issue 11).
        "judging": {"default_rubric": DEFAULT_RUBRIC},
    }


def write_config(
    tmp_path: Path, server: FakeOpenAIServer | None, *, filename: str = "config.yaml", **overrides: Any
) -> Path:
    """Write a config (base_config merged with overrides; DELETE removes a key) and return its path."""
    cfg = _merge(base_config(tmp_path, server), overrides)
    path = tmp_path / filename
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., Path]:
    """`make_config(server, **overrides) -> Path` (tmp_path is this test's)."""

    def make(server: FakeOpenAIServer | None, **overrides: Any) -> Path:
        return write_config(tmp_path, server, **overrides)

    return make


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    """Rows are dicts (dumped as JSON) or strings (written verbatim, for malformed lines)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return path


def read_jsonl(path: Path | str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def run_dir(tmp_path: Path, run_id: str) -> Path:
    return tmp_path / "outputs" / run_id


# --------------------------------------------------------------------------------------------------
# Running the CLI


def subprocess_env(tmp: Path, overrides: dict[str, str | None] | None = None) -> dict[str, str]:
    """os.environ for a run.py subprocess, independent of the autouse fixture: no proxies (the fake server is on
    127.0.0.1), LiteLLM's offline cost map, HOME under `tmp`; `overrides` entries set (None removes) variables."""
    (tmp / "home").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env.pop(var, None)
    env.update(
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HOME=str(tmp / "home"),
        XDG_CACHE_HOME=str(tmp / "home" / ".cache"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    for k, v in (overrides or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def cli_env(env: dict[str, str | None] | None = None) -> dict[str, str]:
    full = dict(os.environ)  # already holds the fake key (the autouse fixture set it)
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return full


@dataclass(frozen=True)
class CliResult:
    """What `python run.py ...` did. Unpacks as (returncode, stdout, stderr)."""

    returncode: int
    stdout: str
    stderr: str

    def __iter__(self) -> Iterator[Any]:
        return iter((self.returncode, self.stdout, self.stderr))


def run_cli(
    args: list[str],
    env: dict[str, str | None] | None = None,
    timeout: float = 120,
    *,
    full_env: dict[str, str] | None = None,
) -> CliResult:
    """`python run.py ARGS` from the repo root. `env` entries override (None removes) the current environment;
    `full_env` (e.g. from `subprocess_env`) replaces it instead."""
    proc = subprocess.run(
        [sys.executable, "run.py", *args],
        cwd=REPO,
        env=full_env if full_env is not None else cli_env(env),
        capture_output=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@dataclass
class Proc:
    """A `python run.py` subprocess whose stdout/stderr go to files (no pipe can fill up and block it)."""

    popen: subprocess.Popen[bytes]
    out: Path
    err: Path
    started: float

    def wait(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=10)
            raise AssertionError(f"run.py did not finish within {timeout} s; stderr:\n{self.stderr}") from None

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    @property
    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    @property
    def stdout(self) -> str:
        return self.out.read_text(errors="replace")


_proc_counter = itertools.count()


def start_cli(
    args: list[str],
    *,
    logs: Path,
    env: dict[str, str | None] | None = None,
    full_env: dict[str, str] | None = None,
) -> Proc:
    """`python run.py ARGS` started in the background, its output in files under `logs` (the test's tmp folder)."""
    n = next(_proc_counter)
    logs.mkdir(parents=True, exist_ok=True)
    out, err = logs / f"proc{n}.out", logs / f"proc{n}.err"
    with open(out, "wb") as fo, open(err, "wb") as fe:
        popen = subprocess.Popen(
            [sys.executable, "run.py", *args],
            cwd=REPO,
            env=full_env if full_env is not None else cli_env(env),
            stdout=fo,
            stderr=fe,
        )
    return Proc(popen, out, err, time.time())


@pytest.fixture
def cli_main() -> Iterator[Callable[[list[str]], tuple[int, str, str]]]:
    """`rubricrun.cli.main(args)` in this process: returns (exit code, stdout, stderr).

    Restores what main() changes process-wide: the SIGINT and SIGTERM handlers and the rubricrun log handlers."""
    from rubricrun.cli import main

    old_handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def run(args: list[str]) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(args)
            except SystemExit as exc:  # argparse
                rc = exc.code if isinstance(exc.code, int) else 1
            finally:
                _close_log_handlers()
        return rc, out.getvalue(), err.getvalue()

    try:
        yield run
    finally:
        for s, handler in old_handlers.items():
            signal.signal(s, handler)
        _close_log_handlers()


def _close_log_handlers() -> None:
    root = logging.getLogger("rubricrun")
    for h in list(root.handlers):
        root.removeHandler(h)
        with contextlib.suppress(Exception):
            h.close()
