"""The reference in docs/ against the code, so it cannot drift: every config key (with its default and, for a key
with a fixed set of values, every value) in docs/configuration.md; every file a run writes, every field of its row
types and every summary.json key down to the per-dataset results in docs/run-folder.md; the README's size and
links. `make test` also runs `mkdocs build --strict`, which fails on a broken link or anchor between pages."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any, Literal

import msgspec

from rubricrun import config as C
from rubricrun.results import summary_types as S
from rubricrun.tasks import registry
from rubricrun.types import Example, Judgment, PairJudgment, Response, TraceEvent

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
MISSING = msgspec.NODEFAULT


def _table_rows(path: Path) -> dict[str, list[str]]:
    """Each Markdown table row whose first cell is a `code` key: key -> the row's other cells."""
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\|\s*`([^`]+)`[^|]*\|(.*)\|\s*$", line)
        if m:  # the first row of a key (judgments.jsonl has a second one, for its pairwise rows)
            rows.setdefault(m.group(1), [c.strip() for c in m.group(2).split("|")])
    return rows


def _bare(tp: Any) -> Any:
    """`X | None` (or `X | UnsetType`) -> X."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a not in (type(None), msgspec.UnsetType)]
        return args[0] if len(args) == 1 else tp
    return tp


def _section(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, msgspec.Struct)


def _config_keys(cls: type, prefix: str, out: dict[str, tuple[msgspec.structs.FieldInfo, Any]]) -> None:
    """Every YAML key under `cls` as a path (`run.seed`, `datasets[].path`); model entries are documented once,
    as `entry.<key>`."""
    hints = typing.get_type_hints(cls)
    for f in msgspec.structs.fields(cls):
        if cls is C.Config and f.name in ("path", "lines"):  # not YAML keys
            continue
        tp = _bare(hints[f.name])
        listed = typing.get_origin(tp) is list and _section(typing.get_args(tp)[0])
        key = prefix + f.name + ("[]" if listed else "")
        out[key] = (f, tp)
        inner = typing.get_args(tp)[0] if listed else tp
        if _section(inner) and inner is not C.ModelConfig:
            _config_keys(inner, key + ".", out)


def _default(f: msgspec.structs.FieldInfo) -> str | None:
    """The default as the docs write it; None where the docs describe it in words (a section, an empty string)."""
    if f.default_factory is not MISSING:
        return "{}" if isinstance(f.default_factory(), dict) else "[]"
    value = f.default
    if value is MISSING:
        return "required"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value == "" or isinstance(value, msgspec.Struct):
        return None
    return str(value)


def test_the_config_reference_has_every_key_its_default_and_its_values() -> None:
    keys: dict[str, tuple[msgspec.structs.FieldInfo, Any]] = {}
    _config_keys(C.Config, "", keys)
    _config_keys(C.ModelConfig, "entry.", keys)
    documented = _table_rows(DOCS / "configuration.md")
    assert sorted(set(keys) - set(documented)) == [], "config keys missing from docs/configuration.md"
    assert sorted(set(documented) - set(keys)) == [], "docs/configuration.md lists keys the config does not have"
    for key, (f, tp) in keys.items():
        default, meaning = documented[key][0], " ".join(documented[key][1:])
        want = _default(f)
        if want is not None:
            assert default.strip("`") == want, (key, default, want)
        literal = typing.get_args(tp)[0] if typing.get_origin(tp) is list else tp
        values = typing.get_args(literal) if typing.get_origin(literal) is Literal else REGISTERED.get(key, ())
        left_out = [v for v in values if f"`{v}`" not in meaning]
        assert left_out == [], f"{key}: values not documented: {left_out}"


# Keys whose values the task registry holds (the config keeps them as strings).
REGISTERED = {"datasets[].format": ("auto", *registry.FORMATS), "datasets[].metric": tuple(registry.METRICS)}


def _summary_keys(cls: type, prefix: str, out: list[str], depth: int) -> None:
    """summary.json keys as paths (`datasets.*.candidates.*.score`, `datasets.*.leaderboard[].rank`), `depth`
    levels of nested summary types deep (deeper ones are described in their parent's row)."""
    hints = typing.get_type_hints(cls)
    for f in msgspec.structs.fields(cls):
        if cls is S.DatasetCandidate and f.name == "extra":  # its keys sit beside the others, named by the metric
            continue
        key = prefix + f.encode_name  # the key in the file: `lambda` for the field `lam` (a Python keyword)
        out.append(key)
        tp = _bare(hints[f.name])
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        inner, sub = (
            (args[1], key + ".*.") if origin is dict else (args[0], key + "[].") if origin is tuple else (tp, key + ".")
        )
        if depth and isinstance(inner, type) and issubclass(inner, msgspec.Struct):
            _summary_keys(inner, sub, out, depth - 1)


def test_the_summary_reference_has_every_key_down_to_the_per_dataset_results() -> None:
    keys: list[str] = []
    _summary_keys(S.Summary, "", keys, 0)
    _summary_keys(S.DatasetSummary, "datasets.*.", keys, 2)
    _summary_keys(S.Overall, "overall.", keys, 1)
    documented = [
        k
        for k in _table_rows(DOCS / "run-folder.md")
        if not k.endswith((".jsonl", ".json", ".yaml", ".html", ".log", ".csv"))
    ]
    assert sorted(set(keys) - set(documented)) == [], "summary.json keys missing from docs/run-folder.md"
    assert sorted(set(documented) - set(keys)) == [], "docs/run-folder.md lists summary.json keys that do not exist"
    assert [k for k in documented if "." not in k] == list(S.Summary.__struct_fields__)  # file order


ROW_TYPES = {
    "examples.jsonl": Example,
    "responses.jsonl": Response,
    "judgments.jsonl": Judgment,
    "trace.jsonl": TraceEvent,
}
CONDITIONAL_FILES = {"batches.json"}  # written only by a run with batch entries (tests/test_batch.py)
CONDITIONAL_FILES |= {"label_sheet.jsonl", "label_sheet.csv"}  # by `run.py --label-sheet` (tests/test_anchor_run.py)


def test_the_run_folder_reference_has_every_file_and_row_field(
    server: Any, make_config: Any, cli_main: Any, tmp_path: Path
) -> None:
    judges = [{"name": "j1", "model": "openai/judge-one", "api_base": server.base_url}]
    rubric = [{"id": "helpful", "text": "The response answers the question.", "weight": 1}]
    path = make_config(server, judges=judges, judging={"default_rubric": rubric}, export={"formats": ["sft", "dpo"]})
    rc, _, err = cli_main(["--config", str(path), "--run-id", "docs", "--max-examples", "1"])
    assert rc == 0, err
    run = path.parent / "outputs" / "docs"
    written = {
        re.sub(r"^export/[a-z]+\.jsonl$", "export/<format>.jsonl", p.relative_to(run).as_posix())
        for p in run.rglob("*")
        if p.is_file() and not p.name.startswith(".")  # lock files
    }
    rows = _table_rows(DOCS / "run-folder.md")
    files = {k for k in rows if "." in k and not k.startswith(("datasets.", "overall."))}
    assert sorted(written - files) == [], "files a run writes that docs/run-folder.md does not list"
    assert sorted(files - written - CONDITIONAL_FILES) == [], "docs/run-folder.md lists files a run does not write"
    pairwise = next(line for line in (DOCS / "run-folder.md").read_text().splitlines() if "(pairwise)" in line)
    for name, cls, text in [*((n, c, " ".join(rows[n])) for n, c in ROW_TYPES.items()), ("", PairJudgment, pairwise)]:
        fields = cls.__struct_fields__
        assert [n for n in fields if f"`{n}`" not in text] == [], f"{name or 'pairwise'}: fields not documented"


def test_the_readme_is_short_and_its_links_into_docs_exist() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 12_000
    assert "make demo" in readme and "make test" in readme
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links and [p for p in links if not (REPO / p).is_file()] == []
