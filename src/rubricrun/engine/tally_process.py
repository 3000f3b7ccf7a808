"""The tally in a second process: a large run's summary and report sample are fed on the machine's other core (the
tally is a fifth of a warm rerun's work: ExecPlan 012).

The runner hands each finished example to its tally with the lines it wrote (results/artifacts.Finished); a
`TallyProcess` sends those lines to a child (second_process.py), which reads them back into rows and feeds its own
tally, built there by the runner's `make`, so every byte the tally writes is the same in both places
(tests/test_tally_process.py compares every file). The child reads up to _AHEAD batches ahead of its tally, so memory
stays bounded; what it logs comes back with its next answer and is logged here.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import codec
from ..results.artifacts import Finished
from ..types import Example, Judgment, PairJudgment, Response
from . import second_process

if TYPE_CHECKING:
    from ..results.summary_types import Summary
    from ..results.tally import RunTally

log = logging.getLogger("rubricrun")

_BATCH_ROWS = 512  # examples a batch: one pickle and one pipe write each
_BATCH_CHARS = 1 << 19
_AHEAD = 8  # batches the child reads ahead of its tally


def open_tally(make: Callable[[], RunTally], *, live: bool, large: bool) -> RunTally:
    """The tally `make` builds (it pickles: the child builds its own): in a second process for a large run whose
    summary is fed as it goes (`live`: preflight counted every example's metric), else here."""
    if live and second_process.wanted(large):
        try:
            return TallyProcess(make)
        except Exception as exc:  # noqa: BLE001 - no process to be had (limits, an odd interpreter): run it here
            log.warning("tally: no second process (%s: %s); the summary is fed in this one", type(exc).__name__, exc)
    return make()


class TallyProcess(second_process.Child):
    """The tally `make` builds, in a child process, behind the runner's side of results/tally.RunTally."""

    def __init__(self, make: Callable[[], RunTally]) -> None:
        super().__init__(serve, (make,), "rubricrun-tally", _ENDED, rows=_BATCH_ROWS, chars=_BATCH_CHARS)
        self._state: tuple[int, bool, str | None] | None = None

    def take(self, done: Finished) -> None:
        """One finished example, sent as its lines in the three files (the child reads them back into rows)."""
        _, responses, judgments, pairs = done.lines
        self.put(done.lines, len(responses) + len(judgments) + len(pairs))

    def answered(self, extra: list[Any]) -> None:
        state, records = extra
        for record in records:
            logging.getLogger(record.name).handle(record)
        self._state = state

    def _ask(self, op: str, *args: Any) -> Any:
        return self.ask((op, args))[0]

    def summary(self) -> Summary:
        return self._ask("summary")

    def export(self, run_dir: Path, formats: Sequence[str]) -> dict:
        return self._ask("export", run_dir, list(formats))

    def report(self, run_dir: Path, summary: Summary) -> None:
        self._ask("report", run_dir, summary)

    @property
    def n_responses(self) -> int:
        return self._known()[0]

    @property
    def any_ok(self) -> bool:
        return self._known()[1]

    @property
    def first_error(self) -> str | None:
        return self._known()[2]

    def _known(self) -> tuple[int, bool, str | None]:
        if self._state is None or self.pending:
            self._ask("state")
        assert self._state is not None
        return self._state

    def close(self) -> None:  # type: ignore[override]
        """Ends the child (it also ends on its own when this end of the pipe closes)."""
        super().close(("close", ()))


_ENDED = (
    "the tally's process ended (exit code {code}); every row is in the run folder and every call in the cache: "
    "rerun with the same --run-id"
)


# ---------------------------------------------------------------------------------------------------
# The child


class _Kept(logging.Handler):
    """The child's log records, kept for the next answer (the runner's logging writes them)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        record.msg, record.args = record.getMessage(), None  # its args need not pickle
        record.exc_info, record.exc_text = None, None
        self.records.append(record)

    def take(self) -> list[logging.LogRecord]:
        out, self.records = self.records, []
        return out


def serve(conn: Any, make: Callable[[], RunTally]) -> None:
    """The child: the tally `make` builds, fed the runner's rows, answering its questions until the pipe closes."""
    second_process.detach()
    kept = _Kept()
    logger = logging.getLogger("rubricrun")
    logger.handlers[:] = [kept]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    tally = make()
    failed: BaseException | None = None
    inbox: queue.Queue[Any] = queue.Queue(_AHEAD)
    threading.Thread(target=_read, args=(conn, inbox), name="tally-reader", daemon=True).start()
    with second_process.serving():
        try:
            conn.send(("ok", "up", None, kept.take()))
            while (msg := inbox.get()) is not None:  # None: the runner's end closed
                if type(msg) is list:
                    if failed is None:
                        try:
                            for lines in msg:
                                tally.take(Finished(*read_lines(*lines), lines))
                        except Exception as exc:  # noqa: BLE001 - answered at the next question
                            failed = exc
                    continue
                op, args = msg
                if op == "close":
                    return
                _answer(conn, tally, op, args, failed, kept)
        finally:
            tally.close()
            conn.close()


def _read(conn: Any, inbox: queue.Queue[Any]) -> None:
    """Reads the runner's messages ahead of the tally (up to _AHEAD): a send never waits for the batch before."""
    try:
        while True:
            inbox.put(conn.recv())
    except (EOFError, OSError):
        inbox.put(None)


def _answer(conn: Any, tally: RunTally, op: str, args: tuple, failed: BaseException | None, kept: _Kept) -> None:
    state = (tally.n_responses, tally.any_ok, tally.first_error)
    try:
        if failed is not None:
            raise failed
        value = None if op == "state" else getattr(tally, op)(*args)
        conn.send(("ok", value, state, kept.take()))
    except Exception as exc:  # noqa: BLE001 - raised again in the runner
        second_process.send_error(conn, exc, state, kept.take())


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
