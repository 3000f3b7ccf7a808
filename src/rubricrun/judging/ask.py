"""Ask a judge until its reply can be read: the one ask / re-ask / forget loop of rubric judging (judging/rubric.py)
and pairwise judging (judging/pairwise.py).

A reply that cannot be read is asked again once, sampling at RETRY_TEMPERATURE (at temperature 0 the same unreadable
reply would come back). When the ask still ends unreadable, or a provider error ends it, the unreadable replies
leave the cache, so that a rerun asks again; when the re-ask was readable the first reply stays, so a rerun replays
the same path from the cache and pays for nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import NotDone, ProviderError
from ..providers.base import BaseProvider, cache_key
from ..types import LLMRequest, LLMResponse, Usage

JUDGE_PARSE_ATTEMPTS = 2  # a reply that is not the expected JSON is asked again once, then recorded as error
RETRY_TEMPERATURE = 0.7  # the second ask samples: at temperature 0 it would get the same unreadable reply

T = TypeVar("T")


@dataclass(frozen=True)
class Asked(Generic[T]):
    """What asking one judge came to: the reading of its reply, or (reading None) why there is none. `key` is the
    first ask's cache key; `usage` sums every ask."""

    reading: T | None
    error: str | None
    key: str
    usage: Usage


def judge_offset(item_id: str) -> int:
    """Where round-robin over the judge pool starts for an item: a stable hash, so a rerun asks the same judges."""
    return int(hashlib.sha256(item_id.encode("utf-8")).hexdigest()[:8], 16)


def judge_params(own: Mapping[str, Any], attempt: int, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The judge entry's `own` params over `defaults`; a re-ask (attempt > 0) samples at RETRY_TEMPERATURE at least."""
    params = {**defaults, **own}
    if attempt > 0:
        params["temperature"] = max(float(params.get("temperature") or 0.0), RETRY_TEMPERATURE)
    return params


def ask_until_readable(
    stack: BaseProvider,
    build: Callable[[int], LLMRequest],
    read: Callable[[LLMResponse], tuple[T | None, str | None]],
) -> Asked[T] | None:
    """Ask `build(attempt)` until `read` gives a reading (else None and why not), at most JUDGE_PARSE_ATTEMPTS
    times. None when a stop or the budget cut the ask (NotDone); a provider error ends it as an error."""
    usage, key, error = Usage(), "", "no attempt made"
    unreadable: list[LLMRequest] = []
    for attempt in range(JUDGE_PARSE_ATTEMPTS):
        req = build(attempt)
        key = key or cache_key(req)
        try:
            resp = stack.generate(req)
        except NotDone:
            return None
        except ProviderError as exc:
            error = str(exc)
            break
        usage = usage + resp.usage
        reading, why = read(resp)
        if reading is not None:
            return Asked(reading, None, key, usage)
        unreadable.append(req)
        error = why or "unreadable judge reply"
    for req in unreadable:  # out of the store that gave them (BaseProvider.forget; the cache defers it in try_cached)
        stack.forget(req)
    return Asked(None, error, key, usage)
