"""report.html: one self-contained, offline page for a run, rendered from templates/report.html.j2 with its CSS and
JavaScript inlined; Jinja2 autoescapes every value. It shows the summary as results/summary.py computed it
(nothing is recomputed here). Per-example data is embedded once as JSON with Jinja's `tojson`, which escapes "<",
">", "&" and "'", so model text can never close the script; the page's JS renders it with textContent only.
"""

from __future__ import annotations

import heapq
import json
import logging
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from ..judging.answers import AUTO_CRITERION
from ..tasks import registry
from ..types import Criterion, Example, Judgment, Response, Score
from . import artifacts
from .charts import dataset_radar, histogram_svg
from .scoring import score_response
from .summary_types import DatasetSummary, Summary, read_summary

FAILURE_CAP = 100
# Characters of one text the page shows at most (a prompt, a response, an explanation, an error, a name): a 50 MB row
# makes a page of about this much, not of 50 MB. The cut text ends saying how much is left out and which file of the
# run folder holds it whole.
FIELD_CHARS = 20_000
REPORT_EXAMPLES = 200  # examples the page embeds at most: the first half in input order, then the worst (see sample)
AUTO_TEXT = {AUTO_CRITERION.id: AUTO_CRITERION.text}  # the judge-free criterion, which no rubric holds
NAV = ("Datasets", "Pairwise", "Judges", "Costs", "Failures", "Examples")
TEMPLATES = Path(__file__).parent / "templates"
TASK_TEMPLATES = Path(registry.__file__).parent / "templates"

log = logging.getLogger("rubricrun")
T = TypeVar("T")


def _num(x: Any, nd: int = 3) -> Any:
    return "–" if x is None else f"{x:.{nd}f}" if isinstance(x, float) else x


def _usd(x: float | None, missing: str = "–") -> str:
    return missing if x is None else f"${x:.4f}"


def _breakable(name: str) -> str:
    """A category or tag name that may wrap after "_" and ":" (a zero-width space: text, not markup)."""
    return name.replace("_", "_\u200b").replace(":", ":\u200b")


def _xpos(v: float, width: int = 360, pad: int = 8) -> str:
    """x coordinate of a score in [0, 1] on the leaderboard's CI strip."""
    return f"{pad + max(0.0, min(1.0, v)) * (width - 2 * pad):.1f}"


def _extras_of(d: DatasetSummary) -> tuple[list[str], dict[str, list[str]]]:
    """A dataset's metric-specific fields, for display: the names of the numeric ones (mean_normalized, ...; a
    count such as `unscorable` only where it is not 0), and each breakdown (by_tag, by_category, by_field:
    {group: {"score", "n", ...}}) with its groups, sorted."""
    extras = [c.extra for c in d.candidates.values()]
    numeric = (k for e in extras for k, v in e.items() if isinstance(v, float) or (type(v) is int and v != 0))
    scalars = list(dict.fromkeys(numeric))
    breakdowns = {}
    for key in dict.fromkeys(k for e in extras for k, v in e.items() if isinstance(v, dict)):
        groups = sorted({g for e in extras for g in e.get(key) or {}})
        if groups:
            breakdowns[key] = groups
    return scalars, breakdowns


def clip(text: str, where: str = "the run folder's .jsonl files") -> str:
    """At most FIELD_CHARS characters of `text`; a longer one ends saying what is left out and where it is whole."""
    if len(text) <= FIELD_CHARS:
        return text
    return f"{text[:FIELD_CHARS]}… [{len(text) - FIELD_CHARS:,} more characters: the full text is in {where}]"


def _clipped(value: Any, where: str) -> Any:
    """Every string in a value (a message's content parts, choices) clipped."""
    if isinstance(value, str):
        return clip(value, where)
    if isinstance(value, list):
        return [_clipped(v, where) for v in value]
    if isinstance(value, dict):
        return {k: _clipped(v, where) for k, v in value.items()}
    return value


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([TEMPLATES, TASK_TEMPLATES]),  # a task's partial (tasks/templates/) too
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=lambda value: clip(value) if type(value) is str else value,  # our own Markup as it is
    )
    # tojson: compact and UTF-8 (the data block can be megabytes); Jinja still escapes <, >, & and '.
    env.policies["json.dumps_kwargs"] = {"ensure_ascii": False, "separators": (",", ":")}
    env.filters.update(num=_num, usd=_usd, breakable=_breakable, exhash=lambda eid: "#ex=" + quote(eid, safe=""))
    env.globals.update(xpos=_xpos, extras_of=_extras_of, nav=NAV, cap=FAILURE_CAP, section_of=registry.section_of)
    env.globals.update(radar=dataset_radar, histogram=histogram_svg)
    return env


@cache
def _asset(name: str) -> Markup:
    """Our own CSS or JS, inlined as is (autoescape would turn `a>b` into `a&gt;b` inside <style>)."""
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    if "</" in text:
        raise ValueError(f"{TEMPLATES / name}: contains '</', which would end the inline block")
    return Markup(text)


def _content(content: Any) -> Any:
    """A message's content for the page: a string as is; a list of content parts as [kind, value] pairs
    ("t" text, "i" image URL, "x" anything else as JSON) so the page can show text as text and images as a
    thumbnail (data: URL) or a link (http URL)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    parts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        image = part.get("image_url") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append(["t", part["text"]])
        elif kind == "image_url" and isinstance(image, (str, dict)):
            url = image if isinstance(image, str) else image.get("url")
            parts.append(["i", url] if isinstance(url, str) else ["x", json.dumps(part, ensure_ascii=False)])
        else:
            parts.append(["x", json.dumps(part, ensure_ascii=False)])
    return parts


def _verdicts(
    ex: Example, js: Sequence[Judgment], crit: list, judges: dict[str, int], criteria: Mapping | None
) -> list:
    """[criterion position, m|n|e, explanation, judge, error, votes] per judgment of a response (judges by their
    number in `judges`, which gives a new one the next); a criterion not in the example's own rubric (a config
    default rubric, an auto verdict) is appended to `crit`."""
    pos = {c[0]: i for i, c in enumerate(crit)}
    out = []
    for j in js:
        cid = clip(j.criterion_id)  # as the example's rubric above holds it
        if cid not in pos:
            c = (criteria or {}).get((ex.id, j.criterion_id))
            text = c.text if c is not None else AUTO_TEXT.get(cid, cid)
            pos[cid] = len(crit)
            crit.append([cid, clip(text, "config.yaml"), j.weight, None])
        votes = [
            [judges.setdefault(v.get("judge", "?"), len(judges)), (v.get("verdict") or "error")[0]]
            for v in j.votes or ()
        ]
        why, error = _clipped([j.explanation, j.error], "judgments.jsonl")
        out.append([pos[cid], j.verdict[0], why, judges.setdefault(j.judge, len(judges)), error, votes])
    return out


def _score(r: Response, js: Sequence[Judgment], scores: Mapping[str, Score] | None) -> float | None:
    """The response's normalized score: the run's own (scoring.score_all) when given; rebuilt from the judgments
    when the page is made from a finished run's files, which do not hold per-response scores."""
    value = None
    if scores is not None:
        s = scores.get(r.id)
        value = s.normalized if s else None
    elif js:
        crit = [Criterion(id=j.criterion_id, text="", weight=float(j.weight)) for j in js]
        value = score_response(crit, [j.verdict for j in js]).normalized
    return None if value is None else round(value, 4)


def _example_data(s: Summary, batches: Sequence[Batch]) -> dict[str, Any]:
    """Compact per-example data: each prompt and criterion text once, verdicts as 'm' / 'n' / 'e'."""
    # Candidate and judge names as small integers in the embedded data (each name written once).
    names = _candidates(s)
    seen = {r.candidate for b in batches for r in b[1]}
    cands = {c: i for i, c in enumerate(names + sorted(seen - set(names)))}
    judges: dict[str, int] = {}
    out = []
    for ex, responses, judgments, criteria, scores in batches:
        crit = [_clipped([c.id, c.text, c.weight, c.category], "examples.jsonl") for c in ex.rubric]
        j_by_resp: dict[str, list[Judgment]] = defaultdict(list)
        for j in judgments:
            j_by_resp[j.response_id].append(j)
        rows = []
        for r in sorted(responses, key=lambda r: (cands[r.candidate], r.sample_index)):
            js = j_by_resp.get(r.id, [])
            text, error = _clipped([r.text, r.error], "responses.jsonl")
            rows.append(
                [cands[r.candidate], r.sample_index, r.status, text, error]
                + [_score(r, js, scores), _verdicts(ex, js, crit, judges, criteria), r.turn]
            )
        msgs = [[m.get("role", "?"), _clipped(_content(m.get("content")), "examples.jsonl")] for m in ex.messages]
        ids = _clipped([ex.id, ex.dataset, ex.source], "examples.jsonl")
        item = dict(zip(("id", "ds", "src"), ids, strict=True)) | {"m": msgs, "k": crit, "r": rows}
        for key, short in (("reference", "ref"), ("answer", "ans"), ("choices", "ch")):
            if getattr(ex, key) is not None:
                item[short] = _clipped(getattr(ex, key), "examples.jsonl")
        out.append(item)
    shown = {k: [clip(n, "config.yaml") for n in v] for k, v in (("cands", cands), ("judges", judges))}
    return {**shown, "thr": s.pass_threshold, "ex": out}


def _candidates(s: Summary) -> list[str]:
    """The run's candidates in config order (the overall table lists them all), else as the datasets name them."""
    if s.overall is not None:
        return list(s.overall.candidates)
    rows = (d.candidates for d in s.datasets.values() if registry.section_of(d.metric).rows == "candidate")
    return list(dict.fromkeys(c for cands in rows for c in cands))


def _facts(s: Summary, shown: Sample) -> list[tuple[str, Any]]:
    """The header's facts, from the summary and the run's row counts (`shown`), which the summary does not hold."""
    calls = s.calls
    items = [
        ("examples", s.examples),
        ("candidates", len(_candidates(s))),
        ("responses", shown.responses),
        ("judgments", shown.judgments),
        ("response errors", shown.failed["responses"]),
        ("judgment errors", shown.failed["judgments"]),
        ("calls made", calls.made if calls else None),
        ("cache hits", calls.cache_hits if calls else None),
        ("call errors", calls.errors if calls else None),
        ("responses not done", s.responses_not_done),
        ("skipped rows", s.skipped_rows),
        ("pass threshold", s.pass_threshold),
        ("wall time (s)", s.wall_s),
        ("report generated", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())),
    ]
    return [(k, v) for k, v in items if v is not None]


def render_report(summary: Summary | Mapping[str, Any], shown: Sample) -> str:
    """The page of the examples `sample` picked. `summary` may be the typed Summary or summary.json's data."""
    s = summary if isinstance(summary, Summary) else read_summary(summary)
    return (
        _env()
        .get_template("report.html.j2")
        .render(
            s=s,
            facts=_facts(s, shown),
            failures=shown.failures,
            n_failures=shown.failed,
            data=_example_data(s, shown.batches),
            n_examples=len(shown.batches),
            n_total=shown.examples,
            css=_asset("report.css"),
            js=_asset("report.js"),
        )
    )


def write_report(run_dir: Path, summary: Summary | Mapping[str, Any], shown: Sample) -> Path:
    """Write run_dir/report.html atomically and return its path."""
    path = Path(run_dir) / "report.html"
    artifacts.write_text(path, render_report(summary, shown))
    return path


def safely(make: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """`make(*args, **kwargs)` (the sample, the page), or None (logged) when it fails: the page is a view, and a bug
    in it must never cost the run its other artifacts."""
    try:
        return make(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001
        log.error("report.html not written: %s: %s", type(exc).__name__, exc)
        return None


def write_report_from_dir(run_dir: Path, limit: int = REPORT_EXAMPLES) -> Path:
    """Rebuild report.html from a finished run's files, the per-response scores (not in them) from the judgments."""
    run = artifacts.load_run(run_dir)
    criteria = {(ex.id, c.id): c for ex in run.examples if not ex.rubric for c in run.default_rubric}
    batches = by_example(run.examples, run.responses, run.judgments, criteria)
    return write_report(run.path, read_summary(run.summary), sample(batches, limit))


# An example with its rows, the criteria of the run ((example id, criterion id) -> Criterion, or None) and the
# per-response scores (response id -> Score; None: rebuilt from the judgments).
Batch = tuple[Example, Sequence[Response], Sequence[Judgment], Mapping | None, Mapping | None]


def by_example(
    examples: Iterable[Example],
    responses: Iterable[Response],
    judgments: Iterable[Judgment],
    criteria: Mapping[tuple[str, str], Criterion] | None = None,
    scores: Mapping[str, Score] | None = None,
) -> Iterator[Batch]:
    """Each example with its own rows, in input order, as `sample` reads them."""
    rows: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for r in responses:
        rows[r.example_id][0].append(r)
    for j in judgments:
        rows[j.example_id][1].append(j)
    for ex in examples:
        yield ex, *rows[ex.id], criteria, scores


def _badness(rs: Sequence[Any], js: Sequence[Any], scores: Mapping | None) -> tuple[int, float]:
    """Sort key of the worst examples with no failed row (those come first, as (0, 0.0): `Sample.add` tells them
    apart): the lowest response score (unscored last)."""
    by_r: dict[str, list[Any]] = defaultdict(list)
    if scores is None:  # (the run's own scores need no judgments: the sampler's every example skips this)
        for j in js:
            by_r[j.response_id].append(j)
    values = [v for r in rs if (v := _score(r, by_r.get(r.id, []), scores)) is not None]
    return (1, min(values)) if values else (2, 0.0)


def sample(batches: Iterable[Batch], limit: int = REPORT_EXAMPLES) -> Sample:
    """At most `limit` examples, reading `batches` once: all when there are no more; else the first limit // 2 and
    the limit - limit // 2 worst of the rest (failed rows, then lowest scores), in input order. Holds `limit`
    examples' rows and FAILURE_CAP failed rows of each kind, whatever the run's size."""
    picked = Sample(limit)
    for batch in batches:
        picked.add(*batch)
    return picked


class Sample:
    """What a page shows (`sample`), fed one example at a time (the tally feeds it as the run goes): the picked
    examples with their rows, the run's row counts, its failed rows (the first FAILURE_CAP of each kind, counted)."""

    def __init__(self, limit: int = REPORT_EXAMPLES) -> None:
        self.limit = limit
        self.first: list[Batch] = []
        self.worst: list[tuple[tuple[int, float], int, Batch]] = []  # a max-heap by badness: keys negated
        self.failures: dict[str, list[Any]] = {"responses": [], "judgments": []}
        self.failed = {"responses": 0, "judgments": 0}
        self.examples = self.responses = self.judgments = 0

    def add(self, ex: Example, rs: Sequence[Response], js: Sequence[Judgment], crit: Any, sc: Any) -> None:
        i, limit = self.examples, self.limit
        self.examples, self.responses, self.judgments = i + 1, self.responses + len(rs), self.judgments + len(js)
        bad = any(r.status == "error" for r in rs) or any(j.verdict == "error" for j in js)
        if bad:  # (most examples: nothing failed, no lists to build)
            failed = (
                ("responses", [r for r in rs if r.status == "error"]),
                ("judgments", [j for j in js if j.verdict == "error"]),
            )
            for kind, got in failed:
                self.failed[kind] += len(got)
                self.failures[kind].extend(got[: FAILURE_CAP - len(self.failures[kind])])
        if i < limit // 2:
            self.first.append((ex, rs, js, crit, sc))
            return
        a, b = (0, 0.0) if bad else _badness(rs, js, sc)
        key = ((-a, -b), -i)
        if len(self.worst) >= limit - limit // 2 and key < self.worst[0][:2]:
            return  # not among the worst kept so far (-i makes every key unique)
        heapq.heappush(self.worst, (*key, (ex, rs, js, crit, sc)))
        if len(self.worst) > limit - limit // 2:
            heapq.heappop(self.worst)

    @property
    def batches(self) -> list[Batch]:
        """The picked examples in input order."""
        return self.first + [batch for _, _, batch in sorted(self.worst, key=lambda w: -w[1])]


if __name__ == "__main__":  # python -m rubricrun.results.report outputs/<run_id>
    for d in sys.argv[1:]:
        print(write_report_from_dir(Path(d)))
