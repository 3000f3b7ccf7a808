"""The judge-free formats, scored as `accuracy` (the fraction of `correct` verdicts met, judging/answers.py): multiple
choice (ARC, MMLU, INCLUDE, ...), a question and its options answered by a letter, and question answering with a
final answer (GSM8K's `#### <answer>`). A row that carries its own rubric is judged on it (the rubric metric)."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any

from ..data.schemas import Built, Fail, Row, _required, text_value, type_name
from ..judging.answers import AUTO_CRITERION
from ..types import Criterion, Example
from .spec import Marks, Metric, Task, Values


def _accuracy(ex: Example, criteria: Sequence[Criterion], met: Marks, turn: int) -> Values:
    flags = [m for c, m in zip(criteria, met, strict=True) if c.id == AUTO_CRITERION.id]
    return {"score": float(flags[0])} if flags else {}


def _detect(row: Row, keys: Collection[str]) -> bool:
    return "question" in keys and ("choices" in keys or "option_a" in keys)


_METADATA = ("language", "country", "domain", "subject", "regional_feature", "level")


def _build(r: Row, fail: Fail) -> Built:
    question = _required(r, "question", "mc", fail)
    if not isinstance(question, str) or not question.strip():
        fail(r.key("question"), f"expected a non-empty string, got {question!r}")
    labels = None
    if r.get("choices") is not None:
        choices = r.get("choices")
        ckey = r.key("choices")
        if isinstance(choices, dict) and "text" in choices:  # ARC / OpenBookQA: {text: [...], label: [...]}
            choices, labels = _labelled_choices(choices, ckey, fail)
        if not isinstance(choices, list) or not all(isinstance(c, (str, int, float)) for c in choices):
            fail(ckey, f"expected a list of strings (or {{text: [...], label: [...]}}), got {type_name(choices)}")
        choices = [str(c) for c in choices]
    else:
        ckey = "option_a"
        choices = []
        for letter in "abcdefghijklmnopqrstuvwxyz":
            v = r.row.get(f"option_{letter}")
            if v is None:
                break
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                fail(f"option_{letter}", f"expected a string, got {type_name(v)}")
            choices.append(str(v))
    if len(choices) < 2:
        fail(ckey, f"expected at least 2 choices, got {len(choices)}")
    if len(choices) > 26:
        fail(ckey, f"expected at most 26 choices, got {len(choices)}")
    if r.get("answer") is None and r.row.get("answerKey") is not None:  # ARC: answerKey is one of the labels
        answer = _mc_label(r.row["answerKey"], labels, choices, fail)
    else:
        answer = _mc_letter(_required(r, "answer", "mc", fail), choices, r.key("answer"), fail)
    letters = [chr(ord("A") + i) for i in range(len(choices))]
    options = "\n".join(f"{letter}. {c}" for letter, c in zip(letters, choices, strict=True))
    content = f"{question.strip()}\n\n{options}\n\nAnswer with the letter of the correct option ({', '.join(letters)})."
    metadata = {k: r.row[k] for k in _METADATA if r.row.get(k) is not None}
    return Built(
        messages=[{"role": "user", "content": content}],
        messages_key=r.key("question"),
        choices=tuple(choices),
        answer=answer,
        metadata=metadata,
    )


def _labelled_choices(choices: dict[str, Any], key: str, fail: Fail) -> tuple[list[Any], list[str] | None]:
    texts, labels = choices.get("text"), choices.get("label")
    if not isinstance(texts, list):
        fail(f"{key}.text", f"expected a list of strings, got {type_name(texts)}")
    if labels is None:
        return texts, None
    if not isinstance(labels, list) or len(labels) != len(texts):
        fail(f"{key}.label", f"expected a list of {len(texts)} labels (one per choice), got {labels!r}")
    return texts, [str(x).strip() for x in labels]


def _mc_label(answer_key: Any, labels: list[str] | None, choices: list[str], fail: Fail) -> str:
    """ARC's answerKey names a label ("B", or "2" on the rows labelled 1-4): its position gives the letter."""
    if labels is not None and str(answer_key).strip() in labels:
        return chr(ord("A") + labels.index(str(answer_key).strip()))
    if labels is not None:
        fail("answerKey", f"{answer_key!r} is not one of the choice labels ({', '.join(labels)})")
    return _mc_letter(answer_key, choices, "answerKey", fail)


def _mc_letter(answer: Any, choices: list[str], key: str, fail: Fail) -> str:
    n = len(choices)
    last = chr(ord("A") + n - 1)
    if isinstance(answer, int) and not isinstance(answer, bool):
        if not 0 <= answer < n:
            fail(key, f"answer index {answer} is out of range for {n} choices (0-{n - 1})")
        return chr(ord("A") + answer)
    if isinstance(answer, str):
        a = answer.strip()
        if len(a) == 1 and a.isalpha():
            idx = ord(a.upper()) - ord("A")
            if not 0 <= idx < n:
                fail(key, f"answer '{a}' is out of range for {n} choices (A-{last})")
            return a.upper()
        if a in choices:
            return chr(ord("A") + choices.index(a))
        if a.isdigit():  # an index written as text (CSV cells are text)
            return _mc_letter(int(a), choices, key, fail)
        fail(key, f"expected a 0-based index, a letter A-{last} or one of the choices, got {answer!r}")
    fail(key, f"expected a 0-based index or a letter A-{last}, got {answer!r}")


ACCURACY = Metric(
    name="accuracy",
    scale="auto",
    source="exact match of the extracted letter or final answer (judging/answers.py)",
    values=_accuracy,
)

TASK = Task(name="mc", title="multiple choice", detect=_detect, build=_build, metric=ACCURACY)

_NUMBER = re.compile(r"-?[\d,]*\.?\d+")


def _detect_qa(row: Row, keys: Collection[str]) -> bool:
    return "question" in keys and "answer" in keys


def _build_qa(r: Row, fail: Fail) -> Built:
    question = _required(r, "question", "qa", fail)
    if not isinstance(question, str) or not question.strip():
        fail(r.key("question"), f"expected a non-empty string, got {question!r}")
    raw = _required(r, "answer", "qa", fail)
    if isinstance(raw, list):
        fail(r.key("answer"), "expected a string, got a list")
    full = text_value(raw, r.key("answer"), fail)
    answer = full.strip()
    if "####" in full:  # GSM8K: worked solution, then "#### <final answer>"
        answer = full.rsplit("####", 1)[1].strip()
        if _NUMBER.fullmatch(answer):
            answer = answer.replace(",", "")
        if not answer:
            fail(r.key("answer"), "nothing after '####' (GSM8K-style answers end with '#### <final answer>')")
    return Built(
        messages=[{"role": "user", "content": question}],
        messages_key=r.key("question"),
        reference=full,
        answer=answer,
    )


QA_TASK = Task(name="qa", title="QA", detect=_detect_qa, build=_build_qa, metric=ACCURACY)
