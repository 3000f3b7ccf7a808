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
class Estimate:
    """A figure with its 95 % interval."""

    estimate: float | None = None
    ci: tuple[float | None, float | None] = (None, None)


@dataclass(frozen=True)
class LabelBudget:
    """ppi_py's `ppi_mean_power` for this run: the labelled responses an anchored 95 % interval of +/- `half_width`
    needs (`datasets[].label_half_width`), judged by the labels so far."""

    half_width: float = 0.05
    labels_needed: int | None = None  # labelled responses in all; None: even labelling every response falls short
    more: int | None = None  # beyond those labelled now


@dataclass(frozen=True)
class JudgeOnLabels:
    """One judge's verdicts on the human-labelled items (tasks/judge_eval.py, the meta-evaluation's figures)."""

    items: int = 0  # labelled (response, criterion) items the judge gave a verdict on
    balanced_f1: float | None = None  # HealthBench's, each judge verdict against every human label of the item
    ci: tuple[float | None, float | None] = (None, None)  # bootstrap over items
    kappa: float | None = None  # Cohen's kappa against the item's majority human label
    kappa_ties: int = 0  # items whose raters split evenly: out of kappa
    leniency: float | None = None  # judge_met - human_met
    judge_met: float | None = None
    human_met: float | None = None
    failures: int = 0  # items whose verdict failed: out of every figure


@dataclass(frozen=True)
class Anchored:
    """A score anchored to human labels by prediction-powered inference (results/anchor.py, results/ppi.py): PPI++
    over responses, the labelled ones with the humans' value and the judge's, the others with the judge's alone;
    the dataset's own transform (its clip) on the estimate and both ends. `note`: why there is no estimate."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"note", "budget", "rating"})

    estimate: float | None = None
    ci: tuple[float | None, float | None] = (None, None)
    n_labelled: int = 0  # responses labelled in full (every criterion) that the judge-only score counts too
    n_unlabelled: int = 0  # the other responses the judge-only score counts
    lam: float | None = field(default=None, metadata={"key": "lambda"})  # the power-tuned weight, in [0, 1]
    classical: Estimate = Estimate()  # the labelled responses alone
    judge_only: Estimate = Estimate()  # the judge's score as the dataset reports it (its headline and CI)
    judge_outside: bool = False  # the judge-only score lies outside the anchored interval
    effective_labels: int | None = None  # labelled responses alone that would give an interval as narrow
    budget: LabelBudget | None = None
    rating: Estimate | None = None  # graded scales: the estimate on the scale itself
    judges: dict[str, JudgeOnLabels] = field(default_factory=dict)
    note: str | None = None


@dataclass(frozen=True)
class AnchoredDiff:
    """a minus b anchored to human labels: PPI++ over the response pairs (same example, turn and sample) both have,
    the pairs both labelled with the humans' difference, beside the judge-only paired difference."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"note"})

    a: str = ""
    b: str = ""
    estimate: float | None = None
    ci: tuple[float | None, float | None] = (None, None)
    n_labelled: int = 0
    n_unlabelled: int = 0
    lam: float | None = field(default=None, metadata={"key": "lambda"})
    judge_only: Estimate = Estimate()  # the paired bootstrap over examples (the leaderboard's noise test)
    note: str | None = None


@dataclass(frozen=True)
class LabelCounts:
    """A dataset's labels file, as the run read it: what entered the anchored scores and what was left out."""

    file: str = ""
    rows: int = 0  # label rows with a verdict
    blank: int = 0  # rows with no verdict yet (an unfilled sheet row)
    superseded: int = 0  # rows replaced by a later row of the same rater on the same item
    items: int = 0  # labelled (response, criterion) items of this run's responses
    ties: int = 0  # items whose raters split evenly: left out
    responses: int = 0  # responses labelled in full that enter an anchored score
    partial: int = 0  # responses with some but not all of their criteria labelled: left out
    not_scored: int = 0  # responses labelled in full that the judge-only score does not count (failed, errors)
    unknown_response: int = 0  # items naming a response this dataset does not have
    unknown_criterion: int = 0  # items naming a criterion its response is not scored on
    pairs: int = 0  # pairwise comparisons with a human preference
    unknown_pair: int = 0  # preferences naming a comparison this dataset does not have


@dataclass(frozen=True)
class DatasetCandidate:
    """One candidate's headline on one dataset (results/metrics.py CandidateResult). `extra` holds the metric's
    own fields (mean_normalized, by_tag, by_category, by_field, ...): in the file they sit beside the others.
    `ppi`: the score anchored to human labels, with `datasets[].labels`."""

    FLATTEN: ClassVar[str] = "extra"
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"ppi"})

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
    ppi: Anchored | None = None
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

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"extra", "labels", "ppi_paired"})

    metric: str = "rubric"
    on_error: str = "exclude"
    candidates: dict[str, DatasetCandidate] = field(default_factory=dict)
    leaderboard: tuple[DatasetRankRow, ...] = ()
    extra: dict[str, Any] | None = None
    labels: LabelCounts | None = None  # with `datasets[].labels`
    ppi_paired: tuple[AnchoredDiff, ...] | None = None  # every two candidates, anchored to the labels


@dataclass(frozen=True)
class PairOutcome:
    """a against b on one dataset: rates over the examples both were compared on, each with a percentile
    bootstrap CI over examples (an example with several turns counts the mean of its turns)."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"ppi"})

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
    ppi: Anchored | None = None  # win_rate anchored to human preferences (`pair_id` labels)


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
    results/summary.py (SummaryAcc) computes from the rows."""

    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset(
        {"overall", "status", "stopped_by", "note", "calls", "responses_not_done", "skipped_rows", "wall_s"}
        | {"costs", "budget", "synthesis", "export", "pairwise_judging"}
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
