"""LiteLLM's arguments as llama-cpp-python takes them: messages as plain-text chat turns, sampling parameters,
and an OpenAI-style response_format as llama-cpp-python's json_object (with its schema). `extra_body` keys count as
parameters; no max_tokens means "until the context is full"."""

from __future__ import annotations

from typing import Any

# A mild penalty on tokens repeated within the last 64 tokens (llama-cpp-python's last_n_tokens_size): it damps
# the small model's habit of looping on a phrase. Llama.create_chat_completion's own default is 1.0 (off);
# callers override ours with `repeat_penalty` (1.0 turns it off).
DEFAULT_REPEAT_PENALTY = 1.1

_SAMPLING_PARAMS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "max_tokens",
    "seed",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "repeat_penalty",
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
        return {"type": "json_object", "schema": schema}
    if kind == "json_object":
        schema = response_format.get("schema")
        if schema is None:
            return {"type": "json_object"}
        if not isinstance(schema, dict):
            raise ValueError("response_format.schema must be a JSON schema object")
        return {"type": "json_object", "schema": schema}
    raise ValueError(f"unsupported response_format type {kind!r} (use text, json_object or json_schema)")


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
