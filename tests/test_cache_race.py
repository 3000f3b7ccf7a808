"""The cache layer's one-call-per-key promise when two threads ask for one key and the first one's miss is being paid
for."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from conftest import KEY_ENV
from fakeserver import FakeOpenAIServer

from rubricrun.providers.cache import CachingProvider, ResponseCache
from rubricrun.providers.litellm import LiteLLMProvider
from rubricrun.providers.trace import Tracer
from rubricrun.types import LLMRequest


class _MissThenWait(ResponseCache):
    """The real disk cache, except that thread "first" reads its miss, then waits until the other thread has asked
    for the same key before going on to pay: the interleaving that could make a run pay twice for one key."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.first_missed = threading.Event()
        self.second_asked = threading.Event()
        self._held = False

    def get(self, key: str):  # type: ignore[no-untyped-def]
        row = super().get(key)
        if threading.current_thread().name == "first" and not self._held:
            self._held = True
            self.first_missed.set()
            self.second_asked.wait(30)
        return row


def test_a_key_asked_for_while_its_miss_is_being_paid_for_reads_the_stored_reply(
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

    first = threading.Thread(target=ask, args=("first",), name="first")
    first.start()
    assert cache.first_missed.wait(30)
    second = threading.Thread(target=ask, args=("second",), name="second")
    second.start()  # asks while "first" sits between its miss and its call
    time.sleep(0.3)
    assert "second" not in replies  # it waits for the call "first" makes, rather than making its own
    cache.second_asked.set()
    first.join(30)
    second.join(30)
    assert server.count(status=200) == 1  # paid once, not twice
    assert replies["second"].text == replies["first"].text and replies["second"].cache_hit
    cache.close()
