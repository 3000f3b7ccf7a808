"""The whole vocabulary of rubricrun: every row written to disk is one of these frozen dataclasses.

Rows are written with `to_row()` (a plain dict in field order) and never from ad-hoc dicts. The summary types at the
end are written with `summary_row()` and read back with `from_row()`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

Role = Literal["candidate", "judge", "synthesis"]
Verdict = Literal["met", "not_met", "error"]


_ATOMS = frozenset({str, int, float, bool, type(None)})


# A field with this metadata is kept in memory but left out of the row (to_row): `cache_hit` on responses and
# judgments, which differs between a run and its rerun (and between racing threads), so that a rerun writes
# byte-identical artifacts. trace.jsonl and summary.json keep the cache hits (ExecPlan 009, Decision Log).
NOT_IN_ROW = {"row": False}


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


@functools.cache
def _row_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("row", True))


def _plain(v: Any) -> Any:
    t = type(v)
    if t in _ATOMS:
        return v
    if t is dict:
        return {k: _plain(x) for k, x in v.items()}
    if t is tuple or t is list:
        return t(_plain(x) for x in v)
    if hasattr(t, "__dataclass_fields__"):
        return to_row(v)
    return copy.deepcopy(v)


def to_row(obj: Any) -> dict[str, Any]:
    """A dataclass as a dict in field order, nested dataclasses as dicts, containers copied (what
    `dataclasses.asdict` returns, at a fifth of its cost: it runs for every trace event and cache write)."""
    return {name: _plain(getattr(obj, name)) for name in _row_names(type(obj))}


@dataclass(frozen=True)
class Criterion:
    """One rubric item. `weight` may be negative (a penalty when the criterion is met)."""

    id: str
    text: str
    weight: float = 1.0
    tags: tuple[str, ...] = ()
    category: str | None = None


@dataclass(frozen=True)
class Turn:
    """A later user turn of a multi-turn conversation (MT-Bench `turns`), asked after the candidate's own answer to
    the turn before it; `reference` is that turn's reference answer."""

    message: dict[str, Any]
    reference: str | None = None


@dataclass(frozen=True)
class Example:
    """One normalized dataset row, whatever schema it came from. A multi-turn row keeps its first user turn in
    `messages` and the others in `later_turns` (data/turns.py builds the conversation for each turn)."""

    id: str
    dataset: str
    source: str  # "path/to/file.jsonl:LINE"
    messages: tuple[dict[str, Any], ...]  # chat messages, multi-turn allowed; the last is the user turn
    reference: str | None = None  # reference answer (QA, MT-Bench reference)
    choices: tuple[str, ...] | None = None  # multiple choice options, in order (A, B, C, ...)
    answer: str | None = None  # correct choice letter for MC, final answer for QA
    rubric: tuple[Criterion, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    later_turns: tuple[Turn, ...] = ()
    # Dataset columns a `response_column:` candidate replays (column -> the row's value), kept from the raw row.
    prefilled: dict[str, Any] = field(default_factory=dict)

    @property
    def turns(self) -> int:
        return 1 + len(self.later_turns)

    @property
    def kind(self) -> str:
        """How the example is scored without a rubric: 'mc', 'qa' or 'open'."""
        if self.choices:
            return "mc"
        if self.answer is not None:
            return "qa"
        return "open"


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )


def _int_if_integral(v: Any) -> Any:
    return int(v) if isinstance(v, float) and v.is_integer() else v


@dataclass(frozen=True)
class LLMRequest:
    """What a provider is asked. Only `cache_fields()` enter the cache key."""

    model: str  # a LiteLLM model string, e.g. "openai/gpt-4o-mini" or "local/smollm2"
    messages: tuple[dict[str, Any], ...]
    params: dict[str, Any] = field(default_factory=dict)  # temperature, max_tokens, seed, ...
    api_base: str | None = None
    api_key_env: str | None = None  # name of the env var holding the key; the key itself never lands here
    timeout_s: float = 120.0
    response_schema: dict[str, Any] | None = None  # JSON schema for structured output (judges)
    sample_index: int = 0
    # Not part of the key: bookkeeping for traces and throttles.
    role: Role = "candidate"
    limiter: str = ""  # name of the rate-limit bucket (the config's model entry name)

    def cache_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "model": self.model,
            "api_base": self.api_base,
            "messages": list(self.messages),
            # temperature: 0 and temperature: 0.0 are the same request: integral floats enter the key as ints.
            "params": {k: _int_if_integral(v) for k, v in self.params.items()},
            "response_schema": self.response_schema,
        }
        if self.sample_index:
            fields["sample_index"] = self.sample_index
        return fields


@dataclass(frozen=True)
class LLMResponse:
    text: str
    finish_reason: str | None = None
    usage: Usage = Usage()
    model: str | None = None  # the model that answered, as the provider reports it
    cost_usd: float | None = None
    cache_hit: bool = False
    latency_ms: float = 0.0
    # The provider's separate reasoning channel (`reasoning_content`), kept raw like `text`: a `<think>` block inside
    # `text` is split out only when the response row is built, so cached replies of any age read the same way.
    reasoning: str | None = None
    deployment: str | None = None  # which deployment of a Router entry served it (never a key); not cached


@dataclass(frozen=True)
class Response:
    """One candidate response row (responses.jsonl)."""

    id: str
    example_id: str
    candidate: str
    model: str
    sample_index: int
    status: Literal["ok", "error"]
    text: str | None
    error: str | None
    finish_reason: str | None
    usage: Usage
    cache_hit: bool = field(default=False, metadata=NOT_IN_ROW)  # defaults: rows read back have no cache_hit
    key: str = ""  # cache key of the call that made it
    flags: dict[str, Any] = field(default_factory=dict)  # quality flags (truncated, empty, ...)
    # What the model thought before answering (`<think>` blocks, the provider's reasoning channel). `text` is the
    # answer without it: what is scored, exported and shown to judges.
    reasoning: str | None = None
    turn: int = 1  # 1-based turn of a multi-turn conversation; 1 for single-turn rows


@dataclass(frozen=True)
class Judgment:
    """One criterion's verdict on one response (judgments.jsonl)."""

    id: str
    response_id: str
    example_id: str
    candidate: str
    criterion_id: str
    weight: float
    judge: str
    verdict: Verdict
    explanation: str | None
    error: str | None
    key: str | None = None  # cache key of the judge call (None for rubric-free auto scoring)
    votes: tuple[dict[str, Any], ...] = ()  # per-judge verdicts when several judges vote
    usage: Usage = Usage()
    cache_hit: bool = field(default=False, metadata=NOT_IN_ROW)
    # Graded scales (judging.scale 1-5 / 1-10): the judge's number; the verdict is then met when the score is in
    # the upper half of the scale, not_met below it, error when no score could be read.
    score: float | None = None
    scale: str = "binary"


PairVerdict = Literal["A", "B", "C", "error"]  # MT-Bench's [[A]] / [[B]] / [[C]] (tie), or unreadable


@dataclass(frozen=True)
class PairJudgment:
    """One head-to-head comparison of candidates a and b on one example (and turn), judged in both orders
    (judgments.jsonl, after the rubric judgments). `ab` is the judge's verdict with a shown first, `ba` with b
    shown first, both as positions; `winner` combines them in candidate terms: a candidate's name when both
    orders pick it, `tie` when they disagree or say [[C]], `error` when either could not be read."""

    kind: Literal["pairwise"]
    id: str
    example_id: str
    turn: int | None
    a: str
    b: str
    judge: str
    ab: PairVerdict
    ba: PairVerdict
    winner: str
    error: str | None
    keys: tuple[str, str]  # cache keys of the two calls (a first, b first)
    usage: Usage = Usage()
    cache_hit: bool = field(default=False, metadata=NOT_IN_ROW)
    response_ids: tuple[str, str] = ("", "")


@dataclass(frozen=True)
class TraceEvent:
    """One model call attempt (trace.jsonl)."""

    ts: float
    role: str
    model: str
    key: str
    cache_hit: bool
    attempt: int
    latency_ms: float
    status: Literal["ok", "error"]
    error: str | None = None
    usage: Usage | None = None
    status_code: int | None = None
    retry_in_s: float | None = None
    deployment: str | None = None  # the deployment of a Router entry that served or failed it (never a key)


@dataclass(frozen=True)
class Score:
    """A response's rubric score (see scoring.score_response)."""

    points: float
    normalized: float | None
    clipped: float | None
    met: int
    not_met: int
    errors: int
    by_category: dict[str, float] = field(default_factory=dict)
    by_tag: dict[str, float] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------------------
# summary.json: what results/summary.py builds, the runner writes and results/report.py reads.
# Field order is the key order in the file. Every field has a default so that from_row() can read a summary written
# by an older version (a missing key takes its default); OMIT_IF_NONE fields are left out of the file when None.


@dataclass(frozen=True)
class GroupRate:
    """Met rate of the criteria in one category or tag, whatever their weight's sign (kept for one release)."""

    met_rate: float | None = None
    n: int = 0


@dataclass(frozen=True)
class GroupRates:
    """One category or tag, split by the weight's sign: a met penalty is a hit, never a success."""

    met_rate: float | None = None  # met / judged, over criteria with a positive weight
    n: int = 0
    penalty_hit_rate: float | None = None  # met / judged, over criteria with a negative weight
    penalty_n: int = 0


@dataclass(frozen=True)
class CandidateSummary:
    """One candidate over every dataset (kept for one release: the per-dataset results replace it)."""

    examples: int = 0
    responses: int = 0
    response_errors: int = 0
    scored: int = 0
    criteria_scored: int = 0
    judgment_errors: int = 0
    mean_normalized: float | None = None
    normalized_ci: tuple[float | None, float | None] = (None, None)
    normalized_se: float | None = None
    mean_clipped: float | None = None
    clipped_ci: tuple[float | None, float | None] = (None, None)
    clipped_se: float | None = None
    pass_rate: float | None = None
    by_category: dict[str, float | None] = field(default_factory=dict)
    met_rate_by_category: dict[str, GroupRate] = field(default_factory=dict)
    met_rate_by_tag: dict[str, GroupRate] = field(default_factory=dict)
    flags: dict[str, int] = field(default_factory=dict)
    usage: Usage = Usage()
    judge_usage: Usage = Usage()
    cache_hits: int = 0
    rates_by_category: dict[str, GroupRates] = field(default_factory=dict)
    rates_by_tag: dict[str, GroupRates] = field(default_factory=dict)


@dataclass(frozen=True)
class LeaderboardRow:
    rank: int = 0
    candidate: str = ""
    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    within_noise_of: tuple[str, ...] = ()  # candidates whose paired difference from this one includes 0


@dataclass(frozen=True)
class PairwiseRow:
    """Paired bootstrap of a against b over the examples both were scored on (stats.paired_diff)."""

    a: str = ""
    b: str = ""
    n: int = 0
    mean_diff: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    wins: int = 0
    ties: int = 0
    losses: int = 0
    significant: bool = False


@dataclass(frozen=True)
class JudgeRates:
    met_rate: float | None = None
    judged: int = 0
    errors: int = 0


@dataclass(frozen=True)
class JudgePairAgreement:
    """Two judges over the units both voted on (results/agreement.py)."""

    a: str = ""
    b: str = ""
    n: int = 0
    percent_agreement: float | None = None
    cohen_kappa: float | None = None


@dataclass(frozen=True)
class CriterionAgreement:
    """One criterion (by text) over the responses several judges voted on."""

    criterion_id: str = ""
    text: str = ""
    units: int = 0
    split_rate: float | None = None  # share of units on which the judges did not all agree
    percent_agreement: float | None = None
    krippendorff_alpha: float | None = None


@dataclass(frozen=True)
class Agreement:
    """Where several judges voted on a criterion: overall, per judge pair, per criterion, and the criteria
    on which the judges split most often."""

    criteria_with_votes: int = 0
    percent_agreement: float | None = None
    fleiss_kappa: float | None = None
    krippendorff_alpha: float | None = None
    ties_to_error: int = 0
    pairs: tuple[JudgePairAgreement, ...] = ()
    criteria: tuple[CriterionAgreement, ...] = ()
    most_disagreed: tuple[CriterionAgreement, ...] = ()


@dataclass(frozen=True)
class JudgeSummary:
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"agreement"})

    per_judge: dict[str, JudgeRates] = field(default_factory=dict)
    agreement: Agreement | None = None


@dataclass(frozen=True)
class Calls:
    """This invocation's model call attempts (the tracer's counts)."""

    made: int = 0
    cache_hits: int = 0
    errors: int = 0


@dataclass(frozen=True)
class ModelCost:
    """One (role, model): what results/costs.py cost_report writes per model."""

    role: str = ""
    model: str = ""
    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    usd: float | None = None  # None: no known price
    saved_usd: float | None = None
    provider_usd: float | None = None  # what the provider itself reported (LiteLLM response_cost), if anything


@dataclass(frozen=True)
class CostSummary:
    total_usd: float = 0.0
    saved_usd: float = 0.0
    provider_total_usd: float | None = None
    by_model: dict[str, ModelCost] = field(default_factory=dict)  # "role:model" ->
    unpriced: tuple[str, ...] = ()


@dataclass(frozen=True)
class BudgetSummary:
    budget_usd: float | None = None
    spent_usd: float = 0.0
    stopped: bool = False


@dataclass(frozen=True)
class DatasetCandidate:
    """One candidate's headline on one dataset (results/metrics.py CandidateResult). `extra` holds the metric's
    own fields (mean_normalized, by_tag, by_category, by_field, ...): in the file they sit beside the others."""

    FLATTEN: ClassVar[str] = "extra"

    score: float | None = None
    ci: tuple[float | None, float | None] = (None, None)
    std: float | None = None  # std of the bootstrap headlines
    n: int = 0  # examples scored
    coverage: float | None = None  # share of expected responses fully judged
    partial: int = 0  # responses with a criterion not judged
    scored: int = 0  # responses in the score
    expected: int = 0  # responses the run should have produced
    histogram: tuple[int, ...] = ()  # per-example scores in 10 equal bins over [0, 1] (outside values: edge bins)
    by_example_category: dict[str, float] = field(default_factory=dict)  # mean per-example score per row category
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DatasetRankRow:
    rank: int = 0
    candidate: str = ""
    score: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    within_noise_of: tuple[str, ...] = ()  # paired bootstrap over this dataset's examples includes 0


@dataclass(frozen=True)
class DatasetSummary:
    """One dataset: its metric, the judge-failure policy that applied, its candidates and leaderboard."""

    metric: str = "rubric"
    on_error: str = "exclude"
    candidates: dict[str, DatasetCandidate] = field(default_factory=dict)
    leaderboard: tuple[DatasetRankRow, ...] = ()


@dataclass(frozen=True)
class PairOutcome:
    """a against b on one dataset: rates over the examples both were compared on, each with a percentile
    bootstrap CI over examples (an example with several turns counts the mean of its turns)."""

    a: str = ""
    b: str = ""
    n: int = 0  # examples compared (comparisons that did not end in error)
    comparisons: int = 0
    wins: int = 0  # a won both orders
    ties: int = 0  # [[C]], or the verdict flipped with the order
    losses: int = 0
    errors: int = 0
    win_rate: float | None = None
    win_ci: tuple[float | None, float | None] = (None, None)
    tie_rate: float | None = None
    tie_ci: tuple[float | None, float | None] = (None, None)
    loss_rate: float | None = None
    loss_ci: tuple[float | None, float | None] = (None, None)


@dataclass(frozen=True)
class Rating:
    """A Bradley-Terry rating on Chatbot Arena's Elo-like scale (1000 + 400 log10 strength), with a bootstrap CI."""

    candidate: str = ""
    rating: float | None = None
    ci: tuple[float | None, float | None] = (None, None)
    mean_chars: float | None = None  # mean length of its compared answers (verbosity bias)


@dataclass(frozen=True)
class PairwiseJudging:
    """One dataset's pairwise judging: outcomes per pair, ratings (three or more candidates), position bias."""

    pairs: tuple[PairOutcome, ...] = ()
    ratings: tuple[Rating, ...] = ()
    position_bias: float | None = None  # share of decisive single-order verdicts won by the answer shown first
    decisive_verdicts: int = 0  # the single-order verdicts that are neither [[C]] nor error
    mean_chars: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class MacroScore:
    score: float | None = None  # None unless the candidate has a headline on every dataset
    datasets: int = 0  # datasets with a headline for this candidate


@dataclass(frozen=True)
class Overall:
    """The only number across datasets: the unweighted mean of per-dataset headlines, labelled as such."""

    macro_average_of: str = "dataset headlines"
    datasets: tuple[str, ...] = ()
    candidates: dict[str, MacroScore] = field(default_factory=dict)


@dataclass(frozen=True)
class Summary:
    """summary.json. The fields from `status` on are the run's facts, which the runner adds to what
    results/summary.py build_summary computes from the rows."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset(
        {"overall", "status", "stopped_by", "note", "calls", "responses_not_done", "skipped_rows", "wall_s"}
        | {"costs", "budget"}
        | {"synthesis", "export", "pairwise_judging"}
    )

    run_id: str = ""
    metric: str = "normalized"  # the metric of the pooled fields below (candidates, leaderboard, pairwise)
    pass_threshold: float | None = None
    examples: int = 0
    datasets: dict[str, DatasetSummary] = field(default_factory=dict)  # the headline results, one per dataset
    overall: Overall | None = None
    candidates: dict[str, CandidateSummary] = field(default_factory=dict)
    leaderboard: tuple[LeaderboardRow, ...] = ()
    pairwise: tuple[PairwiseRow, ...] = ()
    judges: JudgeSummary = JudgeSummary()
    pairwise_judging: dict[str, PairwiseJudging] | None = None  # per dataset, when judging.pairwise is set
    status: str | None = None  # complete / interrupted / stopped_on_budget
    stopped_by: str | None = None  # interrupted: the signal that stopped it (SIGINT, SIGTERM)
    note: str | None = None  # what a reader must know first ("generation only: nothing judged")
    calls: Calls | None = None
    responses_not_done: int | None = None
    skipped_rows: int | None = None
    wall_s: float | None = None
    costs: CostSummary | None = None
    budget: BudgetSummary | None = None
    synthesis: tuple[dict[str, Any], ...] | None = None  # the synthesis log, as data/synth.py writes it
    export: dict[str, dict[str, int]] | None = None  # format -> counts, as results/export.py returns them


def summary_row(obj: Any) -> Any:
    """A summary type as JSON-ready data: like to_row, but a field named in its class's OMIT_IF_NONE is left out
    when it is None (summary.json has always omitted keys it had nothing for)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        omit, flat = getattr(obj, "OMIT_IF_NONE", frozenset()), getattr(obj, "FLATTEN", None)
        values = ((n, getattr(obj, n)) for n in _names(type(obj)))
        out = {n: summary_row(v) for n, v in values if not (v is None and n in omit) and n != flat}
        return out | summary_row(getattr(obj, flat)) if flat else out
    if isinstance(obj, dict):
        return {k: summary_row(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [summary_row(v) for v in obj]
    return obj


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_row(cls: type[Any], row: Any, *, strict: bool = False) -> Any:
    """A summary type from its JSON data (the inverse of summary_row). A missing key takes the field's default;
    an unknown key is ignored (a file written by another version), or with `strict` raises TypeError."""
    names, flat = _names(cls), getattr(cls, "FLATTEN", None)
    unknown = {k: v for k, v in row.items() if k not in names}
    if flat:  # the flattened field takes every key that is not a field
        row = {**{k: v for k, v in row.items() if k in names and k != flat}, flat: unknown}
    elif strict and unknown:
        raise TypeError(f"{cls.__name__}: unknown keys {sorted(unknown)}")
    hints = _hints(cls)
    return cls(**{n: _typed(hints[n], row[n], strict) for n in names if n in row})


def _typed(hint: Any, value: Any, strict: bool) -> Any:
    """`value` converted to the type `hint` names: dataclasses built, dicts and tuples of them converted."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _typed(inner[0], value, strict) if len(inner) == 1 else value
    if dataclasses.is_dataclass(hint):
        return from_row(hint, value, strict=strict)
    if origin is dict:
        return {k: _typed(args[1], v, strict) for k, v in value.items()}
    if origin is tuple:
        return tuple(_typed(args[0], v, strict) for v in value)
    return value
