"""Data as people have it: native ARC/MMLU/INCLUDE rows, dotted `fields`, CSV/Parquet/JSON-array/gzip files,
Hugging Face datasets (offline, on a local folder), content parts, all-bad files, datasets nothing can score."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, model_entry, read_jsonl, run_cli, write_jsonl
from oracles import LoadResult, load_dataset

from rubricrun.config import DatasetConfig
from rubricrun.errors import InputError
from rubricrun.judging.prompt import render_conversation
from rubricrun.providers.local import llama_messages
from rubricrun.tasks.registry import TASKS
from rubricrun.types import Example

ARC_ROW = {
    "id": "Mercury_7175875",
    "question": "An astronomer observes that a planet rotates faster after a meteorite impact. Which is the most likely effect?",
    "choices": {
        "text": [
            "Planetary density will decrease.",
            "Planetary years will become longer.",
            "Planetary days will become shorter.",
            "Planetary gravity will become stronger.",
        ],
        "label": ["A", "B", "C", "D"],
    },
    "answerKey": "C",
}
ARC_NUMERIC = {
    "id": "NYSEDREGENTS_2015_8_12",
    "question": "Which form of energy is produced when a rubber band vibrates?",
    "choices": {"text": ["chemical", "light", "electrical", "sound"], "label": ["1", "2", "3", "4"]},
    "answerKey": "4",
}
MMLU_ROW = {
    "question": "What is the embryological origin of the hyoid bone?",
    "subject": "anatomy",
    "choices": [
        "The first pharyngeal arch",
        "The first and second pharyngeal arches",
        "The second pharyngeal arch",
        "The second and third pharyngeal arches",
    ],
    "answer": 3,
}
INCLUDE_ROW = {
    "language": "German",
    "country": "Germany",
    "domain": "Social Science",
    "subject": "Law",
    "regional_feature": "region explicit",
    "level": "University",
    "question": "Welches Gericht ist für Verfassungsbeschwerden zuständig?",
    "option_a": "Bundesgerichtshof",
    "option_b": "Bundesverfassungsgericht",
    "option_c": "Bundesverwaltungsgericht",
    "option_d": "Amtsgericht",
    "answer": 1,
}
IMAGE_URL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
PARTS = [{"type": "text", "text": "What colour is this pixel?"}, {"type": "image_url", "image_url": {"url": IMAGE_URL}}]


def load(path: Path | str, **cfg) -> LoadResult:
    on_bad_row = cfg.pop("on_bad_row", "fail")
    return load_dataset(DatasetConfig(path=str(path), **cfg), schemas=TASKS, on_bad_row=on_bad_row)


def error_of(path: Path | str, **cfg) -> str:
    with pytest.raises(InputError) as e:
        load(path, **cfg)
    return str(e.value)


# --------------------------------------------------------------------------------------------------
# Native benchmark rows, no mapping


def test_arc_rows_load_natively(tmp_path: Path) -> None:
    res = load(write_jsonl(tmp_path / "arc.jsonl", [ARC_ROW, ARC_NUMERIC]))
    a, b = res.examples
    assert a.id == "arc/Mercury_7175875" and a.metadata["format"] == "mc" and a.kind == "mc"
    assert a.choices == tuple(ARC_ROW["choices"]["text"]) and a.answer == "C"
    assert "C. Planetary days will become shorter." in a.messages[-1]["content"]
    assert b.answer == "D"  # labels 1-4: answerKey "4" is the fourth choice


def test_arc_answer_key_not_a_label(tmp_path: Path) -> None:
    row = {**ARC_ROW, "answerKey": "E"}
    msg = error_of(write_jsonl(tmp_path / "arc.jsonl", [row]))
    assert ":1: key 'answerKey'" in msg and "'E' is not one of the choice labels (A, B, C, D)" in msg


def test_mmlu_and_include_rows_load_natively(tmp_path: Path) -> None:
    res = load(write_jsonl(tmp_path / "mix.jsonl", [MMLU_ROW, INCLUDE_ROW]))
    mmlu, inc = res.examples
    assert mmlu.kind == "mc" and mmlu.answer == "D" and mmlu.metadata["subject"] == "anatomy"
    assert inc.kind == "mc" and inc.answer == "B" and inc.choices[1] == "Bundesverfassungsgericht"
    assert {k: inc.metadata[k] for k in ("language", "country", "domain", "regional_feature", "level")} == {
        "language": "German",
        "country": "Germany",
        "domain": "Social Science",
        "regional_feature": "region explicit",
        "level": "University",
    }


def test_answer_index_written_as_text(tmp_path: Path) -> None:
    (ex,) = load(write_jsonl(tmp_path / "m.jsonl", [{**MMLU_ROW, "answer": "2"}])).examples
    assert ex.answer == "C"


# --------------------------------------------------------------------------------------------------
# fields: dotted paths, missing keys


def test_fields_dotted_paths(tmp_path: Path) -> None:
    rows = [{"q": {"stem": "Pick one?"}, "opts": {"text": ["x", "y", "z"], "label": ["A", "B", "C"]}, "gold": 2}]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    (ex,) = load(path, fields={"question": "q.stem", "choices": "opts.text", "answer": "gold"}).examples
    assert ex.kind == "mc" and ex.choices == ("x", "y", "z") and ex.answer == "C"
    assert ex.messages[-1]["content"].startswith("Pick one?")


def test_fields_numeric_segment_and_flat_dotted_column(tmp_path: Path) -> None:
    rows = [{"conv": [{"value": "Hello?"}], "meta.id": "r1"}]
    (ex,) = load(write_jsonl(tmp_path / "d.jsonl", rows), fields={"prompt": "conv.0.value", "id": "meta.id"}).examples
    assert ex.messages == ({"role": "user", "content": "Hello?"},) and ex.id == "d/r1"


def test_fields_mapping_to_a_missing_key_names_it(tmp_path: Path) -> None:
    # Before: `choices: choices.text` was accepted, then failed as "expected a list of strings, got null".
    rows = [MMLU_ROW]
    msg = error_of(write_jsonl(tmp_path / "m.jsonl", rows), fields={"choices": "choices.text"})
    assert msg.startswith(f"{tmp_path / 'm.jsonl'}:1: key 'choices.text': missing (fields.choices maps to it")
    assert "question, subject, choices, answer" in msg


def test_fields_empty_path_segment_is_a_config_error(tmp_path: Path) -> None:
    msg = error_of(write_jsonl(tmp_path / "m.jsonl", [MMLU_ROW]), fields={"choices": "choices..text"})
    assert "key 'fields.choices'" in msg and "dotted path" in msg


# --------------------------------------------------------------------------------------------------
# File formats


def test_csv_rows_with_lines_and_json_cells(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    rubric = json.dumps([{"text": "Says hi.", "weight": 2}]).replace('"', '""')
    path.write_text(
        "id,prompt,rubric,empty\n"
        f'a,Hello?,"{rubric}",\n'
        'b,"Two\nlines?",,\n'  # a quoted cell over two lines: the next row starts on line 5
        "c,,,\n",
        encoding="utf-8",
    )
    res = load(path, on_bad_row="skip")
    a, b = res.examples
    assert a.rubric[0].text == "Says hi." and a.rubric[0].weight == 2.0 and a.source == f"{path}:2"
    assert b.messages[0]["content"] == "Two\nlines?" and b.source == f"{path}:3"
    (bad,) = res.skipped
    assert bad.startswith(f"{path}:5: ")


def test_csv_row_with_too_many_fields(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("id,prompt\na,Hi?\nb,Hi?,extra\n", encoding="utf-8")
    assert error_of(path) == f"{path}:3: 3 fields but the header has 2"


def test_csv_long_cell(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("prompt\n" + "x" * 200_000 + "?\n", encoding="utf-8")  # over csv's 128 KiB default limit
    (ex,) = load(path).examples
    assert len(ex.messages[0]["content"]) == 200_001


def test_tsv_and_gzipped_csv(tmp_path: Path) -> None:
    (tmp_path / "d.tsv").write_text("prompt\tanswer\nTwo plus two?\t4\n", encoding="utf-8")
    (ex,) = load(tmp_path / "d.tsv").examples
    assert ex.answer == "4"
    with gzip.open(tmp_path / "e.csv.gz", "wt", encoding="utf-8") as f:
        f.write("question,answer\nTwo plus two?,#### 4\n")
    (ex,) = load(tmp_path / "e.csv.gz").examples
    assert ex.kind == "qa" and ex.answer == "4" and ex.dataset == "e"


def _write_parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_parquet_rows_and_bad_row_index(tmp_path: Path) -> None:
    # Columnar: a row without `answer` gets null there, read as absent; row 1 has a bad answer.
    rows = [MMLU_ROW, {**MMLU_ROW, "question": "Q2?", "answer": 9}, {**MMLU_ROW, "question": "Q3?", "answer": 0}]
    path = _write_parquet(tmp_path / "mmlu.parquet", rows)
    res = load(path, on_bad_row="skip")
    assert [e.answer for e in res.examples] == ["D", "A"]
    assert res.examples[0].source == f"{path}:row 0"
    assert res.skipped == [f"{path}:row 1: key 'answer': answer index 9 is out of range for 4 choices (0-3)"]


def test_not_parquet_is_one_file_error(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    path.write_text('{"prompt": "hi"}\n', encoding="utf-8")
    msg = error_of(path)
    assert msg.startswith(f"{path}: cannot read Parquet file:")


def test_json_array_file(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps([ARC_ROW, ["not", "an", "object"], MMLU_ROW], indent=2), encoding="utf-8")
    res = load(path, on_bad_row="skip")
    assert [e.answer for e in res.examples] == ["C", "D"]
    assert res.skipped == [f"{path}:row 1: expected a JSON object, got a list"]
    assert res.examples[1].source == f"{path}:row 2"


def test_json_array_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('[\n  {"prompt": "a?"},\n  {"prompt": "b?"\n  {"prompt": "c?"}\n]\n', encoding="utf-8")
    assert error_of(path).startswith(f"{path}:4: malformed JSON: Expecting ','")


def test_json_lines_under_a_json_name(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('{"prompt": "a?"}\n{"prompt": "b?"}\n', encoding="utf-8")
    assert len(load(path).examples) == 2


def test_jsonl_gz_with_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write('{"prompt": "a?"}\n{"prompt": \n{"prompt": "c?"}\n')
    res = load(path, on_bad_row="skip")
    assert len(res.examples) == 2 and res.examples[0].dataset == "d"
    assert res.skipped[0].startswith(f"{path}:2: malformed JSON")


def test_gzip_detected_by_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"  # gzipped content under a plain name: read, not "not valid UTF-8"
    path.write_bytes(gzip.compress(b'{"prompt": "a?"}\n'))
    assert len(load(path).examples) == 1


# --------------------------------------------------------------------------------------------------
# A file whose every row is bad


def test_every_row_bad_fails_even_with_skip(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", ['{"prompt": ', ["x"]])
    msg = error_of(path, on_bad_row="skip")
    assert (
        msg
        == f"every row of {path} is bad (2 skipped); the first: {path}:1: malformed JSON: Expecting value (column 1)"
    )


def test_empty_file_is_bad_input(tmp_path: Path) -> None:
    # A run on it would pay for nothing and say nothing (issue 28): refused as --max-examples 0 is.
    (tmp_path / "e.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(InputError, match="the dataset has no rows"):
        load(tmp_path / "e.jsonl", on_bad_row="skip")


# --------------------------------------------------------------------------------------------------
# Content parts


def test_content_parts_kept_as_they_are(tmp_path: Path) -> None:
    rows = [{"id": "img", "messages": [{"role": "user", "content": PARTS}]}]
    (ex,) = load(write_jsonl(tmp_path / "d.jsonl", rows)).examples
    assert ex.messages[0]["content"] == PARTS


@pytest.mark.parametrize(
    ("part", "key"),
    [
        ({"type": "video", "url": "x"}, "messages[0].content[1].type"),
        ({"type": "image_url", "image_url": {}}, "messages[0].content[1].image_url.url"),
        ({"type": "text"}, "messages[0].content[1].text"),
        ("plain string", "messages[0].content[1].type"),
    ],
)
def test_bad_content_part_names_its_key(tmp_path: Path, part, key: str) -> None:
    rows = [{"messages": [{"role": "user", "content": [PARTS[0], part]}]}]
    assert f":1: key '{key}'" in error_of(write_jsonl(tmp_path / "d.jsonl", rows))


def test_judge_sees_image_placeholder() -> None:
    ex = Example(id="d/x", dataset="d", source="d:1", messages=({"role": "user", "content": PARTS},))
    text = render_conversation(ex, "Red.")
    # Issue 12 item 7 changed the layout (tagged markers around each message); the placeholder is unchanged.
    assert 'role="user">\nWhat colour is this pixel?\n[image: data:image/png;base64,...]\n</message-' in text
    assert text.endswith('role="assistant">\nRed.\n</message-' + text.split("<message-", 2)[1][:16] + ">")
    web = [{"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}]
    ex2 = Example(id="d/y", dataset="d", source="d:2", messages=({"role": "user", "content": web},))
    assert "[image: https://example.org/cat.png]" in render_conversation(ex2, "A cat.")


def test_local_provider_reads_text_parts() -> None:
    msgs = llama_messages(
        [{"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}]
    )
    assert msgs == [{"role": "user", "content": "Hi there"}]
    with pytest.raises(ValueError, match="text only"):
        llama_messages([{"role": "user", "content": PARTS}])


# --------------------------------------------------------------------------------------------------
# Through the CLI


def _config(tmp_path: Path, server, datasets: list[dict], **extra) -> Path:
    cfg = {
        "candidates": [model_entry("alpha", "openai/cand-alpha", server)],
        "judges": [model_entry("j1", "openai/judge-one", server)],
        "datasets": datasets,
        "run": {"output_dir": str(tmp_path / "outputs"), "progress": False, "bootstrap_samples": 20},
        "cache": {"dir": str(tmp_path / "cache")},
        "retry": {"initial_wait_s": 0.05, "max_wait_s": 1, "max_attempts": 2},
        **extra,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def test_image_part_reaches_the_model_and_judge_gets_placeholder(tmp_path: Path, server, cli_main) -> None:
    rubric = [{"text": "Names the colour.", "weight": 1}]
    data = write_jsonl(
        tmp_path / "img.jsonl", [{"id": "px", "messages": [{"role": "user", "content": PARTS}], "rubric": rubric}]
    )
    rc, _, err = cli_main(["--config", str(_config(tmp_path, server, [{"path": str(data)}])), "--run-id", "img"])
    assert rc == 0, err
    cand = [r.body for r in server.requests if r.model == "cand-alpha"]
    judge = [r.body for r in server.requests if r.model == "judge-one"]
    assert len(cand) == 1 and cand[0]["messages"][-1]["content"] == PARTS  # unchanged, image included
    (j,) = judge
    prompt = j["messages"][-1]["content"]
    assert "[image: data:image/png;base64,...]" in prompt and "iVBORw0KGgo" not in prompt


def _hf_folder(tmp_path: Path) -> Path:
    """A local dataset folder as the Hub lays one out: data/<split>-*.parquet."""
    folder = tmp_path / "arc_local"
    (folder / "data").mkdir(parents=True)
    _write_parquet(folder / "data" / "test-00000-of-00001.parquet", [ARC_ROW, ARC_NUMERIC])
    _write_parquet(folder / "data" / "train-00000-of-00001.parquet", [{**ARC_ROW, "id": "train-1"}])
    return folder


HF_OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


def test_hf_dataset_offline_from_a_local_folder(tmp_path: Path, server) -> None:
    folder = _hf_folder(tmp_path)
    cfg = _config(tmp_path, server, [{"hf": str(folder), "split": "test"}])
    rc, out, err = run_cli(["--config", str(cfg), "--run-id", "hf"], env=HF_OFFLINE)
    assert rc == 0, err
    examples = read_jsonl(tmp_path / "outputs" / "hf" / "examples.jsonl")
    assert [e["id"] for e in examples] == ["arc_local/Mercury_7175875", "arc_local/NYSEDREGENTS_2015_8_12"]
    assert examples[0]["source"] == f"hf:{folder}[test]:row 0"
    assert [e["answer"] for e in examples] == ["C", "D"]
    assert server.count(model="cand-alpha") == 2 and server.count(model="judge-one") == 0  # MC: no judge


def test_hf_dataset_with_several_splits_needs_one(tmp_path: Path) -> None:
    folder = _hf_folder(tmp_path)
    cfg = _config(tmp_path, None, [{"hf": str(folder)}])
    rc, _, err = run_cli(["--config", str(cfg), "--validate"], env=HF_OFFLINE)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"key 'datasets[0].split': hf:{folder}: the dataset has splits" in err


def test_hf_name_that_cannot_be_loaded_is_one_line(tmp_path: Path) -> None:
    cfg = _config(tmp_path, None, [{"hf": "nobody-here/no-such-dataset", "config": "main", "split": "test"}])
    rc, _, err = run_cli(["--config", str(cfg), "--validate"], env=HF_OFFLINE)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{cfg}:" in err and "key 'datasets[0].hf'" in err
    assert "hf:nobody-here/no-such-dataset[main/test]: cannot load Hugging Face dataset: Couldn't reach" in err


def test_unscorable_dataset_fails_validate_before_any_call(tmp_path: Path, server) -> None:
    # Before: MT-Bench rows with no default rubric validated (0 judge calls), paid every candidate call, exit 0.
    mt = REPO / "data" / "mtbench_sample.jsonl"
    cfg = _config(tmp_path, server, [{"path": str(REPO / "data" / "mc_sample.jsonl")}, {"path": str(mt)}])
    for extra in (["--validate"], ["--run-id", "mt"]):
        rc, _, err = run_cli(["--config", str(cfg), *extra])
        assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"key 'datasets[1]': {mt}: nothing can score its 3 examples" in err
        assert "judging.default_rubric" in err
    assert server.requests == []


def test_rubric_without_judges_is_a_generation_run(tmp_path: Path) -> None:
    # Before issue 23: refused ("have a rubric but the config has no judges"); a config without judges asked for no
    # judging, so its examples are answered and nothing is judged.
    gen = REPO / "data" / "generic_sample.jsonl"
    cfg = _config(tmp_path, None, [{"path": str(gen)}])
    text = yaml.safe_load(cfg.read_text())
    del text["judges"]
    cfg.write_text(yaml.safe_dump(text), encoding="utf-8")
    rc, out, err = run_cli(["--config", str(cfg), "--validate"])
    assert rc == 0, err
    assert json.loads(out)["judge_calls"] == 0


def test_hub_and_parquet_libraries_are_imported_lazily(tmp_path: Path) -> None:
    # run.py --help and a JSONL run never import datasets/pyarrow (seconds of import time).
    code = (
        "import sys, runpy\n"
        "from rubricrun.config import DatasetConfig\n"
        "from rubricrun.data.loaders import iter_dataset\n"
        "from rubricrun.tasks.registry import TASKS\n"
        f"list(iter_dataset(DatasetConfig(path={str(REPO / 'data' / 'mc_sample.jsonl')!r}), schemas=TASKS))\n"
        "sys.argv = ['run.py', '--help']\n"
        "try:\n    runpy.run_path('run.py', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print('HEAVY', sorted(m for m in ('datasets', 'pyarrow', 'pandas') if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
