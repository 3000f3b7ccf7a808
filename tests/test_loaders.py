"""Dataset loader: every schema on the sample files, detection, field mapping, errors, skipping, caps, ids, scale."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from oracles import LoadResult, detect_format, load_dataset, normalize_row

from rubricrun.config import DatasetConfig
from rubricrun.engine.calls import turn_view
from rubricrun.errors import InputError
from rubricrun.types import Turn

DATA = Path(__file__).resolve().parent.parent / "data"


def load(name: str, **kw) -> LoadResult:
    return load_dataset(DatasetConfig(path=str(DATA / f"{name}.jsonl")), **kw)


def write_jsonl(path: Path, rows: list) -> str:
    """Rows are dicts (dumped as JSON) or raw strings (written as they are)."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return str(path)


# --------------------------------------------------------------------------------------------------
# One test per schema, on the sample files


def test_prbench_sample():
    res = load("prbench_sample")
    assert res.skipped == []
    assert [e.id for e in res.examples] == [
        "prbench_sample/prb-fin-001",
        "prbench_sample/prb-law-002",
        "prbench_sample/prb-fin-003",
    ]
    single, legal, split = res.examples
    assert single.dataset == "prbench_sample"
    assert single.source == f"{DATA / 'prbench_sample.jsonl'}:1"
    # reference_texts_0 is prepended to the first user turn, clearly delimited
    (msg,) = single.messages
    assert msg["role"] == "user"
    assert msg["content"].startswith("--- Reference text 1 ---\nAnnual coupon payment = coupon rate x face value.\n")
    assert msg["content"].endswith(
        "--- End of reference text 1 ---\n\nA bond pays a 5% annual coupon on a $1,000 face value. What is the yearly coupon payment?"
    )
    assert [(c.weight, c.category) for c in single.rubric] == [
        (10.0, "Financial Accuracy"),
        (5.0, "Process Transparency & Auditability"),
        (2.0, "Supplemental Insight"),
        (-5.0, "Financial Accuracy"),
    ]
    # multi-turn: prompt_i user, response_i assistant, last prompt is the turn to answer
    assert [m["role"] for m in legal.messages] == ["user", "assistant", "user"]
    assert legal.messages[1]["content"].startswith("Usually a landlord may keep only")
    assert legal.messages[2]["content"] == "I live in California. How long does the landlord have to return it?"
    crit = legal.rubric[3]
    assert crit.id == "prb-law-002-r4"
    assert crit.weight == -8.0
    assert crit.text == "States that the landlord may keep the whole deposit to cover normal wear and tear."
    assert crit.tags == ("weight_class:critically_detrimental",)
    assert legal.metadata["field"] == "Legal" and legal.metadata["task"] == "legal-deposit-return"
    assert [c.weight for c in split.rubric] == [10.0, 8.0, 4.0, -2.0]
    assert all(e.kind == "open" and e.reference is None for e in res.examples)


def test_prbench_weight_class_picks_its_weight_column():
    # Real PRBench annotations carry all six <class>_weight columns; weight_class (spaces or underscores) picks one.
    classes = ["critically important", "important", "slightly important"]
    classes += ["slightly detrimental", "detrimental", "critically detrimental"]
    columns = {c.replace(" ", "_") + "_weight": None for c in classes}
    rubric = [
        {
            "id": "a",
            "title": "A",
            "annotations": columns
            | {
                "weight_class": "critically detrimental",
                "critically_detrimental_weight": -9,
                "important_weight": 5,
                "criteria_category": "Legal Accuracy",
            },
        },
        {
            "id": "b",
            "title": "B",
            "annotations": columns
            | {
                "weight_class": "slightly_important",
                "slightly_important_weight": 2,
                "critically_important_weight": 10,
                "criteria_category": "Practical Utility",
            },
        },
    ]
    ex = normalize_row(
        {"task": "t1", "prompt_0": "q", "rubric": rubric}, "prbench", dataset="p", source="p.jsonl:1", fields={}
    )
    assert ex.id == "p/t1"  # no `id`: the task name
    assert [(c.weight, c.category) for c in ex.rubric] == [(-9.0, "Legal Accuracy"), (2.0, "Practical Utility")]


def test_healthbench_sample():
    res = load("healthbench_sample")
    burn, fever, water = res.examples
    assert burn.id == "healthbench_sample/hb-burn-0001"
    assert [m["role"] for m in fever.messages] == ["user", "assistant", "user"]
    assert fever.messages[-1]["content"] == "Yes, she is playing and drinking. Should I worry?"
    assert [c.id for c in burn.rubric] == ["c1", "c2", "c3", "c4"]
    neg = burn.rubric[2]
    assert neg.weight == -6.0
    assert neg.text == "Recommends putting butter, ice, or toothpaste on the burn."
    assert neg.category == "accuracy"
    assert neg.tags == ("level:example", "axis:accuracy")
    assert fever.rubric[2].weight == -9.0
    assert [c.category for c in water.rubric] == ["context_awareness", "accuracy", "accuracy", "communication_quality"]
    assert burn.metadata["example_tags"] == ["theme:emergency_referrals"]


def test_mc_sample_letters_and_prompt():
    res = load("mc_sample")
    assert [e.answer for e in res.examples] == ["C", "B", "A", "D"]  # index 2, "B", index 0, "D"
    capital, planet, _, gas = res.examples
    assert capital.choices == ("Sydney", "Melbourne", "Canberra", "Perth")
    assert planet.choices == ("Venus", "Mars", "Jupiter", "Saturn")  # option_a..option_d
    assert gas.choices[3] == "Carbon dioxide"
    assert capital.kind == "mc"
    (msg,) = planet.messages
    assert msg["role"] == "user"
    assert msg["content"] == (
        "Which planet is known as the Red Planet?\n\nA. Venus\nB. Mars\nC. Jupiter\nD. Saturn\n\n"
        "Answer with the letter of the correct option (A, B, C, D)."
    )
    assert capital.metadata["language"] == "English" and capital.metadata["subject"] == "Geography"
    assert re.fullmatch(r"mc_sample/[0-9a-f]{12}", capital.id)  # no native id: content hash


def test_qa_sample_gsm8k_final_answer():
    res = load("qa_sample")
    assert [e.answer for e in res.examples] == ["10", "18", "42", "No"]
    sara = res.examples[2]
    assert sara.reference == "Sara reads 7 * 6 = <<7*6=42>>42 pages.\n#### 42"  # the full solution is kept
    assert sara.messages == (
        {"role": "user", "content": "Sara reads 7 pages a day. How many pages does she read in 6 days?"},
    )
    assert sara.kind == "qa"
    legal = res.examples[3]
    assert legal.id == "qa_sample/legal-sof-001"
    assert legal.reference == "No"
    assert legal.metadata["topic"] == "contracts"
    assert all(re.fullmatch(r"qa_sample/[0-9a-f]{12}", e.id) for e in res.examples[:3])


def test_mtbench_sample_turns():
    writing, math, reasoning = load("mtbench_sample").examples
    assert writing.id == "mtbench_sample/101"  # integer question_id kept as a string
    # every turn is asked, each after the candidate's own answer (calls.converse): turn 1 in messages, the rest later
    assert writing.messages == ({"role": "user", "content": "Write a two-sentence thank-you note to a teacher."},)
    assert writing.turns == 2
    assert writing.later_turns == (Turn({"role": "user", "content": "Now rewrite it in a more formal tone."}),)
    assert writing.metadata["category"] == "writing" and "unanswered_turns" not in writing.metadata
    assert math.reference == "12" and math.later_turns[0].reference == "24"  # the reference of each turn
    # pre-written `answers` are no context: turn 1 is asked too (a `response_column: answers` candidate replays them)
    assert reasoning.messages == ({"role": "user", "content": reasoning.messages[0]["content"]},)
    assert reasoning.reference == "Cara" and reasoning.later_turns[0].reference == "Yes"
    v2 = turn_view(reasoning, ["My own answer."])
    assert [m["role"] for m in v2.messages] == ["user", "assistant", "user"]
    assert v2.messages[1]["content"] == "My own answer." and v2.messages[-1]["content"] == "Is Anna taller than Cara?"
    assert v2.reference == "Yes" and v2.id == reasoning.id


def test_generic_sample():
    colors, subject, sky = load("generic_sample").examples
    assert colors.id == "generic_sample/gen-colors"
    assert colors.reference == "Red, yellow and blue."
    assert [(c.id, c.weight, c.category) for c in colors.rubric] == [
        ("c1", 2.0, "instruction_following"),
        ("c2", 3.0, "accuracy"),
        ("c3", -2.0, "accuracy"),  # category from the axis: tag
    ]
    assert subject.messages[0] == {"role": "system", "content": "You are a concise assistant."}
    assert subject.messages[1]["role"] == "user"
    assert [c.id for c in subject.rubric] == ["mentions-friday", "one-line"]
    assert subject.metadata == {"format": "generic", "topic": "writing"}
    assert re.fullmatch(r"generic_sample/[0-9a-f]{12}", sky.id)
    assert sky.rubric[1].weight == 1.0


# --------------------------------------------------------------------------------------------------
# Detection, forced format, field mapping


@pytest.mark.parametrize(
    ("row", "fmt"),
    [
        ({"task": "t", "prompt_0": "q", "rubric": []}, "prbench"),
        ({"prompt_id": "p", "prompt": [{"role": "user", "content": "q"}], "rubrics": []}, "healthbench"),
        ({"question": "q", "choices": ["a", "b"], "answer": 0}, "mc"),
        ({"question": "q", "option_a": "a", "option_b": "b", "answer": "A"}, "mc"),
        ({"question": "q", "answer": "2 + 2 = 4\n#### 4"}, "qa"),
        ({"question_id": 1, "category": "math", "turns": ["q"]}, "mtbench"),
        ({"prompt": "q"}, "generic"),
        ({"messages": [{"role": "user", "content": "q"}]}, "generic"),
        ({"instruction": "q", "output": "a"}, None),
        ({"question": "q"}, None),
    ],
)
def test_detect_format(row, fmt):
    assert detect_format(row) == fmt


def test_field_mapping_auto_and_forced(tmp_path):
    path = write_jsonl(tmp_path / "alpaca.jsonl", [{"uid": "u1", "instruction": "Say hi.", "output": "Hi!"}])
    fields = {"prompt": "instruction", "reference": "output", "id": "uid"}
    for fmt in ("auto", "generic"):
        (ex,) = load_dataset(DatasetConfig(path=path, format=fmt, fields=fields)).examples
        assert ex.id == "alpaca/u1"
        assert ex.messages == ({"role": "user", "content": "Say hi."},)
        assert ex.reference == "Hi!"


def test_forced_format_qa_with_mapping(tmp_path):
    path = write_jsonl(tmp_path / "legal.jsonl", [{"q": "Is a verbal lease for 5 years enforceable?", "a": "No"}])
    (ex,) = load_dataset(DatasetConfig(path=path, format="qa", fields={"question": "q", "answer": "a"})).examples
    assert ex.answer == "No" and ex.messages[0]["content"].startswith("Is a verbal lease")


def test_forced_format_wins_over_detection(tmp_path):
    # a row that auto-detects as generic, forced to qa: the qa keys are required and named
    path = write_jsonl(tmp_path / "x.jsonl", [{"prompt": "hi"}])
    with pytest.raises(InputError) as ei:
        load_dataset(DatasetConfig(path=path, format="qa"))
    assert str(ei.value).startswith(f"{path}:1: key 'question': missing (format 'qa' needs it")


def test_unknown_field_name_is_rejected(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"prompt": "hi"}])
    with pytest.raises(InputError) as ei:
        load_dataset(DatasetConfig(path=path, fields={"promt": "instruction"}))
    assert ei.value.key == "fields.promt"
    assert "unknown field name (accepted: id, prompt, messages" in str(ei.value)


def test_normalize_row_direct():
    ex = normalize_row({"prompt": "hi", "id": 7}, "generic", dataset="d", source="x.jsonl:9", fields={})
    assert ex.id == "d/7" and ex.source == "x.jsonl:9"
    with pytest.raises(InputError) as ei:
        normalize_row({"prompt": "hi", "rubric": []}, "generic", dataset="d", source="x.jsonl:9", fields={})
    assert str(ei.value) == "x.jsonl:9: key 'rubric': the rubric is present but has no criteria"


# --------------------------------------------------------------------------------------------------
# Errors: each names the file, the line and the key


GOOD = {"id": "good", "prompt": "What is 2 + 2?"}
PRB_ANN = {"weight_class": "important", "important_weight": "ten", "criteria_category": "Accuracy"}


@pytest.mark.parametrize(
    ("bad", "fmt", "key", "message"),
    [
        ('{"prompt": "hi",}', "auto", None, "malformed JSON: Expecting property name enclosed in double quotes"),
        ("[1, 2]", "auto", None, "expected a JSON object, got a list"),
        ({"id": "x"}, "generic", "prompt", "missing prompt"),
        ({"prompt": "   "}, "auto", "prompt", "the prompt is empty"),
        ({"task": "t", "prompt_0": "", "response_0": ""}, "auto", "prompt_0", "missing prompt"),
        ({"messages": [{"content": "hi"}]}, "auto", "messages[0].role", "missing role"),
        ({"messages": [{"role": "user"}]}, "auto", "messages[0].content", "missing content"),
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
            "auto",
            "messages",
            "the last message must be a user turn, got role 'assistant'",
        ),
        ({"prompt": "hi", "rubric": []}, "auto", "rubric", "the rubric is present but has no criteria"),
        (
            {"prompt": "hi", "rubric": [{"text": "a"}, {"text": "b"}, {"text": "c", "weight": "heavy"}]},
            "auto",
            "rubric[2].weight",
            "expected a number, got 'heavy'",
        ),
        (
            {"prompt": "hi", "rubric": [{"text": "a", "weight": True}]},
            "auto",
            "rubric[0].weight",
            "expected a number, got True",
        ),
        ({"prompt": "hi", "rubric": [{"weight": 1}]}, "auto", "rubric[0].text", "missing criterion text"),
        (
            {"prompt": "hi", "rubric": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]},
            "auto",
            "rubric[1].id",
            "duplicate criterion id 'a'",
        ),
        (
            {
                "prompt_id": "p",
                "prompt": [{"role": "user", "content": "q"}],
                "rubrics": [{"criterion": "a", "points": "5", "tags": []}],
            },
            "auto",
            "rubrics[0].points",
            "expected a number, got '5'",
        ),
        (
            {
                "prompt_id": "p",
                "prompt": [{"role": "user", "content": "q"}],
                "rubrics": [{"criterion": "a", "tags": []}],
            },
            "auto",
            "rubrics[0].points",
            "missing",
        ),
        (
            {"task": "t", "prompt_0": "q", "rubric": [{"id": "r", "title": "t", "annotations": PRB_ANN}]},
            "auto",
            "rubric[0].annotations.important_weight",
            "expected a number, got 'ten'",
        ),
        (
            {"task": "t", "prompt_0": "q", "response_0": "a"},
            "auto",
            "response_0",
            "the last prompt (prompt_0) already has a response",
        ),
        (
            {"question": "q", "choices": ["a", "b"], "answer": 2},
            "auto",
            "answer",
            "answer index 2 is out of range for 2 choices (0-1)",
        ),
        (
            {"question": "q", "option_a": "a", "option_b": "b", "option_c": "c", "option_d": "d", "answer": "E"},
            "auto",
            "answer",
            "answer 'E' is out of range for 4 choices (A-D)",
        ),
        ({"question": "q", "answer": "no final answer ####"}, "auto", "answer", "nothing after '####'"),
        ({"question_id": 1, "turns": ["q", 3]}, "auto", "turns[1]", "expected a non-empty string, got 3"),
        ({"prompt": "hi", "id": ["x"]}, "auto", "id", "expected a non-empty string or integer id"),
        ({"prompt": "hi", "metadata": "x"}, "auto", "metadata", "expected an object, got a string"),
    ],
)
def test_bad_row_names_file_line_key(tmp_path, bad, fmt, key, message):
    path = write_jsonl(tmp_path / "bad.jsonl", [GOOD, "", bad, GOOD | {"id": "after"}])
    with pytest.raises(InputError) as ei:
        load_dataset(DatasetConfig(path=path, format=fmt))
    e = ei.value
    assert (e.file, e.line, e.key) == (path, 3, key)
    where = f"{path}:3: key '{key}': " if key else f"{path}:3: "
    assert str(e).startswith(where + message), str(e)


def test_unknown_schema_shows_keys_and_config_to_add(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"instruction": "Say hi.", "output": "Hi!"}])
    with pytest.raises(InputError) as ei:
        load_dataset(DatasetConfig(path=path))
    assert str(ei.value) == (
        f"{path}:1: unknown schema (keys: instruction, output); "
        "add to the dataset config: format: generic, fields: {prompt: instruction}"
    )
    # and the suggested mapping does load it
    (ex,) = load_dataset(DatasetConfig(path=path, format="generic", fields={"prompt": "instruction"})).examples
    assert ex.messages[0]["content"] == "Say hi."


def test_invalid_utf8_line(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"prompt": "ok"}\n{"prompt": "\xff\xfe"}\n')
    with pytest.raises(InputError) as ei:
        load_dataset(DatasetConfig(path=str(p)))
    assert str(ei.value).startswith(f"{p}:2: not valid UTF-8")


def test_duplicate_ids_name_both_lines(tmp_path):
    path = write_jsonl(
        tmp_path / "x.jsonl",
        [{"id": "a", "prompt": "one"}, {"id": "b", "prompt": "two"}, {"id": "a", "prompt": "three"}],
    )
    with pytest.raises(InputError) as ei:
        load_dataset(DatasetConfig(path=path))
    assert str(ei.value) == f"{path}:3: key 'id': duplicate id 'a' (first on line 1)"
    # rows without ids: identical messages give the same content id
    path = write_jsonl(tmp_path / "y.jsonl", [{"prompt": "same"}, {"prompt": "other"}, {"prompt": "same"}])
    with pytest.raises(InputError) as ei:
        load_dataset(DatasetConfig(path=path))
    assert str(ei.value).startswith(f"{path}:3: duplicate row: same messages as line 1")


def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.jsonl")
    for mode in ("fail", "skip"):
        with pytest.raises(InputError) as ei:
            load_dataset(DatasetConfig(path=path), on_bad_row=mode)
        assert str(ei.value) == f"{path}: dataset file not found"
        assert ei.value.file == path


def test_unreadable_file(tmp_path):
    path = str(tmp_path)  # a directory cannot be read as a file
    with pytest.raises(InputError) as ei:
        load_dataset(DatasetConfig(path=path), on_bad_row="skip")
    assert str(ei.value).startswith(f"{path}: cannot read dataset file")


# --------------------------------------------------------------------------------------------------
# Skipping, caps, ids, scale


def test_skip_bad_rows_counts_and_reasons(tmp_path):
    rows = [
        {"id": "a", "prompt": "one"},
        "{broken",
        {"id": "b", "prompt": "two", "rubric": [{"text": "x", "weight": "heavy"}]},
        "",
        {"id": "c", "prompt": "three"},
        {"id": "a", "prompt": "dup"},
        '"just a string"',
    ]
    path = write_jsonl(tmp_path / "mixed.jsonl", rows)
    res = load_dataset(DatasetConfig(path=path), on_bad_row="skip")
    assert [e.id for e in res.examples] == ["mixed/a", "mixed/c"]
    assert len(res.skipped) == 4
    assert [s.split(": ", 1)[0] for s in res.skipped] == [f"{path}:{n}" for n in (2, 3, 6, 7)]
    assert res.skipped[1] == f"{path}:3: key 'rubric[0].weight': expected a number, got 'heavy'"
    assert [e.source for e in res.examples] == [f"{path}:1", f"{path}:5"]  # 1-based, blank lines counted
    with pytest.raises(InputError):
        load_dataset(DatasetConfig(path=path))  # the default is to fail


def test_limit_and_max_examples_stop_reading_early(tmp_path):
    rows = [{"id": f"r{i}", "prompt": f"q{i}"} for i in range(5)] + ["{broken"]
    path = write_jsonl(tmp_path / "x.jsonl", rows)
    assert len(load_dataset(DatasetConfig(path=path, limit=3)).examples) == 3
    assert len(load_dataset(DatasetConfig(path=path, limit=4), max_examples=2).examples) == 2
    assert len(load_dataset(DatasetConfig(path=path, limit=2), max_examples=4).examples) == 2
    assert load_dataset(DatasetConfig(path=path), max_examples=0).examples == []
    # reading stops at the cap: the broken last line is never read
    assert [e.id for e in load_dataset(DatasetConfig(path=path, limit=5)).examples][-1] == "x/r4"
    with pytest.raises(InputError):
        load_dataset(DatasetConfig(path=path, limit=6))


def test_ids_stable_when_rows_are_reordered(tmp_path):
    lines = (DATA / "qa_sample.jsonl").read_text(encoding="utf-8").splitlines()
    fwd = load_dataset(DatasetConfig(path=write_jsonl(tmp_path / "fwd.jsonl", lines), name="qa")).examples
    rev = load_dataset(DatasetConfig(path=write_jsonl(tmp_path / "rev.jsonl", lines[::-1]), name="qa")).examples
    assert [e.id for e in fwd] == [e.id for e in rev][::-1]
    assert {e.id: e.messages for e in fwd} == {e.id: e.messages for e in rev}
    assert fwd[0].source.endswith("fwd.jsonl:1") and rev[-1].source.endswith("rev.jsonl:4")
    # the same file as the bundled sample gives the same content ids, under the dataset's own prefix
    sample = load("qa_sample").examples
    assert [e.id.split("/", 1)[1] for e in sample] == [e.id.split("/", 1)[1] for e in fwd]
    assert all(e.id.startswith("qa/") for e in fwd)


def test_100k_generic_rows(tmp_path):
    p = tmp_path / "big.jsonl"
    with p.open("w", encoding="utf-8") as f:
        for i in range(100_000):
            if i % 2:
                f.write(f'{{"id": "r{i}", "prompt": "What is {i} + 1?", "reference": "{i + 1}"}}\n')
            else:
                f.write(f'{{"prompt": "What is {i} + 1?"}}\n')
    res = load_dataset(DatasetConfig(path=str(p)))
    assert len(res.examples) == 100_000 and res.skipped == []
    assert len({e.id for e in res.examples}) == 100_000
    assert res.examples[-1].id == "big/r99999" and res.examples[-1].reference == "100000"
    assert res.examples[-1].source == f"{p}:100000"
