"""trace.jsonl: one event per model call attempt, written by one writer thread.

Any thread's `emit` appends to a queue (one C call under the GIL: no lock, no I/O on the caller's thread); the writer
writes the queue out at least every FLUSH_S, and `close` drains the rest, so kill -9 costs the trace at most FLUSH_S
of events (the cache and the rows do not go through here). The file is appended across invocations: a line kill -9
cut short is cut off first, and past MAX_BYTES it is rotated to `trace.1.jsonl` ... `trace.{BACKUPS}.jsonl`.
"""

from __future__ import annotations

import mmap
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Literal

from msgspec import UNSET

from ..codec import lines
from ..types import TraceEvent, Usage

FLUSH_S = 0.5  # the writer's period: what kill -9 may cost the trace
MAX_BYTES = 64 << 20  # about this much in trace.jsonl, then it is rotated (as run.log: 20 MB x 3 backups)
BACKUPS = 3  # trace.1.jsonl ... trace.3.jsonl

_COST_FIELDS = "calls cached prompt_tokens completion_tokens cached_prompt_tokens cached_completion_tokens".split()


class Tracer:
    """The trace's one writer; also counts events, calls and tokens for the summary and costs (read `counts` and
    `by_model` after the calls: reading them writes out what is queued first)."""

    def __init__(self, path: Path, *, invocation: str = "", on_error: Callable[[OSError], None] | None = None):
        # Appended, not written atomically: a crash must keep every event written so far.
        self.path, self.max_bytes, self.invocation = Path(path), MAX_BYTES, invocation
        self._size = cut_torn_line(self.path)
        if self._size >= self.max_bytes:
            self._size = rotate(self.path)
        self._fh: IO[bytes] | None = open(path, "ab")  # noqa: SIM115
        # A write failure (full disk) must not lose the response whose event it was: it is recorded here, the
        # callback stops the run, and the runner reports it once the response is safely in the cache.
        self._error: OSError | None = None
        self._on_error = on_error
        self._counts: dict[str, int] = {"events": 0, "errors": 0, "cache_hits": 0, "calls": 0}
        # (role, model) -> tokens of successful paid calls and of cache hits, for costs.
        self._by_model: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: dict.fromkeys(_COST_FIELDS, 0))
        self._queue: deque[TraceEvent] = deque()
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
        status: Literal["ok", "error"],
        error: str | None = None,
        usage: Usage | None = None,
        status_code: int | None = None,
        retry_in_s: float | None = None,
        deployment: str | None = None,
        worker: str | None = None,
    ) -> None:
        """One attempt's event (TraceEvent's fields; the time and the invocation are set here)."""
        event = TraceEvent(
            ts=round(time.time(), 3),
            role=role,
            model=model,
            key=key,
            cache_hit=cache_hit,
            attempt=attempt,
            latency_ms=round(latency_ms, 1),
            status=status,
            error=error,
            usage=usage,
            status_code=status_code,
            retry_in_s=None if retry_in_s is None else round(retry_in_s, 3),
            deployment=deployment,
            worker=worker,
            invocation=self.invocation or UNSET,
        )
        self._queue.append(event)  # one C call under the GIL: the writer thread encodes it

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
            events = [self._queue.popleft() for _ in range(len(self._queue))]  # (those emitted meanwhile: next time)
            for event in events:
                self._count(event)
            if events and self._fh and self._error is None:
                try:
                    data = lines(events)
                    self._fh.write(data)
                    self._fh.flush()
                    self._size += len(data)
                    if self._size >= self.max_bytes:
                        self._fh.close()
                        self._size = rotate(self.path)
                        self._fh = open(self.path, "ab")  # noqa: SIM115
                except OSError as exc:
                    self._error = exc
                    failed = True
        if failed and self._on_error is not None:
            self._on_error(self._error)  # type: ignore[arg-type]

    def _write_loop(self) -> None:
        while not self._closed.wait(FLUSH_S):
            self.flush()

    def _count(self, event: TraceEvent) -> None:
        """Event counts, and tokens of successful calls and cache hits per (role, model)."""
        role, model, cache_hit, status, usage = event.role, event.model, event.cache_hit, event.status, event.usage
        counts = self._counts
        counts["events"] += 1
        counts["cache_hits" if cache_hit else "calls"] += 1
        if status != "ok":
            counts["errors"] += 1
            return
        if usage is None:
            return
        acc = self._by_model[(role, model)]
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


def cut_torn_line(path: Path) -> int:
    """Cut off a last line without its newline (what kill -9 in the middle of a write leaves), so the next append
    starts a line of its own; returns the file's size after (0 when there is no file)."""
    try:
        fh = open(path, "rb+")  # noqa: SIM115
    except FileNotFoundError:
        return 0
    with fh:
        end = fh.seek(0, 2)
        if not end:
            return 0  # (an empty file cannot be mapped)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            keep = data.rfind(b"\n") + 1
        if keep != end:
            fh.truncate(keep)
        return keep


def rotate(path: Path) -> int:
    """trace.jsonl -> trace.1.jsonl, each older one a number up, the one past BACKUPS deleted; returns 0 (the size
    of the trace.jsonl to come)."""
    names = [path] + [path.with_name(f"{path.stem}.{n}{path.suffix}") for n in range(1, BACKUPS + 1)]
    names[-1].unlink(missing_ok=True)
    for n in range(BACKUPS - 1, -1, -1):
        if names[n].exists():
            names[n].replace(names[n + 1])
    return 0
