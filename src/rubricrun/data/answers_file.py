"""Answers you already have: a candidate with `responses_from: <file>` (MT-Bench `model_answer` rows or generic
`{id, response, turn}` rows, read like a dataset) or `response_column: <key>` (a column of the dataset rows) replays
them instead of calling a model, and they are judged like any other response. Formats: docs/datasets.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config import Config, ModelConfig
from ..types import Example
from .readers import file_rows
from .schemas import Fail, fail_at, native_id, type_name

Answers = dict[tuple[str, int], str]  # (id, 1-based turn) -> answer text
# Answer rows of one task's own shape: ((id, turn), answer) pairs, or None for a row it does not know.
AnswerReader = Callable[[Mapping[str, Any], Fail], "list[tuple[tuple[str, int], str]] | None"]


def load_answers(path: str, readers: Sequence[tuple[str, AnswerReader]] = ()) -> Answers:
    """Every answer in the file. `readers`: (what rows it reads, reader) for answer rows of a task's own shape
    (tasks.registry.ANSWER_READERS), tried before generic {id, response} rows. A bad file or row is an InputError
    naming the file, line and key."""
    answers: Answers = {}
    for raw in file_rows(path):
        fail = fail_at(raw.file, raw.line)
        for (id_, turn), text in _row_answers(raw.object(), fail, readers):
            if (id_, turn) in answers:
                fail(None, f"a second answer for id {id_!r} turn {turn}")
            answers[(id_, turn)] = text
    return answers


def _row_answers(
    row: dict[str, Any], fail: Fail, readers: Sequence[tuple[str, AnswerReader]]
) -> list[tuple[tuple[str, int], str]]:
    for _, read in readers:
        got = read(row, fail)
        if got is not None:
            return got
    if "id" in row and "response" in row:
        if not isinstance(row["response"], str):
            fail("response", f"expected a string, got {type_name(row['response'])}")
        turn = row.get("turn", 1)
        if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
            fail("turn", f"expected a turn number >= 1, got {turn!r}")
        return [((str(native_id(row["id"], "id", fail)), turn), row["response"])]
    shown = ", ".join(sorted(map(str, row))) or "none"
    shapes = [shape for shape, _ in readers] + ["{id, response} rows"]
    fail(None, f"expected {' or '.join(shapes)}; this row has keys: {shown}")


def load_replays(cfg: Config, readers: Sequence[tuple[str, AnswerReader]] = ()) -> dict[str, Answers]:
    """The answers file of every `responses_from` candidate, by candidate name (`readers` as load_answers')."""
    return {c.name: load_answers(c.responses_from, readers) for c in cfg.candidates if c.responses_from}


def replay_model(cand: ModelConfig) -> str:
    """What a replayed response's `model` says: where its answers came from."""
    return f"file:{cand.responses_from}" if cand.responses_from else f"column:{cand.response_column}"


def replayed_answer(
    cand: ModelConfig, answers: Answers | None, ex: Example, turn: int
) -> tuple[str | None, str | None]:
    """(answer, None), or (None, why there is none) for the example's turn."""
    which = f" turn {turn}" if ex.turns > 1 else ""
    if cand.response_column:
        value = ex.prefilled.get(cand.response_column)
        if isinstance(value, list):
            value = value[turn - 1] if turn <= len(value) else None
        elif turn > 1:
            value = None
        if isinstance(value, str):
            return value, None
        return None, f"no answer in column '{cand.response_column}' for {ex.id}{which}"
    for id_ in (ex.id.removeprefix(f"{ex.dataset}/"), ex.id):
        if answers is not None and (id_, turn) in answers:
            return answers[(id_, turn)], None
    return None, f"no answer in {cand.responses_from} for {ex.id}{which}"
