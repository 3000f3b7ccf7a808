"""The provider stack a run calls through: Cache(Budget(Retry(Throttle(attempts)))), with Deferring (batch.py) right
under the cache when some entry has `batch: true`. `attempts` is the executor's (executor.py): LiteLLM in this
process (Router(LiteLLM) when an entry has `deployments:`, router.py), or the workers of a Dask cluster. A cache
hit pays no throttle and no budget; every paid attempt is traced by the retry layer; the limits are per provider
account, shared by every entry and role that routes to it (ratelimit.py).

The retry layer (tenacity) retries 429, 5xx, timeouts and connection errors (ProviderError.retryable), not 400, 401,
403, 404 or context-length errors; the wait is exponential with jitter, at least the server's Retry-After and at most
`max_wait_s`; the attempts stop at `max_attempts`.
"""

from __future__ import annotations

import logging
import random
import threading
import time

from tenacity import Retrying, retry_if_exception, stop_after_attempt

from ..config import Config, RetryConfig
from ..errors import Cancelled, InputError, ProviderError
from ..types import LLMRequest, LLMResponse
from .base import BaseProvider
from .batch import Batcher, DeferringProvider
from .cache import CachingProvider, ResponseCache, cache_key
from .executor import Executor, Threads
from .litellm import classify_error
from .pricing import Budget, price_table
from .ratelimit import AccountLimiter, ThrottledProvider
from .redact import redact
from .router import group_limits
from .routing import Route, routes
from .trace import Tracer

log = logging.getLogger("rubricrun")


def open_cache(cfg: Config) -> ResponseCache | None:
    return ResponseCache(cfg.cache.dir) if cfg.cache.enabled else None


def account_limits(cfg: Config) -> dict[Route, tuple[float | None, float | None]]:
    """(rpm, tpm) of every provider account the config routes to. Two entries that set different limits for one
    account get the smallest (logged once per account and limit)."""
    seen: dict[tuple[Route, str], dict[float, list[str]]] = {}  # (account, "rpm" or "tpm") -> value -> who set it
    for section, entries in (("candidates", cfg.candidates), ("judges", cfg.judge_pool)):
        for m in entries:
            rpm, tpm = group_limits(m) if m.routed else (m.rpm, m.tpm)
            for route, _ in routes(m):
                for name, value in (("rpm", rpm), ("tpm", tpm)):
                    by_value = seen.setdefault((route, name), {})
                    if value is not None:
                        by_value.setdefault(value, []).append(f"{section}:{m.name}")
    for (route, name), by_value in seen.items():
        if len(by_value) > 1:
            given = "; ".join(f"{v:g} by {', '.join(who)}" for v, who in sorted(by_value.items()))
            log.warning(
                "%s (api_base %s, key %s): entries set different %s (%s); using the smallest, %g",
                route.model, redact(route.api_base or ""), route.api_key_env, name, given, min(by_value),
            )  # fmt: skip
    return {route: (min(seen[route, "rpm"], default=None), min(seen[route, "tpm"], default=None)) for route, _ in seen}


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
        self._rng = random.Random()  # (each draw is one C call: safe across threads)

    def generate(self, request: LLMRequest) -> LLMResponse:
        key = cache_key(request)
        delays: dict[int, float] = {}  # attempt number -> the wait after it (a retryable failure's)

        def attempt(n: int) -> LLMResponse:
            """Attempt number n, traced; a retryable failure with attempts left records its wait in `delays`."""
            if self.stop.is_set():
                raise Cancelled("run is stopping")
            start = time.perf_counter()
            error = usage = status_code = retry_in = None
            try:
                resp = self.inner.generate(request)
                usage, deployment, worker = resp.usage, resp.deployment, resp.worker
            except (Cancelled, InputError):
                raise
            except Exception as exc:  # noqa: BLE001
                err = classify_error(exc, request.model)
                if err.retryable and n < self.cfg.max_attempts:
                    retry_in = delays[n] = backoff_delay(err, n, self.cfg, self._rng)
                error, status_code, deployment, worker = str(err), err.status_code, err.deployment, err.worker
            latency_ms = (time.perf_counter() - start) * 1000
            self.tracer.emit(role=request.role, model=request.model, key=key, cache_hit=False, attempt=n,
                             latency_ms=latency_ms, status="ok" if error is None else "error", error=error,
                             usage=usage, status_code=status_code, retry_in_s=retry_in, deployment=deployment,
                             worker=worker)  # fmt: skip
            if error is not None:
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


def build_stack(
    cfg: Config,
    tracer: Tracer,
    stop: threading.Event,
    cache: ResponseCache | None,
    batcher: Batcher | None = None,
    executor: Executor | None = None,
) -> tuple[BaseProvider, Budget]:
    """The stack and its Budget layer (the runner reads what was spent and whether it stopped). With a batcher,
    requests of batch entries that miss the cache are deferred to it instead of made. The executor makes the
    attempts (default: this process's threads)."""
    max_pause = cfg.retry.max_wait_s
    accounts = {
        route: AccountLimiter(rpm, tpm, max_pause_s=max_pause)
        for route, (rpm, tpm) in account_limits(cfg).items()
        if rpm or tpm
    }
    judge_bucket = AccountLimiter(cfg.run.judge_rate_limit_rpm) if cfg.run.judge_rate_limit_rpm else None
    executor = executor or Threads()
    # Entries with `deployments:` go through their litellm.Router (made by the executor where the attempts are
    # made); the throttle here paces each as one account. Rate-limit headers of a reply pause its account.
    attempts = executor.attempts(cfg, lambda request, seconds: throttle.observe(request, seconds))
    throttle = ThrottledProvider(attempts, accounts, judge_bucket, stop, max_pause_s=max_pause, warm=executor.warm)
    budget = Budget(RetryingProvider(throttle, cfg.retry, tracer, stop), cfg.run.budget_usd, price_table(cfg))
    if batcher is None:
        return CachingProvider(budget, cache, tracer), budget
    caching = CachingProvider(DeferringProvider(budget, batcher), cache, tracer, passes=True)
    batcher.attach(caching, budget)
    return caching, budget
