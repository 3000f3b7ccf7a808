"""Run artifacts: written atomically (temp file + rename), so a crash never leaves a half-written file, under a
per-run lock so two processes never share a run id; and a finished run folder read back (`load_run`)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import IO, Any

import yaml

from .. import codec
from ..errors import InputError, RubricrunError, RunLockedError
from ..types import Criterion, Example, Judgment, PairJudgment, Response

_UMASK = os.umask(0)  # the process's umask: read by setting it, then put back
os.umask(_UMASK)


def _atomic_write(path: Path, write: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise RubricrunError(f"{path}: cannot write ({exc.strerror or exc})") from None
        raise


def write_jsonl(path: Path, rows: Iterable[Any]) -> None:
    """Rows are row types (types.py) or dicts, written by the codec, a thousand at a time."""

    def write(fh: IO[bytes]) -> None:
        it = iter(rows)
        while batch := list(islice(it, 1000)):
            fh.write(codec.lines(batch))

    _atomic_write(path, write)


@dataclass(frozen=True, slots=True)
class Finished:
    """One example the run finished: its rows, and their lines as RowFiles wrote them to examples.jsonl,
    responses.jsonl and judgments.jsonl (its judgments, then its pairwise rows: two parts of one write, kept apart
    because each reads back as its own type)."""

    example: Example
    responses: list[Response]
    judgments: list[Judgment]
    pairs: list[PairJudgment]
    lines: tuple[bytes, bytes, bytes, bytes]  # example, responses, judgments, pairwise rows


class RowFiles:
    """A run's row files as it goes (the graph's sink): examples.jsonl when an example is admitted; responses.jsonl
    and judgments.jsonl when its rows are done; then `take` gets it as `Finished`, with the lines just written.
    Examples finish in the order they were admitted (the graph's reorder buffer). The files start afresh; each write
    appends whole lines unbuffered, so after kill -9 a file holds whole lines (what a reader needs), none held back."""

    def __init__(self, run_dir: Path, take: Callable[[Finished], None]) -> None:
        self.take = take
        self.admitted: deque[bytes] = deque()  # the examples.jsonl lines of the examples admitted, not yet finished
        self.files: dict[str, IO[bytes]] = {}
        run_dir.mkdir(parents=True, exist_ok=True)
        for name in ("examples", "responses", "judgments"):
            try:
                self.files[name] = open(run_dir / f"{name}.jsonl", "wb", buffering=0)  # noqa: SIM115 - see close()
            except OSError as exc:
                raise RubricrunError(f"{run_dir / name}.jsonl: cannot write ({exc.strerror or exc})") from None

    def _append(self, name: str, lines: bytes) -> bytes:
        fh, data = self.files[name], memoryview(lines)
        try:
            while data:
                data = data[fh.write(data) or 0 :]
        except OSError as exc:
            raise RubricrunError(f"{fh.name}: cannot write ({exc.strerror or exc})") from None
        return lines

    def admit(self, example: Example) -> None:
        self.admitted.append(self._append("examples", codec.lines([example])))

    def finish(
        self, example: Example, responses: list[Response], judgments: list[Judgment], pairs: list[PairJudgment]
    ) -> None:
        r = self._append("responses", codec.lines(responses))
        j, p = codec.lines(judgments), codec.lines(pairs)
        self._append("judgments", j + p)
        self.take(Finished(example, responses, judgments, pairs, (self.admitted.popleft(), r, j, p)))

    def close(self) -> None:
        for f in self.files.values():
            f.close()


def write_json(path: Path, obj: Any) -> None:
    """A JSON file, indented (a row type is written as its data, codec.to_data)."""
    _atomic_write(path, lambda fh: fh.write(codec.pretty(obj)))


def write_text(path: Path, text: str) -> None:
    _atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))


class RunLock:
    """An exclusive flock on <run_dir>/.lock, released by the OS even on kill -9."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / ".lock"
        self._fh: IO[str] | None = None

    def acquire(self) -> None:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip()
            fh.close()
            raise RunLockedError(
                f"run directory {self.path.parent} is in use by another rubricrun process ({holder or 'unknown pid'}); "
                "wait for it to finish or choose another --run-id"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}\n")
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh:
            self._fh.close()
            self._fh = None


RUN_FILES = ("summary.json", "examples.jsonl", "responses.jsonl", "judgments.jsonl")


@dataclass(frozen=True)
class RunData:
    """What a finished run folder holds that its readers need (compare, the report, the labelling sheet)."""

    path: Path
    summary: dict[str, Any]
    examples: list[Example]
    responses: list[Response]
    judgments: list[Judgment]  # the criterion verdicts (not the pairwise rows)
    default_rubric: tuple[Criterion, ...]
    bootstrap_samples: int
    seed: int


def _read(path: Path, parse: Callable[[str], Any], missing: str = "missing: not a finished run folder") -> Any:
    try:
        return parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(missing, file=str(path)) from None
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read: {exc}", file=str(path)) from None


def _rows(path: Path, cls: type, keep: Callable[[dict], bool] = lambda row: True) -> list[Any]:
    """A row file's rows of `cls`; InputError naming the file when it is missing or holds something else."""
    needs = f"missing: not a finished run folder (it needs {', '.join(RUN_FILES)})"
    rows = _read(path, lambda text: [json.loads(line) for line in text.splitlines() if line.strip()], needs)
    if not all(isinstance(r, dict) for r in rows):
        raise InputError("every line must be a JSON object", file=str(path))
    try:
        return [codec.convert(r, cls) for r in rows if keep(r)]
    except codec.DecodeError as exc:
        raise InputError(f"not a rubricrun {cls.__name__.lower()} row: {exc}", file=str(path)) from None


def load_run(path: str | Path) -> RunData:
    """A finished run folder read back; InputError naming the file when it is not one. Its config.yaml is optional
    (the default rubric's texts and weights, the bootstrap settings)."""
    d = Path(path)
    if not d.is_dir():
        raise InputError("not a run folder (no such directory)", file=str(d))
    summary = _read(d / "summary.json", json.loads)
    if not isinstance(summary, dict) or not isinstance(summary.get("datasets"), dict):
        raise InputError("has no `datasets`: not written by this version of rubricrun", file=str(d / "summary.json"))
    cfg = _read(d / "config.yaml", yaml.safe_load) if (d / "config.yaml").exists() else {}
    run = cfg.get("run") if isinstance(cfg, dict) and isinstance(cfg.get("run"), dict) else {}
    judging = cfg.get("judging") if isinstance(cfg, dict) and isinstance(cfg.get("judging"), dict) else {}
    listed = judging.get("default_rubric") if isinstance(judging.get("default_rubric"), list) else []
    # An unnamed criterion is `d<i>`, as judging/rubric.py names it.
    named = [{**c, "id": c.get("id") or f"d{i + 1}"} for i, c in enumerate(listed) if isinstance(c, dict)]
    try:
        rubric = tuple(codec.convert(c, Criterion) for c in named)
    except codec.DecodeError as exc:
        raise InputError(f"not a rubricrun criterion row: {exc}", file=str(d / "config.yaml")) from None
    return RunData(
        path=d,
        summary=summary,
        examples=_rows(d / "examples.jsonl", Example),
        responses=_rows(d / "responses.jsonl", Response),
        judgments=_rows(d / "judgments.jsonl", Judgment, lambda row: row.get("kind") != "pairwise"),
        default_rubric=rubric,
        bootstrap_samples=int(run.get("bootstrap_samples") or 1000),
        seed=int(run.get("seed") or 0),
    )
