"""The benchmarks, listed: the only module that names them all. Everything that needs to know which benchmark a
row, a metric or a judging scale belongs to asks here (the loader receives `TASKS`, `Judging` its protocol, the
metric driver a `Metric`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..config import Config, ModelConfig
from ..judging.answers import AUTO_CRITERION
from ..judging.protocol import BINARY, GRADED_1_5, JudgeProtocol, judge_offset
from ..judging.rubric import JudgeItem, Judging, assign_judges
from ..providers.base import BaseProvider
from ..types import Criterion, Example, Response
from . import healthbench, meta_eval, mt_bench, multiple_choice, prbench, rubric
from .spec import Metric, Section, Task, Values

TASKS: tuple[Task, ...] = (
    prbench.TASK,
    meta_eval.TASK,  # before HealthBench: its rows carry prompt_id and a list prompt too
    healthbench.TASK,
    mt_bench.TASK,
    multiple_choice.TASK,
    multiple_choice.QA_TASK,
    rubric.TASK,
)
FORMATS: tuple[str, ...] = tuple(t.name for t in TASKS)  # detection order
_METRIC_LIST = (
    multiple_choice.ACCURACY,
    healthbench.METRIC,
    prbench.METRIC,
    rubric.RUBRIC,
    mt_bench.METRIC,
    rubric.RUBRIC_GRADED,
    meta_eval.METRIC,
)
METRICS: dict[str, Metric] = {m.name: m for m in _METRIC_LIST}  # a dataset's majority vote ties in this order
_TASKS = {t.name: t for t in TASKS}
_PROTOCOLS: dict[str, JudgeProtocol] = {
    "binary": BINARY,
    "1-5": GRADED_1_5,
    **{scale: p for t in TASKS for scale, p in t.protocols.items()},
}
# responses_from rows of a task's own shape (data.answers_file.load_answers' readers).
ANSWER_READERS = tuple((t.answers_shape, t.answers) for t in TASKS if t.answers is not None)


def task_of(ex: Example) -> Task:
    """The task whose schema read the example (metadata["format"]); for an example of no registered format, the
    generic rubric task (whose every setting is the config's)."""
    return _TASKS.get(ex.metadata.get("format"), rubric.TASK)  # type: ignore[arg-type]


def metric(name: str) -> Metric:
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r} (expected one of {', '.join(METRICS)})")
    return METRICS[name]


def metric_of(ex: Example) -> str:
    """The metric an example's schema calls for: its task's, except that a row of a judge-free task (MC, QA)
    carrying its own rubric is judged on it (rubric). An example of no registered format: accuracy for one with a
    choice or answer and no rubric, else rubric."""
    fmt = ex.metadata.get("format")
    t = _TASKS.get(fmt)  # type: ignore[arg-type]
    if t is not None:
        return (rubric.RUBRIC if ex.rubric and t.metric.scale == "auto" else t.metric).name
    if fmt is None and ex.kind != "open" and not ex.rubric:
        return multiple_choice.ACCURACY.name
    return rubric.RUBRIC.name


def section_of(metric: str) -> Section:
    """How a dataset of this metric is shown (its task's `Section`; a metric this version does not know, as in an
    older run folder: the candidates' leaderboard)."""
    return METRICS[metric].section if metric in METRICS else Section()


def metric_of_counts(counts: Mapping[str, int], override: str | None = None) -> str:
    """`override` (datasets[].metric) if set; else the metric most rows call for (metric_of counts; ties: METRICS
    order), so a run can count as it goes."""
    if override is not None:
        return metric(override).name
    if not any(counts.values()):
        return rubric.RUBRIC.name
    return max(METRICS, key=lambda m: counts.get(m, 0))  # the first of equal counts: METRICS order


def metric_on_scale(name: str, scale: str) -> str:
    """The metric a judged dataset gets on a graded scale (judge-free and graded metrics stay as they are)."""
    if scale == "binary" or METRICS[name].scale != "binary":
        return name
    return next(m.name for m in METRICS.values() if m.scale == scale)


def on_error_for(configured: str | None, metric_name: str) -> str:
    """`judging.on_error` when set, else the metric's default."""
    return configured if configured is not None else METRICS[metric_name].on_error


def protocol_for(scale: str) -> JudgeProtocol:
    return _PROTOCOLS[scale]


def hidden_reference(ex: Example) -> bool:
    """judging.reference auto hides this example's reference (its task shows it only when asked)."""
    return not task_of(ex).reference_in_auto


def judging_for(cfg: Config, stack: BaseProvider) -> Judging:
    """The one place a Judging is built: the run's scale's protocol."""
    return Judging(cfg, stack, protocol_for(cfg.judging.scale), hidden_reference=hidden_reference)


def rubric_for(ex: Example, cfg: Config) -> tuple[Criterion, ...]:
    """What the judge is asked about: the example's own rubric; else, for open-ended examples, the config's default
    rubric. The scale's rating criterion (one rating of the whole answer, MT-Bench's 1-10) replaces them, for every
    example that has a rubric or is open-ended."""
    rating = protocol_for(cfg.judging.scale).rating_criterion
    if rating is not None and (ex.rubric or ex.kind == "open"):
        return (rating,)
    if ex.rubric:
        return ex.rubric
    if ex.kind == "open" and cfg.judging.default_rubric:
        return tuple(
            Criterion(id=c.id or f"d{i + 1}", text=c.text, weight=c.weight, tags=tuple(c.tags), category=c.category)
            for i, c in enumerate(cfg.judging.default_rubric)
        )
    return ()


def criteria_for(ex: Example, cfg: Config) -> tuple[Criterion, ...]:
    """What a response to `ex` is scored on: its rubric (see rubric_for), else the judge-free `correct` criterion
    for multiple choice and QA; nothing for an open-ended example without a rubric."""
    return rubric_for(ex, cfg) or ((AUTO_CRITERION,) if ex.kind != "open" else ())


def judge_items(cfg: Config, ex: Example, r: Response) -> list[JudgeItem]:
    """One item per criterion of an answered response, with its task's judges per criterion and tie rule (else the
    config's). `ex` is the turn's view of the example: the judge sees the conversation up to the judged answer."""
    pool = cfg.judge_pool
    rubric = rubric_for(ex, cfg) if r.status == "ok" and pool else ()
    if not rubric:
        return []
    t = task_of(ex)
    per_criterion = t.judges_per_criterion(cfg) if t.judges_per_criterion else cfg.judging.judges_per_criterion
    on_tie = t.on_tie or cfg.judging.on_tie
    judges = assign_judges(len(rubric), len(pool), per_criterion, judge_offset(ex.id) % len(pool))
    return [JudgeItem(r, ex, c, tuple(js), on_tie) for c, js in zip(rubric, judges, strict=True)]


def candidates_for(cfg: Config, ex: Example) -> tuple[ModelConfig, ...]:
    """Who answers `ex`: its task's own candidates (a task that replays its rows' answers), else the config's."""
    t = task_of(ex)
    return t.candidates(cfg) if t.candidates else tuple(cfg.candidates)


def answers_itself(ex: Example) -> bool:
    """Whether the example's task replays its own answer (a judge meta-evaluation row): no candidate answers it."""
    return task_of(ex).candidates is not None


def regroup(ex: Example, values: Values) -> Values:
    """A response's values regrouped by its task (the example's own category), else as they are."""
    t = task_of(ex)
    return t.regroup(ex, values) if t.regroup else values


def check_config(cfg: Config) -> None:
    """What the config says of benchmarks: each dataset's format and metric are registered (the message a Literal
    gave), a graded metric comes with its judging.scale, and a protocol with its own prompts takes no
    prompt_template. Raises cfg.fail(key, ...), which names the file and the key's line."""
    for i, d in enumerate(cfg.datasets):
        if d.format not in ("auto", *FORMATS):
            raise cfg.fail(f"datasets[{i}].format", f"expected one of {_choices(('auto', *FORMATS))}, got {d.format!r}")
        if d.metric is None:
            continue
        if d.metric not in METRICS:
            raise cfg.fail(f"datasets[{i}].metric", f"expected one of {_choices(METRICS)}, got {d.metric!r}")
        needs = METRICS[d.metric].scale
        if needs in _PROTOCOLS and needs != "binary" and cfg.judging.scale != needs:
            raise cfg.fail(
                f"datasets[{i}].metric", f"{d.metric} reads graded judgments: it needs judging.scale {needs}"
            )
    scale = cfg.judging.scale
    owner = next((t for t in TASKS if scale in t.protocols and t.protocols[scale].template is None), None)
    if owner is not None and cfg.judging.prompt_template:
        raise cfg.fail(
            "judging.prompt_template",
            f"scale {scale} judges with {owner.title or owner.name}'s own prompts; drop one of the two",
        )


def check_example(cfg: Config, ex: Example) -> None:
    """What the config must hold for this example's task, checked as preflight reads it: candidates to answer it
    (unless its task replays its own answers), and for a task that computes its own results (a judge
    meta-evaluation) judges and the scale its metric reads. Raises cfg.fail(key, ...)."""
    t = task_of(ex)
    if t.candidates is None:
        if not cfg.candidates:
            raise cfg.fail("candidates", f"at least one candidate is required: {ex.source} is answered by them")
        return
    m = t.metric
    if m.accumulator is not None and not cfg.judge_pool:
        raise cfg.fail("judges", f"{m.name} ({ex.source}) has every judge grade every row: add judges")
    if m.accumulator is not None and m.scale != cfg.judging.scale:
        raise cfg.fail("judging.scale", f"{m.name} ({ex.source}) reads {m.scale} verdicts: set judging.scale {m.scale}")


def _choices(names: Sequence[str]) -> str:
    return " | ".join(repr(n) for n in names)
