"""The one lenient-JSON reader (data/jsonread.py) as the judge parser and the synthesis parser use it: the
cases it must read beyond what tests/test_judge_prompt.py and tests/test_synth.py already pin."""

from __future__ import annotations

import pytest

from rubricrun.data.jsonread import quoted_in, strict_values, walk
from rubricrun.data.synth import parse_json_list
from rubricrun.judging.protocol import parse_judge_reply


@pytest.mark.parametrize(
    ("text", "met", "explanation"),
    [
        ("{'explanation': 'single quotes', 'criteria_met': True}", True, "single quotes"),  # Python dict style
        ('{"explanation": "trailing comma", "criteria_met": false,}', False, "trailing comma"),
        ('{"explanation": "a missing comma" "criteria_met": true}', True, "a missing comma"),
        ("```json\n{'explanation': 'fenced', 'criteria_met': false}\n```\nDone.", False, "fenced"),
        ('Verdict: {explanation: "bare keys", criteria_met: true} (end)', True, "bare keys"),
    ],
)
def test_judge_reply_repaired(text: str, met: bool, explanation: str) -> None:
    p = parse_judge_reply(text)
    assert (p.verdict, p.explanation, p.error) == ("met" if met else "not_met", explanation, None)


def test_two_complete_verdicts_the_first_wins() -> None:
    text = '{"explanation": "a", "criteria_met": true}\n{"explanation": "b", "criteria_met": false}'
    assert parse_judge_reply(text).explanation == "a"
    # a fenced block is read before the prose around it, as before
    fenced = 'Like {"explanation": "prose", "criteria_met": false}:\n```json\n{"explanation": "f", "criteria_met": true}\n```'
    assert parse_judge_reply(fenced).explanation == "f"


@pytest.mark.parametrize(
    "text",
    [
        '{"explanation": "cut after the verdict", "criteria_met": true',  # json-repair would close it: a guess
        '{"criteria_met": true, "explanation": "the verdict came first but the reply was cut',
        "{'explanation': 'single quotes, cut', 'criteria_met': Tr",
    ],
)
def test_truncated_verdict_is_an_error_not_a_guess(text: str) -> None:
    p = parse_judge_reply(text, finish_reason="length")
    assert p.verdict == "error" and p.error


def test_synthesis_list_repaired_keeps_only_complete_double_quoted_items() -> None:
    assert parse_json_list('```json\n["a", "b",\n  "c",]\n```') == ["a", "b", "c"]
    assert parse_json_list('{"prompts": ["a", "b", "half') == ["a", "b"]
    assert parse_json_list("[\"a\", 'b', c]") == ["a"]


def test_helpers() -> None:
    assert list(strict_values('x {"a": [1]} y [2')) == [{"a": [1]}, [1]]  # every complete value, nested too
    assert list(walk({"a": [1, {"b": 2}]})) == [{"a": [1, {"b": 2}]}, [1, {"b": 2}], 1, {"b": 2}, 2]
    assert quoted_in('say "hi"', r'["say \"hi\""]') and quoted_in("café", r'["caf\u00e9"]')
    assert not quoted_in("b", "['b']") and not quoted_in("cut", '["cut')
