from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml

from rubricrun.config import SynthesizeConfig, load_config
from rubricrun.data.synth import (
    SynthLog,
    _with_buffer,
    dedupe,
    load_template,
    parse_json_list,
    render,
    synthesize,
)
from rubricrun.errors import InputError, ProviderError
from rubricrun.types import LLMResponse


class ScriptedCall:
    """A fake model: answers from a queue (a str or an exception to raise) and records what it was asked."""

    def __init__(self, *replies: str | Exception):
        self.replies = list(replies)
        self.calls: list[tuple[list[dict], int]] = []

    def __call__(self, messages: list[dict], attempt: int) -> LLMResponse:
        self.calls.append((messages, attempt))
        if not self.replies:
            raise AssertionError(f"unexpected call #{len(self.calls)}: {messages[-1]['content']!r}")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return LLMResponse(text=reply)

    def prompt(self, i: int) -> str:
        return self.calls[i][0][-1]["content"]

    @property
    def attempts(self) -> list[int]:
        return [a for _, a in self.calls]


# --------------------------------------------------------------------------------------------------
# parse_json_list


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('```json\n["a", "b"]\n```', ["a", "b"]),
        ('```\n["a", "b"]\n```\nDone.', ["a", "b"]),
        ('Sure! Here you go: ["a", "b"] Hope this helps [smile]', ["a", "b"]),
        ('[1] see below\n["a"]', ["a"]),  # a bracket in the prose before the array
        ('{"prompts": ["a", "b"]}', ["a", "b"]),
        ('["a", "b",]', ["a", "b"]),
        ('[\n  "a",\n  "b",\n]\n', ["a", "b"]),
        ('["a",, "b"]', ["a", "b"]),
        ('["a" "b"]', ["a", "b"]),  # a missing comma between strings
        ('["a", "b", "c is cut o', ["a", "b"]),  # truncated mid-string
        ('["a", "b", ', ["a", "b"]),  # truncated after a comma
        ('["say \\"hi\\"", "b', ['say "hi"']),  # escaped quotes are not a string end
        ('["a", 1, null, ["x"], {"k": "v"}, true, 2.5, "b"]', ["a", "b"]),  # non-strings skipped
        ('["  padded  ", "", "   ", "caf\\u00e9"]', ["padded", "café"]),
        ('["line one\nline two"]', ["line one\nline two"]),  # raw newline inside a string
        ("", []),
        ("   ", []),
        ("[]", []),
        ("I like turtles.", []),
        ("[apple, banana]", []),  # bare words are not JSON
        ("['a', 'b']", []),  # single quotes are not JSON
    ],
)
def test_parse_json_list(text: str, expected: list[str]) -> None:
    assert parse_json_list(text) == expected


def test_parse_json_list_nested_array_only_falls_back_to_inner_strings() -> None:
    assert parse_json_list('[["a", "b"]]') == ["a", "b"]


# --------------------------------------------------------------------------------------------------
# dedupe


def test_dedupe_case_and_whitespace_keeps_first_spelling_and_order() -> None:
    items = ["Foo  bar", "baz", "foo bar", " FOO\tBAR ", "Qux", "BAZ", "", "   "]
    assert dedupe(items) == ["Foo  bar", "baz", "Qux"]


def test_dedupe_against_exclude() -> None:
    assert dedupe(["a", "B", "c"], exclude=["b ", "D"]) == ["a", "c"]
    assert dedupe([], exclude=["a"]) == []


def test_with_buffer_is_exact_ceil_without_float_noise() -> None:
    assert _with_buffer(100, 0.1) == 110  # 100 * 1.1 == 110.00000000000001 in floats
    assert _with_buffer(4, 0.15) == 5
    assert _with_buffer(3, 0.0) == 3
    assert _with_buffer(1, 0.5) == 2


# --------------------------------------------------------------------------------------------------
# synthesize


def _cfg(**kw) -> SynthesizeConfig:
    base = dict(
        main_topic="Cooking",
        num_subtopics=2,
        prompts_per_subtopic=4,
        over_generation_buffer=0.5,
        max_exclusions=2,
        dataset_name="cook",
    )
    base.update(kw)
    return SynthesizeConfig(**base)


def test_synthesize_dedupes_retries_once_with_exclusions_and_hits_counts() -> None:
    call = ScriptedCall(
        # subtopics: asked ceil(2*1.5)=3, one unique -> retry for ceil(1*1.5)=2
        '```json\n["Baking", "baking ", "BAKING"]\n```',
        'Here: ["baking", "Grilling", "Soups"]',
        # Baking: asked ceil(4*1.5)=6, 8 unique -> trimmed to 4, no retry
        '["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8"]',
        # Grilling: 3 unique (a dup, and one Baking prompt seen already) -> retry for ceil(1*1.5)=2
        '["g1", "G1", "g2", "b1", "g3"]',
        '["g2", "g4", "g5"]',
    )
    lines: list[str] = []
    examples, logs = synthesize(_cfg(), call, log=lines.append)

    assert call.attempts == [0, 1, 0, 0, 1]
    first, retry = call.prompt(0), call.prompt(1)
    assert "Cooking" in first and " 3 " in first and "Do not repeat" not in first
    assert " 2 " in retry and "- Baking" in retry
    grill_retry = call.prompt(4)
    assert '"Grilling"' in grill_retry and " 2 " in grill_retry
    # exclusions capped to max_exclusions=2, the most recent last
    assert "- g2\n- g3\n" in grill_retry and "- g1" not in grill_retry

    assert logs == [
        SynthLog("subtopics", requested=2, asked=5, received=6, unique=3, final=2),
        SynthLog("prompts[0] Baking", requested=4, asked=6, received=8, unique=8, final=4),
        SynthLog("prompts[1] Grilling", requested=4, asked=8, received=8, unique=5, final=4),
    ]
    assert len(lines) == 3 and all("requested=" in line and "short" not in line for line in lines)
    assert "requested=2 asked=5 received=6 unique=3 final=2" in lines[0]

    assert [e.messages[0]["content"] for e in examples] == ["b1", "b2", "b3", "b4", "g1", "g2", "g3", "g4"]
    assert [e.source for e in examples][3:5] == ["synthesize:0:3", "synthesize:1:0"]
    ex = examples[5]
    digest = hashlib.sha256(b"Cooking|Grilling|g2").hexdigest()[:12]
    assert ex.id == f"cook/{digest}" and re.fullmatch(r"cook/[0-9a-f]{12}", ex.id)
    assert ex.dataset == "cook"
    assert ex.messages == ({"role": "user", "content": "g2"},)
    assert ex.metadata == {"main_topic": "Cooking", "sub_topic": "Grilling", "synthesized": True}
    assert ex.kind == "open"
    assert len({e.id for e in examples}) == len(examples)


def test_synthesize_is_deterministic() -> None:
    replies = ('["A", "B"]', '["a1", "a2"]', '["b1", "b2"]')
    cfg = _cfg(prompts_per_subtopic=2, over_generation_buffer=0.0)
    one, two = ScriptedCall(*replies), ScriptedCall(*replies)
    assert synthesize(cfg, one, log=lambda _: None) == synthesize(cfg, two, log=lambda _: None)
    assert one.calls == two.calls  # identical messages -> identical cache keys on a rerun


def test_synthesize_trims_too_many_without_retry() -> None:
    call = ScriptedCall('["A", "B", "C", "D"]', '["1", "2", "3", "4", "5"]')
    examples, logs = synthesize(_cfg(num_subtopics=1, prompts_per_subtopic=2), call, log=lambda _: None)
    assert call.attempts == [0, 0]
    assert logs[0].final == 1 and logs[0].unique == 4
    assert [e.messages[0]["content"] for e in examples] == ["1", "2"]
    assert {e.metadata["sub_topic"] for e in examples} == {"A"}


def test_synthesize_garbage_twice_logs_shortfall_without_third_call() -> None:
    call = ScriptedCall("I like turtles.", "Still no JSON, sorry.")
    lines: list[str] = []
    examples, logs = synthesize(_cfg(), call, log=lines.append)
    assert call.attempts == [0, 1]
    assert examples == []
    assert logs == [SynthLog("subtopics", requested=2, asked=6, received=0, unique=0, final=0)]
    assert lines == ["synthesize subtopics: requested=2 asked=6 received=0 unique=0 final=0 (short by 2)"]


def test_synthesize_partial_shortfall_in_prompts_keeps_what_it_has() -> None:
    call = ScriptedCall('["A"]', '["p1", "P1 "]', "nope")
    examples, logs = synthesize(_cfg(num_subtopics=1), call, log=lambda _: None)
    assert call.attempts == [0, 0, 1]
    assert [e.messages[0]["content"] for e in examples] == ["p1"]
    assert logs[1] == SynthLog("prompts[0] A", requested=4, asked=6 + 5, received=2, unique=1, final=1)


def test_provider_error_in_prompts_step_is_logged_and_others_go_on() -> None:
    call = ScriptedCall('["A", "B"]', ProviderError("boom", model="m", status_code=500), '["b1", "b2"]')
    lines: list[str] = []
    examples, logs = synthesize(_cfg(prompts_per_subtopic=2, over_generation_buffer=0.0), call, log=lines.append)
    assert [(e.source, e.messages[0]["content"]) for e in examples] == [
        ("synthesize:1:0", "b1"),
        ("synthesize:1:1", "b2"),
    ]
    assert logs[1].final == 0 and logs[1].error == "m (HTTP 500): boom"
    assert logs[2].error is None and logs[2].final == 2
    assert "model error: m (HTTP 500): boom" in lines[1] and "short by 2" in lines[1]


def test_provider_error_in_subtopics_step_propagates() -> None:
    call = ScriptedCall(ProviderError("down"))
    with pytest.raises(ProviderError, match="down"):
        synthesize(_cfg(), call, log=lambda _: None)


def test_provider_error_on_subtopics_retry_propagates() -> None:
    call = ScriptedCall('["A"]', ProviderError("down"))
    with pytest.raises(ProviderError, match="down"):
        synthesize(_cfg(), call, log=lambda _: None)


@pytest.mark.parametrize(
    ("key", "value"),
    [("num_subtopics", 0), ("prompts_per_subtopic", -1), ("over_generation_buffer", -0.1), ("max_exclusions", -1)],
)
def test_bad_numbers_are_input_errors(tmp_path: Path, key: str, value: float) -> None:
    """The config refuses them (the ranges on its fields), before any synthesis call can be made."""
    path = tmp_path / "c.yaml"
    synth = {"main_topic": "Cooking", key: value}
    path.write_text(yaml.safe_dump({"candidates": [{"name": "a", "model": "openai/x"}], "synthesize": synth}))
    with pytest.raises(InputError, match=f"synthesize.{key}"):
        load_config(path)


def test_max_exclusions_zero_sends_no_exclusion_list() -> None:
    call = ScriptedCall('["A"]', '["B"]', '["a1"]', '["b1"]')
    synthesize(_cfg(max_exclusions=0, prompts_per_subtopic=1), call, log=lambda _: None)
    assert call.attempts == [0, 1, 0, 0]
    assert "Do not repeat" not in call.prompt(1)


# --------------------------------------------------------------------------------------------------
# Templates


def test_default_templates_ask_for_a_json_array_with_an_example() -> None:
    sub = render(load_template(None, "subtopics.j2"), main_topic="Cooking", count=3, exclusions=["Baking"])
    prm = render(load_template(None, "prompts.j2"), main_topic="Cooking", sub_topic="Baking", count=5, exclusions=[])
    for text in (sub, prm):
        assert "ONLY a JSON array" in text
        assert parse_json_list(text.splitlines()[-1])  # the one-line format example parses
    assert "Cooking" in sub and "- Baking" in sub and "3" in sub
    assert "Baking" in prm and "Cooking" in prm and "5" in prm and "Do not repeat" not in prm


def test_template_override_from_file(tmp_path: Path) -> None:
    sub = tmp_path / "sub.j2"
    sub.write_text(
        "Give {{ count }} kinds of {{ main_topic }}{% if exclusions %}, not {{ exclusions|join(', ') }}{% endif %}"
    )
    prm = tmp_path / "prm.j2"
    prm.write_text("{{ count }} questions on {{ sub_topic }} / {{ main_topic }}")
    call = ScriptedCall('["A"]', '["B"]', '["q"]', '["r"]')
    cfg = _cfg(subtopic_template=str(sub), prompt_template=str(prm), prompts_per_subtopic=1)
    examples, _ = synthesize(cfg, call, log=lambda _: None)
    assert [call.prompt(i) for i in range(4)] == [
        "Give 3 kinds of Cooking",
        "Give 2 kinds of Cooking, not A",
        "2 questions on A / Cooking",
        "2 questions on B / Cooking",
    ]
    assert [e.messages[0]["content"] for e in examples] == ["q", "r"]


def test_template_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.j2"
    bad.write_text("line one\n{% if %}\nline three\n")
    with pytest.raises(InputError) as info:
        load_template(str(bad), "subtopics.j2")
    assert info.value.file == str(bad) and info.value.line == 2
    assert str(info.value).startswith(f"{bad}:2: Jinja2 syntax error")

    call = ScriptedCall()
    with pytest.raises(InputError, match=re.escape(f"{bad}:2")):
        synthesize(_cfg(prompt_template=str(bad)), call, log=lambda _: None)
    assert call.calls == []


def test_undefined_variable_is_an_input_error_before_any_call(tmp_path: Path) -> None:
    typo = tmp_path / "typo.j2"
    typo.write_text("About {{ main_topic }}:\n{{ sub_topik }}\n")
    call = ScriptedCall()
    with pytest.raises(InputError) as info:
        synthesize(_cfg(prompt_template=str(typo)), call, log=lambda _: None)
    assert call.calls == []  # the prompts template fails before the subtopics call is spent
    assert info.value.file == str(typo) and info.value.line == 2
    assert "sub_topik" in str(info.value)


def test_undefined_variable_inside_exclusions_branch_is_caught(tmp_path: Path) -> None:
    typo = tmp_path / "typo.j2"
    typo.write_text("{{ count }} of {{ main_topic }}{% if exclusions %} not {{ exclusion }}{% endif %}")
    with pytest.raises(InputError, match="exclusion"):
        synthesize(_cfg(subtopic_template=str(typo)), ScriptedCall(), log=lambda _: None)


def test_missing_template_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="template file not found") as info:
        load_template(str(tmp_path / "nope.j2"), "subtopics.j2")
    assert info.value.file == str(tmp_path / "nope.j2")


def test_undecodable_template_file(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.j2"
    bad.write_bytes(b"caf\xe9 {{ main_topic }}")
    with pytest.raises(InputError, match="cannot read template") as info:
        load_template(str(bad), "subtopics.j2")
    assert info.value.file == str(bad)
