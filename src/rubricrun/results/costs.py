"""The run's cost report: tokens and USD per model and role, from the tracer's per-model usage; beside our
figure, the sum of the costs the provider reported (LiteLLM's `response_cost`) where it reported any."""

from __future__ import annotations

from collections.abc import Mapping

from ..config import Price
from ..providers.pricing import call_cost
from .summary_types import CostSummary, ModelCost

_COUNTS = ("calls", "cached", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "cached_completion_tokens")


def cost_report(
    by_model: Mapping[tuple[str, str], Mapping[str, int]],
    prices: Mapping[str, Price],
    provider_usd: Mapping[tuple[str, str], float] | None = None,
) -> CostSummary:
    """summary.json's "costs": per model and role, from the tracer's token counts; `provider_usd` is what the
    provider itself reported for the paid calls, by (role, model) (None where it reported nothing)."""
    provider_usd = provider_usd or {}
    rows: dict[str, ModelCost] = {}
    total = saved = 0.0
    unpriced = []
    for (role, model), c in sorted(by_model.items()):
        paid = call_cost(model, c["prompt_tokens"], c["completion_tokens"], prices)
        cached = call_cost(model, c["cached_prompt_tokens"], c["cached_completion_tokens"], prices)
        if paid is None:
            unpriced.append(model)
        total += paid or 0.0
        saved += cached or 0.0
        rows[f"{role}:{model}"] = ModelCost(
            role=role,
            model=model,
            **{k: c[k] for k in _COUNTS},
            usd=None if paid is None else round(paid, 6),
            saved_usd=None if cached is None else round(cached, 6),
            provider_usd=round(provider_usd[(role, model)], 6) if (role, model) in provider_usd else None,
        )
    return CostSummary(
        total_usd=round(total, 6),
        saved_usd=round(saved, 6),
        provider_total_usd=round(sum(provider_usd.values()), 6) if provider_usd else None,
        by_model=rows,
        unpriced=tuple(sorted(set(unpriced))),
    )
