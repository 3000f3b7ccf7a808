"""Less CPU per call (issue 13, item 4): LiteLLM's work a run does not need is skipped, and nothing a run reads
changes. See benchmarks/RESULTS.md §0c for the profile and the figures."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import KEY_ENV, REPO, subprocess_env
from fakeserver import FakeOpenAIServer

from rubricrun.providers.litellm import LiteLLMProvider, import_litellm
from rubricrun.types import LLMRequest

# Runs in a fresh interpreter, so that no other test's LiteLLM calls have started LiteLLM's logging thread.
_WORKERS = """
import asyncio, json, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from rubricrun.providers.litellm import LiteLLMProvider
from rubricrun.types import LLMRequest

provider = LiteLLMProvider()

def call(i):
    req = LLMRequest(model="openai/gpt-4o-mini", messages=({"role": "user", "content": f"hello {i}"},),
                     api_base=sys.argv[1], api_key_env=sys.argv[2])
    resp = provider.generate(req)
    try:
        has_loop = asyncio.get_event_loop_policy().get_event_loop() is not None
    except RuntimeError:
        has_loop = False
    return resp.cost_usd, has_loop

with ThreadPoolExecutor(4) as pool:
    out = list(pool.map(call, range(8)))
time.sleep(0.5)  # a success handler handed to LiteLLM's logging thread would have started it by now
print(json.dumps({
    "costs": [c for c, _ in out],
    "loops": [h for _, h in out],
    "logging_threads": [t.name for t in threading.enumerate() if t.name.startswith("litellm-logging")],
}))
"""


def test_calls_skip_litellm_success_logging_and_reuse_a_thread_event_loop(tmp_path: Path) -> None:
    with FakeOpenAIServer() as server:
        env = subprocess_env(tmp_path, {"PYTHONPATH": str(REPO / "src")})
        proc = subprocess.run(
            [sys.executable, "-c", _WORKERS, server.base_url, KEY_ENV],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # No LiteLLM callback is registered: the standard logging payload is never built on LiteLLM's logging thread.
    assert out["logging_threads"] == []
    # Each worker thread keeps one event loop for LiteLLM's async timing hook instead of asyncio.run per call.
    assert out["loops"] == [True] * 8
    # What a run reads is unchanged: LiteLLM's own cost of the reply (gpt-4o-mini is in its price map).
    assert all(isinstance(c, float) and c > 0 for c in out["costs"])


def test_a_litellm_callback_someone_registered_still_hears_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    litellm = import_litellm()
    heard: list[str] = []
    done = threading.Event()

    def on_success(kwargs, response, start, end) -> None:  # LiteLLM's custom callback signature
        heard.append(response.choices[0].message.content)
        if len(heard) == 3:
            done.set()

    monkeypatch.setattr(litellm, "success_callback", [on_success])
    provider = LiteLLMProvider()
    with FakeOpenAIServer() as server:
        reqs = [
            LLMRequest(
                model="openai/fake-model",
                messages=({"role": "user", "content": f"callback {i}"},),
                api_base=server.base_url,
                api_key_env=KEY_ENV,
            )
            for i in range(3)
        ]
        with ThreadPoolExecutor(3) as pool:
            texts = [r.text for r in pool.map(provider.generate, reqs)]
        assert done.wait(30), f"the callback heard {len(heard)} of 3 calls"
    assert sorted(heard) == sorted(texts)


_IMPORT = """
import gc, json
from rubricrun.providers.litellm import import_litellm

collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info["generation"]))
import_litellm()
print(json.dumps({"collections": collections, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}))
"""


def test_litellm_is_imported_without_garbage_collections_and_left_frozen(tmp_path: Path) -> None:
    env = subprocess_env(tmp_path, {"PYTHONPATH": str(REPO / "src")})
    proc = subprocess.run([sys.executable, "-c", _IMPORT], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["collections"] == []  # none walked the import's objects while they piled up
    assert out["enabled"] is True  # the collector is back on for the run
    assert out["frozen"] > 100_000  # and never walks LiteLLM's long-lived objects again
