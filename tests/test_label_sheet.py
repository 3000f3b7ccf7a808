"""The labelling sheet (`run.py --label-sheet RUN`, `rubricrun label-sheet RUN`) on a run of every sample dataset:
one response per example and candidate with every criterion it was judged on, datasets in turn, what to fill per
dataset, the conversation up to a later turn, the same draw twice; and the command line's errors."""

from __future__ import annotations

import csv
from collections import Counter

from conftest import read_jsonl, run_dir


def test_the_sheet_of_a_run_of_every_sample(server, make_config, cli_main, tmp_path) -> None:
    cfg = make_config(server, judges=[{"name": "j1", "model": "openai/judge-one", "api_base": server.base_url}])
    rc, _, err = cli_main(["--config", str(cfg), "--run-id", "s", "--max-examples", "2"])
    assert rc == 0, err
    run = run_dir(tmp_path, "s")
    rc, out, err = cli_main(["label-sheet", str(run), "--size", "2"])
    assert rc == 0, err
    assert out.strip() == str(run / "label_sheet.csv")
    rows = read_jsonl(run / "label_sheet.jsonl")
    assert (
        list(csv.DictReader(open(run / "label_sheet.csv", encoding="utf-8")))[3]["response_id"]
        == rows[3]["response_id"]
    )
    judged = {(j["response_id"], j["criterion_id"]) for j in read_jsonl(run / "judgments.jsonl") if "kind" not in j}
    assert {(r["response_id"], r["criterion_id"]) for r in rows} <= judged
    per = Counter((r["dataset"], r["candidate"]) for r in {r["response_id"]: r for r in rows}.values())
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    assert set(per.values()) == {2} and len(per) == 2 * len(datasets)  # two responses per dataset and candidate
    order = [ex.split("/")[0] for ex in dict.fromkeys(r["example_id"] for r in rows)]
    assert order == datasets * 2  # example by example, the datasets in turn
    assert {r["scale"] for r in rows} == {"binary"} and all(r["met"] is None for r in rows)
    mc = next(r for r in rows if r["criterion_id"] == "correct")
    assert mc["criterion"] == "The response gives the correct final answer."
    later = [r for r in rows if r["turn"] == 2]
    responses = {r["id"]: r for r in read_jsonl(run / "responses.jsonl")}
    for r in later:  # the conversation up to turn 2 holds the candidate's own turn-1 answer
        first = responses[r["response_id"].rsplit("#t", 1)[0]]
        assert first["text"] in r["prompt"] and r["prompt"].startswith("user: ")
    again = run_dir(tmp_path, "s") / "label_sheet.jsonl"
    rc, _, _ = cli_main(["--label-sheet", str(run), "--sheet-size", "2"])
    assert rc == 0 and read_jsonl(again) == rows  # seeded with run.seed: the same draw


def test_command_line_errors(cli_main, tmp_path) -> None:
    for args, says in (
        (["--sheet-size", "3", "--config", "x.yaml"], "--sheet-size goes with --label-sheet"),
        (["--label-sheet", "o/r", "--config", "x.yaml"], "--label-sheet takes no --config"),
        (["--label-sheet", "o/r", "--out", "d"], "--label-sheet takes no --out"),
        (["--label-sheet", str(tmp_path), "--sheet-size", "0"], "--sheet-size"),
        (["label-sheet", str(tmp_path / "nope")], "not a run folder"),
    ):
        rc, _, err = cli_main(args)
        assert rc == 2 and says in err, (args, err)


def test_an_empty_flag_value_counts_as_given(cli_main, tmp_path, monkeypatch) -> None:
    """Every flag alike: a value other than its default, an empty string too, is given (cli._TAKES_NO)."""
    monkeypatch.chdir(tmp_path)
    for args, says in (
        (["--compare", "a", "b", "--run-id", ""], "--compare takes no --run-id"),
        (["--config", "x.yaml", "--out", ""], "--out goes with --compare"),
        (["--label-sheet", "", "--config", ""], "--label-sheet takes no --config"),
        (["--view", "", "--label-sheet", ""], "--view takes no --label-sheet"),
        (["--config", ""], "the following arguments are required: --config"),  # a run still needs a config
        (["--label-sheet", ""], "summary.json: missing: not a finished run folder"),  # "" is the current folder
    ):
        rc, _, err = cli_main(args)
        assert rc == 2 and says in err and err.count("\n") == 1, (args, err)
