"""One SQLite index per run folder, kept in the viewer's own cache (never inside the run folder); ingest.py adds to it.

It holds no row text: each example and response is a byte span of its JSONL file, each example's judgments one or
more spans of judgments.jsonl (a run writes an example's judgments together), and pages read their rows back from
the files (rows.py). What the index adds is what a page needs to find rows fast on a run of 100,000 responses
(search.py asks it):

- `responses`: one row per response with its dataset, candidate, sample, turn, status, its normalized rubric score
  (results/scoring.py's `score_response`, as report.html rebuilds it from a run folder's judgments), its counts of
  met / not met / error verdicts, and its verdicts as two short strings the filters match with `instr`: `finals`
  (`,criterion:verdict,` per judgment) and `votes` (`,judge:verdict:criterion,` per judgment and per panel vote);
  names are small integers (`names`). A scan of 100,000 such strings is faster than an index over a million verdict
  rows, and costs nothing to build (ExecPlan 022, Decision Log);
- two contentless FTS5 tables for the text search: `fts_prompt`, each example's prompt, and `fts_resp`, each
  response's text, reasoning and error and, as a second document under the same rowid, its judges' explanations
  (one document per response, not per judgment: FTS5 pays per document).

`refresh` follows a growing run: it reads the bytes appended since the last call (whole lines only), and starts
afresh when the run was started again (its `.lock` was rewritten) or a file shrank.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from . import rows
from .ingest import Ingest, Writer

log = logging.getLogger("rubricrun")

SCHEMA = "1"
ROW_FILES = ("examples", "responses", "judgments")
KINDS = ("dataset", "candidate", "criterion", "judge")
FTS = "fts5(t, content='', detail=none, columnsize=0)"

_SQL = f"""
create table if not exists meta(key text primary key, value text);
create table if not exists files(name text primary key, offset integer not null, tail blob);
create table if not exists names(kind text not null, code integer not null, name text not null, label text,
  primary key(kind, name));
create table if not exists examples(n integer primary key, id text not null unique, dataset integer,
  off integer not null, len integer not null);
create table if not exists responses(n integer primary key, id text not null unique, ex integer, dataset integer,
  candidate integer, sample integer, turn integer, status integer, score real, met integer not null default 0,
  not_met integer not null default 0, errors integer not null default 0, judged integer not null default 0,
  finals text not null default '', votes text not null default '', off integer not null, len integer not null);
create table if not exists jspans(ex integer not null, off integer not null, len integer not null);
create virtual table if not exists fts_prompt using {FTS};
create virtual table if not exists fts_resp using {FTS};
"""
# Made after a refresh's rows are in (cheaper than kept up to date while a whole run is added), then kept.
_INDEXES = """
create index if not exists responses_asc on responses(score is null, score, n);
create index if not exists responses_desc on responses(score is null, score desc, n);
create index if not exists responses_ex on responses(ex);
create index if not exists jspans_ex on jspans(ex);
"""
_TABLES = ("files", "names", "examples", "responses", "jspans")
_FTS_TABLES = ("fts_prompt", "fts_resp")


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/rubricrun/viewer (else ~/.cache/rubricrun/viewer): the viewer's own, never a run folder."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rubricrun" / "viewer"


def db_path(run_dir: Path, cache: Path) -> Path:
    real = str(Path(run_dir).resolve())
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", Path(real).name)[:60]
    return cache / f"{safe}-{hashlib.sha256(real.encode()).hexdigest()[:16]}.sqlite3"


def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=60)
    con.execute("pragma journal_mode=wal")
    con.execute("pragma synchronous=off")  # a cache: an index torn by a power cut is rebuilt (RunIndex._open)
    con.execute("pragma temp_store=memory")
    return con


class RunIndex:
    """The index of one run folder. Thread-safe: one writer at a time (`refresh`), readers from a small pool."""

    def __init__(self, run_dir: Path, cache: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = db_path(self.run_dir, cache)
        self._lock = threading.Lock()
        self._pool: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._seen: tuple | None = None  # the run's start and its files' sizes when last indexed
        self._names: dict[str, dict[str, int]] = {}  # kind -> name -> its code in the index
        self._writer = self._open()

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            con = _connect(self.path)
            con.executescript(_SQL)
            version = con.execute("select value from meta where key = 'schema'").fetchone()
        except sqlite3.DatabaseError:  # a torn or foreign file in our cache: start it afresh
            version = con = None
        if version is not None and version[0] == SCHEMA:
            return con
        if con is not None:
            con.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(self.path) + suffix)
        con = _connect(self.path)
        con.executescript(_SQL)
        con.execute("insert into meta values ('schema', ?)", (SCHEMA,))
        return con

    @contextlib.contextmanager
    def reader(self) -> Iterator[sqlite3.Connection]:
        """A connection for reading (WAL: it sees the last commit while `refresh` writes)."""
        with self._pool_lock:
            con = self._pool.pop() if self._pool else None
        if con is None:
            con = _connect(self.path)
        try:
            yield con
        finally:
            with self._pool_lock:
                self._pool.append(con)

    def close(self) -> None:
        with self._lock, self._pool_lock:
            for con in [*self._pool, self._writer]:
                con.close()
            self._pool.clear()

    def _stat(self) -> tuple:
        """The run's start (its .lock's mtime) and each row file's size, taken judgments first: a row a judgment
        refers to was written before it, so it lies inside the sizes taken after."""
        sizes = {}
        for name in reversed(ROW_FILES):
            try:
                sizes[name] = (self.run_dir / f"{name}.jsonl").stat().st_size
            except FileNotFoundError:
                sizes[name] = 0
        try:
            started = (self.run_dir / ".lock").stat().st_mtime_ns
        except FileNotFoundError:
            started = 0
        return (started, *(sizes[n] for n in ROW_FILES))

    def refresh(self) -> bool:
        """Index the whole lines appended since the last call; True when anything was read."""
        if self._stat() == self._seen:
            return False
        with self._lock, _file_lock(self.path.with_suffix(".lock")):
            seen = self._stat()
            con = self._writer
            known = {name: (offset, tail) for name, offset, tail in con.execute("select name, offset, tail from files")}
            offsets = {name: offset for name, (offset, _) in known.items()}
            started = con.execute("select value from meta where key = 'started'").fetchone()
            sizes = dict(zip(ROW_FILES, seen[1:], strict=True))
            if (started and started[0] != str(seen[0])) or any(not self._same(n, sizes[n], *known[n]) for n in known):
                log.info("viewer: %s was started again or rewritten: indexing it afresh", self.run_dir)
                self._reset(con)
                offsets = {}
            con.execute("insert or replace into meta values ('started', ?)", (str(seen[0]),))
            self._load_names(con)
            ends = {n: rows.complete_end(self.run_dir / f"{n}.jsonl", sizes[n]) if sizes[n] else 0 for n in ROW_FILES}
            todo = [n for n in ROW_FILES if ends[n] > offsets.get(n, 0)]
            if todo:
                self._add(con, todo, offsets, ends)
                con.executescript(_INDEXES)
            self._seen = seen
            return bool(todo)

    def _same(self, name: str, size: int, offset: int, tail: bytes | None) -> bool:
        """Whether a file still holds what was indexed: as long as it was, and the same bytes before the offset (a
        batch run writes its row files afresh at each pass without starting again)."""
        if size < offset:
            return False
        return tail is None or rows.tail(self.run_dir / f"{name}.jsonl", offset) == tail

    def _add(self, con: sqlite3.Connection, todo: list[str], offsets: dict[str, int], ends: dict[str, int]) -> None:
        """Each file's lines from its offset to its end (ingest.py), examples first, then responses, judgments."""
        db = Writer(con)
        try:
            step = Ingest(db, self.run_dir, self._names)
            for name in todo:
                db.run("begin")
                getattr(step, name)(self.run_dir / f"{name}.jsonl", offsets.get(name, 0), ends[name])
                step.commit(name, ends[name], again=False)
        except BaseException:
            if con.in_transaction:
                con.execute("rollback")
            self._load_names(con)  # (codes given to names whose rows were rolled back)
            raise

    def _load_names(self, con: sqlite3.Connection) -> None:
        self._names = {k: {} for k in KINDS}
        for kind, code, name in con.execute("select kind, code, name from names"):
            self._names[kind][name] = code

    def _reset(self, con: sqlite3.Connection) -> None:
        con.execute("begin")
        for table in _TABLES:
            con.execute(f"delete from {table}")
        for fts in _FTS_TABLES:
            con.execute(f"insert into {fts}({fts}) values ('delete-all')")
        con.execute("commit")


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive flock on a file of our cache: two viewers never index one run folder at once."""
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
