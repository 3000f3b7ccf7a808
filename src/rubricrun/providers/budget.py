"""`Budget` wraps the provider below the cache: before each paid call it reserves an upper-bound
estimate, and once spent + reserved would pass `budget_usd` it refuses new calls (BudgetExceeded).
It also sums the cost the provider itself reported (LiteLLM's `response_cost`) per role and model, so
the cost report can show it beside ours."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from ..config import Price
from ..errors import BudgetExceeded
from ..types import LLMRequest, LLMResponse
from .base import BaseProvider
from .pricing import call_cost, upper_bound


class Budget(BaseProvider):
    """Refuses to start a paid call once spent + reserved + this call's upper bound would pass the budget."""

    def __init__(self, inner: BaseProvider, budget_usd: float | None, prices: Mapping[str, Price]):
        self.inner, self.budget_usd, self.prices = inner, budget_usd, prices
        self.spent = 0.0
        self.reserved = 0.0
        self.stopped = False
        self.provider_usd: dict[tuple[str, str], float] = {}  # (role, model) -> sum of provider-reported costs
        self._lock = threading.Lock()

    def generate(self, request: LLMRequest) -> LLMResponse:
        resp = self.inner.generate(request) if self.budget_usd is None else self._within_budget(request)
        if resp.cost_usd is not None:
            with self._lock:
                k = (request.role, request.model)
                self.provider_usd[k] = self.provider_usd.get(k, 0.0) + resp.cost_usd
        return resp

    def _within_budget(self, request: LLMRequest) -> LLMResponse:
        assert self.budget_usd is not None
        estimate = upper_bound(request, self.prices)
        if self.stopped or not self.reserve(estimate):
            raise BudgetExceeded(
                f"budget ${self.budget_usd:g} reached (spent ${self.spent:.4f}, next call up to ${estimate:.4f})"
            )
        try:
            resp = self.inner.generate(request)
        finally:
            with self._lock:
                self.reserved -= estimate
        u = resp.usage
        with self._lock:
            self.spent += call_cost(request.model, u.prompt_tokens, u.completion_tokens, self.prices) or 0.0
        return resp

    # Calls made outside the stack (batch jobs, batch.py): reserved when submitted, charged when their replies land.

    def reserve(self, estimate: float) -> bool:
        """Reserve `estimate` unless it would pass the budget (then the budget has stopped the run)."""
        with self._lock:
            if self.budget_usd is not None and self.spent + self.reserved + estimate > self.budget_usd:
                self.stopped = True
                return False
            self.reserved += estimate
            return True

    def settle(self, reserved: float, cost: float) -> None:
        with self._lock:
            self.reserved = max(0.0, self.reserved - reserved)
            self.spent += cost
