"""Unit tests of providers/ratelimit.py's TokenBucket on a fake clock; the waits are worked out by hand."""

from __future__ import annotations

import pytest
from factories import FakeClock

from rubricrun.providers.ratelimit import TokenBucket


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
    clock = FakeClock(0.0)
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
