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


def test_writers_at_once_are_committed_in_groups_each_stored_when_its_set_returns(tmp_path: Path) -> None:
    """Group commit (ResponseCache.set): 48 threads storing at once; each reply is in the database, as another
    connection reads it, by the time its own set returns; a failed commit fails every writer of its group."""
    from concurrent.futures import ThreadPoolExecutor

    from rubricrun.errors import RubricrunError
    from rubricrun.types import LLMResponse

    cache, reader = ResponseCache(tmp_path / "c"), ResponseCache(tmp_path / "c")  # reader: a connection of its own

    def store(i: int) -> bool:
        cache.set(f"k{i}", LLMResponse(text=str(i)))
        got = reader.get(f"k{i}")
        return got is not None and got.text == str(i)

    with ThreadPoolExecutor(48) as pool:
        assert all(pool.map(store, range(600)))

    failed: list[str] = []

    def store_failing(i: int) -> None:
        try:
            cache.set(f"f{i}", LLMResponse(text="lost"))
        except RubricrunError as exc:
            failed.append(str(exc))

    with cache._writing:  # five writers queue behind a commit in progress; theirs, one group, fails
        threads = [threading.Thread(target=store_failing, args=(i,)) for i in range(5)]
        for t in threads:
            t.start()
        while len(cache._pending) < 5:
            time.sleep(0.01)
        cache._write = lambda op: OSError("disk full")  # type: ignore[method-assign]
    for t in threads:
        t.join()
    assert len(failed) == 5 and all("cannot write (disk full)" in f for f in failed)
    assert all(reader.get(f"f{i}") is None for i in range(5))
    cache.close()
    reader.close()
