"""One SQLite index per run folder, kept in the viewer's own cache (never inside the run folder).

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ..results.scoring import score_response
from ..types import Criterion
from . import rows

log = logging.getLogger("rubricrun")

SCHEMA = "1"
ROW_FILES = ("examples", "responses", "judgments")
VERDICTS = {"met": 0, "not_met": 1, "error": 2}
KINDS = ("dataset", "candidate", "criterion", "judge")
COMMIT_LINES = 50_000  # rows between commits while indexing (a build stopped half way resumes from the last one)
FTS = "fts5(t, content='', detail=none, columnsize=0)"

_SQL = f"""
create table if not exists meta(key text primary key, value text);
create table if not exists files(name text primary key, offset integer not null);
create table if not exists names(kind text not null, code integer not null, name text not null, label text,
  primary key(kind, name));
create table if not exists examples(n integer primary key, id text not null unique, dataset integer,
  off integer not null, len integer not null);
create table if not exists responses(n integer primary key, id text not null unique, ex integer, dataset integer,
  candidate integer, sample integer, turn integer, status integer, score real, met integer not null default 0,
  not_met integer not null default 0, errors integer not null default 0, judged integer not null default 0,
  finals text not null default '', votes text not null default '', off integer not null, len integer not null);
create index if not exists responses_asc on responses(score is null, score, n);
create index if not exists responses_desc on responses(score is null, score desc, n);
create index if not exists responses_ex on responses(ex);
create table if not exists jspans(ex integer not null, off integer not null, len integer not null);
create index if not exists jspans_ex on jspans(ex);
create virtual table if not exists fts_prompt using {FTS};
create virtual table if not exists fts_resp using {FTS};
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


@dataclass
class _Group:
    """One example's consecutive lines of judgments.jsonl: their span and each response's verdicts."""

    example_id: str
    start: int
    end: int
    verdicts: dict[str, list[rows.JudgmentHead]] = field(default_factory=dict)


class RunIndex:
    """The index of one run folder. Thread-safe: one writer at a time (`refresh`), readers from a small pool."""

    def __init__(self, run_dir: Path, cache: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = db_path(self.run_dir, cache)
        self._lock = threading.Lock()
        self._pool: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._seen: tuple | None = None  # the run's start and its files' sizes when last indexed
        self._names: dict[str, dict[str, int]] = {}
        self._ids: dict[str, dict[str, Any]] = {}  # examples / responses: id -> what indexing them found
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
            offsets = dict(con.execute("select name, offset from files"))
            started = con.execute("select value from meta where key = 'started'").fetchone()
            sizes = dict(zip(ROW_FILES, seen[1:], strict=True))
            if (started and started[0] != str(seen[0])) or any(sizes[n] < offsets.get(n, 0) for n in ROW_FILES):
                log.info("viewer: %s was started again or rewritten: indexing it afresh", self.run_dir)
                self._reset(con)
                offsets = {}
            con.execute("insert or replace into meta values ('started', ?)", (str(seen[0]),))
            self._names = {k: {} for k in KINDS}
            for kind, code, name in con.execute("select kind, code, name from names"):
                self._names[kind][name] = code
            self._ids = {"examples": {}, "responses": {}}
            changed = False
            for name in ROW_FILES:
                path = self.run_dir / f"{name}.jsonl"
                end = rows.complete_end(path, sizes[name]) if sizes[name] else 0
                if end > offsets.get(name, 0):
                    con.execute("begin")
                    getattr(self, f"_add_{name}")(con, path, offsets.get(name, 0), end)
                    self._commit(con, name, end, again=False)
                    changed = True
            self._ids = {}
            self._seen = seen
            return changed

    def _reset(self, con: sqlite3.Connection) -> None:
        con.execute("begin")
        for table in _TABLES:
            con.execute(f"delete from {table}")
        for fts in _FTS_TABLES:
            con.execute(f"insert into {fts}({fts}) values ('delete-all')")
        con.execute("commit")

    def _code(self, con: sqlite3.Connection, kind: str, name: str, label: str | None = None) -> int:
        codes = self._names[kind]
        code = codes.get(name)
        if code is None:
            code = codes[name] = len(codes)
            con.execute("insert into names values (?, ?, ?, ?)", (kind, code, name, label))
        return code

    @staticmethod
    def _commit(con: sqlite3.Connection, name: str, offset: int, again: bool = True) -> None:
        con.execute("insert or replace into files values (?, ?)", (name, offset))
        con.execute("commit")
        if again:
            con.execute("begin")

    def _known(self, con: sqlite3.Connection, kind: str, key: str) -> Any:
        """What indexing an example ((n, dataset code)) or a response (n) found, from this refresh's memory
        or, for rows of an earlier refresh, from the database; None if not indexed."""
        got = self._ids[kind].get(key)
        if got is None:
            if kind == "examples":
                got = con.execute("select n, dataset from examples where id = ?", (key,)).fetchone()
            else:
                got = con.execute("select n from responses where id = ?", (key,)).fetchone()
            if got is not None:
                got = self._ids[kind][key] = got if kind == "examples" else got[0]
        return got

    def _add_examples(self, con: sqlite3.Connection, path: Path, start: int, end: int) -> None:
        decode = rows.DECODERS["examples"].decode
        n = con.execute("select coalesce(max(n), 0) from examples").fetchone()[0]
        batch, docs = [], []
        for off, line in rows.whole_lines(path, start, end):
            try:
                ex = decode(line)
            except msgspec.DecodeError:
                continue
            if ex.id in self._ids["examples"]:
                continue
            n += 1
            ds = self._code(con, "dataset", ex.dataset)
            self._ids["examples"][ex.id] = (n, ds)
            batch.append((n, ex.id, ds, off, len(line)))
            msgs = [*ex.messages, *(t.get("message") or {} for t in ex.later_turns if isinstance(t, dict))]
            docs.append((n, " ".join(rows.text_of(m.get("content")) for m in msgs if isinstance(m, dict))))
            for c in ex.rubric:
                if isinstance(c, dict) and isinstance(c.get("id"), str):
                    self._code(con, "criterion", c["id"], c.get("text"))
            if len(batch) >= COMMIT_LINES:
                self._flush(con, "examples", batch, docs)
                self._commit(con, "examples", off + len(line) + 1)
        self._flush(con, "examples", batch, docs)

    def _add_responses(self, con: sqlite3.Connection, path: Path, start: int, end: int) -> None:
        decode = rows.DECODERS["responses"].decode
        n = con.execute("select coalesce(max(n), 0) from responses").fetchone()[0]
        batch, docs = [], []
        for off, line in rows.whole_lines(path, start, end):
            try:
                r = decode(line)
            except msgspec.DecodeError:
                continue
            if r.id in self._ids["responses"]:
                continue
            ex, ds = self._known(con, "examples", r.example_id) or (None, None)
            n += 1
            self._ids["responses"][r.id] = n
            cand = self._code(con, "candidate", r.candidate)
            batch.append((n, r.id, ex, ds, cand, r.sample_index, r.turn, 0 if r.status == "ok" else 1, off, len(line)))
            docs.append((n, " ".join(t for t in (r.text, r.reasoning, r.error) if t)))
            if len(batch) >= COMMIT_LINES:
                self._flush(con, "responses", batch, docs)
                self._commit(con, "responses", off + len(line) + 1)
        self._flush(con, "responses", batch, docs)

    @staticmethod
    def _flush(con: sqlite3.Connection, kind: str, batch: list, docs: list) -> None:
        if kind == "examples":
            con.executemany("insert or ignore into examples values (?, ?, ?, ?, ?)", batch)
            con.executemany("insert into fts_prompt(rowid, t) values (?, ?)", docs)
        else:
            con.executemany(
                "insert or ignore into responses(n, id, ex, dataset, candidate, sample, turn, status, off, len) "
                "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                batch,
            )
            con.executemany("insert into fts_resp(rowid, t) values (?, ?)", docs)
        batch.clear()
        docs.clear()

    def _add_judgments(self, con: sqlite3.Connection, path: Path, start: int, end: int) -> None:
        decode = rows.DECODERS["judgments"].decode
        out = _Verdicts()
        group: _Group | None = None
        first = True
        for off, line in rows.whole_lines(path, start, end):
            try:
                j = decode(line)
            except msgspec.DecodeError:
                continue
            if group is None or j.example_id != group.example_id:
                if group is not None:
                    self._add_group(con, group, out, continued=first)
                    first = False
                    if out.lines >= COMMIT_LINES:
                        out.flush(con)
                        self._commit(con, "judgments", group.end)
                group = _Group(j.example_id, off, off)
            group.end = off + len(line) + 1
            out.lines += 1
            if j.kind != "pairwise":
                group.verdicts.setdefault(j.response_id, []).append(j)
        if group is not None:
            self._add_group(con, group, out, continued=first)
        out.flush(con)

    def _add_group(self, con: sqlite3.Connection, group: _Group, out: _Verdicts, continued: bool) -> None:
        """One example's judgment lines: their span and, per response, its verdicts, score and explanations. The
        first group a refresh reads may continue one the refresh before saw in part (the run was writing it then):
        its responses are rescored from all their lines."""
        known = self._known(con, "examples", group.example_id)
        if known is None:
            return
        ex = known[0]
        if continued and con.execute("select 1 from jspans where ex = ? limit 1", (ex,)).fetchone() is None:
            continued = False
        con.execute("insert into jspans values (?, ?, ?)", (ex, group.start, group.end - group.start - 1))
        earlier = self._rows_of(con, ex) if continued else []
        for rid, js in group.verdicts.items():
            resp = self._known(con, "responses", rid)
            if resp is None:
                continue
            every = [_verdict(j) for j in js]
            if continued:
                every = [_verdict(r) for r in earlier if r.get("response_id") == rid and r.get("kind") != "pairwise"]
            out.docs.append((resp, " ".join(_explanations(js))))
            out.scores.append((*_score(every), *self._tokens(con, every), resp))

    def _rows_of(self, con: sqlite3.Connection, ex: int) -> list[dict[str, Any]]:
        spans = con.execute("select off, len from jspans where ex = ? order by off", (ex,)).fetchall()
        return rows.read_rows(self.run_dir / "judgments.jsonl", spans)

    def _tokens(self, con: sqlite3.Connection, every: list[tuple]) -> tuple[str, str]:
        """A response's `finals` and `votes` strings (module docstring)."""
        finals, votes = [], []
        for crit_id, _, verdict, judge, panel in every:
            c, v = self._code(con, "criterion", crit_id), VERDICTS.get(verdict, 2)
            finals.append(f"{c}:{v}")
            votes.append(f"{self._code(con, 'judge', judge)}:{v}:{c}")
            for vote in panel:
                if isinstance(vote, dict):
                    who = self._code(con, "judge", str(vote.get("judge")))
                    votes.append(f"{who}:{VERDICTS.get(vote.get('verdict'), 2)}:{c}")
        return f",{','.join(finals)},", f",{','.join(votes)},"


class _Verdicts:
    """What the judgment lines of one commit add, written in batches."""

    def __init__(self) -> None:
        self.lines = 0
        self.docs: list[tuple] = []
        self.scores: list[tuple] = []

    def flush(self, con: sqlite3.Connection) -> None:
        con.executemany("insert into fts_resp(rowid, t) values (?, ?)", self.docs)
        con.executemany(
            "update responses set score = ?, met = ?, not_met = ?, errors = ?, judged = ?, finals = ?, votes = ? "
            "where n = ?",
            self.scores,
        )
        self.lines = 0
        self.docs.clear()
        self.scores.clear()


def _verdict(j: rows.JudgmentHead | dict[str, Any]) -> tuple[str, float, str, str, list[Any]]:
    """(criterion id, weight, verdict, judge, votes) of a judgment, decoded or a plain row."""
    if isinstance(j, dict):
        w = j.get("weight")
        return (
            str(j.get("criterion_id", "")),
            float(w) if isinstance(w, (int, float)) else 0.0,
            str(j.get("verdict", "error")),
            str(j.get("judge", "")),
            j.get("votes") or [],
        )
    return j.criterion_id, j.weight, j.verdict, j.judge, j.votes


def _explanations(js: list[rows.JudgmentHead]) -> Iterator[str]:
    """What the judges wrote of a response: each judgment's explanation and error, and each vote's."""
    for j in js:
        yield from (t for t in (j.explanation, j.error) if t)
        for v in j.votes:
            if isinstance(v, dict):
                yield from (t for t in (v.get("explanation"), v.get("error")) if isinstance(t, str) and t)


def _score(every: list[tuple]) -> tuple[float | None, int, int, int, int]:
    """A response's normalized score and verdict counts, by results/scoring.py (the per-response score report.html
    rebuilds from a run folder's judgments)."""
    s = score_response([Criterion(c, "", float(w)) for c, w, *_ in every], [v for _, _, v, *_ in every])
    return s.normalized, s.met, s.not_met, s.errors, len(every)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive flock on a file of our cache: two viewers never index one run folder at once."""
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
