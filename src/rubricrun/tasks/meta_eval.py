"""The judge meta-evaluation (issue 22): each judge of the pool against human labels of the same rows, beside the
humans against each other. The figures are tasks/judge_eval.py's, checked against openai/simple-evals
`healthbench_meta_eval.py` (.agent/plans/015-judge-meta-eval.md).

A row (`meta_row`: HealthBench's keys, `KEYS`, or generic names mapped with `fields:`) is one conversation,
completion and criterion with the humans' met / not-met labels. No candidate is called: the synthetic candidate
`completion` replays the row's completion. Every judge grades every row and each judge's verdict is read from the
votes; the combined verdict (a tie is an error) is not read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import ModelConfig
from ..data.schemas import Built, Fail, Row, _messages, content_id, fail_at, type_name
from ..types import Criterion, Example, Judgment, Response
from .judge_eval import Agreement, JudgeEval, human_baseline, judge_meta_eval
from .judge_eval import Metric as Figure
from .spec import AccSpec, CandidateResult, DatasetResult, Metric, Section, Task, figure, interval

SOURCE = "openai/simple-evals healthbench_meta_eval.py (5e623c2b)"
# HealthBench's meta-eval keys for meta_row's generic names (a dataset's `fields:` overrides them).
KEYS = {
    "prompt": "prompt",
    "response": "completion",
    "criterion": "rubric",
    "labels": "binary_labels",
    "rater_ids": "anonymized_physician_ids",
}
COMPLETION = ModelConfig(name="completion", response_column="completion")  # replays the row's completion
_VERDICT = {"met": True, "not_met": False}  # error (or no verdict): None
# JudgeEval's figures a judge's leaderboard row carries under their own names.
_AS_THEY_ARE = ("kappa", "kappa_n", "kappa_ties", "leniency", "judge_met", "human_met", "failures", "no_labels")


# The generic names a row may use (`fields:` maps them as a dataset's does): data/README.md.
META_FIELDS = tuple("messages prompt response criterion labels category rater_ids prompt_id completion_id".split())
_LABEL_WORDS = {"met": True, "not met": False, "not_met": False, "true": True, "false": False}


@dataclass(frozen=True)
class MetaRow:
    prompt_id: str
    completion_id: str
    messages: tuple[dict[str, Any], ...]  # the conversation before the completion
    completion: str
    criterion: str
    category: str  # "" when the row names none
    labels: tuple[bool, ...]  # the humans' verdicts: True met
    rater_ids: tuple[str, ...]  # one per label, or () when the row names no raters


def _label(value: Any, key: str, fail: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _LABEL_WORDS:
        return _LABEL_WORDS[value.strip().lower()]
    fail(key, f"expected a label (true/false, 1/0, met/not met), got {value!r}")


def _labels(r: Row, fail: Any) -> tuple[tuple[bool, ...], tuple[str, ...]]:
    raw = r.get("labels")
    if raw is None:
        fail(r.key("labels"), "missing (the human labels of the criterion)")
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        fail(r.key("labels"), "the label list is empty")
    labels = tuple(_label(v, f"{r.key('labels')}[{i}]", fail) for i, v in enumerate(items))
    ids = r.get("rater_ids")
    if ids is None:
        return labels, ()
    if not isinstance(ids, list) or len(ids) != len(labels):
        fail(r.key("rater_ids"), f"expected a list of {len(labels)} rater ids (one per label), got {ids!r}")
    return labels, tuple(str(i) for i in ids)


def _text(r: Row, name: str, fail: Any, *, required: bool = True) -> str:
    value = r.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        fail(r.key(name), "missing" if value is None else f"expected a non-empty string, got {type_name(value)}")
    return value


def meta_row(
    row: Mapping[str, Any],
    *,
    fields: Mapping[str, str] | None = None,
    fail: Fail | None = None,
    file: str = "",
    line: int = 0,
) -> MetaRow:
    """One row as a MetaRow (its names mapped by `fields`); a problem calls `fail(key, message)`, by default an
    InputError naming `file`, `line` and the key."""

    fail = fail or fail_at(file or None, line or None)
    if not isinstance(row, Mapping):
        fail(None, f"expected a JSON object, got {type_name(row)}")
    for name in fields or {}:
        if name not in META_FIELDS:
            fail(f"fields.{name}", f"unknown field name (accepted: {', '.join(META_FIELDS)})")
    r = Row(dict(row), dict(fields or {}))
    name = "messages" if r.get("messages") is not None else "prompt"
    prompt = r.get(name)
    if prompt is None:
        fail(r.key("prompt"), "missing (the conversation before the completion)")
    labels, rater_ids = _labels(r, fail)
    return MetaRow(
        prompt_id=str(r.get("prompt_id", line)),
        completion_id=str(r.get("completion_id", line)),
        messages=tuple(_messages(prompt, r.key(name), fail)),
        completion=_text(r, "response", fail),
        criterion=_text(r, "criterion", fail),
        category=_text(r, "category", fail, required=False),
        labels=labels,
        rater_ids=rater_ids,
    )


def _build(row: Row, fail: Fail) -> Built:
    """The row as an example: its conversation, one criterion, the completion to replay, the labels in metadata.
    Its id: the completion id (else a hash of the conversation and completion) and a hash of the criterion, since a
    completion is graded on several criteria."""
    native = row.row
    shaped = "binary_labels" in native or "completion" in native  # HealthBench's keys, else the generic names
    fields = {**(KEYS if shaped else {}), **row.fields}
    m = meta_row(native, fields=fields, fail=fail)
    r = Row(native, fields)
    named = r.get("completion_id") is not None
    completion_id = m.completion_id if named else content_id([m.messages, m.completion])
    return Built(
        messages=list(m.messages),
        id=f"{completion_id}/{content_id([m.criterion])}",
        id_key=r.key("completion_id") if named else None,  # a duplicate is named by it
        rubric=(Criterion(id="c1", text=m.criterion, weight=1.0, category=m.category or None),),
        prefilled={COMPLETION.response_column: m.completion},
        metadata={
            "prompt_id": m.prompt_id if r.get("prompt_id") is not None else None,
            "completion_id": completion_id,
            "category": m.category,
            "labels": list(m.labels),
            "rater_ids": list(m.rater_ids),
        },
    )


class MetaEvalAcc:
    """A meta-eval dataset fed one example (row) at a time: the row's human labels, rater ids and category, and each
    judge's verdict of it (True met, False not met, None failed or never given). `result()` has the figures."""

    def __init__(self, spec: AccSpec) -> None:
        self.spec = spec
        self.humans: list[tuple[bool, ...]] = []
        self.raters: list[tuple[str, ...]] = []
        self.categories: list[str] = []
        self.verdicts: dict[str, list[bool | None]] = {}  # judge -> one per row

    def add(
        self,
        ex: Example,
        responses: Sequence[Response],
        judgments: Sequence[Judgment],
        criteria: Sequence[Criterion] | None = None,
        pos: int | None = None,
    ) -> None:
        md = ex.metadata
        labels = tuple(bool(x) for x in md.get("labels") or ())
        raters = tuple(str(x) for x in md.get("rater_ids") or ())
        self.humans.append(labels)
        self.raters.append(raters if len(raters) == len(labels) else ())
        self.categories.append(str(md.get("category") or ""))
        rows = len(self.humans)
        for j in judgments:
            if j.judge.startswith("auto:"):
                continue
            for v in j.votes or ({"judge": j.judge, "verdict": j.verdict},):
                column = self.verdicts.setdefault(v["judge"], [])
                column.extend([None] * (rows - len(column)))  # a judge first seen here: None for the rows before
                column[-1] = _VERDICT.get(v["verdict"])
        for column in self.verdicts.values():
            column.extend([None] * (rows - len(column)))

    def result(self) -> DatasetResult:
        spec = self.spec
        judges = {
            name: _judge_result(judge_meta_eval(v, self.humans, self.categories, n_boot=spec.n_boot, seed=spec.seed))
            for name, v in self.verdicts.items()
        }
        extra = {"human_baseline": self._baseline()} if self.humans else {}
        return DatasetResult(spec.name, spec.metric.name, "exclude", judges, extra)

    def _baseline(self) -> dict[str, Any]:
        """The humans against each other (leave one out). Per rater only when every row names its raters."""
        named = all(self.raters)
        ids = self.raters if named else [tuple(f"?{k}" for k in range(len(h))) for h in self.humans]
        hb = human_baseline(self.humans, ids, self.categories, n_boot=self.spec.n_boot, seed=self.spec.seed)
        return {
            "weighted": _figure(hb.weighted) if named else None,
            "pooled": _agreement(hb.pooled),
            "raters": len(hb.per_rater) if named else None,
            "rows": len(self.humans),
            "by_category": {
                c: {
                    "weighted": _figure(hb.weighted_by_category[c]) if named else None,
                    "pooled": _agreement(a),
                }
                for c, a in hb.pooled_by_category.items()
            },
            "per_rater": {r: _figure(a.f1_balanced) for r, a in hb.per_rater.items()} if named else {},
        }


def _figure(m: Figure) -> dict[str, Any]:
    return {"score": m.value, "n": m.n}


def _agreement(a: Agreement) -> dict[str, Any]:
    """A balanced F1 as the report shows it: score, its CI, the rows it rests on and HealthBench's n (pairs)."""
    return {"score": a.f1_balanced.value, "ci": a.ci, "n": a.rows, "f1_n": a.f1_balanced.n}


def _judge_result(e: JudgeEval) -> CandidateResult:
    """One judge as a leaderboard row: the score is the balanced F1, n the rows in it, partial its failures."""
    a = e.overall
    return CandidateResult(
        score=a.f1_balanced.value,
        ci=a.ci or (None, None),
        n=a.rows,
        coverage=(e.rows - e.failures) / e.rows if e.rows else None,
        partial=e.failures,
        extra={
            "f1_n": a.f1_balanced.n,
            "f1_met": a.f1_pos.value,
            "f1_not_met": a.f1_neg.value,
            **{k: getattr(e, k) for k in _AS_THEY_ARE},
            "f1_note": _why_none(e) if a.f1_balanced.value is None else None,
            "by_category": {c: _agreement(x) for c, x in e.by_category.items()},
        },
        scored=a.rows,
        expected=e.rows,
    )


def _why_none(e: JudgeEval) -> str:
    """Why a judge has no balanced F1 (HealthBench gives none when a class has no pair to measure it)."""
    if e.overall.rows == 0:
        return "no row judged"
    if e.judge_met in (0.0, 1.0):
        return f"the judge said {'met' if e.judge_met else 'not met'} on every row"
    return "the humans' labels are all of one kind"


def console_lines(name: str, d: Mapping[str, Any]) -> list[str]:
    """One line per judge, best first, and one for the humans (`d`: the dataset's summary.json entry)."""
    out = []
    for row in d.get("leaderboard") or ():
        c = d["candidates"][row["candidate"]]
        out.append(
            f"{name}  judge {row['candidate']}: balanced F1 {figure(c['score'])} {interval(c['ci'])} (n={c['n']}"
            f"{'; ' + c['f1_note'] if c.get('f1_note') else ''}), kappa {figure(c.get('kappa'))}, leniency "
            f"{figure(c.get('leniency'), True)} ({figure(c.get('judge_met'))} vs humans "
            f"{figure(c.get('human_met'))}), failures {c.get('failures', 0)}"
        )
    base = (d.get("extra") or {}).get("human_baseline")
    if base:
        weighted = base.get("weighted") or {}
        raters = f" weighted over {base['raters']} raters" if base.get("raters") else " (no rater ids)"
        pooled = base["pooled"]
        out.append(
            f"{name}  humans (leave one out): balanced F1 {figure(weighted.get('score'))}{raters}, pooled "
            f"{figure(pooled['score'])} {interval(pooled['ci'])}"
        )
    return out


METRIC = Metric(
    name="judge_meta_eval",
    scale="binary",
    source=SOURCE,
    values=lambda ex, criteria, marks, turn: {},  # a row's figures need the other rows: MetaEvalAcc has them
    accumulator=MetaEvalAcc,
    section=Section(rows="judge", template="meta_eval.html.j2", console=console_lines),
)

TASK = Task(
    name="meta_eval",
    detect=lambda row, keys: "binary_labels" in keys and "completion" in keys,
    build=_build,
    metric=METRIC,
    native_fields=tuple(n for n in META_FIELDS if n not in ("messages", "prompt", "category", "prompt_id")),
    candidates=lambda cfg: (COMPLETION,),
    judges_per_criterion=lambda cfg: max(1, len(cfg.judge_pool)),  # every judge grades every row
    on_tie="error",
)
