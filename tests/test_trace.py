"""trace.jsonl's lines: `Tracer._line` writes each value by its type's own writer; the bytes must be those the JSON
encoder writes for the event's row dict (TraceEvent's fields in order, then the invocation), whatever the values."""

from __future__ import annotations

import json
import random
from pathlib import Path

from rubricrun.providers.trace import _TRACE_FIELDS, Tracer, _encode
from rubricrun.types import Usage

_STRS = ["a", 'quo"te', "uni ü 中 \u2028", "back\\slash", "new\nline", "", "ctl\x01", "\ud7ff"]


def _encoded(event: tuple, invocation: str) -> str:
    ts, role, model, key, hit, attempt, latency, status, error, usage, code, retry, dep, worker = event
    values = (round(ts, 3), role, model, key, hit, attempt, round(latency, 1), status, error, usage, code,
              None if retry is None else round(retry, 3), dep, worker)  # fmt: skip
    row = dict(zip(_TRACE_FIELDS, values, strict=True))
    if invocation:
        row["invocation"] = invocation
    return _encode(row) + "\n"


def test_trace_lines_are_the_encoders_bytes(tmp_path: Path) -> None:
    rng = random.Random(0)
    floats = [0.0, 12.3456, float("nan"), float("inf"), -float("inf"), 1e-9, 123456789.123, 5, -0.0]
    for invocation in ("", "1795538443", 'odd"one'):
        tracer = Tracer(tmp_path / f"trace{len(invocation)}.jsonl", invocation=invocation)
        try:
            for _ in range(5000):
                event = (
                    1.79e9 + rng.random(), rng.choice(_STRS), rng.choice(_STRS), rng.choice(_STRS),
                    rng.choice([True, False]), rng.randint(0, 5), rng.choice(floats), rng.choice(["ok", "error"]),
                    rng.choice([None, *_STRS]), rng.choice([None, Usage(1, 2, 3), Usage(0, 0, 0), Usage(10**12, 5, 7)]),
                    rng.choice([None, 429, 500]), rng.choice([None, 1.23456, 0.0, 2]), rng.choice([None, *_STRS]),
                    rng.choice([None, "node-7:4242", *_STRS]),
                )  # fmt: skip
                assert tracer._line(event) == _encoded(event, invocation)
        finally:
            tracer.close()


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
    assert list(rows[1]) == [*_TRACE_FIELDS, "invocation"]
