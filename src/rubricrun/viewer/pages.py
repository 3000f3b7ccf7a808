"""The viewer's HTML pages (server-rendered; each is also data for the JSON twin in api.py):

/                                         the runs, last started first; pick two to compare
/runs/<run_id>                            the summary per dataset (report.html's figures), links into the rows
/runs/<run_id>/examples?...               every response, filtered, searched, sorted and paged on the server
/runs/<run_id>/examples/<example_id>      one example: conversation, responses, rubric grid, pairwise; labelling
/runs/<run_id>/labels                     the human labels given so far
/runs/<run_id>/sheet                      the labelling sheet, worked through in order
/runs/<run_id>/report.html                the run's own report
/compare/<run_a>/<run_b>                  the paired change per dataset and candidate, the flipped verdicts
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, redirect, request, send_file, url_for

from ..errors import InputError
from ..results.summary_types import Summary, read_summary
from . import labels as lab
from . import runs, search, views
from .app import render, viewer

bp = Blueprint("pages", __name__)
FLIPS_PAGE = 200


def _query(args: Any) -> tuple[search.Query, int]:
    try:
        return views.page_query(args)
    except views.BadRequest as exc:
        abort(400, str(exc))


@bp.get("/")
def home() -> str:
    return render("home.html.j2", runs=runs.list_runs(viewer().outputs), outputs=viewer().outputs)


@bp.get("/compare")
def compare_form() -> Any:
    a, b = request.args.get("a", ""), request.args.get("b", "")
    if not a or not b:
        abort(400, "pick two runs to compare")
    return redirect(url_for("pages.compare", run_a=a, run_b=b))


def _summary(info: runs.RunInfo) -> Summary | None:
    try:
        return read_summary(info.summary) if info.summary else None
    except (TypeError, KeyError, ValueError, AttributeError):  # ValueError: the codec's DecodeError too
        return None  # a summary this version cannot read: the page shows the rows


@bp.get("/runs/<run_id>")
def run(run_id: str) -> str:
    index = viewer().index(run_id)
    info = runs.run_info(index.run_dir)
    return render(
        "run.html.j2",
        run=info,
        s=_summary(info),
        counts=search.counts(index),
        facets={k: search.names(index, k) for k in ("dataset", "candidate", "judge")},
        labelled=len(lab.read_labels(index.run_dir)),
        sheet=(index.run_dir / lab.SHEET).is_file(),
        report=(index.run_dir / "report.html").is_file(),
    )


@bp.get("/runs/<run_id>/examples")
def examples(run_id: str) -> str:
    index = viewer().index(run_id)
    query, page = _query(request.args)
    total, hits = search.search(index, query)
    texts = views.snippets(index, hits)
    info = runs.run_info(index.run_dir)
    return render(
        "examples.html.j2",
        run=info,
        query=query,
        page=page,
        pages=max(1, -(-total // views.PAGE)),
        total=total,
        hits=hits,
        texts=texts,
        facets=views.choices(index, runs.default_rubric(info.config)),
        counts=search.counts(index),
    )


def example_page_view(run_id: str, example_id: str) -> tuple[Any, views.ExampleView]:
    index = viewer().index(run_id)
    got = search.example_rows(index, example_id)
    if got is None:
        abort(404, f"no example {example_id!r} in run {run_id!r} (yet)")
    info = runs.run_info(index.run_dir)
    labels = lab.latest(lab.read_labels(index.run_dir))
    view = views.example_view(*got, info.candidates, runs.default_rubric(info.config), labels, info.summary)
    return info, view


@bp.get("/runs/<run_id>/examples/<path:example_id>")
def example(run_id: str, example_id: str) -> str:
    info, view = example_page_view(run_id, example_id)
    return render("example.html.j2", run=info, v=view, counts=search.counts(viewer().index(run_id)))


@bp.get("/runs/<run_id>/labels")
def labels(run_id: str) -> str:
    index = viewer().index(run_id)
    rows = lab.read_labels(index.run_dir)
    where = {r["response_id"]: search.example_of(index, r["response_id"]) for r in rows}
    return render("labels.html.j2", run=runs.run_info(index.run_dir), labels=rows[::-1], where=where)


@bp.get("/runs/<run_id>/sheet")
def sheet(run_id: str) -> str:
    index = viewer().index(run_id)
    rows = lab.read_sheet(index.run_dir)
    if rows is None:
        abort(404, f"run {run_id!r} has no {lab.SHEET} (write one with the labelling sheet command)")
    rater = request.args.get("rater", "").strip() or None
    done = lab.done_keys(lab.read_labels(index.run_dir), rater)
    todo = [i for i, r in enumerate(rows) if (r["response_id"], str(r.get("criterion_id"))) not in done]
    try:
        at = views.int_arg(request.args, "i", todo[0] if todo else len(rows), 0, len(rows))
    except views.BadRequest as exc:
        abort(400, str(exc))
    row = rows[at] if at < len(rows) else None
    where = search.example_of(index, row["response_id"]) if row else None
    nxt = next((i for i in todo if i > at), None)
    info = runs.run_info(index.run_dir)
    scale = row and (row.get("scale") or views.labels_scale(info.summary, str(row.get("dataset") or "")))
    return render(
        "sheet.html.j2", run=info, row=row, at=at, rows=len(rows), done=len(rows) - len(todo), rater=rater or "",
        example_id=where, next_at=nxt, scale=scale,
    )  # fmt: skip


@bp.get("/runs/<run_id>/report.html")
def run_report(run_id: str) -> Any:
    path = viewer().run_dir(run_id) / "report.html"
    if not path.is_file():
        abort(404, f"run {run_id!r} has no report.html (yet)")
    resp = send_file(path, mimetype="text/html", max_age=0)
    # The report's own inline script and styles (its policy: nothing from the network either).
    resp.headers["Content-Security-Policy"] = (
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"
    )
    return resp


def comparison(run_a: str, run_b: str) -> dict[str, Any]:
    """results/compare.py's comparison of two run folders (compare.json's data), kept while neither changes."""
    from ..results import compare

    a, b = viewer().run_dir(run_a), viewer().run_dir(run_b)
    key = (run_a, run_b, *(_mtimes(a)), *(_mtimes(b)))
    cache = viewer().compares
    with viewer().compare_lock:
        if key not in cache:
            try:
                ra, rb = compare.load_run(a), compare.load_run(b)
            except InputError as exc:
                abort(409, f"cannot compare: {exc}")
            data = compare.comparison_row(ra, rb, compare.compare_runs(ra, rb))
            data.update(run_a=run_a, run_b=run_b)
            cache.clear()  # the last comparison kept (compare.json's data: small beside the rows it came from)
            cache[key] = data
        return cache[key]


def _mtimes(path: Any) -> tuple:
    return tuple(
        (path / n).stat().st_mtime_ns if (path / n).exists() else 0
        for n in ("summary.json", "examples.jsonl", "responses.jsonl", "judgments.jsonl", "config.yaml")
    )


@bp.get("/compare/<run_a>/<run_b>")
def compare(run_a: str, run_b: str) -> str:
    data = comparison(run_a, run_b)
    flips = views.flips(data)
    try:
        offset = views.int_arg(request.args, "offset", 0, 0)
    except views.BadRequest as exc:
        abort(400, str(exc))
    return render(
        "compare.html.j2", c=data, flips=flips[offset : offset + FLIPS_PAGE], n_flips=len(flips), offset=offset,
        step=FLIPS_PAGE, runs=runs.list_runs(viewer().outputs),
    )  # fmt: skip
