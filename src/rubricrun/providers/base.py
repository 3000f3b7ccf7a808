"""The provider interface: one `generate(request) -> response` call, and what a store can answer. Every layer of the
stack wraps a `BaseProvider` and is one; the cache (at the top) also answers `try_cached` and `forget`, the others
keep the defaults below, so a caller never needs to know which layer it holds."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from ..types import LLMRequest, LLMResponse

# The key's canonical JSON: the standard library's, its encoder built once (json.dumps with keywords builds one per
# call). Sorted keys, no spaces, UTF-8 unescaped, Python's float repr: every key so far was made so.
canonical_json = json.JSONEncoder(
    ensure_ascii=False, check_circular=False, sort_keys=True, separators=(",", ":"), default=str
).encode


def cache_key(request: LLMRequest) -> str:
    """The key a store keeps the reply to `request` under (providers/cache.py): sha256 of the canonical JSON of
    `request.cache_fields()`, computed once per request object (the task, the cache and the retry layer all ask)."""
    memo = request.__dict__  # LLMRequest is declared with dict=True for this
    key = memo.get("_cache_key")
    if key is None:
        key = memo["_cache_key"] = hashlib.sha256(canonical_json(request.cache_fields()).encode("utf-8")).hexdigest()
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
