"""Bad input through the real CLI (`python run.py --config X`): exit 2, one line on stderr starting with "error:" that
names the file, the line (where there is one) and the key, no traceback, and no request to the (fake) server:
every mistake is caught before anything is paid for."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import DELETE, KEY_ENV, model_entry, read_jsonl, run_cli, write_config, write_jsonl
from factories import one_candidate
from fakeserver import FakeOpenAIServer

UNSET_ENV = "RUBRICRUN_TEST_UNSET_KEY_VAR"
GOOD_ROW = {"id": "ok1", "prompt": "Say hi.", "rubric": [{"id": "c1", "text": "Says hi.", "weight": 1}]}


@dataclass
class Case:
    args: list[str]
    file: str | None = None  # a file name the message must contain
    line: int | None = None  # with `file`: the message contains "file:line"
    key: str | None = None  # the message contains "key 'KEY'"
    also: list[str] = field(default_factory=list)  # more substrings the message must contain


def line_of(path: Path, needle: str) -> int:
    """1-based number of the first line of `path` containing `needle`."""
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in {path}")


def dataset(tmp: Path, name: str, rows: list[Any], **extra: Any) -> list[dict[str, Any]]:
    return [{"path": str(write_jsonl(tmp / name, rows)), **extra}]


def _cfg(tmp: Path, srv: FakeOpenAIServer, **overrides: Any) -> Path:
    return write_config(tmp, srv, **overrides)


# Each builder writes what its case needs under tmp and returns the Case.


def malformed_yaml(tmp: Path, srv: FakeOpenAIServer) -> Case:
    path = tmp / "broken.yaml"
    path.write_text("candidates: []\nrun:\n  concurrency: 4\n\tprogress: false\n", encoding="utf-8")  # tab, line 4
    return Case(["--config", str(path)], file="broken.yaml", line=4, also=["YAML"])


def unknown_top_level_key(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv, bogus_section={"x": 1})
    return Case(["--config", str(cfg)], "config.yaml", line_of(cfg, "bogus_section:"), "bogus_section", ["unknown"])


def unknown_nested_key(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv, candidates=one_candidate(srv, temprature=0.5))
    return Case(["--config", str(cfg)], "config.yaml", line_of(cfg, "temprature:"), "candidates[0].temprature")


def wrong_type(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv, run={"concurrency": "many"})
    return Case(["--config", str(cfg)], "config.yaml", line_of(cfg, "concurrency:"), "run.concurrency", ["many"])


def missing_candidates(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv, candidates=DELETE)  # the rows need candidates (a judge meta-evaluation's would not)
    return Case(["--config", str(cfg)], "config.yaml", None, "candidates", ["at least one candidate is required"])


def missing_dataset_file(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv, datasets=[{"path": str(tmp / "no_such_data.jsonl")}])
    return Case(["--config", str(cfg)], "no_such_data.jsonl", None, None, ["not found"])


def malformed_jsonl_line(tmp: Path, srv: FakeOpenAIServer) -> Case:
    rows = [GOOD_ROW, '{"prompt": "Say bye.", "rubric": [', {**GOOD_ROW, "id": "ok3"}]
    cfg = _cfg(tmp, srv, datasets=dataset(tmp, "broken_rows.jsonl", rows))
    return Case(["--config", str(cfg)], "broken_rows.jsonl", 2, None, ["JSON"])


def row_missing_prompt(tmp: Path, srv: FakeOpenAIServer) -> Case:
    rows = [GOOD_ROW, {"id": "np", "rubric": [{"text": "Says hi.", "weight": 1}]}]
    cfg = _cfg(tmp, srv, datasets=dataset(tmp, "no_prompt.jsonl", rows, format="generic"))
    return Case(["--config", str(cfg)], "no_prompt.jsonl", 2, "prompt")


def rubric_without_criteria(tmp: Path, srv: FakeOpenAIServer) -> Case:
    rows = [GOOD_ROW, {"id": "empty", "prompt": "Say hi.", "rubric": []}]
    cfg = _cfg(tmp, srv, datasets=dataset(tmp, "empty_rubric.jsonl", rows))
    return Case(["--config", str(cfg)], "empty_rubric.jsonl", 2, "rubric", ["no criteria"])


def weight_not_a_number(tmp: Path, srv: FakeOpenAIServer) -> Case:
    rows = [GOOD_ROW, {"id": "w", "prompt": "Say hi.", "rubric": [{"text": "Says hi.", "weight": "heavy"}]}]
    cfg = _cfg(tmp, srv, datasets=dataset(tmp, "bad_weight.jsonl", rows))
    return Case(["--config", str(cfg)], "bad_weight.jsonl", 2, "rubric[0].weight", ["heavy"])


def model_without_provider(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv, candidates=[model_entry("alpha", "gpt-4o-mini", srv)])
    line = line_of(cfg, "model: gpt-4o-mini")
    return Case(["--config", str(cfg)], "config.yaml", line, "candidates[0].model", ["provider prefix"])


def missing_api_key(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv, candidates=one_candidate(srv, api_key_env=UNSET_ENV))
    return Case(["--config", str(cfg)], "config.yaml", None, "candidates[0].api_key_env", [UNSET_ENV])


def too_many_judges_per_criterion(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv, judging={"judges_per_criterion": 3})
    line = line_of(cfg, "judges_per_criterion:")
    return Case(["--config", str(cfg)], "config.yaml", line, "judging.judges_per_criterion", ["3"])


def missing_judge_template(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv, judging={"prompt_template": str(tmp / "no_template.txt")})
    return Case(["--config", str(cfg)], "no_template.txt", None, "judging.prompt_template")


def undecodable_judge_template(tmp: Path, srv: FakeOpenAIServer) -> Case:
    tpl = tmp / "latin1_template.txt"
    tpl.write_bytes(b"{conversation}\n{criterion}\ncaf\xe9\n")  # not UTF-8
    cfg = _cfg(tmp, srv, judging={"prompt_template": str(tpl)})
    return Case(["--config", str(cfg)], "latin1_template.txt", None, "judging.prompt_template")


def max_examples_zero(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv)
    return Case(["--config", str(cfg), "--max-examples", "0"], None, None, "--max-examples")


def unknown_cli_flag(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv)
    return Case(["--config", str(cfg), "--max-exmaples", "3"], None, None, None, ["--max-exmaples"])


def judge_samples_per_prompt(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv, judges=[model_entry("j1", "openai/judge-one", srv, samples_per_prompt=3)])
    line = line_of(cfg, "samples_per_prompt:")
    return Case(["--config", str(cfg)], "config.yaml", line, "judges[0].samples_per_prompt", ["no effect on a judge"])


def candidate_structured_output(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv, candidates=one_candidate(srv, structured_output="on"))
    line = line_of(cfg, "structured_output:")
    return Case(
        ["--config", str(cfg)], "config.yaml", line, "candidates[0].structured_output", ["no effect on a candidate"]
    )


def tie_judge_without_a_spare_judge(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv, judging={"judges_per_criterion": 2, "on_tie": "judge"})
    line = line_of(cfg, "on_tie:")
    return Case(["--config", str(cfg)], "config.yaml", line, "judging.on_tie", ["pool has 2"])


def private_without_push(tmp: Path, srv: FakeOpenAIServer) -> Case:
    cfg = _cfg(tmp, srv)
    return Case(["--config", str(cfg), "--private"], None, None, "--private", ["--push-to-hub"])


CASES: list[Callable[[Path, FakeOpenAIServer], Case]] = [
    malformed_yaml,
    unknown_top_level_key,
    unknown_nested_key,
    wrong_type,
    missing_candidates,
    missing_dataset_file,
    malformed_jsonl_line,
    row_missing_prompt,
    rubric_without_criteria,
    weight_not_a_number,
    model_without_provider,
    missing_api_key,
    too_many_judges_per_criterion,
    missing_judge_template,
    undecodable_judge_template,
    max_examples_zero,
    unknown_cli_flag,
    judge_samples_per_prompt,
    candidate_structured_output,
    tie_judge_without_a_spare_judge,
    private_without_push,
]


VALIDATE_TOO = {
    missing_dataset_file,
    malformed_jsonl_line,
    row_missing_prompt,
    rubric_without_criteria,
    weight_not_a_number,
    missing_api_key,
    missing_judge_template,
    undecodable_judge_template,
}


def check_one_line_error(rc: int, out: str, err: str, case: Case) -> str:
    assert rc == 2, (rc, err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.splitlines()
    assert len(lines) == 1, err
    msg = lines[0]
    assert msg.startswith("error:"), msg
    if case.file:
        assert case.file in msg, msg
        if case.line is not None:
            assert f"{case.file}:{case.line}" in msg, msg
    if case.key:
        assert f"key '{case.key}'" in msg, msg
    for s in case.also:
        assert s in msg, msg
    return msg


@pytest.mark.parametrize("build", CASES, ids=[c.__name__ for c in CASES])
def test_bad_input_is_one_line_exit_2_and_calls_nothing(
    build: Callable[[Path, FakeOpenAIServer], Case], tmp_path: Path, server: FakeOpenAIServer, monkeypatch
) -> None:
    monkeypatch.delenv(UNSET_ENV, raising=False)
    case = build(tmp_path, server)
    rc, out, err = run_cli(case.args)
    check_one_line_error(rc, out, err, case)
    assert server.count() == 0  # detected before any paid call
    # Mistakes found after the config is loaded (data, keys, templates) are caught by --validate too: it takes a
    # different path (runner.count_calls) from the run.
    if build in VALIDATE_TOO:
        rc, out, err = run_cli([*case.args, "--validate"])
        check_one_line_error(rc, out, err, case)
        assert server.count() == 0


def test_missing_api_key_names_the_config_line(tmp_path: Path, server: FakeOpenAIServer, monkeypatch) -> None:
    monkeypatch.delenv(UNSET_ENV, raising=False)
    case = missing_api_key(tmp_path, server)
    cfg = Path(case.args[1])
    case.line = line_of(cfg, f"api_key_env: {UNSET_ENV}")
    rc, out, err = run_cli(case.args)
    check_one_line_error(rc, out, err, case)


def test_missing_dataset_file_names_the_config_key(tmp_path: Path, server: FakeOpenAIServer) -> None:
    case = missing_dataset_file(tmp_path, server)
    cfg = Path(case.args[1])
    rc, out, err = run_cli(case.args)
    msg = check_one_line_error(rc, out, err, case)
    assert f"config.yaml:{line_of(cfg, 'no_such_data.jsonl')}" in msg and "key 'datasets[0].path'" in msg, msg


def test_the_key_itself_is_checked_not_only_the_name(tmp_path: Path, server: FakeOpenAIServer, monkeypatch) -> None:
    """An api_key_env whose variable is set but empty is as good as unset."""
    monkeypatch.setenv(KEY_ENV, "")
    cfg = write_config(tmp_path, server)
    rc, out, err = run_cli(["--config", str(cfg)])
    check_one_line_error(rc, out, err, Case([], "config.yaml", None, "candidates[0].api_key_env", [KEY_ENV]))
    assert server.count() == 0


def test_on_bad_row_skip_runs_and_counts_skipped_rows(tmp_path: Path, server: FakeOpenAIServer, cli_main) -> None:
    rows = [
        GOOD_ROW,
        '{"prompt": "Say bye.", "rubric": [',  # malformed JSON
        {"id": "w", "prompt": "Say hi.", "rubric": [{"text": "Says hi.", "weight": "heavy"}]},  # bad weight
        {"id": "ok4", "question": "What is 2 + 2?", "answer": "4"},
    ]
    cfg = write_config(
        tmp_path, server, candidates=one_candidate(server),
        datasets=dataset(tmp_path, "mixed.jsonl", rows), run={"on_bad_row": "skip"},
    )  # fmt: skip
    rc, out, err = cli_main(["--validate", "--config", str(cfg)])
    assert rc == 0, err
    assert json.loads(out)["skipped_rows"] == 2 and json.loads(out)["examples"] == 2
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "skip"])
    assert rc == 0, err
    out_dir = tmp_path / "outputs" / "skip"
    summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["skipped_rows"] == 2
    assert [e["id"] for e in read_jsonl(out_dir / "examples.jsonl")] == ["mixed/ok1", "mixed/ok4"]
    assert len(read_jsonl(out_dir / "responses.jsonl")) == 2
    log = (out_dir / "run.log").read_text(encoding="utf-8")
    assert "mixed.jsonl:2" in log and "mixed.jsonl:3" in log  # each skipped row is named in the log
    assert server.count(model="cand-alpha") == 2
