"""trace.jsonl: one event per model call attempt, written by one writer thread.

Any thread's `emit` appends the event to a queue (one C call under the GIL: no lock, no I/O on the caller's
thread); the writer drains it at least every FLUSH_S, and `close` (every end of a run: done, Ctrl+C, a stop, an
error) drains the rest. After kill -9 the trace misses at most the last FLUSH_S of events; the cache and the rows
never miss anything, since they do not go through here.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable
from json.encoder import encode_basestring
from pathlib import Path
from typing import IO, Any

from ..types import TraceEvent, Usage, json_encoder, shallow_row

FLUSH_S = 0.5  # the writer's period: what kill -9 may cost the trace

_COST_FIELDS = (
    "calls",
    "cached",
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
    "cached_completion_tokens",
)


class Tracer:
    """The trace's one writer; also counts events, calls and tokens for the summary and costs (read `counts` and
    `by_model` after the calls: reading them writes out what is queued first)."""

    def __init__(self, path: Path, *, invocation: str = "", on_error: Callable[[OSError], None] | None = None):
        # Appended, not written atomically: a crash must keep every event written so far.
        self._fh: IO[str] | None = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self.invocation = invocation
        self._end = f', "invocation": {_value(invocation)}}}\n' if invocation else "}\n"  # how each line ends
        # A write failure (full disk) must not lose the response whose event it was: it is recorded here, the
        # callback stops the run, and the runner reports it once the response is safely in the cache.
        self._error: OSError | None = None
        self._on_error = on_error
        self._counts: dict[str, int] = {"events": 0, "errors": 0, "cache_hits": 0, "calls": 0}
        # (role, model) -> tokens of successful paid calls and of cache hits, for costs.
        self._by_model: dict[tuple[str, str], dict[str, int]] = {}
        self._queue: deque[tuple[Any, ...]] = deque()
        self._drain_lock = threading.Lock()  # one drain at a time: the writer's, or a reader's
        self._closed = threading.Event()
        # Not named with pool.THREAD_PREFIX: the CLI abandons such threads at a failing exit (cli.py).
        self._writer = threading.Thread(target=self._write_loop, name="rubricrun.trace", daemon=True)
        self._writer.start()

    def emit(
        self,
        *,
        role: str,
        model: str,
        key: str,
        cache_hit: bool,
        attempt: int,
        latency_ms: float,
        status: str,
        error: str | None = None,
        usage: Usage | None = None,
        status_code: int | None = None,
        retry_in_s: float | None = None,
        deployment: str | None = None,
        worker: str | None = None,
    ) -> None:
        # In TraceEvent's field order; the writer makes the row.
        self._queue.append(
            (time.time(), role, model, key, cache_hit, attempt, latency_ms, status, error, usage, status_code,
             retry_in_s, deployment, worker)
        )  # fmt: skip

    @property
    def counts(self) -> dict[str, int]:
        self.flush()
        return self._counts

    @property
    def by_model(self) -> dict[tuple[str, str], dict[str, int]]:
        self.flush()
        return self._by_model

    @property
    def error(self) -> OSError | None:
        self.flush()
        return self._error

    def flush(self) -> None:
        """Write out and count every event emitted so far."""
        failed = False
        with self._drain_lock:
            lines = []
            while self._queue:
                event = self._queue.popleft()
                self._count(event)
                lines.append(self._line(event))
            if lines and self._fh and self._error is None:
                try:
                    self._fh.write("".join(lines))
                    self._fh.flush()
                except OSError as exc:
                    self._error = exc
                    failed = True
        if failed and self._on_error is not None:
            self._on_error(self._error)  # type: ignore[arg-type]

    def _write_loop(self) -> None:
        while not self._closed.wait(FLUSH_S):
            self.flush()

    def _line(self, event: tuple[Any, ...]) -> str:
        """The event's row as one line: the bytes `_encode` writes for the row dict (tests/test_trace.py), each value
        written by its type's own writer (faster than the encoder's walk of a dict: one line per call of a run)."""
        ts, role, model, key, cache_hit, attempt, latency_ms, status, error, usage, code, retry_in_s, dep, wk = event
        v = _value
        retry = "null" if retry_in_s is None else v(round(retry_in_s, 3))
        return (
            f'{{"ts": {v(round(ts, 3))}, "role": {v(role)}, "model": {v(model)}, "key": {v(key)}, '
            f'"cache_hit": {v(cache_hit)}, "attempt": {v(attempt)}, "latency_ms": {v(round(latency_ms, 1))}, '
            f'"status": {v(status)}, "error": {v(error)}, "usage": {v(usage)}, "status_code": {v(code)}, '
            f'"retry_in_s": {retry}, "deployment": {v(dep)}, "worker": {v(wk)}{self._end}'
        )

    def _count(self, event: tuple[Any, ...]) -> None:
        """Event counts, and tokens of successful calls and cache hits per (role, model)."""
        _, role, model, _, cache_hit, _, _, status, _, usage, *_ = event
        counts = self._counts
        counts["events"] += 1
        counts["cache_hits" if cache_hit else "calls"] += 1
        if status != "ok":
            counts["errors"] += 1
            return
        if usage is None:
            return
        acc = self._by_model.get((role, model))
        if acc is None:
            acc = self._by_model[(role, model)] = dict.fromkeys(_COST_FIELDS, 0)
        prefix = "cached_" if cache_hit else ""
        acc["cached" if cache_hit else "calls"] += 1
        acc[prefix + "prompt_tokens"] += usage.prompt_tokens
        acc[prefix + "completion_tokens"] += usage.completion_tokens

    def close(self) -> None:
        self._closed.set()
        self._writer.join()
        self.flush()
        with self._drain_lock:
            if self._fh:
                try:
                    self._fh.close()
                except OSError as exc:
                    self._error = self._error or exc
                self._fh = None


# Built once (json.dumps with a keyword builds an encoder per call); a Usage is written as its to_row.
_encode = json_encoder(shallow_row)
_TRACE_FIELDS = tuple(f.name for f in dataclasses.fields(TraceEvent))  # a row's keys, in the type's order
_FINITE = float.__repr__


def _float(v: float) -> str:
    return _FINITE(v) if v - v == 0.0 else _encode(v)  # NaN and the infinities as the encoder writes them


def _usage(u: Usage) -> str:
    if type(u) is not Usage:
        return _encode(u)
    p, c, t = _value(u.prompt_tokens), _value(u.completion_tokens), _value(u.total_tokens)
    return f'{{"prompt_tokens": {p}, "completion_tokens": {c}, "total_tokens": {t}}}'


_WRITERS: dict[type, Callable[[Any], str]] = {
    str: encode_basestring,
    float: _float,
    int: int.__repr__,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
    Usage: _usage,
}


def _value(v: Any) -> str:
    """One value as the encoder writes it (anything but the common types goes through the encoder itself)."""
    w = _WRITERS.get(type(v))
    return w(v) if w is not None else _encode(v)
