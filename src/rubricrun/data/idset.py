"""A set of 64-bit id hashes in one array, what the duplicate-id check keeps per example: an open-addressing table
kept at most half full, 16-32 bytes a hash against a Python set's 60 (plan 009). A hit is confirmed by the caller
(data/loaders.py reads the data again), so a stored value may stand for more than one hash: 0 (empty) is stored as 1.
"""

from __future__ import annotations

from array import array

_EMPTY = 0


class IdHashes:
    """add() and `in` over 64-bit ints (what hash() returns)."""

    __slots__ = ("_n", "_table")

    def __init__(self) -> None:
        self._table = array("q", bytes(8 * 1024))
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def _slot(self, h: int) -> int:
        """The slot holding `h`, or the empty slot where it would go."""
        table = self._table
        mask = len(table) - 1
        i = (h ^ (h >> 29)) & mask  # the low bits of a str hash are well mixed already; fold the high ones in too
        while table[i] != _EMPTY and table[i] != h:
            i = (i + 1) & mask
        return i

    def __contains__(self, h: int) -> bool:
        h = h or 1
        return self._table[self._slot(h)] == h

    def add(self, h: int) -> None:
        h = h or 1
        i = self._slot(h)
        if self._table[i] == h:
            return
        self._table[i] = h
        self._n += 1
        if 2 * self._n > len(self._table):
            old, self._table = self._table, array("q", bytes(16 * len(self._table)))
            for v in old:
                if v != _EMPTY:
                    self._table[self._slot(v)] = v
