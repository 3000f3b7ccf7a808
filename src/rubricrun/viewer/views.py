"""What a page shows, built from rows as the run wrote them (plain dicts): the example page's conversation,
responses and rubric grid, a list page's query from its URL, and a comparison's flips."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from werkzeug.datastructures import MultiDict

from ..judging.protocol import SCALES
from ..results.label_sheet import label_scale
from ..results.report import AUTO_TEXT
from . import rows, search
from .index import RunIndex
from .search import PAGE_MAX, Hit, Query

PAGE = 50  # responses per list page
SNIPPET = 240  # characters of a prompt or a response shown in the list
FILTERS = ("dataset", "candidate", "criterion", "verdict", "judge", "status", "q", "sort")


class BadRequest(ValueError):
    """A query parameter that is not a number where one is needed."""


def int_arg(args: MultiDict, name: str, default: int, low: int, high: int | None = None) -> int:
    raw = args.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"`{name}` must be a whole number, not {raw!r}") from None
    return max(low, value if high is None else min(high, value))


def page_query(args: MultiDict) -> tuple[Query, int]:
    """A list page's query (`page` counts from 1) and its page number."""
    page = int_arg(args, "page", 1, 1)
    return Query(**{k: args.get(k, "").strip() for k in FILTERS}, offset=(page - 1) * PAGE, limit=PAGE), page


def api_query(args: MultiDict) -> Query:
    """The JSON twin's query: the same filters, `offset` and `limit` (at most PAGE_MAX)."""
    fields = {k: args.get(k, "").strip() for k in FILTERS}
    return Query(**fields, offset=int_arg(args, "offset", 0, 0), limit=int_arg(args, "limit", PAGE, 0, PAGE_MAX))


@dataclass
class Column:
    """One response in the rubric grid."""

    row: dict[str, Any]
    label: str


@dataclass
class ExampleView:
    example: dict[str, Any]
    turns: list[dict[str, Any]]  # the later user turns (turn 2, 3, ...), each {"turn", "message", "reference"}
    threads: list[tuple[str, int, list[dict[str, Any]]]]  # (candidate, sample, its responses turn by turn)
    criteria: list[dict[str, Any]]
    columns: list[Column]
    cells: dict[tuple[str, str], dict[str, Any]]
    pairs: list[dict[str, Any]]
    labels: Mapping[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    scale: str = "binary"  # what a label gives: `met` (binary) or a `score` on this graded scale (labels_scale)


def example_view(
    example: dict[str, Any],
    responses: Sequence[dict[str, Any]],
    judgments: Sequence[dict[str, Any]],
    candidates: Sequence[str],
    default_rubric: Sequence[dict[str, Any]],
    labels: Mapping[tuple[str, str], list[dict[str, Any]]],
    summary: Mapping[str, Any] | None = None,
) -> ExampleView:
    """The example page: responses in the config's candidate order, then by sample and turn; the criteria of the
    example's rubric (else the config's default rubric for an open example), then any other criterion a judgment
    names (a judge-free `correct`)."""
    order = {c: i for i, c in enumerate(candidates)}
    resps = sorted(
        responses,
        key=lambda r: (
            order.get(r.get("candidate"), len(order)),
            str(r.get("candidate")),
            r.get("sample_index", 0),
            r.get("turn", 1),
        ),
    )
    threads: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in resps:
        threads.setdefault((str(r.get("candidate")), int(r.get("sample_index") or 0)), []).append(r)
    multi = len({r.get("turn", 1) for r in resps}) > 1
    columns = [Column(r, _label(r, multi)) for r in resps]
    rubric = example.get("rubric") or (
        [] if example.get("choices") or example.get("answer") is not None else default_rubric
    )
    criteria = [dict(c) for c in rubric if isinstance(c, dict) and c.get("id")]
    known = {c["id"] for c in criteria}
    cells, pairs = {}, []
    for j in judgments:
        if j.get("kind") == "pairwise":
            pairs.append(j)
            continue
        cid = str(j.get("criterion_id"))
        cells[(cid, str(j.get("response_id")))] = j
        if cid not in known:
            known.add(cid)
            criteria.append({"id": cid, "text": AUTO_TEXT.get(cid, ""), "weight": j.get("weight")})
    later = example.get("later_turns") or []
    turns = [
        {"turn": i + 2, "message": t.get("message") or {}, "reference": t.get("reference")}
        for i, t in enumerate(later)
        if isinstance(t, dict)
    ]
    scale = labels_scale(summary, str(example.get("dataset") or ""), cells.values())
    return ExampleView(
        example, turns, [(c, s, rs) for (c, s), rs in threads.items()], criteria, columns, cells, pairs, labels, scale
    )


def labels_scale(summary: Mapping[str, Any] | None, dataset: str, judgments: Any = ()) -> str:
    """What a label on `dataset` gives, as data/labels.py reads it for `datasets[].labels`: `binary` (`met`) or a
    graded scale's name (a `score` on it). The finished run's metric says (results/label_sheet.py asks the same);
    a run without its summary yet goes by its judgments' scale."""
    if summary and dataset in (summary.get("datasets") or {}):
        return label_scale(summary, dataset)
    graded = {j.get("scale") for j in judgments} & SCALES.keys()
    return graded.pop() if len(graded) == 1 else "binary"


def scale_points(scale: str) -> list[int]:
    """The whole scores of a graded scale, one button each ([] for binary)."""
    lo, hi = SCALES.get(scale, (1, 0))
    return list(range(int(lo), int(hi) + 1))


def _label(r: dict[str, Any], multi: bool) -> str:
    parts = [str(r.get("candidate"))]
    if r.get("sample_index"):
        parts.append(f"sample {r['sample_index']}")
    if multi:
        parts.append(f"turn {r.get('turn', 1)}")
    return " · ".join(parts)


def criterion_ids(view: ExampleView, response_id: str) -> set[str]:
    """The criteria a response can be labelled on: its example's, and those its judgments name."""
    return {c["id"] for c in view.criteria} | {cid for cid, rid in view.cells if rid == response_id}


def flips(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """compare.json's flips of every dataset, in one list (each with its dataset)."""
    return [dict(f) for d in data["datasets"].values() for f in d.get("flips") or ()]


def choices(index: RunIndex, default_rubric: Sequence[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """The list page's filter choices, (value, what the menu shows): a criterion with the start of its text (from
    the rows' rubrics, else the config's default rubric, else the judge-free criterion's)."""
    out = {k: [(n, n) for n, _ in search.names(index, k)] for k in ("dataset", "candidate", "judge")}
    texts = {**AUTO_TEXT, **{str(c["id"]): str(c.get("text") or "") for c in default_rubric}}
    out["criterion"] = [
        (n, f"{n}: {_cut(t, 60)}" if (t := label or texts.get(n)) else n)
        for n, label in search.names(index, "criterion")
    ]
    return out


def _text(content: Any) -> str:
    return rows.text_of(content) if not isinstance(content, str) else content


def snippets(index: RunIndex, hits: Sequence[Hit]) -> dict[int, tuple[str, str]]:
    """Each hit's prompt (its example's last message) and response text, cut to SNIPPET characters."""
    resps = rows.read_rows(index.run_dir / "responses.jsonl", [h.span for h in hits])
    spans = list(dict.fromkeys(h.example_span for h in hits if h.example_span))
    exs = dict(zip(spans, rows.read_rows(index.run_dir / "examples.jsonl", spans), strict=True))
    out = {}
    for h, r in zip(hits, resps, strict=True):
        msgs = (exs.get(h.example_span) or {}).get("messages") or [{}]
        prompt = _text(msgs[-1].get("content")) if isinstance(msgs[-1], dict) else ""
        text = r.get("text") if r.get("status") == "ok" else r.get("error")
        out[h.n] = (_cut(prompt), _cut(text or ""))
    return out


def _cut(text: str, most: int = SNIPPET) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"
