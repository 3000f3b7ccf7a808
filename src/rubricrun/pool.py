"""A thread pool that keeps input order, shows progress on stderr, and stops cleanly.

`run_pool` returns one result per item (None for items that never ran because the run stopped).
Ctrl+C in the main thread sets the shared stop event: queued work is cancelled, running calls get a
short grace period to finish (their results land in the cache either way), and `Interrupted` is
raised with the partial results so the caller can write artifacts for everything done.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

GRACE_S = 3.0
THREAD_PREFIX = "rubricrun-"


def workers_alive() -> bool:
    """Whether pool threads are still running (calls in flight that an exit would wait for)."""
    return any(t.name.startswith(THREAD_PREFIX) and t.is_alive() for t in threading.enumerate())


class Interrupted(Exception, Generic[R]):
    def __init__(self, results: list[R | None]):
        super().__init__("interrupted")
        self.results = results


class Progress:
    """A one-line progress bar on stderr (only when stderr is a terminal; otherwise silent)."""

    def __init__(self, label: str, total: int, enabled: bool = True):
        self.label, self.total = label, total
        self.enabled = enabled and sys.stderr.isatty() and total > 0
        self.done = 0
        self.start = time.monotonic()
        self._last = 0.0

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._last > 0.1 or self.done == self.total):
            self._last = now
            rate = self.done / max(1e-9, now - self.start)
            width = 28
            filled = int(width * self.done / self.total)
            bar = "#" * filled + "-" * (width - filled)
            sys.stderr.write(f"\r{self.label:<10} [{bar}] {self.done}/{self.total} {rate:6.1f}/s")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def run_pool(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    workers: int,
    stop: threading.Event,
    label: str = "",
    progress: bool = True,
) -> list[R | None]:
    results: list[R | None] = [None] * len(items)
    if not items:
        return results
    bar = Progress(label, len(items), progress)
    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(items))), thread_name_prefix=THREAD_PREFIX + label)
    futures: dict[Future[R], int] = {}
    # Completions arrive through a queue (O(1) each): concurrent.futures.wait() over a large pending set costs
    # O(pending) per call, which made a 20,000-call stage quadratic.
    finished: queue.SimpleQueue[Future[R]] = queue.SimpleQueue()
    try:
        for i, item in enumerate(items):
            f = pool.submit(fn, item)
            futures[f] = i
            f.add_done_callback(finished.put)
        remaining = len(futures)
        while remaining:
            try:
                f = finished.get(timeout=0.5)
            except queue.Empty:
                f = None
            if f is not None:
                remaining -= 1
                results[futures[f]] = f.result()  # task functions return errors as rows, they do not raise
                bar.update()
            if stop.is_set():
                raise KeyboardInterrupt
    except BaseException as exc:
        if not isinstance(exc, KeyboardInterrupt):
            # A task failed in a way a row cannot hold (cache or disk): stop paying for new calls at once.
            stop.set()
            for f in futures:
                f.cancel()
            bar.close()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        stop.set()
        for f in futures:
            f.cancel()
        deadline = time.monotonic() + GRACE_S
        for f, i in futures.items():
            if f.cancelled():
                continue
            try:
                results[i] = f.result(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - abandoned or cancelled
                pass
        bar.close()
        pool.shutdown(wait=False, cancel_futures=True)
        raise Interrupted(results) from None
    bar.close()
    pool.shutdown(wait=True)
    return results
