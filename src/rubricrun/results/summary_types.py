"""summary.json's types: what results/summary.py builds, the runner completes with the run's facts, and
results/report.py reads. summary.json is the per-dataset results (`datasets`), their macro average (`overall`) and
the run-level sections (judges, pairwise judging, calls, costs, budget, synthesis, export).

Field order is the key order in the file. Every field has a default so that types.from_row() can read a summary
written by an older version (a missing key takes its default, an unknown one such as the pooled `candidates` of
releases before issue 21 is ignored); OMIT_IF_NONE fields are left out of the file when None (types.summary_row).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


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
class ExecutorSummary:
    """Who made the attempts (`executor:`): `threads` (the run's own process) or `dask` and its workers."""

    engine: str = "threads"
    workers: int = 1


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
    """One dataset: its metric, the judge-failure policy that applied, its candidates and leaderboard (a judge
    meta-evaluation: its judges), and the metric's dataset-level figures (`extra`, left out when it has none)."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"extra"})

    metric: str = "rubric"
    on_error: str = "exclude"
    candidates: dict[str, DatasetCandidate] = field(default_factory=dict)
    leaderboard: tuple[DatasetRankRow, ...] = ()
    extra: dict[str, Any] | None = None


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
    # AlpacaEval 2's length-controlled win rate (results/length_control.py), fitted per comparison on a's
    # preference (win 1, tie 0.5, loss 0) and the answers' length difference in characters, at zero difference.
    lc_win_rate: float | None = None
    lc_win_rate_se: float | None = None  # delta-method (sandwich) standard error
    lc_n: int = 0  # comparisons in the fit (errors left out)
    lc_note: str | None = None  # why lc_win_rate is None
    lc_one_side_longer: bool = False  # a never shorter (or never longer): lc_win_rate extrapolates to equal lengths
    longer_share: float | None = None  # share of decisive verdicts between unequal lengths won by the longer answer
    longer_n: int = 0  # those verdicts


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
        | {"costs", "budget", "synthesis", "export", "pairwise_judging", "executor"}
    )

    run_id: str = ""
    pass_threshold: float | None = None
    examples: int = 0
    datasets: dict[str, DatasetSummary] = field(default_factory=dict)  # the headline results, one per dataset
    overall: Overall | None = None
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
    executor: ExecutorSummary | None = None  # who made the attempts
