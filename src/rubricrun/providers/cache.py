"""Hash-keyed disk cache wrapped around a provider (diskcache, SQLite underneath, through its public API only).

The key is sha256 of canonical JSON of exactly the fields that change the output (model, api_base, messages, params,
response schema, and the sample index when it is not 0); retries, timeouts, concurrency and keys are left out. Only
successes are stored, with their usage, so a rerun pays for nothing twice and a crashed run resumes where it stopped.

A stored reply is JSON bytes with its format inside (codec.StoredReply), kept in the database itself. The store
trusts no row it reads: anything else under a key (a pickled object, an older version's row, garbage, a row naming
a file) is a miss, overwritten by the next store, and is never run or followed (`_JsonDisk`). docs/reliability.md
says what a cache folder from elsewhere can and cannot do.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import diskcache

from ..codec import CACHE_FORMAT, read_reply, stored_reply
from ..errors import RubricrunError
from ..types import LLMRequest, LLMResponse
from .base import BaseProvider, cache_key
from .trace import Tracer

MISS_STREAK = 16  # try_cached misses in a row after which it looks once in this many calls (plan 020)
_IN_DB = 1 << 62  # diskcache's file threshold: every value stays in the database (no value files to read or delete)


class _JsonDisk(diskcache.Disk):
    """diskcache's `Disk` (its documented extension point, passed as `disk=`) for a store of bytes that trusts no
    row: `fetch` hands back raw bytes and nothing else (diskcache's own would unpickle a pickled row, or read the
    file a row names: both are a miss here), `remove` deletes nothing outside the cache folder, and a key stored
    pickled is never unpickled. Settings a folder's database holds do not reach it."""

    def __init__(self, directory: str, **_settings: Any) -> None:
        super().__init__(directory, min_file_size=_IN_DB)
        self._root = os.path.realpath(directory)

    def get(self, key: Any, raw: bool) -> Any:
        return super().get(key, raw) if raw else bytes(key)  # (our keys are str: stored raw)

    def store(self, value: Any, read: bool, key: Any = diskcache.UNKNOWN) -> tuple[int, int, str | None, Any]:
        if type(value) is not bytes or read:
            raise TypeError("the cache stores bytes")
        return super().store(value, read, key)

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> Any:
        if mode != diskcache.core.MODE_RAW or read:
            raise OSError("not a row of this cache")  # Cache.get reads an OSError as a miss
        return value

    def remove(self, file_path: str) -> None:
        path = os.path.realpath(os.path.join(self._root, file_path))
        if path.startswith(self._root + os.sep) and os.path.dirname(path) != self._root:  # a value file's place
            super().remove(path)


# Every setting a cache folder's own database could hold, as this store wants it (a folder from elsewhere may hold
# others). Every pool thread gets its own SQLite connection: with diskcache's default 64 MB mmap each one maps the
# whole file (measured at 100k cached calls, 64 threads: peak RSS 3.3 GB; with these settings 0.6 GB).
_SETTINGS = {
    **diskcache.DEFAULT_SETTINGS,
    "statistics": 0,
    "tag_index": 0,
    "eviction_policy": "none",
    "size_limit": 2**40,
    "sqlite_mmap_size": 0,
    "sqlite_cache_size": 256,
    "sqlite_journal_mode": "wal",
    "disk_min_file_size": _IN_DB,
}


class ResponseCache:
    """The store itself; shared by every thread (and safe across processes)."""

    def __init__(self, directory: str | Path):
        try:
            Path(directory).mkdir(parents=True, exist_ok=True)
            self._cache = diskcache.Cache(str(directory), disk=_JsonDisk, **_SETTINGS)
        except Exception as exc:  # noqa: BLE001 - sqlite3/OSError: unwritable dir, full disk, not a database
            raise RubricrunError(f"cache directory {directory}: cannot open ({exc})") from None
        self.directory = str(directory)
        self._pending: deque[list[Any]] = deque()  # replies waiting for a commit (set)
        self._writing = threading.Lock()  # held by the writer committing a group

    def get(self, key: str) -> LLMResponse | None:
        """The stored reply; None when there is none of this format."""
        return read_reply(self._cache.get(key))

    def fresh_many(self, keys: list[str]) -> set[str]:
        """The keys among `keys` stored in this format (--validate asks for every example's key, a chunk at a
        time): by the tag each row is stored with, one `get` a key, the chunk in one transaction (SQLite then takes
        its locks once, not once a key: about half the cost; writers elsewhere wait those few milliseconds)."""
        cache = self._cache
        if not keys or not len(cache):  # an empty cache (a first --validate) answers nothing
            return set()
        with cache.transact():
            return {key for key in keys if cache.get(key, tag=True)[1] == CACHE_FORMAT}

    def set(self, key: str, response: LLMResponse) -> None:
        """Stored when it returns. Group commit (plan 020): the first writer to take the lock stores every reply
        queued meanwhile in one transaction, its own included; each of their writers then returns, or raises if it
        failed. One SQLite lock and commit for many replies, and no writer asleep in SQLite's busy wait."""
        mine = [key, stored_reply(response), None]  # key, value, then True (stored) or why not
        self._pending.append(mine)
        with self._writing:
            if mine[2] is None:  # nobody took it yet
                group = [self._pending.popleft() for _ in range(len(self._pending))]
                done = self._write(lambda: [self._cache.set(k, v, tag=CACHE_FORMAT) for k, v, _ in group])
                for item in group:
                    item[2] = done
        if mine[2] is not True:
            raise RubricrunError(f"cache directory {self.directory}: cannot write ({mine[2]})")

    def delete(self, key: str) -> None:
        if (done := self._write(lambda: self._cache.delete(key))) is not True:
            raise RubricrunError(f"cache directory {self.directory}: cannot write ({done})")

    def _write(self, op: Callable[[], Any]) -> Any:
        """op() in a transaction: True, or what went wrong."""
        try:
            with self._cache.transact():
                op()
        except Exception as exc:  # noqa: BLE001
            return exc
        return True

    def close(self) -> None:
        """The end of a run: every row written into cache.db itself (a WAL checkpoint, through diskcache's PRAGMA
        setting), so that the database file alone holds them; then this thread's connection is closed."""
        try:
            self._cache.reset("sqlite_wal_checkpoint", "TRUNCATE", update=False)
        except Exception:  # noqa: BLE001 - busy (another process writes) or read-only: the -wal file keeps the rows
            pass
        self._cache.close()


class CacheMiss(Exception):
    """Raised inside `CachingProvider.try_cached` at the first request the cache cannot answer. Neither a NotDone
    nor a ProviderError, so no caller on the way mistakes it for a row's outcome."""


class _Attempt:
    """One `try_cached` call's hits and forgets, traced and applied only once the attempt completes."""

    __slots__ = ("hits", "forgets", "sealed")

    def __init__(self) -> None:
        self.hits: list[tuple[LLMRequest, str, LLMResponse]] = []
        self.forgets: list[str] = []
        self.sealed = False  # a nested attempt began: this one is past its calls, and a miss now is a bug


class CachingProvider(BaseProvider):
    """Returns the stored response when there is one; otherwise calls through and stores a success.
    Two threads asking for the same key at once make one call: the second waits for the first."""

    def __init__(self, inner: BaseProvider, cache: ResponseCache | None, tracer: Tracer, *, passes: bool = False):
        self.inner, self.cache, self.tracer = inner, cache, tracer
        self._lock = threading.Lock()
        self._inflight: dict[str, threading.Lock] = {}  # key -> its owner's gate, held until the owner is done
        # A run in passes (batch jobs, providers/batch.py) asks again in every pass for what an earlier pass got. A
        # hit is traced only for a task beyond the most that asked for its key in one pass so far (a reply paid or
        # delivered counts as its first ask), so the trace and the summary read as an online run's.
        self.passes = passes
        self._asked: dict[str, int] = {}  # key -> tasks that asked for it in this pass
        self._most: dict[str, int] = {}  # key -> the most tasks that asked for it in one pass
        self._local = threading.local()  # .attempt: the thread's try_cached in progress, if any
        self._tries = self._misses = 0  # try_cached calls; misses since its last hit

    def try_cached(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run `fn(*args)` on this thread with every call answered from the cache alone: True when it completed
        (its hits are then traced and its forgets applied, as if made through `generate`), False at the first miss
        (nothing traced or forgotten; the caller hands fn to a pool, where it runs afresh). A cache hit thus never
        waits for a pool thread or a lock. fn must make its calls before anything it starts itself: a nested
        try_cached seals the attempt around it. Runs in passes (batch jobs) keep their bookkeeping in generate."""
        if self.cache is None or self.passes:
            return False
        self._tries += 1  # after MISS_STREAK misses in a row (a cold cache) only every MISS_STREAK-th call looks
        if self._misses >= MISS_STREAK and self._tries % MISS_STREAK:
            return False
        local = self._local
        parent: _Attempt | None = getattr(local, "attempt", None)
        if parent is not None:
            self._commit(parent)
            parent.sealed = True
        local.attempt = mine = _Attempt()
        try:
            fn(*args)
        except CacheMiss:
            self._misses += 1
            return False
        finally:
            local.attempt = parent
        self._commit(mine)
        self._misses = 0
        return True

    def _commit(self, attempt: _Attempt) -> None:
        for request, key, hit in attempt.hits:
            self._trace_hit(request, key, hit)
        for key in attempt.forgets:
            self.cache.delete(key)  # type: ignore[union-attr]
        attempt.hits.clear()
        attempt.forgets.clear()

    def _trace_hit(self, request: LLMRequest, key: str, hit: LLMResponse) -> None:
        self.tracer.emit(role=request.role, model=request.model, key=key, cache_hit=True, attempt=0, latency_ms=0.0,
                         status="ok", usage=hit.usage)  # fmt: skip

    def _cached_only(self, attempt: _Attempt, request: LLMRequest) -> LLMResponse:
        key = cache_key(request)
        hit = self.cache.get(key)  # type: ignore[union-attr]
        if hit is None:
            if attempt.sealed:
                raise RuntimeError(f"a call after nested work in try_cached ({request.role} {request.model})")
            raise CacheMiss(key)
        attempt.hits.append((request, key, hit))
        return hit

    def deliver(self, key: str, response: LLMResponse) -> None:
        """Store a reply made outside this stack (a batch job's line, traced by its maker) as a paid reply."""
        assert self.cache is not None
        self.cache.set(key, response)
        with self._lock:
            self._most[key] = max(self._most.get(key, 0), 1)

    def new_pass(self) -> None:
        with self._lock:
            self._asked.clear()

    def _ask(self, key: str, paid: bool) -> bool:
        """Counts a task asking for `key` in this pass; whether its hit is traced (see __init__)."""
        if not self.passes:
            return True
        with self._lock:
            n = self._asked[key] = 1 if paid else self._asked.get(key, 0) + 1
            traced = n > self._most.get(key, 0)
            if traced:
                self._most[key] = n
        return traced

    def generate(self, request: LLMRequest) -> LLMResponse:
        if self.cache is None:
            return self.inner.generate(request)
        attempt = getattr(self._local, "attempt", None)
        if attempt is not None:
            return self._cached_only(attempt, request)
        key = cache_key(request)
        while True:  # own the key (one asker at a time), then look: a miss is read once, by its owner
            with self._lock:
                gate = self._inflight.get(key)
                if gate is None:
                    gate = self._inflight[key] = threading.Lock()
                    gate.acquire()  # a C call each way (an Event costs a Condition per paid call: plan 020)
                    break
            with gate:  # an owner before us finished (or failed): look again
                pass
        try:
            hit = self.cache.get(key)
            if hit is not None:
                if self._ask(key, paid=False):
                    self._trace_hit(request, key, hit)
                return hit
            response = self.inner.generate(request)
            self.cache.set(key, response)
            self._ask(key, paid=True)
            return response
        finally:
            with self._lock:
                self._inflight.pop(key, None)
            gate.release()

    def forget(self, request: LLMRequest) -> None:
        """Drop the stored reply to `request`: the caller could not use it, and a rerun must not replay it."""
        if self.cache is None:
            return
        attempt = getattr(self._local, "attempt", None)
        if attempt is not None:  # applied if the attempt completes; a pool rerun of it forgets for itself
            attempt.forgets.append(cache_key(request))
        else:
            self.cache.delete(cache_key(request))
