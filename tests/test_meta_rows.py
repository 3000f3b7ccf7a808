"""tasks/meta_eval.meta_row: HealthBench meta-eval rows (with tasks/meta_eval.py's key map) and generic rows (with
`fields`) as MetaRows; bad rows named."""

from __future__ import annotations

import pytest
from oracles import meta_rows

from rubricrun.errors import InputError
from rubricrun.tasks.meta_eval import KEYS, MetaRow, meta_row

# A row shaped like HealthBench's 2025-05-07-06-14-12_oss_meta_eval.jsonl (the keys healthbench_meta_eval.py reads).
HB_ROW = {
    "prompt": [{"role": "user", "content": "I have had a headache for three days."}],
    "completion": "See a doctor if it gets worse.",
    "rubric": "Asks about red-flag symptoms such as fever or neck stiffness.",
    "category": "cluster:context_seeking_enough-context_helpful_safe",
    "binary_labels": [False, True, False],
    "anonymized_physician_ids": ["p-17", "p-3", "p-40"],
    "prompt_id": "abc",
    "completion_id": "abc-2",
}


def test_healthbench_row() -> None:
    row = meta_row(HB_ROW, fields=KEYS)
    assert row == MetaRow(
        prompt_id="abc",
        completion_id="abc-2",
        messages=({"role": "user", "content": "I have had a headache for three days."},),
        completion="See a doctor if it gets worse.",
        criterion="Asks about red-flag symptoms such as fever or neck stiffness.",
        category="cluster:context_seeking_enough-context_helpful_safe",
        labels=(False, True, False),
        rater_ids=("p-17", "p-3", "p-40"),
    )


def test_generic_rows_with_fields() -> None:
    rows = [
        {"q": "What is 2+2?", "a": "4", "rule": "Gives 4.", "votes": ["met", "met", "not met"], "meta": {"c": "math"}},
        {"q": "Hi", "a": "Hello", "rule": "Greets back.", "votes": 1},
    ]
    fields = {"prompt": "q", "response": "a", "criterion": "rule", "labels": "votes", "category": "meta.c"}
    first, second = meta_rows(rows, fields=fields, file="m.jsonl")
    assert first.messages == ({"role": "user", "content": "What is 2+2?"},) and first.category == "math"
    assert first.labels == (True, True, False) and first.rater_ids == ()
    assert (first.prompt_id, second.prompt_id) == ("1", "2")  # no ids: the row's number
    assert second.labels == (True,) and second.category == ""


def test_generic_messages_and_ids() -> None:
    row = {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "response": "Hello",
        "criterion": "Greets back.",
        "labels": [True, 0],
        "rater_ids": [7, 8],
        "prompt_id": 12,
    }
    r = meta_row(row)
    assert len(r.messages) == 2 and r.labels == (True, False) and r.rater_ids == ("7", "8") and r.prompt_id == "12"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"binary_labels": None}, "key 'binary_labels': missing"),
        ({"binary_labels": []}, "the label list is empty"),
        ({"binary_labels": [True, "maybe"]}, r"key 'binary_labels\[1\]': expected a label"),
        ({"anonymized_physician_ids": ["p-1"]}, "expected a list of 3 rater ids"),
        ({"completion": ""}, "key 'completion': expected a non-empty string"),
        ({"rubric": None}, "key 'rubric': missing"),
        ({"prompt": None}, "key 'prompt': missing"),
        ({"prompt": [{"role": "user"}]}, r"key 'prompt\[0\].content': missing content"),
    ],
)
def test_bad_rows_are_named(change: dict, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        meta_rows([HB_ROW, {**HB_ROW, **change}], fields=KEYS, file="meta.jsonl")
    assert str(err.value).startswith("meta.jsonl:2")


def test_bad_fields_and_rows() -> None:
    with pytest.raises(InputError, match="key 'fields.answer': unknown field name"):
        meta_row(HB_ROW, fields={"answer": "completion"})
    with pytest.raises(InputError, match="expected a JSON object"):
        meta_row(["not", "a", "row"])  # type: ignore[arg-type]
