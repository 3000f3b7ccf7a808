"""The fake OpenAI server, driven by the real `openai` client and by real `litellm.completion`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
import openai  # noqa: E402
import pytest  # noqa: E402
from fakeserver import FakeOpenAIServer, Rule, fingerprint  # noqa: E402

litellm.suppress_debug_info = True

MSG = [{"role": "user", "content": "What is the capital of France?"}]
VERDICT_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"explanation": {"type": "string"}, "criteria_met": {"type": "boolean"}},
            "required": ["explanation", "criteria_met"],
            "additionalProperties": False,
        },
    },
}


def complete(server: FakeOpenAIServer, model: str = "openai/fake-model", messages=MSG, **kwargs):
    """One litellm call that makes exactly one HTTP request (no openai-client or litellm retries)."""
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 10)
    return litellm.completion(model=model, api_base=server.base_url, api_key="sk-test", messages=messages, **kwargs)


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=10)


# --------------------------------------------------------------------------------------------------
# Normal replies


def test_openai_client_reply_and_usage(server, client):
    r = client.chat.completions.create(model="fake-model", messages=MSG)
    assert r.object == "chat.completion"
    assert r.model == "fake-model"
    assert r.choices[0].message.content == "Answer to: What is the capital of France?"
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")


def test_litellm_reply_usage_and_finish_reason(server):
    r = complete(server)
    assert r.choices[0].message.content == "Answer to: What is the capital of France?"
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert server.count() == 1 and server.count(status=200, model="fake-model") == 1
    # litellm strips the "openai/" prefix and forwards the messages unchanged
    assert server.requests[0].body["model"] == "fake-model"
    assert server.requests[0].body["messages"] == MSG


def test_reply_is_deterministic_and_longer_prompts_cost_more_tokens(server):
    a, b = complete(server), complete(server)
    assert a.choices[0].message.content == b.choices[0].message.content
    long = complete(server, messages=[{"role": "user", "content": "word " * 200}])
    assert long.usage.prompt_tokens > a.usage.prompt_tokens


def test_enqueue_is_fifo_and_per_model(server):
    server.enqueue("first")
    server.enqueue({"content": "cut off mid-sent", "finish_reason": "length"})
    server.enqueue("for the other model", model="other-model")
    assert server.pending() == 3
    r1 = complete(server)
    r2 = complete(server, model="openai/other-model")  # its own queue first
    r3 = complete(server)
    r4 = complete(server)  # queues empty: the default reply
    assert r1.choices[0].message.content == "first"
    assert r2.choices[0].message.content == "for the other model"
    assert (r3.choices[0].message.content, r3.choices[0].finish_reason) == ("cut off mid-sent", "length")
    assert r4.choices[0].message.content.startswith("Answer to: ")
    assert server.pending() == 0


def test_responder_string_and_full_body(server, client):
    server.configure(responder=lambda body: body["messages"][-1]["content"].upper())
    assert (
        client.chat.completions.create(model="m", messages=MSG).choices[0].message.content == MSG[0]["content"].upper()
    )
    full = {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 1,
        "model": "custom",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "verbatim"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }
    server.configure(responder=lambda body: full)
    r = complete(server)
    assert (r.choices[0].message.content, r.usage.prompt_tokens, r.usage.completion_tokens) == ("verbatim", 7, 3)


def test_stream_reply(server, client):
    stream = client.chat.completions.create(model="fake-model", messages=MSG, stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "Answer to: What is the capital of France?"


# --------------------------------------------------------------------------------------------------
# Judge replies


def test_judge_reply_with_json_schema_passes_through_litellm(server):
    r = complete(
        server,
        messages=[{"role": "user", "content": "Criterion: cites a source. Response: ..."}],
        response_format=VERDICT_SCHEMA,
    )
    verdict = json.loads(r.choices[0].message.content)
    assert set(verdict) == {"explanation", "criteria_met"} and isinstance(verdict["criteria_met"], bool)
    assert server.requests[0].body["response_format"] == VERDICT_SCHEMA  # sent as given


def test_judge_verdict_is_a_deterministic_function_of_the_messages(server):
    def verdict(i: int) -> bool:
        msgs = [
            {"role": "system", "content": "Reply with JSON: explanation, criteria_met."},
            {"role": "user", "content": f"case {i}"},
        ]
        return json.loads(complete(server, messages=msgs).choices[0].message.content)["criteria_met"]

    first = [verdict(i) for i in range(12)]
    assert first == [verdict(i) for i in range(12)]
    assert True in first and False in first  # the hash is not a constant


# --------------------------------------------------------------------------------------------------
# Faults


def test_429_with_retry_after_openai_client(client, server):
    server.add_rule("fake", 429, retry_after_s=3)
    with pytest.raises(openai.RateLimitError) as exc:
        client.chat.completions.create(model="fake-model", messages=MSG)
    assert exc.value.status_code == 429
    assert exc.value.response.headers["retry-after"] == "3"
    assert exc.value.body["type"] == "rate_limit_error"


def test_429_with_retry_after_litellm(server):
    server.configure(retry_after_s=2)
    server.add_rule("fake", 429, count=1)
    with pytest.raises(litellm.RateLimitError) as exc:
        complete(server)
    assert exc.value.status_code == 429
    # litellm rebuilds e.response without the provider's headers; the real ones are here:
    assert exc.value.litellm_response_headers["retry-after"] == "2"
    assert server.count() == 1  # max_retries=0: exactly one HTTP request
    assert complete(server).choices[0].message.content  # the rule has fired its one time


def test_500_litellm(server):
    server.add_rule("fake", 500)
    with pytest.raises(litellm.InternalServerError) as exc:
        complete(server)
    assert exc.value.status_code == 500
    assert server.count(status=500) == 1


def test_litellm_default_retries_are_visible_in_the_log(server):
    server.add_rule("fake", 500)
    with pytest.raises(litellm.InternalServerError):
        litellm.completion(model="openai/fake-model", api_base=server.base_url, api_key="sk-test", messages=MSG)
    assert server.count(status=500) == 3  # openai client default: 2 retries
    assert server.fingerprint_counts() == {fingerprint({"model": "fake-model", "messages": MSG}): 3}


def test_400_rule_for_bad_models_only(server):
    server.add_rule("bad", 400)
    with pytest.raises(litellm.BadRequestError) as exc:
        complete(server, model="openai/bad-model")
    assert exc.value.status_code == 400
    assert complete(server, model="openai/good-model").choices[0].message.content
    assert server.count(status=400, model="bad-model") == 1 and server.count(status=200, model="good-model") == 1


def test_rule_with_predicate_and_count(server, client):
    server.add_rule(lambda body: "please fail" in json.dumps(body), 503)
    server.add_rule("", 429, count=2)  # the first two requests, whatever the model
    statuses = []
    for content in ("a", "b", "please fail", "c"):
        try:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
            statuses.append(200)
        except openai.APIStatusError as e:
            statuses.append(e.status_code)
    assert statuses == [429, 429, 503, 200]
    assert [r.fault for r in server.requests] == ["rule", "rule", "rule", None]


def test_rules_from_tuples_at_construction():
    with FakeOpenAIServer(rules=[("broken", 500), Rule("bad", 400)]) as s:
        c = openai.OpenAI(base_url=s.base_url, api_key="sk-test", max_retries=0)
        with pytest.raises(openai.InternalServerError):
            c.chat.completions.create(model="broken-1", messages=MSG)
        with pytest.raises(openai.BadRequestError):
            c.chat.completions.create(model="very-bad", messages=MSG)


def test_rpm_limit_answers_429_beyond_n_and_counts_only_accepted():
    with FakeOpenAIServer(rpm=5) as s:
        for _ in range(5):
            complete(s)
        for _ in range(2):
            with pytest.raises(litellm.RateLimitError) as exc:
                complete(s)
            retry_after = int(exc.value.litellm_response_headers["retry-after"])
            assert 1 <= retry_after <= 60
        assert s.count(status=200) == 5 and s.count(status=429) == 2
        assert [r.fault for r in s.requests[5:]] == ["rpm", "rpm"]


def test_rpm_window_frees_slots():
    with FakeOpenAIServer(rpm=2, rpm_window_s=0.3) as s:
        complete(s)
        complete(s)
        with pytest.raises(litellm.RateLimitError):
            complete(s)
        threading.Event().wait(0.4)  # the window has passed
        complete(s)
        assert s.count(status=200) == 3


def test_per_model_rpm():
    with FakeOpenAIServer(model_rpm={"slow-model": 1}) as s:
        complete(s, model="openai/slow-model")
        with pytest.raises(litellm.RateLimitError):
            complete(s, model="openai/slow-model")
        complete(s, model="openai/fast-model")
        complete(s, model="openai/fast-model")


def test_random_faults_are_reproducible_with_a_seed():
    def statuses(seed: int) -> list[int]:
        with FakeOpenAIServer(p_429=0.3, p_500=0.3, seed=seed) as s:
            c = openai.OpenAI(base_url=s.base_url, api_key="sk-test", max_retries=0)
            for i in range(20):
                try:
                    c.chat.completions.create(model="m", messages=[{"role": "user", "content": str(i)}])
                except openai.APIStatusError:
                    pass
            return [r.status for r in s.requests]

    a = statuses(7)
    assert a == statuses(7)
    assert {200, 429, 500} <= set(a)


def test_bad_json_reply(server):
    server.configure(p_bad_json=1.0)
    with pytest.raises(litellm.InternalServerError) as exc:  # litellm maps an unparsable 200 to a 500
        complete(server)
    assert exc.value.status_code == 500
    assert server.requests[0].status == 200 and server.requests[0].fault == "p_bad_json"


def test_hang_past_client_timeout_and_stop_does_not_hang():
    s = FakeOpenAIServer(p_hang=1.0, hang_s=30).start()
    with pytest.raises(litellm.Timeout):
        complete(s, timeout=0.3)
    # one more request left hanging in the server while we stop it
    outcome: list[str] = []

    def hanging_call() -> None:
        try:
            complete(s, timeout=20)
            outcome.append("reply")
        except openai.APIError as e:  # the server closed the connection (litellm maps it to a 500)
            outcome.append(type(e).__name__)

    t = threading.Thread(target=hanging_call, daemon=True)
    t.start()
    while s.count() < 2:
        threading.Event().wait(0.01)
    stopper = threading.Thread(target=s.stop)
    stopper.start()
    stopper.join(10)
    assert not stopper.is_alive()
    t.join(10)
    assert not t.is_alive() and outcome and outcome != ["reply"]  # the hanging client got its connection closed


def test_configure_rejects_unknown_settings(server):
    with pytest.raises(TypeError):
        server.configure(p_teapot=1.0)


# --------------------------------------------------------------------------------------------------
# Other endpoints, log, concurrency, CLI


def test_models_endpoint_and_unknown_path_404(server, client):
    complete(server, model="openai/seen-model")
    ids = [m.id for m in client.models.list()]
    assert "fake-model" in ids and "seen-model" in ids
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(server.base_url + "/nope")
    assert exc.value.code == 404
    assert "error" in json.loads(exc.value.read())


def test_request_log_and_fingerprints(server):
    complete(server)
    complete(server)
    complete(server, messages=[{"role": "user", "content": "different"}])
    log = server.requests
    assert [r.status for r in log] == [200, 200, 200]
    assert all(r.model == "fake-model" and r.method == "POST" and r.t > 0 for r in log)
    assert log[0].fingerprint == log[1].fingerprint != log[2].fingerprint
    assert log[0].fingerprint == fingerprint(log[0].body)
    assert sorted(server.fingerprint_counts().values()) == [1, 2]
    assert log[0].headers["Authorization"] == "Bearer sk-test"
    server.reset_log()
    assert server.requests == [] and server.count() == 0


def test_32_threads_share_litellm_completion():
    with FakeOpenAIServer(latency_s=0.02) as s:

        def call(i: int) -> bool:
            q = f"question {i}"
            r = complete(s, messages=[{"role": "user", "content": q}])
            return r.choices[0].message.content == f"Answer to: {q}"

        with ThreadPoolExecutor(32) as ex:
            results = list(ex.map(call, range(96)))
        assert all(results)
        assert s.count(status=200) == 96
        assert max(s.fingerprint_counts().values()) == 1


def test_cli_prints_base_url_and_serves():
    script = Path(__file__).with_name("fakeserver.py")
    proc = subprocess.Popen(
        [sys.executable, str(script), "--port", "0", "--rule", "bad:400", "--latency", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        c = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0, timeout=10)
        assert c.chat.completions.create(model="fake-model", messages=MSG).choices[0].message.content
        with pytest.raises(openai.BadRequestError):
            c.chat.completions.create(model="bad-model", messages=MSG)
        stats = json.loads(urllib.request.urlopen(base_url.removesuffix("/v1") + "/_admin/stats").read())
        assert stats["by_status"] == {"200": 1, "400": 1}
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
