"""The examples preflight's validating pass read, kept for the run in an anonymous temporary file (plan 012), so
that the run does not read and normalize the dataset files a second time: reading a chunk of examples back (as
MessagePack, codec.pack) costs a fraction of parsing them. Memory stays flat: CHUNK examples are held while they are
written or read.

Each iteration reads the file through its own offsets (os.pread), so two iterations never share a file position.
An example that cannot be packed (a value from a reader that MessagePack does not know) turns the spool off: the
run then reads the files again, as it did before the spool.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

from .. import codec
from ..types import Example

CHUNK = 1000  # examples a write and a read


class ExampleSpool:
    """Examples appended in input order (`add`), read back in that order by every iteration (after `seal`)."""

    def __init__(self) -> None:
        self._fh = tempfile.TemporaryFile(prefix="rubricrun-examples-")  # noqa: SIM115 (closed with the spool)
        self._chunk: list[Example] = []
        self._spans: list[tuple[int, int]] = []  # (offset, size) of each chunk
        self._end = 0
        self.ok = True  # False: something could not be packed; read the dataset files instead

    def add(self, example: Example) -> None:
        if not self.ok:
            return
        self._chunk.append(example)
        if len(self._chunk) >= CHUNK:
            self._dump()

    def _dump(self) -> None:
        if not self._chunk or not self.ok:
            return
        try:
            data = codec.pack(self._chunk)
        except Exception:  # noqa: BLE001 - a value MessagePack does not know: fall back to the files
            self.close()
            return
        finally:
            self._chunk = []
        self._fh.write(data)
        self._spans.append((self._end, len(data)))
        self._end += len(data)

    def seal(self) -> None:
        """Every example was added: write the last chunk out."""
        self._dump()
        if self.ok:
            self._fh.flush()

    def __iter__(self) -> Iterator[Example]:
        fd = self._fh.fileno()
        for offset, size in self._spans:
            yield from codec.unpack(os.pread(fd, size, offset), list[Example])

    def close(self) -> None:
        self.ok = False
        self._chunk, self._spans = [], []
        self._fh.close()
