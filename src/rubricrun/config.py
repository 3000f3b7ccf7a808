"""Strict YAML config: typed, frozen objects that reject unknown keys and name the file, line and key.

`load_config(path)` is the only entry point. Every error is an `InputError` (exit code 2).
"""

from __future__ import annotations

import datetime
import math
import os
import re
import sys
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import yaml
from msgspec import Meta

from .errors import InputError, read_text
from .types import rubric_weights_problem, weights_add_up

# --------------------------------------------------------------------------------------------------
# The config objects, read by `msgspec.convert`. Every number of the config has a range: msgspec's `Meta` (gt, ge,
# le), checked as it is read (every value is finite already: _finite); tests/test_trust.py checks that every int and
# float field has one.


class _Section(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A mapping of the config: its keys are the fields (an unknown key is refused)."""


MAX_THREADS = 4096  # run.concurrency, run.judge_parallel_workers: threads of one process
Positive = Annotated[float, Meta(gt=0)]
NotNegative = Annotated[float, Meta(ge=0)]
Fraction = Annotated[float, Meta(ge=0, le=1)]
Count = Annotated[int, Meta(ge=0)]
AtLeast1 = Annotated[int, Meta(ge=1)]
Threads = Annotated[int, Meta(ge=1, le=MAX_THREADS)]
SynthItems = Annotated[int, Meta(ge=1, le=1000)]  # synthesize's subtopics and prompts: items one reply lists


class RunConfig(_Section):
    output_dir: str = "outputs"
    concurrency: Threads = 16  # threads that generate candidate responses
    seed: Count = 0  # numpy's bootstrap generator takes a non-negative seed (<= MAX_SEED: _check)
    judge_parallel_workers: Threads = 8  # threads that make judge calls
    judge_rate_limit_rpm: Positive | None = None  # one bucket shared by every judge call
    max_examples: AtLeast1 | None = None  # as --max-examples: a cap of 0 would run nothing
    on_bad_row: Literal["fail", "skip"] = "fail"  # a malformed data row fails the run, or is skipped and counted
    budget_usd: NotNegative | None = None  # stop starting new calls once the spend would pass this
    progress: bool = True  # a bar on stderr when it is a terminal, else progress lines in the log
    progress_interval_s: NotNegative = 10.0  # seconds between those progress lines
    bootstrap_samples: Annotated[int, Meta(ge=1, le=100_000)] = 1000  # each CI resamples the examples this many times


class CacheConfig(_Section):
    dir: str = ".cache/rubricrun"
    enabled: bool = True


class RetryConfig(_Section):
    max_attempts: AtLeast1 = 5
    max_wait_s: NotNegative = 60.0
    initial_wait_s: NotNegative = 1.0


class DatasetConfig(_Section):
    path: str = ""  # a local file: JSONL (.jsonl, .jsonl.gz), JSON array (.json), CSV/TSV, Parquet
    # instead of path: a Hugging Face dataset name or a local dataset folder (datasets.load_dataset)
    hf: str | None = None
    config: str | None = None  # the Hub dataset's config (subset), e.g. `main` for openai/gsm8k
    split: str | None = None  # the Hub dataset's split, e.g. `test`; may be left out when it has only one
    name: str = ""
    format: str = "auto"  # auto or a registered task's name (tasks.registry.check_config checks it)
    fields: dict[str, str] = {}  # normalized field -> key in the row
    limit: AtLeast1 | None = None
    # None: detected from the rows; a registered metric's name otherwise (tasks.registry.check_config checks it, and
    # that a graded metric comes with its judging.scale).
    metric: str | None = None
    references: str | None = None  # MT-Bench reference answers (`{question_id, choices: [{turns}]}`), joined by id
    labels: str | None = None  # human verdicts on the run's responses (data/labels.py): anchors the score (PPI)
    label_half_width: Positive = 0.05  # the label budget's target: labels for a 95 % anchored interval of +/- this


class Price(_Section):
    input_per_mtok: NotNegative = 0.0  # USD per million prompt tokens
    output_per_mtok: NotNegative = 0.0  # USD per million completion tokens
    # The provider's batch prices (an entry with `batch: true`); unset, a batch entry pays LiteLLM's batch price for
    # the model when its map has one, else these online prices.
    batch_input_per_mtok: NotNegative | None = None
    batch_output_per_mtok: NotNegative | None = None


class WeightedModel(_Section):
    model: str
    weight: Positive = 1.0
    api_base: str | None = None
    api_key_env: str | None = None


class Deployment(_Section):
    """One server of a Router entry (`deployments:`): a LiteLLM model string and how to reach it."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    rpm: Positive | None = None  # this deployment's requests per minute (the Router balances by it)
    tpm: Positive | None = None
    weight: Positive | None = None  # simple-shuffle: relative share of calls
    params: dict[str, Any] = {}  # more LiteLLM params for this deployment only


RouterStrategy = Literal["simple-shuffle", "least-busy", "usage-based-routing-v2", "latency-based-routing"]


class RouterConfig(_Section):
    """How `litellm.Router` spreads an entry's calls over its deployments (providers/router.py)."""

    strategy: RouterStrategy = "usage-based-routing-v2"
    allowed_fails: Count = 3  # failures in a minute before a deployment is cooled down
    cooldown_s: NotNegative = 30.0  # how long a cooled-down deployment gets no calls
    fallbacks: list[str] = []  # names of other entries tried when every deployment fails


class ModelConfig(_Section, dict=True):  # a __dict__ for memos: providers/routing.py's deployments_key
    """A candidate or a judge: one LiteLLM model string and how to call it."""

    name: str
    model: str = ""
    api_base: str | None = None
    api_key_env: str | None = None
    rpm: Positive | None = None  # requests per minute of the provider account (model, api_base, api_key_env)
    tpm: Positive | None = None  # tokens per minute of the account: prompt estimate + max_tokens, corrected by usage
    timeout_s: Positive = 120.0
    params: dict[str, Any] = {}
    system_prompt: str | None = None  # candidates: before each example's messages; judges: before the judge prompt
    samples_per_prompt: AtLeast1 = 1  # candidates only
    models: list[WeightedModel] = []  # weighted routing; replaces `model`
    deployments: list[Deployment] = []  # served by a litellm.Router; replaces `model`
    router: RouterConfig | None = None  # with `deployments`: strategy, cooldowns, fallbacks
    # Judges only. auto: json_schema where the provider takes one; on (= json_schema): OpenAI `response_format`;
    # guided_json: vLLM's `guided_json` in extra_body (vLLM servers older than response_format support); off: text.
    structured_output: Literal["auto", "on", "json_schema", "guided_json", "off"] = "auto"
    price: Price | None = None
    # Candidates only: answers you already have, judged without a call (data/answers_file.py).
    responses_from: str | None = None  # a file: MT-Bench model_answer rows or {id, response, turn} rows
    response_column: str | None = None  # a column of the dataset rows themselves (PRBench's final_response)
    batch: bool = False  # send this entry's calls as provider batch jobs (providers/batch.py; settings: `batch:`)

    @property
    def replays(self) -> bool:
        return bool(self.responses_from or self.response_column)

    @property
    def routed(self) -> str | None:
        """The logical model of an entry served by a Router (`router/<name>`): what rows, cache keys and the
        throttle name; None for an entry that calls one model string directly."""
        return f"router/{self.name}" if self.deployments else None


class BatchConfig(_Section):
    """How entries with `batch: true` are sent: the provider's limits per batch job, and what to do with a request
    that a batch failed or let expire."""

    max_requests: AtLeast1 = 50_000  # OpenAI's limit per batch file
    max_bytes: AtLeast1 = 200_000_000  # OpenAI's limit per batch file (200 MB)
    poll_interval_s: NotNegative = 30.0
    completion_window: Literal["24h"] = "24h"
    on_failed: Literal["online", "batch"] = "online"  # a failed or expired request is retried online, or batched
    max_batch_attempts: AtLeast1 = 2  # with on_failed: batch, batches a request is sent in before it goes online


class CriterionConfig(_Section):
    text: str
    id: str = ""
    weight: float = 1.0  # any finite number: a negative weight is a penalty
    tags: list[str] = []
    category: str | None = None


class PairwiseConfig(_Section):
    """judging.pairwise: each candidate against `baseline`, or every pair of candidates (`all_pairs`)."""

    baseline: str | None = None
    all_pairs: bool = False
    prompt_template: str | None = None  # a text file with {question}, {answer_a}, {answer_b}


class JudgingConfig(_Section):
    pass_threshold: Fraction = 0.5  # normalized scores are in [0, 1]
    default_rubric: list[CriterionConfig] | None = None  # applied to examples that have no rubric
    judges_per_criterion: AtLeast1 = 1
    max_explanation_chars: AtLeast1 = 400
    prompt_template: str | None = None  # path to a Jinja2-free text template with {placeholders}
    # A response whose criteria are not all judged: left out (`exclude`) or its errors count as not met.
    # None: per dataset, `not_met` for metric prbench (PRBench's own grading), else `exclude`.
    on_error: Literal["exclude", "not_met"] | None = None
    on_tie: Literal["error", "not_met", "judge"] = "error"  # a split vote: error, not_met, or one more judge decides
    pairwise: PairwiseConfig | None = None  # head-to-head judging with position swap (judging/pairwise.py)
    # binary: met / not met per criterion; 1-5: a score per criterion with reasoning; 1-10: MT-Bench single grading.
    scale: Literal["binary", "1-5", "1-10"] = "binary"
    # Show the example's reference answer to the judge: auto (when present, except HealthBench ideal completions).
    reference: Literal["auto", "always", "never"] = "auto"


class SynthesizeConfig(_Section):
    main_topic: str
    model: str = ""  # name of a candidate or judge entry; default: the first candidate
    num_subtopics: SynthItems = 4
    prompts_per_subtopic: SynthItems = 4
    over_generation_buffer: Annotated[float, Meta(ge=0, le=10)] = 0.15
    max_exclusions: Count = 50
    subtopic_template: str | None = None  # path to a Jinja2 template
    prompt_template: str | None = None  # path to a Jinja2 template
    dataset_name: str = "synthesized"


class ExportConfig(_Section):
    formats: list[Literal["sft", "dpo", "kto", "reward", "hybrid", "prompts"]] = []
    score: Literal["normalized", "clipped"] = "normalized"
    sft_threshold: Fraction = 0.7
    kto_threshold: Fraction = 0.5
    min_margin: Fraction = 0.1
    chosen_candidate: str | None = None
    rejected_candidate: str | None = None
    # dpo/hybrid pairs: `score` by judged scores; `candidate` chosen_candidate's response against rejected_candidate's,
    # no judge needed; `auto` is `candidate` when the config has no judges and names both sides, else `score`.
    pair_by: Literal["auto", "score", "candidate"] = "auto"

    def pairs_by_candidate(self, has_judges: bool) -> bool:
        """Whether dpo/hybrid pair the two named candidates' responses without looking at scores."""
        named = self.chosen_candidate is not None and self.rejected_candidate is not None
        return self.pair_by == "candidate" or (self.pair_by == "auto" and not has_judges and named)


class ExecutorConfig(_Section):
    """Who makes the provider attempts (providers/executor.py): the run's own threads, or the workers of a Dask
    cluster (a local one the run starts with `workers` processes, or the scheduler at `address`)."""

    engine: Literal["threads", "dask"] = "threads"
    # dask: processes of the local cluster (default: the machine's cores), or at least this many workers to wait for
    # at `address` (default 1)
    workers: Annotated[int, Meta(ge=1, le=1024)] | None = None
    address: str | None = None  # dask: a running cluster's scheduler (else DASK_SCHEDULER_ADDRESS, else a local one)
    timeout_s: Positive = 30.0  # dask: how long to wait for the scheduler and its workers before giving up (exit 2)


class _YamlKeys(_Section):
    # Required unless every row is answered by its task (a judge meta-evaluation): tasks.registry.check_example.
    candidates: list[ModelConfig] = []
    datasets: list[DatasetConfig] = []
    judges: list[ModelConfig] = []
    judge: ModelConfig | None = None  # a single judge, accepted for convenience
    run: RunConfig = RunConfig()
    cache: CacheConfig = CacheConfig()
    retry: RetryConfig = RetryConfig()
    judging: JudgingConfig = JudgingConfig()
    synthesize: SynthesizeConfig | None = None
    export: ExportConfig | None = None
    batch: BatchConfig = BatchConfig()
    executor: ExecutorConfig = ExecutorConfig()


class Config(_YamlKeys):
    # Not YAML keys: where the config came from, and the line of every dotted key in it (for error messages).
    path: str = ""
    lines: dict[str, int] = {}

    def fail(self, key: str, message: str) -> InputError:
        """An InputError naming this config file, the key and the line of the key (or of the nearest key above it)."""
        k = key
        while k and k not in self.lines:
            k = k.rsplit(".", 1)[0] if "." in k else ""
        return InputError(message, file=self.path or None, line=self.lines.get(k), key=key)

    @property
    def judge_pool(self) -> list[ModelConfig]:
        return list(self.judges) + ([self.judge] if self.judge else [])

    def data(self) -> dict[str, Any]:
        """The resolved config as plain data, its YAML keys only (the run folder's config.yaml is this without the
        secrets: providers/redact.py's `redacted_config`)."""
        data = msgspec.to_builtins(self, builtin_types=(datetime.datetime, datetime.date, bytes))  # as YAML read them
        return {k: data[k] for k in _YamlKeys.__struct_fields__}

    def entries(self) -> list[tuple[str, ModelConfig]]:
        """Every candidate and judge entry, with the key that names it (`candidates[0]`, `judges[1]`, `judge`)."""
        out = [(f"candidates[{i}]", m) for i, m in enumerate(self.candidates)]
        out += [(f"judges[{i}]", m) for i, m in enumerate(self.judges)]
        return out + ([("judge", self.judge)] if self.judge else [])


# --------------------------------------------------------------------------------------------------
# Loading


def _key_lines(file: str, root: yaml.Node) -> dict[str, int]:
    """The line of every dotted key path in the YAML (`run.seed`, `candidates[0].model`), an alias walked as what it
    expands to. A key met twice raises, and so do more than MAX_CONFIG_VALUES paths (an alias bomb, a node that
    contains itself) before anything is built from them."""
    out: dict[str, int] = {}
    todo: list[tuple[str, yaml.Node]] = [("", root)]
    while todo:
        prefix, node = todo.pop()
        if isinstance(node, yaml.MappingNode):
            children = [(f"{prefix}.{k.value}" if prefix else str(k.value), k, v) for k, v in node.value]
        else:
            children = [(f"{prefix}[{i}]", v, v) for i, v in enumerate(node.value)]
        for path, key, _ in children:
            line = key.start_mark.line + 1
            if path in out:
                raise InputError(
                    "duplicate key (YAML would silently keep the last one)", file=file, line=line, key=path
                )
            out[path] = line
        if len(out) > MAX_CONFIG_VALUES:
            raise InputError(
                f"the config expands to more than {MAX_CONFIG_VALUES:,} values (YAML aliases repeated?)", file=file
            )
        todo += [(path, v) for path, _, v in reversed(children) if not isinstance(v, yaml.ScalarNode)]
    return out


MAX_SEED = 2**64 - 1  # run.seed: msgspec's ranges stop at int64, so _check says this one


def _finite(value: Any, key: str, cfg: Config) -> None:
    """No NaN, infinity or integer past the largest float anywhere in a value (a NaN passes every range check: `x < 0`
    and `x > 1` are false; msgspec checks neither a float without a range nor an `Any` value)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise cfg.fail(key, f"expected a finite number, got {value!r}")
    if isinstance(value, int) and abs(value) > sys.float_info.max:
        raise cfg.fail(key, f"expected a finite number, got an integer of {len(str(value))} digits")
    if isinstance(value, dict):
        for k, v in value.items():
            _finite(v, f"{key}.{k}" if key else str(k), cfg)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _finite(v, f"{key}[{i}]", cfg)


# msgspec's names of YAML's types, and a step of its error's path (`.name`, `[0]`, `[...]`: a mapping's value).
_YAML_TYPES = {"object": "a mapping", "array": "a list", "int": "an integer", "float": "a number", "str": "a string"}
_YAML_TYPES |= {"bool": "true or false"}
_STEP = re.compile(r"\.(\w+)|\[(\d+)\]|\[\.\.\.\]")


def _bare(tp: Any) -> Any:
    """A type without its `| None` (every union of the config is one)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        (tp,) = (a for a in typing.get_args(tp) if a is not type(None))
    return tp


def _convert(raw: dict[str, Any], cfg: Config) -> _YamlKeys:
    """The config's keys read by msgspec; its error said with the dotted key, what was expected and the value."""
    try:
        return msgspec.convert(raw, _YamlKeys)
    except msgspec.ValidationError as e:
        what, at, where = str(e).rpartition(" - at `")
    what, where = (what, where) if at else (where, "")  # an error at the top names no place
    key, value, tp = "", raw, _YamlKeys
    for name, index in _STEP.findall(where):  # the key, its value and type, step by step
        if name:
            tp = next(f.type for f in msgspec.structs.fields(_bare(tp)) if f.name == name)
            key, value = f"{key}.{name}" if key else name, value[name]
        elif index:
            tp, key, value = typing.get_args(_bare(tp))[0], f"{key}[{index}]", value[int(index)]
        else:  # a mapping's value: the first that msgspec refuses
            tp = typing.get_args(_bare(tp))[1]
            for k, v in value.items():
                try:
                    msgspec.convert(v, tp)
                except msgspec.ValidationError:
                    key, value = f"{key}.{k}", v
                    break
    tp = _bare(tp)
    if where.startswith("key`"):  # a key of a mapping that is not a string
        bad_key = next(k for k in value if not isinstance(k, str))
        raise cfg.fail(key, f"expected a string for every key, got {bad_key!r}")
    if what.startswith("Object "):  # an unknown key of a section, or a required one missing
        name = what[what.index("`") + 1 : -1]
        sub = f"{key}.{name}" if key else name
        if "missing" in what:
            raise cfg.fail(sub, "missing required key")
        raise cfg.fail(sub, f"unknown key (allowed: {', '.join(sorted(f.name for f in msgspec.structs.fields(tp)))})")
    expected = what.split(", got")[0].removeprefix("Expected ")  # msgspec's "Expected `int` >= 1, got `str`"
    expected = re.sub(r"`(.*?)`", lambda m: " or ".join(_YAML_TYPES.get(t, t) for t in m[1].split(" | ")), expected)
    if typing.get_origin(tp) is Literal:
        expected = f"one of {' | '.join(repr(a) for a in typing.get_args(tp))}"
    raise cfg.fail(key, f"expected {expected}, got {'null' if value is None else repr(value)}")


# A config is a few hundred values; these bounds refuse a YAML alias bomb (a few lines that expand to billions of
# values) or a huge file before anything is built from it.
MAX_CONFIG_BYTES = 4 << 20
MAX_CONFIG_VALUES = 100_000  # keys and list items, every alias counted as what it expands to


def _read_yaml(file: str) -> tuple[Any, dict[str, int]]:
    """The config file's data and the line of every key in it, composed once, bounded in size."""
    text = read_text(file, "config", max_bytes=MAX_CONFIG_BYTES)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        lines = _key_lines(file, node) if not isinstance(node, yaml.ScalarNode) else {}
        return loader.construct_document(node), lines
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(f"malformed YAML: {problem}", file=file, line=mark.line + 1 if mark else None) from None
    except RecursionError:
        raise InputError("malformed YAML: nested too deeply", file=file) from None
    finally:
        loader.dispose()


def load_config(path: str | os.PathLike[str]) -> Config:
    file = str(path)
    raw, lines = _read_yaml(file)
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise InputError("the config must be a YAML mapping at the top level", file=file)
    blank = Config(path=file, lines=lines)  # names the file and the line before the config is built
    _finite(raw, "", blank)
    cfg = Config(**msgspec.structs.asdict(_convert(raw, blank)), path=file, lines=lines)
    _check(cfg)
    return cfg


# --------------------------------------------------------------------------------------------------
# Checks across fields


def _check(cfg: Config) -> None:
    """Cross-field checks that types alone cannot express."""
    if not cfg.datasets and cfg.synthesize is None:
        raise cfg.fail("datasets", "no datasets and no synthesize section: nothing to run on")
    if cfg.run.seed > MAX_SEED:
        raise cfg.fail("run.seed", f"expected an integer <= {MAX_SEED}, got {cfg.run.seed}")
    seen: set[tuple[bool, str]] = set()  # (a candidate?, name): a name is used once per role
    for key, m in cfg.entries():
        _check_model(cfg, key, m)
        role = (key.startswith("candidates"), m.name)
        if role in seen:
            raise cfg.fail(f"{key}.name", f"duplicate name '{m.name}'")
        seen.add(role)
    checks = (_check_routers, _check_judging, _check_export, _check_synthesize, _check_datasets, _check_batch)
    for check in (*checks, _check_executor):
        check(cfg)


# Model keys that act in one role only: given in the other they would be silently ignored, so they are rejected.
_ROLE_ONLY = {
    "samples_per_prompt": ("candidates", "a judge calls once per criterion (judging.judges_per_criterion asks more)"),
    "structured_output": ("judges", "only judge calls ask for a JSON schema"),
    "responses_from": ("candidates", "a judge's verdicts are never replayed from a file"),
    "response_column": ("candidates", "a judge's verdicts are never replayed from a file"),
}
_SOURCES = "deployments responses_from response_column model models".split()  # of an entry's answers: one
_NOT_WITH_DEPLOYMENTS = "api_base api_key_env rpm tpm".split()  # a Router entry sets them per deployment


def _check_model(cfg: Config, key: str, m: ModelConfig) -> None:
    """One candidate or judge entry."""
    _check_deployments(cfg, key, m)
    given = [name for name in _SOURCES if getattr(m, name)]
    if not given:
        why = "missing required key (or give `models`, `deployments`, `responses_from` or `response_column`)"
        raise cfg.fail(f"{key}.model", why)
    if len(given) > 1:
        raise cfg.fail(f"{key}.{given[1]}", f"give one of {', '.join(_SOURCES)}, not both {given[0]} and {given[1]}")
    if m.replays and m.samples_per_prompt != 1:
        raise cfg.fail(f"{key}.samples_per_prompt", "a replayed candidate has one answer per turn")
    section = "candidates" if key.startswith("candidates") else "judges"
    for name, (role, why) in _ROLE_ONLY.items():
        if role != section and f"{key}.{name}" in cfg.lines:
            raise cfg.fail(
                f"{key}.{name}", f"has no effect on {'a judge' if role == 'candidates' else 'a candidate'}: {why}"
            )
    if not m.name.strip() or not m.name.isprintable():
        raise cfg.fail(f"{key}.name", f"expected a name of printable characters, got {m.name!r}")
    if "api_key" in m.params:
        raise cfg.fail(f"{key}.params.api_key", "a key is never written in a config: name its variable in api_key_env")
    if not weights_add_up([w.weight for w in m.models]):
        raise cfg.fail(f"{key}.models", "the weights add up past the largest number")
    for mm in [m.model] + [w.model for w in m.models]:
        if mm and "/" not in mm:
            raise cfg.fail(f"{key}.model", f"'{mm}' has no provider prefix (write e.g. openai/{mm} or local/smollm2)")


# The providers whose batch API LiteLLM 1.106.2 drives (`litellm.create_batch`'s custom_llm_provider).
BATCH_PROVIDERS = ("openai", "azure", "vertex_ai", "bedrock", "hosted_vllm", "litellm_proxy", "mistral", "xai")


def _check_batch(cfg: Config) -> None:
    """`batch: true` only where LiteLLM can send a batch job (the `batch:` settings' ranges are on their fields)."""
    batched = [(f"{key}.batch", m) for key, m in cfg.entries() if m.batch]
    for key, m in batched:
        if m.replays:
            raise cfg.fail(key, "a candidate with responses_from/response_column makes no calls to batch")
        if m.deployments:
            raise cfg.fail(key, "an entry served by a Router (`deployments:`) sends its calls online")
        if not cfg.cache.enabled:
            raise cfg.fail(key, "batch replies are delivered through the cache: set cache.enabled: true")
        for model in [m.model] + [w.model for w in m.models]:
            provider = model.split("/", 1)[0] if model else ""
            if provider and provider not in BATCH_PROVIDERS:
                where = "the embedded llama.cpp model" if provider == "local" else f"provider '{provider}'"
                raise cfg.fail(key, f"{where} has no batch API (batchable: {', '.join(BATCH_PROVIDERS)})")


def _check_deployments(cfg: Config, key: str, m: ModelConfig) -> None:
    """An entry served by a Router: its deployments say where and how fast; the entry says nothing of either."""
    if not m.deployments:
        if m.router is not None:
            raise cfg.fail(f"{key}.router", "only applies to an entry with `deployments:`")
        return
    for name in _NOT_WITH_DEPLOYMENTS:
        if f"{key}.{name}" in cfg.lines:
            raise cfg.fail(f"{key}.{name}", "give either `deployments` or this key, not both (set it per deployment)")
    for j, d in enumerate(m.deployments):
        k = f"{key}.deployments[{j}]"
        if "/" not in d.model:
            raise cfg.fail(f"{k}.model", f"'{d.model}' has no provider prefix (write e.g. hosted_vllm/{d.model})")
        if d.model.startswith("local/"):
            raise cfg.fail(
                f"{k}.model", "a local/ model runs in-process: give it `model:`, a Router spreads calls over servers"
            )
        for name in ("model", "messages", "api_key"):
            if name in d.params:
                raise cfg.fail(f"{k}.params.{name}", "is set by rubricrun (keys come from api_key_env)")
    for name in ("rpm", "tpm", "weight"):  # the entry is paced at the sums (router.group_limits)
        if not weights_add_up([getattr(d, name) for d in m.deployments if getattr(d, name) is not None]):
            raise cfg.fail(f"{key}.deployments", f"the deployments' {name} add up past the largest number")


def _check_routers(cfg: Config) -> None:
    """Router fallbacks name other entries; one name is one Router group, so it describes one set of deployments."""
    by_name: dict[str, ModelConfig] = {}
    for key, m in cfg.entries():
        other = by_name.setdefault(m.name, m)
        if other is not m and (m.deployments or other.deployments) and other.deployments != m.deployments:
            raise cfg.fail(f"{key}.name", f"'{m.name}' names another entry with other deployments: rename one")
    for key, m in cfg.entries():
        for j, target in enumerate(m.router.fallbacks if m.router else []):
            if target == m.name or target not in by_name or by_name[target].replays:
                why = "is this entry itself" if target == m.name else "is not a candidate or judge that makes calls"
                raise cfg.fail(f"{key}.router.fallbacks[{j}]", f"'{target}' {why}")


def _check_judging(cfg: Config) -> None:
    j, pool = cfg.judging, len(cfg.judge_pool)
    if j.default_rubric:
        if why := rubric_weights_problem([c.weight for c in j.default_rubric]):
            raise cfg.fail("judging.default_rubric", why)
        for i, c in enumerate(j.default_rubric):
            if c.id and not c.id.isprintable():
                raise cfg.fail(f"judging.default_rubric[{i}].id", f"expected printable characters, got {c.id!r}")
    if j.judges_per_criterion > max(1, pool):
        raise cfg.fail("judging.judges_per_criterion", f"is {j.judges_per_criterion} but the pool has {pool} judges")
    if j.on_tie == "judge" and pool <= j.judges_per_criterion:
        raise cfg.fail(
            "judging.on_tie",
            f"'judge' needs a judge outside the {j.judges_per_criterion} voting on a criterion, but the pool has "
            f"{pool}: add a judge or choose error or not_met",
        )
    p = j.pairwise
    if p is None:
        return
    names = [c.name for c in cfg.candidates]
    if (p.baseline is None) == (not p.all_pairs):
        raise cfg.fail("judging.pairwise", "give either `baseline: <candidate>` or `all_pairs: true`")
    if p.baseline is not None and p.baseline not in names:
        raise cfg.fail(
            "judging.pairwise.baseline", f"'{p.baseline}' is not a candidate (candidates: {', '.join(names)})"
        )
    if len(names) < 2:
        raise cfg.fail("judging.pairwise", "needs at least two candidates")
    if not pool:
        raise cfg.fail("judging.pairwise", "needs a judge (add judges:)")


def _check_export(cfg: Config) -> None:
    e = cfg.export
    if e is None:
        return
    names = [c.name for c in cfg.candidates]
    for key in ("chosen_candidate", "rejected_candidate"):
        value = getattr(e, key)
        if value is not None and names and value not in names:
            raise cfg.fail(f"export.{key}", f"'{value}' is not a candidate (candidates: {', '.join(names)})")
        if value is None and e.pair_by == "candidate":
            raise cfg.fail(
                f"export.{key}", "export.pair_by: candidate needs both chosen_candidate and rejected_candidate"
            )
    if e.chosen_candidate is not None and e.chosen_candidate == e.rejected_candidate:
        raise cfg.fail("export.rejected_candidate", "must differ from export.chosen_candidate")


def _check_synthesize(cfg: Config) -> None:
    s = cfg.synthesize
    if s is None:
        return
    if not cfg.candidates:
        raise cfg.fail("candidates", "at least one candidate is required: synthesized prompts are answered by them")
    if s.model and s.model not in {m.name for m in [*cfg.candidates, *cfg.judge_pool]}:
        raise cfg.fail("synthesize.model", f"no candidate or judge named '{s.model}'")


def _check_datasets(cfg: Config) -> None:
    names = set()
    for i, d in enumerate(cfg.datasets):
        key = f"datasets[{i}]"
        if d.name and not d.name.isprintable():
            raise cfg.fail(f"{key}.name", f"expected a name of printable characters, got {d.name!r}")
        if not d.path and not d.hf:
            raise cfg.fail(f"{key}.path", "missing required key (or give `hf:` for a Hugging Face dataset)")
        if d.path and d.hf:
            raise cfg.fail(f"{key}.hf", "give either `path` (a file) or `hf` (a Hugging Face dataset), not both")
        for k in ("config", "split"):
            if getattr(d, k) is not None and not d.hf:
                raise cfg.fail(f"{key}.{k}", "only applies to a Hugging Face dataset (`hf:`)")
        name = dataset_name(d)
        if name in names:
            raise cfg.fail(f"{key}.name", f"duplicate dataset name '{name}'")
        names.add(name)


# A Dask scheduler address: a protocol and host:port (`tcp://10.0.0.5:8786`), or host:port (tcp is meant).
_ADDRESS = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?\[?[A-Za-z0-9._:-]+\]?:[0-9]{1,5}$")


def scheduler_address_error(address: str) -> str | None:
    """Why `address` is not a Dask scheduler address (None when it is one)."""
    if not _ADDRESS.match(address):
        return f"{address!r} is not a scheduler address (write e.g. tcp://10.0.0.5:8786)"
    return None


def _check_executor(cfg: Config) -> None:
    e = cfg.executor
    if e.engine == "threads":
        for name in ("workers", "address"):
            if getattr(e, name) is not None:
                raise cfg.fail(f"executor.{name}", "only applies to executor.engine: dask")
    elif e.address is not None and (why := scheduler_address_error(e.address)):
        raise cfg.fail("executor.address", why)


# --------------------------------------------------------------------------------------------------
# Reading the config


def generation_only(cfg: Config) -> bool:
    """A generation run: candidates and no judges (collect answers, distil a teacher into SFT data, judge later with
    `responses_from`). Every example is answered whatever it holds; nothing is judged (issue 23)."""
    return not cfg.judge_pool


def dataset_name(d: DatasetConfig) -> str:
    """The config's `name`, else the file name without its extensions (`x.jsonl.gz` -> `x`), else the Hub name's
    last part (`openai/gsm8k` -> `gsm8k`)."""
    if d.name:
        return d.name
    if d.hf:
        return Path(d.hf.rstrip("/")).name
    return Path(Path(d.path).name.removesuffix(".gz")).stem
