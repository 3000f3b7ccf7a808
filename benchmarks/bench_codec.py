#!/usr/bin/env python3
"""The row codec's candidates side by side (ExecPlan 018): one row type declared four ways, each built, written as
a JSON line and read back, in one process, best of `--repeat` passes over `--rows` rows.

    .venv/bin/python benchmarks/bench_codec.py [--rows 20000] [--repeat 5]

- `stdlib`: a frozen dataclass, written by one `json.JSONEncoder` (a dict per row, built by hand) and read with
  `json.loads` + the constructor: the plainest path without a library.
- `msgspec`: a frozen `msgspec.Struct`, `msgspec.json.Encoder` / `Decoder(type)` (what rubricrun uses).
- `dc+msgspec`: the frozen dataclass, encoded and decoded by msgspec.
- `pydantic`: a frozen pydantic v2 `BaseModel`, `model_dump_json` / `model_validate_json`.

Prints microseconds per row for build, encode and decode, and each one's ratio to `msgspec`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any, Literal

import msgspec
import pydantic

# One row type (responses.jsonl's shape), declared each way from one list of (name, type, default).
_NONE = object()  # no default
USAGE = [("prompt_tokens", int, 0), ("completion_tokens", int, 0), ("total_tokens", int, 0)]
RESPONSE = [
    *((n, t, _NONE) for n, t in [("id", str), ("example_id", str), ("candidate", str), ("model", str)]),
    ("sample_index", int, _NONE),
    ("status", Literal["ok", "error"], _NONE),
    *((n, str | None, _NONE) for n in ("text", "error", "finish_reason")),
    ("usage", "Usage", _NONE),
    ("key", str, ""),
    ("flags", dict[str, Any], dict),  # a default factory
    ("reasoning", str | None, None),
    ("turn", int, 1),
]


def _dataclass(name: str, spec: list, usage: type | None = None) -> type:
    fields = []
    for n, t, d in spec:
        t = usage if t == "Usage" else t
        if d is _NONE:
            fields.append((n, t))
        else:
            fields.append((n, t, dataclasses.field(default_factory=d) if d is dict else dataclasses.field(default=d)))
    return dataclasses.make_dataclass(name, fields, frozen=True)


def _struct(name: str, spec: list, usage: type | None = None) -> type:
    fields = []
    for n, t, d in spec:
        t = usage if t == "Usage" else t
        fields.append((n, t) if d is _NONE else (n, t, msgspec.field(default_factory=d) if d is dict else d))
    return msgspec.defstruct(name, fields, frozen=True)


def _model(name: str, spec: list, usage: type | None = None) -> type:
    fields: dict[str, Any] = {}
    for n, t, d in spec:
        t = usage if t == "Usage" else t
        fields[n] = (t, ...) if d is _NONE else (t, pydantic.Field(default_factory=d) if d is dict else d)
    return pydantic.create_model(name, __config__=pydantic.ConfigDict(frozen=True), **fields)


DUsage = _dataclass("DUsage", USAGE)
DResponse = _dataclass("DResponse", RESPONSE, DUsage)
SUsage = _struct("SUsage", USAGE)
SResponse = _struct("SResponse", RESPONSE, SUsage)
PUsage = _model("PUsage", USAGE)
PResponse = _model("PResponse", RESPONSE, PUsage)


def _fields(i: int) -> dict[str, Any]:
    return {
        "id": f"ex-{i}#cand#0",
        "example_id": f"ex-{i}",
        "candidate": "cand",
        "model": "openai/cand",
        "sample_index": 0,
        "status": "ok",
        "text": f"Answer to question {i}: the capital of France is Paris. " * 3,
        "error": None,
        "finish_reason": "stop",
        "key": f"{i:064x}",
        "flags": {"truncated": False} if i % 2 else {},
    }


def _stdlib_row(r: DResponse) -> dict[str, Any]:
    return {f.name: getattr(r, f.name) for f in dataclasses.fields(r)} | {"usage": dataclasses.asdict(r.usage)}


def _stdlib_read(line: str) -> DResponse:
    row = json.loads(line)
    return DResponse(**{**row, "usage": DUsage(**row["usage"])})


def variants() -> dict[str, tuple[Callable[..., Any], Callable[[Any], Any], Callable[[Any], Any]]]:
    """name -> (build(fields, usage args), encode(obj) -> line, decode(line) -> obj)."""
    std = json.JSONEncoder(ensure_ascii=False)
    menc, mdec = msgspec.json.Encoder(), msgspec.json.Decoder(SResponse)
    ddec = msgspec.json.Decoder(DResponse)
    return {
        "stdlib": (
            lambda f, u: DResponse(**f, usage=DUsage(*u)),
            lambda r: std.encode(_stdlib_row(r)),
            _stdlib_read,
        ),
        "msgspec": (lambda f, u: SResponse(**f, usage=SUsage(*u)), menc.encode, mdec.decode),
        "dc+msgspec": (lambda f, u: DResponse(**f, usage=DUsage(*u)), menc.encode, ddec.decode),
        "pydantic": (
            lambda f, u: PResponse(**f, usage=PUsage(prompt_tokens=u[0], completion_tokens=u[1], total_tokens=u[2])),
            lambda r: r.model_dump_json(),
            PResponse.model_validate_json,
        ),
    }


def measure(rows: int, repeat: int) -> dict[str, tuple[float, float, float]]:
    fields = [_fields(i) for i in range(rows)]
    usage = (12, 34, 46)
    out = {}
    for name, (build, encode, decode) in variants().items():
        best = [float("inf")] * 3
        for _ in range(repeat):
            t0 = time.perf_counter()
            objs = [build(f, usage) for f in fields]
            t1 = time.perf_counter()
            lines = [encode(o) for o in objs]
            t2 = time.perf_counter()
            back = [decode(x) for x in lines]
            t3 = time.perf_counter()
            assert back == objs, name
            best = [min(b, t) for b, t in zip(best, (t1 - t0, t2 - t1, t3 - t2), strict=True)]
        out[name] = tuple(1e6 * b / rows for b in best)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    res = measure(args.rows, args.repeat)
    base = res["msgspec"]
    print(f"{'us per row':12} {'build':>14} {'encode':>14} {'decode':>14}")
    for name, figs in res.items():
        cells = [f"{v:6.2f} ({v / b:4.1f}x)" for v, b in zip(figs, base, strict=True)]
        print(f"{name:12} " + " ".join(f"{c:>14}" for c in cells))


if __name__ == "__main__":
    main()
