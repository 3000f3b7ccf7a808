"""preflight.preflight's one validating pass and Prepared.examples, a re-iterable that reads the dataset files again each
time (issue 13, item 3): none of the examples is held; duplicate ids are still found (within a file and across
datasets); --validate's counts do not depend on how many examples are counted at a time."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import SAMPLE_DATASETS, model_entry, write_jsonl

from rubricrun.config import load_config
from rubricrun.engine import estimate, preflight
from rubricrun.errors import InputError
from rubricrun.types import Example


def _generic(tmp_path: Path, n: int, name: str = "g.jsonl", start: int = 0) -> str:
    return str(write_jsonl(tmp_path / name, [{"id": f"r{i}", "prompt": f"Question {i}?"} for i in range(start, n)]))


def test_examples_stream_in_input_order_and_none_is_held(tmp_path: Path, make_config: Any) -> None:
    cfg = load_config(make_config(None, datasets=[{"path": _generic(tmp_path, 30)}]))
    prepared = preflight.preflight(cfg, None)
    assert len(prepared.examples) == 30
    it = iter(prepared.examples)
    first = next(it)
    assert first.id == "g/r0"
    rest = [ex.id for ex in it]
    assert sys.getrefcount(first) == 2  # this name and the call's argument: the stream let go of the example it gave
    assert rest == [f"g/r{i}" for i in range(1, 30)]
    assert [ex.id for ex in prepared.examples][:2] == ["g/r0", "g/r1"]  # and it can be read again


def test_a_duplicate_id_across_datasets_names_both_places(tmp_path: Path, make_config: Any) -> None:
    """Ids are "<dataset>/<row id>", so "g" + "x/r3" and "g/x" + "r3" are one id."""
    a = str(write_jsonl(tmp_path / "a.jsonl", [{"id": f"x/r{i}", "prompt": f"Q{i}"} for i in range(5)]))
    b = str(write_jsonl(tmp_path / "b.jsonl", [{"id": "y", "prompt": "p"}, {"id": "r3", "prompt": "q"}]))
    cfg = load_config(make_config(None, datasets=[{"path": a, "name": "g"}, {"path": b, "name": "g/x"}]))
    with pytest.raises(InputError) as ei:
        preflight.preflight(cfg, None)
    assert str(ei.value) == f"{b}:2: key 'id': example id 'g/x/r3' also at {a}:4"


def test_validate_counts_do_not_depend_on_the_chunk(
    tmp_path: Path, make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Multi-turn rows, two candidates, several samples, pairwise judging: counted 1 example at a time or all at
    once, the same figures."""
    cands = [model_entry("alpha", "openai/cand-alpha", None, samples_per_prompt=2)]
    cands.append(model_entry("beta", "openai/cand-beta", None))
    for pairwise in (None, {"all_pairs": True}):
        judging = {"pairwise": pairwise} if pairwise else {}
        path = make_config(None, candidates=cands, judging=judging, filename=f"c{bool(pairwise)}.yaml")
        cfg = load_config(path)
        whole = estimate.count_calls(cfg, None)
        monkeypatch.setattr(estimate, "COUNT_CHUNK", 1)
        assert estimate.count_calls(cfg, None) == whole
        monkeypatch.setattr(estimate, "COUNT_CHUNK", 1000)
        assert whole["examples"] == sum(1 for p in SAMPLE_DATASETS for line in p.open() if line.strip())


def test_validate_without_judges_counts_only_replies_the_run_would_reuse(tmp_path: Path, make_config: Any) -> None:
    """Judge-free, single-turn: --validate checks the cache without building the reply, and a row stored in another
    cache format (which the run would ask again) is not counted as cached."""
    import diskcache
    from oracles import first_turns

    from rubricrun.providers.cache import cache_key
    from rubricrun.providers.stack import open_cache
    from rubricrun.types import LLMResponse

    rows = [{"id": f"q{i}", "question": f"{i} + 1?", "answer": str(i + 1)} for i in range(3)]
    path = make_config(None, judges=[], datasets=[{"path": str(write_jsonl(tmp_path / "qa.jsonl", rows))}])
    cfg = load_config(path)
    tasks = first_turns(cfg, list(preflight.preflight(cfg, None).examples))
    cache = open_cache(cfg)
    assert cache is not None
    cache.set(cache_key(tasks[0].request), LLMResponse(text="1"))
    cache.close()
    with diskcache.Cache(cfg.cache.dir) as older:  # a row as versions before 018 stored it: a pickled dict, tag 1
        older.set(cache_key(tasks[1].request), {"text": "2", "_v": 1}, tag=1)
    counts = estimate.count_calls(cfg, None)
    assert (counts["candidate_calls"], counts["candidate_cached"]) == (2 * 3, 1)  # two candidates, three rows


def test_a_run_reads_the_examples_preflight_kept_not_the_files_again(
    tmp_path: Path, make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """preflight(spool=True) keeps the examples it validated (data/spool.py, plan 012): the run's iterations read
    them back in input order, chunk by chunk and each on its own offsets, without opening the dataset files."""
    from rubricrun.data import spool

    monkeypatch.setattr(spool, "CHUNK", 4)
    cfg = load_config(
        make_config(None, datasets=[{"path": _generic(tmp_path, 10)}, {"path": _generic(tmp_path, 3, "h.jsonl")}])
    )
    prepared = preflight.preflight(cfg, None, spool=True)
    plain = list(preflight.preflight(cfg, None).examples)
    (tmp_path / "g.jsonl").write_text("not json\n")  # the files are not read again
    a, b = iter(prepared.examples), iter(prepared.examples)
    assert [next(a).id for _ in range(6)] == [ex.id for ex in plain[:6]]
    assert list(b) == plain  # a second iteration meanwhile: its own offsets
    assert [ex.id for ex in a] == [ex.id for ex in plain[6:]]
    assert len(prepared.examples) == 13


def test_an_example_the_spool_cannot_keep_turns_the_spool_off(tmp_path: Path, make_config: Any) -> None:
    """A value MessagePack does not know (a reader's own type) leaves the spool off: the files are read again."""
    from rubricrun.data.spool import Spool

    cfg = load_config(make_config(None, datasets=[{"path": _generic(tmp_path, 3)}]))
    kept = Spool("rubricrun-test-", Example)
    first = next(iter(preflight.preflight(cfg, None).examples))
    kept.add(first)
    kept.add(msgspec.structs.replace(first, metadata={"f": lambda: None}))
    kept.seal()
    assert not kept.ok
    examples = preflight.Examples(cfg, None, 3, kept)
    assert [ex.id for ex in examples] == ["g/r0", "g/r1", "g/r2"]
