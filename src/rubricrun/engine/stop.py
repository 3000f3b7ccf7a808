"""How a run stops: the first Ctrl+C or SIGTERM stops starting new calls, gives the calls in flight GRACE_S to land
and writes what was done; a second one ends the process at once. The exit code says which signal it was.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

GRACE_S = 3.0  # seconds the calls in flight get to land after a stop
THREAD_PREFIX = "rubricrun-"  # the run's worker threads


def workers_alive() -> bool:
    """Whether the run's worker threads are still running (calls in flight that an exit would wait for)."""
    return any(t.name.startswith(THREAD_PREFIX) and t.is_alive() for t in threading.enumerate())


# Signals that stop a run the way Ctrl+C does: docker stop, Kubernetes and SLURM send SIGTERM, then SIGKILL after a
# grace period, so SIGTERM must leave the same partial summary and report as Ctrl+C (issue 23).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_heard: list[int] = []  # the stop signals this process received, first first (process-wide, as signals are)


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
        signal.signal(s, _interrupt_now)


def _interrupt_now(signum: int, frame: object) -> None:
    _heard.append(signum)  # its number decides the exit code
    _default_handlers()
    raise KeyboardInterrupt


def _default_handlers() -> None:
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_DFL)


@contextlib.contextmanager
def stop_on_signal(stop: threading.Event) -> Iterator[None]:
    """While the graph runs, the first Ctrl+C or SIGTERM only sets `stop`: the conductor raises KeyboardInterrupt at
    the top of its loop, never between taking an example from the iterator and admitting it (an example taken and
    dropped there would be missing from examples.jsonl). A second one (either signal) ends the process at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    heard = len(_heard)

    def first(signum: int, frame: object) -> None:
        _heard.append(signum)
        _default_handlers()  # a second one ends the process at once, killed by it (what was written stays written)
        stop.set()

    for s in STOP_SIGNALS:
        signal.signal(s, first)
    try:
        yield
    finally:  # after a first stop signal, the next one (while artifacts are written) ends the process at once
        for s, handler in before.items():
            signal.signal(s, signal.SIG_DFL if len(_heard) > heard and handler is not signal.SIG_IGN else handler)
