"""The labelling sheet: `python run.py --label-sheet outputs/<run_id>` (or `rubricrun label-sheet outputs/<run_id>`)
writes label_sheet.jsonl and label_sheet.csv into the run folder, one row per (response, criterion) of a random
sample of the run's judged responses, in the order to label them, with an empty `met` (or `score`) for a person to
fill in. The judge's verdicts are never on it. A filled sheet is a labels file (`datasets[].labels`, data/labels.py).

The sample is random and stratified by dataset and candidate: per dataset, the examples in a random order (seeded
with the run's `run.seed`), the first `size` of them (`--sheet-size`), and for each every candidate's response to it (one
response per example and candidate, drawn at random among its samples and turns with one draw per example, so that
candidates with as many responses get the same sample and turn and their difference is paired). Rows go example by
example, the datasets in turn, so that a sheet labelled from the top and stopped anywhere is still a random sample of
every dataset and candidate. PPI needs exactly that: the labelled responses drawn at random (docs/statistics.md).
"""

from __future__ import annotations

import csv
import io
import logging
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..judging.answers import AUTO_CRITERION
from ..judging.prompt import content_text
from ..judging.protocol import SCALES
from ..tasks import registry
from ..types import Criterion, Example, Response
from . import artifacts
from .artifacts import RunData, load_run

log = logging.getLogger("rubricrun")
SHEET_SIZE = 50  # examples per dataset
COLUMNS = (
    "response_id",
    "criterion_id",
    "dataset",
    "candidate",
    "example_id",
    "turn",
    "sample_index",
    "scale",  # what to fill: `met` (binary) or `score` on this scale
    "criterion",
    "prompt",
    "response",
    "met",
    "score",
    "rater",
)


def write_label_sheet(run_dir: str | Path, *, size: int = SHEET_SIZE) -> tuple[Path, int]:
    """label_sheet.jsonl and label_sheet.csv in `run_dir` (a finished run folder); returns the folder and the rows.
    The draw is seeded with the run's `run.seed`."""
    run = load_run(run_dir)
    rows = sheet_rows(run, size=size, seed=run.seed)
    artifacts.write_jsonl(run.path / "label_sheet.jsonl", rows)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    artifacts.write_text(run.path / "label_sheet.csv", buf.getvalue())
    return run.path, len(rows)


def label_sheet_command(run_dir: str, size: int | None) -> int:
    """`--label-sheet RUN [--sheet-size N]`: write the sheet, print the CSV's path, say how to use it."""
    size = SHEET_SIZE if size is None else size
    if size < 1:
        raise InputError("must be at least 1", key="--sheet-size")
    folder, rows = write_label_sheet(run_dir, size=size)
    print(folder / "label_sheet.csv")
    log.info(
        "%d rows to label in %s (and label_sheet.jsonl): fill `met` (or `score`) from the top, set "
        "datasets[].labels to the filled file, rerun with the same --run-id (every call comes from the cache)",
        rows,
        folder / "label_sheet.csv",
    )
    return 0


def sheet_rows(run: RunData, *, size: int, seed: int) -> list[dict[str, Any]]:
    """The sheet's rows, in order (the module docstring)."""
    judged: dict[str, list[str]] = defaultdict(list)  # response id -> criterion ids judged, in order
    for j in run.judgments:
        judged[j.response_id].append(j.criterion_id)
    responses: dict[str, list[Response]] = defaultdict(list)
    for r in run.responses:
        if r.status == "ok" and r.id in judged:
            responses[r.example_id].append(r)
    by_dataset: dict[str, list[Example]] = defaultdict(list)
    for ex in run.examples:
        if ex.id in responses and not registry.answers_itself(ex):
            by_dataset[ex.dataset].append(ex)
    rng = random.Random(seed)
    picked = {name: rng.sample(exs, min(size, len(exs))) for name, exs in by_dataset.items()}
    scales = {name: label_scale(run.summary, name) for name in by_dataset}
    out = []
    for k in range(max((len(p) for p in picked.values()), default=0)):
        for name, exs in picked.items():
            if k < len(exs):
                ex, u = exs[k], rng.random()
                for r in _one_per_candidate(responses[ex.id], u):
                    out += _rows(ex, r, responses[ex.id], judged[r.id], run.default_rubric, scales[name])
    return out


def label_scale(summary: Mapping[str, Any], dataset: str) -> str:
    """What the dataset's labels give, from summary.json's data: a graded scale's name, else `binary` (met / not
    met). The viewer asks the same when a person labels."""
    metric = ((summary.get("datasets") or {}).get(dataset) or {}).get("metric")
    scale = registry.METRICS[metric].scale if metric in registry.METRICS else "binary"
    return scale if scale in SCALES else "binary"


def _one_per_candidate(responses: Sequence[Response], u: float) -> list[Response]:
    """Per candidate (in response order), its response at position floor(u * count) of its (turn, sample) order."""
    mine: dict[str, list[Response]] = defaultdict(list)
    for r in responses:
        mine[r.candidate].append(r)
    return [sorted(rs, key=lambda r: (r.turn, r.sample_index))[int(u * len(rs))] for rs in mine.values()]


def _rows(
    ex: Example,
    r: Response,
    siblings: Sequence[Response],
    criteria: Sequence[str],
    default_rubric: Sequence[Criterion],
    scale: str,
) -> list[dict[str, Any]]:
    texts = {c.id: c.text for c in (AUTO_CRITERION, *default_rubric, *ex.rubric)}  # the rubric's own text wins
    if scale != "binary" and (rating := registry.protocol_for(scale).rating_criterion) is not None:
        texts.setdefault(rating.id, rating.text)  # a scale that rates the whole answer (1-10)
    prompt = conversation(ex, r, siblings)
    return [
        {
            "response_id": r.id,
            "criterion_id": cid,
            "dataset": ex.dataset,
            "candidate": r.candidate,
            "example_id": ex.id,
            "turn": r.turn,
            "sample_index": r.sample_index,
            "scale": scale,
            "criterion": texts.get(cid, cid),
            "prompt": prompt,
            "response": r.text or "",
            "met": None,
            "score": None,
            "rater": None,
        }
        for cid in dict.fromkeys(criteria)
    ]


def conversation(ex: Example, r: Response, siblings: Sequence[Response]) -> str:
    """What the candidate was asked for this response, as text: the example's messages, and at a later turn the
    candidate's own earlier answers (the same sample's) and the later user turns."""
    messages = list(ex.messages)
    earlier = {
        s.turn: s.text or "" for s in siblings if s.candidate == r.candidate and s.sample_index == r.sample_index
    }
    for t, later in enumerate(ex.later_turns[: r.turn - 1], 2):
        messages += [{"role": "assistant", "content": earlier.get(t - 1, "")}, later.message]
    if len(messages) == 1:
        return content_text(messages[0].get("content"))
    return "\n\n".join(f"{m.get('role', 'user')}: {content_text(m.get('content'))}" for m in messages)
