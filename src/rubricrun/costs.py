"""Cost in USD: per-model prices from the config, else LiteLLM's own offline cost map.

The map is read as JSON from the installed litellm package (the same file LiteLLM uses with
LITELLM_LOCAL_MODEL_COST_MAP=True), so pricing never pays LiteLLM's import. Models we cannot price
(a local GGUF, an unknown model behind a custom api_base) cost 0 and are listed as unpriced.

`Budget` wraps the provider below the cache: before each paid call it reserves an upper-bound
estimate, and once spent + reserved would pass `budget_usd` it refuses new calls (BudgetExceeded).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import Config, Price
from .errors import BudgetExceeded
from .providers import BaseProvider
from .types import LLMRequest, LLMResponse

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


def unit_prices(model: str, price: Price | None = None) -> tuple[float, float] | None:
    """USD per prompt token and per completion token, or None when the model has no known price."""
    if price is not None:
        return price.input_per_mtok / 1e6, price.output_per_mtok / 1e6
    if model.startswith("local/"):
        return 0.0, 0.0
    m = _cost_map()
    entry = m.get(model)
    if entry is None and "/" in model:
        entry = m.get(model.split("/", 1)[1])
    if not entry or "input_cost_per_token" not in entry:
        return None
    return float(entry.get("input_cost_per_token") or 0.0), float(entry.get("output_cost_per_token") or 0.0)


def price_table(cfg: Config) -> dict[str, Price]:
    """Config prices by model string (a candidate's or judge's `price` applies to all its models)."""
    out: dict[str, Price] = {}
    for m in [*cfg.candidates, *cfg.judge_pool]:
        if m.price is None:
            continue
        for model in [m.model] + [w.model for w in m.models]:
            if model:
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


def upper_bound(request: LLMRequest, prices: Mapping[str, Price]) -> float:
    c = call_cost(request.model, estimate_prompt_tokens(list(request.messages)), max_tokens_of(request.params), prices)
    return c or 0.0


def cost_report(by_model: Mapping[tuple[str, str], Mapping[str, int]], prices: Mapping[str, Price]) -> dict[str, Any]:
    """summary.json's "costs": per model and role, from the tracer's token counts."""
    rows: dict[str, Any] = {}
    total = saved = 0.0
    unpriced = []
    for (role, model), c in sorted(by_model.items()):
        paid = call_cost(model, c["prompt_tokens"], c["completion_tokens"], prices)
        cached = call_cost(model, c["cached_prompt_tokens"], c["cached_completion_tokens"], prices)
        if paid is None:
            unpriced.append(model)
        total += paid or 0.0
        saved += cached or 0.0
        rows[f"{role}:{model}"] = {
            "role": role,
            "model": model,
            "calls": c["calls"],
            "cached": c["cached"],
            "prompt_tokens": c["prompt_tokens"],
            "completion_tokens": c["completion_tokens"],
            "cached_prompt_tokens": c["cached_prompt_tokens"],
            "cached_completion_tokens": c["cached_completion_tokens"],
            "usd": None if paid is None else round(paid, 6),
            "saved_usd": None if cached is None else round(cached, 6),
        }
    return {
        "total_usd": round(total, 6),
        "saved_usd": round(saved, 6),
        "by_model": rows,
        "unpriced": sorted(set(unpriced)),
    }


class Budget(BaseProvider):
    """Refuses to start a paid call once spent + reserved + this call's upper bound would pass the budget."""

    def __init__(self, inner: BaseProvider, budget_usd: float | None, prices: Mapping[str, Price]):
        self.inner, self.budget_usd, self.prices = inner, budget_usd, prices
        self.spent = 0.0
        self.reserved = 0.0
        self.stopped = False
        self._lock = threading.Lock()

    def generate(self, request: LLMRequest) -> LLMResponse:
        if self.budget_usd is None:
            return self.inner.generate(request)
        estimate = upper_bound(request, self.prices)
        with self._lock:
            if self.stopped or self.spent + self.reserved + estimate > self.budget_usd:
                self.stopped = True
                raise BudgetExceeded(
                    f"budget ${self.budget_usd:g} reached (spent ${self.spent:.4f}, next call up to ${estimate:.4f})"
                )
            self.reserved += estimate
        try:
            resp = self.inner.generate(request)
        finally:
            with self._lock:
                self.reserved -= estimate
        u = resp.usage
        with self._lock:
            self.spent += call_cost(request.model, u.prompt_tokens, u.completion_tokens, self.prices) or 0.0
        return resp
