"""The cached rerun's hot path (issue 20): a call the cache answers runs where it is found, never on a pool, and
trace.jsonl goes through one writer thread that still writes every event."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from conftest import KEY_ENV, read_jsonl, write_config
from fakeserver import FakeOpenAIServer

from rubricrun import codec
from rubricrun.config import load_config
from rubricrun.engine.graph import Graph
from rubricrun.engine.preflight import preflight
from rubricrun.providers.cache import CachingProvider, ResponseCache
from rubricrun.providers.litellm import LiteLLMProvider
from rubricrun.providers.stack import build_stack
from rubricrun.providers.trace import Tracer
from rubricrun.types import LLMRequest, LLMResponse


class _Rows:
    """A graph sink that keeps the rows of finished examples (as the run folder's row files do, one file apart from
    examples.jsonl, whose rows are written at admission)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def admit(self, example: Any) -> None:
        pass

    def finish(self, example: Any, responses: list[Any], judgments: list[Any], pairs: list[Any]) -> None:
        self.rows.extend(codec.to_data(r) for r in [*responses, *judgments, *pairs])


def _run_graph(cfg_path: Path, trace: Path) -> tuple[Graph, list[dict[str, Any]]]:
    cfg = load_config(cfg_path)
    tracer = Tracer(trace)
    cache = ResponseCache(cfg.cache.dir)
    stop = threading.Event()
    try:
        stack, _ = build_stack(cfg, tracer, stop, cache)
        sink = _Rows()
        graph = Graph(cfg, stack, stop, sink)
        assert graph.run(iter(preflight(cfg, None).examples)) is False
    finally:
        tracer.close()
        cache.close()
    return graph, sink.rows


def _pooled(graph: Graph) -> int:
    return sum(p.submitted for p in graph.pools.values())  # calls handed to a pool (the cache could not answer)


def test_a_fully_cached_rerun_hands_no_call_to_a_pool(tmp_path: Path, server: FakeOpenAIServer, monkeypatch) -> None:
    """Cold: every call goes to a pool. Warm: none does (no pool thread ever starts), no request reaches the server,
    and the rows are the cold run's."""
    monkeypatch.setenv(KEY_ENV, "sk-test")
    cfg = write_config(tmp_path, server, judging={"judges_per_criterion": 2, "on_tie": "not_met"})
    cold, cold_rows = _run_graph(cfg, tmp_path / "cold.jsonl")
    paid = server.count(status=200)
    assert _pooled(cold) > 0 and paid > 0
    warm, warm_rows = _run_graph(cfg, tmp_path / "warm.jsonl")
    assert _pooled(warm) == 0
    assert server.count(status=200) == paid
    assert all(not p._threads for p in warm.pools.values())  # noqa: SLF001 - no thread was ever started
    assert warm_rows == cold_rows
    trace, cold_trace = read_jsonl(tmp_path / "warm.jsonl"), read_jsonl(tmp_path / "cold.jsonl")
    assert len(trace) == len(cold_trace) and all(e["cache_hit"] for e in trace)  # every call traced, once


def test_a_partly_cached_rerun_pays_only_for_what_is_missing(
    tmp_path: Path, server: FakeOpenAIServer, monkeypatch
) -> None:
    """Some judge replies dropped from the cache: the rerun pays for exactly those, on the pools, and traces each
    hit once (an attempt that met a miss traced nothing: its work ran afresh on a pool)."""
    monkeypatch.setenv(KEY_ENV, "sk-test")
    cfg = write_config(tmp_path, server, judging={"judges_per_criterion": 2, "on_tie": "not_met"})
    _, cold_rows = _run_graph(cfg, tmp_path / "cold.jsonl")
    keys = sorted({r["key"] for r in cold_rows if "criterion_id" in r and r["key"] and r["verdict"] != "error"})[::7]
    cache = ResponseCache(load_config(cfg).cache.dir)
    for key in keys:
        cache.delete(key)
    cache.close()
    paid = server.count(status=200)
    warm, warm_rows = _run_graph(cfg, tmp_path / "warm.jsonl")
    assert server.count(status=200) - paid == len(keys)  # one call per key, however many items ask for it
    assert len(keys) <= _pooled(warm) < len(cold_rows)
    trace = read_jsonl(tmp_path / "warm.jsonl")
    assert sum(not e["cache_hit"] for e in trace) == len(keys)
    assert len(trace) == len(read_jsonl(tmp_path / "cold.jsonl"))  # each call traced once, as in the cold run
    assert len(warm_rows) == len(cold_rows)


def test_try_cached_defers_traces_and_forgets_until_the_attempt_completes(tmp_path: Path, server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    cache = ResponseCache(tmp_path / "cache")
    tracer = Tracer(tmp_path / "trace.jsonl")
    stack = CachingProvider(LiteLLMProvider(), cache, tracer)

    def req(text: str) -> LLMRequest:
        messages = ({"role": "user", "content": text},)
        return LLMRequest(model="openai/m", messages=messages, api_base=server.base_url, api_key_env=KEY_ENV)

    stack.generate(req("a"))  # paid (this stack has no retry layer, the one that traces paid calls)
    stack.generate(req("b"))

    def forget_a_then_ask(second: str) -> None:
        stack.generate(req("a"))
        stack.forget(req("a"))
        stack.generate(req(second))

    assert stack.try_cached(forget_a_then_ask, "c") is False  # "c" is a miss: nothing traced, "a" not forgotten
    assert tracer.counts["events"] == 0 and cache.get(stack_key(req("a"))) is not None
    assert server.count(status=200) == 2
    assert stack.try_cached(forget_a_then_ask, "b") is True  # all hits: two traced, "a" forgotten
    assert tracer.counts == {"events": 2, "errors": 0, "cache_hits": 2, "calls": 0}
    assert cache.get(stack_key(req("a"))) is None
    tracer.close()
    cache.close()
    assert len(read_jsonl(tmp_path / "trace.jsonl")) == 2


def test_after_a_streak_of_misses_try_cached_looks_only_now_and_then(tmp_path: Path):
    """A cold cache: after MISS_STREAK misses in a row try_cached hands the work back without looking (the pool's
    generate reads the store anyway), looking again every MISS_STREAK-th call; a hit then ends the streak."""
    from rubricrun.providers.cache import MISS_STREAK

    cache = ResponseCache(tmp_path / "cache")
    stack = CachingProvider(LiteLLMProvider(), cache, Tracer(tmp_path / "trace.jsonl"))
    hit = LLMRequest(model="openai/m", messages=({"role": "user", "content": "stored"},))
    cache.set(stack_key(hit), LLMResponse(text="stored"))
    looked: list[str] = []

    def ask(text: str) -> None:
        looked.append(text)
        stack.generate(
            hit if text == "stored" else LLMRequest(model="openai/m", messages=({"role": "user", "content": text},))
        )

    assert not any(stack.try_cached(ask, f"miss {i}") for i in range(MISS_STREAK))
    assert len(looked) == MISS_STREAK  # every one looked
    answered = [stack.try_cached(ask, "stored") for _ in range(MISS_STREAK)]
    assert answered.count(True) == 1 and len(looked) == MISS_STREAK + 1  # one look in MISS_STREAK calls, a hit
    assert all(stack.try_cached(ask, "stored") for _ in range(3))  # the streak is over: every call looks again
    cache.close()


def stack_key(request: LLMRequest) -> str:
    from rubricrun.providers.cache import cache_key

    return cache_key(request)


def test_one_writer_writes_every_event_of_many_threads(tmp_path: Path) -> None:
    tracer = Tracer(tmp_path / "trace.jsonl", invocation="7")

    def emit(t: int) -> None:
        for i in range(500):
            tracer.emit(role="judge", model=f"m{t}", key=f"{t}-{i}", cache_hit=i % 2 == 0, attempt=0, latency_ms=1.0,
                        status="ok")  # fmt: skip

    threads = [threading.Thread(target=emit, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert tracer.counts == {"events": 4000, "errors": 0, "cache_hits": 2000, "calls": 2000}
    tracer.close()
    rows = read_jsonl(tmp_path / "trace.jsonl")
    assert len({r["key"] for r in rows}) == 4000 and {r["invocation"] for r in rows} == {"7"}
    assert list(rows[0]) == [
        "ts", "role", "model", "key", "cache_hit", "attempt", "latency_ms", "status", "error", "usage",
        "status_code", "retry_in_s", "deployment", "worker", "invocation",
    ]  # fmt: skip


def test_the_writer_writes_without_being_asked(tmp_path: Path) -> None:
    """Events reach the file while the run goes on (at most FLUSH_S late), not only at close: kill -9 keeps them."""
    import time

    tracer = Tracer(tmp_path / "trace.jsonl")
    tracer.emit(role="candidate", model="m", key="k", cache_hit=False, attempt=1, latency_ms=3.0, status="ok")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (tmp_path / "trace.jsonl").read_text():
        time.sleep(0.05)
    assert read_jsonl(tmp_path / "trace.jsonl")[0]["key"] == "k"
    tracer.close()


def test_fresh_many_knows_rows_of_this_format_by_their_tag(tmp_path: Path) -> None:
    """--validate's bulk check: a row stored now carries its format as diskcache tag; a row of another format (an
    older version's, tagged or not), or no row, is not fresh."""
    import diskcache

    from rubricrun.types import LLMResponse

    cache = ResponseCache(tmp_path / "cache")
    cache.set("stored", LLMResponse(text="a"))
    raw = diskcache.Cache(str(tmp_path / "cache"))
    raw.set("untagged", {"text": "b", "_v": 1})  # as versions before 018 stored rows before the tag
    raw.set("old-format", {"text": "c", "_v": 1}, tag=1)
    raw.close()
    keys = ["stored", "untagged", "old-format", "missing"] * 300
    assert cache.fresh_many(keys) == {"stored"}
    assert cache.get("stored") is not None and cache.get("untagged") is None and cache.get("old-format") is None
    cache.close()
