"""Every credential the process can send, and the one function that takes them out of any text (issue 28).

`use(secrets_of(cfg))` (the CLI, a run's start, a Dask worker) sets them, each a value and a label that names it
without showing it (`$OPENAI_API_KEY`, `candidates[0].api_base`), beside every environment variable named like a
credential (`..._API_KEY`, `..._TOKEN`) whose value has LONG characters or more. `redact(text)` replaces them with
`***`, as it does a URL's user and password and a key-like query parameter's value (`?api-key=...`).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import Config

MASK = "***"
# A secret of LONG characters or more is replaced wherever it occurs; a shorter one only where it stands alone (not
# inside a longer run of _WORD characters): `Bearer abcd` and `key=abcd` are masked, the word it is part of is not.
LONG = 8
_WORD = r"A-Za-z0-9_\-"
# Names of environment variables that hold credentials: LiteLLM 1.106.2 reads its providers' keys from names like
# these (OPENAI_API_KEY, ANTHROPIC_AUTH_TOKEN, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, WATSONX_ZENAPIKEY,
# AZURE_AD_TOKEN, AZURE_CLIENT_SECRET, VALKEY_PASSWORD, GIGACHAT_CREDENTIALS, ...).
_CREDENTIAL_NAME = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS")
# Where a provider's own variables do not start with its LiteLLM prefix (litellm/llms/*: get_secret_str(...)).
_PROVIDER_PREFIXES = {
    "gemini": ("GEMINI_", "GOOGLE_"),
    "vertex_ai": ("VERTEXAI_", "VERTEX_", "GOOGLE_"),
    "vertex_ai_beta": ("VERTEXAI_", "VERTEX_", "GOOGLE_"),
    "bedrock": ("AWS_",),
    "sagemaker": ("AWS_",),
    "sagemaker_chat": ("AWS_",),
    "huggingface": ("HUGGINGFACE_", "HF_"),
    "cohere": ("COHERE_", "CO_"),
    "cohere_chat": ("COHERE_", "CO_"),
    "openrouter": ("OPENROUTER_", "OR_"),
    "watsonx": ("WATSONX_", "WX_"),
    "watsonx_text": ("WATSONX_", "WX_"),
    "text-completion-openai": ("OPENAI_",),
    "azure_ai": ("AZURE_AI_", "AZURE_"),
    "friendliai": ("FRIENDLIAI_", "FRIENDLI_"),
    "perplexity": ("PERPLEXITYAI_", "PERPLEXITY_"),
    "aleph_alpha": ("ALEPH_ALPHA_", "ALEPHALPHA_"),
    "mistral": ("MISTRAL_", "MISTRAL_AZURE_"),
}
_URL_USER = re.compile(r"(?<=://)[^\s/?#@'\"<>]+@")
_URL_PARAM = re.compile(
    r"(?i)([?&;](?:[A-Za-z0-9.]*[_-])?(?:api[_-]?key|key|token|secret|password|passwd|pwd|sig|signature|auth|"
    r"credentials?)=)[^\s&#'\"<>]+"
)

_lock = threading.Lock()
_secrets: dict[str, str] = {}  # value -> label
_pattern: re.Pattern[str] | None = None


def credential_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential (`OPENAI_API_KEY`, `HF_TOKEN`)."""
    return name.upper().endswith(_CREDENTIAL_NAME)


def provider_variables(provider: str, environ: dict[str, str] | None = None) -> list[str]:
    """The set environment variables that LiteLLM may read by itself for a provider (`openai`, `anthropic`, ...):
    those named like a credential that start with the provider's prefix (`TOGETHER_AI_`, `TOGETHERAI_`, `TOGETHER_`
    for `together_ai`) or one of the other prefixes its code reads (`AWS_` for bedrock, `GOOGLE_` for gemini)."""
    env = os.environ if environ is None else environ
    base = provider.upper().replace("-", "_")
    prefixes = {f"{base}_", f"{base.replace('_', '')}_", f"{base.split('_')[0]}_"}
    prefixes.update(_PROVIDER_PREFIXES.get(provider, ()))
    return sorted(n for n in env if credential_name(n) and n.upper().startswith(tuple(prefixes)) and env[n])


def url_secrets(url: str) -> list[str]:
    """The credentials written into a URL: its password (`user:pass@`; a user without a password, `TOKEN@`, is one),
    and the values of its key-like query parameters."""
    out = []
    user = _URL_USER.search(url)
    if user:
        info = user.group(0)[:-1]
        name, _, password = info.partition(":")
        out += [info, password] if password else [name]
    out += [m.group(0)[len(m.group(1)) :] for m in _URL_PARAM.finditer(url)]
    return out


def use(secrets: Iterable[tuple[str, str]]) -> None:
    """The process's secrets: (value, label) pairs, and every environment variable named like a credential whose
    value is LONG characters or more (a shorter value of a variable nobody named could be any word: only the
    variables a model entry uses are redacted at every length). Replaces what an earlier call set."""
    global _pattern
    found = dict(reversed(list(secrets)))  # the first label of a value wins
    for name, value in sorted(os.environ.items()):
        if credential_name(name) and len(value) >= LONG:
            found.setdefault(value, f"${name}")
    with _lock:
        _secrets.clear()
        _secrets.update({v: lbl for v, lbl in found.items() if v and v != MASK})
        _pattern = _compile(_secrets)


def _compile(values: Iterable[str]) -> re.Pattern[str] | None:
    parts = []
    for value in sorted(values, key=len, reverse=True):
        v = re.escape(value)
        parts.append(v if len(value) >= LONG else f"(?<![{_WORD}]){v}(?![{_WORD}])")
    return re.compile("|".join(parts)) if parts else None


def secrets() -> dict[str, str]:
    """The secrets in use: value -> label."""
    with _lock:
        return dict(_secrets)


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """`text` without any secret in use, `extra` value, URL user and password or key-like query parameter value."""
    if not text:
        return text
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    more = _compile(e for e in extra if e and e not in _secrets)
    if more is not None:
        text = more.sub(MASK, text)
    if "://" in text:
        text = _URL_USER.sub(MASK + "@", text)
    if "=" in text:
        text = _URL_PARAM.sub(lambda m: m.group(1) + MASK, text)
    return text


def found_in(data: bytes) -> str | None:
    """The label of a secret in use that `data` holds (matched as `redact` matches it), else None."""
    pattern = _pattern
    found = pattern.search(data.decode("utf-8", "surrogateescape")) if pattern is not None else None
    return _secrets.get(found.group(0)) if found else None


# --------------------------------------------------------------------------------------------------
# The config's secrets

_SECRET_WORDS = ("api_key", "apikey", "token", "secret", "password", "authorization", "cookie")


def _secret_key(key: str) -> bool:
    lk = key.lower().replace("-", "_")
    return any(w in lk for w in _SECRET_WORDS) and not lk.endswith("_env")


def redacted_config(cfg: Config) -> dict[str, Any]:
    """The resolved config as plain data, for the run folder's config.yaml. Holds env var names, never keys: a
    value under a secret-looking key is `***`, and so is every secret in use and a URL's user and password or
    key-like query parameter anywhere else."""
    return _masked(cfg.data())


def _masked(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _masked(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, key) for v in value]
    if isinstance(value, str):
        return MASK if _secret_key(key) else redact(value)
    return value


def secrets_of(cfg: Config) -> list[tuple[str, str]]:
    """(value, label) of every credential the config's calls can send: the keys its api_key_env variables hold, the
    variables LiteLLM reads by itself for each entry's provider (provider_variables), the credentials written into
    an api_base, and the values under a secret-looking key of its params (`extra_headers.Authorization`)."""
    from .routing import declared  # here: the CLI imports this module before any model code

    out: list[tuple[str, str]] = []
    for where, _, model, api_base, key_env, params in declared(cfg.entries()):
        names = [key_env] if key_env else []
        names += provider_variables(model.split("/", 1)[0]) if "/" in model else []
        out += [(os.environ[n], f"${n}") for n in names if os.environ.get(n)]
        out += [(v, f"{where}.api_base") for v in url_secrets(api_base or "")]
        out += [(v, f"{where}.params") for v in _param_secrets(params)]
    return out


def _param_secrets(value: Any, key: str = "") -> list[str]:
    """The strings under a secret-looking key of a params mapping, at any depth (a header's `Bearer <key>`: both)."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _param_secrets(v, str(k))]
    if isinstance(value, list):
        return [s for v in value for s in _param_secrets(v, key)]
    if isinstance(value, str) and value and _secret_key(key):
        scheme, _, rest = value.partition(" ")
        return [value, rest] if rest and scheme.lower() in ("bearer", "basic", "token") else [value]
    return []
