"""The JSON twin of the pages, for scripts:

GET  /api/runs                                   [{run_id, status, started, datasets, candidates, judges, calls,
                                                   cost_usd}], the last started first
GET  /api/runs/<run_id>                          the run's status and what is indexed so far (pages poll it)
GET  /api/runs/<run_id>/responses?...            {total, offset, limit, rows}: the list page's filters
                                                 (dataset, candidate, criterion, verdict, judge, status, q, sort)
                                                 with offset and limit; each row a row of responses.jsonl with
                                                 its `judgments` (its rows of judgments.jsonl)
GET  /api/runs/<run_id>/examples/<example_id>    {example, responses, judgments}, rows as the run wrote them
GET  /api/runs/<run_id>/labels                   {labels: [...]}, labels.jsonl's rows
POST /api/runs/<run_id>/labels                   {response_id, criterion_id, met | score, rater}: appends a row
GET  /api/compare/<run_a>/<run_b>                compare.json's data, with {flips: [...]} of every dataset, each
                                                 with the `url` of its example's page in run B
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flask import Blueprint, abort, jsonify, request, url_for

from . import labels as lab
from . import runs, search, views
from .app import viewer
from .pages import comparison, example_page_view

bp = Blueprint("api", __name__, url_prefix="/api")


@bp.get("/runs")
def api_runs() -> Any:
    return jsonify([r.row() for r in runs.list_runs(viewer().outputs)])


@bp.get("/runs/<run_id>")
def api_run(run_id: str) -> Any:
    index = viewer().index(run_id)
    info = runs.run_info(index.run_dir)
    return jsonify({**info.row(), **search.counts(index), "labels": len(lab.read_labels(index.run_dir))})


@bp.get("/runs/<run_id>/responses")
def api_responses(run_id: str) -> Any:
    index = viewer().index(run_id)
    try:
        query = views.api_query(request.args)
    except views.BadRequest as exc:
        abort(400, str(exc))
    total, hits = search.search(index, query)
    return jsonify(total=total, offset=query.offset, limit=query.limit, rows=search.response_rows(index, hits))


@bp.get("/runs/<run_id>/examples/<path:example_id>")
def api_example(run_id: str, example_id: str) -> Any:
    got = search.example_rows(viewer().index(run_id), example_id)
    if got is None:
        abort(404, f"no example {example_id!r} in run {run_id!r} (yet)")
    example, responses, judgments = got
    return jsonify(example=example, responses=responses, judgments=judgments)


@bp.get("/runs/<run_id>/labels")
def api_labels(run_id: str) -> Any:
    return jsonify(labels=lab.read_labels(viewer().run_dir(run_id)))


@bp.post("/runs/<run_id>/labels")
def api_label(run_id: str) -> Any:
    """Append a label. JSON only, from this origin: a form on another web site can send neither."""
    origin = request.headers.get("Origin")
    if origin and urlsplit(origin).netloc != request.host:
        abort(403, "labels are posted from the viewer's own pages")
    if request.mimetype != "application/json":
        abort(415, "post the label as JSON (Content-Type: application/json)")
    try:
        row = lab.label_row(request.get_json(silent=True))
    except lab.LabelError as exc:
        abort(400, str(exc))
    index = viewer().index(run_id)
    example_id = search.example_of(index, row["response_id"])
    if example_id is None:
        abort(404, f"no response {row['response_id']!r} in run {run_id!r}")
    _, view = example_page_view(run_id, example_id)
    if row["criterion_id"] not in views.criterion_ids(view, row["response_id"]):
        abort(400, f"criterion {row['criterion_id']!r} is not one response {row['response_id']!r} is judged on")
    try:
        lab.check_scale(row, view.scale)
    except lab.LabelError as exc:
        abort(400, str(exc))
    row["dataset"] = view.example.get("dataset")  # one labels.jsonl serves every dataset of the run (data/labels.py)
    lab.append_label(index.run_dir, row)
    return jsonify(row), 201


@bp.get("/compare/<run_a>/<run_b>")
def api_compare(run_a: str, run_b: str) -> Any:
    data = comparison(run_a, run_b)
    flips = [
        {**f, "url": url_for("pages.example", run_id=run_b, example_id=f["example_id"])} for f in views.flips(data)
    ]
    datasets = {name: {k: v for k, v in d.items() if k != "flips"} for name, d in data["datasets"].items()}
    return jsonify({**data, "datasets": datasets, "flips": flips})
