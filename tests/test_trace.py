"""trace.jsonl's lines: each a TraceEvent written by the codec, with the keys and values trace.jsonl has always had
(rounded times, `invocation` last and only when the tracer has one), whatever the values."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from rubricrun.providers.trace import Tracer
from rubricrun.types import TraceEvent, Usage

_STRS = ["a", 'quo"te', "uni ü 中 \u2028", "back\\slash", "new\nline", "", "ctl\x01", "\ud7ff"]
_KEYS = ["ts", "role", "model", "key", "cache_hit", "attempt", "latency_ms", "status", "error", "usage",
         "status_code", "retry_in_s", "deployment", "worker"]  # fmt: skip


def _expected(kw: dict, invocation: str) -> dict:
    """What the line of `Tracer.emit(**kw)` holds (but its `ts`), as trace.jsonl has always written it."""
    usage = kw["usage"]
    latency = round(kw["latency_ms"], 1)
    row = {
        **kw,
        "latency_ms": latency if math.isfinite(latency) else None,  # JSON has no NaN: null (it was NaN before 018)
        "usage": None
        if usage is None
        else {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        },  # fmt: skip
        "retry_in_s": None if kw["retry_in_s"] is None else round(kw["retry_in_s"], 3),
    }
    return row | ({"invocation": invocation} if invocation else {})


def test_trace_lines_hold_the_events_fields(tmp_path: Path) -> None:
    rng = random.Random(0)
    floats = [0.0, 12.3456, float("nan"), float("inf"), -float("inf"), 1e-9, 123456789.123, 5, -0.0]
    assert [*TraceEvent.__struct_fields__] == [*_KEYS, "invocation"]
    for invocation in ("", "1795538443", 'odd"one'):
        path = tmp_path / f"trace{len(invocation)}.jsonl"
        tracer = Tracer(path, invocation=invocation)
        emitted = []
        for _ in range(3000):
            kw = dict(
                role=rng.choice(_STRS), model=rng.choice(_STRS), key=rng.choice(_STRS),
                cache_hit=rng.choice([True, False]), attempt=rng.randint(0, 5), latency_ms=rng.choice(floats),
                status=rng.choice(["ok", "error"]), error=rng.choice([None, *_STRS]),
                usage=rng.choice([None, Usage(1, 2, 3), Usage(0, 0, 0), Usage(10**12, 5, 7)]),
                status_code=rng.choice([None, 429, 500]), retry_in_s=rng.choice([None, 1.23456, 0.0, 2]),
                deployment=rng.choice([None, *_STRS]), worker=rng.choice([None, "node-7:4242", *_STRS]),
            )  # fmt: skip
            tracer.emit(**kw)
            emitted.append(kw)
        tracer.close()
        rows = [
            json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")[:-1]
        ]  # not splitlines: U+2028
        assert len(rows) == len(emitted)
        for row, kw in zip(rows, emitted, strict=True):
            assert list(row) == [*_KEYS, *(["invocation"] if invocation else [])]
            assert row["ts"] == round(row["ts"], 3) and row["ts"] > 1.7e9
            assert {k: v for k, v in row.items() if k != "ts"} == _expected(kw, invocation)


def test_a_written_trace_reads_back_as_its_events(tmp_path: Path) -> None:
    tracer = Tracer(tmp_path / "trace.jsonl", invocation="7")
    tracer.emit(role="judge", model="m", key="k", cache_hit=True, attempt=0, latency_ms=0.0, status="ok",
                usage=Usage(3, 4, 7))  # fmt: skip
    tracer.emit(role="candidate", model="m2", key="k2", cache_hit=False, attempt=2, latency_ms=12.34, status="error",
                error="boom", status_code=500, retry_in_s=1.5)  # fmt: skip
    tracer.close()
    rows = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert [r["key"] for r in rows] == ["k", "k2"]
    assert rows[0]["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert rows[1]["error"] == "boom" and rows[1]["retry_in_s"] == 1.5 and rows[1]["invocation"] == "7"
    assert list(rows[1]) == [*_KEYS, "invocation"]
