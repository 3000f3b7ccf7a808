"""Adding a run folder's new lines to its index (index.py, whose docstring says what the tables hold).

`Ingest` reads each file's whole lines from an offset (rows.py), decodes the fields the index needs and writes them
in batches of BATCH rows through a `Writer`. Commits come every COMMIT_LINES lines, each with the offset it
reached, so a build that stops half way resumes there.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ..results.scoring import score_response
from ..types import Criterion
from . import rows

VERDICTS = {"met": 0, "not_met": 1, "error": 2}
COMMIT_LINES = 50_000  # lines between commits
BATCH = 5_000  # rows written at a time


class Writer:
    """The index's statements for one refresh, run in order on its connection. (On a thread of their own they did
    not overlap the decoding: ExecPlan 022, Decision Log.)"""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con

    def run(self, sql: str, args: tuple = ()) -> None:
        self.con.execute(sql, args)

    def many(self, sql: str, rows_: list[tuple]) -> None:
        if rows_:
            self.con.executemany(sql, rows_)

    def one(self, sql: str, args: tuple = ()) -> Any:
        return self.con.execute(sql, args).fetchone()

    def all(self, sql: str, args: tuple = ()) -> list[Any]:
        return self.con.execute(sql, args).fetchall()


@dataclass
class _Group:
    """One example's consecutive lines of judgments.jsonl: their span and each response's verdicts."""

    example_id: str
    start: int
    end: int
    verdicts: dict[str, list[rows.JudgmentHead]] = field(default_factory=dict)


class Ingest:
    """One refresh's additions. `names` (kind -> name -> code) is the index's, kept across refreshes; `ids` holds
    what this refresh indexed (example id -> (n, dataset code); response id -> n), earlier rows are asked of the
    database."""

    def __init__(self, db: Writer, run_dir: Path, names: dict[str, dict[str, int]]) -> None:
        self.db, self.run_dir, self.names = db, run_dir, names
        self.ids: dict[str, dict[str, Any]] = {"examples": {}, "responses": {}}

    def code(self, kind: str, name: str, label: str | None = None) -> int:
        codes = self.names[kind]
        code = codes.get(name)
        if code is None:
            code = codes[name] = len(codes)
            self.db.run("insert into names values (?, ?, ?, ?)", (kind, code, name, label))
        return code

    def commit(self, name: str, offset: int, again: bool = True) -> None:
        tail = rows.tail(self.run_dir / f"{name}.jsonl", offset)
        self.db.run("insert or replace into files values (?, ?, ?)", (name, offset, tail))
        self.db.run("commit")
        if again:
            self.db.run("begin")

    def known(self, kind: str, key: str) -> Any:
        """What indexing an example ((n, dataset code)) or a response (n) found; None if not indexed."""
        got = self.ids[kind].get(key)
        if got is None:
            if kind == "examples":
                got = self.db.one("select n, dataset from examples where id = ?", (key,))
            else:
                got = self.db.one("select n from responses where id = ?", (key,))
            if got is not None:
                got = self.ids[kind][key] = tuple(got) if kind == "examples" else got[0]
        return got

    def examples(self, path: Path, start: int, end: int) -> None:
        decode = rows.DECODERS["examples"].decode
        n = self.db.one("select coalesce(max(n), 0) from examples")[0]
        batch, docs, lines = [], [], 0
        for off, line in rows.whole_lines(path, start, end):
            try:
                ex = decode(line)
            except msgspec.DecodeError:
                continue
            if ex.id in self.ids["examples"]:
                continue
            n += 1
            ds = self.code("dataset", ex.dataset)
            self.ids["examples"][ex.id] = (n, ds)
            batch.append((n, ex.id, ds, off, len(line)))
            msgs = [*ex.messages, *(t.get("message") or {} for t in ex.later_turns if isinstance(t, dict))]
            docs.append((n, " ".join(rows.text_of(m.get("content")) for m in msgs if isinstance(m, dict))))
            for c in ex.rubric:
                if isinstance(c, dict) and isinstance(c.get("id"), str):
                    self.code("criterion", c["id"], c.get("text"))
            if len(batch) >= BATCH:
                self.db.many("insert or ignore into examples values (?, ?, ?, ?, ?)", batch)
                self.db.many("insert into fts_prompt(rowid, t) values (?, ?)", docs)
                batch, docs, lines = [], [], lines + len(batch)
                if lines >= COMMIT_LINES:
                    self.commit("examples", off + len(line) + 1)
                    lines = 0
        self.db.many("insert or ignore into examples values (?, ?, ?, ?, ?)", batch)
        self.db.many("insert into fts_prompt(rowid, t) values (?, ?)", docs)

    def responses(self, path: Path, start: int, end: int) -> None:
        decode = rows.DECODERS["responses"].decode
        n = self.db.one("select coalesce(max(n), 0) from responses")[0]
        batch, docs, lines = [], [], 0
        sql = (
            "insert or ignore into responses(n, id, ex, dataset, candidate, sample, turn, status, off, len) "
            "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        for off, line in rows.whole_lines(path, start, end):
            try:
                r = decode(line)
            except msgspec.DecodeError:
                continue
            if r.id in self.ids["responses"]:
                continue
            ex, ds = self.known("examples", r.example_id) or (None, None)
            n += 1
            self.ids["responses"][r.id] = n
            cand = self.code("candidate", r.candidate)
            batch.append((n, r.id, ex, ds, cand, r.sample_index, r.turn, 0 if r.status == "ok" else 1, off, len(line)))
            docs.append((n, " ".join(t for t in (r.text, r.reasoning, r.error) if t)))
            if len(batch) >= BATCH:
                self.db.many(sql, batch)
                self.db.many("insert into fts_resp(rowid, t) values (?, ?)", docs)
                batch, docs, lines = [], [], lines + len(batch)
                if lines >= COMMIT_LINES:
                    self.commit("responses", off + len(line) + 1)
                    lines = 0
        self.db.many(sql, batch)
        self.db.many("insert into fts_resp(rowid, t) values (?, ?)", docs)

    def judgments(self, path: Path, start: int, end: int) -> None:
        decode = rows.DECODERS["judgments"].decode
        out = _Verdicts(self.db)
        group: _Group | None = None
        first = True
        for off, line in rows.whole_lines(path, start, end):
            try:
                j = decode(line)
            except msgspec.DecodeError:
                continue
            if group is None or j.example_id != group.example_id:
                if group is not None:
                    self._group(group, out, continued=first)
                    first = False
                    if out.lines >= COMMIT_LINES:
                        out.flush()
                        self.commit("judgments", group.end)
                group = _Group(j.example_id, off, off)
            group.end = off + len(line) + 1
            out.lines += 1
            if j.kind != "pairwise":
                group.verdicts.setdefault(j.response_id, []).append(j)
        if group is not None:
            self._group(group, out, continued=first)
        out.flush()

    def _group(self, group: _Group, out: _Verdicts, continued: bool) -> None:
        """One example's judgment lines: their span and, per response, its verdicts, score and explanations. The
        first group a refresh reads may continue one the refresh before saw in part (the run was writing it then):
        its responses are rescored from all their lines."""
        known = self.known("examples", group.example_id)
        if known is None:
            return
        ex = known[0]
        if continued and self.db.one("select 1 from jspans where ex = ? limit 1", (ex,)) is None:
            continued = False
        out.spans.append((ex, group.start, group.end - group.start - 1))
        earlier = []
        if continued:
            out.flush(commit_lines=False)
            spans = self.db.all("select off, len from jspans where ex = ? order by off", (ex,))
            earlier = rows.read_rows(self.run_dir / "judgments.jsonl", spans)
        for rid, js in group.verdicts.items():
            resp = self.known("responses", rid)
            if resp is None:
                continue
            every = [_verdict(j) for j in js]
            if continued:
                every = [_verdict(r) for r in earlier if r.get("response_id") == rid and r.get("kind") != "pairwise"]
            out.docs.append((resp, " ".join(_explanations(js))))
            out.scores.append((*_score(every), *self._tokens(every), resp))
        if len(out.scores) >= BATCH:
            out.flush(commit_lines=False)

    def _tokens(self, every: list[tuple]) -> tuple[str, str]:
        """A response's `finals` and `votes` strings (index.py's docstring)."""
        finals, votes = [], []
        crit, judge_code = self.names["criterion"], self.names["judge"]
        for crit_id, _, verdict, judge, panel in every:
            c = crit.get(crit_id)
            c = self.code("criterion", crit_id) if c is None else c
            j = judge_code.get(judge)
            j = self.code("judge", judge) if j is None else j
            v = VERDICTS.get(verdict, 2)
            finals.append(f"{c}:{v}")
            votes.append(f"{j}:{v}:{c}")
            for vote in panel:
                if isinstance(vote, dict):
                    who = self.code("judge", str(vote.get("judge")))
                    votes.append(f"{who}:{VERDICTS.get(vote.get('verdict'), 2)}:{c}")
        return f",{','.join(finals)},", f",{','.join(votes)},"


class _Verdicts:
    """What the judgment lines add, written in batches."""

    def __init__(self, db: Writer) -> None:
        self.db = db
        self.lines = 0
        self.spans: list[tuple] = []
        self.docs: list[tuple] = []
        self.scores: list[tuple] = []

    def flush(self, commit_lines: bool = True) -> None:
        self.db.many("insert into jspans values (?, ?, ?)", self.spans)
        self.db.many("insert into fts_resp(rowid, t) values (?, ?)", self.docs)
        self.db.many(
            "update responses set score = ?, met = ?, not_met = ?, errors = ?, judged = ?, finals = ?, votes = ? "
            "where n = ?",
            self.scores,
        )
        self.spans, self.docs, self.scores = [], [], []
        if commit_lines:
            self.lines = 0


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
