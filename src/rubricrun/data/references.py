"""Reference answers kept apart from the questions (`datasets[].references`: FastChat's MT-Bench
`reference_answer/gpt-4.jsonl`, or `{question_id, reference}` rows), joined to the examples by native id: turn 1's to
`reference`, each later turn's to its `later_turns[k].reference`, all to `metadata["references"]`; an empty reference
in the file leaves the row's own. Format: docs/judging.md (Reference-guided judging).
"""

from __future__ import annotations

import msgspec

from ..types import Example
from .readers import file_rows
from .schemas import Fail, fail_at


def load_references(path: str) -> dict[str, list[str]]:
    """question_id (as a string) -> one reference per turn. Bad rows are InputErrors naming file, line and key."""
    out: dict[str, list[str]] = {}
    for raw in file_rows(path):
        row, fail = raw.object(), fail_at(raw.file, raw.line)
        if row.get("question_id") is None:
            fail("question_id", "expected an object with a question_id")
        out[str(row["question_id"])] = _turns(row, fail)
    return out


def _turns(row: dict, fail: Fail) -> list[str]:
    if "choices" in row:
        choices = row["choices"]
        turns = (
            choices[0].get("turns") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        )
        key = "choices[0].turns"
    else:
        turns, key = row.get("reference"), "reference"
        turns = [turns] if isinstance(turns, str) else turns
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
        fail(key, "expected a non-empty list of reference answers (strings), one per turn")
    return turns


def join_references(ex: Example, references: dict[str, list[str]]) -> Example:
    """The example with its references joined; an example without a row in the file is returned as it is."""
    native = str(ex.metadata.get("question_id", ex.id.removeprefix(f"{ex.dataset}/")))
    turns = references.get(native)
    if turns is None:
        return ex
    metadata = {**ex.metadata, "references": list(turns)}
    later = tuple(
        msgspec.structs.replace(t, reference=turns[k] if k < len(turns) and turns[k] else t.reference)
        for k, t in enumerate(ex.later_turns, start=1)
    )
    own = turns[0] if turns[0] else ex.reference
    return msgspec.structs.replace(ex, reference=own, metadata=metadata, later_turns=later)
