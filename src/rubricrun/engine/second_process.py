"""A second process on the machine's other core, for work that only consumes what the run hands it and answers at the
end: a large run's tally (engine/tally_process.py) and `--validate`'s count of calls (estimate.ProcessDriver).

The child is started with `spawn` (the main process has threads) and fed through one pipe, in batches kept here until
it is up, so its start (0.3-0.5 s) never holds the run up. It ignores SIGINT and SIGTERM (the main process decides how
a run ends) and ends when the main process's end of the pipe closes (also on kill -9). `wanted`: one rule for both
uses; `RUBRICRUN_SECOND_PROCESS=on|off` forces it either way.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import RubricrunError

ENV = "RUBRICRUN_SECOND_PROCESS"
_ON, _OFF = ("on", "1", "true", "yes"), ("off", "0", "false", "no")


def wanted(large: bool) -> bool:
    """Whether to start a child: forced by ENV, else for a large run (preflight.large_run) on a machine with more
    than one core."""
    mode = os.environ.get(ENV, "").strip().lower()
    if mode in _ON or mode in _OFF:
        return mode in _ON
    return large and (os.cpu_count() or 1) > 1


def detach() -> None:
    """In the child: Ctrl+C and SIGTERM are the main process's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


@contextlib.contextmanager
def serving() -> Iterator[None]:
    """In the child, around all its work: when the main process has gone (its end of the pipe closed: an error in
    its input, kill -9), the child ends quietly, with no traceback on the shared stderr."""
    try:
        yield
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass


class Child:
    """The main process's side of a child running `target(conn, *args)`, which first sends one message (up) and
    then answers each question (`ask`) with `(status, value, *extra)`, status "ok" or "error"."""

    def __init__(
        self, target: Callable[..., None], args: tuple[Any, ...], name: str, ended: str, *, rows: int, chars: int = 0
    ) -> None:
        self.ended = ended  # the error that says it ended, with {code} for its exit code
        self._limits = (rows, chars)  # a batch is sent at `rows` items, or at `chars` of them (0: no such limit)
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=target, args=(child, *args), name=name, daemon=True)
        self.proc.start()
        child.close()
        self.up = False
        self._batch: list[Any] = []  # items put since the last batch
        self._chars = 0
        self._waiting: list[list[Any]] = []  # batches made before the child was up

    def put(self, item: Any, chars: int = 0) -> None:
        """One item for the child, sent in a batch (a list) with the ones before it."""
        self._batch.append(item)
        self._chars += chars
        rows, most = self._limits
        if len(self._batch) >= rows or most and self._chars >= most:
            self._feed()

    def _feed(self, *, wait: bool = False) -> None:
        """Sends the batches made, or keeps them while the child is not up (`wait`: until it is)."""
        if self._batch:
            self._waiting.append(self._batch)
            self._batch, self._chars = [], 0
        if not self.up:
            if not wait and not self.conn.poll():
                return
            self.receive()  # the child's "up"
            self.up = True
        for b in self._waiting:
            self.send(b)
        self._waiting.clear()

    @property
    def pending(self) -> bool:
        """Items put that the child has not been sent yet."""
        return bool(self._batch or self._waiting)

    def ask(self, question: Any) -> tuple[Any, ...]:
        """`question` after every item put; the answer's value and extras (an error answer is raised)."""
        self._feed(wait=True)
        self.send(question)
        return self.receive()

    def send(self, msg: Any) -> None:
        try:
            self.conn.send(msg)
        except OSError:
            raise self.died() from None

    def receive(self) -> tuple[Any, ...]:
        try:
            status, value, *extra = self.conn.recv()
        except (EOFError, OSError):
            raise self.died() from None
        self.answered(extra)
        if status == "error":
            raise value
        return (value, *extra)

    def answered(self, extra: list[Any]) -> None:
        """What an answer carries besides its value (a subclass reads it)."""

    def died(self) -> RubricrunError:
        self.proc.join(timeout=5)
        return RubricrunError(self.ended.format(code=self.proc.exitcode))

    def close(self, question: Any = None) -> None:
        """Ends the child: `question` (its "stop") if it takes one, then the pipe; killed after 5 s, or at once when it
        never came up (the main process stops early: bad input)."""
        if not self.up:
            self.proc.kill()
        elif question is not None:
            try:
                self.conn.send(question)
            except OSError:
                pass
        self.conn.close()
        self.proc.join(timeout=5)  # batches still queued (work that ended in an error) are not read
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def send_error(conn: Any, exc: BaseException, *extra: Any) -> None:
    """In the child: an error answer; one that does not pickle is sent as its type and message."""
    try:
        conn.send(("error", exc, *extra))
    except Exception:  # noqa: BLE001 - an exception that does not pickle
        conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}"), *extra))
