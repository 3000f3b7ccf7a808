"""Reading a response as models write it: its reasoning apart from its answer, the answer it commits to
(choice letter, final number or expression, text), its quality flags, and the judge-free verdict (`auto_judgment`).

One rule throughout: the LAST committed answer wins ("maybe A ... Answer: B" reads B), and an explicit
marker ("Answer:", "####", \\boxed{}) wins over a number or letter that merely appears.
"""

from __future__ import annotations

import re
import string
import threading
import unicodedata
from collections.abc import Sequence

from ..types import Criterion, Example, Judgment, Response

_THINK_TAG = re.compile(r"</?think(?:ing)?>", re.I)
_THINK_BLOCK = re.compile(r"<(think(?:ing)?)>(.*?)</\1>", re.I | re.S)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.I)


def split_reasoning(text: str, reasoning: str | None = None) -> tuple[str, str | None, bool]:
    """(answer, reasoning, unclosed): `<think>` blocks moved out of the text and joined after the provider's own
    reasoning channel. An unclosed `<think>` (cut off by max_tokens) leaves no answer (unclosed True)."""
    thoughts = [reasoning.strip()] if reasoning and reasoning.strip() else []
    first = _THINK_TAG.search(text)
    if first is None:
        # LiteLLM itself moves a leading <think> block of some providers into reasoning_content, leaving the blank
        # lines after it: the answer is stripped whenever reasoning was split off.
        return (text.strip(), thoughts[0], False) if thoughts else (text, None, False)
    answer, unclosed = text, False
    if first.group().startswith("</"):
        # R1-style chat templates put the opening tag in the prompt: the reply starts inside the thought.
        thoughts.append(text[: first.start()].strip())
        answer = text[first.end() :]
    parts = _THINK_BLOCK.split(answer)  # text, tag, thought, text, tag, thought, ..., text
    thoughts += [t.strip() for t in parts[2::3]]
    answer = "".join(parts[::3])
    opened = _THINK_OPEN.search(answer)
    if opened:
        thoughts.append(answer[opened.end() :].strip())
        answer, unclosed = "", True
    joined = "\n\n".join(t for t in thoughts if t)
    return _THINK_TAG.sub("", answer).strip(), joined or None, unclosed


# "Answer:", "The final answer is", "####", \boxed{...}; the lookahead skips positions that cannot start one (plan 007).
_MARKER = re.compile(r"(?=[#\\Aa])(?:####|\\(?:boxed|fbox)\s*\{|(?i:\banswer\b\s*\**\s*(?:is\b\s*:?|:|=)))")
_MINUS = str.maketrans({"\u2212": "-", "\ufe63": "-", "\uff0d": "-"})  # minus signs, not dashes ("3–5" is a range)


def _minus(s: str) -> str:
    """Minus signs read as '-' (an ASCII string has none: no translate, 1-2 us a reply)."""
    return s if s.isascii() else s.translate(_MINUS)


def _braced(text: str, start: int) -> str:
    """The content of the brace group whose `{` is just before `start`, or "" when it never closes."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return ""


def _line_after(text: str, start: int) -> str:
    """The rest of the line after a marker; the next non-empty line when a marker ends its line ("Answer:\\n18")."""
    rest = text[start:].lstrip(" \t*_:")
    line, _, after = rest.partition("\n")
    if not line.strip(" \t*_$"):
        line = next((ln for ln in after.split("\n") if ln.strip(" \t*_$")), "")
    return line.strip().strip("*_").strip()


def answer_spans(text: str) -> list[str]:
    """What each final-answer marker introduces, last first (the last stated answer wins)."""
    spans: list[str] = []
    for m in _MARKER.finditer(text):
        span = _braced(text, m.end()).strip() if m.group().endswith("{") else _line_after(text, m.end())
        if span:
            spans.append(span)
    return spans[::-1]


# A plain number: optional sign and currency, thousands commas only in groups of three, a decimal part, a fraction.
_NUMBER = re.compile(r"(?=[-$\d])(?<![\w.])(-?)\$?(-?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:\s*/\s*(\d+)(?![\d.]))?")
# LaTeX that wraps a plain number without changing it: \$18, 1{,}234, 18\,000, \text{ dollars}, \left( \right).
_LATEX_NOISE = re.compile(
    r"\\text(?:bf|rm)?\s*\{[^{}]*\}|\\mathrm\s*\{[^{}]*\}|\\[,!;: ]|\\left|\\right|\\%|\\\$|\\[()\[\]]"
)


def _number_value(m: re.Match[str] | None) -> float | None:
    """The value a _NUMBER match states; None for no match or a fraction over 0."""
    if m is None or (m.group(5) and int(m.group(5)) == 0):
        return None
    sign = -1.0 if (m.group(1) or m.group(2)) else 1.0
    value = float(m.group(3).replace(",", "") + (m.group(4) or ""))
    return sign * (value / int(m.group(5)) if m.group(5) else value)


def _plain(span: str) -> str | None:
    """The span with LaTeX noise removed, or None when real LaTeX math remains (\\frac, ^, \\sqrt ...)."""
    s = _minus(span)
    if "\\" in s:  # every piece of noise starts with a backslash
        s = _LATEX_NOISE.sub(" ", s)
    s = s.replace("{,}", ",")
    s = s.strip().strip("$").strip()
    if "\\" in s or "^" in s or "{" in s:
        return None
    return s


def span_number(span: str) -> float | None:
    """The number a plain answer span states: after the last '=' ("2 + 3 = 5"), its first number
    ("18. (I used 2 steps)" reads 18). None when the span holds LaTeX math or no number."""
    s = _plain(span)
    return None if s is None else _number_value(_NUMBER.search(s.rsplit("=", 1)[-1]))


def parse_number(s: str) -> float | None:
    """`s` as a number when it is one plain number and nothing else ("1,234", "$18.00", "-3", "3/4")."""
    plain = _plain(s)
    return None if plain is None else _number_value(_NUMBER.fullmatch(plain.rstrip(".%").strip()))


def final_answer(text: str) -> str | None:
    """The answer a response commits to, as a string: what its last final-answer marker introduces (a marker
    whose span states nothing is passed over), else its last number. GSM8K's '####' is one such marker."""
    text = _minus(text)
    for span in answer_spans(text):
        if span_number(span) is not None or _plain(span) is None:
            return span
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and _plain(lines[-1]) is None:
        return lines[-1].strip()  # unmarked LaTeX on the last line ("x = \dfrac{3}{4}"): its last number is no answer
    nums = list(_NUMBER.finditer(text))
    return nums[-1].group() if nums else None


def _math_verify(gold: str, span: str) -> bool | None:
    """Symbolic equality through math-verify, only for LaTeX the plain-number path cannot read (about 1-30 ms a
    call against microseconds for the regex path). Its timeout is a SIGALRM, so it is on in the main thread only.
    None when the reference does not read as math."""
    from math_verify import parse, verify

    timeout = 5 if threading.current_thread() is threading.main_thread() else None

    def read(s: str) -> list:
        # The span up to its sentence's end, read as one expression ("$2\\sqrt{3}$", not the "2" that a search
        # through bare text finds); bare text when that reads nothing.
        s = _SENTENCE_END.split(s.strip(), maxsplit=1)[0].rstrip(",;:!").strip()
        s = s.rsplit("=", 1)[-1].strip() if "=" in s and "\\(" not in s else s  # "x = \\frac{3}{4}" states 3/4
        delimited = "$" in s or "\\(" in s or "\\[" in s
        return (not delimited and parse(f"${s}$", parsing_timeout=timeout)) or parse(s, parsing_timeout=timeout)

    gold_parsed = read(gold)
    if not gold_parsed:
        return None  # the reference is not math after all ("H2O"): the caller compares text
    got = read(span[:300])
    return bool(got and verify(gold_parsed, got, timeout_seconds=timeout))


_SENTENCE_END = re.compile(r"\.(?:\s|$)")


def normalize_text(s: str) -> str:
    """Lowercase, strip accents, punctuation, articles and extra whitespace (SQuAD-style)."""
    s = unicodedata.normalize("NFKD", s)
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).lower()
    s = re.sub(r"[^\w\s]", " ", s)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


_CLAUSE_END = re.compile(r"[,.;:!?\n]")


def _text_candidates(text: str) -> list[str]:
    """Where a short text answer may stand: the last final-answer line if there is one; else the whole response,
    its first clause ("No, it is not enforceable." -> "No") and its last line."""
    spans = answer_spans(text)
    if spans:
        return [spans[0], _CLAUSE_END.split(spans[0], maxsplit=1)[0]]
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return [text, _CLAUSE_END.split(text.strip(), maxsplit=1)[0], lines[-1] if lines else ""]


def _looks_math(answer: str) -> bool:
    """A reference that is no plain number, read as math: LaTeX or digits without words ("10 apples" is text)."""
    bare = re.sub(r"\\[A-Za-z]+", "", answer)
    return ("\\" in answer or any(ch.isdigit() for ch in answer)) and not re.search(r"[A-Za-z]{3,}", bare)


def qa_correct(response: str, answer: str) -> bool:
    """Whether a response states the reference answer: numbers and LaTeX by value (plain numbers by regex, other
    math through math-verify), text by SQuAD-normalized equality (never containment)."""
    gold = answer.strip()
    if not gold:
        return False
    want = parse_number(gold)  # a number is math; else _looks_math tells
    span = final_answer(response) if want is not None or _looks_math(gold) else None
    if span is not None:
        got = span_number(span)
        if want is not None and got is not None:
            return abs(got - want) < 1e-6 * max(1.0, abs(want))
        if want is not None and _plain(span) is not None:
            return False  # a plain span with no number: nothing to verify
        verdict = _math_verify(gold, span)
        if verdict is not None:
            return verdict
    # Text, or a math-looking reference that the response states no number or expression for ("H2O").
    want = normalize_text(gold)
    return bool(want) and any(normalize_text(c) == want for c in _text_candidates(response))


# The lookaheads on a first letter (here and in _REFUSAL) let the scan skip most positions (plan 007).
# "The final answer is", "the correct option:", not a bare "option B" (a model weighing options names them all).
_ANSWER_WORD = r"(?=[acrb])\b(?:answer|(?:correct|right|best)\s+(?:option|choice))\b"
_AFTER_MARKER = r"\s*\**\s*(?:is\b\s*:?|:|=)?\s*(?:(?:option|choice)\b)?[\s*_$]*[(\[]?\s*"
# Committed: the last one wins. Outside brackets a letter is uppercase (the article "a" is never choice A), unless
# punctuation or the line's end follows it ("answer: d").
_COMMITTED = [
    re.compile(rf"(?i:{_ANSWER_WORD}{_AFTER_MARKER})(?:([A-Z])(?![\w'’])|([a-z])(?=\s*(?:$|[).,;:!?*\]])))", re.M),
    re.compile(r"\\boxed\s*\{\s*(?:\\text(?:bf|rm)?\s*\{\s*)?\(?\s*([A-Za-z])\s*\)?\s*\}"),  # $\boxed{B}$
    re.compile(
        r"(?i:(?=[sth])\b(?:so|thus|therefore|hence)\b,?\s*)\(?([A-Z])\)?(?=\s*(?:[.!](?!\w)|$))", re.M
    ),  # So, B.
]
# Emphasis: **B**, **B. food**, **(B)**; the last one wins.
_BOLD = re.compile(r"\*\*\s*\(?([A-Z])(?:\s*\*\*|[).:][^*\n]*\*\*)")
# Mentions: "(B)", "B) foo", a line that is only "D". They count only when they all name one letter.
_MENTIONS = [
    re.compile(r"\(([A-Z])\)"),
    re.compile(r"(?i:(?=[oc])\b(?:option|choice)\s+)\(?([A-Z])(?![\w'’])"),
    re.compile(r"^\s*\(?([A-Z])[).:](?!\w)", re.M),
    re.compile(r"^\s*\(?([A-Za-z])\)?\s*\.?\s*$", re.M),
    # "I think it's C", "It is C.": a letter that ends the clause (so "is A good" stays an article).
    re.compile(r"(?i:\b(?:it'?s|it’s|is|be)\s+)\(?([A-Z])\)?(?=\s*(?:$|[).,;:!?]))", re.M),
    # "I would pick C because ...", "go with (C)".
    re.compile(r"(?i:\b(?:pick|choose|select|go with)\s+)\(?([A-Z])\)?(?![\w'’])"),
    # "C is correct", "C is the right answer" (not "B is wrong").
    re.compile(
        r"(?:^|[.!?]\s+)\(?([A-Z])\)?\s+(?i:is|would be|seems)\s+(?i:the\s+)?(?i:correct|right|best|answer)\b", re.M
    ),
]
_PRONOUN_I = re.compile(r"\s+[a-z]")  # "the answer is I think B": the pronoun, not choice I


def _letters(patterns: Sequence[re.Pattern[str]], text: str, allowed: str) -> list[tuple[int, str]]:
    found = []
    for pat in patterns:
        for m in pat.finditer(text):
            group = m.lastindex or 1
            said = m.group(group)
            letter = said.upper()
            if said == "I" and _PRONOUN_I.match(text, m.end()):
                continue
            if letter in allowed:
                found.append((m.start(group), letter))
    return sorted(found)


def _choice_by_text(text: str, choices: Sequence[str]) -> str | None:
    """The letter of the one option whose text the response (or its final-answer line) states exactly."""
    said = {normalize_text(c) for c in _text_candidates(text)} - {""}
    hits = {string.ascii_uppercase[i] for i, c in enumerate(choices[:26]) if normalize_text(c) in said}
    return hits.pop() if len(hits) == 1 else None


def extract_choice(text: str, n_choices: int, choices: Sequence[str] | None = None) -> str | None:
    """The choice letter (A-Z) a response commits to, or None: the last committed letter ("Answer: (B)",
    \\boxed{B}, "So, B."), else the last bold letter, else one letter that every mention agrees on, else the
    option whose text the response states."""
    allowed = string.ascii_uppercase[: min(n_choices, 26)]
    for patterns in (_COMMITTED, [_BOLD]):
        found = _letters(patterns, text, allowed)
        if found:
            return found[-1][1]
    mentioned = {letter for _, letter in _letters(_MENTIONS, text, allowed)}
    if len(mentioned) == 1:
        return mentioned.pop()
    return _choice_by_text(text, choices) if choices else None


_REFUSAL = re.compile(
    r"(?i)(?=[ia])\b(i can(?:no|')t (?:help|assist|provide|do that)|i(?:'m| am) (?:sorry|unable)|as an ai\b"
    r"|i won't be able)"
)
_FINAL_MARKER = re.compile(r"(?i)(?=[#f\\t])(####|final answer|\\boxed\{|the answer is)")
# What each pattern cannot match without: an ASCII text lowercased holds one, or neither matches (ASCII letters, where
# lower() and IGNORECASE agree); substring tests cost less than a regex scan (plan 012). Other texts: the patterns.
_REFUSAL_NEEDS = ("i can", "sorry", "unable", "as an ai", "won't be able")
_FINAL_NEEDS = ("####", "final answer", "\\boxed{", "the answer is")


def _may(needs: tuple[str, ...], lowered: str) -> bool:
    return any(n in lowered for n in needs)


def quality_flags(
    text: str, finish_reason: str | None, completion_tokens: int, *, unclosed_reasoning: bool = False
) -> dict[str, object]:
    ascii_ = text.isascii()
    head = text[:400]
    refusal = (not ascii_ or _may(_REFUSAL_NEEDS, head.lower())) and _REFUSAL.search(head) is not None
    marker = (not ascii_ or _may(_FINAL_NEEDS, text.lower())) and _FINAL_MARKER.search(text) is not None
    return {
        "truncated": finish_reason == "length",
        "empty": not text.strip(),
        "refusal": refusal,
        "final_answer_marker": marker,
        "unclosed_reasoning": unclosed_reasoning,
        "chars": len(text),
        "tokens": completion_tokens,
    }


def auto_judgment(example: Example, response: Response) -> Judgment | None:
    """Judge-free verdict for multiple choice (letter extraction) and QA (numeric / normalized match)."""
    if response.status != "ok" or example.rubric or example.kind == "open" or example.answer is None:
        return None
    text = response.text or ""
    if example.kind == "mc":
        got = extract_choice(text, len(example.choices or ()), example.choices)
        met = got == example.answer
        judge_name, expl = "auto:choice", f"extracted {got or 'no letter'}, expected {example.answer}"
    else:
        met = qa_correct(text, example.answer)
        judge_name, expl = "auto:match", f"expected {example.answer!r}"
    return Judgment(
        id=f"{response.id}#correct",
        response_id=response.id,
        example_id=example.id,
        candidate=response.candidate,
        criterion_id="correct",
        weight=1.0,
        judge=judge_name,
        verdict="met" if met else "not_met",
        explanation=expl,
        error=None,
    )


AUTO_CRITERION = Criterion(id="correct", text="The response gives the correct final answer.", weight=1.0)
