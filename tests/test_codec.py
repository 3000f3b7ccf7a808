"""codec.py: every row type written as JSON whose content is the row's fields in order (what the files have always
held), read back as the object it was written from; the cache's stored reply; values of other types."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pytest

from rubricrun import codec
from rubricrun.results.summary_types import (
    DatasetCandidate,
    DatasetSummary,
    JudgeSummary,
    Summary,
    read_summary,
    summary_data,
)
from rubricrun.types import Criterion, Example, Judgment, LLMResponse, PairJudgment, Response, TraceEvent, Turn, Usage

EXAMPLE = Example(
    id="e1",
    dataset="d",
    source="d.jsonl:3",
    messages=({"role": "user", "content": "hi ü 中 \u2028", "extra": [1, [2, 3]]},),
    choices=("a", "b"),
    answer="B",
    rubric=(Criterion("c1", "states X", -2.5, ("safety",), "cat"),),
    metadata={"nested": {"k": [1, {"z": None}]}, "f": 0.1},
    later_turns=(Turn({"role": "user", "content": "and?"}, "ref"),),
)
RESPONSE = Response(
    id="e1#a#0", example_id="e1", candidate="a", model="m", sample_index=0, status="ok", text="t", error=None,
    finish_reason="stop", usage=Usage(1, 2, 3), key="k", flags={"empty": False}, reasoning="r", turn=2,
)  # fmt: skip
JUDGMENT = Judgment(
    id="j", response_id="r", example_id="e", candidate="c", criterion_id="c1", weight=1.0, judge="j1+j2",
    verdict="met", explanation=None, error=None, key="k", votes=({"judge": "j1", "verdict": "met"},),
    usage=Usage(3, 4, 7), score=4.0, scale="1-5",
)  # fmt: skip
PAIR = PairJudgment(
    kind="pairwise", id="p", example_id="e", turn=None, a="x", b="y", judge="j", ab="A", ba="C", winner="tie",
    error=None, keys=("k1", "k2"), usage=Usage(1, 1, 2), response_ids=("r1", "r2"),
)  # fmt: skip
TRACE = TraceEvent(ts=1.5, role="judge", model="m", key="k", cache_hit=False, attempt=2, latency_ms=3.0, status="ok")
ROWS = [EXAMPLE, RESPONSE, JUDGMENT, PAIR, TRACE]


def _plain(obj: object) -> object:
    """A row as its file has always held it: fields in order, nested rows as objects, tuples as lists."""
    if isinstance(obj, msgspec.Struct):
        return {f: _plain(getattr(obj, f)) for f in obj.__struct_fields__ if getattr(obj, f) is not msgspec.UNSET}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


@pytest.mark.parametrize("row", ROWS, ids=lambda r: type(r).__name__)
def test_a_row_is_its_fields_in_order_and_reads_back(row: msgspec.Struct) -> None:
    line = codec.lines([row])
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    data = json.loads(line)
    assert list(data) == list(row.__struct_fields__)[: len(data)] and data == _plain(row)
    assert codec.decode(line, type(row)) == row
    assert codec.decode_lines(line * 3, type(row)) == [row] * 3
    assert codec.convert(data, type(row)) == row  # from a file read with json.loads
    assert codec.unpack(codec.pack(row), type(row)) == row  # the spools


def test_rows_of_another_version_read_and_foreign_ones_do_not() -> None:
    old = {**_plain(RESPONSE), "cache_hit": True}  # a key a version before 018 wrote in memory only; ignored
    del old["reasoning"], old["turn"]  # keys an older version did not write: their defaults
    assert codec.convert(old, Response) == msgspec.structs.replace(RESPONSE, reasoning=None, turn=1)
    for bad in ({"id": "x"}, {**_plain(RESPONSE), "status": "maybe"}, [1, 2]):
        with pytest.raises(codec.DecodeError):
            codec.convert(bad, Response)


def test_values_of_other_types() -> None:
    assert (
        codec.encode({"x": np.float64(0.25), "n": float("nan"), "i": float("inf")}) == b'{"x":0.25,"n":null,"i":null}'
    )
    with pytest.raises(TypeError):
        codec.encode({"x": object()})
    assert codec.pretty({"a": [1]}) == b'{\n  "a": [\n    1\n  ]\n}\n'


def test_the_cache_row_is_json_of_this_format_and_nothing_else_reads() -> None:
    reply = LLMResponse(text="é", finish_reason="stop", usage=Usage(1, 2, 3), model="m", cost_usd=0.5,
                        latency_ms=12.0, reasoning="r", deployment="d2")  # fmt: skip
    stored = codec.stored_reply(reply)
    assert json.loads(stored) == {
        "format": codec.CACHE_FORMAT, "text": "é", "finish_reason": "stop",
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}, "model": "m", "cost_usd": 0.5,
        "reasoning": "r",
    }  # fmt: skip
    assert codec.read_reply(stored) == msgspec.structs.replace(reply, cache_hit=True, latency_ms=0.0, deployment=None)
    other = json.dumps({**json.loads(stored), "format": 1}).encode()
    for value in (other, b"\x80\x04K\x01.", b"garbage", stored.decode(), None, 3, b'{"text": "no format"}'):
        assert codec.read_reply(value) is None


def test_summary_data_keeps_each_candidates_extra_beside_its_fields() -> None:
    cand = DatasetCandidate(score=0.5, n=2, extra={"mean_normalized": 0.4, "by_tag": {"t": 1.0}})
    d = DatasetSummary("rubric", "exclude", {"a": cand}, ())
    s = Summary(run_id="r", pass_threshold=None, examples=2, datasets={"d": d}, judges=JudgeSummary({}))
    data = summary_data(s)
    assert list(data) == ["run_id", "pass_threshold", "examples", "datasets", "judges"]  # None-valued facts left out
    assert data["judges"] == {"per_judge": {}}
    c = data["datasets"]["d"]["candidates"]["a"]
    assert list(c)[-2:] == ["mean_normalized", "by_tag"] and "extra" not in c and "extra" not in data["datasets"]["d"]
    assert read_summary(json.loads(codec.pretty(data))) == s
    assert summary_data(d) == data["datasets"]["d"]
