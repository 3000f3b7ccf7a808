"""The task registry (ExecPlan 016): its invariants, each metric against its source's vectors, detection of the
sample rows as before the registry, and imports flowing one way."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from oracles import detect_format
from vectors import VECTORS

from rubricrun.tasks import registry
from rubricrun.tasks.spec import Metric, Task

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "rubricrun"


def test_registry_names_are_unique_and_ordered() -> None:
    # Detection order (a row is read by the first task that takes it), as loaders._detect had it at 626391e, with
    # the judge meta-evaluation before HealthBench (its rows carry prompt_id and a list prompt too).
    assert registry.FORMATS == ("prbench", "meta_eval", "healthbench", "mtbench", "mc", "qa", "generic")
    # A dataset's majority vote breaks ties in this order (results/metrics.METRICS at 626391e, then the new ones).
    assert list(registry.METRICS) == [
        *("accuracy", "healthbench", "prbench", "rubric", "mt_bench", "rubric_graded"),
        "judge_meta_eval",
    ]
    assert len(set(registry.FORMATS)) == len(registry.TASKS)
    assert all(isinstance(t, Task) and isinstance(t.metric, Metric) for t in registry.TASKS)
    for t in registry.TASKS:  # every metric a task calls for is registered, under its own name
        for m in (t.metric, t.metric_with_rubric):
            assert m is None or registry.METRICS[m.name] is m
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        registry.metric("bleu")


def test_every_metric_reproduces_its_vectors() -> None:
    # Every metric scoring one response at a time comes with its source's vectors (tests/vectors.py).
    assert set(VECTORS) == set(registry.METRICS) - {"judge_meta_eval"}
    checked = 0
    for m in registry.METRICS.values():
        for v in VECTORS.get(m.name, ()):
            got = m.values(v.example or _bare(), v.criteria, list(v.marks), 1)
            for key, want in v.expected.items():
                if want is None:
                    assert key not in got, (m.name, v.name, key)
                else:
                    assert got[key] == pytest.approx(want, abs=1e-12), (m.name, v.name, key)
            checked += 1
    assert checked >= 3  # at least HealthBench's


def _bare():
    from rubricrun.types import Example

    return Example(id="d/x", dataset="d", source="x:1", messages=({"role": "user", "content": "q"},))


# Each sample row's format at 626391e (loaders._detect), file by file.
SAMPLE_FORMATS = {
    "generic_sample": ["generic"] * 3,
    "healthbench_sample": ["healthbench"] * 3,
    "mc_sample": ["mc"] * 4,
    "mtbench_sample": ["mtbench"] * 3,
    "prbench_sample": ["prbench"] * 3,
    "qa_sample": ["qa"] * 4,
}


def test_detection_as_before() -> None:
    for name, formats in SAMPLE_FORMATS.items():
        rows = [json.loads(line) for line in (REPO / "data" / f"{name}.jsonl").read_text().splitlines() if line]
        assert [detect_format(r, registry.TASKS) for r in rows] == formats, name
    # A row two schemas could take goes to the earlier one, as before: turns (MT-Bench) before question + choices.
    assert detect_format({"turns": ["q"], "question": "q", "choices": ["a", "b"]}, registry.TASKS) == "mtbench"
    assert detect_format({"prompt_0": "q", "rubrics": []}, registry.TASKS) == "prbench"


def test_metric_choice_as_before() -> None:
    from rubricrun.types import Criterion, Example

    def ex(fmt, rubric=(), **kw):
        meta = {} if fmt is None else {"format": fmt}
        msgs = ({"role": "user", "content": "q"},)
        return Example(id="d/x", dataset="d", source="x:1", messages=msgs, metadata=meta, rubric=rubric, **kw)

    crit = (Criterion("c", "t"),)
    assert registry.metric_of(ex("mc", choices=("a", "b"), answer="A")) == "accuracy"
    assert registry.metric_of(ex("mc", crit, choices=("a", "b"), answer="A")) == "rubric"
    assert registry.metric_of(ex("qa", answer="4")) == "accuracy"
    assert registry.metric_of(ex("healthbench", crit)) == "healthbench"
    assert registry.metric_of(ex("prbench", crit)) == "prbench"
    assert registry.metric_of(ex("mtbench")) == "rubric"
    assert registry.metric_of(ex(None, answer="4")) == "accuracy"  # no format: by its shape
    assert registry.metric_of(ex("elsewhere", answer="4")) == "rubric"
    assert registry.metric_of_counts({"rubric": 2, "healthbench": 2}) == "healthbench"  # ties: METRICS order
    assert registry.metric_of_counts({}) == "rubric"
    assert [registry.metric_on_scale(m, "1-10") for m in ("accuracy", "rubric", "prbench")] == [
        "accuracy",
        "mt_bench",
        "mt_bench",
    ]
    assert registry.metric_on_scale("healthbench", "1-5") == "rubric_graded"
    assert registry.metric_on_scale("healthbench", "binary") == "healthbench"
    assert registry.on_error_for(None, "prbench") == "not_met"
    assert registry.on_error_for(None, "healthbench") == "exclude"
    assert registry.on_error_for("exclude", "prbench") == "exclude"
    assert registry.protocol_for("1-10").rating_criterion is not None
    assert registry.protocol_for("binary").rating_criterion is None


# Imports flow one way (docs/development.md): a module imports only from its own level or below.
LEVELS = {
    "types": 0, "codec": 0, "config": 0, "errors": 0, "providers": 1, "data": 2, "judging": 3,
    "tasks": 4, "results": 5, "engine": 6, "viewer": 7, "cli": 8, "__init__": 9,
}  # fmt: skip


def _imports(path: Path) -> list[str]:
    """The package-level wing of every relative import in `path`."""
    rel = path.relative_to(SRC).with_suffix("")
    pkg = list(rel.parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = pkg[: len(pkg) - (node.level - 1)]
            target = base + (node.module.split(".") if node.module else [])
            out += [target[0]] if target else [a.name for a in node.names]
    return out


def test_imports_one_way() -> None:
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        wing = path.relative_to(SRC).with_suffix("").parts[0]
        for target in _imports(path):
            if LEVELS[target] > LEVELS[wing]:
                wrong.append(f"{path.relative_to(SRC)} imports {target}")
    assert not wrong


# Benchmark names, as they are spelled in code (`mc`/`qa` name row shapes, Example.kind: not benchmarks).
BENCHMARK = re.compile(r"healthbench|prbench|mt[-_ ]?bench|gsm8k|meta_eval", re.IGNORECASE)
# Modules that still name a benchmark, with the step of ExecPlan 016 that moves it out.
NOT_YET: dict[str, str] = {}  # files allowed to name a benchmark for now (none: step 10 emptied it)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (module, class, function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def benchmark_names(path: Path, label: str | None = None) -> list[str]:
    """ "file:line: text" for every string constant (not a docstring), name or attribute naming a benchmark."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    label = label or path.relative_to(SRC).as_posix()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, ast.alias):
            text = node.name
        else:
            continue
        if BENCHMARK.search(text):
            found.append(f"{label}:{getattr(node, 'lineno', '?')}: {text[:60]!r}")
    return found


def test_no_benchmark_named_outside_tasks() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("tasks/") or rel in NOT_YET:
            continue
        found += benchmark_names(path)
    assert not found, "\n".join(found)


def test_the_guard_sees_a_benchmark_name(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""HealthBench in a docstring is fine."""\n# PRBench in a comment too\nx = "mtbench"\n'
        "from .x import MT_BENCH_PARAMS\ny = gsm8k.answer\n",
        encoding="utf-8",
    )
    assert benchmark_names(probe, "probe.py") == [
        "probe.py:3: 'mtbench'",
        "probe.py:4: 'MT_BENCH_PARAMS'",
        "probe.py:5: 'gsm8k'",
    ]


def test_check_config_names_the_key(tmp_path: Path) -> None:
    from rubricrun.config import load_config
    from rubricrun.errors import InputError

    def cfg(dataset: dict, judging: dict | None = None):
        doc = {"candidates": [{"name": "a", "model": "openai/x"}], "datasets": [{"path": "d.jsonl", **dataset}]}
        path = tmp_path / "c.yaml"
        path.write_text(json.dumps({**doc, "judging": judging or {}}), encoding="utf-8")
        return load_config(path)

    registry.check_config(cfg({"format": "mtbench", "metric": "mt_bench"}, {"scale": "1-10"}))
    with pytest.raises(InputError, match=r"c\.yaml:\d+: key 'datasets\[0\]\.format': expected one of 'auto' \| 'prb"):
        registry.check_config(cfg({"format": "csv"}))
    with pytest.raises(InputError, match=r"key 'datasets\[0\]\.metric': mt_bench reads graded .* judging.scale 1-10"):
        registry.check_config(cfg({"metric": "mt_bench"}))
    with pytest.raises(InputError, match=r"key 'datasets\[0\]\.metric': rubric_graded .* judging.scale 1-5"):
        registry.check_config(cfg({"metric": "rubric_graded"}, {"scale": "1-10"}))
    (tmp_path / "t.txt").write_text("{conversation} {criterion}", encoding="utf-8")
    with pytest.raises(InputError, match=r"judging.prompt_template': scale 1-10 judges with MT-Bench's own prompts"):
        registry.check_config(cfg({}, {"scale": "1-10", "prompt_template": str(tmp_path / "t.txt")}))
