"""The tally in a second process: a large run's summary and report sample are fed on the machine's other core (the
tally is a fifth of a warm rerun's work: ExecPlan 012). The child reads the lines the runner wrote back into rows and
feeds its own tally, built by the runner's `make`: every byte it writes is the same (tests/test_tally_process.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

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

    ahead = 8  # batches read ahead of the tally, so memory stays bounded and a send never waits for the last

    def __init__(self, make: Callable[[], RunTally]) -> None:
        super().__init__(_ChildTally, (make,), "rubricrun-tally", _ENDED, rows=_BATCH_ROWS, chars=_BATCH_CHARS)

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


_ENDED = (
    "the tally's process ended (exit code {code}); every row is in the run folder and every call in the cache: "
    "rerun with the same --run-id"
)


class _ChildTally:
    """In the child (second_process.serve): the tally `make` builds, fed the lines the runner wrote."""

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
