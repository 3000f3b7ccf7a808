"""results/tally.Tally against the list-based reference over the same rows: summary() equals build_summary,
export files equal build_export's, the report of a small run is unchanged and a large one shows a bounded sample;
Tally.take keeps no row it was given (memory shape, no timings)."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import DATA, model_entry, write_jsonl
from factories import example, judgment, response
from fakeserver import FakeOpenAIServer, default_reply, is_judge_request, message_text
from oracles import build_export, build_summary, criteria_index

from rubricrun import codec
from rubricrun.config import load_config
from rubricrun.results.artifacts import Finished
from rubricrun.results.export import FORMATS, write_export
from rubricrun.results.report import by_example, render_report, sample, write_report_from_dir
from rubricrun.results.scoring import score_all
from rubricrun.results.summary_types import summary_data
from rubricrun.results.tally import Tally
from rubricrun.tasks.registry import criteria_for
from rubricrun.tasks.registry import metric_of as detect_metric
from rubricrun.types import Example, Judgment, PairJudgment, Response, Usage


def _h(body: dict[str, Any]) -> int:
    return int(hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()[:8], 16)


def _responder(body: dict[str, Any]) -> Any:
    """Deterministic and varied: candidate errors and truncations, unreadable judge replies, MT-Bench ratings,
    1-5 scores, pairwise verdicts, each picked by a hash of the request's messages."""
    h = _h(body)
    text = " ".join(message_text(m) for m in body.get("messages") or [])
    if "[The Start of Assistant A's Answer]" in text:
        return ["[[A]]", "[[B]]", "[[C]]", "no verdict"][h % 4]
    if '"[[rating]]"' in text:
        return "I cannot say." if h % 7 == 0 else f"Rating: [[{1 + h % 10}]]"
    if is_judge_request(body):
        if h % 9 == 0:
            return "not json at all"
        if '"score"' in json.dumps(body.get("response_format") or {}):
            return json.dumps({"reasoning": "r", "score": 1 + h % 5})
        return default_reply(body)
    if h % 11 == 0:
        return {"status": 500, "message": "boom"}
    reply = default_reply(body) + " x" * (h % 13)
    return {"content": reply, "finish_reason": "length"} if h % 5 == 0 else reply


SAMPLES = [str(p) for p in sorted(DATA.glob("*_sample.jsonl"))]
OPEN = {"id": "o", "prompt": "Say hi."}


def _pairwise_data(tmp: Path) -> list[dict]:
    rows = [{"id": f"p{i}", "prompt": f"Question {i}?"} for i in range(6)]
    return [{"path": str(write_jsonl(tmp / "open.jsonl", rows))}]


def _graded_data(tmp: Path) -> list[dict]:
    rubric = [
        {"id": "c1", "text": "Greets.", "weight": 2, "category": "tone", "tags": ["axis:x"]},
        {"id": "c2", "text": "Polite.", "weight": 1},
        {"id": "c3", "text": "Rude.", "weight": -1, "category": "tone"},
    ]
    rows = [{"id": f"g{i}", "prompt": f"Hello {i}", "rubric": rubric} for i in range(5)]
    return [{"path": str(write_jsonl(tmp / "graded.jsonl", rows))}, {"path": SAMPLES[0]}]


def _cands(server: FakeOpenAIServer, *names: str, **extra: Any) -> list[dict]:
    return [model_entry(n, f"openai/cand-{n}", server, **(extra if i == 0 else {})) for i, n in enumerate(names)]


CASES: dict[str, Callable[[Path, FakeOpenAIServer], dict[str, Any]]] = {
    # every sample dataset (accuracy, healthbench, prbench, rubric, multi-turn MT-Bench rows with a default
    # rubric), two samples of one candidate, two judges voting on every criterion (agreement), errors
    "votes": lambda tmp, s: {
        "candidates": _cands(s, "alpha", "beta", samples_per_prompt=2),
        "judging": {"judges_per_criterion": 2, "on_tie": "not_met"},
    },
    "not_met_with_replay": lambda tmp, s: {
        "candidates": [
            *_cands(s, "alpha"),
            {"name": "given", "responses_from": str(DATA / "demo_reference_answers.jsonl")},
        ],
        "judges": [model_entry("j1", "openai/judge-one", s)],
        "judging": {"on_error": "not_met"},
    },
    "mt_bench_1_10": lambda tmp, s: {
        "candidates": _cands(s, "alpha", "beta"),
        "datasets": [{"path": str(DATA / "mtbench_sample.jsonl")}, {"path": SAMPLES[0]}],
        "judging": {"scale": "1-10"},
    },
    "graded_1_5": lambda tmp, s: {"datasets": _graded_data(tmp), "judging": {"scale": "1-5"}},
    "pairwise": lambda tmp, s: {
        "candidates": _cands(s, "alpha", "beta", "gamma"),
        "datasets": _pairwise_data(tmp),
        "judging": {"pairwise": {"all_pairs": True}},
    },
}


def _read(run: Path, cls: type, name: str) -> list[Any]:
    rows = [json.loads(line) for line in (run / name).read_text().splitlines() if line.strip()]
    if cls is PairJudgment:
        return [codec.convert(r, cls) for r in rows if r.get("kind") == "pairwise"]
    return [codec.convert(r, cls) for r in rows if r.get("kind") != "pairwise"]


def _take(tally: Tally, ex: Example, rs: list, js: list, pairs: list) -> None:
    """One example's rows fed to the tally as the run feeds it (a Finished; the tally does not read the lines)."""
    tally.take(Finished(ex, rs, js, pairs, (b"", b"", b"", b"")))


def _fed(cfg: Any, examples: list, responses: list, judgments: list, pairs: list, *, live: bool = False) -> Tally:
    """A tally fed these rows; `live`: as a run whose preflight counted the metrics (no spool, fed as it goes)."""
    counts: dict[str, Counter] = {}
    for ex in examples:
        counts.setdefault(ex.dataset, Counter())[detect_metric(ex)] += 1
    tally = Tally(cfg, "r", metric_counts=counts, spool=False) if live else Tally(cfg, "r")
    for ex in examples:
        mine = [x for x in responses if x.example_id == ex.id]
        _take(
            tally,
            ex,
            mine,
            [j for j in judgments if j.example_id == ex.id],
            [p for p in pairs if p.example_id == ex.id],
        )
    return tally


@pytest.mark.parametrize("case", sorted(CASES))
def test_tally_equals_the_list_based_results(case: str, tmp_path: Path, make_config: Any, cli_main: Any) -> None:
    with FakeOpenAIServer(responder=_responder) as server:
        path = make_config(server, retry={"max_attempts": 1}, **CASES[case](tmp_path, server))
        rc, _, err = cli_main(["--config", str(path), "--run-id", "r"])
        assert rc == 0, err
    cfg, run = load_config(path), tmp_path / "outputs" / "r"
    examples, responses = _read(run, Example, "examples.jsonl"), _read(run, Response, "responses.jsonl")
    judgments, pairs = _read(run, Judgment, "judgments.jsonl"), _read(run, PairJudgment, "judgments.jsonl")
    if case in ("votes", "not_met_with_replay"):  # the rows vary as the summary's branches do
        assert any(r.status == "error" for r in responses) and any(j.verdict == "error" for j in judgments)
        assert any(r.flags.get("truncated") for r in responses)
    tally = _fed(cfg, examples, responses, judgments, pairs)

    scores = {}  # each example's responses on its criteria
    for ex in examples:
        scores.update(score_all([r for r in responses if r.example_id == ex.id], judgments, criteria_for(ex, cfg)))
    criteria = criteria_index(cfg, examples)
    want = build_summary(cfg, "r", examples, responses, judgments, criteria, pairs=pairs)
    assert summary_data(tally.summary()) == summary_data(want)

    # a run stopped part way: some judgments missing (partial responses), the last examples without rows
    part_js = [j for k, j in enumerate(judgments) if k % 3 != 2]
    part_rs = responses[: len(responses) * 2 // 3]
    partial = _fed(cfg, examples, part_rs, part_js, pairs[::2])
    want = build_summary(cfg, "r", examples, part_rs, part_js, criteria, pairs=pairs[::2])
    assert summary_data(partial.summary()) == summary_data(want)

    counts = tally.export(tmp_path / "new", FORMATS)
    for fmt in FORMATS:
        rows, stats = build_export(fmt, examples, responses, judgments, scores, cfg.export or _default_export())
        old = write_export(tmp_path / "old", fmt, rows)
        assert (tmp_path / "new" / "export" / f"{fmt}.jsonl").read_bytes() == old.read_bytes(), fmt
        assert counts[fmt] == stats and list(counts[fmt]) == list(stats), fmt

    summary = tally.summary()
    tally.report(tmp_path / "new", summary)
    stamp = re.compile(r"<dt>report generated</dt><dd>[^<]*</dd>")
    page = render_report(summary, sample(by_example(examples, responses, judgments, criteria, scores)))
    assert stamp.sub("", (tmp_path / "new" / "report.html").read_text()) == stamp.sub("", page)

    # fed as the run goes (preflight's metric counts): the same summary and the same page, and no rows kept
    live = _fed(cfg, examples, responses, judgments, pairs, live=True)
    assert summary_data(live.summary()) == summary_data(summary)
    live.report(tmp_path / "live", live.summary())
    assert stamp.sub("", (tmp_path / "live" / "report.html").read_text()) == stamp.sub("", page)
    with pytest.raises(RuntimeError):
        next(live.rows())


def _default_export() -> Any:
    from rubricrun.config import ExportConfig

    return ExportConfig()


def _rows(n: int, fail_every: int = 0) -> list[tuple[Example, list[Response], list[Judgment]]]:
    out = []
    for i in range(n):
        ex = example(f"e{i:05d}", source=f"d.jsonl:{i + 1}", prompt="q")
        err = bool(fail_every) and i % fail_every == fail_every - 1
        text, status = (None, "error") if err else ("answer " * 50, "ok")
        r = response(
            ex.id, "alpha", text, id=f"{ex.id}#a#0", model="m", status=status, finish_reason="stop",
            usage=Usage(3, 5, 8), key="k" * 64,
        )  # fmt: skip
        out.append((ex, [r], []))
    return out


def test_report_of_a_large_run_shows_a_bounded_sample_and_says_so(tmp_path: Path, make_config: Any) -> None:
    cfg = load_config(make_config(None, judges=[], judging={"default_rubric": []}))
    tally = Tally(cfg, "r", report_examples=20)
    rows = _rows(300, fail_every=50)
    for ex, rs, js in rows:
        _take(tally, ex, rs, js, [])
    tally.report(tmp_path, tally.summary())
    page = (tmp_path / "report.html").read_text()
    assert "Showing 20 of 300 examples" in page
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    shown = [e["id"] for e in data["ex"]]
    assert shown[:10] == [f"e{i:05d}" for i in range(10)]  # the first half in input order
    assert {f"e{i:05d}" for i in range(49, 300, 50)} <= set(shown)  # then the failed ones
    assert "Response errors (6)" in page


def test_report_from_dir_is_bounded_too(tmp_path: Path, make_config: Any, cli_main: Any) -> None:
    with FakeOpenAIServer() as server:
        path = make_config(server, datasets=_pairwise_data(tmp_path))
        assert cli_main(["--config", str(path), "--run-id", "r"])[0] == 0
    run = tmp_path / "outputs" / "r"
    write_report_from_dir(run, limit=4)
    assert "Showing 4 of 6 examples" in (run / "report.html").read_text()
    write_report_from_dir(run)
    assert "Showing" not in (run / "report.html").read_text()


def test_add_keeps_none_of_the_rows_it_is_given(tmp_path: Path, make_config: Any) -> None:
    cfg = load_config(make_config(None))
    tally = Tally(cfg, "r")
    for ex, rs, js in _rows(50):
        before = [sys.getrefcount(x) for x in (ex, *rs)]
        _take(tally, ex, rs, js, [])
        assert [sys.getrefcount(x) for x in (ex, *rs)] == before  # the tally holds none of them
    held = [k for k, v in vars(tally).items() if isinstance(v, list | dict | tuple) and len(v) >= 50]
    assert held == []  # nothing per example in memory without pairwise rows: the summary reads the spool
    assert tally.n_responses == 50 and tally.any_ok and tally.first_error is None
    assert [ex.id for ex, *_ in tally.rows()] == [f"e{i:05d}" for i in range(50)]  # the full rows, from disk
    assert next(tally.rows())[1][0].text == "answer " * 50


def test_a_datasets_metric_is_its_majority_even_when_the_first_examples_call_for_another(make_config: Any) -> None:
    """The summary's per-example steps need the dataset's metric; the Tally counts what each example calls for as
    it goes, so an open first example (rubric) does not decide for a dataset of multiple-choice rows (accuracy)."""
    cfg = load_config(make_config(None, judges=[], judging={"default_rubric": []}))
    rows = _rows(3)
    examples = [
        rows[0][0],
        *(
            msgspec.structs.replace(ex, choices=("x", "y"), answer="A", metadata={"format": "mc"})
            for ex, _, _ in rows[1:]
        ),
    ]
    responses = [r for _, rs, _ in rows for r in rs]
    tally = Tally(cfg, "r")
    for ex, rs in zip(examples, ([r] for r in responses), strict=True):
        _take(tally, ex, rs, [], [])
    want = build_summary(cfg, "r", examples, responses, [], criteria_index(cfg, examples))
    assert want.datasets["d"].metric == "accuracy"
    assert summary_data(tally.summary()) == summary_data(want)


def test_a_live_tally_finds_each_examples_criteria_once(make_config: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fed as the run goes, the summary and the report's sampler share one registry.criteria_for per example (it
    was found three times: the criteria index, the summary, the sampler's scores), and give the same results."""
    from rubricrun.tasks import registry

    cfg = load_config(make_config(None, judges=[], judging={"default_rubric": []}))
    rows = _rows(4, fail_every=3)
    examples = [ex for ex, _, _ in rows]
    responses = [r for _, rs, _ in rows for r in rs]
    want = _fed(cfg, examples, responses, [], [])
    calls: list[str] = []
    real = registry.criteria_for

    def counted(ex: Example, c: Any) -> Any:
        calls.append(ex.id)
        return real(ex, c)

    monkeypatch.setattr(registry, "criteria_for", counted)
    live = _fed(cfg, examples, responses, [], [], live=True)
    assert calls == [ex.id for ex in examples]
    assert summary_data(live.summary()) == summary_data(want.summary())


def test_score_all_scores_on_the_rubric_given() -> None:
    from rubricrun.types import Criterion

    ex = example("e1", prompt="q")
    r = response(ex.id, "alpha", "a", id="e1#a#0")
    js = [judgment(r, "c1", "met"), judgment(r, "c2", "not_met")]
    rubric = (Criterion(id="c1", text="", weight=3.0), Criterion(id="c2", text="", weight=1.0))
    assert score_all([r], js, rubric)[r.id].normalized == 0.75
