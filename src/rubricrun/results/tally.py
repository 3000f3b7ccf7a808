"""What a run's results need, fed one example at a time in input order: the summary, the export and the report
(`RunTally`, kept here and in a second process, engine/second_process.py). Memory per example stays a few floats
(.agent/plans/009-limits.md, item 3): with the metric counts known from preflight, `take` feeds the summary and the
report's sample as it goes and spools rows only for an export (plan 012); a synthesized dataset's rows are spooled
and summarized from the spool at the end, when its metrics are known."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from msgspec.structs import replace

from ..config import Config
from ..data.spool import Spool
from ..tasks import registry
from ..types import Criterion, Example, Judgment, PairJudgment, Response
from .artifacts import Finished
from .export import export_batches
from .report import REPORT_EXAMPLES, Batch, Sample, safely, sample, write_report
from .scoring import score_all
from .summary import SummaryAcc
from .summary_types import Summary

_Rows = tuple[Example, tuple[Response, ...], tuple[Judgment, ...], tuple[PairJudgment, ...]]  # one spooled example
log = logging.getLogger("rubricrun")


class RunTally(Protocol):
    """What the runner asks of its tally, here or in a second process: `take` each finished example, in input
    order; at the end the summary, the export and the report, and what the rows said of the candidates' calls."""

    @property
    def n_responses(self) -> int: ...  # responses the rows hold

    @property
    def any_ok(self) -> bool: ...  # whether one of them is a reply (status ok)

    @property
    def first_error(self) -> str | None: ...  # the first one's error

    def take(self, done: Finished) -> None: ...

    def summary(self) -> Summary: ...

    def export(self, run_dir: Path, formats: Sequence[str]) -> dict: ...

    def report(self, run_dir: Path, summary: Summary) -> None: ...

    def close(self) -> None: ...


class Tally:
    """A run's results, example by example: the full rows spooled to disk, a few counters in memory."""

    def __init__(
        self,
        cfg: Config,
        run_id: str,
        report_examples: int = REPORT_EXAMPLES,
        *,
        metric_counts: dict[str, Counter] | None = None,
        spool: bool = True,
    ) -> None:
        self.cfg, self.run_id, self.report_examples = cfg, run_id, report_examples
        self.metric_counts: dict[str, Counter] = defaultdict(Counter)  # dataset -> metric -> examples calling for it
        self.pairs: list[PairJudgment] = []
        self.pair_datasets: dict[str, str] = {}  # example id -> dataset, of the examples pairwise rows compare
        self.text_len: dict[str, int] = {}  # response id -> len(text), for the responses pairwise rows compare
        self.n_responses = 0
        self.any_ok = False
        self.first_error: str | None = None
        # Fed as the run goes (the module docstring): the counts decide each dataset's metric before any example.
        self._given = metric_counts
        self._acc = SummaryAcc(cfg, metric_counts) if metric_counts is not None else None
        self._picker: Sample | None = Sample(report_examples) if metric_counts is not None else None
        # One example's rows a chunk: nothing is held once `add` returns.
        keep = spool or metric_counts is None
        self._spool: Spool[_Rows] | None = Spool("rubricrun-tally-", _Rows, chunk=1) if keep else None

    def take(self, done: Finished) -> None:
        """RunTally: a finished example's rows (not its lines); one with no responses yet still counts as an example."""
        example, responses, judgments, pairs = done.example, done.responses, done.judgments, done.pairs
        if self._spool is not None:
            self._spool.add((example, tuple(responses), tuple(judgments), tuple(pairs)))
            if not self._spool.ok:
                raise RuntimeError(f"example {example.id}: its rows cannot be packed for the export and the report")
        if self._acc is not None:  # the example's criteria, found once for the summary and the sample
            rubric, crit = self._criteria(example)
            self._acc.add(example, responses, judgments, crit, rubric)
            self._pick(example, responses, judgments, rubric, crit)
        self.n_responses += len(responses)
        self.any_ok = self.any_ok or any(r.status == "ok" for r in responses)
        if self.first_error is None:
            self.first_error = next((r.error for r in responses if r.error), None)
        self.metric_counts[example.dataset][registry.metric_of(example)] += 1
        if pairs:
            self.pairs.extend(replace(p, keys=("", "")) for p in pairs)
            self.pair_datasets[example.id] = example.dataset
            compared = {rid for p in pairs for rid in p.response_ids}
            self.text_len.update((r.id, len(r.text or "")) for r in responses if r.id in compared)

    def _criteria(self, ex: Example) -> tuple[tuple[Criterion, ...], dict[tuple[str, str], Criterion]]:
        """The example's criteria, and them by (example, criterion) id: found once, for the summary and the sample."""
        rubric = registry.criteria_for(ex, self.cfg)
        return rubric, {(ex.id, c.id): c for c in rubric}

    def _pick(self, ex: Example, rs: Sequence[Response], js: Sequence[Judgment], rubric: Sequence, crit: dict) -> None:
        """The report's sample, fed as the run goes; a failure (logged) leaves the run without a page only."""
        if self._picker is None:
            return
        try:
            self._picker.add(ex, rs, js, crit, score_all(rs, js, rubric))
        except Exception as exc:  # noqa: BLE001 - the page is a view
            log.error("report.html not written: %s: %s", type(exc).__name__, exc)
            self._picker = None

    def rows(self) -> Iterator[_Rows]:
        """The full rows back, one example at a time in input order."""
        if self._spool is None:
            raise RuntimeError("this tally keeps no rows (spool=False)")
        yield from self._spool

    def _scored(self) -> Iterator[tuple[Example, tuple[Response, ...], tuple[Judgment, ...], dict[str, Any]]]:
        """The examples the export reads, with their scores. Not a row whose task answers it itself (a judge
        meta-evaluation's completion, there to grade the judges): no candidate wrote it."""
        for ex, rs, js, _ in self.rows():
            if not registry.answers_itself(ex):
                yield ex, rs, js, score_all(rs, js, registry.criteria_for(ex, self.cfg))

    def summary(self) -> Summary:
        """The summary of every example: fed as the run went, else (a synthesized dataset, whose metrics are known
        only now) fed from the spool one example at a time."""
        if self._acc is None:
            self._acc = SummaryAcc(self.cfg, self.metric_counts)
            for ex, rs, js, _ in self.rows():
                rubric, crit = self._criteria(ex)
                self._acc.add(ex, rs, js, crit, rubric)
        elif self.metric_counts != self._given:  # the data files changed under the run
            log.warning("the datasets' rows changed since preflight: metrics decided on preflight's counts")
        return self._acc.summary(self.run_id, self.pairs, self.pair_datasets, self.text_len)

    def _batches(self) -> Iterator[Batch]:
        """The spooled examples as report.sample reads them: rows, criteria by (example, criterion) id, scores."""
        for ex, rs, js, _ in self.rows():
            rubric, crit = self._criteria(ex)
            yield ex, rs, js, crit, score_all(rs, js, rubric)

    def export(self, run_dir: Path, formats: Sequence[str]) -> dict:
        return export_batches(self.cfg, run_dir, formats, self._scored)

    def report(self, run_dir: Path, summary: Summary) -> None:
        """report.html, from the examples the sample picked as the run went, else from a read of the spool."""
        sampled = self._picker
        if sampled is None and self._spool is not None:
            sampled = safely(sample, self._batches(), self.report_examples)
        if sampled is not None:
            safely(write_report, run_dir, summary, sampled)

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
