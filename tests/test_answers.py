"""Answers read as models write them (issue 11, item 4): final numbers and LaTeX, reasoning kept apart from the
answer, multiple-choice letters and option text, text match by normalized equality."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import model_entry, read_jsonl, write_jsonl
from factories import one_candidate
from fakeserver import FakeOpenAIServer, default_reply, is_judge_request, message_text
from oracles import extract_final_number

from rubricrun.codec import CACHE_FORMAT
from rubricrun.config import ModelConfig
from rubricrun.engine.calls import GenTask, response_row
from rubricrun.judging.answers import (
    _MINUS,
    _minus,
    _plain,
    auto_judgment,
    extract_choice,
    final_answer,
    qa_correct,
    split_reasoning,
)
from rubricrun.providers.cache import ResponseCache
from rubricrun.types import Example, LLMRequest, Response, Usage

# ---------------------------------------------------------------------------------------------------
# Numbers: the misreadings listed in issue 11 (each read wrong before this change)


@pytest.mark.parametrize(
    "response, answer",
    [
        ("**Answer:** 18\n\n(I used 2 steps to get there.)", "18"),  # was read as 2, the last number
        ("<think>Maybe the answer is 16…</think> \\boxed{18}", "18"),  # the first "answer is" won: 16
        ("The answer is −3.", "-3"),  # U+2212 minus was dropped: 3
        ("So the temperature falls to \u22123 degrees.", "-3"),  # no marker: the last number, with its minus
    ],
)
def test_issue_misreadings_numeric(response: str, answer: str) -> None:
    assert qa_correct(response, answer) is True


@pytest.mark.parametrize(
    "response, expected",
    [
        ("**Answer:** 18\n\n(I used 2 steps to get there.)", 18.0),
        ("The answer is 16. Wait, 9 + 9 = 18. The answer is 18.", 18.0),  # the last stated answer wins
        ("She pays $18.00 in total.\n#### 18", 18.0),
        ("Final answer: $18.00", 18.0),
        ("The answer is 1,234,567 people.", 1234567.0),
        ("Answer: 2 + 3 = 5", 5.0),  # after the last '='
        ("The final answer is $\\boxed{42}$. I hope it is correct.", 42.0),
        ("The answer is 42.\n\nLet me double check: the answer is correct.", 42.0),  # a marker stating nothing
        ("**Final Answer**: 7", 7.0),
        ("Answer:\n\n12", 12.0),  # the marker ends its line
        ("The answer is 3/4", 0.75),
        ("\\boxed{1{,}234}", 1234.0),
        ("\\boxed{\\$18}", 18.0),
        ("1, 2, 3 and then 4", 4.0),  # commas between numbers are not thousands separators
        ("no number at all", None),
    ],
)
def test_extract_final_number(response: str, expected: float | None) -> None:
    assert extract_final_number(response) == expected


@pytest.mark.parametrize(
    "response, answer, expected",
    [
        ("#### 72", "72", True),  # GSM8K's own marker still works
        ("The answer is \\frac{3}{4}.", "0.75", True),  # LaTeX against a plain number: math-verify
        ("$\\boxed{\\frac{1}{2}}$", "\\frac{1}{2}", True),
        ("The answer is 0.5", "\\frac{1}{2}", True),
        ("The answer is \\frac{2}{3}.", "0.75", False),
        ("\\boxed{2\\sqrt{3}}", "\\sqrt{12}", True),
        ("The answer is $18.00", "18", True),
        ("The answer is 17.99", "18", False),
        ("Answer: 1,234", "1234", True),
        ("Answer: none of them", "18", False),
        ("The answer is \\(18\\).", "18", True),
        ("so\nx = \\dfrac{3}{4}", "0.75", True),  # unmarked LaTeX on the last line, not its last number 4
        ("So the area is \\(2\\sqrt{3}\\) square units.", "2\\sqrt{3}", True),
        ("The formula is H2O", "H2O", False),  # a reference math-verify cannot read is compared as text ...
        ("H2O", "H2O", True),  # ... by equality
    ],
)
def test_qa_correct_math(response: str, answer: str, expected: bool) -> None:
    assert qa_correct(response, answer) is expected


def test_math_verify_works_off_the_main_thread() -> None:
    """math-verify's timeout is a SIGALRM, which only the main thread may set: in a pool thread it runs without."""
    out: list[bool] = []
    t = threading.Thread(target=lambda: out.append(qa_correct("\\boxed{\\frac{1}{2}}", "0.5")))
    t.start()
    t.join()
    assert out == [True]


def test_final_answer_returns_the_latex_span() -> None:
    assert final_answer("so x is \\boxed{\\frac{1}{2}} in the end") == "\\frac{1}{2}"


# ---------------------------------------------------------------------------------------------------
# Reasoning


def test_think_block_goes_to_reasoning() -> None:
    text, reasoning, unclosed = split_reasoning("<think>Maybe the answer is 16…</think> \\boxed{18}")
    assert (text, reasoning, unclosed) == ("\\boxed{18}", "Maybe the answer is 16…", False)
    assert extract_final_number(text) == 18


def test_unclosed_think_means_no_answer() -> None:
    text, reasoning, unclosed = split_reasoning("<think>Let me compute 9 + 9. That is 1")
    assert text == "" and reasoning == "Let me compute 9 + 9. That is 1" and unclosed is True
    assert qa_correct(text, "18") is False


def test_provider_reasoning_and_think_block_are_joined() -> None:
    text, reasoning, _ = split_reasoning("<think>second</think>Answer: 4", "first")
    assert text == "Answer: 4" and reasoning == "first\n\nsecond"


def test_reply_that_starts_inside_the_thought() -> None:
    """R1-style chat templates end the prompt with '<think>': the reply holds only the closing tag."""
    assert split_reasoning("9 + 9 is 18.</think>\n\nThe answer is 18.") == ("The answer is 18.", "9 + 9 is 18.", False)


def test_text_without_tags_is_unchanged() -> None:
    assert split_reasoning("  The answer is 4.\n", None) == ("  The answer is 4.\n", None, False)
    assert split_reasoning("The answer is 4.", "  ") == ("The answer is 4.", None, False)


# ---------------------------------------------------------------------------------------------------
# Multiple choice

FOUR = ["water", "food", "air", "light"]


@pytest.mark.parametrize(
    "text, n, expected",
    [
        ("**B. food**", 4, "B"),  # the misreadings of issue 11: none of these was found
        ("**B**", 4, "B"),
        ("$\\boxed{B}$", 4, "B"),
        ("Let me think about plants and what they need.\nSo, B.", 4, "B"),
        ("Answer: (L)", 12, "L"),  # options after J could never be right
        ("The answer is Z", 26, "Z"),
        ("The answer is A... wait, no. The answer is B.", 4, "B"),  # the last committed answer wins
        ("Maybe A. Final answer: **(C)**", 4, "C"),
        ("I am not sure.", 26, None),  # the pronoun "I" is not choice I
        ("The answer is I think (C).", 26, "C"),
        ("A good choice is (D) Carbon dioxide.", 26, "D"),  # the article "A" is not choice A
        ("The answer is a gas: (D) carbon dioxide", 26, "D"),
        ("**A good point**, but the correct option is C.", 4, "C"),
        ("\\boxed{\\text{(C)}}", 4, "C"),
        ("(A) is wrong and (B) is wrong.", 4, None),  # mentions that disagree commit to nothing
        ("Option B is right, option A is not.", 4, None),  # weighing options is not committing to one
        ("Option B fits best.", 4, "B"),
        ("The correct option is C; option A is a distractor.", 4, "C"),
        ("a", 4, "A"),  # a reply that is only the letter
    ],
)
def test_extract_choice_letters(text: str, n: int, expected: str | None) -> None:
    assert extract_choice(text, n) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Food.", "B"),  # the text of exactly one option (was: no letter)
        ("The answer is: food", "B"),
        ("Plants need light", None),  # not equal to an option's text
        ("water and food", None),
    ],
)
def test_extract_choice_by_option_text(text: str, expected: str | None) -> None:
    assert extract_choice(text, 4, FOUR) == expected


def test_option_text_shared_by_two_options_is_ambiguous() -> None:
    assert extract_choice("food", 3, ["Food", "food.", "air"]) is None


# ---------------------------------------------------------------------------------------------------
# Text


@pytest.mark.parametrize(
    "response, answer, expected",
    [
        ("maybe yes or no", "yes", False),  # containment matched before
        ("Yes and no are both possible here.\nAnswer: no", "yes", False),  # the final-answer line is read first
        ("Answer: yes", "yes", True),
        ("**Answer:** Yes, because the contract was signed.", "yes", True),
        ("Canberra.", "canberra", True),
        ("Let me recall the capitals.\nCanberra", "Canberra", True),  # the last line
        ("It is Canberra, of course", "Canberra", False),  # equality, not containment
    ],
)
def test_qa_correct_text_is_equality(response: str, answer: str, expected: bool) -> None:
    assert qa_correct(response, answer) is expected


# ---------------------------------------------------------------------------------------------------
# Through the fake server: reasoning lands in responses.jsonl, never in the judge's prompt

THOUGHT_ALPHA = "SECRET-THOUGHT-alpha: maybe the answer is 16"
THOUGHT_BETA = "SECRET-THOUGHT-beta: maybe the answer is 16"


def reasoning_replies(body: dict[str, Any]) -> Any:
    if is_judge_request(body):
        return default_reply(body)
    if body["model"] == "cand-alpha":
        return {"content": "The answer is \\boxed{18}.", "reasoning_content": THOUGHT_ALPHA}
    # LiteLLM moves a leading <think> block into reasoning_content itself; either way it lands in `reasoning`.
    return f"<think>{THOUGHT_BETA}</think>\n\nSo: \\boxed{{18}}."


def test_reasoning_is_kept_apart_and_never_judged(tmp_path: Path, make_config, cli_main) -> None:
    qa = write_jsonl(tmp_path / "qa.jsonl", [{"id": "q1", "question": "What is 9 + 9?", "answer": "18"}])
    rubric = [{"text": "Gives the sum.", "weight": 1}]
    rub = write_jsonl(tmp_path / "rub.jsonl", [{"id": "r1", "prompt": "Add 9 and 9.", "rubric": rubric}])
    with FakeOpenAIServer(responder=reasoning_replies) as server:
        cfg = make_config(
            server,
            judges=[model_entry("j1", "openai/judge-one", server)],
            datasets=[{"path": str(qa)}, {"path": str(rub)}],
            export={"formats": ["sft", "kto"], "sft_threshold": 0.0, "kto_threshold": 0.0},
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "think"])
        assert rc == 0, err
        judge_bodies = [r.body for r in server.requests if r.model == "judge-one"]
    out = tmp_path / "outputs" / "think"
    responses = {r["id"]: r for r in read_jsonl(out / "responses.jsonl")}
    for cand, thought, text in (
        ("alpha", THOUGHT_ALPHA, "The answer is \\boxed{18}."),
        ("beta", THOUGHT_BETA, "So: \\boxed{18}."),
    ):
        for ex in ("qa/q1", "rub/r1"):
            row = responses[f"{ex}#{cand}#0"]
            assert row["reasoning"] == thought
            assert row["text"] == text
    auto = [j for j in read_jsonl(out / "judgments.jsonl") if j["judge"] == "auto:match"]
    assert sorted((j["candidate"], j["verdict"]) for j in auto) == [("alpha", "met"), ("beta", "met")]
    assert len(judge_bodies) == 2  # one criterion, two candidates
    judge_text = json.dumps([message_text(m) for b in judge_bodies for m in b["messages"]])
    assert "\\\\boxed{18}" in judge_text  # the answer is shown to the judge ...
    assert "SECRET-THOUGHT" not in judge_text and "think>" not in judge_text  # ... its reasoning never is
    for fmt in ("sft", "kto"):  # training rows carry the answer alone
        exported = (out / "export" / f"{fmt}.jsonl").read_text(encoding="utf-8")
        assert "\\\\boxed{18}" in exported and "SECRET-THOUGHT" not in exported, fmt


def test_unclosed_think_cut_off_by_max_tokens_is_no_answer(tmp_path: Path, make_config, cli_main) -> None:
    qa = write_jsonl(tmp_path / "qa.jsonl", [{"id": "q1", "question": "What is 9 + 9?", "answer": "18"}])
    with FakeOpenAIServer() as server:
        server.enqueue({"content": "<think>9 + 9 is 18, so the answer is 18 but let me", "finish_reason": "length"})
        cfg = make_config(
            server, candidates=one_candidate(server), judges=[],
            datasets=[{"path": str(qa)}],
        )  # fmt: skip
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "cut"])
        assert rc == 0, err
    out = tmp_path / "outputs" / "cut"
    [row] = read_jsonl(out / "responses.jsonl")
    assert row["text"] == "" and row["reasoning"] == "9 + 9 is 18, so the answer is 18 but let me"
    assert row["flags"]["unclosed_reasoning"] is True and row["flags"]["empty"] is True
    [auto] = read_jsonl(out / "judgments.jsonl")
    assert auto["verdict"] == "not_met"  # the 18 in the cut-off thought is not an answer


def test_a_cached_reply_from_before_the_reasoning_field_still_reads(tmp_path: Path) -> None:
    """The cache keeps the raw reply: a row stored without `reasoning` has no such key, and the <think> in its text
    is split when the response row is built."""
    import json

    import diskcache

    cache = ResponseCache(tmp_path / "cache")
    old_row = {"format": CACHE_FORMAT, "text": "<think>t</think>Answer: 4", "finish_reason": "stop", "usage": {}}
    diskcache.Cache(str(tmp_path / "cache")).set("k", json.dumps({**old_row, "model": "m"}).encode())
    hit = cache.get("k")
    assert hit is not None and hit.reasoning is None and hit.text == old_row["text"]
    cand = ModelConfig(name="alpha", model="openai/m")
    example = Example(id="e1", dataset="d", source="d.jsonl:1", messages=({"role": "user", "content": "2+2?"},))
    row = response_row(GenTask(example, cand, 0, LLMRequest(model="openai/m", messages=())), "k", hit, None)
    assert (row.text, row.reasoning) == ("Answer: 4", "t")
    cache.close()


def test_auto_judgment_reads_the_option_text() -> None:
    example = Example(
        id="m1", dataset="d", source="d.jsonl:1", messages=({"role": "user", "content": "What do plants need?"},),
        choices=tuple(FOUR), answer="B",
    )  # fmt: skip
    resp = Response(
        id="m1#a#0", example_id="m1", candidate="a", model="m", sample_index=0, status="ok", text="Food.",
        error=None, finish_reason="stop", usage=Usage(), key="k",
    )  # fmt: skip
    verdict = auto_judgment(example, resp)
    assert verdict is not None and verdict.verdict == "met" and verdict.explanation == "extracted B, expected B"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I think it's C", "C"),
        ("It is C.", "C"),
        ("C is correct", "C"),
        ("I would pick C because it fits.", "C"),
        ("A is wrong. B is wrong. C is right.", "C"),
        ("It is I.", None),  # the pronoun, not a choice (and only 4 options)
        ("Option B is right, option A is not", None),  # two letters named, none committed
    ],
)
def test_extract_choice_plain_commitments(text: str, expected: str | None) -> None:
    """Ways people state a choice without an 'Answer:' marker (seen while checking native ARC/MMLU rows)."""
    assert extract_choice(text, 4) == expected


def test_a_judge_thinking_aloud_is_read_on_its_answer(tmp_path, make_config, cli_main) -> None:
    """A judge whose reply keeps a <think> block in its content (LiteLLM moves only a leading one of some
    providers): the verdict after the thought is the one that counts, not a verdict drafted inside it."""
    import json

    from conftest import read_jsonl, write_jsonl
    from fakeserver import FakeOpenAIServer, is_judge_request

    thought = json.dumps({"explanation": "draft", "criteria_met": True})
    final = json.dumps({"explanation": "It does not.", "criteria_met": False})

    def responder(body: dict) -> str:
        return f"Let me see. <think>{thought}</think>\n{final}" if is_judge_request(body) else "Hello."

    rows = [{"id": "g1", "prompt": "Say hi.", "rubric": [{"id": "c1", "text": "Says hi.", "weight": 1}]}]
    with FakeOpenAIServer(responder=responder) as server:
        cfg = make_config(server, datasets=[{"path": str(write_jsonl(tmp_path / "g.jsonl", rows))}])
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "think"])
    assert rc == 0, err
    verdicts = {j["verdict"] for j in read_jsonl(tmp_path / "outputs" / "think" / "judgments.jsonl")}
    assert verdicts == {"not_met"}


# ---------------------------------------------------------------------------------------------------
# Judge-free scoring


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is B.", "B"),
        ("(C)", "C"),
        ("B) foo", "B"),
        ("answer: d", "D"),
        ("Answer: (B) Mars", "B"),
        ("**Answer: C**", "C"),
        ("D", "D"),
        ("I am not sure.", None),  # "I" is a letter, but not one of A-D
        ("Mars is the red planet.", None),
        ("The answer is E.", None),  # out of range for 4 choices
    ],
)
def test_extract_choice(text: str, expected: str | None) -> None:
    assert extract_choice(text, 4) == expected


@pytest.mark.parametrize(
    "text",
    [
        "A good choice is (D) Carbon dioxide.",  # line-start pattern ^\(?([A-J])[\).:\s] takes the article "A "
        "The answer is a gas: (D) carbon dioxide",  # answer-pattern, case-insensitive, takes "a"
    ],
)
def test_extract_choice_article_a_is_not_choice_a(text: str) -> None:
    assert extract_choice(text, 4) == "D"


@pytest.mark.parametrize(
    "response, answer, expected",
    [
        ("#### 42", "42", True),
        ("The answer is 42.", "42", True),  # the trailing period is not a decimal part
        ("42.0", "42", True),
        ("1,234", "1234", True),
        ("1234", "1,234", True),
        ("The answer is 41", "42", False),
        ("$18", "18", True),
        ("answer: -5", "-5", True),
        ("12 apples minus 2 = 10", "10", True),  # no marker: the last number
        ("The answer is 10 apples, 2 fewer than 12", "10", True),  # the marker wins over the last number
        ("#### 7\nso 7 + 1 = 8", "8", False),  # '####' wins over the last number
    ],
)
def test_qa_correct_numeric(response: str, answer: str, expected: bool) -> None:
    assert qa_correct(response, answer) is expected


@pytest.mark.parametrize(
    "response, answer, expected",
    [
        ("Canberra.", "canberra", True),  # normalized exact match
        ("The Paris", "Paris", True),  # articles and case are dropped
        ("It is Canberra, of course", "Canberra", False),  # equality, not containment (issue 11; was True)
        ("Canberran", "Canberra", False),  # not a whole word
        ("No, it is not enforceable.", "No", True),
        ("Yes.", "No", False),
        ("anything", "", False),  # an empty answer never matches
    ],
)
def test_qa_correct_text(response: str, answer: str, expected: bool) -> None:
    assert qa_correct(response, answer) is expected


@pytest.mark.parametrize(
    "span",
    ["18", "\u22123", "$1{,}234$", "\\$18 \\text{ dollars}", "\\frac{3}{4}", "x^2", "\\left(5\\right)", "é \uff0d2"],
)
def test_the_ascii_and_backslash_shortcuts_read_as_before(span: str) -> None:
    """_minus skips translate for ASCII text, _plain the LaTeX-noise pass for text without a backslash (plan 012):
    both give what the full pass gives."""
    import re

    from rubricrun.judging import answers

    assert _minus(span) == span.translate(_MINUS)
    full = answers._LATEX_NOISE.sub(" ", span.translate(_MINUS)).replace("{,}", ",").strip().strip("$").strip()
    assert _plain(span) == (None if re.search(r"[\\^{]", full) else full)


def test_quality_flags_substring_shortcut_agrees_with_the_patterns() -> None:
    """quality_flags asks the refusal and final-answer patterns only when an ASCII text holds what they need; on
    any text it must say what the patterns say."""
    import random

    from rubricrun.judging import answers

    words = [
        "i can't help", "I CANNOT assist", "I'm sorry", "i am unable", "As an AI", "as an aide", "I won't be able",
        "I wont be able", "####", "Final Answer", "\\boxed{3}", "\\BOXED{x}", "The answer is", "the answeris",
        "ican't", "x", "42", "sorry", "unable", " ", "\n", "İ can't help", "ı am sorry", "café", "I can’t help",
        "final\u00a0answer", "THE ANSWER IS", "I CAN'T DO THAT", "i can't do that", "K",
    ]  # fmt: skip
    rng = random.Random(1)
    seen = {"refusal": 0, "final_answer_marker": 0}
    for _ in range(20000):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        if rng.random() < 0.1:
            text = "y" * rng.randint(350, 420) + text  # the refusal is looked for in the first 400 characters
        flags = answers.quality_flags(text, "stop", 1)
        assert flags["refusal"] == bool(answers._REFUSAL.search(text[:400])), text
        assert flags["final_answer_marker"] == bool(answers._FINAL_MARKER.search(text)), text
        for k in seen:
            seen[k] += flags[k]
    assert all(n > 1000 for n in seen.values()), seen  # both ways were tried
