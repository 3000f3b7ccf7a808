"""Which model serves a call, and the request sent to it: one builder for candidates, judges and synthesis."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from msgspec import Struct

from ..config import ModelConfig
from ..types import LLMRequest
from .base import canonical_json


class Route(Struct, frozen=True):  # a Struct: one per request built (plan 018)
    model: str
    api_base: str | None
    api_key_env: str | None


def routes(m: ModelConfig) -> list[tuple[Route, float]]:
    if m.routed:  # a Router picks the deployment per call (router.py); rubricrun sees one logical model
        return [(Route(m.routed, None, None), 1.0)]
    if m.models:
        return [(Route(w.model, w.api_base or m.api_base, w.api_key_env or m.api_key_env), w.weight) for w in m.models]
    return [(Route(m.model, m.api_base, m.api_key_env), 1.0)]


def declared(
    entries: Iterable[tuple[str, ModelConfig]],
) -> Iterator[tuple[str, ModelConfig, str, str | None, str | None, dict[str, Any]]]:
    """(config key, entry, model, api_base, api_key_env, params) of every model the entries (Config.entries) may call:
    its own, its weighted `models:` (which take the entry's server and key when they name none), its `deployments:`."""
    for key, m in entries:
        yield key, m, m.model, m.api_base, m.api_key_env, m.params
        for j, w in enumerate(m.models):
            yield f"{key}.models[{j}]", m, w.model, w.api_base or m.api_base, w.api_key_env or m.api_key_env, {}
        for j, d in enumerate(m.deployments):
            yield f"{key}.deployments[{j}]", m, d.model, d.api_base, d.api_key_env, d.params


def deployments_key(m: ModelConfig) -> tuple[str, ...]:
    """What a Router entry's answers depend on besides the request: the model and params of each deployment, as
    sorted canonical JSON, each once. Not the api_base or the key, so a server added for the same model (or a key
    rotated) keeps the cache; any other model or params make new keys (issue 28). Memoized on the entry."""
    key = m.__dict__.get("_deployments_key")
    if key is None:
        rows = {canonical_json(_ints([d.model, d.params])) for d in m.deployments}
        key = tuple(sorted(rows))
        m.__dict__["_deployments_key"] = key  # a memo outside the frozen fields (ModelConfig has dict=True)
    return key


def _ints(v: Any) -> Any:
    """An integral float as an int, at any depth (temperature 0 and 0.0 are one setting, as in cache_fields)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, dict):
        return {k: _ints(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_ints(x) for x in v]
    return v


def route_for(m: ModelConfig, example_id: str, sample_index: int, seed: int) -> Route:
    """Which model of a weighted candidate serves this sample: deterministic given the run's seed."""
    options = routes(m)
    if len(options) == 1:
        return options[0][0]
    rng = random.Random(f"{seed}|{m.name}|{example_id}|{sample_index}")
    return rng.choices([r for r, _ in options], weights=[w for _, w in options], k=1)[0]


def model_request(
    m: ModelConfig,
    route: Route,
    messages: Sequence[dict[str, Any]],
    *,
    role: str,
    section: str,
    sample_index: int = 0,
    params: dict[str, Any] | None = None,
    response_schema: dict[str, Any] | None = None,
) -> LLMRequest:
    """A request to one model entry; `section` (candidate or judge) names its rate-limit bucket."""
    return LLMRequest(
        model=route.model,
        messages=tuple(messages),
        params=dict(m.params) if params is None else params,
        api_base=route.api_base,
        api_key_env=route.api_key_env,
        timeout_s=m.timeout_s,
        response_schema=response_schema,
        sample_index=sample_index,
        deployments=deployments_key(m) if m.deployments else (),
        role=role,  # type: ignore[arg-type]
        limiter=f"{section}:{m.name}",
    )
