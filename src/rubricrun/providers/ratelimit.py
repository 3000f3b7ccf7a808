"""Limits as providers set them: one limiter per provider account (a `routing.Route`: model string, `api_base`, key
variable), shared by every thread, entry and role. The retry layer above the throttle only decides whether and when
one request tries again (who owns what: .agent/plans/009-limits.md).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from ..errors import Cancelled, ProviderError
from ..types import LLMRequest, LLMResponse
from .base import BaseProvider
from .litellm import import_litellm
from .pricing import estimate_prompt_tokens, max_tokens_of
from .routing import Route


class AccountLimiter:
    """Requests per minute, tokens per minute and pauses of one provider account (also the run-wide judge cap,
    `run.judge_rate_limit_rpm`). Both limits are GCRA virtual times (`_tat_r`, `_tat_t`: when the account is next
    free): smooth pacing, no burst after idle. Waiters queue in turn; the head re-reads the state when it changes, so
    a `settle` refund (a `tpm` reservation is often several times the real usage) lets them go at once. Reservations
    in flight may run the token clock `ahead_s` ahead of now, or calls would go one at a time (plan 009)."""

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        *,
        max_pause_s: float = 60.0,
        ahead_s: float = 6.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        for name, value in (("rpm", rpm), ("tpm", tpm)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive")
        self.rpm, self.tpm, self.max_pause_s = rpm, tpm, max_pause_s
        self._interval = 60.0 / rpm if rpm else 0.0
        self._per_token = 60.0 / tpm if tpm else 0.0
        self._clock = clock
        now = clock()
        self._tat_r = self._tat_t = now
        self._inflight = 0  # tokens reserved by requests admitted and not yet settled
        self._ahead = (tpm or 0) * ahead_s / 60.0  # at most this many of them may run the clock ahead of now
        self.paused_until = now - 1.0
        self._cond = threading.Condition()
        self._waiting: deque[object] = deque()  # the waiters, in turn: the first may admit itself
        self.pauses = 0  # how many times the provider paused this account (for tests and logs)

    @property
    def limited(self) -> bool:
        return bool(self.rpm or self.tpm)

    def _ready_at(self) -> float:
        at = self.paused_until
        if self.rpm:
            at = max(at, self._tat_r)
        if self.tpm:
            at = max(at, self._tat_t - min(self._inflight, self._ahead) * self._per_token)
        return at

    def _admit(self, tokens: int, now: float) -> float:
        """Charge a request and return 0 if the account is free at `now`, else the seconds until it is (lock held)."""
        ready = self._ready_at()
        if ready > now:
            return ready - now
        self._tat_r = max(self._tat_r, now) + self._interval
        if self.tpm:
            self._tat_t = max(self._tat_t, now) + tokens * self._per_token
            self._inflight += tokens
        return 0.0

    def acquire(self, tokens: int = 0, stop: threading.Event | None = None) -> None:
        """Wait until the account may send a request of `tokens` reserved tokens, and charge it."""
        with self._cond:
            me = object()
            self._waiting.append(me)
            try:
                while True:
                    if stop is not None and stop.is_set():
                        raise Cancelled("run is stopping")
                    if self._waiting[0] is me:
                        wait = self._admit(tokens, self._clock())
                        if wait == 0:
                            return
                        # Woken early by a refund or a pause; in slices so a stop is seen within a second.
                        self._cond.wait(min(wait, 1.0))
                    else:
                        self._cond.wait(1.0)
            finally:
                if self._waiting[0] is me:
                    self._cond.notify_all()  # the next in turn
                self._waiting.remove(me)

    def settle(self, reserved: int, used: int) -> None:
        """Correct an admitted request's token charge by what the reply says it used (a refund, or a further
        charge); every admitted request is settled once, a failed one with what it is thought to have used."""
        if not self.tpm:
            return
        with self._cond:
            now = self._clock()
            self._inflight -= reserved
            self._tat_t = max(now, self._tat_t + (used - reserved) * self._per_token)
            self._cond.notify_all()

    def pause(self, seconds: float) -> None:
        """The provider asked for a pause: nobody on this account sends before it ends (capped at max_pause_s)."""
        seconds = min(max(0.0, seconds), self.max_pause_s)
        with self._cond:
            until = self._clock() + seconds
            if until > self.paused_until:
                self.paused_until = until
                self.pauses += 1
                self._cond.notify_all()

    def wait_pause(self, stop: threading.Event | None = None) -> None:
        """For an account without limits: only a pause holds a request back."""
        while (wait := self.paused_until - self._clock()) > 0:
            if stop is None:
                time.sleep(wait)
            elif stop.wait(wait):
                raise Cancelled("run is stopping")


def reserved_tokens(request: LLMRequest) -> int:
    """What a request is charged against `tpm` before it is sent: its prompt estimate plus max_tokens."""
    return estimate_prompt_tokens(list(request.messages)) + max_tokens_of(request.params)


class ThrottledProvider(BaseProvider):
    """Owns the account limiters: before every attempt the request's account admits it (rpm, tpm, pauses), and
    for judges the run-wide judge bucket too; after it, the reply's usage settles the token charge, and a 429
    with Retry-After (or rate-limit headers that say nothing is left) pauses the whole account."""

    def __init__(
        self,
        inner: BaseProvider,
        accounts: Mapping[Route, AccountLimiter],
        judge_bucket: AccountLimiter | None = None,
        stop: threading.Event | None = None,
        *,
        max_pause_s: float = 60.0,
        warm: Callable[[], object] = import_litellm,
    ):
        self.inner, self.judge_bucket, self.stop = inner, judge_bucket, stop
        self.warm = warm  # readies whoever makes the attempts (the executor: providers/executor.py)
        self.accounts, self.max_pause_s = dict(accounts), max_pause_s

    def limiter(self, request: LLMRequest) -> AccountLimiter:
        """The request's account limiter (one without limits is made on first use: it still pauses on a 429)."""
        key = Route(request.model, request.api_base, request.api_key_env)
        lim = self.accounts.get(key)
        if lim is None:  # dict.setdefault is atomic (Route hashes and compares in C): one limiter per account
            lim = self.accounts.setdefault(key, AccountLimiter(max_pause_s=self.max_pause_s))
        return lim

    def observe(self, request: LLMRequest, pause_s: float) -> None:
        """Rate-limit headers of a reply said the account has nothing left for `pause_s` seconds."""
        if pause_s > 0:
            self.limiter(request).pause(pause_s)

    def generate(self, request: LLMRequest) -> LLMResponse:
        # LiteLLM's first import takes seconds: do it before taking a slot, or the slots reserved meanwhile all come
        # due at once and a rolling-window server sees a burst (measured: 40 requests in 1 s, 2.1% 429s).
        self.warm()
        if request.role == "judge" and self.judge_bucket is not None:
            self.judge_bucket.acquire(0, self.stop)
        lim = self.limiter(request)
        reserved = reserved_tokens(request) if lim.tpm else 0
        if lim.limited:
            lim.acquire(reserved, self.stop)
        else:
            lim.wait_pause(self.stop)
        # A failed request keeps its charge (it may have been counted), and so does a reply without usage.
        used = reserved
        try:
            resp = self.inner.generate(request)
            used = resp.usage.prompt_tokens + resp.usage.completion_tokens or reserved
            return resp
        except ProviderError as err:
            if err.status_code == 429:
                used = 0  # refused before it used anything
                if err.retry_after_s is not None:
                    lim.pause(err.retry_after_s)
            raise
        finally:
            if lim.limited:
                lim.settle(reserved, used)
