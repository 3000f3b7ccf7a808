"""A thread pool that keeps input order, shows progress (a bar on a terminal, log lines elsewhere), and stops cleanly.

`run_pool` returns one result per item (None for items that never ran because the run stopped).
Ctrl+C in the main thread sets the shared stop event: queued work is cancelled, running calls get a
short grace period to finish (their results land in the cache either way), and `Interrupted` is
raised with the partial results so the caller can write artifacts for everything done.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

GRACE_S = 3.0
THREAD_PREFIX = "rubricrun-"
log = logging.getLogger("rubricrun")


def workers_alive() -> bool:
    """Whether pool threads are still running (calls in flight that an exit would wait for)."""
    return any(t.name.startswith(THREAD_PREFIX) and t.is_alive() for t in threading.enumerate())


class Interrupted(Exception, Generic[R]):
    def __init__(self, results: list[R | None]):
        super().__init__("interrupted")
        self.results = results


# Seconds between progress lines in the log when stderr is not a terminal (run.progress_interval_s sets it).
LOG_INTERVAL_S = 10.0


def set_log_interval(seconds: float) -> None:
    global LOG_INTERVAL_S
    LOG_INTERVAL_S = seconds


def _clock(seconds: float) -> str:
    """mm:ss, or h:mm:ss from an hour (as tqdm writes it)."""
    m, sec = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def progress_line(label: str, done: int, total: int, elapsed_s: float) -> str:
    """`generate 40/100 (40%) 8.0/s ETA 00:07`: what a log reader needs to see a stage moving."""
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    eta = _clock((total - done) / rate) if rate > 0 else "?"
    return f"{label} {done}/{total} ({100 * done // max(1, total)}%) {rate:.1f}/s ETA {eta}"


class Progress:
    """Progress of one stage. On a terminal: a tqdm bar with rate and ETA (console log lines are printed above
    it). Elsewhere (CI, nohup): a progress line in the log every LOG_INTERVAL_S seconds, since a bar redrawn
    with carriage returns is noise in a log file."""

    def __init__(
        self,
        label: str,
        total: int,
        enabled: bool = True,
        *,
        stream: IO[str] | None = None,
        grows: bool = False,
        on: str | None = None,
    ):
        self.label, self.total, self.done = label, total, 0
        self.on = f" on {on}" if on else ""  # where the calls run, when not on this process's threads
        self.start = self._last_line = time.monotonic()
        self.interval_s = LOG_INTERVAL_S
        stream = stream or sys.stderr
        on = enabled and (total > 0 or grows)  # grows: the total is learned as work is found (add)
        self._bar: Any = None  # a tqdm bar
        self._redirect: contextlib.ExitStack | None = None
        if on and stream.isatty():
            from tqdm import tqdm  # imported only for a terminal (about 0.1 s)
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._redirect = contextlib.ExitStack()
            self._redirect.enter_context(logging_redirect_tqdm([log]))
            self._bar = tqdm(total=total, desc=label, file=stream, unit="call", dynamic_ncols=True, mininterval=0.1)
        self._lines = on and self._bar is None
        self._logged = False
        self._said: tuple[int, int] | None = None  # (done, total) of the last line logged

    def add(self, n: int = 1) -> None:
        """n more to do (a stage whose work is found as the run goes)."""
        self.total += n
        if self._bar is not None:
            self._bar.total = self.total

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._logged and self.done >= self.total:
            self._line(time.monotonic())  # a stage that was shown running says once that it is done
        else:
            self.tick()

    def tick(self) -> None:
        """Log a progress line if the interval has passed and the stage is still running (called on every
        completion and while waiting): a finished stage is not repeated while later stages run (issue 23)."""
        now = time.monotonic()
        if self._lines and self.done < self.total and now - self._last_line >= self.interval_s:
            self._line(now)

    def _line(self, now: float) -> None:
        if (self.done, self.total) == self._said:
            return
        self._last_line, self._logged, self._said = now, True, (self.done, self.total)
        log.info("progress %s%s", progress_line(self.label, self.done, self.total, now - self.start), self.on)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._redirect is not None:
            self._redirect.close()
            self._redirect = None
        if self._lines and self._logged:  # a stage long enough to show progress also says how it ended (once)
            self._line(time.monotonic())
            self._lines = False


# Signals that stop a run the way Ctrl+C does: docker stop, Kubernetes and SLURM send SIGTERM, then SIGKILL after a
# grace period, so SIGTERM must leave the same partial summary and report as Ctrl+C (issue 23).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_heard: list[int] = []  # the stop signals this process received, first first (process-wide, as signals are)


def heard_stop(signum: int) -> None:
    """Record a stop signal (its number decides the exit code)."""
    _heard.append(signum)


def stopped_by() -> str | None:
    """The name of the first stop signal received ("SIGTERM"), or None."""
    return signal.Signals(_heard[0]).name if _heard else None


def stop_exit_code() -> int:
    """128 + the first stop signal's number, as a shell reports a process that signal ended: 130 for Ctrl+C (also
    when the stop came from elsewhere, e.g. a batch wait), 143 for SIGTERM."""
    return 128 + (_heard[0] if _heard else signal.SIGINT)


def install_stop_handlers() -> None:
    """The CLI's handlers for a run: the first SIGINT or SIGTERM raises KeyboardInterrupt; the next ends at once."""
    _heard.clear()
    for s in STOP_SIGNALS:
        signal.signal(s, interrupt_now)


def end_now(signum: int) -> None:
    """A second stop signal: the process ends at once, killed by that signal (what was written stays written)."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_DFL)
    signal.raise_signal(signum)


def interrupt_now(signum: int, frame: object) -> None:
    """A SIGINT/SIGTERM handler: this signal raises KeyboardInterrupt, and the next one ends the process at once."""
    heard_stop(signum)
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_DFL)
    raise KeyboardInterrupt


def _collect_running(futures: dict[Future[R], int], results: list[R | None]) -> None:
    """Give the calls already running GRACE_S in all to finish, so their results land in the artifacts."""
    deadline = time.monotonic() + GRACE_S
    for f, i in futures.items():
        if f.cancelled():
            continue
        try:
            results[i] = f.result(timeout=max(0.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - abandoned or cancelled
            pass


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
                bar.tick()  # a stalled stage still shows in the log
            if f is not None:
                remaining -= 1
                results[futures[f]] = f.result()  # task functions return errors as rows, they do not raise
                bar.update()
            if stop.is_set():
                raise KeyboardInterrupt
    except BaseException as exc:
        stop.set()
        for f in futures:
            f.cancel()
        if isinstance(exc, KeyboardInterrupt):
            _collect_running(futures, results)
        # Otherwise a task failed in a way a row cannot hold (cache or disk): stop paying for new calls at once.
        bar.close()
        pool.shutdown(wait=False, cancel_futures=True)
        if isinstance(exc, KeyboardInterrupt):
            raise Interrupted(results) from None
        raise
    bar.close()
    pool.shutdown(wait=True)
    return results
