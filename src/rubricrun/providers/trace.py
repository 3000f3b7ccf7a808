"""trace.jsonl: one event per model call attempt, appended as it happens so a crash keeps it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ..types import TraceEvent, Usage, to_row

_COST_FIELDS = (
    "calls",
    "cached",
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
    "cached_completion_tokens",
)


class Tracer:
    """Thread-safe JSONL appender that also counts events, calls and tokens for the summary and costs."""

    def __init__(self, path: Path, *, invocation: str = "", on_error: Callable[[OSError], None] | None = None):
        self._lock = threading.Lock()
        # Appended, not written atomically: a crash must keep every event written so far.
        self._fh: IO[str] | None = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self.invocation = invocation
        # A write failure (full disk) must not lose the response whose event it was: it is recorded here, the
        # callback stops the run, and the runner reports it once the response is safely in the cache.
        self.error: OSError | None = None
        self._on_error = on_error
        self.counts: dict[str, int] = {"events": 0, "errors": 0, "cache_hits": 0, "calls": 0}
        # (role, model) -> tokens of successful paid calls and of cache hits, for costs.
        self.by_model: dict[tuple[str, str], dict[str, int]] = {}

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
    ) -> None:
        event = TraceEvent(
            ts=round(time.time(), 3),
            role=role,
            model=model,
            key=key,
            cache_hit=cache_hit,
            attempt=attempt,
            latency_ms=round(latency_ms, 1),
            status=status,  # type: ignore[arg-type]
            error=error,
            usage=usage,
            status_code=status_code,
            retry_in_s=None if retry_in_s is None else round(retry_in_s, 3),
            deployment=deployment,
        )
        row = to_row(event)
        if self.invocation:
            row["invocation"] = self.invocation
        line = json.dumps(row, ensure_ascii=False) + "\n"
        with self._lock:
            self._count(role, model, cache_hit, status, usage)
            if self._fh and self.error is None:
                try:
                    self._fh.write(line)
                    self._fh.flush()
                except OSError as exc:
                    self.error = exc
            failed = self.error is not None
        if failed and self._on_error is not None:
            self._on_error(self.error)  # type: ignore[arg-type]

    def _count(self, role: str, model: str, cache_hit: bool, status: str, usage: Usage | None) -> None:
        """Event counts, and tokens of successful calls and cache hits per (role, model); under the lock."""
        self.counts["events"] += 1
        self.counts["cache_hits" if cache_hit else "calls"] += 1
        if status != "ok":
            self.counts["errors"] += 1
            return
        if usage is None:
            return
        acc = self.by_model.get((role, model))
        if acc is None:
            acc = self.by_model[(role, model)] = dict.fromkeys(_COST_FIELDS, 0)
        prefix = "cached_" if cache_hit else ""
        acc["cached" if cache_hit else "calls"] += 1
        acc[prefix + "prompt_tokens"] += usage.prompt_tokens
        acc[prefix + "completion_tokens"] += usage.completion_tokens

    def close(self) -> None:
        with self._lock:
            if self._fh:
                try:
                    self._fh.close()
                except OSError as exc:
                    self.error = self.error or exc
                self._fh = None
