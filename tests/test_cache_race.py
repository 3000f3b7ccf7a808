"""The cache layer's one-call-per-key promise when a miss and another thread's store interleave."""

from __future__ import annotations

import threading
from pathlib import Path

from conftest import KEY_ENV
from fakeserver import FakeOpenAIServer

from rubricrun.providers.cache import CachingProvider, ResponseCache
from rubricrun.providers.litellm import LiteLLMProvider
from rubricrun.providers.trace import Tracer
from rubricrun.types import LLMRequest


class _MissThenWait(ResponseCache):
    """The real disk cache, except that thread "late" reads its miss, then waits until the other thread has paid
    for the call and stored it before going on: the interleaving that made a run pay twice for one key."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.late_missed = threading.Event()
        self.early_done = threading.Event()
        self._held = False

    def get(self, key: str):  # type: ignore[no-untyped-def]
        row = super().get(key)
        if threading.current_thread().name == "late" and not self._held:
            self._held = True
            self.late_missed.set()
            self.early_done.wait(30)
        return row


def test_a_miss_overtaken_by_another_threads_store_reads_the_stored_reply(
    tmp_path: Path, server: FakeOpenAIServer, monkeypatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    cache = _MissThenWait(tmp_path / "cache")
    stack = CachingProvider(LiteLLMProvider(), cache, Tracer(tmp_path / "trace.jsonl"))
    request = LLMRequest(
        model="openai/m", messages=({"role": "user", "content": "hi"},), api_base=server.base_url, api_key_env=KEY_ENV
    )
    replies: dict[str, object] = {}

    def ask(name: str) -> None:
        replies[name] = stack.generate(request)

    late = threading.Thread(target=ask, args=("late",), name="late")
    late.start()
    assert cache.late_missed.wait(30)
    ask("early")  # pays for the call and stores it while "late" sits between its miss and taking over
    cache.early_done.set()
    late.join(30)
    assert server.count(status=200) == 1  # paid once, not twice
    assert replies["late"].text == replies["early"].text and replies["late"].cache_hit
    cache.close()
