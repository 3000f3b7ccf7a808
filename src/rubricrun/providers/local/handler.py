"""The LiteLLM custom provider "local": LiteLLM's call arguments in, one llama.cpp completion, LiteLLM's
ModelResponse (or one stream chunk) out; llama.cpp's failures as LiteLLM errors that are not worth a retry."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from ...errors import InputError
from .model import PROVIDER, chat, resolve_model_path
from .request import llama_kwargs, llama_messages


def _is_context_overflow(exc: Exception) -> bool:
    # llama-cpp-python: "Requested tokens (N) exceed context window of M"
    return "exceed context window" in str(exc)


def _run(model: str, messages: list, optional_params: dict | None) -> tuple[dict[str, Any], str, float]:
    """One llama.cpp chat completion with LiteLLM's arguments; errors become non-retryable LiteLLM errors."""
    import litellm

    # `model` arrives without the "local/" prefix: "smollm2" or "path/to/file.gguf".
    try:
        path = resolve_model_path(model)
    except InputError as e:
        raise litellm.NotFoundError(message=str(e), model=model, llm_provider=PROVIDER) from None
    try:
        kwargs = llama_kwargs(optional_params or {})
        msgs = llama_messages(messages)
    except ValueError as e:
        raise litellm.BadRequestError(message=str(e), model=model, llm_provider=PROVIDER) from None
    started = time.perf_counter()
    try:
        out = chat(path, msgs, **kwargs)
    except Exception as e:  # llama.cpp failures are deterministic here: not worth a retry
        message = f"llama.cpp: {type(e).__name__}: {e}"
        if _is_context_overflow(e):
            raise litellm.ContextWindowExceededError(message=message, model=model, llm_provider=PROVIDER) from None
        raise litellm.BadRequestError(message=message, model=model, llm_provider=PROVIDER) from None
    return out, path, time.perf_counter() - started


def _reply(out: dict[str, Any]) -> tuple[str, str, dict[str, int]]:
    """A llama.cpp completion's text, finish reason and usage."""
    choice, usage = out["choices"][0], out.get("usage") or {}
    counts = {k: int(usage.get(k, 0)) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    return choice["message"].get("content") or "", choice.get("finish_reason") or "stop", counts


def _fill_response(model_response: Any, model: str, out: dict[str, Any], path: str, elapsed: float) -> Any:
    """Copy a llama.cpp completion into LiteLLM's ModelResponse (text, finish reason, usage, local details)."""
    import litellm

    text, finish, usage = _reply(out)
    model_response.choices[0].message.content = text
    model_response.choices[0].finish_reason = finish
    model_response.model = model
    model_response.created = int(time.time())
    model_response.usage = litellm.Usage(**usage)  # type: ignore[attr-defined]
    model_response._hidden_params["local_model_path"] = path
    model_response._hidden_params["local_generation_s"] = elapsed
    if "grammar" in out:
        model_response._hidden_params["local_grammar"] = out["grammar"]
    return model_response


def _stream_chunk(out: dict[str, Any]) -> dict[str, Any]:
    """The whole reply as LiteLLM's one GenericStreamingChunk."""
    text, finish, usage = _reply(out)
    return {"text": text, "tool_use": None, "is_finished": True, "finish_reason": finish, "usage": usage, "index": 0}


def _make_handler_class() -> type:
    """Build the CustomLLM subclass (litellm is imported here, lazily)."""
    import litellm
    from litellm import CustomLLM

    class LocalLLM(CustomLLM):
        """LiteLLM custom provider running GGUF models in-process with llama.cpp."""

        def completion(  # type: ignore[override]
            self,
            model: str,
            messages: list,
            *,
            model_response: litellm.ModelResponse,
            optional_params: dict,
            **_: Any,  # LiteLLM passes its other call arguments by keyword; a local model needs none of them
        ) -> litellm.ModelResponse:
            out, path, elapsed = _run(model, messages, optional_params)
            return _fill_response(model_response, model, out, path, elapsed)

        def streaming(  # type: ignore[override]
            self,
            model: str,
            messages: list,
            *,
            optional_params: dict,
            **_: Any,
        ) -> Iterator[dict[str, Any]]:
            """stream=True: the whole reply as one chunk (generation runs to the end under the model lock first)."""
            params = {k: v for k, v in (optional_params or {}).items() if k not in ("stream", "stream_options")}
            out, _path, _elapsed = _run(model, messages, params)
            yield _stream_chunk(out)

    return LocalLLM


_register_lock = threading.Lock()
_handler: Any = None


def register() -> None:
    """Add the "local" provider to litellm.custom_provider_map (once; safe to call from any thread)."""
    global _handler
    with _register_lock:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.suppress_debug_info = True
        if any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
            return
        if _handler is None:
            _handler = _make_handler_class()()
        litellm.custom_provider_map = [*litellm.custom_provider_map, {"provider": PROVIDER, "custom_handler": _handler}]
        # LiteLLM also does this at the start of each call; doing it now lets get_llm_provider() see "local" at once.
        from litellm.utils import custom_llm_setup

        custom_llm_setup()
