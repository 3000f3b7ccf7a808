"""Multi-turn conversations, each turn the model's own: the conversation a candidate is asked at turn k (and a judge
sees) is the example's first turn, then for each earlier turn the candidate's own answer and the next user turn.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ..types import Example


def turn_view(ex: Example, answers: Sequence[str]) -> Example:
    """The example as asked at turn len(answers) + 1, given the candidate's own answers to the turns before it:
    messages up to that turn's user message, that turn's reference, `metadata.turn`. Turn 1 is the example."""
    if not answers:
        return ex
    k = len(answers) + 1
    if k > ex.turns:
        raise ValueError(f"{ex.id} has {ex.turns} turns, asked for turn {k}")
    messages = list(ex.messages)
    for answer, later in zip(answers, ex.later_turns, strict=False):
        messages += [{"role": "assistant", "content": answer}, later.message]
    later = ex.later_turns[k - 2]
    return msgspec.structs.replace(
        ex, messages=tuple(messages), reference=later.reference, metadata={**ex.metadata, "turn": k}
    )
