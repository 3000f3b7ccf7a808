"""codec.py: every row type written as JSON whose content is the row's fields in order (what the files have always
held), read back as the object it was written from; the cache's stored reply; values of other types."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pytest

from rubricrun import codec
from rubricrun.results.ppi import Anchored, Estimate
from rubricrun.results.summary_types import (
    DatasetCandidate,
    DatasetSummary,
    JudgeSummary,
    PairOutcome,
    PairwiseJudging,
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
        codec.lines([{"x": np.float64(0.25), "n": float("nan"), "i": float("inf")}])
        == b'{"x":0.25,"n":null,"i":null}\n'
    )
    with pytest.raises(TypeError):
        codec.lines([{"x": object()}])
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


def _candidate(**kw: object) -> DatasetCandidate:
    fields = dict(score=0.5, ci=(None, None), std=None, n=2, coverage=None, partial=0, scored=2, expected=2)
    return DatasetCandidate(**{**fields, "histogram": (), "by_example_category": {}, "extra": {}, **kw})  # type: ignore[arg-type]


def test_summary_data_keeps_each_candidates_extra_beside_its_fields() -> None:
    cand = _candidate(extra={"mean_normalized": 0.4, "by_tag": {"t": 1.0}})
    d = DatasetSummary("rubric", "exclude", {"a": cand}, ())
    s = Summary(run_id="r", pass_threshold=None, examples=2, datasets={"d": d}, judges=JudgeSummary({}))
    data = summary_data(s)
    assert list(data) == ["run_id", "pass_threshold", "examples", "datasets", "judges"]  # None-valued facts left out
    assert data["judges"] == {"per_judge": {}}
    c = data["datasets"]["d"]["candidates"]["a"]
    assert list(c)[-2:] == ["mean_normalized", "by_tag"] and "extra" not in c and "extra" not in data["datasets"]["d"]
    assert read_summary(json.loads(codec.pretty(data))) == s
    assert summary_data(d) == data["datasets"]["d"]


def test_summary_leaves_out_what_it_has_nothing_for_and_writes_lambda() -> None:
    """omit_defaults: a candidate or a pair without labels has no `ppi` key, an anchored score no `note`, `budget`,
    `rating` when None, while every other field is written even when None; `lam` is the file's `lambda`."""
    ppi = Anchored(
        estimate=0.5,
        ci=(0.25, 0.75),
        n_labelled=4,
        n_unlabelled=6,
        lam=0.5,
        classical=Estimate(0.5, (0.0, 1.0)),
        judge_only=Estimate(0.6, (0.5, 0.7)),
        judge_outside=False,
        effective_labels=None,
        judges={},
    )
    lc = dict(lc_win_rate=None, lc_win_rate_se=None, lc_n=0, lc_note=None, lc_one_side_longer=False)
    rates = dict(win_rate=None, win_ci=(None, None), tie_rate=None, tie_ci=(None, None), loss_rate=None)
    pair = PairOutcome(
        a="a", b="b", n=0, comparisons=0, wins=0, ties=0, losses=0, errors=0, loss_ci=(None, None), **rates, **lc,
        longer_share=None, longer_n=0,
    )  # fmt: skip
    d = DatasetSummary("rubric", "exclude", {"a": _candidate(), "b": _candidate(ppi=ppi)}, ())
    s = Summary(
        run_id="r",
        pass_threshold=None,
        examples=2,
        datasets={"d": d},
        judges=JudgeSummary({}),
        pairwise_judging={"d": PairwiseJudging(pairs=(pair, msgspec.structs.replace(pair, ppi=ppi)))},
    )
    text = codec.pretty(summary_data(s))
    data = json.loads(text)
    a, b = data["datasets"]["d"]["candidates"]["a"], data["datasets"]["d"]["candidates"]["b"]
    assert "ppi" not in a and a["std"] is None and a["ci"] == [None, None]
    assert list(b["ppi"]) == [
        "estimate", "ci", "n_labelled", "n_unlabelled", "lambda", "classical", "judge_only", "judge_outside",
        "effective_labels", "judges",
    ]  # fmt: skip
    assert "labels" not in data["datasets"]["d"] and "ppi_paired" not in data["datasets"]["d"]
    plain, anchored = data["pairwise_judging"]["d"]["pairs"]
    assert "ppi" not in plain and plain["win_rate"] is None and anchored["ppi"]["lambda"] == 0.5
    assert read_summary(data) == s
    # a pair outcome written before the length-controlled win rate still reads
    old = {k: v for k, v in plain.items() if not k.startswith(("lc_", "longer_"))}
    older = {**data, "pairwise_judging": {"d": {**data["pairwise_judging"]["d"], "pairs": [old]}}}
    assert read_summary(older).pairwise_judging["d"].pairs == (pair,)
