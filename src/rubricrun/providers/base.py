"""The provider interface: one `generate(request) -> response` call, and what a store can answer.

Every layer of the stack (cache, budget, retry, throttle) wraps a `BaseProvider` and is one; the
request and response types it speaks live in `rubricrun.types` (`LLMRequest`, `LLMResponse`). A provider that
keeps replies (the cache, at the top of the stack) also answers `try_cached` and `forget`; the others keep the
defaults below, so a caller never needs to know which layer it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..types import LLMRequest, LLMResponse


class BaseProvider:
    def generate(self, request: LLMRequest) -> LLMResponse:
        raise NotImplementedError

    def try_cached(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run `fn(*args)` here and now if a store answers every call it makes, and say whether it did. Without a
        store nothing is answered so: False, and `fn` has not run."""
        return False

    def forget(self, request: LLMRequest) -> None:
        """Drop the stored reply to `request` (its caller could not use it); nothing without a store."""
