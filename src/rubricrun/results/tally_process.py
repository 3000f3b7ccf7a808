"""The tally in a second process: a large run's summary and report sample are fed on the machine's other core.

A warm rerun is one thread of Python doing per-example work, and the tally (summary.SummaryAcc and the report's
sampler, results/tally.py) is a fifth of it (ExecPlan 012). The runner already encodes every row for its .jsonl
files; with a `TallyProcess` it hands the same lines to a child process, which reads them back into rows
(types.row_reader) and feeds an ordinary `Tally` with them, in input order, while the run goes on. The end of the
run asks the child for the summary, the export and report.html, so the tally's own code, and so every byte it
writes, is the same in both places (tests/test_tally_process.py runs both and compares every file).

- The child is started with `spawn` (no fork of a process that has threads) and gets the config, the run id and
  preflight's metric counts; rows are sent in batches of lines (a pickled list of str is one copy).
- Until the child says it is up, batches are kept here, so its start never holds the run up; after that the child
  reads up to _AHEAD batches ahead of its tally, so a send waits only when the tally is that far behind (memory
  stays bounded either way).
- The child ignores SIGINT and SIGTERM: Ctrl+C and a stop reach the runner, which then asks the child for the
  summary of what was done, as it would ask its own tally. When the runner's end of the pipe closes (also on kill -9)
  the child exits.
- What the child logs (a failed report, say) is sent back with its next answer and logged here.
- `open_tally` decides: a child for runs of at least PROCESS_MIN examples whose metrics preflight counted (the
  summary is then fed as the run goes); `RUBRICRUN_TALLY_PROCESS=on|off` forces it either way (tests; `off` for
  whoever wants one process). A one-core machine never starts it by itself.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import queue
import signal
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import Config
from ..errors import RubricrunError
from ..types import Example, Judgment, PairJudgment, Response, row_reader
from .summary_types import Summary
from .tally import Tally

log = logging.getLogger("rubricrun")

PROCESS_MIN = 20_000  # examples; below it the child's start (about 0.3 s of the other core) buys little
ENV = "RUBRICRUN_TALLY_PROCESS"
_MODES = {"on": "on", "1": "on", "true": "on", "yes": "on", "off": "off", "0": "off", "false": "off", "no": "off"}
_BATCH_ROWS = 512  # examples a batch: one pickle and one pipe write each
_BATCH_CHARS = 1 << 19
_AHEAD = 8  # batches the child reads ahead of its tally


def open_tally(
    cfg: Config, run_id: str, *, metric_counts: dict[str, Counter] | None, spool: bool
) -> Tally | TallyProcess:
    """The run's tally: here, or in a second process for a large run (the module docstring)."""
    mode = _MODES.get(os.environ.get(ENV, "").strip().lower(), "auto")
    if metric_counts is not None and mode != "off":
        examples = sum(sum(c.values()) for c in metric_counts.values())
        if mode == "on" or examples >= PROCESS_MIN and (os.cpu_count() or 1) > 1:
            try:
                return TallyProcess(cfg, run_id, metric_counts=metric_counts, spool=spool)
            except Exception as exc:  # noqa: BLE001 - no process to be had (limits, an odd interpreter): run it here
                log.warning(
                    "tally: no second process (%s: %s); the summary is fed in this one", type(exc).__name__, exc
                )
    return Tally(cfg, run_id, metric_counts=metric_counts, spool=spool)


class TallyProcess:
    """A `Tally` in a child process, with the runner's side of it: `add_lines` during the run; `summary`, `export`,
    `report`, `n_responses`, `any_ok` and `first_error` after it, answered by the child's Tally."""

    takes_lines = True  # the runner hands over encoded lines (runner._Sink)

    def __init__(self, cfg: Config, run_id: str, *, metric_counts: dict[str, Counter], spool: bool) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=serve, args=(child, cfg, run_id, metric_counts, spool), name="rubricrun-tally", daemon=True
        )
        self._proc.start()
        child.close()
        self._up = False
        self._waiting: list[list[tuple[str, str, str]]] = []  # batches made before the child was up
        self._batch: list[tuple[str, str, str]] = []
        self._chars = 0
        self._state: tuple[int, bool, str | None] | None = None

    def add_lines(self, example: str, responses: str, judgments: str) -> None:
        """One finished example as its lines in the three files (judgments.jsonl's: judgments, then pairwise)."""
        self._batch.append((example, responses, judgments))
        self._chars += len(responses) + len(judgments)
        if len(self._batch) >= _BATCH_ROWS or self._chars >= _BATCH_CHARS:
            self._flush()

    def _flush(self, *, wait: bool = False) -> None:
        if self._batch:
            self._waiting.append(self._batch)
            self._batch, self._chars = [], 0
        if not self._up:
            if not wait and not self._conn.poll():
                return
            self._receive()  # the child's "up"
            self._up = True
        for batch in self._waiting:
            self._send(batch)
        self._waiting.clear()

    def _send(self, msg: Any) -> None:
        try:
            self._conn.send(msg)
        except OSError:
            raise self._died() from None

    def _receive(self) -> Any:
        try:
            status, value, state, records = self._conn.recv()
        except (EOFError, OSError):
            raise self._died() from None
        for record in records:
            logging.getLogger(record.name).handle(record)
        self._state = state
        if status == "error":
            raise value
        return value

    def _died(self) -> RubricrunError:
        self._proc.join(timeout=5)
        return RubricrunError(
            f"the tally's process ended (exit code {self._proc.exitcode}); every row is in the run folder and every "
            "call in the cache: rerun with the same --run-id"
        )

    def _ask(self, op: str, *args: Any) -> Any:
        self._flush(wait=True)
        self._send((op, args))
        return self._receive()

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
        if self._state is None or self._batch or self._waiting:
            self._ask("state")
        assert self._state is not None
        return self._state

    def close(self) -> None:
        """Ends the child (it also ends on its own when this end of the pipe closes)."""
        try:
            self._conn.send(("close", ()))
        except OSError:
            pass
        self._conn.close()
        self._proc.join(timeout=5)  # rows still queued (a run that ended in an error) are not read
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()


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


def serve(conn: Any, cfg: Config, run_id: str, metric_counts: dict[str, Counter], spool: bool) -> None:
    """The child: a Tally fed with the rows the runner sends, answering its questions until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner decides how a run ends
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kept = _Kept()
    logger = logging.getLogger("rubricrun")
    logger.handlers[:] = [kept]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    tally = Tally(cfg, run_id, metric_counts=metric_counts, spool=spool)
    failed: BaseException | None = None
    inbox: queue.Queue[Any] = queue.Queue(_AHEAD)
    threading.Thread(target=_read, args=(conn, inbox), name="tally-reader", daemon=True).start()
    try:
        conn.send(("ok", "up", None, kept.take()))
        while True:
            msg = inbox.get()
            if msg is None:  # the runner's end closed
                return
            if type(msg) is list:
                if failed is None:
                    try:
                        for lines in msg:
                            tally.add(*read_lines(*lines))
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
    """Reads the runner's messages ahead of the tally (up to _AHEAD), so that the runner's send of a batch never
    waits for the tally's work on the one before."""
    try:
        while True:
            inbox.put(conn.recv())
    except (EOFError, OSError):
        inbox.put(None)


def _answer(conn: Any, tally: Tally, op: str, args: tuple, failed: BaseException | None, kept: _Kept) -> None:
    state = (tally.n_responses, tally.any_ok, tally.first_error)
    try:
        if failed is not None:
            raise failed
        value = None if op == "state" else getattr(tally, op)(*args)
        conn.send(("ok", value, state, kept.take()))
    except Exception as exc:  # noqa: BLE001 - raised again in the runner
        try:
            conn.send(("error", exc, state, kept.take()))
        except Exception:  # noqa: BLE001 - an exception that does not pickle
            conn.send(("error", RuntimeError(f"tally: {type(exc).__name__}: {exc}"), state, []))


_example, _response = row_reader(Example), row_reader(Response)
_judgment, _pair = row_reader(Judgment), row_reader(PairJudgment)


def _rows(text: str) -> list[dict[str, Any]]:
    """A file's lines (each ends in a newline; JSON strings escape theirs) as their objects, with one parse."""
    return json.loads(f"[{text[:-1].replace(chr(10), ',')}]") if text else []


def read_lines(
    example: str, responses: str, judgments: str
) -> tuple[Example, list[Response], list[Judgment], list[PairJudgment]]:
    """One example's rows back from their lines: what runner._Sink wrote, as the objects it wrote them from."""
    js: list[Judgment] = []
    pairs: list[PairJudgment] = []
    for row in _rows(judgments):
        if row.get("kind") == "pairwise":
            pairs.append(_pair(row))
        else:
            js.append(_judgment(row))
    return _example(json.loads(example)), [_response(r) for r in _rows(responses)], js, pairs
