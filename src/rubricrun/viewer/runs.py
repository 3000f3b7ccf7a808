"""The run folders under OUTPUTS_DIR: which folders are runs, whether each is still running, and its facts.

A run folder holds `config.yaml` (written first), the row files, and at the end `summary.json`. A run holds an
exclusive lock on `.lock` while it runs and writes its pid there when it starts (results/artifacts.RunLock), so:
a summary written after the lock's last start is the run's own (its `status`: complete, interrupted,
stopped_on_budget); else the run is `running` while that pid is alive, and `unfinished` when it is not (killed, or
the machine went down). The viewer never takes the lock: a run starting at that moment would find it taken.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

MARKERS = ("config.yaml", "summary.json", "responses.jsonl")
_cache: dict[Path, tuple[int, dict[str, Any] | None]] = {}
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class RunInfo:
    """What the runs page shows of one run folder."""

    run_id: str
    path: Path
    status: str
    started: float
    datasets: tuple[str, ...]
    candidates: tuple[str, ...]
    judges: tuple[str, ...]
    summary: dict[str, Any] | None  # summary.json, when it belongs to the run's last start
    config: dict[str, Any]

    @property
    def calls(self) -> dict[str, Any] | None:
        calls = (self.summary or {}).get("calls")
        return calls if isinstance(calls, dict) else None

    @property
    def cost_usd(self) -> float | None:
        costs = (self.summary or {}).get("costs")
        value = costs.get("total_usd") if isinstance(costs, dict) else None
        return value if isinstance(value, (int, float)) else None

    def row(self) -> dict[str, Any]:
        """The run as /api/runs lists it."""
        return {
            "run_id": self.run_id,
            "status": self.status,
            "started": self.started,
            "datasets": list(self.datasets),
            "candidates": list(self.candidates),
            "judges": list(self.judges),
            "calls": self.calls,
            "cost_usd": self.cost_usd,
        }


def is_run_folder(path: Path) -> bool:
    return path.is_dir() and not path.name.startswith(".") and any((path / m).is_file() for m in MARKERS)


def list_runs(outputs: Path) -> list[RunInfo]:
    """Every run folder directly under `outputs`, the last started first."""
    try:
        found = [run_info(p) for p in outputs.iterdir() if is_run_folder(p)]
    except FileNotFoundError:
        return []
    return sorted(found, key=lambda r: (r.started, r.run_id), reverse=True)


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def _alive(pid: int) -> bool:
    if pid <= 0 or pid == os.getpid():  # (a run in this very process has returned before the viewer asks)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _pid(lock: Path) -> int:
    try:
        text = lock.read_text(encoding="utf-8", errors="replace").split()
    except OSError:
        return 0
    return int(text[1]) if len(text) == 2 and text[0] == "pid" and text[1].isdigit() else 0


def _summary(path: Path) -> dict[str, Any] | None:
    """summary.json when it was written after the run's last start (else it is an earlier start's)."""
    lock, done = _mtime(path / ".lock"), _mtime(path / "summary.json")
    if done is None or (lock is not None and done < lock):
        return None
    return _cached(path / "summary.json", done, json.loads)


def status_of(path: Path, summary: dict[str, Any] | None) -> str:
    if summary is not None:
        return str(summary.get("status") or "complete")
    return "running" if _alive(_pid(path / ".lock")) else "unfinished"


def read_config(path: Path) -> dict[str, Any]:
    """A run's resolved config.yaml ({} when missing or unreadable)."""
    mtime = _mtime(path / "config.yaml")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    if mtime is None:
        return {}
    return _cached(path / "config.yaml", mtime, lambda text: yaml.load(text, Loader=loader)) or {}  # noqa: S506


def _cached(path: Path, mtime: int, parse: Any) -> dict[str, Any] | None:
    """A file's parsed mapping (None when unreadable or not a mapping), kept while its mtime stays: the runs page
    reads every run's summary and config at each visit."""
    with _cache_lock:
        got = _cache.get(path)
        if got is not None and got[0] == mtime:
            return got[1]
    try:
        data = parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError):
        data = None
    data = data if isinstance(data, dict) else None
    with _cache_lock:
        _cache[path] = (mtime, data)
    return data


def _names(entries: Any) -> tuple[str, ...]:
    if not isinstance(entries, list):
        return ()
    return tuple(str(e["name"]) for e in entries if isinstance(e, dict) and e.get("name"))


def run_info(path: Path) -> RunInfo:
    summary = _summary(path)
    cfg = read_config(path)
    started = _mtime(path / ".lock") or _mtime(path / "config.yaml") or _mtime(path) or 0
    datasets = tuple(summary["datasets"]) if summary and isinstance(summary.get("datasets"), dict) else ()
    return RunInfo(
        run_id=path.name,
        path=path,
        status=status_of(path, summary),
        started=started / 1e9,
        datasets=datasets or _names(cfg.get("datasets")),
        candidates=_names(cfg.get("candidates")),
        judges=_names(cfg.get("judges")),
        summary=summary,
        config=cfg,
    )


def default_rubric(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """The config's `judging.default_rubric` criteria, an unnamed one called `d<i>` (as judging/rubric.py names
    it; results/compare.py reads it the same way): what examples without a rubric of their own were judged on."""
    judging = cfg.get("judging") if isinstance(cfg.get("judging"), dict) else {}
    rubric = judging.get("default_rubric") if isinstance(judging.get("default_rubric"), list) else []
    return [{**c, "id": c.get("id") or f"d{i + 1}"} for i, c in enumerate(rubric) if isinstance(c, dict)]
