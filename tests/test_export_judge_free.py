"""Preference pairs without a judge (issue 12, item 6): the strong candidate's response is chosen, the weak one's
rejected, as VellumForge2 builds pairs; error, empty, truncated and refusal rules still apply."""

from __future__ import annotations

import msgspec
from conftest import DELETE, KEY_ENV, read_jsonl, run_dir, write_jsonl
from factories import example, response
from fakeserver import FakeOpenAIServer
from oracles import build_export

from rubricrun.config import ExportConfig
from rubricrun.types import Example, Response

PAIRS = ExportConfig(chosen_candidate="strong", rejected_candidate="weak")


def _resp(eid: str, cand: str, text: str | None, *, status: str = "ok", **flags: bool) -> Response:
    return response(eid, cand, text, status=status, error=None, finish_reason="stop", flags=flags)


def _examples(*ids: str) -> list[Example]:
    return [example(i, source=f"d:{i}") for i in ids]


def test_pairs_by_candidate_need_no_scores() -> None:
    responses = [
        _resp("e1", "strong", "Good."),
        _resp("e1", "weak", "Bad."),
        _resp("e2", "strong", "Cut off", truncated=True),  # never chosen
        _resp("e2", "weak", "Bad."),
        _resp("e3", "strong", "Same."),
        _resp("e3", "weak", " Same. "),  # identical texts make no pair
        _resp("e4", "strong", "Good."),
        _resp("e4", "weak", None, status="error"),
        _resp("e5", "strong", "Good."),
        _resp("e5", "weak", "I can't help.", refusal=True),  # a refusal may be the rejected side
    ]
    rows, stats = build_export(
        "dpo", _examples("e1", "e2", "e3", "e4", "e5"), responses, [], {}, PAIRS, by_candidate=True
    )
    assert [r["provenance"]["example_id"] for r in rows] == ["e1", "e5"]
    assert rows[0]["chosen"] == [{"role": "assistant", "content": "Good."}]
    assert rows[0]["rejected"] == [{"role": "assistant", "content": "Bad."}]
    assert rows[0]["chosen_score"] is None and rows[0]["margin"] is None
    assert rows[0]["provenance"]["candidates"] == ["strong", "weak"]
    assert stats["written"] == 2 and stats["skipped_too_few"] == 2 and stats["skipped_identical"] == 1
    assert stats["responses_error"] == 1
    # Without by_candidate, the same unjudged run gives nothing (the score rule).
    assert build_export("dpo", _examples("e1"), responses[:2], [], {}, PAIRS)[0] == []


def test_pair_by_auto_and_candidate() -> None:
    assert PAIRS.pairs_by_candidate(has_judges=False)
    assert not PAIRS.pairs_by_candidate(has_judges=True)
    assert msgspec.structs.replace(PAIRS, pair_by="candidate").pairs_by_candidate(has_judges=True)
    assert not msgspec.structs.replace(PAIRS, pair_by="score").pairs_by_candidate(has_judges=False)
    assert not ExportConfig().pairs_by_candidate(has_judges=False)


def _by_model(body: dict) -> str | dict:
    question = body["messages"][-1]["content"]
    if body["model"] == "cand-strong":
        if "truncate" in question:
            return {"content": "A long answer that was cut", "finish_reason": "length"}
        return f"A careful answer to: {question}"
    return "no idea"


def _run(tmp_path, make_config, cli_main, **export):
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": "q1", "prompt": "Why is the sky blue?"}, {"id": "q2", "prompt": "Please truncate this one."}],
    )
    with FakeOpenAIServer(responder=_by_model) as server:
        cands = [
            {"name": n, "model": f"openai/cand-{n}", "api_base": server.base_url, "api_key_env": KEY_ENV}
            for n in ("strong", "weak")
        ]
        cfg = make_config(
            server,
            candidates=cands,
            judges=DELETE,
            datasets=[{"path": str(data)}],
            export={"formats": ["dpo", "hybrid"], "chosen_candidate": "strong", "rejected_candidate": "weak", **export},
        )
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "pairs"])
        models = {r.model for r in server.requests}
    return rc, err, models


def test_two_candidates_no_judges_write_dpo_rows(tmp_path, make_config, cli_main) -> None:
    rc, err, models = _run(tmp_path, make_config, cli_main)
    assert rc == 0, err
    assert models == {"cand-strong", "cand-weak"}  # no judge call
    out = run_dir(tmp_path, "pairs")
    dpo = read_jsonl(out / "export" / "dpo.jsonl")
    assert len(dpo) == 1  # q2's strong answer is truncated: never a chosen side
    assert dpo[0]["chosen"][0]["content"] == "A careful answer to: Why is the sky blue?"
    assert dpo[0]["rejected"][0]["content"] == "no idea"
    assert dpo[0]["provenance"]["example_id"].endswith("q1")
    hybrid = read_jsonl(out / "export" / "hybrid.jsonl")
    assert [(h["prompt"], h["rejected"]) for h in hybrid] == [("Why is the sky blue?", "no idea")]


def test_pair_by_candidate_without_both_sides_is_bad_input(tmp_path, make_config, cli_main) -> None:
    cfg = make_config(None, export={"formats": ["dpo"], "pair_by": "candidate", "chosen_candidate": "alpha"})
    rc, _, err = cli_main(["--config", str(cfg), "--validate"])
    assert rc == 2 and "export.rejected_candidate" in err and "Traceback" not in err
    cfg = make_config(None, export={"formats": ["dpo"], "chosen_candidate": "nobody"})
    rc, _, err = cli_main(["--config", str(cfg), "--validate"])
    assert rc == 2 and "export.chosen_candidate" in err and "'nobody' is not a candidate" in err
