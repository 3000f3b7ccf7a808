"""Command line: `python run.py --config config.yaml [--run-id ID] [--max-examples N] [--validate]`,
`python run.py --compare RUN_A RUN_B [--out DIR]` (or `rubricrun compare RUN_A RUN_B [--out DIR]`),
`python run.py --label-sheet RUN [--sheet-size N]` (or `rubricrun label-sheet RUN [--size N]`), and
`python run.py --view [OUTPUTS_DIR] [--port N] [--host H]` (the viewer, src/rubricrun/viewer/).

Exit codes: 0 done, 1 a run-time failure (cache or disk, or every candidate call failed), 2 bad input (config,
data, CLI) or the run id in use, 3 stopped on budget, 130 interrupted (Ctrl+C), 143 stopped by SIGTERM.
Bad input is one line on stderr naming the file, line and key; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import InputError, RubricrunError, RunLockedError
from .providers import redact

if TYPE_CHECKING:
    from .config import Config
    from .engine.runner import Extras

VIEW_PORT = 8765

log = logging.getLogger("rubricrun")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"error: command line: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="rubricrun" if os.path.basename(sys.argv[0]) == "rubricrun" else "run.py",
        description="Run candidate models over datasets, judge each response criterion by criterion, "
        "write examples/responses/judgments/trace/summary under outputs/<run_id>/.",
    )
    p.add_argument(
        "--config", help="YAML config (see config.example.yaml); required unless --compare, --label-sheet or --view"
    )
    p.add_argument("--run-id", help="run folder name under run.output_dir; reuse one to resume or rerun from cache")
    p.add_argument("--max-examples", type=int, help="use at most N examples from each dataset")
    p.add_argument("--validate", action="store_true", help="check config and data, count the calls, call nothing")
    p.add_argument(
        "--export",
        action="append",
        default=[],
        metavar="FORMAT",
        help="also write training data: sft, dpo, kto, reward, hybrid, prompts (repeatable or comma-separated); "
        "with the --run-id of a finished run everything comes from the cache",
    )
    p.add_argument("--push-to-hub", metavar="USER/NAME", help="upload the export, config and a dataset card (HF_TOKEN)")
    p.add_argument("--dry-run", action="store_true", help="with --push-to-hub: list what would be uploaded")
    p.add_argument("--private", action="store_true", help="with --push-to-hub: create the dataset repo private")
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("RUN_A", "RUN_B"),
        help="compare two finished run folders (score change with paired CIs, flipped verdicts); no --config",
    )
    p.add_argument("--out", help="with --compare: the folder for compare.json and compare.html")
    p.add_argument(
        "--label-sheet",
        metavar="RUN",
        help="write label_sheet.jsonl and .csv into a finished run folder: a random sample of its responses, per "
        "criterion, for people to label (docs/statistics.md); no --config",
    )
    p.add_argument("--sheet-size", "--size", type=int, help="with --label-sheet: examples per dataset (50)")
    p.add_argument(
        "--view",
        nargs="?",
        const="outputs",
        metavar="OUTPUTS_DIR",
        help="browse the run folders under OUTPUTS_DIR (default outputs/) in a local web app: every row, search, "
        "run-to-run flips, human labels; no --config",
    )
    p.add_argument(
        "--port", type=int, default=VIEW_PORT, help=f"with --view: the port (default {VIEW_PORT}; 0: any free one)"
    )
    p.add_argument("--host", default="127.0.0.1", help="with --view: the address to listen on (default 127.0.0.1)")
    return p


# The modes besides a run, each with the flags it has no use for (the first one given is named). A flag is given
# when its value differs from its default (an empty string too).
_TAKES_NO = {
    "--view": "--config --compare --label-sheet --run-id --export --validate --out --max-examples".split(),
    "--compare": "--config --run-id --export --label-sheet".split(),
    "--label-sheet": "--config --run-id --export --out".split(),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """A run (`--config`), a comparison (`--compare A B`, or the `compare A B` subcommand), a labelling sheet
    (`--label-sheet RUN`, or `label-sheet RUN`), or the viewer (`--view [OUTPUTS_DIR]`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in (["compare"], ["label-sheet"]):  # the subcommands are their flags: `compare A B` is `--compare A B`
        argv = [f"--{argv[0]}", *argv[1:]]
    parser = build_parser()
    args = parser.parse_args(argv)
    given = {f"--{k.replace('_', '-')}" for k, v in vars(args).items() if v != parser.get_default(k)}
    mode = next((m for m in _TAKES_NO if m in given), None)
    for flag in ("--port", "--host"):
        if flag in given and mode != "--view":
            parser.error(f"{flag} goes with --view")
    if mode is not None and (others := [f for f in _TAKES_NO[mode] if f in given]):
        parser.error(f"{mode} takes no {others[0]}")
    if mode == "--view" and not 0 <= args.port <= 65535:
        parser.error(f"--port {args.port}: use 0 to 65535")
    if mode is None and not args.config:
        parser.error(
            "the following arguments are required: --config (or --compare RUN_A RUN_B, --label-sheet RUN, or --view)"
        )
    for flag, home in (("--out", "--compare"), ("--sheet-size", "--label-sheet")):
        if flag in given and mode != home:
            parser.error(f"{flag} goes with {home}")
    return args


# Characters a terminal acts on: C0 controls but newline and tab, DEL, C1 controls (CSI is U+009B), and the
# bidirectional overrides and isolates that reorder what is shown (a name can hide what follows it).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, *, one_line: bool = False) -> str:
    """`text` as the console may show it: every control character written as its escape (`\\x1b`), never sent
    raw, so a name or a row cannot move the cursor, recolour the screen or fake a log line (with `one_line`, a
    newline is escaped too)."""
    if one_line:
        text = text.replace("\n", "\\n").replace("\r", "\\r")
    return _CONTROL.sub(lambda m: repr(m.group(0))[1:-1], text)


class SafeFormatter(logging.Formatter):
    """A log line without secrets (redact.py) or raw control characters (the console, run.log)."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(redact.redact(super().format(record)))


class JsonLogFormatter(logging.Formatter):
    """One JSON object per record (run.log.jsonl), for log collectors: time (UTC, ISO 8601), level, message,
    thread, and the traceback when there is one (secrets and control characters taken out, as SafeFormatter)."""

    def format(self, record: logging.LogRecord) -> str:
        row = {
            "time": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "message": printable(redact.redact(record.getMessage())),
            "logger": record.name,
            "thread": record.threadName,
        }
        if record.exc_info:
            row["exc_info"] = printable(redact.redact(self.formatException(record.exc_info)))
        return json.dumps(row, ensure_ascii=False)


def say(text: str) -> None:
    """One line on stderr, as the console may show it (the exit's error line)."""
    print(printable(redact.redact(text), one_line=True), file=sys.stderr)


def setup_logging(run_dir: Path | None, quiet: bool = False) -> None:
    """Console log on stderr; with a run folder also run.log (the console text) and run.log.jsonl (JSON)."""
    root = logging.getLogger("rubricrun")
    root.setLevel(logging.INFO)
    root.handlers.clear()
    root.propagate = False
    fmt = SafeFormatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S")
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(fmt)
    console.setLevel(logging.WARNING if quiet else logging.INFO)
    root.addHandler(console)
    if run_dir is not None:
        from concurrent_log_handler import ConcurrentRotatingFileHandler

        run_dir.mkdir(parents=True, exist_ok=True)
        mask = os.umask(0)
        os.umask(mask)
        for name, formatter in (
            ("run.log", SafeFormatter("%(asctime)s %(levelname)s %(threadName)s %(message)s")),
            ("run.log.jsonl", JsonLogFormatter()),
        ):
            # chmod: its lock files (.__run.lock) are created with os.open's default 0o777 (0755 under umask 022)
            fh = ConcurrentRotatingFileHandler(
                str(run_dir / name), maxBytes=20 * 2**20, backupCount=3, chmod=0o666 & ~mask
            )
            fh.setFormatter(formatter)
            root.addHandler(fh)
    # LiteLLM logs every failed attempt at ERROR on its own; our trace and log already say it once.
    logging.getLogger("LiteLLM").setLevel(logging.CRITICAL)
    logging.getLogger("httpx").setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from .engine.stop import stop_exit_code, stopped_by, workers_alive

    try:
        code = _main(args)
    except (InputError, RunLockedError) as exc:
        say(f"error: {exc}")
        code = 2
    except RubricrunError as exc:
        say(f"error: {exc}")
        code = 1
    except OSError as exc:  # an unwritable output folder, a full disk
        where = f" ({exc.filename})" if exc.filename else ""
        say(f"error: {exc.strerror or exc}{where}")
        code = 1
    except KeyboardInterrupt:
        print(f"interrupted ({stopped_by() or 'SIGINT'})", file=sys.stderr)
        code = stop_exit_code()
    if code != 0 and workers_alive():
        # Abandon calls still in flight: the pool threads would otherwise hold the exit until their timeouts.
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)
    return code


def _extras(args: argparse.Namespace, cfg: Config) -> Extras:
    from .engine.runner import Extras
    from .results.export import FORMATS

    formats = tuple(f.strip() for arg in args.export for f in arg.split(",") if f.strip())
    for f in formats:
        if f not in FORMATS:
            raise InputError(f"unknown export format {f!r} (expected one of {', '.join(FORMATS)})", key="--export")
    for flag, given in (("--dry-run", args.dry_run), ("--private", args.private)):
        if given and not args.push_to_hub:
            raise InputError(f"{flag} goes with --push-to-hub", key=flag)
    if args.push_to_hub and not formats and not (cfg.export and cfg.export.formats):
        raise InputError(
            "--push-to-hub needs something to push: add --export FORMAT or an export: section", key="--push-to-hub"
        )
    return Extras(export_formats=formats, push_to_hub=args.push_to_hub, dry_run=args.dry_run, private=args.private)


MAX_RUN_ID_BYTES = 128  # a folder name: file systems allow 255 bytes, and the run id is in every log line
_RUN_ID = re.compile(r"\w[\w.-]*")


def check_run_id(run_id: str) -> None:
    """A run id is a plain folder name: letters, digits, `_`, `.` and `-`, not starting with `.` or `-`, at most
    MAX_RUN_ID_BYTES in UTF-8. No path, blank, newline, shell or terminal character."""
    if not _RUN_ID.fullmatch(run_id) or len(run_id.encode("utf-8")) > MAX_RUN_ID_BYTES:
        raise InputError(
            f"--run-id '{printable(run_id[:80], one_line=True)}': use a plain folder name: letters, digits, "
            f"'_', '.' and '-' (not first), at most {MAX_RUN_ID_BYTES} bytes",
            key="--run-id",
        )


def _main(args: argparse.Namespace) -> int:
    from .config import load_config

    setup_logging(None, quiet=args.validate)
    if args.view is not None:
        from .viewer.app import view

        return view(args.view, args.host, args.port)
    if args.compare:
        from .results.compare import write_compare

        print(write_compare(*args.compare, args.out) / "compare.html")
        return 0
    if args.label_sheet is not None:
        from .results.label_sheet import label_sheet_command

        return label_sheet_command(args.label_sheet, args.sheet_size)
    if args.max_examples is not None and args.max_examples < 1:
        raise InputError("--max-examples must be at least 1", key="--max-examples")
    if args.run_id is not None:
        check_run_id(args.run_id)
    cfg = load_config(args.config)
    redact.use(redact.secrets_of(cfg))  # from here on, no artifact, log line or message holds what the run can send
    if args.validate:
        from .engine.estimate import count_calls  # --validate's machinery: imported only when asked for

        counts = count_calls(cfg, args.max_examples)
        print(json.dumps({"config": args.config, "valid": True, **counts}, indent=2))
        return 0
    from .engine.preflight import preflight
    from .engine.runner import execute

    extras = _extras(args, cfg)
    prepared = preflight(cfg, args.max_examples, spool=True)  # bad input stops here, before the run folder exists
    run_id = args.run_id or time.strftime("%Y%m%d-%H%M%S")
    run_dir = Path(cfg.run.output_dir) / run_id
    setup_logging(run_dir)
    from .engine.progress import set_log_interval
    from .engine.stop import install_stop_handlers

    set_log_interval(cfg.run.progress_interval_s)

    # The first Ctrl+C or SIGTERM stops starting new calls and writes artifacts; a second one exits at once.
    install_stop_handlers()
    outcome = execute(cfg, run_id, max_examples=args.max_examples, extras=extras, prepared=prepared)
    log.info("artifacts in %s", outcome.run_dir)
    for h in logging.getLogger("rubricrun").handlers:
        h.flush()
    return outcome.exit_code
