"""Per-example values kept compactly for the summary's statistics: one float per key and example in typed arrays by
the example's position, the ids as UTF-8 in one buffer: a million examples cost a few tens of MB (.agent/plans/
009-limits.md, item 3). Columns come back as numpy arrays in sorted example-id order (bootstraps draw as ever)."""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterator, Mapping

import numpy as np

_RUN = 1 << 16  # ids sorted at a time when the sorted order is computed (then merged)
_POS = "I"  # positions and indexes: 4 bytes each, so a run holds at most 2**32 - 1 examples


def _np(a: array) -> np.ndarray:
    """A numpy view of a typed array (same item type). While the view lives, the array cannot grow."""
    return np.frombuffer(a, dtype=a.typecode) if len(a) else np.empty(0, dtype=a.typecode)


class ExampleIds:
    """Example ids by position, stored as UTF-8 in one bytearray with their end offsets; their sorted order (and
    each position's rank in it) is computed once, when first asked. UTF-8 bytes compare as the strings' code points
    do, so sorting the bytes is sorting the ids."""

    __slots__ = ("_blob", "_ends", "_last", "_order", "_rank", "_sorted")

    def __init__(self) -> None:
        self._blob = bytearray()
        self._ends = array("I")  # where each id ends in _blob ("q" once _blob passes 4 GB)
        self._last = b""
        self._sorted = True  # every id so far is greater than the one before
        self._order: array | None = None
        self._rank: np.ndarray | None = None

    def add(self, eid: str) -> int:
        key = eid.encode("utf-8", "surrogatepass")
        if self._ends and key <= self._last:
            self._sorted = False
        self._last = key
        self._blob += key
        if len(self._blob) >= 2**32 and self._ends.typecode == "I":
            self._ends = array("q", self._ends)
        self._ends.append(len(self._blob))
        self._order = self._rank = None
        return len(self._ends) - 1

    def __len__(self) -> int:
        return len(self._ends)

    def key(self, pos: int) -> bytes:
        """The id at `pos` as UTF-8 bytes (what the sorted order compares)."""
        return bytes(self._blob[self._ends[pos - 1] if pos else 0 : self._ends[pos]])

    def __getitem__(self, pos: int) -> str:
        return self.key(pos).decode("utf-8", "surrogatepass")

    def order(self) -> array | None:
        """The positions in sorted id order (ties in position order); None when the ids came sorted (the order is
        the positions themselves). Sorted in runs of 65,536 ids, then merged: no object per id stays alive."""
        if self._sorted:
            return None
        if self._order is None:
            n = len(self)
            runs = [array(_POS, sorted(range(lo, min(n, lo + _RUN)), key=self.key)) for lo in range(0, n, _RUN)]
            order = array(_POS)
            order.extend(p for _, p in heapq.merge(*(((self.key(p), p) for p in run) for run in runs)))
            self._order = order
        return self._order

    def rank(self) -> np.ndarray | None:
        """Each position's rank in sorted id order (uint32); None when the ids came sorted (the rank is the
        position)."""
        order = self.order()
        if order is None:
            return None
        if self._rank is None:
            rank = np.empty(len(order), dtype=_POS)
            rank[_np(order)] = np.arange(len(order), dtype=_POS)
            self._rank = rank
        return self._rank


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
                col[0] = array(_POS, range(col[2], col[2] + len(col[1])))
            if col[0] is not None:
                col[0].append(pos)
            col[1].append(v)

    def column(self, key: str, ids: ExampleIds) -> ByExample:
        """{example id: value} of `key`, in sorted example-id order. When the ids came sorted the column's arrays
        are views of the stored ones (no copy at a million examples): read columns after the last `add`."""
        col = self.cols.get(key)
        if col is None:
            return ByExample(ids, np.empty(0, dtype=_POS), np.empty(0))
        pos_arr, vals, start = col
        order = ids.order()
        if order is None:  # positions are appended in increasing order: already sorted
            pos = _np(pos_arr) if pos_arr is not None else np.arange(start, start + len(vals), dtype=_POS)
            return ByExample(ids, pos, _np(vals))
        if pos_arr is None:  # consecutive positions start..start+m: the sorted order, restricted to them
            o = _np(order)
            pos = o if start == 0 and len(vals) == len(o) else o[(o >= start) & (o < start + len(vals))]
            return ByExample(ids, pos, _np(vals)[pos if start == 0 else pos - start])
        rank = ids.rank()
        assert rank is not None
        ks = np.argsort(rank[_np(pos_arr)])  # ranks are distinct: no ties to order
        return ByExample(ids, _np(pos_arr)[ks], _np(vals)[ks])

    def values(self, key: str, ids: ExampleIds) -> np.ndarray:
        """The values of `key` in sorted example-id order (a float64 array)."""
        return self.column(key, ids).vals

    def groups(self, prefix: str, ids: ExampleIds) -> dict[str, np.ndarray]:
        """{group: values in sorted example-id order} of the keys `prefix` + group."""
        return {k[len(prefix) :]: self.values(k, ids) for k in self.cols if k.startswith(prefix)}


class ByExample(Mapping[str, float]):
    """{example id: value} as the ids' store, the positions in sorted id order and their values (numpy arrays).
    Iterating the ids decodes them one at a time; the dict is built only when a value is looked up by id (a
    comparison of two runs). Two of them over the same store pair up by position (`paired`), without ids or a dict.
    Values come out as Python floats (a memoryview of the array yields them one at a time)."""

    __slots__ = ("_dict", "ids", "pos", "vals")

    def __init__(self, ids: ExampleIds, pos: np.ndarray, vals: np.ndarray) -> None:
        self.ids, self.pos, self.vals = ids, np.asarray(pos, dtype=_POS), np.asarray(vals, dtype=np.float64)
        self._dict: dict[str, float] | None = None

    def __getitem__(self, eid: str) -> float:
        if self._dict is None:
            self._dict = dict(self.items())
        return self._dict[eid]

    def __iter__(self) -> Iterator[str]:
        return map(self.ids.__getitem__, memoryview(self.pos))

    def __len__(self) -> int:
        return len(self.pos)

    def values(self) -> np.ndarray:  # type: ignore[override]
        return self.vals

    def items(self) -> Iterator[tuple[str, float]]:  # type: ignore[override]
        return zip(self, memoryview(self.vals), strict=True)


def paired(a: ByExample, b: ByExample) -> tuple[np.ndarray, np.ndarray]:
    """The values of the examples both have, in sorted id order: (a's, b's). `a` and `b` share one id store."""
    if np.array_equal(a.pos, b.pos):
        return a.vals, b.vals
    rank = a.ids.rank()
    ra, rb = (a.pos, b.pos) if rank is None else (rank[a.pos], rank[b.pos])
    _, ia, ib = np.intersect1d(ra, rb, assume_unique=True, return_indices=True)
    return a.vals[ia], b.vals[ib]
