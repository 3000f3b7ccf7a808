"""The provider stack a run calls through: Cache(Budget(Retry(Throttle(attempts)))), with Deferring (batch.py) right
under the cache when some entry has `batch: true`. `attempts` is the executor's (executor.py): LiteLLM in this
process (Router(LiteLLM) when an entry has `deployments:`, router.py), or the workers of a Dask cluster. A cache
hit pays no throttle and no budget; every paid attempt is traced by the retry layer; the limits are per provider
account, shared by every entry and role that routes to it (ratelimit.py).
"""

from __future__ import annotations

import logging
import threading

from ..config import Config
from .base import BaseProvider
from .batch import Batcher, DeferringProvider
from .cache import CachingProvider, ResponseCache
from .executor import Executor, Threads
from .pricing import Budget, price_table
from .ratelimit import AccountLimiter, ThrottledProvider
from .redact import redact
from .retry import RetryingProvider
from .router import group_limits
from .routing import Route, routes
from .trace import Tracer

log = logging.getLogger("rubricrun")


def open_cache(cfg: Config) -> ResponseCache | None:
    return ResponseCache(cfg.cache.dir) if cfg.cache.enabled else None


def account_limits(cfg: Config) -> dict[Route, tuple[float | None, float | None]]:
    """(rpm, tpm) of every provider account the config routes to. Two entries that set different limits for one
    account get the smallest (logged once per account and limit)."""
    seen: dict[Route, dict[str, dict[float, list[str]]]] = {}
    for section, entries in (("candidates", cfg.candidates), ("judges", cfg.judge_pool)):
        for m in entries:
            rpm, tpm = group_limits(m) if m.routed else (m.rpm, m.tpm)
            for route, _ in routes(m):
                limits = seen.setdefault(route, {"rpm": {}, "tpm": {}})
                for name, value in (("rpm", rpm), ("tpm", tpm)):
                    if value is not None:
                        limits[name].setdefault(value, []).append(f"{section}:{m.name}")
    out: dict[Route, tuple[float | None, float | None]] = {}
    for route, limits in seen.items():
        for name, by_value in limits.items():
            if len(by_value) > 1:
                given = "; ".join(f"{v:g} by {', '.join(who)}" for v, who in sorted(by_value.items()))
                log.warning(
                    "%s (api_base %s, key %s): entries set different %s (%s); using the smallest, %g",
                    route.model, redact(route.api_base or ""), route.api_key_env, name, given, min(by_value),
                )  # fmt: skip
        out[route] = (min(limits["rpm"], default=None), min(limits["tpm"], default=None))
    return out


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
