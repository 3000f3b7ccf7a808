"""Unit tests of providers/stack.py's backoff_delay: exponential growth with equal jitter, Retry-After, the cap."""

from __future__ import annotations

import random

from rubricrun.config import RetryConfig
from rubricrun.errors import ProviderError
from rubricrun.providers.stack import backoff_delay


class EdgeRng:
    """A stand-in for random.Random that always draws the low (or high) end of the range."""

    def __init__(self, high: bool):
        self.high = high

    def uniform(self, a: float, b: float) -> float:
        return b if self.high else a

    def random(self) -> float:
        return 0.999999 if self.high else 0.0


def _err(retry_after: float | None = None) -> ProviderError:
    return ProviderError("boom", model="m", status_code=429 if retry_after is not None else 500, retryable=True,
                         retry_after_s=retry_after)  # fmt: skip


def test_backoff_grows_exponentially_with_equal_jitter() -> None:
    cfg = RetryConfig(max_attempts=10, initial_wait_s=1.0, max_wait_s=60.0)
    # base = initial * 2**(attempt-1): 1, 2, 4, 8, 16, 32, then capped at 60; delay in [base/2, base]
    lows = [backoff_delay(_err(), n, cfg, EdgeRng(high=False)) for n in range(1, 8)]
    highs = [backoff_delay(_err(), n, cfg, EdgeRng(high=True)) for n in range(1, 8)]
    assert lows == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
    assert highs == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0]
    rng = random.Random(1)
    for n in range(1, 12):
        base = min(60.0, 2.0 ** (n - 1))
        assert base / 2 <= backoff_delay(_err(), n, cfg, rng) <= base


def test_backoff_respects_retry_after() -> None:
    cfg = RetryConfig(initial_wait_s=0.05, max_wait_s=60.0)
    # the jittered backoff of attempt 1 is at most 0.05 s, but the server said 5 s: wait 5 s .. 5.5 s (+ <= 10%)
    rng = random.Random(3)
    for _ in range(50):
        d = backoff_delay(_err(retry_after=5.0), 1, cfg, rng)
        assert 5.0 <= d <= 5.5
    assert backoff_delay(_err(retry_after=5.0), 1, cfg, EdgeRng(high=False)) == 5.0


def test_backoff_capped_at_max_wait() -> None:
    cfg = RetryConfig(initial_wait_s=1.0, max_wait_s=2.0)
    assert backoff_delay(_err(retry_after=100.0), 1, cfg, EdgeRng(high=True)) == 2.0
    assert backoff_delay(_err(), 30, cfg, EdgeRng(high=True)) == 2.0  # 2**29 capped
