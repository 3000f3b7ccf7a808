"""Unit tests of the pure parts: scoring, judge-free scoring, cache keys, judge assignment and reply parsing,
the token bucket, the backoff, and error classification on real LiteLLM exceptions (fake server over HTTP).

Every expected number is worked out by hand in the comments next to it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Iterator

import pytest
from fakeserver import FakeOpenAIServer

from rubricrun.config import RetryConfig
from rubricrun.errors import ProviderError
from rubricrun.judging.answers import extract_choice, qa_correct
from rubricrun.judging.prompt import assign_judges, parse_judge_reply
from rubricrun.providers.cache import cache_key, canonical_json
from rubricrun.providers.ratelimit import TokenBucket
from rubricrun.providers.retry import backoff_delay
from rubricrun.results.scoring import score_response
from rubricrun.types import Criterion, Example, Judgment, LLMRequest, LLMResponse, TraceEvent, Usage, to_row

# ---------------------------------------------------------------------------------------------------
# scoring.score_response


def crit(cid: str, weight: float, category: str | None = None, tags: tuple[str, ...] = ()) -> Criterion:
    return Criterion(id=cid, text=f"criterion {cid}", weight=weight, tags=tags, category=category)


def test_all_positive_weights() -> None:
    cs = [crit("a", 3), crit("b", 2), crit("c", 1)]
    s = score_response(cs, ["met", "not_met", "met"])
    # points = 3 + 1 = 4;  P = 3 + 2 + 1 = 6;  N = 0
    # normalized = (4 - 0) / (6 - 0) = 2/3;  clipped = clamp(4 / 6) = 2/3
    assert s.points == 4
    assert s.normalized == pytest.approx(2 / 3)
    assert s.clipped == pytest.approx(2 / 3)
    assert (s.met, s.not_met, s.errors) == (2, 1, 0)


def test_all_met_and_none_met() -> None:
    cs = [crit("a", 3), crit("b", 2)]
    assert score_response(cs, ["met", "met"]).normalized == 1.0  # (5 - 0) / (5 - 0)
    none = score_response(cs, ["not_met", "not_met"])
    assert none.normalized == 0.0 and none.clipped == 0.0 and none.points == 0  # 0 / 5


def test_negative_weight_met() -> None:
    cs = [crit("a", 5), crit("b", 3), crit("bad", -4)]
    s = score_response(cs, ["met", "met", "met"])
    # points = 5 + 3 - 4 = 4;  P = 8;  N = -4
    # PRBench normalized = (points - N) / (P - N) = (4 + 4) / (8 + 4) = 8/12 = 2/3
    # HealthBench clipped = clamp(points / P) = clamp(4 / 8) = 0.5
    assert s.points == 4
    assert s.normalized == pytest.approx(2 / 3)
    assert s.clipped == pytest.approx(0.5)


def test_negative_weight_not_met() -> None:
    cs = [crit("a", 5), crit("b", 3), crit("bad", -4)]
    s = score_response(cs, ["met", "not_met", "not_met"])
    # points = 5;  P = 8;  N = -4
    # normalized = (5 + 4) / (8 + 4) = 9/12 = 0.75;  clipped = 5 / 8 = 0.625
    assert s.points == 5
    assert s.normalized == pytest.approx(0.75)
    assert s.clipped == pytest.approx(0.625)


def test_worst_case_penalty_only_clips_to_zero() -> None:
    cs = [crit("a", 5), crit("b", 3), crit("bad", -4)]
    s = score_response(cs, ["not_met", "not_met", "met"])
    # points = -4;  normalized = (-4 + 4) / 12 = 0;  clipped = clamp(-4 / 8) = clamp(-0.5) = 0
    assert s.points == -4
    assert s.normalized == 0.0
    assert s.clipped == 0.0


def test_clipped_caps_at_one() -> None:
    # A zero-weight criterion is neither P nor N; weights [2, 0] both met: points 2, P 2 -> clipped 1, normalized 1.
    s = score_response([crit("a", 2), crit("z", 0)], ["met", "met"])
    assert s.clipped == 1.0 and s.normalized == 1.0


def test_error_verdicts_are_excluded_and_counted() -> None:
    cs = [crit("a", 5), crit("b", 3), crit("bad", -4)]
    s = score_response(cs, ["met", "error", "not_met"])
    # b (3) is left out of everything: points = 5;  P = 5;  N = -4
    # normalized = (5 + 4) / (5 + 4) = 1.0;  clipped = 5 / 5 = 1.0
    # (had the error been counted as not_met: P = 8 -> normalized 9/12 = 0.75, clipped 0.625)
    assert s.normalized == pytest.approx(1.0)
    assert s.clipped == pytest.approx(1.0)
    assert (s.met, s.not_met, s.errors) == (1, 1, 1)

    s2 = score_response(cs, ["met", "not_met", "error"])
    # the penalty is unknown: points = 5;  P = 8;  N = 0 -> normalized = 5/8 = 0.625, clipped = 0.625
    assert s2.normalized == pytest.approx(0.625)
    assert s2.clipped == pytest.approx(0.625)
    assert s2.errors == 1


def test_all_error_gives_none() -> None:
    cs = [crit("a", 5), crit("bad", -4)]
    s = score_response(cs, ["error", "error"])
    assert s.normalized is None
    assert s.clipped is None
    assert (s.met, s.not_met, s.errors) == (0, 0, 2)
    assert s.by_category == {} and s.by_tag == {}


def test_only_negative_rubric() -> None:
    cs = [crit("x", -2), crit("y", -3)]
    s = score_response(cs, ["not_met", "met"])
    # points = -3;  P = 0;  N = -5
    # normalized = (-3 + 5) / (0 + 5) = 2/5 = 0.4;  clipped: P = 0 -> None
    assert s.points == -3
    assert s.normalized == pytest.approx(0.4)
    assert s.clipped is None


def test_breakdowns_by_category_and_tag() -> None:
    cs = [
        crit("c1", 4, "accuracy", ("axis:accuracy",)),
        crit("c2", 2, "accuracy"),
        crit("c3", -3, "safety", ("axis:accuracy", "level:example")),
        crit("c4", 1, "style", ("level:example",)),
    ]
    s = score_response(cs, ["met", "not_met", "met", "met"])
    # overall: points = 4 - 3 + 1 = 2;  P = 7;  N = -3 -> normalized = (2 + 3) / (7 + 3) = 0.5;  clipped = 2/7
    assert s.normalized == pytest.approx(0.5)
    assert s.clipped == pytest.approx(2 / 7)
    # by_category (normalized within the group):
    #   accuracy: c1 met (4), c2 not (2): (4 - 0) / (6 - 0) = 2/3
    #   safety:   c3 met (-3):            (-3 + 3) / (0 + 3) = 0
    #   style:    c4 met (1):             1 / 1 = 1
    assert s.by_category == pytest.approx({"accuracy": 2 / 3, "safety": 0.0, "style": 1.0})
    # by_tag:
    #   axis:accuracy: c1 met (4), c3 met (-3): points 1, P 4, N -3 -> (1 + 3) / (4 + 3) = 4/7
    #   level:example: c3 met (-3), c4 met (1): points -2, P 1, N -3 -> (-2 + 3) / (1 + 3) = 1/4
    assert s.by_tag == pytest.approx({"axis:accuracy": 4 / 7, "level:example": 0.25})

    # An error verdict leaves its groups too: c2 unknown -> accuracy = 4 / 4 = 1.0
    s2 = score_response(cs, ["met", "error", "met", "met"])
    assert s2.by_category["accuracy"] == pytest.approx(1.0)


def test_one_verdict_per_criterion() -> None:
    with pytest.raises(ValueError):
        score_response([crit("a", 1)], ["met", "met"])


# ---------------------------------------------------------------------------------------------------
# Judge-free scoring


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is B.", "B"),
        ("(C)", "C"),
        ("B) foo", "B"),
        ("answer: d", "D"),
        ("Answer: (B) Mars", "B"),
        ("**Answer: C**", "C"),
        ("D", "D"),
        ("I am not sure.", None),  # "I" is a letter, but not one of A-D
        ("Mars is the red planet.", None),
        ("The answer is E.", None),  # out of range for 4 choices
    ],
)
def test_extract_choice(text: str, expected: str | None) -> None:
    assert extract_choice(text, 4) == expected


@pytest.mark.parametrize(
    "text",
    [
        "A good choice is (D) Carbon dioxide.",  # line-start pattern ^\(?([A-J])[\).:\s] takes the article "A "
        "The answer is a gas: (D) carbon dioxide",  # answer-pattern, case-insensitive, takes "a"
    ],
)
def test_extract_choice_article_a_is_not_choice_a(text: str) -> None:
    assert extract_choice(text, 4) == "D"


@pytest.mark.parametrize(
    "response, answer, expected",
    [
        ("#### 42", "42", True),
        ("The answer is 42.", "42", True),  # the trailing period is not a decimal part
        ("42.0", "42", True),
        ("1,234", "1234", True),
        ("1234", "1,234", True),
        ("The answer is 41", "42", False),
        ("$18", "18", True),
        ("answer: -5", "-5", True),
        ("12 apples minus 2 = 10", "10", True),  # no marker: the last number
        ("The answer is 10 apples, 2 fewer than 12", "10", True),  # the marker wins over the last number
        ("#### 7\nso 7 + 1 = 8", "8", False),  # '####' wins over the last number
    ],
)
def test_qa_correct_numeric(response: str, answer: str, expected: bool) -> None:
    assert qa_correct(response, answer) is expected


@pytest.mark.parametrize(
    "response, answer, expected",
    [
        ("Canberra.", "canberra", True),  # normalized exact match
        ("The Paris", "Paris", True),  # articles and case are dropped
        ("It is Canberra, of course", "Canberra", False),  # equality, not containment (issue 11; was True)
        ("Canberran", "Canberra", False),  # not a whole word
        ("No, it is not enforceable.", "No", True),
        ("Yes.", "No", False),
        ("anything", "", False),  # an empty answer never matches
    ],
)
def test_qa_correct_text(response: str, answer: str, expected: bool) -> None:
    assert qa_correct(response, answer) is expected


# ---------------------------------------------------------------------------------------------------
# cache.cache_key

BASE = LLMRequest(
    model="openai/gpt-4o-mini",
    messages=(
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2? Réponds en français."},
    ),
    params={"temperature": 0.0, "max_tokens": 16, "seed": 7},
    api_base="http://127.0.0.1:8000/v1",
)

# Computed once and hard-coded: if this changes, every user's cache is invalidated.
GOLDEN_JSON = (
    '{"api_base":"http://127.0.0.1:8000/v1","messages":[{"content":"Be brief.","role":"system"},'
    '{"content":"What is 2+2? Réponds en français.","role":"user"}],"model":"openai/gpt-4o-mini",'
    '"params":{"max_tokens":16,"seed":7,"temperature":0},"response_schema":null}'
)
GOLDEN_KEY = "81772d1f63dded58943f0daf56f1f4667beb3b090e8e7790745132b6afff35d4"


def _replace(**kw: object) -> LLMRequest:
    import dataclasses

    return dataclasses.replace(BASE, **kw)


def test_cache_key_golden_value() -> None:
    assert canonical_json(BASE.cache_fields()) == GOLDEN_JSON
    assert hashlib.sha256(GOLDEN_JSON.encode("utf-8")).hexdigest() == GOLDEN_KEY
    assert cache_key(BASE) == GOLDEN_KEY


def test_cache_key_same_for_integral_float_and_int_params() -> None:
    # YAML `temperature: 0` and `temperature: 0.0` are the same request and must share one cache entry.
    as_int = _replace(params={"max_tokens": 16, "seed": 7, "temperature": 0})
    as_float = _replace(params={"max_tokens": 16.0, "seed": 7, "temperature": 0.0})
    assert cache_key(as_int) == cache_key(as_float) == GOLDEN_KEY
    assert cache_key(_replace(params={"max_tokens": 16, "seed": 7, "temperature": 0.5})) != GOLDEN_KEY


def test_cache_key_stable_across_calls_and_dict_order() -> None:
    assert cache_key(BASE) == cache_key(BASE)
    reordered = _replace(
        messages=(
            {"content": "Be brief.", "role": "system"},
            {"content": "What is 2+2? Réponds en français.", "role": "user"},
        ),
        params={"seed": 7, "max_tokens": 16, "temperature": 0.0},
    )
    assert cache_key(reordered) == GOLDEN_KEY


@pytest.mark.parametrize(
    "change",
    [
        {"model": "openai/gpt-4o"},
        {"api_base": "http://127.0.0.1:8001/v1"},
        {"api_base": None},
        {"messages": ({"role": "user", "content": "What is 2+3?"},)},
        {"messages": tuple(reversed(BASE.messages))},  # message order matters
        {"params": {"temperature": 0.7, "max_tokens": 16, "seed": 7}},
        {"params": {"temperature": 0.0, "max_tokens": 16}},
        {"response_schema": {"type": "object"}},
        {"sample_index": 1},
    ],
)
def test_cache_key_changes_with_output_fields(change: dict) -> None:
    assert cache_key(_replace(**change)) != GOLDEN_KEY


@pytest.mark.parametrize(
    "change",
    [
        {"timeout_s": 5.0},
        {"role": "judge"},
        {"limiter": "judge:j1"},
        {"api_key_env": "SOME_OTHER_KEY_VAR"},
        {"sample_index": 0},
    ],
)
def test_cache_key_ignores_bookkeeping(change: dict) -> None:
    assert cache_key(_replace(**change)) == GOLDEN_KEY


def test_sample_index_zero_is_the_key_without_it() -> None:
    assert "sample_index" not in BASE.cache_fields()
    assert _replace(sample_index=1).cache_fields()["sample_index"] == 1
    assert cache_key(_replace(sample_index=1)) != cache_key(_replace(sample_index=2))


# ---------------------------------------------------------------------------------------------------
# types.to_row (hand-written for speed: must give exactly what dataclasses.asdict gives)

ROW_CASES = [
    Example(
        id="e1",
        dataset="d",
        source="d.jsonl:3",
        messages=({"role": "user", "content": "hi", "extra": [1, (2, 3)]},),
        choices=("a", "b"),
        answer="B",
        rubric=(Criterion("c1", "states X", -2.5, ("safety",), "cat"),),
        metadata={"nested": {"k": [1, {"z": None}]}},
    ),
    Judgment(
        id="j",
        response_id="r",
        example_id="e",
        candidate="c",
        criterion_id="c1",
        weight=1.0,
        judge="j1",
        verdict="met",
        explanation=None,
        error=None,
        votes=({"judge": "j1", "verdict": "met"},),
        usage=Usage(3, 4, 7),
    ),
    TraceEvent(
        ts=1.5, role="judge", model="m", key="k", cache_hit=False, attempt=2, latency_ms=3.0, status="ok", usage=None
    ),
    LLMResponse(text="t", finish_reason="stop", usage=Usage(1, 2, 3), model="m"),
]


@pytest.mark.parametrize("obj", ROW_CASES, ids=lambda o: type(o).__name__)
def test_to_row_equals_asdict(obj: object) -> None:
    full = dataclasses.asdict(obj)  # type: ignore[call-overload]
    # a field marked NOT_IN_ROW (cache_hit of responses and judgments, issue 13) is left out of the row
    reference = {f.name: full[f.name] for f in dataclasses.fields(obj) if f.metadata.get("row", True)}  # type: ignore[arg-type]
    fast = to_row(obj)
    assert repr(fast) == repr(reference)  # same values, same key order, tuples kept as tuples


def test_to_row_copies_containers() -> None:
    ex = ROW_CASES[0]
    row = to_row(ex)
    row["messages"][0]["content"] = "changed"
    row["metadata"]["nested"]["k"].append(2)
    assert ex.messages[0]["content"] == "hi" and ex.metadata["nested"]["k"] == [1, {"z": None}]


# ---------------------------------------------------------------------------------------------------
# judge.assign_judges


def test_assign_round_robin() -> None:
    assert assign_judges(5, 2) == [[0], [1], [0], [1], [0]]


def test_assign_with_offset() -> None:
    # criterion i -> (offset + i) % 2 with offset 1
    assert assign_judges(5, 2, offset=1) == [[1], [0], [1], [0], [1]]
    # offset 4 over 3 judges: (4 + i) % 3 = 1, 2, 0, 1
    assert assign_judges(4, 3, offset=4) == [[1], [2], [0], [1]]


def test_assign_k_distinct_judges() -> None:
    # k=2 over 3 judges: criterion i -> (2i + j) % 3 for j in 0,1
    #   i=0: [0, 1];  i=1: [2, 0];  i=2: [4 % 3, 5 % 3] = [1, 2];  i=3: [6 % 3, 7 % 3] = [0, 1]
    got = assign_judges(4, 3, per_criterion=2)
    assert got == [[0, 1], [2, 0], [1, 2], [0, 1]]
    assert all(len(set(js)) == 2 for js in got)
    # k=2 over 2 judges: every criterion gets both
    assert assign_judges(3, 2, per_criterion=2) == [[0, 1], [0, 1], [0, 1]]


def test_assign_k_larger_than_pool_clamps() -> None:
    assert assign_judges(2, 2, per_criterion=5) == [[0, 1], [0, 1]]
    assert assign_judges(2, 1, per_criterion=3) == [[0], [0]]
    assert assign_judges(2, 0) == [[], []]


# ---------------------------------------------------------------------------------------------------
# judge.parse_judge_reply


def test_parse_plain_json() -> None:
    p = parse_judge_reply('{"explanation": "Names the dose.", "criteria_met": true}')
    assert (p.criteria_met, p.explanation, p.error) == (True, "Names the dose.", None)


def test_parse_fenced_json() -> None:
    p = parse_judge_reply('```json\n{"explanation": "No dose.", "criteria_met": false}\n```')
    assert (p.criteria_met, p.explanation, p.error) == (False, "No dose.", None)


def test_parse_stray_text_around() -> None:
    text = 'Sure! My verdict: {"explanation": "ok", "criteria_met": true} Hope this {helps}.'
    assert parse_judge_reply(text).criteria_met is True
    # a brace pair in the prose before the JSON is skipped
    assert parse_judge_reply('I read {this} first. {"explanation": "x", "criteria_met": false}').criteria_met is False


@pytest.mark.parametrize("value, expected", [('"true"', True), ('"false"', False), ('"True "', True), ('"no"', False)])
def test_parse_boolean_as_string(value: str, expected: bool) -> None:
    p = parse_judge_reply('{"explanation": "e", "criteria_met": ' + value + "}")
    assert p.criteria_met is expected and p.error is None


def test_parse_braces_and_quotes_inside_the_explanation() -> None:
    text = '{"explanation": "uses {x} and a } brace and \\"quotes\\"", "criteria_met": true}'
    p = parse_judge_reply(text)
    assert p.criteria_met is True
    assert p.explanation == 'uses {x} and a } brace and "quotes"'


def test_parse_unmatched_brace_in_prose_before_json() -> None:
    p = parse_judge_reply('The response opens a { and never closes it. {"explanation": "x", "criteria_met": false}')
    assert p.criteria_met is False


def test_parse_missing_field_is_error() -> None:
    p = parse_judge_reply('{"explanation": "It does."}')
    assert p.criteria_met is None and p.error


def test_parse_non_boolean_is_error() -> None:
    p = parse_judge_reply('{"explanation": "e", "criteria_met": "maybe"}')
    assert p.criteria_met is None and "maybe" in (p.error or "")


def test_parse_not_json_is_error_with_a_snippet() -> None:
    p = parse_judge_reply("The response meets the criterion.")
    assert p.criteria_met is None
    assert "not the expected JSON" in (p.error or "") and "meets the criterion" in (p.error or "")


def test_parse_cut_off_at_max_tokens() -> None:
    p = parse_judge_reply('{"explanation": "The response is long and', finish_reason="length")
    assert p.criteria_met is None
    assert "max_tokens" in (p.error or "")
    # the same text without finish_reason "length" is an ordinary parse error
    assert "max_tokens" not in (parse_judge_reply('{"explanation": "The response is long and').error or "")


@pytest.mark.parametrize("text", ["", "   \n", None])
def test_parse_empty(text: str | None) -> None:
    p = parse_judge_reply(text)
    assert p.criteria_met is None and "empty" in (p.error or "")


# ---------------------------------------------------------------------------------------------------
# ratelimit.TokenBucket (fake clock)


class FakeClock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_bucket_back_to_back_waits_grow_by_interval() -> None:
    clock = FakeClock(100.0)
    b = TokenBucket(60, clock=clock)  # 60 rpm -> interval 1 s
    assert b.interval == 1.0
    # three reservations at the same instant: slots at 100, 101, 102 -> waits 0, 1, 2
    assert [b.reserve() for _ in range(3)] == [0.0, 1.0, 2.0]
    # half a second later the next free slot is 103 -> wait 2.5
    clock.t = 100.5
    assert b.reserve() == pytest.approx(2.5)
    # after a long idle period the slot is "now": no wait, and the one after waits one interval
    clock.t = 200.0
    assert b.reserve() == 0.0
    assert b.reserve() == 1.0


def test_bucket_interval_from_rpm() -> None:
    clock = FakeClock()
    b = TokenBucket(30, clock=clock)  # 30 rpm -> 2 s
    assert [b.reserve(), b.reserve()] == [0.0, 2.0]


def test_bucket_burst_after_idle() -> None:
    clock = FakeClock(0.0)
    b = TokenBucket(60, burst=3, clock=clock)
    clock.t = 100.0  # idle for long: earliest slot = 100 - (3 - 1) * 1 = 98
    # slots 98, 99, 100 are all <= now -> three immediate; the fourth is slot 101 -> wait 1
    assert [b.reserve() for _ in range(4)] == [0.0, 0.0, 0.0, 1.0]
    # the pace after a burst is one per interval: slot 102 -> wait 2
    assert b.reserve() == 2.0


def test_bucket_rejects_non_positive_rpm() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0)


# ---------------------------------------------------------------------------------------------------
# retry.backoff_delay


class EdgeRng:
    """A stand-in for random.Random that always draws the low (or high) end of the range."""

    def __init__(self, high: bool):
        self.high = high

    def uniform(self, a: float, b: float) -> float:
        return b if self.high else a

    def random(self) -> float:
        return 0.999999 if self.high else 0.0


def _err(retry_after: float | None = None) -> ProviderError:
    return ProviderError("boom", model="m", status_code=429 if retry_after is not None else 500, retryable=True,
                         retry_after_s=retry_after)  # fmt: skip


def test_backoff_grows_exponentially_with_equal_jitter() -> None:
    cfg = RetryConfig(max_attempts=10, initial_wait_s=1.0, max_wait_s=60.0)
    # base = initial * 2**(attempt-1): 1, 2, 4, 8, 16, 32, then capped at 60; delay in [base/2, base]
    lows = [backoff_delay(_err(), n, cfg, EdgeRng(high=False)) for n in range(1, 8)]
    highs = [backoff_delay(_err(), n, cfg, EdgeRng(high=True)) for n in range(1, 8)]
    assert lows == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
    assert highs == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0]
    rng = random.Random(1)
    for n in range(1, 12):
        base = min(60.0, 2.0 ** (n - 1))
        assert base / 2 <= backoff_delay(_err(), n, cfg, rng) <= base


def test_backoff_respects_retry_after() -> None:
    cfg = RetryConfig(initial_wait_s=0.05, max_wait_s=60.0)
    # the jittered backoff of attempt 1 is at most 0.05 s, but the server said 5 s: wait 5 s .. 5.5 s (+ <= 10%)
    rng = random.Random(3)
    for _ in range(50):
        d = backoff_delay(_err(retry_after=5.0), 1, cfg, rng)
        assert 5.0 <= d <= 5.5
    assert backoff_delay(_err(retry_after=5.0), 1, cfg, EdgeRng(high=False)) == 5.0


def test_backoff_capped_at_max_wait() -> None:
    cfg = RetryConfig(initial_wait_s=1.0, max_wait_s=2.0)
    assert backoff_delay(_err(retry_after=100.0), 1, cfg, EdgeRng(high=True)) == 2.0
    assert backoff_delay(_err(), 30, cfg, EdgeRng(high=True)) == 2.0  # 2**29 capped


# ---------------------------------------------------------------------------------------------------
# providers.classify_error on real LiteLLM exceptions


@pytest.fixture(scope="module")
def error_server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer().start()
    try:
        yield srv
    finally:
        srv.stop()


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
    error_server: FakeOpenAIServer, status: int, retry_after: float | None, retryable: bool
) -> None:
    from rubricrun.providers.litellm import classify_error

    exc = _real_exception(error_server, status, retry_after)
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
