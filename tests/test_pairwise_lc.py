"""Length-controlled pairwise win rates (results/pairwise.py): through the CLI
against the fake server with a judge that prefers the longer answer, and pair_outcome against length_controlled on
the same comparisons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DELETE, model_entry, write_jsonl
from fakeserver import FakeOpenAIServer, default_reply, is_judge_request, message_text

from rubricrun.config import load_config
from rubricrun.results.pairwise import length_controlled, pair_outcome
from rubricrun.types import PairJudgment

PROMPTS = [{"id": f"q{i}", "prompt": f"Question number {i}?"} for i in range(1, 9)]
LONGER_BY = (1, 2, 100, 110, 120, 130, 140, 150)  # how much longer alpha answers question i than beta does
TIE_BELOW = 25  # the judge calls a tie when the answers differ by fewer characters than this


def _answers(body: dict[str, Any]) -> tuple[str, str]:
    """The answers shown as A and B in a pairwise prompt."""
    text = message_text(body["messages"][-1])
    a = text.split("[The Start of Assistant A's Answer]\n", 1)[1].split("\n[The End of Assistant A's Answer]")[0]
    b = text.split("[The Start of Assistant B's Answer]\n", 1)[1].split("\n[The End of Assistant B's Answer]")[0]
    return a, b


def longer_wins(body: dict[str, Any]) -> str:
    """The fake server's replies: alpha answers question i with 40 + LONGER_BY[i - 1] characters, beta always with
    40; the pairwise judge prefers the longer answer, and calls a tie when the two are within TIE_BELOW characters."""
    last = message_text(body["messages"][-1])
    if "[The Start of Assistant A's Answer]" in last:
        a, b = _answers(body)
        if abs(len(a) - len(b)) < TIE_BELOW:
            return "About the same. [[C]]"
        return "[[A]]" if len(a) > len(b) else "[[B]]"
    if is_judge_request(body):
        return default_reply(body)
    i = int(last.split("Question number ", 1)[1].split("?", 1)[0])
    return "x" * (40 + LONGER_BY[i - 1] if body["model"] == "cand-alpha" else 40)


def write_lc_config(tmp_path: Path, server: FakeOpenAIServer, make_config: Any) -> Path:
    return make_config(
        server,
        candidates=[model_entry(n, f"openai/cand-{n}", server) for n in ("alpha", "beta")],
        judges=[model_entry("j1", "openai/judge-one", server)],
        datasets=[{"path": str(write_jsonl(tmp_path / "open.jsonl", PROMPTS))}],
        judging={"default_rubric": DELETE, "pairwise": {"baseline": "beta"}},
    )


def test_a_judge_preferring_the_longer_answer_is_length_controlled(
    tmp_path: Path, make_config: Any, cli_main: Any
) -> None:
    with FakeOpenAIServer(responder=longer_wins) as server:
        rc, _, err = cli_main(["--config", str(write_lc_config(tmp_path, server, make_config)), "--run-id", "r"])
        assert rc == 0, err
    assert (
        "pairwise alpha vs beta: win 0.7500 " in err
        and "LC win 0.4356 ± 0.0162 (one side always longer)  longer won 1.0000" in err
    )
    run = tmp_path / "outputs" / "r"
    (pair,) = json.loads((run / "summary.json").read_text())["pairwise_judging"]["open"]["pairs"]
    # Questions 1-2: alpha 1-2 characters longer (ties); 3-8: 100-150 longer (alpha, the longer, wins).
    assert (pair["wins"], pair["ties"], pair["losses"], pair["win_rate"]) == (6, 2, 0, 0.75)
    assert (pair["longer_share"], pair["longer_n"], pair["lc_n"], pair["lc_note"]) == (1.0, 6, 8, None)
    assert pair["lc_one_side_longer"] is True  # alpha never shorter: the value at equal lengths is extrapolated
    # Where the lengths (nearly) agree the judge called ties: the fit's preference at zero difference is near 0.5.
    assert pair["lc_win_rate"] is not None and abs(pair["lc_win_rate"] - 0.5) < abs(pair["win_rate"] - 0.5) / 2
    want = length_controlled([0.5] * 2 + [1.0] * 6, [40 + d for d in LONGER_BY], [40] * len(LONGER_BY))
    assert pair["lc_win_rate"] == round(want.lc_win_rate or 0, 4) == 0.4356
    assert pair["lc_win_rate_se"] is not None and pair["lc_win_rate_se"] > 0
    report = (run / "report.html").read_text()
    # Secondary columns, behind the section's own "all columns" switch (report.css hides .sec while unchecked).
    assert '<input type="checkbox" class="allcols" id="cols-pairwise-1">' in report
    assert '<th class="sec">LC win (a)</th><th class="sec">longer won</th>' in report
    assert (
        '<td class="sec">0.436 ± 0.016 <span class="note">n 8, one side always longer: extrapolated</span></td>'
        in report
    )


def _row(i: int, winner: str) -> PairJudgment:
    return PairJudgment(
        kind="pairwise",
        id=f"p{i}",
        example_id=f"open/q{i}",
        turn=0,
        a="alpha",
        b="beta",
        judge="j1",
        ab="C",
        ba="C",
        winner=winner,
        error=None,
        keys=("", ""),
        response_ids=(f"ra{i}", f"rb{i}"),
    )


def test_pair_outcome_equals_length_controlled_on_the_same_comparisons(tmp_path: Path, make_config: Any) -> None:
    cfg = load_config(write_lc_config(tmp_path, None, make_config))  # type: ignore[arg-type]
    winners = ["alpha", "beta", "tie", "alpha", "error", "alpha", "tie", "beta", "alpha", "alpha"]
    len_a = [120, 80, 100, 150, 90, 60, 130, 70, 200, 95]
    len_b = [100, 100, 100, 100, 100, 100, 100, 100, 100, 100]
    rows = [_row(i, w) for i, w in enumerate(winners)]
    text_len = {f"ra{i}": n for i, n in enumerate(len_a)} | {f"rb{i}": n for i, n in enumerate(len_b)}
    got = pair_outcome(cfg, "alpha", "beta", rows, text_len)
    prefs = [{"alpha": 1.0, "tie": 0.5, "beta": 0.0}.get(w) for w in winners]
    want = length_controlled(prefs, len_a, len_b)
    assert want.lc_win_rate is not None and want.lc_se is not None and want.longer_share is not None
    assert got.lc_win_rate == pytest.approx(want.lc_win_rate, abs=5e-5)
    assert got.lc_win_rate_se == pytest.approx(want.lc_se, abs=5e-5)
    assert got.longer_share == pytest.approx(want.longer_share, abs=5e-5)
    assert (got.lc_n, got.longer_n, got.lc_note) == (want.n, want.longer_n, None) == (9, 7, None)
    assert got.lc_one_side_longer is want.one_side_longer is False  # alpha is longer on some, shorter on others


def test_an_undefined_fit_says_why(tmp_path: Path, make_config: Any) -> None:
    cfg = load_config(write_lc_config(tmp_path, None, make_config))  # type: ignore[arg-type]
    rows = [_row(i, "alpha") for i in range(3)]  # alpha always won: the preferences are separated
    text_len = {f"ra{i}": 100 + i for i in range(3)} | {f"rb{i}": 50 for i in range(3)}
    got = pair_outcome(cfg, "alpha", "beta", rows, text_len)
    assert got.lc_win_rate is None and got.lc_win_rate_se is None
    assert got.lc_note is not None and "separated" in got.lc_note
    assert (got.longer_share, got.longer_n, got.lc_n) == (1.0, 3, 3)
