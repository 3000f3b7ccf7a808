"""Unit tests of providers/cache.py's cache_key: a golden value, what changes the key and what does not."""

from __future__ import annotations

import datetime
import decimal
import enum
import hashlib
import json
import random
import struct

import msgspec
import pytest

from rubricrun.providers.base import cache_key, canonical_json
from rubricrun.types import LLMRequest

BASE = LLMRequest(
    model="openai/gpt-4o-mini",
    messages=(
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2? Réponds en français."},
    ),
    params={"temperature": 0.0, "max_tokens": 16, "seed": 7},
    api_base="http://127.0.0.1:8000/v1",
)

# Computed once and hard-coded: if this changes, every user's cache is invalidated.
GOLDEN_JSON = (
    '{"api_base":"http://127.0.0.1:8000/v1","messages":[{"content":"Be brief.","role":"system"},'
    '{"content":"What is 2+2? Réponds en français.","role":"user"}],"model":"openai/gpt-4o-mini",'
    '"params":{"max_tokens":16,"seed":7,"temperature":0},"response_schema":null}'
)
GOLDEN_KEY = "81772d1f63dded58943f0daf56f1f4667beb3b090e8e7790745132b6afff35d4"


def _replace(**kw: object) -> LLMRequest:

    return msgspec.structs.replace(BASE, **kw)


def test_cache_key_golden_value() -> None:
    assert canonical_json(BASE.cache_fields()) == GOLDEN_JSON
    assert hashlib.sha256(GOLDEN_JSON.encode("utf-8")).hexdigest() == GOLDEN_KEY
    assert cache_key(BASE) == GOLDEN_KEY


def test_cache_key_same_for_integral_float_and_int_params() -> None:
    # YAML `temperature: 0` and `temperature: 0.0` are the same request and must share one cache entry.
    as_int = _replace(params={"max_tokens": 16, "seed": 7, "temperature": 0})
    as_float = _replace(params={"max_tokens": 16.0, "seed": 7, "temperature": 0.0})
    assert cache_key(as_int) == cache_key(as_float) == GOLDEN_KEY
    assert cache_key(_replace(params={"max_tokens": 16, "seed": 7, "temperature": 0.5})) != GOLDEN_KEY


def test_cache_key_stable_across_calls_and_dict_order() -> None:
    assert cache_key(BASE) == cache_key(BASE)
    reordered = _replace(
        messages=(
            {"content": "Be brief.", "role": "system"},
            {"content": "What is 2+2? Réponds en français.", "role": "user"},
        ),
        params={"seed": 7, "max_tokens": 16, "temperature": 0.0},
    )
    assert cache_key(reordered) == GOLDEN_KEY


@pytest.mark.parametrize(
    "change",
    [
        {"model": "openai/gpt-4o"},
        {"api_base": "http://127.0.0.1:8001/v1"},
        {"api_base": None},
        {"messages": ({"role": "user", "content": "What is 2+3?"},)},
        {"messages": tuple(reversed(BASE.messages))},  # message order matters
        {"params": {"temperature": 0.7, "max_tokens": 16, "seed": 7}},
        {"params": {"temperature": 0.0, "max_tokens": 16}},
        {"response_schema": {"type": "object"}},
        {"sample_index": 1},
    ],
)
def test_cache_key_changes_with_output_fields(change: dict) -> None:
    assert cache_key(_replace(**change)) != GOLDEN_KEY


@pytest.mark.parametrize(
    "change",
    [
        {"timeout_s": 5.0},
        {"role": "judge"},
        {"limiter": "judge:j1"},
        {"api_key_env": "SOME_OTHER_KEY_VAR"},
        {"sample_index": 0},
    ],
)
def test_cache_key_ignores_bookkeeping(change: dict) -> None:
    assert cache_key(_replace(**change)) == GOLDEN_KEY


def test_sample_index_zero_is_the_key_without_it() -> None:
    assert "sample_index" not in BASE.cache_fields()
    assert _replace(sample_index=1).cache_fields()["sample_index"] == 1
    assert cache_key(_replace(sample_index=1)) != cache_key(_replace(sample_index=2))


def _stdlib_key(request: LLMRequest) -> str:
    """The key as the standard library writes its canonical JSON: what every key so far was made with."""
    text = json.dumps(request.cache_fields(), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _value(rng: random.Random, depth: int = 0) -> object:
    texts = [
        "",
        "plain",
        "Réponds en français",
        '中文 ü \u2028 \n \t "quoted" back\\slash',
        "emoji \U0001f600",
        "\x00\x1f",
    ]
    floats = [0.0, -0.0, 0.1, 1.0, 2.5, 1e-7, 1e16, 1.5e300, -3.25, 123456789.125, float("nan"), float("inf")]
    kind = rng.randrange(7 if depth < 3 else 5)
    if kind == 0:
        return rng.choice(texts)
    if kind == 1:
        return rng.choice(floats)
    if kind == 2:
        return rng.choice([0, 1, -7, 2**40, 2**70, True, False])
    if kind == 3:
        return None
    if kind == 4:
        return rng.choice(floats) * rng.randint(-5, 5)
    if kind == 5:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(texts) + str(i): _value(rng, depth + 1) for i in range(rng.randrange(4))}


def test_cache_key_is_the_standard_librarys_canonical_json_over_many_requests() -> None:
    """The key did not change with the codec (ExecPlan 018): sha256 of json.dumps(sort_keys, compact separators,
    ensure_ascii=False, default=str) of cache_fields(), for unicode, floats of every shape, nested params and
    schemas, and the sample index."""
    rng = random.Random(18)
    for i in range(2000):
        request = LLMRequest(
            model=rng.choice(["openai/gpt-4o-mini", "local/smollm2", "模型/ü"]),
            messages=tuple(
                {"role": rng.choice(["system", "user", "assistant"]), "content": _value(rng)}
                for _ in range(rng.randint(1, 3))
            ),
            params={k: _value(rng) for k in rng.sample(["temperature", "max_tokens", "seed", "top_p", "extra"], 3)},
            api_base=rng.choice([None, "http://127.0.0.1:8000/v1"]),
            response_schema=rng.choice([None, {"type": "object", "properties": {"x": {"type": _value(rng)}}}]),
            sample_index=rng.choice([0, 0, 1, 7]),
        )
        assert cache_key(request) == _stdlib_key(request), i
    assert cache_key(BASE) == _stdlib_key(BASE) == GOLDEN_KEY


def _text(rng: random.Random) -> str:
    """Any text: ASCII, controls, every plane (no lone surrogates: those make no key at all)."""
    ranges = [(0, 0x80), (0x80, 0xD800), (0xE000, 0x10000), (0x10000, 0x110000)]
    return "".join(chr(rng.randrange(*rng.choice(ranges))) for _ in range(rng.randrange(12)))


def _float(rng: random.Random) -> float:
    """A float of any shape: random bits (subnormals, huge, NaN, infinities), decimal-looking, near the 1e-4 edge."""
    bits = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
    edge = rng.choice([1e-4, 1e16, 1e-5, 2.0**53]) * rng.choice([1, -1]) * (1 + rng.randrange(-3, 4) * 2**-52)
    return rng.choice(
        [bits, round(rng.uniform(-2, 2), rng.randrange(6)), rng.uniform(-1, 1) * 10.0 ** rng.randrange(-8, 20), edge]
    )


class _Level(enum.IntEnum):
    HIGH = 3


class _Text(str):
    pass


def test_cache_key_fast_path_matches_the_standard_library() -> None:
    """cache_key writes most keys with msgspec (plan 023, round 4): byte for byte the standard library's JSON for
    text messages and scalar params of every shape, and the standard library's own for anything else (odd types,
    nested values, tiny floats, NaN), so every key stays what it was."""
    rng = random.Random(29)
    odd = [{1, 2}, datetime.date(2024, 1, 1), decimal.Decimal("1.5"), b"xy", (1, 2.5), _Level.HIGH, _Text("s"),
           {"nested": [1e-7, "x"]}, 2**70, -(2**70), float("nan"), float("-inf"), 1e-5, 5e-324]  # fmt: skip
    for i in range(20000):
        scalar = rng.choice([_text(rng), _float(rng), rng.randrange(-(2**80), 2**80), rng.randrange(-9, 9), True, None])
        request = LLMRequest(
            model=_text(rng),
            messages=tuple({"role": _text(rng), "content": _text(rng)} for _ in range(rng.randint(1, 3))),
            params={_text(rng): scalar, "temperature": _float(rng), "max_tokens": rng.randrange(1, 2**40)},
            api_base=rng.choice([None, _text(rng)]),
            sample_index=rng.choice([0, 0, 1, 7]),
            deployments=rng.choice([(), (_text(rng), _text(rng))]),
        )
        if i % 10 == 0:
            request = msgspec.structs.replace(request, params={**request.params, "extra": rng.choice(odd)})
        assert cache_key(request) == _stdlib_key(request), i
