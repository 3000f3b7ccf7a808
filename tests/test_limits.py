"""Limits as providers set them: one limiter per provider account (rpm, tpm, pauses), shared by entries and roles.

Units run on a fake clock; the integration tests drive the real stack through LiteLLM against tests/fakeserver.py
and assert on the server's request log (counts, ordering, and bounds several times wider than the pacing needs).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import model_entry, write_jsonl
from factories import FakeClock
from fakeserver import FakeOpenAIServer, Rule
from msgspec.structs import replace

from rubricrun.config import load_config
from rubricrun.errors import InputError
from rubricrun.providers.base import BaseProvider
from rubricrun.providers.litellm import parse_reset, rate_limit_pause
from rubricrun.providers.ratelimit import AccountLimiter, ThrottledProvider, reserved_tokens
from rubricrun.providers.routing import Route, model_request, routes
from rubricrun.providers.stack import account_limits, build_stack
from rubricrun.providers.trace import Tracer
from rubricrun.types import LLMRequest

# --------------------------------------------------------------------------------------------------
# AccountLimiter (fake clock)


def try_acquire(lim: AccountLimiter, tokens: int = 0) -> float:
    """`acquire` without waiting or queueing: 0 when charged, else the wait."""
    with lim._cond:
        return lim._admit(tokens, lim._clock())


def test_rpm_paces_one_request_per_interval() -> None:
    clock = FakeClock()
    lim = AccountLimiter(rpm=60, clock=clock)  # 1 s apart
    assert try_acquire(lim) == 0.0
    assert try_acquire(lim) == pytest.approx(1.0)  # nothing charged when it must wait
    clock.t += 0.25
    assert try_acquire(lim) == pytest.approx(0.75)
    clock.t += 0.75
    assert try_acquire(lim) == 0.0
    clock.t += 100  # idle: no burst saved up, the next one after it waits again
    assert [try_acquire(lim), try_acquire(lim)] == [0.0, pytest.approx(1.0)]


def test_tpm_charges_reservation_and_settles_to_usage() -> None:
    clock = FakeClock()
    lim = AccountLimiter(tpm=600, ahead_s=0, clock=clock)  # 10 tokens a second
    assert try_acquire(lim, 100) == 0.0  # 100 tokens reserved: the account is busy for 10 s
    assert try_acquire(lim, 5) == pytest.approx(10.0)
    lim.settle(100, 20)  # the reply used 20: 80 tokens (8 s) come back
    assert try_acquire(lim, 5) == pytest.approx(2.0)
    clock.t += 2.0
    assert try_acquire(lim, 100) == 0.0  # busy until 10 s from now
    lim.settle(100, 150)  # a reply that used 50 more than reserved: 5 s more
    assert try_acquire(lim, 5) == pytest.approx(15.0)
    clock.t += 15.0
    assert try_acquire(lim, 5) == 0.0


def test_refund_never_lends_from_the_past() -> None:
    clock = FakeClock()
    lim = AccountLimiter(tpm=600, ahead_s=0, clock=clock)
    assert try_acquire(lim, 10) == 0.0  # busy 1 s
    clock.t += 50
    lim.settle(10, 0)  # a refund on an idle account gives nothing to spend later
    assert try_acquire(lim, 10) == 0.0
    assert try_acquire(lim, 10) == pytest.approx(1.0)


def test_both_limits_wait_for_the_later() -> None:
    clock = FakeClock()
    lim = AccountLimiter(rpm=60, tpm=6000, ahead_s=0, clock=clock)  # 1 s per request, 100 tokens per second
    assert try_acquire(lim, 300) == 0.0
    assert try_acquire(lim, 1) == pytest.approx(3.0)  # tokens bind
    lim.settle(300, 10)
    assert try_acquire(lim, 1) == pytest.approx(1.0)  # now requests bind


def test_reservations_in_flight_may_run_ahead_by_ahead_s() -> None:
    clock = FakeClock()
    lim = AccountLimiter(tpm=600, ahead_s=3, clock=clock)  # 10 tokens a second; 30 in flight may run ahead
    assert try_acquire(lim, 20) == 0.0  # clock 2 s ahead, all of it in flight: the next may go
    assert try_acquire(lim, 20) == 0.0  # 4 s ahead, 3 s of it forgiven
    assert try_acquire(lim, 20) == pytest.approx(1.0)
    lim.settle(20, 5)  # the first used 5: 1.5 s back; 20 tokens in flight still forgiven
    assert try_acquire(lim, 20) == pytest.approx(0.5)
    lim.settle(20, 20)  # nothing in flight: the clock is 2.5 s ahead and none of it is forgiven
    assert try_acquire(lim, 1) == pytest.approx(2.5)
    clock.t += 2.5
    assert try_acquire(lim, 1) == 0.0


def test_pause_holds_every_request_and_is_capped() -> None:
    clock = FakeClock()
    lim = AccountLimiter(max_pause_s=5.0, clock=clock)  # no limits: only pauses
    assert try_acquire(lim) == 0.0
    lim.pause(2.0)
    assert try_acquire(lim) == pytest.approx(2.0)
    lim.pause(1.0)  # an earlier end does not shorten the pause
    assert try_acquire(lim) == pytest.approx(2.0)
    lim.pause(3600)
    assert try_acquire(lim) == pytest.approx(5.0)
    assert lim.pauses == 2


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError):
        AccountLimiter(rpm=0)
    with pytest.raises(ValueError):
        AccountLimiter(tpm=-1)


def test_reserved_tokens_is_prompt_estimate_plus_max_tokens() -> None:
    req = LLMRequest(model="openai/m", messages=({"role": "user", "content": "x" * 300},), params={"max_tokens": 50})
    assert reserved_tokens(req) > 50 + 300 // 4  # at least the server's count
    no_max = LLMRequest(model="openai/m", messages=({"role": "user", "content": "hi"},))
    assert reserved_tokens(no_max) > 4096  # pricing.DEFAULT_MAX_TOKENS


# --------------------------------------------------------------------------------------------------
# Rate-limit headers


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("0.25s", 0.25), ("20ms", 0.02), ("6m0s", 360.0), ("1h2m3.5s", 3723.5), ("2.5", 2.5), ("x", None)],
)
def test_parse_reset(text: str, seconds: float | None) -> None:
    assert parse_reset(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_rate_limit_pause_only_when_nothing_is_left() -> None:
    h = {"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "2s"}
    assert rate_limit_pause(h) == 0.0
    h["x-ratelimit-remaining-requests"] = "0"
    assert rate_limit_pause(h) == 2.0
    h.update({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"})
    assert rate_limit_pause(h) == 360.0  # the longer of the two (the limiter caps it at retry.max_wait_s)
    assert rate_limit_pause(None) == 0.0


# --------------------------------------------------------------------------------------------------
# Accounts from the config


def _cfg(make_config: Any, server: FakeOpenAIServer | None, **overrides: Any):
    return load_config(make_config(server, **overrides))


def test_one_model_in_two_roles_is_one_account(make_config: Any, server: FakeOpenAIServer) -> None:
    cfg = _cfg(
        make_config, server,
        candidates=[model_entry("c", "openai/shared", server, rpm=600, tpm=90000)],
        judges=[model_entry("j", "openai/shared", server, rpm=600), model_entry("k", "openai/other", server)],
    )  # fmt: skip
    limits = account_limits(cfg)
    shared = Route("openai/shared", server.base_url, "RUBRICRUN_TEST_KEY")
    assert limits == {shared: (600, 90000), Route("openai/other", server.base_url, "RUBRICRUN_TEST_KEY"): (None, None)}
    # Another key variable or api_base is another account.
    cfg2 = _cfg(
        make_config, server,
        candidates=[model_entry("c", "openai/shared", server, rpm=600)],
        judges=[model_entry("j", "openai/shared", server, rpm=600, api_key_env="OTHER_KEY")],
    )  # fmt: skip
    assert len(account_limits(cfg2)) == 2


def test_different_limits_for_one_account_use_the_smallest_and_log_once(
    make_config: Any, server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = _cfg(
        make_config, server,
        candidates=[model_entry("c", "openai/shared", server, rpm=600), model_entry("d", "openai/shared", server)],
        judges=[model_entry("j", "openai/shared", server, rpm=300), model_entry("k", "openai/shared", server, rpm=300)],
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="rubricrun"):
        limits = account_limits(cfg)
    assert list(limits.values()) == [(300, None)]
    warnings = [r.getMessage() for r in caplog.records if "different rpm" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "300 by judges:j, judges:k" in warnings[0] and "600 by candidates:c" in warnings[0]


@pytest.mark.parametrize("key", ["rpm", "tpm"])
def test_non_positive_limit_is_bad_input(make_config: Any, key: str) -> None:
    path = make_config(None, candidates=[model_entry("c", "openai/m", None, **{key: 0})])
    with pytest.raises(InputError) as exc:
        load_config(path)
    assert f"candidates[0].{key}" in str(exc.value) and "config.yaml:" in str(exc.value)


# --------------------------------------------------------------------------------------------------
# Through LiteLLM against the fake server


def _throttle(stack: BaseProvider) -> ThrottledProvider:
    layer: Any = stack
    while not isinstance(layer, ThrottledProvider):
        layer = layer.inner
    return layer


def _stack(make_config: Any, server: FakeOpenAIServer, tmp_path: Path, **overrides: Any):
    cfg = _cfg(make_config, server, **overrides)
    stack, _ = build_stack(cfg, Tracer(tmp_path / "trace.jsonl"), threading.Event(), None)
    return cfg, stack


def _requests(cfg: Any, n: int, tag: str) -> list[tuple[LLMRequest, str]]:
    """n candidate requests and n judge requests (distinct prompts), interleaved."""
    out = []
    cand, judge = cfg.candidates[0], cfg.judge_pool[0]
    for i in range(n):
        for m, section in ((cand, "candidate"), (judge, "judge")):
            msgs = [{"role": "user", "content": f"{tag} {section} question {i}?"}]
            out.append((model_request(m, routes(m)[0][0], msgs, role=section, section=section), section))
    return out


def _max_in_window(times: list[float], window: float) -> int:
    times, best, j = sorted(times), 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - window:
            j += 1
        best = max(best, i - j + 1)
    return best


def _warm_up(stack: BaseProvider, request: LLMRequest, server: FakeOpenAIServer) -> None:
    """One call first: LiteLLM's first call to an api_base builds its HTTP client (tenths of a second), which would
    hold the first admitted requests back and send them together. The log starts after it."""
    stack.generate(replace(request, messages=({"role": "user", "content": "warm-up"},)))
    server.reset_log()


def test_one_model_as_candidate_and_judge_shares_one_rpm_bucket(
    make_config: Any, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    # 1200/min = 20 a second, set on both entries. Two buckets would let 40 a second through.
    cfg, stack = _stack(
        make_config, server, tmp_path,
        candidates=[model_entry("c", "openai/shared", server, rpm=1200)],
        judges=[model_entry("j", "openai/shared", server, rpm=1200)],
    )  # fmt: skip
    reqs = _requests(cfg, 30, "rpm")
    _warm_up(stack, reqs[0][0], server)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda r: stack.generate(r[0]), reqs))
    ok = [r.t for r in server.requests if r.method == "POST" and r.status == 200]
    assert len(ok) == 60
    assert {r.body["messages"][0]["content"].split()[1] for r in server.requests} == {"candidate", "judge"}
    # 60 requests 1/20 s apart span at least 59/20 = 2.95 s (two buckets: about 1.5 s).
    assert max(ok) - min(ok) >= 0.8 * 59 / 20
    # No 2 s window holds much more than 2 * 20 + 1 (two buckets: about 80).
    assert _max_in_window(ok, 2.0) <= 52


def test_tpm_paces_tokens_and_refunds_what_usage_did_not_use(
    make_config: Any, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    # 6000 tokens/min = 100 a second. Each request reserves about 20 (prompt estimate) + 50 (max_tokens) tokens but
    # uses about 15 (the server's count, which its usage reports): without the refund 40 requests need about 28 s.
    cfg, stack = _stack(
        make_config, server, tmp_path,
        candidates=[model_entry("c", "openai/t", server, tpm=6000, params={"max_tokens": 50})],
        judges=[model_entry("j", "openai/t", server, params={"max_tokens": 50})],
    )  # fmt: skip
    reqs = [r for r, section in _requests(cfg, 20, "tpm")]
    lim = _throttle(stack).limiter(reqs[0])
    assert lim.tpm == 6000 and lim is _throttle(stack).limiter(reqs[1])  # the judge role shares it
    _warm_up(stack, reqs[0], server)
    start = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(stack.generate, reqs))
    elapsed = time.monotonic() - start
    log = [r for r in server.requests if r.method == "POST"]
    assert [r.status for r in log] == [200] * 40
    used = sum(r.tokens for r in log)
    assert 40 * 10 < used < 40 * 30
    assert all(reserved_tokens(r) > 3 * (used / 40) for r in reqs)  # the reservations were much larger
    # Paced: all but the tokens of the last 8 (requests in flight may run ahead, each by what it reserved, see
    # AccountLimiter) take at least their time at 100 a second; unpaced, the 40 calls take well under a second.
    t = sorted(r.t for r in log)
    assert t[-1] - t[0] >= 0.9 * (used - 8 * max(r.tokens for r in log)) / 100
    # Refunded: far below the ~28 s that charging the reservations would take.
    assert elapsed < 16, elapsed


def test_429_with_retry_after_pauses_the_whole_account(make_config: Any, tmp_path: Path) -> None:
    # The first request is answered 429 with Retry-After: 1. Requests that other threads start after it (same
    # model, other role, no limits configured) must wait for the pause instead of reaching the server.
    first = "pause first question?"
    with FakeOpenAIServer(rules=[Rule(lambda b: first in str(b["messages"]), 429, 1, retry_after_s=1.0)]) as server:
        cfg, stack = _stack(
            make_config, server, tmp_path,
            candidates=[model_entry("c", "openai/p", server)],
            judges=[model_entry("j", "openai/p", server)],
        )  # fmt: skip
        cand, judge = cfg.candidates[0], cfg.judge_pool[0]
        head = model_request(cand, routes(cand)[0][0], [{"role": "user", "content": first}], role="candidate",
                             section="candidate")  # fmt: skip
        lim = _throttle(stack).limiter(head)
        with ThreadPoolExecutor(6) as pool:
            lead = pool.submit(stack.generate, head)
            deadline = time.monotonic() + 10
            while lim.pauses == 0 and time.monotonic() < deadline:
                time.sleep(0.005)
            assert lim.pauses == 1
            others = [
                model_request(
                    judge,
                    routes(judge)[0][0],
                    [{"role": "user", "content": f"other {i}"}],
                    role="judge",
                    section="judge",
                )  # fmt: skip
                for i in range(5)
            ]
            results = list(pool.map(stack.generate, others))
            lead.result()
        log = [r for r in server.requests if r.method == "POST"]
    assert [r.status for r in log].count(429) == 1 and len(results) == 5
    t429 = next(r.t for r in log if r.status == 429)
    later = [r.t for r in log if r.status == 200]
    assert len(later) == 6
    assert min(later) >= t429 + 0.95, [round(t - t429, 3) for t in later]  # nobody went during the pause


def test_remaining_zero_header_pauses_before_the_429(make_config: Any, tmp_path: Path) -> None:
    # The server allows 3 requests in any 2 s and says so in x-ratelimit-remaining-requests. No rpm is configured:
    # the headers alone hold the fourth request back until a slot frees, so the server never answers 429.
    with FakeOpenAIServer(rpm=3, rpm_window_s=2.0) as server:
        cfg, stack = _stack(make_config, server, tmp_path, candidates=[model_entry("c", "openai/h", server)], judges=[])
        cand = cfg.candidates[0]
        for i in range(5):
            msgs = [{"role": "user", "content": f"header question {i}?"}]
            stack.generate(model_request(cand, routes(cand)[0][0], msgs, role="candidate", section="candidate"))
        log = [r for r in server.requests if r.method == "POST"]
    assert [r.status for r in log] == [200] * 5
    assert log[3].t - log[0].t >= 1.9  # the fourth waited for the first to leave the 2 s window


def test_fakeserver_tpm_window_and_headers() -> None:
    import litellm

    with FakeOpenAIServer(tpm=30, rpm_window_s=60) as server:
        kw: dict[str, Any] = dict(model="openai/m", api_base=server.base_url, api_key="sk-x", max_retries=0)
        r = litellm.completion(messages=[{"role": "user", "content": "a" * 40}], **kw)  # 13 + 3 prompt tokens
        h = r._hidden_params["additional_headers"]
        used = r.usage.prompt_tokens + r.usage.completion_tokens
        assert h["x-ratelimit-limit-tokens"] == "30"
        assert h["x-ratelimit-remaining-tokens"] == str(30 - used)
        assert "x-ratelimit-limit-requests" not in h  # no rpm set
        with pytest.raises(litellm.RateLimitError) as exc:
            litellm.completion(messages=[{"role": "user", "content": "b" * 40}], **kw)
        assert 1 <= int(exc.value.litellm_response_headers["retry-after"]) <= 60
        log = server.requests
    assert [(r.status, r.fault, r.tokens) for r in log] == [(200, None, used), (429, "tpm", 0)]


def test_run_with_one_model_in_two_roles_and_both_limits(
    make_config: Any, cli_main: Any, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    # A whole run with one model as candidate and judge and both limits set: every call answered, none refused.
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": f"e{i}", "prompt": f"Say {i}.", "rubric": [{"text": "Is short.", "weight": 1}]} for i in range(6)],
    )
    cfg_path = make_config(
        server,
        candidates=[model_entry("c", "openai/shared", server, rpm=6000, tpm=600000)],
        judges=[model_entry("j", "openai/shared", server, rpm=6000, tpm=600000)],
        datasets=[{"path": str(data)}],
    )
    rc, _, err = cli_main(["--config", str(cfg_path), "--run-id", "shared"])
    assert rc == 0, err
    assert server.count(status=200) == 12 and server.count(status=429) == 0
