"""Unit tests of providers/litellm.py's classify_error on real LiteLLM exceptions (fake server over HTTP)."""

from __future__ import annotations

import pytest
from fakeserver import FakeOpenAIServer

from rubricrun.errors import ProviderError


def _real_exception(srv: FakeOpenAIServer, status: int, retry_after: float | None = None) -> BaseException:
    from rubricrun.providers.litellm import import_litellm

    litellm = import_litellm()
    srv.clear_rules()
    srv.add_rule("errmodel", status, retry_after_s=retry_after)
    before = srv.count()
    try:
        litellm.completion(
            model="openai/errmodel",
            api_base=srv.base_url,
            api_key="sk-fake",
            messages=[{"role": "user", "content": "hi"}],
            num_retries=0,
            max_retries=0,
        )
    except Exception as exc:  # noqa: BLE001
        assert srv.count() == before + 1  # exactly one HTTP request: no retry hidden below LiteLLM
        return exc
    raise AssertionError(f"HTTP {status} did not raise")


@pytest.mark.parametrize(
    "status, retry_after, retryable",
    [(429, 1.0, True), (429, 0.5, True), (500, None, True), (503, None, True), (400, None, False),
     (401, None, False), (403, None, False), (404, None, False)],
)  # fmt: skip
def test_classify_real_litellm_errors(
    server: FakeOpenAIServer, status: int, retry_after: float | None, retryable: bool
) -> None:
    from rubricrun.providers.litellm import classify_error

    exc = _real_exception(server, status, retry_after)
    err = classify_error(exc, "openai/errmodel")
    assert isinstance(err, ProviderError)
    assert err.status_code == status
    assert err.retryable is retryable
    assert f"HTTP {status}" in str(err) and "openai/errmodel" in str(err)
    if status == 429:
        assert err.retry_after_s == pytest.approx(retry_after)  # parsed from the Retry-After header
    else:
        assert err.retry_after_s is None
    assert classify_error(err, "other") is err  # already classified: returned as is
