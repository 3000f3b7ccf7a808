"""A JSON schema as a llama.cpp grammar: the reply of a model asked for JSON follows the schema and is strict JSON."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

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
_grammars: dict[str, tuple[Any, str]] = {}  # schema JSON -> (LlamaGrammar, "schema" | "json")
_grammars_lock = threading.Lock()


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
    """GBNF for a JSON object following `schema` (any JSON object if None), strings free of control characters.

    String maxLength above MAX_STRING_LENGTH is lowered to it. A schema that llama-cpp-python's converter cannot
    handle gets the generic JSON object grammar, as llama-cpp-python itself does.
    """
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


def json_grammar(llama: Llama, schema: dict[str, Any] | None) -> tuple[Any, str]:
    """A cached (LlamaGrammar, kind) for `schema`, checked against llama.cpp's parser; kind is "schema" or "json".

    The LlamaGrammar only holds the GBNF text; llama.cpp parses it anew for each call.
    """
    from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

    key = json.dumps(schema, sort_keys=True)
    with _grammars_lock:
        hit = _grammars.get(key)
    if hit is None:
        gbnf = json_grammar_text(schema)
        kind = "json" if gbnf == JSON_GBNF else "schema"
        if kind == "schema" and not _grammar_parses(llama, gbnf):
            gbnf, kind = JSON_GBNF, "json"
        hit = (LlamaGrammar.from_string(gbnf, verbose=False), kind)
        with _grammars_lock:
            if len(_grammars) > 256:
                _grammars.clear()
            _grammars[key] = hit
    return hit
