"""data/loaders.IdHashes: the duplicate-id check's set of id hashes, as a Python set of the same ints behaves."""

from __future__ import annotations

import random

from rubricrun.data.loaders import IdHashes


def test_it_holds_what_a_set_holds_through_growth_with_any_64_bit_values() -> None:
    rng = random.Random(7)
    values = [hash(f"ds/ex{i}") for i in range(20_000)]
    values += [rng.randrange(-(2**63), 2**63) for _ in range(20_000)]
    values += [1, -1, 2**63 - 1, -(2**63), 1024, 2048, 1024 * 3]  # extremes, and values that share low bits
    ids, want = IdHashes(), set()
    for v in values + values[:5_000]:  # some added twice
        assert (v in ids) == (v in want), v
        ids.add(v)
        want.add(v)
    assert len(ids) == len(want) and all(v in ids for v in want)
    assert not any(v in ids for v in (rng.randrange(-(2**63), 2**63) for _ in range(5_000)) if v not in want)


def test_zero_marks_an_empty_slot_and_is_stored_as_one() -> None:
    """A hit is confirmed by reading the data again (loaders.iter_dataset), so 0 may stand in for 1."""
    ids = IdHashes()
    assert 0 not in ids and 1 not in ids
    ids.add(0)
    assert 0 in ids and 1 in ids and len(ids) == 1
