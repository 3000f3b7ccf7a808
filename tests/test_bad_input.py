"""A corpus of broken inputs, each run through the real `python run.py` as a subprocess.

Every case must be caught before any paid call: exit code 2, exactly one stderr line beginning "error:" that names
the file (with the line where the input has one) and the key (where there is one), no traceback, zero requests to the
fake server, and no data artifact (examples/responses/judgments/summary, or a temp file) in the run folder.

Each data case puts a valid dataset FIRST and the broken one second, so "detected before any call" also means the
whole input is checked before the first dataset is run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli, subprocess_env
from fakeserver import FakeOpenAIServer

KEY_ENV = "RUBRICRUN_BADINPUT_KEY"
DATA_ARTIFACTS = ("examples.jsonl", "responses.jsonl", "judgments.jsonl", "summary.json")
RUN_ID = "bad"


# --------------------------------------------------------------------------------------------------
# Helpers (running the CLI and its environment come from conftest.py)


def _env(tmp: Path, extra: dict[str, str | None] | None = None) -> dict[str, str]:
    return subprocess_env(tmp, {KEY_ENV: "sk-badinput-fake", **(extra or {})})


def line_of(path: Path, needle: str, nth: int = 1) -> int:
    """1-based line number of the nth line of `path` containing `needle`."""
    seen = 0
    for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if needle in line:
            seen += 1
            if seen == nth:
                return i
    raise AssertionError(f"{needle!r} not in {path}")


GOOD_ROWS = [
    {"id": f"ok{i}", "prompt": f"Good question {i}?", "rubric": [{"text": "Answers it.", "weight": 1}]}
    for i in range(3)
]


@dataclass
class Ctx:
    tmp: Path
    url: str

    @property
    def out(self) -> Path:
        return self.tmp / "outputs"

    def data(self, name: str, rows: list[Any], raw: bytes | None = None) -> Path:
        """A JSONL file: dicts are dumped as JSON, strings written verbatim (for malformed lines)."""
        path = self.tmp / name
        if raw is not None:
            path.write_bytes(raw)
        else:
            path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
        return path

    def base(self) -> dict[str, Any]:
        good = self.data("good.jsonl", GOOD_ROWS)

        def model(name: str, m: str) -> dict[str, Any]:
            return {"name": name, "model": m, "api_base": self.url, "api_key_env": KEY_ENV, "timeout_s": 5}

        return {
            "candidates": [model("alpha", "openai/cand-alpha"), model("beta", "openai/cand-beta")],
            "judges": [model("j1", "openai/judge-one")],
            "datasets": [{"path": str(good)}],
            "run": {"output_dir": str(self.out), "progress": False, "concurrency": 2, "bootstrap_samples": 20},
            "cache": {"dir": str(self.tmp / "cache")},
            "retry": {"initial_wait_s": 0.05, "max_wait_s": 2, "max_attempts": 2},
        }

    def with_data(self, path: Path, **dataset: Any) -> dict[str, Any]:
        cfg = self.base()
        cfg["datasets"].append({"path": str(path), **dataset})
        return cfg

    def config(self, cfg: dict[str, Any] | None = None, text: str | None = None, name: str = "config.yaml") -> Path:
        path = self.tmp / name
        if text is None:
            text = yaml.safe_dump(cfg if cfg is not None else self.base(), sort_keys=False)
        path.write_text(text, encoding="utf-8")
        return path

    def base_text(self) -> str:
        return yaml.safe_dump(self.base(), sort_keys=False)

    @staticmethod
    def args(config: Path, *extra: str) -> list[str]:
        return ["--config", str(config), "--run-id", RUN_ID, *extra]


# A case returns (CLI args, [substrings or compiled regexes the single error line must contain], extra env).
CaseResult = tuple[list[str], list[Any], dict[str, str | None]]


def _at(path: Path, line: int) -> str:
    return f"{path}:{line}:"


def _key(k: str) -> str:
    return f"key '{k}'"


# --------------------------------------------------------------------------------------------------
# The corpus: config file


def c_malformed_yaml(c: Ctx) -> CaseResult:
    text = c.base_text().replace("  concurrency: 2", "  concurrency: [2, 3")
    p = c.config(text=text)
    return c.args(p), [re.compile(re.escape(str(p)) + r":\d+: malformed YAML")], {}


def c_tab_indentation(c: Ctx) -> CaseResult:
    text = c.base_text().replace("\n  concurrency: 2", "\n\tconcurrency: 2")
    p = c.config(text=text)
    return c.args(p), [_at(p, line_of(p, "\tconcurrency")), "malformed YAML"], {}


def c_config_is_a_list(c: Ctx) -> CaseResult:
    p = c.config(text="- candidates\n- datasets\n")
    return c.args(p), [str(p), "mapping"], {}


def c_config_empty(c: Ctx) -> CaseResult:
    p = c.config(text="")
    return c.args(p), [str(p), _key("datasets")], {}  # nothing to run on (candidates are optional)


def c_config_not_found(c: Ctx) -> CaseResult:
    p = c.tmp / "nope.yaml"
    return c.args(p), [str(p), "not found"], {}


def c_config_not_utf8(c: Ctx) -> CaseResult:
    p = c.tmp / "config.yaml"
    p.write_bytes(c.base_text().encode() + b"# caf\xe9\n")
    return c.args(p), [str(p)], {}


def c_duplicate_yaml_key(c: Ctx) -> CaseResult:
    text = c.base_text().replace("  concurrency: 2\n", "  concurrency: 2\n  seed: 1\n  concurrency: 3\n")
    p = c.config(text=text)
    return c.args(p), [_at(p, line_of(p, "concurrency", nth=2)), _key("run.concurrency"), "duplicate"], {}


def c_unknown_top_key(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["runs"] = {"seed": 1}
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "runs:")), _key("runs"), "unknown key"], {}


def c_unknown_key_depth2(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["run"]["concurency"] = 4
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "concurency:")), _key("run.concurency"), "concurrency"], {}


def c_unknown_key_depth3(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["candidates"][1]["price"] = {"input_per_mtok": 1.0, "per_mtok": 2.0}
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "per_mtok: 2")), _key("candidates[1].price.per_mtok")], {}


def c_unknown_key_in_rubric_list(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["judging"] = {"default_rubric": [{"text": "Is polite."}, {"text": "Is short.", "wieght": 2}]}
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "wieght")), _key("judging.default_rubric[1].wieght")], {}


def c_string_for_int(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["run"]["concurrency"] = "four"
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "concurrency:")), _key("run.concurrency"), "integer"], {}


def c_list_for_mapping(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["retry"] = [1, 2]
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "retry:")), _key("retry"), "mapping"], {}


def c_bool_for_number(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["retry"]["max_wait_s"] = True
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "max_wait_s:")), _key("retry.max_wait_s"), "number"], {}


def c_bad_literal(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["run"]["on_bad_row"] = "sometimes"
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "on_bad_row:")), _key("run.on_bad_row"), "'skip'"], {}


def c_model_without_provider(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["candidates"][1]["model"] = "gpt-4o"
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "model: gpt-4o")), _key("candidates[1].model"), "openai/gpt-4o"], {}


def c_negative_samples(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["candidates"][0]["samples_per_prompt"] = -1
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "samples_per_prompt")), _key("candidates[0].samples_per_prompt")], {}


def c_zero_routing_weight(c: Ctx) -> CaseResult:
    cfg = c.base()
    del cfg["candidates"][0]["model"]
    cfg["candidates"][0]["models"] = [{"model": "openai/a", "weight": 1}, {"model": "openai/b", "weight": 0}]
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "weight: 0")), _key("candidates[0].models[1].weight")], {}


def c_judges_per_criterion_gt_pool(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["judging"] = {"judges_per_criterion": 3}
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "judges_per_criterion")), _key("judging.judges_per_criterion")], {}


def c_missing_api_key_env(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["judges"][0]["api_key_env"] = "RUBRICRUN_NOT_SET_ANYWHERE"
    p = c.config(cfg)
    line = line_of(p, "api_key_env: RUBRICRUN_NOT_SET_ANYWHERE")
    return c.args(p), [_at(p, line), _key("judges[0].api_key_env"), "RUBRICRUN_NOT_SET_ANYWHERE"], {}


def c_judge_template_missing(c: Ctx) -> CaseResult:
    cfg = c.base()
    tpl = c.tmp / "no_such_template.txt"
    cfg["judging"] = {"prompt_template": str(tpl)}
    p = c.config(cfg)
    return c.args(p), [str(tpl), _key("judging.prompt_template")], {}


def c_judge_template_is_dir(c: Ctx) -> CaseResult:
    cfg = c.base()
    tpl = c.tmp / "tpl_dir"
    tpl.mkdir()
    cfg["judging"] = {"prompt_template": str(tpl)}
    p = c.config(cfg)
    return c.args(p), [str(tpl), _key("judging.prompt_template")], {}


def c_judge_template_no_criterion(c: Ctx) -> CaseResult:
    cfg = c.base()
    tpl = c.tmp / "judge.txt"
    tpl.write_text("Conversation:\n{conversation}\nReturn JSON with criteria_met.\n")
    cfg["judging"] = {"prompt_template": str(tpl)}
    p = c.config(cfg)
    return c.args(p), [str(tpl), _key("judging.prompt_template"), "{criterion}"], {}


def c_synth_template_jinja_error(c: Ctx) -> CaseResult:
    cfg = c.base()
    tpl = c.tmp / "prompts.j2"
    tpl.write_text("Write {{ count }} prompts about {{ sub_topic }}.\n{% for x in exclusions %}\n- {{ x }\n")
    cfg["synthesize"] = {"main_topic": "cooking", "num_subtopics": 1, "prompts_per_subtopic": 1}
    cfg["synthesize"]["prompt_template"] = str(tpl)
    p = c.config(cfg)
    return c.args(p), [re.compile(re.escape(str(tpl)) + r":\d+:"), "Jinja2"], {}


def c_synth_zero_subtopics(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["synthesize"] = {"main_topic": "cooking", "num_subtopics": 0}
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "num_subtopics")), _key("synthesize.num_subtopics")], {}


# --------------------------------------------------------------------------------------------------
# The corpus: data files


def c_dataset_missing(c: Ctx) -> CaseResult:
    d = c.tmp / "missing.jsonl"
    p = c.config(c.with_data(d))
    return c.args(p), [str(d), "not found"], {}


def c_dataset_is_directory(c: Ctx) -> CaseResult:
    d = c.tmp / "adir.jsonl"
    d.mkdir()
    p = c.config(c.with_data(d))
    return c.args(p), [str(d), "directory"], {}


def c_jsonl_malformed_middle(c: Ctx) -> CaseResult:
    d = c.data("d.jsonl", [{"prompt": "a?"}, {"prompt": "b?"}, '{"prompt": "c?", ', {"prompt": "d?"}])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 3), "malformed JSON"], {}


def c_row_not_object(c: Ctx) -> CaseResult:
    d = c.data("d.jsonl", [{"prompt": "a?"}, '["prompt", "b?"]'])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), "object"], {}


def c_row_not_utf8(c: Ctx) -> CaseResult:
    d = c.data("d.jsonl", [], raw=b'{"prompt": "a?"}\n{"prompt": "caf\xe9?"}\n')
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), "UTF-8"], {}


def c_row_missing_prompt(c: Ctx) -> CaseResult:
    rub = [{"criterion": "Is kind.", "points": 2, "tags": []}]
    d = c.data("d.jsonl", [{"prompt": "a?"}, {"prompt_id": "hb-1", "rubrics": rub}])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), _key("prompt"), "missing"], {}


def c_message_without_role(c: Ctx) -> CaseResult:
    d = c.data("d.jsonl", [{"prompt": "a?"}, {"messages": [{"content": "hello?"}]}])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), _key("messages[0].role")], {}


def c_rubric_without_criteria(c: Ctx) -> CaseResult:
    d = c.data("d.jsonl", [{"prompt": "a?"}, {"prompt": "b?", "rubric": []}])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), _key("rubric")], {}


def c_weight_not_number(c: Ctx) -> CaseResult:
    rub = [{"text": "One."}, {"text": "Two.", "weight": "heavy"}]
    d = c.data("d.jsonl", [{"prompt": "a?"}, {"prompt": "b?", "rubric": rub}])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), _key("rubric[1].weight"), "'heavy'"], {}


def c_weight_nan(c: Ctx) -> CaseResult:
    d = c.data("d.jsonl", [{"prompt": "a?"}, '{"prompt": "b?", "rubric": [{"text": "One.", "weight": NaN}]}'])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), _key("rubric[0].weight"), "finite"], {}


def c_criterion_is_a_string(c: Ctx) -> CaseResult:
    d = c.data("d.jsonl", [{"prompt": "a?"}, {"prompt": "b?", "rubric": [{"text": "One."}, "Two."]}])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), _key("rubric[1]")], {}


def c_mc_answer_out_of_range(c: Ctx) -> CaseResult:
    row = {"question": "Which?", "choices": ["x", "y", "z"], "answer": "D"}
    d = c.data("d.jsonl", [{"question": "Q?", "choices": ["x", "y"], "answer": 1}, row])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), _key("answer"), "out of range"], {}


def c_unknown_schema(c: Ctx) -> CaseResult:
    d = c.data("d.jsonl", [{"prompt": "a?"}, {"instruction": "Say hi.", "output": "hi"}])
    p = c.config(c.with_data(d))
    # The message lists the row's keys and the mapping to add.
    return c.args(p), [_at(d, 2), "instruction, output", "fields: {prompt: instruction}"], {}


def c_duplicate_row_id(c: Ctx) -> CaseResult:
    d = c.data("d.jsonl", [{"id": "x1", "prompt": "a?"}, {"id": "x1", "prompt": "b?"}])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), _key("id"), "duplicate"], {}


def c_unknown_dataset_format(c: Ctx) -> CaseResult:
    d = c.data("d.jsonl", [{"prompt": "a?"}])
    p = c.config(c.with_data(d, format="csv"))
    return c.args(p), [_at(p, line_of(p, "format: csv")), _key("datasets[1].format")], {}


def c_unknown_field_name(c: Ctx) -> CaseResult:
    d = c.data("d.jsonl", [{"q": "a?"}])
    p = c.config(c.with_data(d, fields={"promt": "q"}))
    return c.args(p), [_at(p, line_of(p, "promt:")), _key("datasets[1].fields.promt")], {}


def c_dataset_negative_limit(c: Ctx) -> CaseResult:
    d = c.data("d.jsonl", [{"prompt": "a?"}])
    p = c.config(c.with_data(d, limit=-1))
    return c.args(p), [_at(p, line_of(p, "limit: -1")), _key("datasets[1].limit")], {}


def c_every_row_bad_with_skip(c: Ctx) -> CaseResult:
    d = c.data("allbad.jsonl", ['{"prompt": ', ["not", "an", "object"]])
    cfg = c.with_data(d)
    cfg["run"]["on_bad_row"] = "skip"
    p = c.config(cfg)
    return c.args(p), [f"every row of {d} is bad (2 skipped)", _at(d, 1), "malformed JSON"], {}


def c_nothing_can_score_mtbench(c: Ctx) -> CaseResult:
    d = c.data("mt.jsonl", [{"question_id": 81, "turns": ["Write a haiku.", "Now in French."]}])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(p, line_of(p, str(d))), _key("datasets[1]"), "nothing can score", "default_rubric"], {}


def c_fields_maps_missing_key(c: Ctx) -> CaseResult:
    d = c.data("mmlu.jsonl", [{"question": "Q?", "choices": ["a", "b"], "answer": 1}])
    p = c.config(c.with_data(d, fields={"choices": "choices.text"}))
    return c.args(p), [_at(d, 1), _key("choices.text"), "fields.choices"], {}


def c_csv_bad_row(c: Ctx) -> CaseResult:
    d = c.tmp / "d.csv"
    d.write_text('id,prompt,rubric\na,Hi?,\nb,Hi?,"[{""text"": ""x"", ""weight"": ""heavy""}]"\n', encoding="utf-8")
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 3), _key("rubric[0].weight")], {}


def c_json_array_bad_row(c: Ctx) -> CaseResult:
    d = c.tmp / "d.json"
    d.write_text(json.dumps([{"prompt": "a?"}, {"messages": [{"content": "no role"}]}]), encoding="utf-8")
    p = c.config(c.with_data(d))
    return c.args(p), [f"{d}:row 1:", _key("messages[0].role")], {}


def c_parquet_bad_row(c: Ctx) -> CaseResult:
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = c.tmp / "d.parquet"
    pq.write_table(pa.Table.from_pylist([{"question": "Q?", "choices": ["a", "b"], "answer": 5}]), d)
    p = c.config(c.with_data(d))
    return c.args(p), [f"{d}:row 0:", _key("answer"), "out of range"], {}


def c_hf_not_loadable(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["datasets"].append({"hf": "nobody-here/missing", "split": "test"})
    p = c.config(cfg)
    env = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    return c.args(p), [_at(p, line_of(p, "nobody-here")), _key("datasets[1].hf"), "cannot load"], env


def c_dataset_path_and_hf(c: Ctx) -> CaseResult:
    cfg = c.base()
    cfg["datasets"][0]["hf"] = "openai/gsm8k"
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "openai/gsm8k")), _key("datasets[0].hf"), "not both"], {}


# --------------------------------------------------------------------------------------------------
# The corpus: command line


def c_max_examples_not_int(c: Ctx) -> CaseResult:
    p = c.config()
    return c.args(p, "--max-examples", "abc"), ["--max-examples", "'abc'"], {}


def c_max_examples_zero(c: Ctx) -> CaseResult:
    p = c.config()
    return c.args(p, "--max-examples", "0"), ["--max-examples"], {}


def c_unknown_flag(c: Ctx) -> CaseResult:
    p = c.config()
    return c.args(p, "--frobnicate"), ["--frobnicate"], {}


def c_run_id_path(c: Ctx) -> CaseResult:
    p = c.config()
    return ["--config", str(p), "--run-id", "../elsewhere"], ["--run-id"], {}


# --------------------------------------------------------------------------------------------------
# The corpus: issue 28 (numbers, text, names, sizes), each refused before any call


def _number_case(c: Ctx, section: str, name: str, value: Any, **extra: Any) -> CaseResult:
    cfg = c.base()
    target = cfg["candidates"][0] if section == "candidates[0]" else cfg.setdefault(section, {})
    target[name] = value
    for k, v in extra.items():
        cfg[k] = v
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, f"{name}:")), _key(f"{section}.{name}")], {}


def c_bootstrap_samples_zero(c: Ctx) -> CaseResult:  # row 5: a traceback after the calls were paid
    return _number_case(c, "run", "bootstrap_samples", 0)


def c_default_rubric_weight_nan(c: Ctx) -> CaseResult:  # row 5
    cfg = c.base()
    cfg["judging"] = {"default_rubric": [{"text": "Is polite.", "weight": float("nan")}]}
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "weight: .nan")), _key("judging.default_rubric[0].weight"), "finite"], {}


def c_default_rubric_weight_inf(c: Ctx) -> CaseResult:  # row 5
    cfg = c.base()
    cfg["judging"] = {"default_rubric": [{"text": "Is polite.", "weight": float("inf")}]}
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "weight: .inf")), _key("judging.default_rubric[0].weight"), "finite"], {}


def c_row_weights_overflow(c: Ctx) -> CaseResult:  # row 5: OverflowError in fsum after the calls
    rub = [{"text": "One.", "weight": 1e308}, {"text": "Two.", "weight": 1e308}]
    d = c.data("d.jsonl", [{"prompt": "a?"}, {"prompt": "b?", "rubric": rub}])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), _key("rubric"), "past the largest number"], {}


def c_row_lone_surrogate(c: Ctx) -> CaseResult:  # row 6: a traceback writing examples.jsonl
    d = c.data("d.jsonl", [{"prompt": "a?"}, '{"prompt": "b \\ud800 ?"}'])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), "not valid Unicode", "prompt"], {}


def c_json_array_lone_surrogate(c: Ctx) -> CaseResult:  # row 6
    d = c.tmp / "d.json"
    d.write_text('[{"prompt": "a?"}, {"prompt": "b?", "rubric": [{"text": "\\udc00"}]}]', encoding="utf-8")
    p = c.config(c.with_data(d))
    return c.args(p), [f"{d}:row 1:", "not valid Unicode", "rubric[0].text"], {}


def c_csv_cell_lone_surrogate(c: Ctx) -> CaseResult:  # row 6: a JSON cell
    d = c.tmp / "d.csv"
    d.write_text('id,prompt,rubric\na,Hi?,\nb,Hi?,"[{""text"": ""\\ud800""}]"\n', encoding="utf-8")
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 3), "not valid Unicode"], {}


def c_parquet_text_not_utf8(c: Ctx) -> CaseResult:  # row 6: Arrow text that is not UTF-8
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = c.tmp / "d.parquet"
    prompts = pa.array([b"a?", b"b \xed\xa0\x80 ?"], type=pa.binary()).view(pa.string())  # a surrogate's bytes
    pq.write_table(pa.table({"id": ["p1", "p2"], "prompt": prompts}), d)
    p = c.config(c.with_data(d))
    return c.args(p), [f"{d}:row 1:", "not valid UTF-8"], {}


def c_answers_file_lone_surrogate(c: Ctx) -> CaseResult:  # row 6: responses_from
    answers = c.data("answers.jsonl", [{"id": "ok0", "response": "fine"}, '{"id": "ok1", "response": "\\ud800"}'])
    cfg = c.base()
    cfg["candidates"].append({"name": "replayed", "responses_from": str(answers)})
    p = c.config(cfg)
    return c.args(p), [_at(answers, 2), "not valid Unicode", "response"], {}


def c_default_rubric_all_zero(c: Ctx) -> CaseResult:  # row 7: calls paid, nothing scored
    cfg = c.base()
    cfg["judging"] = {"default_rubric": [{"text": "Is polite.", "weight": 0}, {"text": "Is short.", "weight": 0}]}
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "default_rubric:")), _key("judging.default_rubric"), "every weight is 0"], {}


def c_row_rubric_all_zero(c: Ctx) -> CaseResult:  # row 7
    d = c.data("d.jsonl", [{"prompt": "a?"}, {"prompt": "b?", "rubric": [{"text": "One.", "weight": 0}]}])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(d, 2), _key("rubric"), "every weight is 0"], {}


def c_dataset_empty(c: Ctx) -> CaseResult:  # row 8: exit 0, nothing run, nothing said
    d = c.data("empty.jsonl", [])
    p = c.config(c.with_data(d))
    return c.args(p), [_at(p, line_of(p, str(d))), _key("datasets[1].path"), "no rows"], {}


def c_max_examples_zero_in_config(c: Ctx) -> CaseResult:  # row 8: as --max-examples 0
    return _number_case(c, "run", "max_examples", 0)


def c_dataset_limit_zero(c: Ctx) -> CaseResult:  # row 8
    d = c.data("d.jsonl", [{"prompt": "a?"}])
    p = c.config(c.with_data(d, limit=0))
    return c.args(p), [_at(p, line_of(p, "limit: 0")), _key("datasets[1].limit")], {}


def c_rpm_nan(c: Ctx) -> CaseResult:  # row 9
    return _number_case(c, "candidates[0]", "rpm", float("nan"))


def c_timeout_zero(c: Ctx) -> CaseResult:  # row 9: every call would fail
    return _number_case(c, "candidates[0]", "timeout_s", 0)


def c_retry_wait_negative(c: Ctx) -> CaseResult:  # row 9
    return _number_case(c, "retry", "initial_wait_s", -1)


def c_budget_nan(c: Ctx) -> CaseResult:  # row 9: NaN turned the budget off
    return _number_case(c, "run", "budget_usd", float("nan"))


def c_price_negative(c: Ctx) -> CaseResult:  # row 9
    cfg = c.base()
    cfg["candidates"][0]["price"] = {"input_per_mtok": -1.0}
    p = c.config(cfg)
    return c.args(p), [_at(p, line_of(p, "input_per_mtok")), _key("candidates[0].price.input_per_mtok")], {}


def c_max_explanation_chars_negative(c: Ctx) -> CaseResult:  # row 9: sent to the judge
    return _number_case(c, "judging", "max_explanation_chars", -1)


def c_pass_threshold_above_1(c: Ctx) -> CaseResult:  # row 9
    return _number_case(c, "judging", "pass_threshold", 5)


def c_concurrency_huge(c: Ctx) -> CaseResult:  # row 9
    return _number_case(c, "run", "concurrency", 10**12)


def c_max_examples_negative_in_config(c: Ctx) -> CaseResult:  # row 10: was named datasets[0].limit
    return _number_case(c, "run", "max_examples", -3)


def c_run_id_newline(c: Ctx) -> CaseResult:  # row 11: a newline splits log lines
    return ["--config", str(c.config()), "--run-id", "a\nb"], ["--run-id", "a\\nb"], {}


def c_run_id_shell(c: Ctx) -> CaseResult:  # row 11
    return ["--config", str(c.config()), "--run-id", "$(id)"], ["--run-id"], {}


def c_run_id_too_long(c: Ctx) -> CaseResult:  # row 11: was exit 1, "File name too long"
    return ["--config", str(c.config()), "--run-id", "x" * 300], ["--run-id", "128 bytes"], {}


def c_yaml_alias_bomb(c: Ctx) -> CaseResult:  # row 14: was still being read after 30 s at 3.2 GB
    rows = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    rows += [f"{c2}: &{c2} [{', '.join([f'*{c1}'] * 9)}]" for c1, c2 in zip("abcdefgh", "bcdefghi", strict=True)]
    p = c.config(text="\n".join(rows) + "\n")
    return c.args(p), [f"{p}: the config expands to more than"], {}


def c_params_api_key(c: Ctx) -> CaseResult:  # row 15: it entered the cache key
    cfg = c.base()
    cfg["candidates"][0]["params"] = {"api_key": "sk-inline-key-1"}
    p = c.config(cfg)
    return (
        c.args(p),
        [_at(p, line_of(p, "api_key: sk-inline")), _key("candidates[0].params.api_key"), "api_key_env"],
        {},
    )


def c_name_with_terminal_escape(c: Ctx) -> CaseResult:  # row 16: reached the console raw
    cfg = c.base()
    cfg["candidates"][0]["name"] = "\x1b[31mRED\x1b[0m"
    p = c.config(cfg)
    return c.args(p), [_key("candidates[0].name"), "\\x1b[31mRED"], {}


CASES: dict[str, Callable[[Ctx], CaseResult]] = {
    name[2:]: fn for name, fn in sorted(globals().items()) if name.startswith("c_") and callable(fn)
}


def _case_params() -> list[Any]:
    return sorted(CASES)


# --------------------------------------------------------------------------------------------------
# Tests


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer().start()
    try:
        yield srv
    finally:
        srv.stop()


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 20


def _check_error_line(stderr: str, expect: list[Any]) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected exactly one stderr line, got {len(lines)}:\n{stderr}"
    line = lines[0]
    assert line.startswith("error:"), line
    assert "\x1b" not in line, line  # nothing the terminal would act on
    for e in expect:
        if isinstance(e, re.Pattern):
            assert e.search(line), f"{e.pattern!r} not in {line!r}"
        else:
            assert e in line, f"{e!r} not in {line!r}"
    return line


def _data_artifacts(run_dir: Path) -> list[str]:
    if not run_dir.exists():
        return []
    found = [n for n in DATA_ARTIFACTS if (run_dir / n).exists()]
    found += [p.name for p in run_dir.iterdir() if p.name.endswith(".tmp")]
    return found


@pytest.mark.parametrize("case", _case_params())
def test_bad_input(case: str, tmp_path: Path, fake: FakeOpenAIServer) -> None:
    ctx = Ctx(tmp_path, fake.base_url)
    args, expect, env = CASES[case](ctx)
    proc = run_cli(args, timeout=60, full_env=_env(tmp_path, env))
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == 2, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    _check_error_line(proc.stderr, expect)
    assert fake.requests == [], f"{len(fake.requests)} requests reached the server before the error"
    assert _data_artifacts(ctx.out / RUN_ID) == []
    # The config that was refused is left as it was (a bad config is never rewritten).
    assert not list(tmp_path.rglob("*.tmp"))


def _cases_detected_in_run() -> list[str]:
    # Cases whose error is found after the run folder is opened (data, keys, templates): load_config accepts them.
    return ["jsonl_malformed_middle", "synth_template_jinja_error"]


@pytest.mark.parametrize("case", _cases_detected_in_run())
def test_bad_input_leaves_no_run_folder(case: str, tmp_path: Path, fake: FakeOpenAIServer) -> None:
    ctx = Ctx(tmp_path, fake.base_url)
    args, _, env = CASES[case](ctx)
    proc = run_cli(args, timeout=60, full_env=_env(tmp_path, env))
    assert proc.returncode == 2
    run_dir = ctx.out / RUN_ID
    left = sorted(p.name for p in run_dir.iterdir()) if run_dir.exists() else []
    assert left == [], f"run folder left behind with {left}"


def test_on_bad_row_skip_counts_skipped_rows(tmp_path: Path, fake: FakeOpenAIServer) -> None:
    ctx = Ctx(tmp_path, fake.base_url)
    d = ctx.data(
        "mixed.jsonl",
        [
            {"id": "m1", "prompt": "first?"},
            '{"id": "m2", "prompt": ',  # malformed JSON
            ["not", "an", "object"],
            {"id": "m3", "prompt": "third?"},
            {"id": "m4", "prompt": "fourth?", "rubric": [{"text": "x", "weight": "heavy"}]},
            {"id": "m5", "messages": [{"content": "no role"}]},
        ],
    )
    cfg = ctx.with_data(d)
    cfg["run"]["on_bad_row"] = "skip"
    cfg["judging"] = {"default_rubric": [{"text": "Answers the question."}]}
    p = ctx.config(cfg)
    proc = run_cli(ctx.args(p), timeout=60, full_env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    run_dir = ctx.out / RUN_ID
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "complete"
    assert summary["skipped_rows"] == 4
    assert summary["examples"] == len(GOOD_ROWS) + 2
    examples = [json.loads(ln) for ln in (run_dir / "examples.jsonl").read_text().splitlines()]
    assert {e["id"] for e in examples} >= {"mixed/m1", "mixed/m3"}
    assert not any(e["id"] in ("mixed/m2", "mixed/m4", "mixed/m5") for e in examples)
    # Each skipped row is named (file and line) in the log, and the run log keeps it.
    log = (run_dir / "run.log").read_text()
    for line in (2, 3, 5, 6):
        assert f"{d}:{line}" in log, f"skipped line {line} not logged"
    # Only the kept examples were called: 2 candidates x 5 examples.
    assert fake.count(model="cand-alpha") == 5 and fake.count(model="cand-beta") == 5
