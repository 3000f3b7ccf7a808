"""Unit tests of types.py's to_row (hand-written for speed): it must give exactly what dataclasses.asdict gives."""

from __future__ import annotations

import dataclasses

import pytest

from rubricrun.types import Criterion, Example, Judgment, LLMResponse, TraceEvent, Usage, to_row

ROW_CASES = [
    Example(
        id="e1",
        dataset="d",
        source="d.jsonl:3",
        messages=({"role": "user", "content": "hi", "extra": [1, (2, 3)]},),
        choices=("a", "b"),
        answer="B",
        rubric=(Criterion("c1", "states X", -2.5, ("safety",), "cat"),),
        metadata={"nested": {"k": [1, {"z": None}]}},
    ),
    Judgment(
        id="j",
        response_id="r",
        example_id="e",
        candidate="c",
        criterion_id="c1",
        weight=1.0,
        judge="j1",
        verdict="met",
        explanation=None,
        error=None,
        votes=({"judge": "j1", "verdict": "met"},),
        usage=Usage(3, 4, 7),
    ),
    TraceEvent(
        ts=1.5, role="judge", model="m", key="k", cache_hit=False, attempt=2, latency_ms=3.0, status="ok", usage=None
    ),
    LLMResponse(text="t", finish_reason="stop", usage=Usage(1, 2, 3), model="m"),
]


@pytest.mark.parametrize("obj", ROW_CASES, ids=lambda o: type(o).__name__)
def test_to_row_equals_asdict(obj: object) -> None:
    full = dataclasses.asdict(obj)  # type: ignore[call-overload]
    # a field marked NOT_IN_ROW (cache_hit of responses and judgments, issue 13) is left out of the row
    reference = {f.name: full[f.name] for f in dataclasses.fields(obj) if f.metadata.get("row", True)}  # type: ignore[arg-type]
    fast = to_row(obj)
    assert repr(fast) == repr(reference)  # same values, same key order, tuples kept as tuples


def test_to_row_copies_containers() -> None:
    ex = ROW_CASES[0]
    row = to_row(ex)
    row["messages"][0]["content"] = "changed"
    row["metadata"]["nested"]["k"].append(2)
    assert ex.messages[0]["content"] == "hi" and ex.metadata["nested"]["k"] == [1, {"z": None}]


@pytest.mark.parametrize("sort_keys,separators", [(False, (", ", ": ")), (True, (",", ":"))])
def test_json_encoder_built_once_writes_what_json_encoder_writes(sort_keys: bool, separators: tuple[str, str]) -> None:
    """types.json_encoder (one C encoder for every call, plan 012) gives JSONEncoder.encode's bytes: rows, nested
    dataclasses, a top-level string, floats (nan and infinities too), non-ASCII text."""
    import json

    from rubricrun.types import json_encoder, shallow_row

    reference = json.JSONEncoder(ensure_ascii=False, default=shallow_row, sort_keys=sort_keys, separators=separators)
    encode = json_encoder(shallow_row, sort_keys=sort_keys, separators=separators)
    values = [*ROW_CASES, 'é \u2212 "q" \n', 1.5, float("nan"), float("-inf"), None, True, {"b": [1, 2.0], "a": "x"}]
    for value in values:
        assert encode(value) == reference.encode(value)


def test_direct_init_builds_what_the_dataclass_init_builds() -> None:
    """types.direct_init (plan 012): the same fields in the instance dict, in order; defaults shared as dataclasses
    shares them, default factories called per instance; a missing or unknown argument is a TypeError; frozen."""
    from rubricrun.types import Response, direct_init

    shared = Usage()

    @dataclasses.dataclass(frozen=True)
    class Plain:
        a: int
        b: str = "x"
        c: dict = dataclasses.field(default_factory=dict)
        d: Usage = shared

    @direct_init
    @dataclasses.dataclass(frozen=True)
    class Direct:
        a: int
        b: str = "x"
        c: dict = dataclasses.field(default_factory=dict)
        d: Usage = shared

    for args, kwargs in [((1,), {}), ((1, "y"), {"c": {"k": 1}}), ((), {"a": 2, "d": Usage(1, 2, 3)})]:
        p, d = Plain(*args, **kwargs), Direct(*args, **kwargs)
        assert list(d.__dict__.items()) == list(p.__dict__.items())
    assert Direct(1).c is not Direct(1).c and Direct(1).d is shared
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
        Direct()
    with pytest.raises(TypeError):
        Direct(1, z=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Direct(1).a = 2  # type: ignore[misc]
    assert Response.__init__.__qualname__ == "Response.__init__"

    @dataclasses.dataclass(frozen=True)
    class Posted:
        a: int

        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="does more than set its fields"):
        direct_init(Posted)
    for case in ROW_CASES:  # the row types, rebuilt from their fields
        assert type(case)(**{f.name: getattr(case, f.name) for f in dataclasses.fields(case)}) == case
