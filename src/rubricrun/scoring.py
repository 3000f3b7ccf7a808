"""Pure scoring: rubric scores from verdicts, and judge-free scoring for multiple choice and QA.

Rubric score of one response, over the criteria whose verdict is not `error`:
    points     = sum of the weights of met criteria
    normalized = (points - N) / (P - N)   with P = sum of positive weights, N = sum of negative weights
                 (PRBench: 0 when every penalty fires and nothing is earned, 1 when all good and no bad)
    clipped    = min(1, max(0, points / P))   (HealthBench)
Criteria judged `error` are left out of the numerator and the denominators, counted in `errors`.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence

from .types import Criterion, Score


def _normalized(points: float, pos: float, neg: float) -> float | None:
    span = pos - neg
    return None if span <= 0 else (points - neg) / span


def _clipped(points: float, pos: float) -> float | None:
    return None if pos <= 0 else min(1.0, max(0.0, points / pos))


def score_response(criteria: Sequence[Criterion], verdicts: Sequence[str]) -> Score:
    """Score one response from its criteria and their verdicts ('met', 'not_met', 'error'), in order."""
    if len(criteria) != len(verdicts):
        raise ValueError("one verdict per criterion")
    points = pos = neg = 0.0
    met = not_met = errors = 0
    groups: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    tag_groups: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for c, v in zip(criteria, verdicts, strict=True):
        if v == "error":
            errors += 1
            continue
        is_met = v == "met"
        met += is_met
        not_met += not is_met
        if c.weight > 0:
            pos += c.weight
        else:
            neg += c.weight
        if is_met:
            points += c.weight
        if c.category:
            groups[c.category].append((c.weight, is_met))
        for t in c.tags:
            tag_groups[t].append((c.weight, is_met))
    scored = met + not_met
    return Score(
        points=points,
        normalized=_normalized(points, pos, neg) if scored else None,
        clipped=_clipped(points, pos) if scored else None,
        met=met,
        not_met=not_met,
        errors=errors,
        by_category=_breakdown(groups),
        by_tag=_breakdown(tag_groups),
    )


def _breakdown(groups: dict[str, list[tuple[float, bool]]]) -> dict[str, float]:
    out = {}
    for name, items in sorted(groups.items()):
        pts = sum(w for w, m in items if m)
        pos = sum(w for w, _ in items if w > 0)
        neg = sum(w for w, _ in items if w < 0)
        value = _normalized(pts, pos, neg)
        if value is not None:
            out[name] = value
    return out


def mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


# ---------------------------------------------------------------------------------------------------
# Judge-free scoring

# Most explicit first. Letters are uppercase only outside brackets, so the article "a" is never choice A,
# and a bare letter at a line start needs a bracket, dot or colon after it ("A good choice" is prose).
_LETTER_PATTERNS = [
    re.compile(r"(?i:(?:final\s+)?answer\s*(?:is|:)?)\s*\(?\**\s*\(?([A-J])(?![\w'])"),
    re.compile(r"(?i:(?:final\s+)?answer\s*(?:is|:)?)\s*\(?\**\s*\(?([a-j])(?=\s*(?:$|[).,;:!*\]]))", re.M),
    re.compile(r"(?i:\b(?:option|choice)\s+(?:is\s+)?)\(?([A-J])(?![\w'])"),
    re.compile(r"\(([A-Ja-j])\)"),
    re.compile(r"^\s*\(?([A-J])[\).:](?!\w)", re.M),
    re.compile(r"^\s*([A-J])\s*$", re.M),
]


def extract_choice(text: str, n_choices: int) -> str | None:
    """The choice letter a response commits to, or None."""
    letters = "ABCDEFGHIJ"[:n_choices]
    for pat in _LETTER_PATTERNS:
        for m in pat.finditer(text):
            letter = m.group(1).upper()
            if letter in letters:
                return letter
    return None


def normalize_text(s: str) -> str:
    """Lowercase, strip accents, punctuation, articles and extra whitespace (SQuAD-style)."""
    s = unicodedata.normalize("NFKD", s)
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).lower()
    s = re.sub(r"[^\w\s]", " ", s)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?")


def _to_number(s: str) -> float | None:
    try:
        return float(s.replace(",", "").replace("$", ""))
    except ValueError:
        return None


def extract_final_number(text: str) -> float | None:
    """GSM8K convention: the number after '####' if present, else after 'answer', else the last number."""
    for marker in ("####", r"answer\s*(?:is|:)", r"\\boxed\{"):
        m = re.search(marker + r"\s*(-?\$?\d[\d,]*(?:\.\d+)?)", text, re.I)
        if m:
            return _to_number(m.group(1))
    nums = _NUMBER.findall(text)
    return _to_number(nums[-1]) if nums else None


def qa_correct(response: str, answer: str) -> bool:
    """Numeric match when the answer is a number (GSM8K), else normalized exact match or containment."""
    target = _to_number(answer.strip())
    if target is not None and _NUMBER.fullmatch(answer.strip()):
        got = extract_final_number(response)
        return got is not None and abs(got - target) < 1e-6 * max(1.0, abs(target))
    want, got_text = normalize_text(answer), normalize_text(response)
    if not want:
        return False
    return got_text == want or f" {want} " in f" {got_text} "


# ---------------------------------------------------------------------------------------------------
# Quality flags on responses

_REFUSAL = re.compile(
    r"(?i)\b(i can(?:no|')t (?:help|assist|provide|do that)|i(?:'m| am) (?:sorry|unable)|as an ai\b|i won't be able)"
)
_FINAL_MARKER = re.compile(r"(?i)(####|final answer|\\boxed\{|the answer is)")


def quality_flags(text: str, finish_reason: str | None, completion_tokens: int) -> dict[str, object]:
    return {
        "truncated": finish_reason == "length",
        "empty": not text.strip(),
        "refusal": bool(_REFUSAL.search(text[:400])),
        "final_answer_marker": bool(_FINAL_MARKER.search(text)),
        "chars": len(text),
        "tokens": completion_tokens,
    }
