"""Per-example values kept compactly for the summary's statistics (results/metrics.py, results/summary.py).

The summary is computed example by example (one example's rows at a time) and aggregated at the end; what it keeps
per example is one float per key (headline, normalized, per-category, per-tag, ...) in typed arrays, aligned by the
example's position, never a row (.agent/plans/009-limits.md, item 3). The statistics read the values of a key in
sorted example-id order, as they always have (so bootstraps draw the same resamples).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from itertools import pairwise


class ExampleIds:
    """Example ids by position, and their rank in sorted id order (computed once, when first asked)."""

    __slots__ = ("_rank", "ids")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self._rank: array | None = None

    def add(self, eid: str) -> int:
        self.ids.append(eid)
        self._rank = None
        return len(self.ids) - 1

    def rank(self) -> array | None:
        """Each position's rank in sorted id order; None when the ids came sorted (the rank is the position)."""
        if self._rank is None:
            ids = self.ids
            if all(a < b for a, b in pairwise(ids)):
                self._rank = _SORTED
            else:
                rank = array("q", bytes(8 * len(ids)))
                for r, pos in enumerate(sorted(range(len(ids)), key=ids.__getitem__)):
                    rank[pos] = r
                self._rank = rank
        return None if self._rank is _SORTED else self._rank


_SORTED = array("q")  # ExampleIds.rank when the ids came sorted


class PerExample:
    """key -> (example positions, values): at most one value per example and key. The positions of a key whose
    examples are consecutive (the usual case: every example scored) are not stored, only where they start."""

    __slots__ = ("cols",)

    def __init__(self) -> None:
        self.cols: dict[str, list] = {}  # key -> [positions array, or None while consecutive; values; start]

    def add(self, pos: int, values: Mapping[str, float]) -> None:
        for k, v in values.items():
            col = self.cols.get(k)
            if col is None:
                col = self.cols[k] = [None, array("d"), pos]
            if col[0] is None and pos != col[2] + len(col[1]):
                col[0] = array("q", range(col[2], col[2] + len(col[1])))
            if col[0] is not None:
                col[0].append(pos)
            col[1].append(v)

    def column(self, key: str, ids: ExampleIds) -> tuple[list[str], list[float]]:
        """(example ids, values) of `key` in sorted example-id order."""
        col = self.cols.get(key)
        if col is None:
            return [], []
        vals = col[1]
        pos = col[0] if col[0] is not None else range(col[2], col[2] + len(vals))
        rank = ids.rank()
        if rank is None:  # positions are appended in increasing order: already sorted
            return [ids.ids[p] for p in pos], vals.tolist()
        order = sorted(range(len(pos)), key=lambda k: rank[pos[k]])
        return [ids.ids[pos[k]] for k in order], [vals[k] for k in order]

    def values(self, key: str, ids: ExampleIds) -> list[float]:
        return self.column(key, ids)[1]

    def groups(self, prefix: str, ids: ExampleIds) -> dict[str, list[float]]:
        """{group: values in sorted example-id order} of the keys `prefix` + group."""
        return {k[len(prefix) :]: self.values(k, ids) for k in self.cols if k.startswith(prefix)}

    def mapping(self, key: str, ids: ExampleIds) -> dict[str, float]:
        eids, vals = self.column(key, ids)
        return dict(zip(eids, vals, strict=True))


class ByExample(Mapping[str, float]):
    """{example id: value} over ids in sorted order and their values, the dict built only when a value is looked up
    by id (a paired comparison, a category mean); iterating the ids or the values needs no dict."""

    __slots__ = ("_dict", "_eids", "_values")

    def __init__(self, eids: list[str], values: list[float]) -> None:
        self._eids, self._values = eids, values
        self._dict: dict[str, float] | None = None

    def __getitem__(self, eid: str) -> float:
        if self._dict is None:
            self._dict = dict(zip(self._eids, self._values, strict=True))
        return self._dict[eid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._eids)

    def __len__(self) -> int:
        return len(self._eids)

    def values(self) -> list[float]:  # type: ignore[override]
        return list(self._values)
