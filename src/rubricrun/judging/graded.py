"""Graded scales: their ranges, a judge reply as read (`Reading`), and the binary reading of a score. The 1-5 protocol
(a score per rubric criterion, with reasoning) is judging/protocol.py's; the 1-10 protocol (MT-Bench single-answer
grading, one rating per response) is its task's: tasks/mt_bench.py."""

from __future__ import annotations

from dataclasses import dataclass

SCALES: dict[str, tuple[float, float]] = {"1-5": (1.0, 5.0), "1-10": (1.0, 10.0)}


@dataclass(frozen=True)
class Reading:
    """A judge reply as a protocol reads it: met / not_met (on a graded scale: verdict_for its score), or error
    with why it cannot be read."""

    verdict: str
    score: float | None = None  # graded scales only
    explanation: str | None = None
    error: str | None = None


def normalized(score: float, scale: str) -> float:
    """(s - min) / (max - min): a score on its scale as a share of [0, 1]."""
    lo, hi = SCALES[scale]
    return (score - lo) / (hi - lo)


def verdict_for(score: float | None, scale: str) -> str:
    """The binary reading of a graded score, for what reads verdicts (judge met rates, agreement, exports): met in
    the upper half of the scale (3-5 of 5, 5.5-10 of 10), not_met below; error when there is no score."""
    if score is None:
        return "error"
    return "met" if normalized(score, scale) >= 0.5 else "not_met"
