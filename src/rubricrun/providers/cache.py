"""Hash-keyed disk cache wrapped around a provider (diskcache, SQLite underneath).

The key is sha256 of canonical JSON of exactly the fields that change the output (model, api_base,
messages, params, response schema, and the sample index when it is not 0). Retries, timeouts,
concurrency and keys are left out. Only successes are stored, with their usage, so a rerun of the
same calls pays for nothing twice and a crashed run resumes where it stopped. A caller that cannot use a
stored reply (a judge reply it cannot read) calls `forget(request)`, so the next run asks again.
"""

from __future__ import annotations

import hashlib
import pickle
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import RubricrunError
from ..types import LLMRequest, LLMResponse, Usage, json_encoder, to_row
from .base import BaseProvider
from .trace import Tracer

CACHE_FORMAT = 1  # bump when the stored shape changes

# diskcache's `Cache.get` query for a str key (stored raw); no row of ours has an expiry, the test is kept as it is.
_GET = "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1 AND (expire_time IS NULL OR expire_time > ?)"
_MODE_PICKLE = 4  # diskcache.core.MODE_PICKLE: a value stored pickled in the row (ours are; checked in a test)
FRESH_QUERY_KEYS = 500  # keys per query of fresh_many (under SQLite's oldest limit of 999 parameters)


# Built once (json.dumps with keywords builds an encoder per call, JSONEncoder.encode a C encoder per call).
canonical_json = json_encoder(str, sort_keys=True, separators=(",", ":"))


def cache_key(request: LLMRequest) -> str:
    """The request's key, computed once per request object (the task, the cache and the retry layer all ask)."""
    key = request.__dict__.get("_cache_key")
    if key is None:
        key = hashlib.sha256(canonical_json(request.cache_fields()).encode("utf-8")).hexdigest()
        object.__setattr__(request, "_cache_key", key)  # frozen dataclass: memo outside its fields
    return key


def _from_row(row: dict[str, Any]) -> LLMResponse:
    u = row.get("usage") or {}
    return LLMResponse(
        text=row["text"],
        finish_reason=row.get("finish_reason"),
        usage=Usage(**u),
        model=row.get("model"),
        cost_usd=row.get("cost_usd"),
        cache_hit=True,
        latency_ms=0.0,
        reasoning=row.get("reasoning"),  # absent from rows cached before it existed
    )


class ResponseCache:
    """The store itself; shared by every thread (and safe across processes)."""

    def __init__(self, directory: str | Path):
        import diskcache

        try:
            Path(directory).mkdir(parents=True, exist_ok=True)
            # Every pool thread gets its own SQLite connection: with diskcache's default 64 MB mmap each one maps the
            # whole file (measured at 100k cached calls, 64 threads: peak RSS 3.3 GB; with these settings 0.6 GB).
            self._cache = diskcache.Cache(
                str(directory),
                size_limit=2**40,
                eviction_policy="none",
                sqlite_mmap_size=0,
                sqlite_cache_size=256,
            )
        except Exception as exc:  # noqa: BLE001 - sqlite3/OSError: unwritable dir, full disk
            raise RubricrunError(f"cache directory {directory}: cannot open ({exc})") from None
        self.directory = str(directory)
        self._db = str(Path(directory) / diskcache.core.DBNAME)
        self._local = threading.local()  # .con: the thread's read connection (`_reader`)
        self._plain_disk = type(self._cache.disk) is diskcache.Disk  # its pickled rows read as `_stored_row` reads

    def _reader(self) -> sqlite3.Connection:
        """The calling thread's read connection, set up as diskcache sets up its own (page cache, no mmap)."""
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = sqlite3.connect(self._db, timeout=60.0, isolation_level=None)
            con.execute("PRAGMA cache_size = 256")
            con.execute("PRAGMA mmap_size = 0")
        return con

    def get(self, key: str) -> LLMResponse | None:
        """The stored reply: diskcache's own `get` query for a str key, without its per-call Python (a warm rerun
        makes one per call: 9 us against 11-14, measured on 22,000 keys)."""
        found = self._reader().execute(_GET, (key, time.time())).fetchone()
        row = self._stored_row(*found) if found is not None else None
        return _from_row(row) if row is not None else None

    def __contains__(self, key: str) -> bool:
        return key in self._cache

    def fresh_many(self, keys: list[str]) -> set[str]:
        """The keys among `keys` that `get` would answer (a stored row of this format), without building responses,
        FRESH_QUERY_KEYS a query (--validate asks for every example's key: one SELECT per key cost more than the
        reading). diskcache's own `get` for many keys (str keys are stored raw; we set no expiry). A row stored
        with its format as tag is not read at all; one stored before tags were written is read for its `_v`."""
        out: set[str] = set()
        for lo in range(0, len(keys), FRESH_QUERY_KEYS):
            part = keys[lo : lo + FRESH_QUERY_KEYS]
            marks = ",".join("?" * len(part))
            select = f"SELECT key, tag FROM Cache WHERE raw = 1 AND key IN ({marks})"
            untagged = []
            for key, tag in self._reader().execute(select, part).fetchall():
                if tag == CACHE_FORMAT:
                    out.add(key)
                elif tag is None:
                    untagged.append(key)
            out.update(self._untagged_fresh(untagged))
        return out

    def _untagged_fresh(self, keys: list[str]) -> list[str]:
        """Of rows stored before tags were written, those of this format (each is read for its `_v`)."""
        if not keys:
            return []
        select = f"SELECT key, mode, filename, value FROM Cache WHERE raw = 1 AND key IN ({','.join('?' * len(keys))})"
        rows = self._reader().execute(select, keys).fetchall()
        return [key for key, *stored in rows if self._stored_row(*stored) is not None]

    def _stored_row(self, mode: int, filename: str | None, value: Any) -> dict[str, Any] | None:
        """A stored row of this format (diskcache's columns read back as its `get` does), else None."""
        try:
            if mode == _MODE_PICKLE and value is not None and self._plain_disk:  # what Disk.fetch does, less a BytesIO
                row = pickle.loads(value)
            else:
                row = self._cache.disk.fetch(mode, filename, value, False)
        except OSError:  # its file was deleted meanwhile
            return None
        return row if isinstance(row, dict) and row.get("_v") == CACHE_FORMAT else None

    def set(self, key: str, response: LLMResponse) -> None:
        row = to_row(response)
        row["_v"] = CACHE_FORMAT
        row.pop("cache_hit", None)
        row.pop("deployment", None)  # which server answered is the trace's business, not the reply's
        row.pop("worker", None)  # so is which process made the attempt
        try:
            self._cache.set(key, row, tag=CACHE_FORMAT)  # the tag: fresh_many knows the format without a read
        except Exception as exc:  # noqa: BLE001
            raise RubricrunError(f"cache directory {self.directory}: cannot write ({exc})") from None

    def delete(self, key: str) -> None:
        try:
            self._cache.delete(key)
        except Exception as exc:  # noqa: BLE001
            raise RubricrunError(f"cache directory {self.directory}: cannot write ({exc})") from None

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:  # this thread's; other threads' close with them
            con.close()
            self._local.con = None
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
        self._inflight: dict[str, threading.Event] = {}
        # A run in passes (batch jobs, providers/batch.py) asks again for what an earlier pass got: such a reply is
        # returned as it was first served (paid or a cache hit) and traced once, so the rows and the summary read
        # as an online run's. Key -> whether it was first served from the cache; and how many tasks asked for it
        # in this pass and at most in one pass (the second task to ask for a key reads a hit, as it would online).
        self.seen: dict[str, bool] | None = {} if passes else None
        self._asked: dict[str, int] = {}
        self._most_asked: dict[str, int] = {}
        self._local = threading.local()  # .attempt: the thread's try_cached in progress, if any

    def try_cached(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run `fn(*args)` on this thread with every call answered from the cache alone: True when it completed
        (its hits are then traced and its forgets applied, as if made through `generate`), False at the first miss
        (nothing traced or forgotten; the caller hands fn to a pool, where it runs afresh). A cache hit thus never
        waits for a pool thread or a lock. fn must make its calls before anything it starts itself: a nested
        try_cached seals the attempt around it. Runs in passes (batch jobs) keep their bookkeeping in generate."""
        if self.cache is None or self.seen is not None:
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
            return False
        finally:
            local.attempt = parent
        self._commit(mine)
        return True

    def _commit(self, attempt: _Attempt) -> None:
        for request, key, hit in attempt.hits:
            self._trace_hit(request, key, hit)
        for key in attempt.forgets:
            self.cache.delete(key)  # type: ignore[union-attr]
        attempt.hits.clear()
        attempt.forgets.clear()

    def _trace_hit(self, request: LLMRequest, key: str, hit: LLMResponse) -> None:
        self.tracer.emit(
            role=request.role,
            model=request.model,
            key=key,
            cache_hit=True,
            attempt=0,
            latency_ms=0.0,
            status="ok",
            usage=hit.usage,
        )

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
            self.seen[key] = False  # type: ignore[index]

    def new_pass(self) -> None:
        with self._lock:
            self._asked.clear()

    def _again(self, key: str, hit: LLMResponse) -> tuple[LLMResponse, bool]:
        """A reply served in an earlier pass or to an earlier task: as it was first served, and whether to trace it
        as a new cache hit (a task asking for a key that more tasks ask for than in any pass before)."""
        with self._lock:
            n = self._asked[key] = self._asked.get(key, 0) + 1
            if n == 1:
                return replace(hit, cache_hit=self.seen[key]), False  # type: ignore[index]
            new = n > self._most_asked.get(key, 1)
            if new:
                self._most_asked[key] = n
        return hit, new

    def generate(self, request: LLMRequest) -> LLMResponse:
        if self.cache is None:
            return self.inner.generate(request)
        attempt = getattr(self._local, "attempt", None)
        if attempt is not None:
            return self._cached_only(attempt, request)
        key = cache_key(request)
        while True:
            hit = self.cache.get(key)
            traced = True
            if hit is not None and self.seen is not None:
                with self._lock:
                    first = key not in self.seen
                    if first:
                        self.seen[key], self._asked[key] = True, 1
                if not first:
                    hit, traced = self._again(key, hit)
            if hit is not None and traced:
                self._trace_hit(request, key, hit)
            if hit is not None:
                return hit
            with self._lock:
                event = self._inflight.get(key)
                owner = event is None
                if owner:
                    event = self._inflight[key] = threading.Event()
            if owner:
                if self.cache.get(key) is None:
                    break
                # An owner before us stored the reply between our miss above and our taking over: read it as a hit.
                with self._lock:
                    self._inflight.pop(key, None)
                event.set()
                continue
            event.wait()  # the owner finished (or failed): look again
        try:
            response = self.inner.generate(request)
            self.cache.set(key, response)
            if self.seen is not None:
                with self._lock:
                    self.seen[key], self._asked[key] = False, 1
            return response
        finally:
            with self._lock:
                self._inflight.pop(key, None)
            event.set()

    def forget(self, request: LLMRequest) -> None:
        """Drop the stored reply to `request`: the caller could not use it, and a rerun must not replay it."""
        if self.cache is None:
            return
        attempt = getattr(self._local, "attempt", None)
        if attempt is not None:  # applied if the attempt completes; a pool rerun of it forgets for itself
            attempt.forgets.append(cache_key(request))
        else:
            self.cache.delete(cache_key(request))
