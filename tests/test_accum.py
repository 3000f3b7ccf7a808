"""results/accum.py: per-example values in compact arrays, read back in sorted example-id order."""

from __future__ import annotations

import pytest

from rubricrun.results.accum import ByExample, ExampleIds, PerExample


@pytest.mark.parametrize("ids", [["a", "b", "c", "d"], ["c", "a", "d", "b"]])
def test_columns_come_back_in_sorted_id_order_with_the_values_exact(ids: list[str]) -> None:
    eids, values = ExampleIds(), PerExample()
    for i, eid in enumerate(ids):
        pos = eids.add(eid)
        values.add(pos, {"score": 0.1 * i, **({"tag:x": float(i)} if i % 2 else {})})
    want = sorted((eid, 0.1 * i) for i, eid in enumerate(ids))
    assert values.column("score", eids) == ([e for e, _ in want], [v for _, v in want])
    assert values.groups("tag:", eids) == {
        "x": [float(i) for _, i in sorted((e, i) for i, e in enumerate(ids) if i % 2)]
    }
    assert values.mapping("score", eids) == dict(want) and values.column("missing", eids) == ([], [])


def test_by_example_is_the_mapping_and_gives_values_without_building_it() -> None:
    m = ByExample(["a", "b"], [0.5, 1.0])
    assert m.values() == [0.5, 1.0] and list(m) == ["a", "b"] and m._dict is None
    assert m == {"a": 0.5, "b": 1.0} and m["b"] == 1.0 and len(m) == 2


def test_a_column_with_gaps_after_consecutive_examples_keeps_their_positions() -> None:
    eids, values = ExampleIds(), PerExample()
    for i, eid in enumerate(["d", "c", "b", "a", "e"]):
        pos = eids.add(eid)
        if i != 2:
            values.add(pos, {"score": float(i)})
    assert values.column("score", eids) == (["a", "c", "d", "e"], [3.0, 1.0, 0.0, 4.0])
