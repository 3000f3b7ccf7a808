"""A run's one spool: items of one type kept in an anonymous temporary file instead of memory (preflight's examples,
the tally's rows; plan 012), read back in order by any number of iterations, each through its own offsets (os.pread).
An item MessagePack cannot pack turns the spool off (`ok` False): its owner does without it or raises.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from .. import codec

T = TypeVar("T")
CHUNK = 1000  # items a write, unless the owner says otherwise
_READ = 4 << 20  # bytes of whole chunks read at a time


class Spool(Generic[T]):
    """Items of type `item` appended in order (`add`), read back in that order by every iteration."""

    def __init__(self, prefix: str, item: Any, chunk: int | None = None) -> None:
        self._fh = tempfile.TemporaryFile(prefix=prefix)  # noqa: SIM115 (closed with the spool)
        self._chunk_type = list[item]  # what a chunk reads back as
        self.chunk = CHUNK if chunk is None else chunk
        self._pending: list[T] = []
        self._ends = array("q")  # where each packed chunk ends in the file
        self.ok = True

    def add(self, item: T) -> None:
        if not self.ok:
            return
        self._pending.append(item)
        if len(self._pending) >= self.chunk:
            self._dump()

    def _dump(self) -> None:
        if not self._pending or not self.ok:
            return
        try:
            data = codec.pack(self._pending)
        except Exception:  # noqa: BLE001 - a value MessagePack does not know: the owner decides
            self.close()
            return
        finally:
            self._pending = []
        self._fh.write(data)
        self._ends.append((self._ends[-1] if self._ends else 0) + len(data))

    def seal(self) -> None:
        """Writes the last chunk out (the first iteration does it too): `ok` then says whether every item is kept."""
        self._dump()
        if self.ok:
            self._fh.flush()

    def __iter__(self) -> Iterator[T]:
        self.seal()
        if not self.ok:
            return
        fd, ends, chunk_type = self._fh.fileno(), self._ends, self._chunk_type
        start = i = 0
        while i < len(ends):
            j = i + 1  # chunks i..j-1, at least one, up to _READ bytes
            while j < len(ends) and ends[j] - start <= _READ:
                j += 1
            data = memoryview(os.pread(fd, ends[j - 1] - start, start))
            at = start
            for k in range(i, j):
                yield from codec.unpack(data[at - start : ends[k] - start], chunk_type)
                at = ends[k]
            start, i = ends[j - 1], j

    def close(self) -> None:
        self.ok = False
        self._pending, self._ends = [], array("q")
        self._fh.close()
