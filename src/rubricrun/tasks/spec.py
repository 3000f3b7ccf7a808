"""What a benchmark module declares: its `Task` (how its rows are read and judged, which metric they call for) and
its `Metric` (per-response values, aggregate, clip, defaults, source, report section). Data and signatures only: the
loader (`data.schemas.RowSchema`), `judging.rubric.Judging`, `results.metrics` (which implements `Agg`) and
`tasks.registry` read them. The sources' test vectors are in tests/vectors.py."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

if TYPE_CHECKING:  # declarations only: nothing here runs the code these name
    from ..config import Config, ModelConfig
    from ..data.schemas import Built, CriterionReader, Fail, Row
    from ..judging.protocol import JudgeProtocol
    from ..types import Criterion, Example, Judgment, Response

Marks = Sequence[bool] | Sequence[float]  # binary: met flags; graded: each criterion's share of its scale
Values = dict[str, float]  # "score": the headline's value; "category:<c>", "tag:<t>", "field:<f>", "turn:<n>", ...
Clip = Callable[[float], float]


class Agg(Protocol):
    """One candidate's scored examples on one dataset (results/metrics.py implements it)."""

    headline: Sequence[float]  # per-example "score", in example-id order (a float64 buffer: memoryview takes it)

    def values(self, key: str) -> Sequence[float]: ...  # per-example values of one key, in example-id order

    def groups(self, prefix: str, clip: Clip = float) -> dict[str, dict[str, Any]]: ...  # {g: {score, std, n}}

    def rated(self, kinds: Sequence[str]) -> dict[str, Any]: ...  # graded: scale, rating, rating_ci, by_<kind>


class CandidateResult(msgspec.Struct, frozen=True, kw_only=True):
    """One candidate on one dataset, as summary.json's `datasets[].candidates` holds it (results/summary_types.py
    DatasetCandidate adds `ppi`); a default is what an older summary that lacks the key reads."""

    score: float | None = None  # the headline; None when nothing could be scored
    ci: tuple[float | None, float | None] = (None, None)  # percentile bootstrap over examples, clipped as the headline
    std: float | None = None  # std (ddof 0) of the bootstrap headlines
    n: int = 0  # examples scored
    coverage: float | None = None  # share of expected responses fully judged (status ok, each criterion judged)
    partial: int = 0  # responses with status ok whose criteria are not all judged (error or missing)
    scored: int = 0  # responses that entered the score
    expected: int = 0  # responses the run should have produced
    histogram: tuple[int, ...] = ()  # per-example scores in 10 equal bins over [0, 1] (outside values: edge bins)
    by_example_category: dict[str, float] = msgspec.field(default_factory=dict)  # mean per-example score per category
    extra: dict[str, Any] = msgspec.field(default_factory=dict)  # the metric's own: beside the others in the file


@dataclass(frozen=True)
class DatasetResult:
    """A dataset's metric, the judge-failure policy that applied, one result per candidate (per leaderboard row),
    dataset-level figures of the metric (`extra`, empty for most), and per candidate its per-example headline values
    (results.accum.ByExample; none for a judge meta-evaluation's judges), for paired differences."""

    name: str
    metric: str
    on_error: str
    candidates: dict[str, CandidateResult] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    per_example: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AccSpec:
    """What a dataset accumulator is built from."""

    name: str
    metric: Metric
    on_error: str
    n_boot: int
    seed: int
    samples: Mapping[str, int] | None
    ids: Any  # results.accum.ExampleIds, opaque here


class DatasetAccumulator(Protocol):
    def add(
        self,
        ex: Example,
        responses: Sequence[Response],
        judgments: Sequence[Judgment],
        criteria: Sequence[Criterion] | None = None,
        pos: int | None = None,
    ) -> None: ...

    def result(self) -> DatasetResult: ...


@dataclass(frozen=True)
class Section:
    """How a metric's results are shown beyond the leaderboard table."""

    rows: str = "candidate"  # what a leaderboard row is ("judge" for a judge meta-evaluation)
    template: str | None = None  # a partial in tasks/templates/, shown after the dataset's table
    console: Callable[[str, Mapping[str, Any]], list[str]] | None = None  # (dataset, its summary dict) -> lines


def figure(x: float | None, signed: bool = False) -> str:
    """A figure as console lines write it: 4 decimals (`signed`: with its sign); "–" when there is none."""
    return "–" if x is None else f"{x:+.4f}" if signed else f"{x:.4f}"


def interval(ci: Sequence[float | None] | None, signed: bool = False) -> str:
    lo, hi = ci if ci else (None, None)
    return f"[{figure(lo, signed)}, {figure(hi, signed)}]"


@dataclass(frozen=True)
class Metric:
    name: str  # summary.json "metric", datasets[].metric
    scale: Literal["auto", "binary", "1-5", "1-10"]  # the judgments it reads
    source: str  # what it reproduces: repository, file, commit
    values: Callable[[Example, Sequence[Criterion], Marks, int], Values]  # (ex, criteria, marks, turn)
    clip: Clip = float  # the headline's (and its CI's) clip
    aggregate: Callable[[Agg], dict[str, Any]] = lambda agg: {}  # the metric's extra fields, in order
    on_error: Literal["exclude", "not_met"] = "exclude"  # judging.on_error default
    accumulator: Callable[[AccSpec], DatasetAccumulator] | None = None  # None: results' per-candidate one
    section: Section = Section()


@dataclass(frozen=True)
class Task:
    """One benchmark's rows: implements data.schemas.RowSchema (name, detect, build, reference_per_turn)."""

    name: str  # datasets[].format; Example.metadata["format"]
    detect: Callable[[Row, Collection[str]], bool]
    build: Callable[[Row, Fail], Built]
    metric: Metric  # the metric its rows call for
    native_fields: tuple[str, ...] = ()  # its keys `fields:` may map
    criterion_reader: CriterionReader | None = None  # criteria of its own shape, read in any row's rubric
    reference_in_auto: bool = True  # judging.reference auto shows the reference
    reference_per_turn: bool = False  # an explicit `reference` key is per turn (the builder reads it)
    regroup: Callable[[Example, Values], Values] | None = None  # the example's own breakdowns
    answers: Callable[[Mapping[str, Any], Fail], list[tuple[tuple[str, int], str]] | None] | None = None
    answers_shape: str = ""  # what rows `answers` reads, for the error on a row nothing reads
    candidates: Callable[[Config], tuple[ModelConfig, ...]] | None = None  # None: cfg.candidates
    judges_per_criterion: Callable[[Config], int] | None = None  # None: the config's
    on_tie: str | None = None  # None: judging.on_tie
    protocols: Mapping[str, JudgeProtocol] = field(default_factory=dict)  # scales whose protocol it owns
    title: str = ""  # how messages name the benchmark ("MT-Bench"); "": its name
