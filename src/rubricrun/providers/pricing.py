"""Cost in USD, and the `Budget` layer that bounds it: per-model prices from the config, else LiteLLM's offline cost
map, read as JSON from the installed package (the file LiteLLM reads with LITELLM_LOCAL_MODEL_COST_MAP=True) so that
pricing never pays LiteLLM's import. A model we cannot price (a local GGUF, an unknown model behind a custom
api_base) costs 0 and is listed as unpriced.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import Config, Price
from ..errors import BudgetExceeded
from ..types import LLMRequest, LLMResponse
from .base import BaseProvider

DEFAULT_MAX_TOKENS = 4096  # upper bound for a call that sets no max_tokens


@functools.lru_cache(maxsize=1)
def _cost_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / "model_prices_and_context_window_backup.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def unit_prices(model: str, price: Price | None = None, *, batch: bool = False) -> tuple[float, float] | None:
    """USD per prompt token and per completion token, or None when the model has no known price. `batch`: the
    provider's batch price (the config's batch_* prices, else LiteLLM's `*_cost_per_token_batches`), falling back
    to the online price where neither says."""
    if price is not None:
        online = price.input_per_mtok / 1e6, price.output_per_mtok / 1e6
        if not batch:
            return online
        given = (price.batch_input_per_mtok, price.batch_output_per_mtok)
        return tuple(o if b is None else b / 1e6 for o, b in zip(online, given, strict=True))  # type: ignore[return-value]
    if model.startswith("local/"):
        return 0.0, 0.0
    if model.startswith("router/"):
        return None  # an entry's name says nothing of what its deployments cost: it needs `price:`
    costs = _cost_map()
    entry = costs.get(model) or costs.get(model.split("/", 1)[-1])
    if not entry or "input_cost_per_token" not in entry:
        return None
    names = ("input_cost_per_token", "output_cost_per_token")
    if batch and all(entry.get(n + "_batches") is not None for n in names):
        names = tuple(n + "_batches" for n in names)  # type: ignore[assignment]
    return float(entry.get(names[0]) or 0.0), float(entry.get(names[1]) or 0.0)


def price_table(cfg: Config, *, batch: bool = True) -> dict[str, Price]:
    """Prices by model string: the config's (a candidate's or judge's `price` applies to all its models); for an
    entry with `batch: true`, its batch price. A model that some entry batches is priced at the batch price for
    all its calls (a request retried online after a failed batch line included). `batch=False`: the online prices
    of every entry (what `--validate` shows beside the batch price)."""
    out: dict[str, Price] = {}
    entries = [*cfg.candidates, *cfg.judge_pool]
    for m in [e for e in entries if not e.batch] + [e for e in entries if e.batch]:  # batch prices win
        for model in [m.model, m.routed] + [w.model for w in m.models]:
            if not model:
                continue
            if m.batch and batch:
                p = unit_prices(model, m.price, batch=True)
                if p is not None:
                    out[model] = Price(p[0] * 1e6, p[1] * 1e6)
            elif m.price is not None:
                out[model] = m.price
    return out


def call_cost(model: str, prompt_tokens: int, completion_tokens: int, prices: Mapping[str, Price]) -> float | None:
    p = unit_prices(model, prices.get(model))
    return None if p is None else prompt_tokens * p[0] + completion_tokens * p[1]


def estimate_prompt_tokens(messages: Any) -> int:
    """A generous token estimate: one token per 3 characters of the messages' JSON."""
    return len(json.dumps(messages, ensure_ascii=False)) // 3 + 8


def max_tokens_of(params: Mapping[str, Any]) -> int:
    return int(params.get("max_tokens") or params.get("max_completion_tokens") or DEFAULT_MAX_TOKENS)


def price_terms(request: LLMRequest) -> tuple[str, int, int]:
    """What an uncached call is priced by: its model, its prompt's estimated tokens, its max_tokens (the budget's
    upper bound and `--validate`'s estimate)."""
    return request.model, estimate_prompt_tokens(list(request.messages)), max_tokens_of(request.params)


def upper_bound(request: LLMRequest, prices: Mapping[str, Price]) -> float:
    return call_cost(*price_terms(request), prices) or 0.0


class Budget(BaseProvider):
    """The layer below the cache that refuses to start a paid call (BudgetExceeded) once spent + reserved + its upper
    bound would pass `budget_usd`. It also sums the cost the provider itself reported (LiteLLM's `response_cost`)
    per role and model, so the cost report can show it beside ours."""

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
