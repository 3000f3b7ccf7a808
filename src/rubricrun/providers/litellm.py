"""The one real provider, `LiteLLMProvider` (the cache, retry and throttle wrap it: cache.py, stack.py, ratelimit.py).
LiteLLM is imported lazily: `--help`, config validation and fully cached reruns never pay its ~4 s import.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import socket
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InputError, ProviderError
from ..types import LLMRequest, LLMResponse, Usage
from .base import BaseProvider
from .redact import redact

_import_lock = threading.Lock()
_litellm: Any = None
_internal_call: Any = None  # LiteLLM's "do not log this call" context variable, when this LiteLLM has one
_thread = threading.local()

# Error class names LiteLLM raises where another attempt can help (those where it cannot all carry a 4xx status).
_RETRYABLE_NAMES = set(
    "RateLimitError Timeout APIConnectionError InternalServerError ServiceUnavailableError BadGatewayError APIError "
    "JSONSchemaValidationError".split()
)


_worker: tuple[int, str] = (0, "")


def worker_name() -> str:
    """This process as the trace names the maker of an attempt: "host:pid" (a Dask worker's, or the run's own). Kept
    per pid (a forked process names itself): `gethostname` per call made a cold run 5 % slower (ExecPlan 023)."""
    global _worker
    pid = os.getpid()
    if _worker[0] != pid:
        _worker = (pid, f"{socket.gethostname()}:{pid}")
    return _worker[1]


# Failures raised before any request is sent, which LiteLLM nevertheless maps to a 500.
_CLIENT_SIDE_FAILURES = ("Missing credentials", "api_key client option must be set")


def import_litellm() -> Any:
    """Import LiteLLM once, offline-safe and quiet."""
    global _litellm, _internal_call
    if _litellm is None:
        with _import_lock:
            if _litellm is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                # The import leaves ~300,000 long-lived objects that every full collection would walk again (8% of
                # a run's CPU; measured in ExecPlan 005): frozen, the collector skips them. It is off during the
                # import, whose own collections walk them too.
                collecting = gc.isenabled()
                gc.disable()
                try:
                    import litellm
                finally:
                    gc.freeze()
                    if collecting:
                        gc.enable()
                litellm.suppress_debug_info = True
                litellm.telemetry = False
                litellm.drop_params = True
                with contextlib.suppress(ImportError):  # another LiteLLM: its success logging simply runs
                    from litellm._internal_context import is_internal_call as _internal_call
                _litellm = litellm
    return _litellm


def _thread_event_loop() -> None:
    """Give a worker thread an event loop of its own, once: LiteLLM times every sync request through an async hook,
    and without a loop it runs it with `asyncio.run`, a new loop per call (8x slower: ExecPlan 009)."""
    if getattr(_thread, "loop_checked", False):
        return
    _thread.loop_checked = True
    if threading.current_thread() is threading.main_thread():
        return  # the main thread's loop is the application's business
    import asyncio  # here, not at the top: start-up (`--help`, `--validate`) never needs it

    try:
        asyncio.get_event_loop_policy().get_event_loop()  # this thread has one already
    except RuntimeError:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        weakref.finalize(threading.current_thread(), loop.close)  # closed when the thread is gone, not leaked


def _retry_after(exc: BaseException) -> float | None:
    """The Retry-After header of the HTTP response behind an exception, in seconds (a number or a date), if any."""
    for holder in (getattr(exc, "response", None), exc):
        headers = getattr(holder, "headers", None) or getattr(holder, "litellm_response_headers", None) or {}
        try:
            value = headers.get("retry-after") or headers.get("Retry-After")
        except AttributeError:  # not a mapping
            continue
        if value is not None:
            with contextlib.suppress(TypeError, ValueError):
                return max(0.0, float(value))
            from email.utils import parsedate_to_datetime

            with contextlib.suppress(TypeError, ValueError):
                return max(0.0, parsedate_to_datetime(str(value)).timestamp() - time.time())
            return None
    return None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_reset(value: str) -> float | None:
    """An `x-ratelimit-reset-*` value in seconds: OpenAI writes "1s", "6m0s", "20ms"; others a bare number."""
    text = str(value).strip().lower()
    with contextlib.suppress(ValueError):
        return max(0.0, float(text))
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def rate_limit_pause(headers: Mapping[str, Any] | None) -> float:
    """Seconds the account has nothing left, from a reply's `x-ratelimit-remaining-*` / `-reset-*` headers: when
    the requests or the tokens remaining are 0, the time until they reset; else 0."""
    if not headers:
        return 0.0
    pause = 0.0
    for unit in ("requests", "tokens"):
        remaining = headers.get(f"x-ratelimit-remaining-{unit}")
        if remaining is None:
            continue
        try:
            left = float(remaining)
        except (TypeError, ValueError):
            continue
        if left <= 0:
            reset = parse_reset(headers.get(f"x-ratelimit-reset-{unit}") or "")
            pause = max(pause, reset or 0.0)
    return pause


def classify_error(exc: BaseException, model: str, secrets: tuple[str, ...] = ()) -> ProviderError:
    """Turn whatever LiteLLM (or the HTTP stack under it) raised into a ProviderError, with secrets removed."""
    if isinstance(exc, ProviderError):
        return exc
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    text = str(exc)
    if any(m in text for m in _CLIENT_SIDE_FAILURES):
        retryable = False  # LiteLLM reports these as HTTP 500 although no request was sent
    elif status is not None and 400 <= status < 500 and status not in (408, 409, 429):
        retryable = False
    elif name in _RETRYABLE_NAMES or status in (408, 409, 429) or (status is not None and status >= 500):
        retryable = True
    else:
        # Timeouts and connection errors from httpx/openai below LiteLLM.
        retryable = any(w in name for w in ("Timeout", "Connection", "ServiceUnavailable"))
    # A provider may echo the key, or the URL with its credentials, in its message: every secret is taken out.
    message = redact(str(exc).strip().splitlines()[0], secrets) if str(exc).strip() else name
    if len(message) > 500:
        message = message[:500] + "..."
    return ProviderError(
        f"{name}: {message}",
        model=model,
        status_code=status,
        retryable=retryable,
        retry_after_s=_retry_after(exc),
    )


def completion_kwargs(request: LLMRequest) -> dict[str, Any]:
    """The arguments of one completion call for `request` (one attempt: the retries are stack.py's)."""
    kwargs: dict[str, Any] = dict(request.params)
    kwargs.update(model=request.model, messages=list(request.messages), timeout=request.timeout_s, num_retries=0)
    if request.response_schema is not None:  # OpenAI-style structured output; the local provider reads the same shape
        kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "judgment", "schema": request.response_schema, "strict": True},
        }
    return kwargs


def credentials(model: str, api_base: str | None, api_key_env: str | None) -> dict[str, str]:
    """The `api_base` and `api_key` keyword arguments of a LiteLLM call (completion, files, batches)."""
    out: dict[str, str] = {}
    if api_base:
        out["api_base"] = api_base
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise InputError(f"environment variable {api_key_env} is not set", key="api_key_env")
        out["api_key"] = key
    elif api_base and model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
        # A local OpenAI-compatible server (vLLM, llama.cpp, Ollama) needs no key, but the client insists on one.
        out["api_key"] = "no-key"
    return out


class LiteLLMProvider(BaseProvider):
    """Calls `litellm.completion` synchronously. Exactly one HTTP request per call: LiteLLM's and the
    OpenAI client's own retries are off, the retry policy lives in stack.py. `on_rate_limit(request, seconds)`
    hears when a reply's rate-limit headers say the account has nothing left (the throttle pauses it)."""

    def __init__(self, on_rate_limit: Callable[[LLMRequest, float], None] | None = None):
        self.on_rate_limit = on_rate_limit

    def generate(self, request: LLMRequest) -> LLMResponse:
        litellm = import_litellm()
        if request.model.startswith("local/"):
            from . import local

            local.register()
        kwargs = completion_kwargs(request)
        kwargs.update(max_retries=0, **credentials(request.model, request.api_base, request.api_key_env))
        key = kwargs.get("api_key") if request.api_key_env else None
        _thread_event_loop()
        # With no callback registered (rubricrun registers none; a user may), LiteLLM's success logging is work for
        # nobody (~8% of its CPU per call: ExecPlan 009): its own marker for calls nobody logs skips it.
        heard = litellm.callbacks or litellm.success_callback or litellm._async_success_callback
        quiet = _internal_call.set(True) if _internal_call is not None and not heard else None
        start = time.perf_counter()
        try:
            raw = litellm.completion(**kwargs)
        except Exception as exc:  # noqa: BLE001 - every provider failure becomes a ProviderError
            err = classify_error(exc, request.model, (key,) if key else ())
            err.worker = worker_name()
            raise err from None
        finally:
            if quiet is not None:
                _internal_call.reset(quiet)
        latency_ms = (time.perf_counter() - start) * 1000
        if self.on_rate_limit is not None:
            # The reply's raw headers (lowercase keys), else LiteLLM's copy (where x-ratelimit-reset-* is prefixed).
            hidden = getattr(raw, "_hidden_params", None) or {}
            pause = rate_limit_pause(getattr(raw, "_response_headers", None) or hidden.get("additional_headers"))
            if pause > 0:
                self.on_rate_limit(request, pause)
        return to_response(raw, request, latency_ms)


def to_response(raw: Any, request: LLMRequest, latency_ms: float) -> LLMResponse:
    """Our response from a LiteLLM one (also read by router.py)."""
    try:
        choice = raw.choices[0]
        text = valid_text(choice.message.content or "")
        reasoning = getattr(choice.message, "reasoning_content", None) or None
        reasoning = valid_text(reasoning) if isinstance(reasoning, str) else None
        finish = choice.finish_reason
    except (AttributeError, IndexError) as exc:
        raise ProviderError(f"malformed response: {exc}", model=request.model, retryable=True) from None
    # The cost LiteLLM computed, kept beside ours (none for an unpriced model or a custom provider).
    hidden = getattr(raw, "_hidden_params", None)
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    return LLMResponse(
        text=text,
        finish_reason=finish,
        usage=usage_of(getattr(raw, "usage", None)),
        model=getattr(raw, "model", None) or request.model,
        cost_usd=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
        cache_hit=False,
        latency_ms=latency_ms,
        reasoning=reasoning,
        worker=worker_name(),
    )


def usage_of(u: Any) -> Usage:
    """A reply's token counts, from LiteLLM's usage object or a batch output line's `usage` mapping (0: absent)."""
    get = u.get if isinstance(u, dict) else lambda name: getattr(u, name, 0)
    return Usage(*(int(get(name) or 0) for name in ("prompt_tokens", "completion_tokens", "total_tokens")))


_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """A reply's text as valid Unicode: a lone surrogate (JSON's "\\ud800", which Python decodes as is and no UTF-8
    file can hold) becomes U+FFFD, the replacement character."""
    return text if text.isascii() or not _SURROGATE.search(text) else _SURROGATE.sub("\ufffd", text)
