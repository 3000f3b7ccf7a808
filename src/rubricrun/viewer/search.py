"""Reading the index (index.py): the responses a list page's filters and search find, and the rows of one example.

Filters (each empty means any): dataset, candidate, status (`ok` / `error`), criterion (an id, as in
judgments.jsonl), verdict (`met` / `not_met` / `error`) and judge. Without a judge, criterion and verdict match the
judgment's own verdict; with a judge, they match that judge's verdict, its own or its vote on a panel. The search
box finds responses whose prompt, text (with reasoning and error) or judges' explanations hold every word
(`word*` for a prefix). Sorting: input order, or by the response's normalized score (`score` lowest first, `-score`
highest first; unscored last).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from . import rows
from .index import KINDS, RunIndex
from .ingest import VERDICTS

PAGE_MAX = 500
_ORDER = {"score": "r.score is null, r.score, r.n", "-score": "r.score is null, r.score desc, r.n"}


@dataclass(frozen=True)
class Query:
    """A list page's filters, search, sort and page."""

    dataset: str = ""
    candidate: str = ""
    criterion: str = ""
    verdict: str = ""
    judge: str = ""
    status: str = ""
    q: str = ""
    sort: str = ""
    offset: int = 0
    limit: int = 50


@dataclass(frozen=True)
class Hit:
    """One response found: what the index knows of it, and where its row and its example's row are."""

    n: int
    id: str
    example_id: str
    dataset: str
    candidate: str
    sample: int
    turn: int
    status: str
    score: float | None
    met: int
    not_met: int
    errors: int
    judged: int
    span: tuple[int, int]
    example_span: tuple[int, int] | None


def fts_query(q: str) -> str | None:
    """A search box's words as an FTS5 query, every word required (`word*`: a prefix); None without a word."""
    words = re.findall(r"(\w+)(\*?)", q)
    return " ".join(f'"{w}"{star}' for w, star in words) if words else None


def names(index: RunIndex, kind: str) -> list[tuple[str, str | None]]:
    """Every name of a kind with its label (a criterion's text), in the order the run first wrote them."""
    with index.reader() as con:
        return list(con.execute("select name, label from names where kind = ? order by code", (kind,)))


def counts(index: RunIndex) -> dict[str, int]:
    """Examples, responses, judged responses and criterion verdicts indexed so far."""
    with index.reader() as con:
        ex = con.execute("select count(*) from examples").fetchone()[0]
        r, judged, verdicts = con.execute(
            "select count(*), count(nullif(judged, 0)), coalesce(sum(judged), 0) from responses"
        ).fetchone()
    return {"examples": ex, "responses": r, "judged": judged, "judgments": verdicts}


def _where(con: sqlite3.Connection, query: Query) -> tuple[str, list[Any]] | None:
    """The SQL condition of a query; None when a filter names nothing the run holds."""
    codes = {}
    for kind in KINDS:
        name = getattr(query, kind)
        if name:
            got = con.execute("select code from names where kind = ? and name = ?", (kind, name)).fetchone()
            if got is None:
                return None
            codes[kind] = got[0]
    v = VERDICTS.get(query.verdict)
    if (query.verdict and v is None) or query.status not in ("", "ok", "error"):
        return None
    conds, args = [], []
    for kind in ("dataset", "candidate"):
        if kind in codes:
            conds.append(f"r.{kind} = ?")
            args.append(codes[kind])
    if query.status:
        conds.append("r.status = ?")
        args.append(0 if query.status == "ok" else 1)
    j, c = codes.get("judge"), codes.get("criterion")
    if j is not None:  # `votes` holds ",judge:verdict:criterion," per verdict and vote
        if c is None:
            patterns = [f",{j}:{v}:" if v is not None else f",{j}:"]
        else:
            patterns = [f",{j}:{x}:{c}," for x in ((v,) if v is not None else (0, 1, 2))]
        conds.append("(" + " or ".join("instr(r.votes, ?) > 0" for _ in patterns) + ")")
        args += patterns
    elif c is not None:  # `finals` holds ",criterion:verdict," per judgment
        conds.append("instr(r.finals, ?) > 0")
        args.append(f",{c}:{v}," if v is not None else f",{c}:")
    elif v is not None:
        conds.append(f"r.{('met', 'not_met', 'errors')[v]} > 0")
    match = fts_query(query.q)
    if match is not None:
        conds.append(
            "(r.n in (select rowid from fts_resp where fts_resp match ?) "
            "or r.ex in (select rowid from fts_prompt where fts_prompt match ?))"
        )
        args += [match, match]
    return (" and ".join(conds) or "1"), args


def search(index: RunIndex, query: Query) -> tuple[int, list[Hit]]:
    """The responses a query finds: how many, and the page [offset, offset + limit) of them."""
    order = _ORDER.get(query.sort, "r.n")
    with index.reader() as con:
        where = _where(con, query)
        if where is None:
            return 0, []
        cond, args = where
        total = con.execute(f"select count(*) from responses r where {cond}", args).fetchone()[0]
        got = con.execute(
            "select r.n, r.id, e.id, r.dataset, r.candidate, r.sample, r.turn, r.status, r.score, r.met, r.not_met, "
            "r.errors, r.judged, r.off, r.len, e.off, e.len "
            f"from (select * from responses r where {cond} order by {order} limit ? offset ?) r "
            f"left join examples e on e.n = r.ex order by {order}",
            [*args, max(0, min(query.limit, PAGE_MAX)), max(0, query.offset)],
        ).fetchall()
        label = {
            kind: dict(con.execute("select code, name from names where kind = ?", (kind,)))
            for kind in ("dataset", "candidate")
        }
    return total, [_hit(row, label) for row in got]


def _hit(row: tuple, label: dict[str, dict[int, str]]) -> Hit:
    n, rid, eid, ds, cand, sample, turn, status, score, met, not_met, errors, judged, off, ln, eoff, eln = row
    return Hit(
        n=n,
        id=rid,
        example_id=eid or rid.split("#", 1)[0],
        dataset=label["dataset"].get(ds, ""),
        candidate=label["candidate"].get(cand, ""),
        sample=sample,
        turn=turn,
        status="ok" if status == 0 else "error",
        score=score,
        met=met,
        not_met=not_met,
        errors=errors,
        judged=judged,
        span=(off, ln),
        example_span=None if eoff is None else (eoff, eln),
    )


def judgments_of(index: RunIndex, con: sqlite3.Connection, ex: int) -> list[dict[str, Any]]:
    """Every row of judgments.jsonl for the example numbered `ex` in the index (pairwise rows included)."""
    spans = con.execute("select off, len from jspans where ex = ? order by off", (ex,)).fetchall()
    return rows.read_rows(index.run_dir / "judgments.jsonl", spans)


def response_rows(index: RunIndex, hits: list[Hit]) -> list[dict[str, Any]]:
    """Each hit's row of responses.jsonl, with its `judgments` (its rows of judgments.jsonl)."""
    out = rows.read_rows(index.run_dir / "responses.jsonl", [h.span for h in hits])
    by_example: dict[str, list[dict[str, Any]]] = {}
    with index.reader() as con:
        for h in hits:
            if h.example_id not in by_example:
                got = con.execute("select n from examples where id = ?", (h.example_id,)).fetchone()
                by_example[h.example_id] = judgments_of(index, con, got[0]) if got else []
    for row in out:
        mine = by_example.get(row.get("example_id"), [])
        row["judgments"] = [j for j in mine if j.get("response_id") == row.get("id") and j.get("kind") != "pairwise"]
    return out


def example_rows(index: RunIndex, example_id: str) -> tuple[dict, list[dict], list[dict]] | None:
    """An example's row, its responses' rows (in the order the run wrote them) and its judgments' rows (pairwise
    rows included); None when the index has no such example."""
    with index.reader() as con:
        got = con.execute("select n, off, len from examples where id = ?", (example_id,)).fetchone()
        if got is None:
            return None
        ex, off, ln = got
        spans = con.execute("select off, len from responses where ex = ? order by n", (ex,)).fetchall()
        judgments = judgments_of(index, con, ex)
    (row,) = rows.read_rows(index.run_dir / "examples.jsonl", [(off, ln)])
    return row, rows.read_rows(index.run_dir / "responses.jsonl", spans), judgments


def example_of(index: RunIndex, response_id: str) -> str | None:
    """The example id of an indexed response, or None."""
    with index.reader() as con:
        got = con.execute(
            "select e.id from responses r join examples e on e.n = r.ex where r.id = ?", (response_id,)
        ).fetchone()
    return got[0] if got else None
