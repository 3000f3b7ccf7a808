"""The provider interface: one `generate(request) -> response` call, and what a store can answer. Every layer of the
stack wraps a `BaseProvider` and is one; the cache (at the top) also answers `try_cached` and `forget`, the others
keep the defaults below, so a caller never needs to know which layer it holds."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import msgspec

from ..types import LLMRequest, LLMResponse

# The key's canonical JSON: the standard library's, its encoder built once (json.dumps with keywords builds one per
# call). Sorted keys, no spaces, UTF-8 unescaped, Python's float repr: every key so far was made so.
canonical_json = json.JSONEncoder(
    ensure_ascii=False, check_circular=False, sort_keys=True, separators=(",", ":"), default=str
).encode
_SORTED = msgspec.json.Encoder(order="sorted")  # the same bytes, in C, for what _alike admits (plan 023, round 4)
_SCALARS = frozenset({str, int, bool, type(None)})


def _alike(fields: dict[str, Any]) -> bool:
    """Whether msgspec writes `fields` byte for byte as canonical_json does: text messages and scalar params, as
    nearly every request is (tests/test_cache_key.py). Floats below 1e-4, NaN and infinities (spelt otherwise),
    nested and foreign values are left to the standard library."""
    if type(fields["model"]) not in _SCALARS or type(fields["api_base"]) not in _SCALARS:
        return False
    for message in fields["messages"]:
        if type(message) is not dict:
            return False
        for k, v in message.items():
            if type(k) is not str or type(v) is not str:
                return False
    for k, v in fields["params"].items():
        t = type(v)
        if type(k) is not str or not (t in _SCALARS or t is float and (v == 0 or 1e-4 <= abs(v) < 1e16)):
            return False
    if fields["response_schema"] is not None or type(fields.get("sample_index", 0)) is not int:
        return False
    return all(type(d) is str for d in fields.get("deployments", ()))


def cache_key(request: LLMRequest) -> str:
    """The key a store keeps the reply to `request` under (providers/cache.py): sha256 of the canonical JSON of
    `request.cache_fields()`, computed once per request object (the task, the cache and the retry layer all ask)."""
    memo = request.__dict__  # LLMRequest is declared with dict=True for this
    key = memo.get("_cache_key")
    if key is None:
        fields = request.cache_fields()
        text = _SORTED.encode(fields) if _alike(fields) else canonical_json(fields).encode("utf-8")
        key = memo["_cache_key"] = hashlib.sha256(text).hexdigest()
    return key


class BaseProvider:
    def generate(self, request: LLMRequest) -> LLMResponse:
        raise NotImplementedError

    def try_cached(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run `fn(*args)` here and now if a store answers every call it makes, and say whether it did. Without a
        store nothing is answered so: False, and `fn` has not run."""
        return False

    def forget(self, request: LLMRequest) -> None:
        """Drop the stored reply to `request` (its caller could not use it); nothing without a store."""
