"""Entries with `deployments:` are served by a `litellm.Router`, which the rest of the stack sees as one model,
`router/<entry name>` (cached, named in rows and paced as one account with its deployments' summed limits). The
Router picks the deployment and owns cooldowns and fallbacks; retries are ours (its num_retries is 0), so each
attempt is traced once, with its deployment. Who owns what: .agent/plans/011-beyond-one-machine.md (Decision Log).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import msgspec

from ..config import Config, ModelConfig, RouterConfig
from ..errors import ProviderError
from ..types import LLMRequest, LLMResponse
from .base import BaseProvider
from .litellm import classify_error, completion_kwargs, credentials, import_litellm, to_response, worker_name
from .redact import redact
from .routing import routes

# What a Router raises itself (no server asked) when no deployment of a group may take the call now: these classes,
# or, after its fallbacks, a plain ValueError with this text.
_NO_DEPLOYMENT = ("RouterRateLimitError", "RouterRateLimitErrorBasic")
_NO_DEPLOYMENT_TEXT = "No deployments available"


def _deployments(group: str, m: ModelConfig, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The Router model_list items of an entry: its `deployments:`, or (a plain entry named as a fallback) its
    model(s), each with its limits and credentials (keys are read here). An id is a plain `d<n>`: usage-based routing
    keys its counters on ids and finds none for an id holding `/` or `:` (every call then fails "No deployments
    available"); `labels` maps it to what the trace calls it: model and server, never a key (nor a URL's password)."""
    rows = [(d.model, d.api_base, d.api_key_env, d.rpm, d.tpm, d.weight, d.params) for d in m.deployments]
    rows = rows or [(r.model, r.api_base, r.api_key_env, m.rpm, m.tpm, w, {}) for r, w in routes(m)]
    out = []
    for model, api_base, key_env, rpm, tpm, weight, extra in rows:
        params: dict[str, Any] = {"model": model, "max_retries": 0, **extra}
        params.update((k, v) for k, v in (("rpm", rpm), ("tpm", tpm), ("weight", weight)) if v is not None)
        params.update(credentials(model, api_base, key_env))  # api_base, and the key as a direct call gets it
        label = f"{model}@{redact(api_base)}" if api_base else model
        dep_id = f"d{len(labels)}"
        labels[dep_id] = label if label not in labels.values() else f"{label}#{len(labels)}"
        out.append({"model_name": group, "litellm_params": params, "model_info": {"id": dep_id}})
    return out


def group_limits(m: ModelConfig) -> tuple[float | None, float | None]:
    """(rpm, tpm) of a Router entry as one account: the sum over its deployments, None when one has no limit."""
    out = []
    for name in ("rpm", "tpm"):
        values = [getattr(d, name) for d in m.deployments]
        out.append(sum(values) if values and all(v is not None for v in values) else None)
    return out[0], out[1]


class RouterProvider(BaseProvider):
    """Sends a Router entry's requests through its `litellm.Router` (built on first use, once per run); every
    other request goes to `inner`. One Router per entry, because strategy, cooldowns and fallbacks are per entry;
    its model list holds the entry's group and the groups it falls back to."""

    def __init__(self, inner: BaseProvider, cfg: Config):
        self.inner = inner
        self.entries = {m.name: m for m in reversed([*cfg.candidates, *cfg.judge_pool])}  # the first of a name wins
        self.groups = {m.routed: m for m in self.entries.values() if m.routed}
        self._routers: dict[str, Any] = {}
        self._secrets: dict[str, tuple[str, ...]] = {}
        self._labels: dict[str, dict[str, str]] = {}  # group -> deployment id -> what the trace calls it
        self._lock = threading.Lock()

    def _build(self, m: ModelConfig) -> Any:
        litellm = import_litellm()
        # The Router logs every failed call and fallback at ERROR with the prompt in it, on its own logger (not a
        # child of "LiteLLM", which cli.py quiets): our trace records each attempt already.
        logging.getLogger("LiteLLM Router").setLevel(logging.CRITICAL)
        settings = m.router or RouterConfig()
        group = f"router/{m.name}"
        labels = self._labels[group] = {}
        model_list = _deployments(group, m, labels)
        for name in settings.fallbacks:
            model_list += _deployments(f"router/{name}", self.entries[name], labels)
        self._secrets[group] = tuple(d["litellm_params"]["api_key"] for d in model_list if "api_key" in d)
        return litellm.Router(
            model_list=model_list,
            routing_strategy=settings.strategy,
            num_retries=0,  # retries are ours (stack.py): one trace event per attempt, one backoff policy
            retry_after=0,
            allowed_fails=settings.allowed_fails,
            cooldown_time=settings.cooldown_s,
            fallbacks=[{group: [f"router/{n}" for n in settings.fallbacks]}] if settings.fallbacks else [],
        )

    def generate(self, request: LLMRequest) -> LLMResponse:
        if request.model not in self.groups:
            return self.inner.generate(request)
        with self._lock:
            if request.model not in self._routers:
                self._routers[request.model] = self._build(self.groups[request.model])
            router = self._routers[request.model]
        start = time.perf_counter()
        try:
            raw = router.completion(**completion_kwargs(request))
        except Exception as exc:  # noqa: BLE001 - every provider failure becomes a ProviderError
            raise self._error(exc, request) from None
        resp = to_response(raw, request, (time.perf_counter() - start) * 1000)
        hidden = getattr(raw, "_hidden_params", None) or {}
        return msgspec.structs.replace(resp, deployment=self._label(request.model, hidden.get("model_id")))

    def _label(self, group: str, dep_id: Any) -> str | None:
        return self._labels.get(group, {}).get(str(dep_id)) if dep_id is not None else None

    def _error(self, exc: BaseException, request: LLMRequest) -> ProviderError:
        name = type(exc).__name__
        if name in _NO_DEPLOYMENT or _NO_DEPLOYMENT_TEXT in str(exc):
            # Every deployment is cooling down or full: wait (the throttle pauses this entry) and ask again.
            wait = getattr(exc, "cooldown_time", None)
            return ProviderError(
                f"{name}: no deployment available", model=request.model, status_code=429, retryable=True,
                retry_after_s=float(wait) if isinstance(wait, (int, float)) and wait > 0 else None,
                worker=worker_name(),
            )  # fmt: skip
        err = classify_error(exc, request.model, self._secrets.get(request.model, ()))
        err.deployment = self._label(request.model, getattr(exc, "failed_deployment_id", None))
        err.worker = worker_name()
        if err.status_code == 429:
            # One deployment is limited: the Router cools it down and the next attempt goes elsewhere, so neither
            # the whole entry (throttle) nor this request (retry) waits for its Retry-After.
            err.retry_after_s = None
        return err
