"""Human labels of a run's responses (`datasets[].labels: PATH`, JSONL or CSV; any file data/readers.py reads), one
row per human verdict. The contract (docs/statistics.md, "Scores anchored to human labels"):

- a rubric verdict: `response_id` (a row of responses.jsonl), `criterion_id` (as in judgments.jsonl), and `met`
  (true / false) on a binary scale or `score` (a number on the scale) on a graded one;
- a pairwise verdict: `pair_id` (the `id` of a pairwise row of judgments.jsonl) and `preferred` (the name of the
  candidate the rater preferred, or `tie`);
- optional `rater`, and optional `dataset`: one file can serve several datasets (a run's labels.jsonl, a filled
  sheet), and each dataset reads only its own rows and those that name none; every other column is ignored, so a
  filled labelling sheet (results/label_sheet.py) is a labels file. A row whose verdict is still empty (an unfilled sheet row) is not a label: it is counted as `blank`.

A row of the same rater on the same item replaces the earlier one (the labelling page appends corrections), counted
as `superseded`. A malformed row is bad input: InputError naming the file, its line and the column.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import Config, DatasetConfig, dataset_name
from ..errors import InputError
from .readers import read_rows

Scale = tuple[float, float] | None  # a graded scale's lowest and highest score; None: met / not met
TIE = "tie"  # `preferred` of a pairwise verdict that prefers neither answer
_TRUE = frozenset({"true", "yes", "1", "met", "y", "t"})
_FALSE = frozenset({"false", "no", "0", "not_met", "not met", "n", "f"})


@dataclass(frozen=True)
class LabelFile:
    """One dataset's labels file, read: each rater's last verdict per item."""

    path: str
    verdicts: dict[tuple[str, str], dict[str, bool | float]] = field(default_factory=dict)  # (response, criterion)
    preferences: dict[str, dict[str, str]] = field(default_factory=dict)  # pair id -> rater -> preferred
    rows: int = 0  # label rows read (blank ones not counted)
    blank: int = 0  # rows with no verdict yet
    superseded: int = 0  # rows replaced by a later row of the same rater on the same item


def read_labels(
    path: str, *, scale: Scale = None, candidates: Collection[str] = (), dataset: str | None = None
) -> LabelFile:
    """The labels at `path` for a dataset judged met / not met (`scale` None) or on a graded scale (its (lowest,
    highest) score). `candidates`: the names a pairwise `preferred` may give (besides `tie`). With `dataset`, a row
    whose `dataset` column names another one is not this dataset's (it may be on another scale) and is passed over.
    Raises InputError (file, line, column) on a malformed row."""
    verdicts: dict[tuple[str, str], dict[str, bool | float]] = {}
    preferences: dict[str, dict[str, str]] = {}
    rows = blank = superseded = 0
    for raw in read_rows(DatasetConfig(path=path)):
        row = _Row(raw.object(), raw.file, raw.line)
        if dataset is not None and row.get("dataset") not in (None, dataset):
            continue
        rater = row.text("rater", required=False) or ""
        store: dict[Any, dict[str, Any]]
        if row.get("pair_id") is not None:
            item, value, store = row.text("pair_id"), _preferred(row, candidates), preferences
        else:
            item, value, store = (row.text("response_id"), row.text("criterion_id")), _verdict(row, scale), verdicts
        if value is None:
            blank += 1
            continue
        rows += 1
        votes = store.setdefault(item, {})
        superseded += rater in votes
        votes[rater] = value
    return LabelFile(path, verdicts, preferences, rows, blank, superseded)


@dataclass(frozen=True)
class _Row:
    """One label row and where it is, for its errors. An empty cell reads as absent."""

    value: dict[str, Any]
    file: str
    line: int | None

    def get(self, key: str) -> Any:
        v = self.value.get(key)
        return None if v == "" else v

    def fail(self, key: str, message: str) -> InputError:
        return InputError(message, file=self.file, line=self.line, key=key)

    def text(self, key: str, *, required: bool = True) -> str | None:
        v = self.get(key)
        if v is None:
            if required:
                raise self.fail(key, "missing (a label row names the response and criterion, or the pair, it judges)")
            return None
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise self.fail(key, f"expected a string, got {v!r}")
        return str(v)


def _verdict(row: _Row, scale: Scale) -> bool | float | None:
    """`met` on the binary scale, `score` on a graded one; None when the row gives neither (blank)."""
    met, score = row.get("met"), row.get("score")
    if scale is not None:
        if score is None:
            if met is not None:
                raise row.fail("met", f"this dataset is judged on a {_name(scale)} scale: give `score`, not `met`")
            return None
        return _score(row, score, scale)
    if met is None:
        if score is not None:
            raise row.fail("score", "this dataset is judged met / not met: give `met` (true or false), not `score`")
        return None
    if isinstance(met, bool):
        return met
    if isinstance(met, int) and met in (0, 1):
        return bool(met)
    if isinstance(met, str) and met.strip().lower() in _TRUE | _FALSE:
        return met.strip().lower() in _TRUE
    raise row.fail("met", f"expected true or false, got {met!r}")


def _name(scale: tuple[float, float]) -> str:
    return f"{scale[0]:g}-{scale[1]:g}"


def _score(row: _Row, v: Any, scale: tuple[float, float]) -> float:
    try:
        x = None if isinstance(v, bool) else float(v)
    except (TypeError, ValueError):
        x = None
    if x is None or not scale[0] <= x <= scale[1]:
        raise row.fail("score", f"expected a number on the {_name(scale)} scale, got {v!r}")
    return x


def _preferred(row: _Row, candidates: Collection[str]) -> str | None:
    v = row.get("preferred")
    if v is None:
        return None
    if not isinstance(v, str) or (v != TIE and v not in candidates):
        names = ", ".join([*candidates, TIE])
        raise row.fail("preferred", f"expected the preferred candidate's name or '{TIE}' ({names}), got {v!r}")
    return v


def label_paths(cfg: Config) -> dict[str, tuple[int, str]]:
    """Dataset name -> (its index in the config, its labels file), for the datasets with `labels:`."""
    return {dataset_name(d): (i, d.labels) for i, d in enumerate(cfg.datasets) if d.labels}


def load_labels(cfg: Config, scales: Mapping[str, Scale]) -> dict[str, LabelFile]:
    """Every dataset's labels file, read for its scale (`scales`: dataset -> the scale its metric reads, None for
    met / not met; a dataset not in it is left out). A file that cannot be read names its config key."""
    out = {}
    names = [c.name for c in cfg.candidates]
    for name, (i, path) in label_paths(cfg).items():
        if name not in scales:
            continue
        try:
            out[name] = read_labels(path, scale=scales[name], candidates=names, dataset=name)
        except InputError as exc:
            if exc.line is not None:
                raise
            raise cfg.fail(f"datasets[{i}].labels", f"{path}: {_reason(exc)}") from None
    return out


def _reason(exc: InputError) -> str:
    text = str(exc).split(": ", 1)[-1] if exc.file else str(exc)
    return text.replace("dataset file", "labels file")
