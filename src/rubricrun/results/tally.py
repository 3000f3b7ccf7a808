"""What a run's results need, fed one example at a time in input order: the summary, the export and the report.

The runner hands every finished example to `Tally.add` with its rows (responses, judgments, pairwise rows), in
input order, and asks for the summary, the export files and report.html at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..config import Config
from ..types import Example, Judgment, PairJudgment, Response, Summary
from .export import export_all
from .report import write_report_safely
from .scoring import score_all
from .summary import build_summary, criteria_index


class Tally:
    """The rows of a run, example by example. (Today it keeps every row; summary() equals build_summary over them.)"""

    def __init__(self, cfg: Config, run_id: str) -> None:
        self.cfg, self.run_id = cfg, run_id
        self.examples: list[Example] = []
        self.responses: list[Response] = []
        self.judgments: list[Judgment] = []
        self.pairs: list[PairJudgment] = []

    def add(
        self,
        example: Example,
        responses: Sequence[Response],
        judgments: Sequence[Judgment],
        pairs: Sequence[PairJudgment],
    ) -> None:
        """One example with its rows (an example with no responses yet still counts as an example)."""
        self.examples.append(example)
        self.responses.extend(responses)
        self.judgments.extend(judgments)
        self.pairs.extend(pairs)

    @property
    def n_responses(self) -> int:
        return len(self.responses)

    @property
    def any_ok(self) -> bool:
        return any(r.status == "ok" for r in self.responses)

    @property
    def first_error(self) -> str | None:
        return next((r.error for r in self.responses if r.error), None)

    def _scored(self) -> tuple[dict, dict]:
        by_id = {ex.id: ex for ex in self.examples}
        return score_all(self.cfg, by_id, self.responses, self.judgments), criteria_index(self.cfg, self.examples)

    def summary(self) -> Summary:
        scores, criteria = self._scored()
        return build_summary(
            self.cfg, self.run_id, self.examples, self.responses, self.judgments, scores, criteria, pairs=self.pairs
        )

    def export(self, run_dir: Path, formats: Sequence[str]) -> dict:
        scores, _ = self._scored()
        return export_all(self.cfg, run_dir, list(formats), self.examples, self.responses, self.judgments, scores)

    def report(self, run_dir: Path, summary: Summary) -> None:
        scores, criteria = self._scored()
        write_report_safely(run_dir, summary, self.examples, self.responses, self.judgments, criteria, scores)
