"""summary.json's types: what results/summary.py builds, the runner completes with the run's facts and
results/report.py reads (docs/run-folder.md lists every key). Field order is the file's key order. A type declared
`omit_defaults` writes a field with a default (None) only when set, and a field typed UnsetType (`ppi`) is written
only when set; the other types give every field a default, which an older summary that lacks the key reads.
Irregularities, kept by `summary_data` and `read_summary`: a candidate's `extra` sits beside its fields, and an
anchored score's `lambda` (a Python keyword) is the field `lam`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec import UNSET, Struct, UnsetType, field

from .. import codec
from ..tasks.spec import CandidateResult
from .ppi import Anchored, AnchoredDiff, LabelCounts


class JudgeRates(Struct, frozen=True):
    met_rate: float | None = None
    judged: int = 0
    errors: int = 0


class JudgePairAgreement(Struct, frozen=True):
    """Two judges over the units both voted on (results/summary.py AgreementCounts)."""

    a: str = ""
    b: str = ""
    n: int = 0
    percent_agreement: float | None = None
    cohen_kappa: float | None = None


class CriterionAgreement(Struct, frozen=True):
    """One criterion (by text) over the responses several judges voted on."""

    criterion_id: str = ""
    text: str = ""
    units: int = 0
    split_rate: float | None = None  # share of units on which the judges did not all agree
    percent_agreement: float | None = None
    krippendorff_alpha: float | None = None


class Agreement(Struct, frozen=True):
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


class JudgeSummary(Struct, frozen=True, omit_defaults=True):
    per_judge: dict[str, JudgeRates]
    agreement: Agreement | None = None


class Calls(Struct, frozen=True):
    """This invocation's model call attempts (the tracer's counts)."""

    made: int = 0
    cache_hits: int = 0
    errors: int = 0


class ModelCost(Struct, frozen=True):
    """One (role, model): what results/summary.py cost_report writes per model."""

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


class CostSummary(Struct, frozen=True):
    total_usd: float = 0.0
    saved_usd: float = 0.0
    provider_total_usd: float | None = None
    by_model: dict[str, ModelCost] = field(default_factory=dict)  # "role:model" ->
    unpriced: tuple[str, ...] = ()


class BudgetSummary(Struct, frozen=True):
    budget_usd: float | None = None
    spent_usd: float = 0.0
    stopped: bool = False


class ExecutorSummary(Struct, frozen=True):
    """Who made the attempts (`executor:`): `threads` (the run's own process) or `dask` and its workers."""

    engine: str = "threads"
    workers: int = 1


class DatasetCandidate(CandidateResult, frozen=True, kw_only=True):
    """One candidate's headline on one dataset, and its score anchored to human labels (`ppi`), with
    `datasets[].labels`."""

    ppi: Anchored | UnsetType = UNSET


class DatasetRankRow(Struct, frozen=True):
    rank: int = 0
    candidate: str = ""
    score: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    within_noise_of: tuple[str, ...] = ()  # paired bootstrap over this dataset's examples includes 0


class DatasetSummary(Struct, frozen=True, omit_defaults=True):
    """One dataset: its metric, the judge-failure policy that applied, its candidates and leaderboard (a judge
    meta-evaluation: its judges), and the metric's dataset-level figures (`extra`, left out when it has none)."""

    metric: str
    on_error: str
    candidates: dict[str, DatasetCandidate]
    leaderboard: tuple[DatasetRankRow, ...]
    extra: dict[str, Any] | None = None
    labels: LabelCounts | None = None  # with `datasets[].labels`
    ppi_paired: tuple[AnchoredDiff, ...] | None = None  # every two candidates, anchored to the labels


class PairOutcome(Struct, frozen=True, kw_only=True):
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
    # AlpacaEval 2's length-controlled win rate (results/pairwise.py), fitted per comparison on a's
    # preference (win 1, tie 0.5, loss 0) and the answers' length difference in characters, at zero difference.
    lc_win_rate: float | None = None
    lc_win_rate_se: float | None = None  # delta-method (sandwich) standard error
    lc_n: int = 0  # comparisons in the fit (errors left out)
    lc_note: str | None = None  # why lc_win_rate is None
    lc_one_side_longer: bool = False  # a never shorter (or never longer): lc_win_rate extrapolates to equal lengths
    longer_share: float | None = None  # share of decisive verdicts between unequal lengths won by the longer answer
    longer_n: int = 0  # those verdicts
    ppi: Anchored | UnsetType = UNSET  # win_rate anchored to human preferences (`pair_id` labels)


class Rating(Struct, frozen=True):
    """A Bradley-Terry rating on Chatbot Arena's Elo-like scale (1000 + 400 log10 strength), with a bootstrap CI."""

    candidate: str = ""
    rating: float | None = None
    ci: tuple[float | None, float | None] = (None, None)
    mean_chars: float | None = None  # mean length of its compared answers (verbosity bias)


class PairwiseJudging(Struct, frozen=True):
    """One dataset's pairwise judging: outcomes per pair, ratings (three or more candidates), position bias."""

    pairs: tuple[PairOutcome, ...] = ()
    ratings: tuple[Rating, ...] = ()
    position_bias: float | None = None  # share of decisive single-order verdicts won by the answer shown first
    decisive_verdicts: int = 0  # the single-order verdicts that are neither [[C]] nor error
    mean_chars: dict[str, float | None] = field(default_factory=dict)


class MacroScore(Struct, frozen=True):
    score: float | None = None  # None unless the candidate has a headline on every dataset
    datasets: int = 0  # datasets with a headline for this candidate


class Overall(Struct, frozen=True):
    """The only number across datasets: the unweighted mean of per-dataset headlines, labelled as such."""

    macro_average_of: str = "dataset headlines"
    datasets: tuple[str, ...] = ()
    candidates: dict[str, MacroScore] = field(default_factory=dict)


class Summary(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """summary.json. The fields from `status` on are the run's facts, which the runner adds to what
    results/summary.py (SummaryAcc) computes from the rows."""

    run_id: str
    pass_threshold: float | None
    examples: int
    datasets: dict[str, DatasetSummary]  # the headline results, one per dataset
    overall: Overall | None = None
    judges: JudgeSummary
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


def summary_data(obj: Summary | DatasetSummary) -> dict[str, Any]:
    """summary.json's data (or one dataset's entry in it): each candidate's `extra` beside its other fields."""
    data = codec.to_data(obj)
    for d in data["datasets"].values() if isinstance(obj, Summary) else (data,):
        for c in d["candidates"].values():
            c.update(c.pop("extra"))
    return data


def read_summary(data: Mapping[str, Any]) -> Summary:
    """summary.json's data as a Summary (DecodeError when it is not one): the keys of a candidate that are not its
    fields are its `extra`. A key that a summary of an older version (or a hand-made one) lacks takes its field's
    default; the few always written that have none read as below."""
    own = set(DatasetCandidate.__struct_fields__)
    datasets = {}
    for name, d in (data.get("datasets") or {}).items():
        cands = {
            n: {**{k: v for k, v in c.items() if k in own}, "extra": {k: v for k, v in c.items() if k not in own}}
            for n, c in (d.get("candidates") or {}).items()
        }
        datasets[name] = {"metric": "rubric", "on_error": "exclude", "leaderboard": [], **d, "candidates": cands}
    judges = {"per_judge": {}, **(data.get("judges") or {})}
    out = {"run_id": "", "pass_threshold": None, "examples": 0, **data, "datasets": datasets, "judges": judges}
    return codec.convert(out, Summary)
