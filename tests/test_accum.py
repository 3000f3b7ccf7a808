"""results/accum.py: per-example values in compact arrays, read back in sorted example-id order."""

from __future__ import annotations

import math
import random
from array import array

import numpy as np
import pytest

from rubricrun.results import accum, stats
from rubricrun.results.accum import ByExample, ExampleIds, PerExample, paired


def _cols(by: ByExample) -> tuple[list[str], list[float]]:
    return list(by), list(by.vals)


@pytest.mark.parametrize("ids", [["a", "b", "c", "d"], ["c", "a", "d", "b"]])
def test_columns_come_back_in_sorted_id_order_with_the_values_exact(ids: list[str]) -> None:
    eids, values = ExampleIds(), PerExample()
    for i, eid in enumerate(ids):
        pos = eids.add(eid)
        values.add(pos, {"score": 0.1 * i, **({"tag:x": float(i)} if i % 2 else {})})
    want = sorted((eid, 0.1 * i) for i, eid in enumerate(ids))
    assert _cols(values.column("score", eids)) == ([e for e, _ in want], [v for _, v in want])
    assert {g: list(v) for g, v in values.groups("tag:", eids).items()} == {
        "x": [float(i) for _, i in sorted((e, i) for i, e in enumerate(ids) if i % 2)]
    }
    assert dict(values.column("score", eids)) == dict(want) and _cols(values.column("missing", eids)) == ([], [])


def test_by_example_is_the_mapping_and_gives_values_without_building_it() -> None:
    eids = ExampleIds()
    for e in ("a", "b"):
        eids.add(e)
    m = ByExample(eids, array("I", [0, 1]), array("d", [0.5, 1.0]))
    assert list(m.values()) == [0.5, 1.0] and list(m) == ["a", "b"] and list(m.items()) == [("a", 0.5), ("b", 1.0)]
    assert m._dict is None
    assert m == {"a": 0.5, "b": 1.0} and m["b"] == 1.0 and len(m) == 2


def test_a_column_with_gaps_after_consecutive_examples_keeps_their_positions() -> None:
    eids, values = ExampleIds(), PerExample()
    for i, eid in enumerate(["d", "c", "b", "a", "e"]):
        pos = eids.add(eid)
        if i != 2:
            values.add(pos, {"score": float(i)})
    assert _cols(values.column("score", eids)) == (["a", "c", "d", "e"], [3.0, 1.0, 0.0, 4.0])


def test_ids_sort_as_python_sorts_the_strings_also_beyond_ascii_and_across_merged_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sorted order is computed in runs (65,536 ids each) merged together; with runs of 7 the merge is exercised
    on 500 ids, among them non-ASCII ones, whose UTF-8 bytes must sort as the strings' code points do."""
    monkeypatch.setattr(accum, "_RUN", 7)
    rng = random.Random(3)
    alphabet = ["a", "b", "Z", "é", "ж", "中", "😀", "/", "-", "0", "9"]
    ids = list({"".join(rng.choices(alphabet, k=rng.randint(1, 6))) for _ in range(600)})[:500]
    rng.shuffle(ids)
    store, values = ExampleIds(), PerExample()
    for i, eid in enumerate(ids):
        pos = store.add(eid)
        values.add(pos, {"all": float(i)})
        if i % 3 == 0:  # a column with gaps: positions stored, the walk over the sorted order with an index
            values.add(pos, {"third": float(i)})
        if i % 50 == 0:  # a small column: its own positions sorted by rank
            values.add(pos, {"few": float(i)})
    by_id = {eid: float(i) for i, eid in enumerate(ids)}
    assert [store[p] for p in store.order()] == sorted(ids)
    assert sorted(range(len(ids)), key=store.rank().__getitem__) == list(store.order())
    for key, keep in (("all", 1), ("third", 3), ("few", 50)):
        want = sorted((eid, v) for eid, v in by_id.items() if int(v) % keep == 0)
        assert _cols(values.column(key, store)) == ([e for e, _ in want], [v for _, v in want]), key


def test_sorted_ids_need_no_order_and_a_repeat_or_a_step_back_makes_one() -> None:
    store = ExampleIds()
    for e in ("a", "b", "c"):
        store.add(e)
    assert store.order() is None and store.rank() is None
    store.add("c")
    assert list(store.order()) == [0, 1, 2, 3] and list(store.rank()) == [0, 1, 2, 3]
    store.add("b")
    assert [store[p] for p in store.order()] == ["a", "b", "b", "c", "c"] and list(store.order()) == [0, 1, 4, 2, 3]


def test_paired_takes_the_examples_both_columns_have_in_sorted_id_order() -> None:
    store, values = ExampleIds(), PerExample()
    for i, eid in enumerate(["e", "b", "d", "a", "c"]):
        pos = store.add(eid)
        values.add(pos, {"x": float(i), **({"y": 10.0 * i} if i != 2 else {})})
    x, y = values.column("x", store), values.column("y", store)
    va, vb = paired(x, y)
    assert list(va) == [3.0, 1.0, 4.0, 0.0] and list(vb) == [30.0, 10.0, 40.0, 0.0]  # a b c e
    assert paired(x, x) == (x.vals, x.vals)
    d = stats.paired_diff(x, y, n_boot=50, seed=1)
    assert d == stats.paired_diff(dict(x), dict(y), n_boot=50, seed=1) and d["n"] == 4


def _reference_means(values: list[float], n_boot: int, seed: int) -> list[float]:
    """The bootstrap as stats' docstring defines it, one resample at a time: n indexes from PCG64(seed)'s
    `integers(0, n)`, and the exact mean of the values they pick."""
    rng = np.random.Generator(np.random.PCG64(seed))
    n = len(values)
    return [math.fsum(values[i] for i in rng.integers(0, n, size=n, dtype=np.uint32)) / n for _ in range(n_boot)]


def test_resample_means_are_the_reference_bootstrap() -> None:
    rng = random.Random(5)
    values = [rng.random() for _ in range(100)]
    want = _reference_means(values, 40, 11)
    for given in (values, array("d", values), np.array(values)):
        assert stats.resample_means(given, 40, 11).tolist() == pytest.approx(want, rel=1e-13, abs=0)
    assert stats.resample_means(values, 40, 12).tolist() != pytest.approx(want)  # the seed matters


@pytest.mark.parametrize("n", [1, 3, 100, 1001])
def test_chunks_of_resamples_change_nothing(n: int) -> None:
    """Resamples are drawn a chunk at a time (about `chunk` indexes each, at least one resample): whatever the
    chunk, the same indexes and the same means to the bit."""
    rng = random.Random(n)
    values = [rng.uniform(-2, 3) for _ in range(n)]
    whole = np.concatenate(list(stats.resample_indexes(n, 37, 4, chunk=n * 37)))
    means = stats.resample_means(values, 37, 4, chunk=n * 37)
    for chunk in (1, 7, 3 * n, 10 * n + 1, stats.CHUNK):
        assert np.array_equal(np.concatenate(list(stats.resample_indexes(n, 37, 4, chunk=chunk))), whole), chunk
        assert np.array_equal(stats.resample_means(values, 37, 4, chunk=chunk), means), chunk


def test_few_distinct_values_resample_as_counts_per_value() -> None:
    """0/1 scores and the like: a resample is how many of its n draws hit each distinct value (in order of first
    appearance), drawn as one multinomial per resample from the PCG64 stream."""
    values = [1.0, 0.0, 0.0, 1.0, 0.5] * 20  # 1.0 x 40, 0.0 x 40, 0.5 x 20
    counts = np.random.Generator(np.random.PCG64(3)).multinomial(100, [0.4, 0.4, 0.2], size=25)
    want = [(c[0] + c[2] * 0.5) / 100 for c in counts.tolist()]
    assert stats.resample_means(values, 25, 3).tolist() == pytest.approx(want, rel=1e-13, abs=0)


def test_counts_per_value_and_index_draws_are_the_same_bootstrap() -> None:
    """Both ways of drawing a resample give one distribution: on 0/1 values, the spread of the resample means
    is sqrt(p (1 - p) / n) either way."""
    values = [float(i % 10 < 3) for i in range(2000)]  # p = 0.3
    want = math.sqrt(0.3 * 0.7 / 2000)
    by_counts = stats.resample_means(values, 2000, 5)
    by_index = stats._index_means(np.array(values) - 0.3, 2000, 5, stats.CHUNK) + 0.3
    for means in (by_counts, by_index):
        assert abs(float(np.mean(means)) - 0.3) < 0.1 * want
        assert float(np.std(means)) == pytest.approx(want, rel=0.08)


def test_a_constant_sample_resamples_to_its_mean_exactly_and_0_1_scores_to_exact_fractions() -> None:
    for c in (0.1, 1 / 3, -7.25):
        for n in (3, 1000):  # drawn as indexes, then as counts per value
            assert set(stats.resample_means([c] * n, 30, 1).tolist()) == {math.fsum([c] * n) / n}
    means = stats.resample_means([float(i % 7 < 2) for i in range(60)], 50, 1).tolist()
    assert means == [round(m * 60) / 60 for m in means]
