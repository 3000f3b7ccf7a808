"""Question answering with a final answer (GSM8K's `#### <answer>`), matched judge-free (judging/answers.py) and
scored as `accuracy`. A row that carries its own rubric is judged on it (the rubric metric)."""

from __future__ import annotations

import re
from collections.abc import Collection

from ..data.schemas import Built, Fail, Row, _required, text_value
from .multiple_choice import ACCURACY
from .spec import Task

_NUMBER = re.compile(r"-?[\d,]*\.?\d+")


def _detect(row: Row, keys: Collection[str]) -> bool:
    return "question" in keys and "answer" in keys


def _build(r: Row, fail: Fail) -> Built:
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


TASK = Task(name="qa", title="QA", detect=_detect, build=_build, metric=ACCURACY)
