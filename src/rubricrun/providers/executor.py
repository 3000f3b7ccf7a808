"""Who makes the provider attempts (`executor:` in the config): the seam at the bottom of the provider stack.

Everything that holds state stays in the run's process whatever the engine: the cache, the budget, the retry
policy, the rate limits, the trace, the rows. An executor only makes attempts: its `attempts(cfg, on_rate_limit)` is
the provider under the throttle (Cache(Budget(Retry(Throttle(attempts))))), which makes one attempt per
`generate` and returns the reply or raises the ProviderError (status, Retry-After, message, retryable) that the
retry layer above it reads. `threads` makes them here, on the graph's threads (LiteLLM, or a litellm.Router for
entries with `deployments:`); `dask` ships them to the workers of a Dask cluster (providers/dask_executor.py).
Another engine (Ray, ...) is one more class with these four members.

Design, measurements and the choices behind them: .agent/plans/020-dask-engine.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from ..config import Config
from .base import BaseProvider
from .litellm import LiteLLMProvider, import_litellm
from .router import RouterProvider

log = logging.getLogger("rubricrun")

RateLimitHook = Callable[..., None]  # (request, seconds): a reply's headers said the account has nothing left
MakeProvider = Callable[[], BaseProvider]  # a provider that makes one attempt per generate (LiteLLMProvider)


class Executor(Protocol):
    engine: str  # "threads" or "dask"
    workers: int  # the processes making attempts (threads: 1, the run's own)

    def attempts(self, cfg: Config, on_rate_limit: RateLimitHook) -> BaseProvider:
        """The provider under the throttle: one attempt per generate."""
        ...

    def warm(self) -> None:
        """Ready the attempt makers before the first attempt takes a rate-limit slot (called before each one)."""
        ...

    def close(self) -> None: ...


def routes_somewhere(cfg: Config) -> bool:
    """Whether an entry is served by a litellm.Router (`deployments:`)."""
    return any(m.routed for m in [*cfg.candidates, *cfg.judge_pool])


def local_provider(cfg: Config, make: MakeProvider = LiteLLMProvider) -> BaseProvider:
    """What makes an attempt in this process: LiteLLM, through a Router for the entries that have one."""
    provider = make()
    return RouterProvider(provider, cfg) if routes_somewhere(cfg) else provider


class Threads:
    """The attempts are made in the run's process, on the graph's threads (run.concurrency for candidates,
    run.judge_parallel_workers for judges)."""

    engine = "threads"
    workers = 1

    def __init__(self, make: MakeProvider = LiteLLMProvider, warm: Callable[[], object] = import_litellm) -> None:
        self.make, self._warm = make, warm

    def attempts(self, cfg: Config, on_rate_limit: RateLimitHook) -> BaseProvider:
        provider = self.make()
        provider.on_rate_limit = on_rate_limit  # type: ignore[attr-defined]
        return RouterProvider(provider, cfg) if routes_somewhere(cfg) else provider

    def warm(self) -> None:
        self._warm()

    def close(self) -> None:
        pass


def open_executor(cfg: Config) -> Executor:
    """The config's executor, ready: for `dask`, connected to a cluster with its workers up (bad input, exit 2,
    when the scheduler cannot be reached or has no workers within executor.timeout_s)."""
    if cfg.executor.engine == "threads":
        return Threads()
    from .dask_executor import DaskExecutor  # Dask is imported only by a run that uses it

    return DaskExecutor.open(cfg)


def describe(executor: Executor) -> str:
    """`threads`, or `dask, 8 workers` (progress lines, the run's first log line)."""
    if executor.engine == "threads":
        return "threads"
    return f"{executor.engine}, {executor.workers} worker{'s' if executor.workers != 1 else ''}"
