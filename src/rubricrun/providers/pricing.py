"""Cost in USD: per-model prices from the config, else LiteLLM's own offline cost map.

The map is read as JSON from the installed litellm package (the same file LiteLLM uses with
LITELLM_LOCAL_MODEL_COST_MAP=True), so pricing never pays LiteLLM's import. Models we cannot price
(a local GGUF, an unknown model behind a custom api_base) cost 0 and are listed as unpriced.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import Config, Price
from ..types import LLMRequest

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


def _map_entry(model: str) -> dict[str, Any] | None:
    m = _cost_map()
    entry = m.get(model)
    if entry is None and "/" in model:
        entry = m.get(model.split("/", 1)[1])
    return entry if entry and "input_cost_per_token" in entry else None


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
    entry = _map_entry(model)
    if entry is None:
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


def upper_bound(request: LLMRequest, prices: Mapping[str, Price]) -> float:
    c = call_cost(request.model, estimate_prompt_tokens(list(request.messages)), max_tokens_of(request.params), prices)
    return c or 0.0
