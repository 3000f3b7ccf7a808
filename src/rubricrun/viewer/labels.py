"""Human labels: appended to `outputs/<run_id>/labels.jsonl`, and the labelling sheet worked through in order.

A labels file (the format `datasets[].labels` reads) holds one row per human verdict: `response_id` (the `id` of a
row of responses.jsonl), `criterion_id` (as in judgments.jsonl), `met` (true / false) for binary rubrics or
`score` (a number) for graded scales, and `rater`; other columns are ignored, so the viewer adds `time`. Every
click appends a row; the latest row of a rater for a (response, criterion) is that rater's label.

Appending is safe under concurrent posts: one `write` of a whole line on a file opened with O_APPEND, under an
exclusive flock (another viewer, or a script appending at the same time, takes turns), after a newline if the file
did not end with one. `label_sheet.jsonl` (written by the labelling sheet command) lists one row per (response,
criterion) to label, in order; the viewer shows the first that has no label yet.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..judging.protocol import SCALES

LABELS = "labels.jsonl"
SHEET = "label_sheet.jsonl"
RATER_MAX = 100
_lock = threading.Lock()


class LabelError(ValueError):
    """A label a client sent that cannot be written (the message says why)."""


def label_row(body: Any) -> dict[str, Any]:
    """A posted label checked and made a labels.jsonl row: {response_id, criterion_id, met | score, rater, time}."""
    if not isinstance(body, dict):
        raise LabelError("the body must be a JSON object")
    row: dict[str, Any] = {}
    for key in ("response_id", "criterion_id"):
        value = body.get(key)
        if not isinstance(value, str) or not value:
            raise LabelError(f"`{key}` must be a non-empty string")
        row[key] = value
    met, score = body.get("met"), body.get("score")
    if (met is None) == (score is None):
        raise LabelError("give exactly one of `met` (true or false) and `score` (a number)")
    if met is not None and not isinstance(met, bool):
        raise LabelError("`met` must be true or false")
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score)
    ):
        raise LabelError("`score` must be a finite number")
    row["met" if met is not None else "score"] = met if met is not None else score
    rater = body.get("rater")
    if rater is not None and (not isinstance(rater, str) or len(rater) > RATER_MAX):
        raise LabelError(f"`rater` must be a string of at most {RATER_MAX} characters")
    row["rater"] = rater or None
    row["time"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return row


def check_scale(row: dict[str, Any], scale: str) -> None:
    """A label that data/labels.py will read for a dataset on `scale` (views.labels_scale): `met` on a binary
    one, a `score` on the scale on a graded one. LabelError (data/labels.py's words) otherwise: a row it cannot read
    would make the run's labels file bad input."""
    if scale not in SCALES:
        if "score" in row:
            raise LabelError("this dataset is judged met / not met: give `met` (true or false), not `score`")
        return
    lo, hi = SCALES[scale]
    if "met" in row:
        raise LabelError(f"this dataset is judged on a {scale} scale: give `score`, not `met`")
    if not lo <= row["score"] <= hi:
        raise LabelError(f"`score` must be on the {scale} scale ({lo:g} to {hi:g}), not {row['score']!r}")


def append_label(run_dir: Path, row: dict[str, Any]) -> None:
    data = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
    with _lock:
        fd = os.open(run_dir / LABELS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and _last_byte(run_dir / LABELS, size) != b"\n":
                data = b"\n" + data  # a line someone left unfinished stays apart from ours
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)


def _last_byte(path: Path, size: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(size - 1)
        return fh.read(1)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON object lines of a file ([] when it is missing); a line that is not one is skipped."""
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    out.append(row)
    except FileNotFoundError:
        pass
    return out


def read_labels(run_dir: Path) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(run_dir / LABELS) if isinstance(r.get("response_id"), str)]


def latest(labels: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(response id, criterion id) -> each rater's latest label, in the order the raters first labelled it."""
    out: dict[tuple[str, str], dict[Any, dict[str, Any]]] = {}
    for row in labels:
        out.setdefault((row["response_id"], str(row.get("criterion_id"))), {})[row.get("rater")] = row
    return {k: list(v.values()) for k, v in out.items()}


def read_sheet(run_dir: Path) -> list[dict[str, Any]] | None:
    """label_sheet.jsonl's rows in order, or None when the run folder has none."""
    if not (run_dir / SHEET).is_file():
        return None
    return [r for r in read_jsonl(run_dir / SHEET) if isinstance(r.get("response_id"), str)]


def done_keys(labels: list[dict[str, Any]], rater: str | None) -> set[tuple[str, str]]:
    """The (response id, criterion id) pairs labelled, by `rater` when given, else by anyone."""
    return {(r["response_id"], str(r.get("criterion_id"))) for r in labels if not rater or r.get("rater") == rater}
