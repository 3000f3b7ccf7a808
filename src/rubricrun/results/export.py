"""Judged run data -> training rows (SFT, DPO, KTO, pointwise reward, VellumForge2 "hybrid", prompt-only), written
as JSONL under the run's export/ folder, one example at a time. Column forms follow TRL's conversational dataset
formats (https://huggingface.co/docs/trl/dataset_formats); docs/export.md lists each format's columns and the
selection rules kept here (which responses count, how pairs are picked, thresholds, order, counts).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Config, ExportConfig
from ..errors import InputError
from ..judging.answers import quality_flags
from ..judging.prompt import content_text
from ..types import Example, Judgment, Response, Score
from . import artifacts

FORMATS = ("sft", "dpo", "kto", "reward", "hybrid", "prompts")
log = logging.getLogger("rubricrun")
_MARGIN_DIGITS = 9  # margins are rounded so that 0.7 - 0.6 meets a min_margin of 0.1
UNFIT = ("truncated", "refusal")  # flags that keep a response from being a chosen side, an SFT row or a KTO desirable


def _at_least(score: float, threshold: float) -> bool:
    """score >= threshold, blind to float noise below 1e-9 (a score of 0.6999999999999999 meets 0.7)."""
    return round(score - threshold, _MARGIN_DIGITS) >= 0


@dataclass(frozen=True)
class _Scored:
    response: Response
    score: float | None  # None only when pairing by candidate in a run without scores

    @property
    def text(self) -> str:
        return self.response.text or ""

    @property
    def unfit(self) -> str | None:
        """Why this response may not be a chosen side, an SFT row or a KTO desirable row (None: it may)."""
        return next((f for f in UNFIT if self.response.flags.get(f)), None)


class _Rows:
    """One example's rows, indexed: its turn-1 responses (sorted by id), judgments by response, scores."""

    def __init__(
        self, responses: Sequence[Response], judgments: Sequence[Judgment], scores: Mapping[str, Score]
    ) -> None:
        # Turn 1 only: a later turn answers its candidate's own conversation, so it shares no prompt with the others.
        self.responses = sorted((r for r in responses if r.turn == 1), key=lambda r: r.id)
        self.judgments: dict[str, list[Judgment]] = {}
        for j in judgments:
            self.judgments.setdefault(j.response_id, []).append(j)
        self.scores = scores

    def usable(self, r: Response, field: str, need_score: bool = True) -> tuple[str | None, _Scored | None]:
        """(why the response cannot be exported at all, None) or (None, the response with its score). A response
        with any judgment in error is partially judged: its score rests on part of its rubric only. Without
        `need_score` (pairs by candidate) an unscored response is usable, with score None."""
        if r.status != "ok":
            return "error", None
        if r.text is None or not r.text.strip():
            return "empty", None
        s = self.scores.get(r.id)
        value = None if s is None else getattr(s, field)
        if value is None and need_score:
            return "unscored", None
        if any(j.verdict == "error" for j in self.judgments.get(r.id, [])):
            return "partially_judged", None
        return None, _Scored(r, None if value is None else float(value))


_EXCLUSIONS = ("error", "empty", "unscored", "partially_judged")


def _prompt(ex: Example) -> list[dict[str, Any]]:
    return [dict(m) for m in ex.messages]


def _assistant(text: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": text}]


def _flags(r: Response) -> dict[str, Any]:
    """The response's quality flags, every key present (rows stored before a flag existed get it computed)."""
    return {**quality_flags(r.text or "", r.finish_reason, r.usage.completion_tokens), **r.flags}


def _prompt_text(ex: Example) -> str:
    """The last user turn as one string (hybrid rows): content parts become their text, images `[image: url]`."""
    for m in reversed(ex.messages):
        if m.get("role") == "user":
            return content_text(m.get("content"))
    return content_text(ex.messages[-1].get("content")) if ex.messages else ""


def _provenance(ex: Example, picked: Sequence[Response], judgments: Mapping[str, list[Judgment]]) -> dict[str, Any]:
    js = [j for r in picked for j in judgments.get(r.id, [])]
    keys = [k for k in dict.fromkeys([*(r.key for r in picked), *(j.key for j in js)]) if k]
    return {
        "example_id": ex.id,
        "dataset": ex.dataset,
        "response_ids": [r.id for r in picked],
        "judgment_ids": [j.id for j in js],
        "models": [r.model for r in picked],
        "candidates": [r.candidate for r in picked],
        "cache_keys": keys,
    }


def _criteria_scores(js: Sequence[Judgment]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for j in js:
        if j.verdict == "error" or j.criterion_id in out:
            continue
        out[j.criterion_id] = {"score": 1 if j.verdict == "met" else 0, "reasoning": j.explanation or ""}
    return out


def _pools(scored: Sequence[_Scored], cfg: ExportConfig, by_candidate: bool) -> tuple[list[_Scored], list[_Scored]]:
    strong, weak = cfg.chosen_candidate, cfg.rejected_candidate

    def on_side(s: _Scored, own: str | None, other: str | None) -> bool:
        """A side holds its own candidate's responses where it names one, else every one but the other side's."""
        return s.response.candidate == own if own is not None else s.response.candidate != other

    chosen = [s for s in scored if not s.unfit and on_side(s, strong, weak)]
    rejected = [s for s in scored if on_side(s, weak, strong)]
    if not by_candidate:  # (by candidate: in response id order, scores optional)
        chosen.sort(key=lambda s: (-s.score, s.response.id))
        rejected.sort(key=lambda s: (s.score, s.response.id))
    return chosen, rejected


def _pick_pair(
    scored: Sequence[_Scored], cfg: ExportConfig, by_candidate: bool
) -> tuple[str, tuple[_Scored, _Scored, float | None] | None]:
    """(reason, pair): reason is "ok" with a pair, else why the example gives no pair. The pair with the best
    margin; by candidate, the chosen candidate's first fit response against the other's first with another text."""
    chosen, rejected = _pools(scored, cfg, by_candidate)
    if not chosen or not rejected or not any(c.response.id != r.response.id for c in chosen for r in rejected):
        return "too_few", None
    best: tuple[_Scored, _Scored, float | None] | None = None
    for c in chosen:
        for r in rejected:
            if c.response.id == r.response.id or c.text.strip() == r.text.strip():
                continue
            margin = None if c.score is None or r.score is None else round(c.score - r.score, _MARGIN_DIGITS)
            if by_candidate:
                return "ok", (c, r, margin)
            if best is None or margin > best[2]:  # type: ignore[operator]
                best = (c, r, margin)
    if best is None:
        return "identical", None
    margin = best[2]
    if margin < 0:  # type: ignore[operator]
        return "inverted", None
    if margin == 0:
        return "tie", None
    if not _at_least(margin, cfg.min_margin):  # type: ignore[arg-type]
        return "low_margin", None
    return "ok", best


_PAIR_SKIPS = ("too_few", "identical", "tie", "low_margin", "inverted")


def empty_counts(fmt: str) -> dict[str, int]:
    """The counts `fmt` reports, each 0: a run's are the sums of build_export's over its examples."""
    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r} (expected one of {', '.join(FORMATS)})", key="export.formats")
    counts = {"considered": 0, "written": 0}
    if fmt in ("dpo", "hybrid"):
        counts.update({f"skipped_{reason}": 0 for reason in _PAIR_SKIPS})
        counts.update({f"responses_{reason}": 0 for reason in _EXCLUSIONS})
        counts["responses_no_example"] = 0  # (a run's responses always have their example)
    elif fmt != "prompts":
        counts["skipped_no_example"] = 0
        counts.update({f"skipped_{reason}": 0 for reason in _EXCLUSIONS})
        if fmt in ("sft", "kto"):
            counts.update({f"skipped_{flag}": 0 for flag in UNFIT})
        if fmt == "sft":
            counts["skipped_below_threshold"] = 0
    return counts


def build_export(
    fmt: str,
    ex: Example,
    responses: Sequence[Response],
    judgments: Sequence[Judgment],
    scores: Mapping[str, Score],
    cfg: ExportConfig,
    *,
    by_candidate: bool = False,
    unjudged: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """One example's training rows for one format and the counts of what was considered, written and skipped (and
    why). `by_candidate`: dpo/hybrid pair chosen_candidate's responses with rejected_candidate's, scores not needed.
    `unjudged` (a generation run): sft takes every fit response, its threshold applied only where a judge-free
    score exists (an MC or QA answer matched)."""
    counts = empty_counts(fmt)
    if fmt == "prompts":  # the conversational `prompt` column TRL's GRPO and online-DPO trainers read
        counts.update(considered=1, written=1)
        return [{"prompt": _prompt(ex), "provenance": {"example_id": ex.id, "dataset": ex.dataset}}], counts
    rows = _Rows(responses, judgments, scores)
    if fmt in ("dpo", "hybrid"):
        counts["considered"] = 1
        return _pair(fmt, ex, rows, cfg, by_candidate, counts), counts
    counts["considered"] = len(responses)
    return _pointwise(fmt, ex, rows, cfg, counts, need_score=not (unjudged and fmt == "sft")), counts


def _pointwise(
    fmt: str, ex: Example, rows: _Rows, cfg: ExportConfig, counts: dict[str, int], *, need_score: bool
) -> list[dict[str, Any]]:
    """sft, kto, reward: one row per usable response (without `need_score`, unscored ones too)."""
    out = []
    for r in rows.responses:
        reason, scored = rows.usable(r, cfg.score, need_score=need_score)
        row = None
        if scored is not None:
            reason, row = _pointwise_row(fmt, ex, scored, cfg, rows.judgments)
        if row is None:
            counts[f"skipped_{reason}"] += 1
            continue
        row["flags"] = _flags(r)
        row["provenance"] = _provenance(ex, [r], rows.judgments)
        out.append(row)
    counts["written"] = len(out)
    return out


def _pointwise_row(
    fmt: str, ex: Example, s: _Scored, cfg: ExportConfig, judgments: Mapping[str, list[Judgment]]
) -> tuple[str | None, dict[str, Any] | None]:
    """(None, row), or (why it is skipped, None)."""
    prompt, completion = _prompt(ex), _assistant(s.text)
    if fmt == "sft":
        if s.unfit:
            return s.unfit, None
        if s.score is not None and not _at_least(s.score, cfg.sft_threshold):
            return "below_threshold", None
        return None, {"prompt": prompt, "completion": completion, "messages": prompt + completion, "score": s.score}
    if fmt == "kto":
        label = _at_least(s.score, cfg.kto_threshold)
        if label and s.unfit:
            return s.unfit, None
        return None, {"prompt": prompt, "completion": completion, "label": label, "score": s.score}
    criteria = [
        {"criterion_id": j.criterion_id, "weight": float(j.weight), "verdict": j.verdict, "explanation": j.explanation}
        for j in judgments.get(s.response.id, [])
    ]
    return None, {"prompt": prompt, "response": completion, "score": s.score, "criteria": criteria}


def _pair(
    fmt: str, ex: Example, rows: _Rows, cfg: ExportConfig, by_candidate: bool, counts: dict[str, int]
) -> list[dict[str, Any]]:
    """dpo, hybrid: the example's one pair, if it has one."""
    scored: list[_Scored] = []
    for r in rows.responses:
        reason, s = rows.usable(r, cfg.score, need_score=not by_candidate)
        if s is None:
            counts[f"responses_{reason}"] += 1
        else:
            scored.append(s)
    reason, pair = _pick_pair(scored, cfg, by_candidate)
    if pair is None:
        counts[f"skipped_{reason}"] += 1
        return []
    row = _pair_row(fmt, ex, pair, rows.judgments)
    row["chosen_flags"], row["rejected_flags"] = _flags(pair[0].response), _flags(pair[1].response)
    row["provenance"] = _provenance(ex, [pair[0].response, pair[1].response], rows.judgments)
    counts["written"] = 1
    return [row]


def _pair_row(
    fmt: str, ex: Example, pair: tuple[_Scored, _Scored, float | None], judgments: Mapping[str, list[Judgment]]
) -> dict[str, Any]:
    c, rj, margin = pair
    if fmt == "dpo":
        return {
            "prompt": _prompt(ex),
            "chosen": _assistant(c.text),
            "rejected": _assistant(rj.text),
            "chosen_score": c.score,
            "rejected_score": rj.score,
            "margin": margin,
        }
    return {
        "main_topic": str(ex.metadata.get("main_topic") or ex.dataset),
        "sub_topic": str(ex.metadata.get("sub_topic") or ""),
        "prompt": _prompt_text(ex),
        "chosen": c.text,
        "rejected": rj.text,
        "chosen_scores": _criteria_scores(judgments.get(c.response.id, [])),
        "rejected_scores": _criteria_scores(judgments.get(rj.response.id, [])),
        "chosen_score_total": c.score,
        "rejected_score_total": rj.score,
        "preference_margin": margin,
    }


def write_export(run_dir: Path, fmt: str, rows: Iterable[dict[str, Any]]) -> Path:
    """run_dir/export/<fmt>.jsonl, by the atomic artifact writer (the same file mode as the run's other files)."""
    path = Path(run_dir) / "export" / f"{fmt}.jsonl"
    artifacts.write_jsonl(path, rows)
    return path


Batch = tuple[Example, Sequence[Response], Sequence[Judgment], Mapping[str, Score]]  # one example's rows, scored


def export_batches(
    cfg: Config, run_dir: Path, formats: Sequence[str], batches: Callable[[], Iterable[Batch]]
) -> dict[str, Any]:
    """Every requested format written under run_dir/export/, one example at a time; returns each format's counts.
    `batches()` yields each example with its own rows and scores, in input order, and is called once per format."""
    ecfg = cfg.export or ExportConfig()
    by_candidate = ecfg.pairs_by_candidate(bool(cfg.judge_pool))
    unjudged = not cfg.judge_pool
    out: dict[str, Any] = {}
    for fmt in formats:
        counts = empty_counts(fmt)

        def rows(fmt: str = fmt, counts: dict[str, int] = counts) -> Iterator[dict[str, Any]]:
            for ex, rs, js, scores in batches():
                got, part = build_export(fmt, ex, rs, js, scores, ecfg, by_candidate=by_candidate, unjudged=unjudged)
                for k, v in part.items():
                    counts[k] += v
                yield from got

        path = write_export(run_dir, fmt, rows())
        log.info("export %s: %d rows -> %s", fmt, counts["written"], path)
        out[fmt] = counts
    return out
