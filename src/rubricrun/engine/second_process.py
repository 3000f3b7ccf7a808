"""A second process on the machine's other core, for work that only consumes what the run hands it and answers at the
end: a large run's tally (`TallyProcess`: a fifth of a warm rerun's work, ExecPlan 012) and `--validate`'s count of
calls (estimate.ProcessDriver). `wanted`: one rule for both; `RUBRICRUN_SECOND_PROCESS=on|off` forces it either way.

The child is started with `spawn` (the main process has threads) and fed through one pipe, in batches kept here until
it is up, so its start (0.3-0.5 s) never holds the run up. It runs `serve`, one loop for both uses. It ignores SIGINT
and SIGTERM (the main process decides how a run ends) and ends when the main process's end of the pipe closes (also on
kill -9).
"""

from __future__ import annotations

import functools
import logging
import logging.handlers
import multiprocessing
import os
import queue
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import codec
from ..errors import RubricrunError
from ..results.artifacts import Finished
from ..types import Example, Judgment, PairJudgment, Response

if TYPE_CHECKING:
    from ..results.summary_types import Summary
    from ..results.tally import RunTally

log = logging.getLogger("rubricrun")

ENV = "RUBRICRUN_SECOND_PROCESS"
_ON, _OFF = ("on", "1", "true", "yes"), ("off", "0", "false", "no")


def wanted(large: bool) -> bool:
    """Whether to start a child: forced by ENV, else for a large run (preflight.large_run) on a machine with more
    than one core."""
    mode = os.environ.get(ENV, "").strip().lower()
    if mode in _ON or mode in _OFF:
        return mode in _ON
    return large and (os.cpu_count() or 1) > 1


class Child:
    """The main process's side of a child serving `make(*args)` (see `serve`): items are `put` in batches, questions
    `ask`ed by the name of the worker's method; what the child logs comes back with its next answer and is logged
    here."""

    ahead = 0  # batches the child reads ahead of its work (see serve)

    def __init__(
        self, make: Callable[..., Any], args: tuple[Any, ...], name: str, ended: str, *, rows: int, chars: int = 0
    ) -> None:
        self.ended = ended  # the error that says it ended, with {code} for its exit code
        self._limits = (rows, chars)  # a batch is sent at `rows` items, or at `chars` of them (0: no such limit)
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child, make, args, self.ahead), name=name, daemon=True)
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
            self._receive()  # the child's "up"
            self.up = True
        for b in self._waiting:
            self._send(b)
        self._waiting.clear()

    def ask(self, op: str, *args: Any) -> Any:
        """The worker's `op(*args)`, after every item put (an error it raised, or one an item raised, is raised)."""
        self._feed(wait=True)
        self._send((op, args))
        return self._receive()

    def _send(self, msg: Any) -> None:
        try:
            self.conn.send(msg)
        except OSError:
            raise self._died() from None

    def _receive(self) -> Any:
        try:
            status, value, records = self.conn.recv()
        except (EOFError, OSError):
            raise self._died() from None
        for record in records:
            logging.getLogger(record.name).handle(record)
        if status == "error":
            raise value
        return value

    def _died(self) -> RubricrunError:
        self.proc.join(timeout=5)
        return RubricrunError(self.ended.format(code=self.proc.exitcode))

    def close(self) -> None:
        """Ends the child: its "close", then the pipe; killed after 5 s, or at once when it never came up (the main
        process stops early: bad input)."""
        if not self.up:
            self.proc.kill()
        else:
            try:
                self.conn.send(("close", ()))
            except OSError:
                pass
        self.conn.close()
        self.proc.join(timeout=5)  # batches still queued (work that ended in an error) are not read
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def serve(conn: Any, make: Callable[..., Any], args: tuple[Any, ...], ahead: int = 0) -> None:
    """The child: the worker `make(*args)` builds is fed each batch's items (`take`) and answers each question
    (`op`, args) with its method `op`, until "close" or the pipe closes. The first error an item raised is kept and
    answered to every question after it (the sender waits for no answer). `ahead`: batches a thread reads ahead of
    the work (the tally: a send never waits for the batch before); 0 reads each in turn (the count: a reader thread
    beside it cost `--validate` of 1,000,000 rows 12 %, plan 023)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C and SIGTERM are the main process's to handle
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kept: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()  # the records, their args made text
    log.handlers[:] = [logging.handlers.QueueHandler(kept)]
    log.setLevel(logging.INFO)
    log.propagate = False
    worker = make(*args)
    failed: BaseException | None = None
    next_message: Callable[[], Any] = functools.partial(_receive, conn)
    if ahead:
        inbox: queue.Queue[Any] = queue.Queue(ahead)
        threading.Thread(target=_read, args=(conn, inbox), name="child-reader", daemon=True).start()
        next_message = inbox.get
    try:
        conn.send(("ok", "up", _taken(kept)))
        while (msg := next_message()) is not None:  # None: the main process's end closed
            if type(msg) is list:
                if failed is None:
                    try:
                        for item in msg:
                            worker.take(item)
                    except Exception as exc:  # noqa: BLE001 - answered at the next question
                        failed = exc
                continue
            op, op_args = msg
            if op == "close":
                return
            try:
                if failed is not None:
                    raise failed
                conn.send(("ok", getattr(worker, op)(*op_args), _taken(kept)))
            except Exception as exc:  # noqa: BLE001 - raised again in the main process
                _send_error(conn, exc, _taken(kept))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the main process has gone (an error in its input, kill -9): end quietly, no traceback on its stderr
    finally:
        worker.close()
        conn.close()


def _read(conn: Any, inbox: queue.Queue[Any]) -> None:
    """Reads the main process's messages ahead of the worker (up to `ahead`), then None when its end closed."""
    while (msg := _receive(conn)) is not None:
        inbox.put(msg)
    inbox.put(None)


def _receive(conn: Any) -> Any:
    """The main process's next message; None when its end closed."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None


def _taken(kept: queue.SimpleQueue[logging.LogRecord]) -> list[logging.LogRecord]:
    """What the child logged since its last answer, sent with this one (the main process's logging writes it)."""
    return [kept.get() for _ in range(kept.qsize())]


def _send_error(conn: Any, exc: BaseException, records: list[logging.LogRecord]) -> None:
    """An error answer; one that does not pickle is sent as its type and message."""
    try:
        conn.send(("error", exc, records))
    except Exception:  # noqa: BLE001 - an exception that does not pickle
        conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}"), records))


_BATCH_ROWS = 512  # examples a batch: one pickle and one pipe write each
_BATCH_CHARS = 1 << 19


def open_tally(make: Callable[[], RunTally], *, live: bool, large: bool) -> RunTally:
    """The tally `make` builds (it pickles: the child builds its own): in a second process for a large run whose
    summary is fed as it goes (`live`: preflight counted every example's metric), else here."""
    if live and wanted(large):
        try:
            return TallyProcess(make)
        except Exception as exc:  # noqa: BLE001 - no process to be had (limits, an odd interpreter): run it here
            log.warning("tally: no second process (%s: %s); the summary is fed in this one", type(exc).__name__, exc)
    return make()


class TallyProcess(Child):
    """The tally `make` builds, in a child process, behind the runner's side of results/tally.RunTally. The child reads
    the lines the runner wrote back into rows: every byte its tally writes is the same (tests/test_tally_process.py)."""

    ahead = 8  # batches read ahead of the tally, so memory stays bounded and a send never waits for the last

    def __init__(self, make: Callable[[], RunTally]) -> None:
        ended = (
            "the tally's process ended (exit code {code}); every row is in the run folder and every call in the "
            "cache: rerun with the same --run-id"
        )
        super().__init__(_ChildTally, (make,), "rubricrun-tally", ended, rows=_BATCH_ROWS, chars=_BATCH_CHARS)

    def take(self, done: Finished) -> None:
        """One finished example, sent as its lines in the three files (the child reads them back into rows)."""
        _, responses, judgments, pairs = done.lines
        self.put(done.lines, len(responses) + len(judgments) + len(pairs))

    def summary(self) -> Summary:
        return self.ask("summary")

    def export(self, run_dir: Path, formats: Sequence[str]) -> dict:
        return self.ask("export", run_dir, list(formats))

    def report(self, run_dir: Path, summary: Summary) -> None:
        self.ask("report", run_dir, summary)

    @property
    def n_responses(self) -> int:
        return self.ask("state")[0]

    @property
    def any_ok(self) -> bool:
        return self.ask("state")[1]

    @property
    def first_error(self) -> str | None:
        return self.ask("state")[2]


class _ChildTally:
    """In the child (`serve`): the tally `make` builds, fed the lines the runner wrote."""

    def __init__(self, make: Callable[[], RunTally]) -> None:
        self.tally = tally = make()
        self.summary, self.export, self.report, self.close = tally.summary, tally.export, tally.report, tally.close

    def take(self, lines: tuple[bytes, bytes, bytes, bytes]) -> None:
        self.tally.take(Finished(*read_lines(*lines), lines))

    def state(self) -> tuple[int, bool, str | None]:
        return self.tally.n_responses, self.tally.any_ok, self.tally.first_error


def read_lines(
    example: bytes, responses: bytes, judgments: bytes, pairs: bytes
) -> tuple[Example, list[Response], list[Judgment], list[PairJudgment]]:
    """One example's rows back from their lines: what the runner wrote, as the objects it wrote them from."""
    return (
        codec.decode(example, Example),
        codec.decode_lines(responses, Response),
        codec.decode_lines(judgments, Judgment),
        codec.decode_lines(pairs, PairJudgment),
    )
