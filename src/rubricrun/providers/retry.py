"""Retry policy (tenacity) wrapped around a provider: every attempt is a trace event.

Retried: 429, 5xx, timeouts, connection errors (ProviderError.retryable). Not retried: 400, 401, 403,
404, context-length errors. The wait is exponential with jitter, at least the server's Retry-After,
and never more than `max_wait_s`; the attempts stop at `max_attempts`.
"""

from __future__ import annotations

import random
import threading
import time

from tenacity import Retrying, retry_if_exception, stop_after_attempt

from ..config import RetryConfig
from ..errors import Cancelled, InputError, ProviderError
from ..types import LLMRequest, LLMResponse
from .base import BaseProvider
from .cache import cache_key
from .litellm import classify_error
from .trace import Tracer


def backoff_delay(exc: ProviderError, attempt: int, cfg: RetryConfig, rng: random.Random) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based)."""
    base = min(cfg.max_wait_s, cfg.initial_wait_s * 2 ** (attempt - 1))
    delay = rng.uniform(base / 2, base)  # "equal jitter": spreads threads, keeps a floor
    if exc.retry_after_s is not None:
        # Honour Retry-After, plus up to 10% so threads that were told the same moment do not stampede.
        delay = max(delay, exc.retry_after_s * (1 + 0.1 * rng.random()))
    return min(delay, cfg.max_wait_s)


class RetryingProvider(BaseProvider):
    def __init__(self, inner: BaseProvider, cfg: RetryConfig, tracer: Tracer, stop: threading.Event | None = None):
        self.inner, self.cfg, self.tracer = inner, cfg, tracer
        self.stop = stop or threading.Event()
        self._rng = random.Random()
        self._rng_lock = threading.Lock()

    def generate(self, request: LLMRequest) -> LLMResponse:
        key = cache_key(request)
        delays: dict[int, float] = {}  # attempt number -> the wait after it (a retryable failure's)

        def attempt(n: int) -> LLMResponse:
            """Attempt number n, traced; a retryable failure with attempts left records its wait in `delays`."""
            if self.stop.is_set():
                raise Cancelled("run is stopping")
            start = time.perf_counter()
            fields: dict[str, object]
            try:
                resp = self.inner.generate(request)
                status, fields = "ok", {"usage": resp.usage, "deployment": resp.deployment, "worker": resp.worker}
            except (Cancelled, InputError):
                raise
            except Exception as exc:  # noqa: BLE001
                err = classify_error(exc, request.model)
                retry_in = None
                if err.retryable and n < self.cfg.max_attempts:
                    with self._rng_lock:
                        retry_in = delays[n] = backoff_delay(err, n, self.cfg, self._rng)
                status, fields = "error", {"error": str(err), "status_code": err.status_code, "retry_in_s": retry_in,
                                           "deployment": err.deployment, "worker": err.worker}  # fmt: skip
            latency_ms = (time.perf_counter() - start) * 1000
            self.tracer.emit(role=request.role, model=request.model, key=key, cache_hit=False, attempt=n,
                             latency_ms=latency_ms, status=status, **fields)  # type: ignore[arg-type]  # fmt: skip
            if status == "error":
                raise err from None
            return resp

        # The first attempt is made without tenacity (most succeed: a Retrying object per call costs ~11 us);
        # tenacity takes over after a retryable failure, for attempts 2..max_attempts.
        try:
            return attempt(1)
        except ProviderError:
            if 1 not in delays:
                raise
        self._sleep(delays[1])
        retrying = Retrying(
            stop=stop_after_attempt(self.cfg.max_attempts - 1),
            wait=lambda state: delays.get(state.attempt_number + 1, 0.0),
            retry=retry_if_exception(lambda e: isinstance(e, ProviderError) and e.retryable),
            sleep=self._sleep,
            reraise=True,
        )
        for tried in retrying:
            with tried:
                return attempt(tried.retry_state.attempt_number + 1)
        raise AssertionError("unreachable")  # pragma: no cover

    def _sleep(self, seconds: float) -> None:
        if self.stop.wait(seconds):
            raise Cancelled("run is stopping")
