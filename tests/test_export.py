"""export.build_export / write_export on a small hand-made judged run, and the files as `datasets` loads them.

Column forms checked against TRL's dataset formats page: https://huggingface.co/docs/trl/dataset_formats
(conversational prompt-completion, preference with explicit prompt, unpaired preference with a bool label).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import msgspec
import pytest
from factories import example, response
from oracles import build_export

from rubricrun.config import ExportConfig
from rubricrun.errors import InputError
from rubricrun.judging.answers import quality_flags
from rubricrun.results.export import FORMATS, write_export
from rubricrun.types import Example, Judgment, Response, Score

SYSTEM = {"role": "system", "content": "You are a baker."}
E1_MESSAGES = (
    SYSTEM,
    {"role": "user", "content": "How do I make bread?"},
    {"role": "assistant", "content": "Which kind?"},
    {"role": "user", "content": "A simple loaf."},
)


def _ex(eid: str, text: str = "Q?", **kw) -> Example:
    return example(eid, dataset="ds", source=f"ds.jsonl:{eid}", prompt=f"{text} ({eid})", **kw)


def _resp(
    rid: str, text: str | None, *, status: str = "ok", truncated: bool = False, refusal: bool = False
) -> Response:
    """`<example>-<s|w>-<sample>`: the strong or the weak candidate's response."""
    eid, cand, sample = rid.split("-")
    name = {"s": "strong", "w": "weak"}[cand]
    flags = {**({"truncated": True} if truncated else {}), **({"refusal": True} if refusal else {})}
    return response(
        eid, name, text, sample=int(sample), id=rid, model=f"openai/{name}-model", status=status,
        error="HTTP 500" if status == "error" else None, finish_reason="length" if truncated else "stop",
        key=f"k-{rid}", flags=flags,
    )  # fmt: skip


def _flags(text: str, **set_: bool) -> dict:
    """The flags an export row carries for a fixture response: computed from its text, then the fixture's own."""
    return {**quality_flags(text, "stop", 0), **set_}


def _score(normalized: float | None, clipped: float | None = None) -> Score:
    c = normalized if clipped is None else clipped
    return Score(points=0.0, normalized=normalized, clipped=c, met=0, not_met=0, errors=0)


def _j(jid: str, rid: str, crit: str, verdict: str, expl: str | None, key: str | None, weight: float = 1.0) -> Judgment:
    eid, cand, _ = rid.split("-")
    return Judgment(
        id=jid,
        response_id=rid,
        example_id=eid,
        candidate={"s": "strong", "w": "weak"}[cand],
        criterion_id=crit,
        weight=weight,
        judge="judge-a",
        verdict=verdict,  # type: ignore[arg-type]
        explanation=expl,
        error="parse error" if verdict == "error" else None,
        key=key,
    )


# (id, text, normalized score, extra) -- the cases each example exercises are named in the comments.
EXAMPLES = [
    _ex("e1", messages=E1_MESSAGES, metadata={"main_topic": "Cooking", "sub_topic": "Bread"}),  # multi-turn, errors
    _ex("e2"),  # sft threshold edge (0.7), min_margin edge (0.7 - 0.6 == 0.1)
    _ex("e3"),  # tie 0.5 / 0.5 (also the kto threshold edge)
    _ex("e4"),  # margin 0.05 < 0.1 (0.3 with the clipped score)
    _ex("e5"),  # best and worst texts identical: the next distinct one is rejected
    _ex("e6"),  # only identical texts (whitespace aside)
    _ex("e7"),  # the weak candidate wins
    _ex("e8"),  # truncated: never chosen, may be rejected
    _ex("e9"),  # a single response
    _ex("e10"),  # the candidate constraint changes the pair
]
RESPONSES = [
    _resp("e1-s-0", "Knead for ten minutes."),
    _resp("e1-s-1", "   "),  # blank text
    _resp("e1-s-2", "Half judged."),  # a judgment in error: partially judged, never exported
    _resp("e1-w-0", "Just bake it."),
    _resp("e1-w-1", None, status="error"),
    _resp("e1-w-2", "Use flour."),  # scores are None
    _resp("e2-s-0", "Answer A"),
    _resp("e2-w-0", "Answer B"),
    _resp("e3-s-0", "X"),
    _resp("e3-w-0", "Y"),
    _resp("e4-s-0", "P"),
    _resp("e4-w-0", "Q"),
    _resp("e5-s-0", "Same text"),
    _resp("e5-w-0", "Same text"),
    _resp("e5-w-1", "Different"),
    _resp("e6-s-0", "Dup"),
    _resp("e6-w-0", " Dup \n"),
    _resp("e7-s-0", "strong says"),
    _resp("e7-w-0", "weak says"),
    _resp("e8-s-0", "Long answer cut", truncated=True),
    _resp("e8-s-1", "Fine"),
    _resp("e8-w-0", "Cut off", truncated=True),
    _resp("e9-s-0", "Only"),
    _resp("e10-s-0", "Great"),
    _resp("e10-s-1", "Awful"),
    _resp("e10-w-0", "Meh"),
    _resp("zz-s-0", "orphan"),  # its example is not in the run
]
SCORES = {
    "e1-s-0": _score(0.9),
    "e1-s-1": _score(0.9),
    "e1-s-2": _score(0.95),
    "e1-w-0": _score(0.2),
    "e1-w-2": _score(None),
    "e2-s-0": _score(0.7),
    "e2-w-0": _score(0.6),
    "e3-s-0": _score(0.5),
    "e3-w-0": _score(0.5),
    "e4-s-0": _score(0.65, clipped=0.9),
    "e4-w-0": _score(0.6),
    "e5-s-0": _score(0.9),
    "e5-w-0": _score(0.1),
    "e5-w-1": _score(0.4),
    "e6-s-0": _score(0.9),
    "e6-w-0": _score(0.1),
    "e7-s-0": _score(0.2),
    "e7-w-0": _score(0.8),
    "e8-s-0": _score(0.95),
    "e8-s-1": _score(0.8),
    "e8-w-0": _score(0.1),
    "e9-s-0": _score(0.8),
    "e10-s-0": _score(0.9),
    "e10-s-1": _score(0.1),
    "e10-w-0": _score(0.5),
    "zz-s-0": _score(0.9),
}
JUDGMENTS = [
    _j("j1", "e1-s-0", "c1", "met", "mentions kneading", "jk-e1-s-0"),
    _j("j2", "e1-s-0", "c2", "not_met", "no oven temperature", "jk-e1-s-0", weight=0.5),
    _j("j3", "e1-s-2", "c3", "error", None, "jk-e1-s-2"),
    _j("j4", "e1-w-0", "c1", "not_met", "no kneading", "jk-e1-w-0"),
    _j("j5", "e1-w-0", "c2", "met", "says bake", "jk-e1-w-0", weight=0.5),
    _j("j6", "e2-s-0", "auto", "met", None, None),  # rubric-free auto scoring: no cache key
]
CFG = ExportConfig(sft_threshold=0.7, kto_threshold=0.5, min_margin=0.1)
STRONG_WEAK = msgspec.structs.replace(CFG, chosen_candidate="strong", rejected_candidate="weak")


def _build(fmt: str, cfg: ExportConfig = CFG):
    return build_export(fmt, EXAMPLES, RESPONSES, JUDGMENTS, SCORES, cfg)


def _ids(rows):
    return [r["provenance"]["response_ids"] for r in rows]


def _balanced(stats: dict[str, int]) -> bool:
    return stats["considered"] == stats["written"] + sum(v for k, v in stats.items() if k.startswith("skipped_"))


E1_PROMPT = [dict(m) for m in E1_MESSAGES]
E1_PAIR_PROVENANCE = {
    "example_id": "e1",
    "dataset": "ds",
    "response_ids": ["e1-s-0", "e1-w-0"],
    "judgment_ids": ["j1", "j2", "j4", "j5"],
    "models": ["openai/strong-model", "openai/weak-model"],
    "candidates": ["strong", "weak"],
    "cache_keys": ["k-e1-s-0", "k-e1-w-0", "jk-e1-s-0", "jk-e1-w-0"],
}


def test_sft_rows_threshold_and_exclusions():
    rows, stats = _build("sft")
    assert [i for (i,) in _ids(rows)] == [
        "e1-s-0",
        "e2-s-0",
        "e5-s-0",
        "e6-s-0",
        "e7-w-0",
        "e8-s-1",
        "e9-s-0",
        "e10-s-0",
    ]
    assert stats == {
        "considered": 27,
        "written": 8,
        "skipped_no_example": 1,
        "skipped_error": 1,
        "skipped_empty": 1,
        "skipped_unscored": 1,
        "skipped_partially_judged": 1,
        "skipped_truncated": 2,
        "skipped_refusal": 0,
        "skipped_below_threshold": 12,
    }
    assert _balanced(stats)
    assert rows[0] == {
        "prompt": E1_PROMPT,
        "completion": [{"role": "assistant", "content": "Knead for ten minutes."}],
        "messages": E1_PROMPT + [{"role": "assistant", "content": "Knead for ten minutes."}],
        "score": 0.9,
        "flags": _flags("Knead for ten minutes."),
        "provenance": {
            "example_id": "e1",
            "dataset": "ds",
            "response_ids": ["e1-s-0"],
            "judgment_ids": ["j1", "j2"],
            "models": ["openai/strong-model"],
            "candidates": ["strong"],
            "cache_keys": ["k-e1-s-0", "jk-e1-s-0"],
        },
    }
    # 0.7 is exactly the threshold: kept; the judgment without a cache key adds none.
    assert rows[1]["score"] == 0.7
    assert rows[1]["provenance"]["judgment_ids"] == ["j6"]
    assert rows[1]["provenance"]["cache_keys"] == ["k-e2-s-0"]


def test_thresholds_ignore_float_noise_only():
    noisy = dict(SCORES, **{"e2-s-0": _score(0.1 + 0.6 - 1e-15)})  # 0.699999999999999
    rows, _ = build_export("sft", EXAMPLES, RESPONSES, JUDGMENTS, noisy, CFG)
    assert ["e2-s-0"] in _ids(rows)
    rows, _ = _build("sft", msgspec.structs.replace(CFG, sft_threshold=0.7000001))
    assert ["e2-s-0"] not in _ids(rows)
    rows, _ = _build("kto", msgspec.structs.replace(CFG, kto_threshold=0.5000001))
    assert {r["provenance"]["response_ids"][0]: r["label"] for r in rows}["e3-s-0"] is False


def test_kto_labels_and_truncation():
    rows, stats = _build("kto")
    labels = {r["provenance"]["response_ids"][0]: r["label"] for r in rows}
    assert labels == {
        "e1-s-0": True,
        "e1-w-0": False,
        "e2-s-0": True,
        "e2-w-0": True,
        "e3-s-0": True,  # 0.5 == kto_threshold
        "e3-w-0": True,
        "e4-s-0": True,
        "e4-w-0": True,
        "e5-s-0": True,
        "e5-w-0": False,
        "e5-w-1": False,
        "e6-s-0": True,
        "e6-w-0": False,
        "e7-s-0": False,
        "e7-w-0": True,
        "e8-s-1": True,  # e8-s-0 is truncated with a desirable score: left out
        "e8-w-0": False,  # truncated but undesirable: kept
        "e9-s-0": True,
        "e10-s-0": True,
        "e10-s-1": False,
        "e10-w-0": True,
    }
    assert all(type(r["label"]) is bool for r in rows)
    assert stats == {
        "considered": 27,
        "written": 21,
        "skipped_no_example": 1,
        "skipped_error": 1,
        "skipped_empty": 1,
        "skipped_unscored": 1,
        "skipped_partially_judged": 1,
        "skipped_truncated": 1,
        "skipped_refusal": 0,
    }
    assert _balanced(stats)
    row = next(r for r in rows if r["provenance"]["response_ids"] == ["e7-s-0"])
    assert row == {
        "prompt": [{"role": "user", "content": "Q? (e7)"}],
        "completion": [{"role": "assistant", "content": "strong says"}],
        "label": False,
        "score": 0.2,
        "flags": _flags("strong says"),
        "provenance": {
            "example_id": "e7",
            "dataset": "ds",
            "response_ids": ["e7-s-0"],
            "judgment_ids": [],
            "models": ["openai/strong-model"],
            "candidates": ["strong"],
            "cache_keys": ["k-e7-s-0"],
        },
    }


def test_dpo_pairs_unconstrained():
    rows, stats = _build("dpo")
    assert _ids(rows) == [
        ["e1-s-0", "e1-w-0"],
        ["e2-s-0", "e2-w-0"],  # margin exactly min_margin
        ["e5-s-0", "e5-w-1"],  # worst (e5-w-0) has the chosen text: next distinct
        ["e7-w-0", "e7-s-0"],  # no candidate constraint: the weak one may be chosen
        ["e8-s-1", "e8-w-0"],  # truncated e8-s-0 scored best but is not chosen; truncated e8-w-0 is rejected
        ["e10-s-0", "e10-s-1"],
    ]
    assert stats == {
        "considered": 10,
        "written": 6,
        "skipped_too_few": 1,
        "skipped_identical": 1,
        "skipped_tie": 1,
        "skipped_low_margin": 1,
        "skipped_inverted": 0,
        "responses_error": 1,
        "responses_empty": 1,
        "responses_unscored": 1,
        "responses_partially_judged": 1,
        "responses_no_example": 1,
    }
    assert _balanced(stats)
    assert rows[0] == {
        "prompt": E1_PROMPT,
        "chosen": [{"role": "assistant", "content": "Knead for ten minutes."}],
        "rejected": [{"role": "assistant", "content": "Just bake it."}],
        "chosen_score": 0.9,
        "rejected_score": 0.2,
        "margin": 0.7,
        "chosen_flags": _flags("Knead for ten minutes."),
        "rejected_flags": _flags("Just bake it."),
        "provenance": E1_PAIR_PROVENANCE,
    }
    assert [r["margin"] for r in rows] == [0.7, 0.1, 0.5, 0.6, 0.7, 0.8]
    for r in rows:
        assert r["chosen"][0]["content"].strip() != r["rejected"][0]["content"].strip()
        assert r["margin"] >= CFG.min_margin


def test_dpo_min_margin_edge_and_zero_margin_tie():
    rows, stats = _build("dpo", msgspec.structs.replace(CFG, min_margin=0.05))
    assert ["e4-s-0", "e4-w-0"] in _ids(rows)  # 0.65 - 0.6 == 0.05 now passes
    rows, stats = _build("dpo", msgspec.structs.replace(CFG, min_margin=0.0))
    assert stats["skipped_tie"] == 1  # a tie is skipped even when any margin would do
    assert not any(r["provenance"]["example_id"] == "e3" for r in rows)


def test_dpo_strong_vs_weak():
    rows, stats = _build("dpo", STRONG_WEAK)
    assert _ids(rows) == [
        ["e1-s-0", "e1-w-0"],
        ["e2-s-0", "e2-w-0"],
        ["e5-s-0", "e5-w-1"],
        ["e8-s-1", "e8-w-0"],
        ["e10-s-0", "e10-w-0"],  # not e10-s-1: rejected only from the weak candidate
    ]
    assert all(r["provenance"]["candidates"] == ["strong", "weak"] for r in rows)
    assert stats["skipped_inverted"] == 1  # e7: the weak model won
    assert stats["skipped_too_few"] == 1  # e9: no weak response
    assert stats["skipped_identical"] == 1 and stats["skipped_tie"] == 1 and stats["skipped_low_margin"] == 1
    assert stats["written"] == 5 and _balanced(stats)


def test_only_one_side_named():
    rows, _ = _build("dpo", msgspec.structs.replace(CFG, chosen_candidate="weak"))
    # chosen only from "weak", rejected from every other candidate
    assert all(r["provenance"]["candidates"] == ["weak", "strong"] for r in rows)
    assert ["e7-w-0", "e7-s-0"] in _ids(rows)


def test_clipped_score_is_used_when_configured():
    rows, _ = _build("dpo", msgspec.structs.replace(CFG, score="clipped"))
    e4 = next(r for r in rows if r["provenance"]["example_id"] == "e4")
    assert (e4["chosen_score"], e4["rejected_score"], e4["margin"]) == (0.9, 0.6, 0.3)


def test_reward_rows_carry_criteria():
    rows, stats = _build("reward")
    assert stats["written"] == 22 and stats["skipped_partially_judged"] == 1 and _balanced(stats)
    assert ["e8-s-0"] in _ids(rows) and ["e8-w-0"] in _ids(rows)  # pointwise: truncated rows keep their score
    assert rows[0] == {
        "prompt": E1_PROMPT,
        "response": [{"role": "assistant", "content": "Knead for ten minutes."}],
        "score": 0.9,
        "criteria": [
            {"criterion_id": "c1", "weight": 1.0, "verdict": "met", "explanation": "mentions kneading"},
            {"criterion_id": "c2", "weight": 0.5, "verdict": "not_met", "explanation": "no oven temperature"},
        ],
        "flags": _flags("Knead for ten minutes."),
        "provenance": {
            "example_id": "e1",
            "dataset": "ds",
            "response_ids": ["e1-s-0"],
            "judgment_ids": ["j1", "j2"],
            "models": ["openai/strong-model"],
            "candidates": ["strong"],
            "cache_keys": ["k-e1-s-0", "jk-e1-s-0"],
        },
    }


def test_hybrid_vellumforge_schema():
    rows, stats = _build("hybrid")
    assert _ids(rows) == _ids(_build("dpo")[0])
    assert stats == _build("dpo")[1]
    assert rows[0] == {
        "main_topic": "Cooking",
        "sub_topic": "Bread",
        "prompt": "A simple loaf.",
        "chosen": "Knead for ten minutes.",
        "rejected": "Just bake it.",
        "chosen_scores": {
            "c1": {"score": 1, "reasoning": "mentions kneading"},
            "c2": {"score": 0, "reasoning": "no oven temperature"},
        },
        "rejected_scores": {
            "c1": {"score": 0, "reasoning": "no kneading"},
            "c2": {"score": 1, "reasoning": "says bake"},
        },
        "chosen_score_total": 0.9,
        "rejected_score_total": 0.2,
        "preference_margin": 0.7,
        "chosen_flags": _flags("Knead for ten minutes."),
        "rejected_flags": _flags("Just bake it."),
        "provenance": E1_PAIR_PROVENANCE,
    }
    assert (rows[1]["main_topic"], rows[1]["sub_topic"], rows[1]["prompt"]) == ("ds", "", "Q? (e2)")
    assert rows[1]["chosen_scores"] == {"auto": {"score": 1, "reasoning": ""}}


def test_order_is_deterministic():
    shuffled = list(reversed(RESPONSES))
    for fmt in FORMATS:
        a = build_export(fmt, EXAMPLES, RESPONSES, JUDGMENTS, SCORES, STRONG_WEAK)
        b = build_export(fmt, EXAMPLES, shuffled, JUDGMENTS, SCORES, STRONG_WEAK)
        assert a == b


def test_unknown_format():
    with pytest.raises(InputError, match="unknown export format 'orpo'"):
        _build("orpo")


def test_write_export_is_atomic(tmp_path: Path):
    rows, _ = _build("dpo")
    path = write_export(tmp_path, "dpo", rows)
    assert path == tmp_path / "export" / "dpo.jsonl"
    before = path.read_bytes()
    assert [json.loads(line) for line in before.decode().splitlines()] == rows
    with pytest.raises(TypeError):
        write_export(tmp_path, "dpo", rows + [{"bad": object()}])
    assert path.read_bytes() == before  # the old file survives a failed write
    assert sorted(p.name for p in path.parent.iterdir()) == ["dpo.jsonl"]  # no temp file left behind


def test_write_export_has_the_mode_of_every_other_artifact(tmp_path: Path):
    from rubricrun.results import artifacts

    rows, _ = _build("dpo")
    path = write_export(tmp_path, "dpo", rows)
    artifacts.write_json(tmp_path / "summary.json", {})
    assert path.stat().st_mode & 0o777 == (tmp_path / "summary.json").stat().st_mode & 0o777
    assert path.stat().st_mode & 0o044  # readable by group/others under the usual umask, not 0600


# --- The files as `datasets` reads them -------------------------------------------------------------------------------


def _load(tmp_path: Path, fmt: str, cfg: ExportConfig = CFG):
    datasets = importlib.import_module("datasets")
    rows, _ = _build(fmt, cfg)
    path = write_export(tmp_path / "run", fmt, rows)
    ds = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "hf-cache"))
    return datasets, ds, rows


def _messages_feature(datasets):
    return datasets.List({"role": datasets.Value("string"), "content": datasets.Value("string")})


def _assert_messages(datasets, feature) -> None:
    assert isinstance(feature, datasets.List)
    assert dict(feature.feature) == dict(_messages_feature(datasets).feature)


def test_sft_file_is_trl_prompt_completion(tmp_path: Path):
    datasets, ds, rows = _load(tmp_path, "sft")
    assert ds.column_names == ["prompt", "completion", "messages", "score", "flags", "provenance"]
    for col in ("prompt", "completion", "messages"):  # conversational: lists of {role, content}
        _assert_messages(datasets, ds.features[col])
    assert ds.features["score"] == datasets.Value("float64")
    assert ds.to_list() == rows


def test_dpo_file_is_trl_preference(tmp_path: Path):
    datasets, ds, rows = _load(tmp_path, "dpo", STRONG_WEAK)
    assert ds.column_names == [
        "prompt",
        "chosen",
        "rejected",
        "chosen_score",
        "rejected_score",
        "margin",
        "chosen_flags",
        "rejected_flags",
        "provenance",
    ]
    for col in ("prompt", "chosen", "rejected"):
        _assert_messages(datasets, ds.features[col])
    assert ds.features["margin"] == datasets.Value("float64")
    assert ds.features["provenance"]["response_ids"] == datasets.List(datasets.Value("string"))
    assert ds.to_list() == rows


def test_kto_file_is_trl_unpaired_preference(tmp_path: Path):
    datasets, ds, rows = _load(tmp_path, "kto")
    assert ds.column_names == ["prompt", "completion", "label", "score", "flags", "provenance"]
    _assert_messages(datasets, ds.features["prompt"])
    _assert_messages(datasets, ds.features["completion"])
    assert ds.features["label"] == datasets.Value("bool")
    assert ds.to_list() == rows


def test_reward_file_loads(tmp_path: Path):
    datasets, ds, rows = _load(tmp_path, "reward")
    assert ds.column_names == ["prompt", "response", "score", "criteria", "flags", "provenance"]
    _assert_messages(datasets, ds.features["response"])
    crit = ds.features["criteria"]
    assert isinstance(crit, datasets.List) and set(crit.feature) == {"criterion_id", "weight", "verdict", "explanation"}
    assert ds.to_list() == rows


def test_hybrid_file_loads(tmp_path: Path):
    datasets, ds, rows = _load(tmp_path, "hybrid")
    assert ds.column_names[:10] == [
        "main_topic",
        "sub_topic",
        "prompt",
        "chosen",
        "rejected",
        "chosen_scores",
        "rejected_scores",
        "chosen_score_total",
        "rejected_score_total",
        "preference_margin",
    ]
    for col in ("prompt", "chosen", "rejected"):
        assert ds.features[col] == datasets.Value("string")
    # chosen_scores / rejected_scores are keyed by criterion id, so their keys differ from row to row.
    assert ds[0]["chosen_scores"]["c1"] == {"score": 1, "reasoning": "mentions kneading"}
    assert ds.to_list() == rows


# --------------------------------------------------------------------------------------------------
# Quality: refusals, partially judged responses, flags on every row, prompt-only rows

REFUSAL_EXAMPLES = [_ex("r1")]
REFUSAL_RESPONSES = [
    _resp("r1-s-0", "I'm sorry, I can't help with that.", refusal=True),  # scored best by a lenient rubric
    _resp("r1-w-0", "Here is how."),
    _resp("r1-w-1", "Meh."),
]
REFUSAL_SCORES = {"r1-s-0": _score(0.95), "r1-w-0": _score(0.8), "r1-w-1": _score(0.1)}


def _build_refusal(fmt: str):
    return build_export(fmt, REFUSAL_EXAMPLES, REFUSAL_RESPONSES, [], REFUSAL_SCORES, CFG)


def test_a_refusal_is_never_chosen_sft_or_kto_desirable():
    rows, stats = _build_refusal("sft")
    assert _ids(rows) == [["r1-w-0"]] and stats["skipped_refusal"] == 1 and _balanced(stats)
    rows, stats = _build_refusal("kto")
    assert {r["provenance"]["response_ids"][0]: r["label"] for r in rows} == {"r1-w-0": True, "r1-w-1": False}
    assert stats["skipped_refusal"] == 1
    for fmt in ("dpo", "hybrid"):
        rows, _ = _build_refusal(fmt)
        assert _ids(rows) == [["r1-w-0", "r1-w-1"]], fmt
    rows, _ = build_export(
        "dpo", REFUSAL_EXAMPLES, REFUSAL_RESPONSES, [], {**REFUSAL_SCORES, "r1-s-0": _score(0.0)}, CFG
    )
    assert _ids(rows) == [["r1-w-0", "r1-s-0"]]  # a refusal may be the rejected side


def test_rows_carry_the_quality_flags():
    rows, _ = _build_refusal("reward")
    flags = {r["provenance"]["response_ids"][0]: r["flags"] for r in rows}
    assert flags["r1-s-0"]["refusal"] is True and flags["r1-w-0"]["refusal"] is False
    assert flags["r1-w-0"] == _flags("Here is how.")
    (pair,) = _build_refusal("dpo")[0]
    assert pair["chosen_flags"] == _flags("Here is how.") and pair["rejected_flags"] == _flags("Meh.")


def test_a_partially_judged_response_is_never_a_training_row():
    # e1-s-2 scored best of e1 (0.95) but one of its judgments is "error".
    for fmt in ("sft", "dpo", "kto", "reward", "hybrid"):
        rows, stats = _build(fmt)
        assert not any("e1-s-2" in ids for ids in _ids(rows)), fmt
        key = "responses_partially_judged" if fmt in ("dpo", "hybrid") else "skipped_partially_judged"
        assert stats[key] == 1, fmt


def test_prompt_rows_for_grpo_and_online_dpo(tmp_path: Path):
    rows, stats = _build("prompts")
    assert stats == {"considered": len(EXAMPLES), "written": len(EXAMPLES)}
    assert [r["provenance"]["example_id"] for r in rows] == [ex.id for ex in EXAMPLES]
    assert rows[0] == {"prompt": E1_PROMPT, "provenance": {"example_id": "e1", "dataset": "ds"}}
    datasets, ds, rows = _load(tmp_path, "prompts")
    assert ds.column_names == ["prompt", "provenance"]
    _assert_messages(datasets, ds.features["prompt"])  # conversational: what GRPOTrainer's prompt column holds
    assert ds.to_list() == rows


def test_hybrid_prompt_text_reads_content_parts() -> None:
    """A prompt given as content parts becomes its text in the string-valued hybrid rows (it was the parts'
    Python repr)."""
    from rubricrun.results.export import _prompt_text
    from rubricrun.types import Example

    parts = [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
    ]
    ex = Example(id="e", dataset="d", source="d:1", messages=({"role": "user", "content": parts},))
    assert _prompt_text(ex) == "What is in this picture?\n[image: https://x/y.png]"
