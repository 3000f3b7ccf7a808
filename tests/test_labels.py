"""data/labels.py: a labels file (JSONL or CSV) read into each rater's last verdict per item; a malformed row is
bad input naming the file, its line and the column; through the CLI a bad labels file stops the run before any
call (exit 2), and so does a labels file nothing could use."""

from __future__ import annotations

import pytest
from conftest import write_jsonl

from rubricrun.data.labels import read_labels
from rubricrun.errors import InputError


def test_jsonl_and_csv_read_the_same_labels(tmp_path) -> None:
    rows = [
        {"response_id": "d/e1#a#0", "criterion_id": "c1", "met": True, "rater": "ann"},
        {"response_id": "d/e1#a#0", "criterion_id": "c1", "met": False, "rater": "bob"},
        {"response_id": "d/e1#a#0", "criterion_id": "c2", "met": False, "extra": "ignored"},
        {"response_id": "d/e2#a#0", "criterion_id": "c1", "met": None},  # an unfilled sheet row
        {"response_id": "d/e1#a#0", "criterion_id": "c1", "met": True, "rater": "bob"},  # bob changes his mind
        {"pair_id": "d/e1#t1#a~b", "preferred": "b", "rater": "ann"},
        {"pair_id": "d/e2#t1#a~b", "preferred": "tie"},
    ]
    a = read_labels(str(write_jsonl(tmp_path / "l.jsonl", rows)), candidates=("a", "b"))
    csv = tmp_path / "l.csv"
    csv.write_text(
        "response_id,criterion_id,met,rater,extra,pair_id,preferred\n"
        "d/e1#a#0,c1,true,ann,,,\nd/e1#a#0,c1,no,bob,,,\nd/e1#a#0,c2,0,,ignored,,\nd/e2#a#0,c1,,,,,\n"
        "d/e1#a#0,c1,Met,bob,,,\n,,,ann,,d/e1#t1#a~b,b\n,,,,,d/e2#t1#a~b,tie\n",
        encoding="utf-8",
    )
    b = read_labels(str(csv), candidates=("a", "b"))
    for got in (a, b):
        assert got.verdicts == {("d/e1#a#0", "c1"): {"ann": True, "bob": True}, ("d/e1#a#0", "c2"): {"": False}}
        assert got.preferences == {"d/e1#t1#a~b": {"ann": "b"}, "d/e2#t1#a~b": {"": "tie"}}
        assert (got.rows, got.blank, got.superseded) == (6, 1, 1)


def test_graded_scores(tmp_path) -> None:
    path = write_jsonl(tmp_path / "g.jsonl", [{"response_id": "r", "criterion_id": "rating", "score": 7}])
    assert read_labels(str(path), scale=(1.0, 10.0)).verdicts == {("r", "rating"): {"": 7.0}}


def test_one_file_serves_datasets_on_different_scales(tmp_path) -> None:
    """A run's labels.jsonl (the viewer) or a filled sheet holds every dataset's rows: a graded dataset passes over
    another dataset's `met` rows, which would be bad input for it, and reads its own and the rows naming none."""
    rows = [
        {"response_id": "g/e1#a#0", "criterion_id": "rating", "score": 4, "dataset": "g"},
        {"response_id": "b/e1#a#0", "criterion_id": "c1", "met": True, "dataset": "b"},
        {"response_id": "g/e2#a#0", "criterion_id": "rating", "score": 2},
    ]
    path = str(write_jsonl(tmp_path / "labels.jsonl", rows))
    graded = read_labels(path, scale=(1.0, 5.0), dataset="g")
    assert graded.verdicts == {("g/e1#a#0", "rating"): {"": 4.0}, ("g/e2#a#0", "rating"): {"": 2.0}}
    binary = read_labels(str(write_jsonl(tmp_path / "b.jsonl", rows[:2])), dataset="b")
    assert binary.verdicts == {("b/e1#a#0", "c1"): {"": True}}
    with pytest.raises(InputError, match="give `score`"):  # without the dataset's name, every row is its own
        read_labels(path, scale=(1.0, 5.0))


@pytest.mark.parametrize(
    ("row", "scale", "key", "says"),
    [
        ({"criterion_id": "c", "met": True}, None, "response_id", "missing"),
        ({"response_id": "r", "met": True}, None, "criterion_id", "missing"),
        ({"response_id": "r", "criterion_id": "c", "met": "maybe"}, None, "met", "expected true or false"),
        ({"response_id": "r", "criterion_id": "c", "met": 2}, None, "met", "expected true or false"),
        ({"response_id": ["r"], "criterion_id": "c", "met": True}, None, "response_id", "expected a string"),
        ({"response_id": "r", "criterion_id": "c", "score": 4}, None, "score", "give `met`"),
        ({"response_id": "r", "criterion_id": "c", "met": True}, (1.0, 5.0), "met", "give `score`"),
        ({"response_id": "r", "criterion_id": "c", "score": 6}, (1.0, 5.0), "score", "on the 1-5 scale"),
        ({"response_id": "r", "criterion_id": "c", "score": "high"}, (1.0, 5.0), "score", "on the 1-5 scale"),
        ({"response_id": "r", "criterion_id": "c", "score": True}, (1.0, 5.0), "score", "on the 1-5 scale"),
        ({"pair_id": "p", "preferred": "gamma"}, None, "preferred", "expected the preferred candidate's name"),
    ],
)
def test_a_malformed_row_names_file_line_and_column(tmp_path, row, scale, key, says) -> None:
    good = {"response_id": "r0", "criterion_id": "c", "met": True, "score": 3}
    path = write_jsonl(tmp_path / "bad.jsonl", [good if scale else {**good, "score": None}, row])
    with pytest.raises(InputError) as exc:
        read_labels(str(path), scale=scale, candidates=("alpha", "beta"))
    assert str(exc.value).startswith(f"{path}:2: key '{key}': ") and says in str(exc.value)


def test_a_line_that_is_not_json_or_not_an_object(tmp_path) -> None:
    for line, says in (("{not json", "malformed JSON"), ("[1, 2]", "expected a JSON object, got a list")):
        path = write_jsonl(tmp_path / "x.jsonl", [line])
        with pytest.raises(InputError, match=rf"^{path}:1: {says}"):
            read_labels(str(path))


def _with_labels(make_config, server, labels, **overrides):
    return make_config(
        server,
        datasets=[{"path": "data/healthbench_sample.jsonl", "labels": str(labels), **overrides.pop("dataset", {})}],
        **overrides,
    )


def test_bad_labels_stop_the_run_before_any_call(server, make_config, cli_main, tmp_path) -> None:
    bad = write_jsonl(tmp_path / "l.jsonl", [{"response_id": "x", "criterion_id": "c", "met": "perhaps"}])
    rc, _, err = cli_main(["--config", str(_with_labels(make_config, server, bad)), "--run-id", "x"])
    assert rc == 2 and f"{bad}:1: key 'met': expected true or false" in err
    assert server.count() == 0 and not (tmp_path / "outputs" / "x").exists()
    cfg = _with_labels(make_config, server, tmp_path / "missing.jsonl")
    rc, _, err = cli_main(["--config", str(cfg), "--validate"])
    assert rc == 2 and "key 'datasets[0].labels'" in err and "labels file not found" in err


def test_labels_nothing_could_use_are_bad_input(server, make_config, cli_main, tmp_path) -> None:
    pairs = write_jsonl(tmp_path / "p.jsonl", [{"pair_id": "hb#t1#alpha~beta", "preferred": "alpha"}])
    rc, _, err = cli_main(["--config", str(_with_labels(make_config, server, pairs)), "--validate"])
    assert rc == 2 and "judging.pairwise is not set" in err
    meta = _with_labels(make_config, server, pairs, dataset={"path": "data/meta_eval_demo.jsonl"})
    rc, _, err = cli_main(["--config", str(meta), "--validate"])
    assert rc == 2 and "key 'datasets[0].labels'" in err and "reads the human labels its rows carry" in err
    rc, _, err = cli_main(
        ["--config", str(_with_labels(make_config, server, pairs, dataset={"label_half_width": 0})), "--validate"]
    )
    assert rc == 2 and "datasets[0].label_half_width" in err and "expected a number > 0.0, got 0" in err
