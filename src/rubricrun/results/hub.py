"""Push a run's export to the Hugging Face Hub as a dataset repo in one commit: data/<fmt>.jsonl (empty formats left
out), config.yaml and a README.md card with one config per format, so `load_dataset(repo, "dpo")` works. Nothing is
uploaded if a file holds the value of an environment variable named *_KEY or *_TOKEN (8 characters or more: shorter
ones cannot be told from ordinary text), of `token_env`, or a secret the config can send (redact.found_in). The
token is never logged or written; HF_ENDPOINT is read at call time (huggingface_hub reads it once, at import)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ..config import Config
from ..errors import InputError, RubricrunError
from ..providers import redact
from .export import FORMATS

_SECRET_SUFFIXES = ("_KEY", "_TOKEN")
_MIN_SECRET_LEN = 8
_TRL_TYPE = {
    "sft": "conversational prompt-completion (SFTTrainer); `messages` holds prompt + completion",
    "dpo": "conversational preference, explicit prompt (DPOTrainer, RewardTrainer)",
    "kto": "conversational unpaired preference (KTOTrainer)",
    "reward": "pointwise scores with per-criterion verdicts (not a TRL trainer format; use dpo for RewardTrainer)",
    "hybrid": "VellumForge2 one-to-many preference schema (strings, per-criterion scores)",
    "prompts": "conversational prompt-only (GRPOTrainer, OnlineDPOTrainer)",
}


def _export_files(run_dir: Path) -> tuple[list[tuple[str, Path, int]], list[str]]:
    """(fmt, path, rows) for each non-empty export file, in FORMATS order then by name; and the empty formats."""
    export_dir = run_dir / "export"
    found = sorted(export_dir.glob("*.jsonl"), key=lambda p: (FORMATS.index(p.stem) if p.stem in FORMATS else 99, p))
    files, empty = [], []
    for p in found:
        with p.open("rb") as f:
            rows = sum(1 for line in f if line.strip())
        if rows:
            files.append((p.stem, p, rows))
        else:
            empty.append(p.stem)
    return files, empty


def _card(repo_id: str, files: list[tuple[str, Path, int]], empty: list[str], card: dict[str, Any]) -> str:
    configs: list[dict[str, Any]] = [
        {"config_name": fmt, "data_files": [{"split": "train", "path": f"data/{fmt}.jsonl"}]} for fmt, _, _ in files
    ]
    configs[0]["default"] = True  # (there is at least one file: _collect)
    meta: dict[str, Any] = {"configs": configs, "tags": ["rubricrun", "synthetic"]}
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    out = [f"---\n{front}---\n", f"# {repo_id.split('/')[-1]}\n"]
    out.append(
        "Made with rubricrun: candidate models answered each prompt, a pool of judge models checked every response "
        "criterion by criterion, and these files were built from the scores. Every row carries `provenance` "
        "(example, response and judgment ids, models, candidates, cache keys of the calls that made it).\n"
    )
    out.append("## Files\n\n| config | file | rows | format |\n|---|---|---|---|")
    for fmt, _, rows in files:
        out.append(f"| {fmt} | data/{fmt}.jsonl | {rows} | {_TRL_TYPE.get(fmt, '')} |")
    out.append("")
    if empty:
        out.append(f"Formats with no rows (not uploaded): {', '.join(empty)}.\n")
    out.append(
        "```python\nfrom datasets import load_dataset\n\n"
        f'ds = load_dataset("{repo_id}", "{files[0][0]}", split="train")\n```\n'
    )
    settings = [f"{k}: {v}" for k, v in (card.get("thresholds") or {}).items()]
    sections = (("Candidate models", card.get("models")), ("Judges", card.get("judges")), ("Export settings", settings))
    for heading, items in sections:
        if items:
            out += [f"## {heading}\n", *(f"- {m}" for m in items), ""]
    rest = {k: v for k, v in card.items() if k not in {"models", "judges", "thresholds"}}
    if rest:
        out.append("## Details\n\n```yaml\n" + yaml.safe_dump(rest, sort_keys=False, allow_unicode=True) + "```\n")
    out.append("The resolved run config (secrets redacted) is in `config.yaml`.\n")
    return "\n".join(out)


def _check_secrets(files: list[tuple[str, bytes]], token_env: str) -> None:
    names = [n for n in os.environ if n.upper().endswith(_SECRET_SUFFIXES) or n == token_env]
    for name in sorted(names):
        value = os.environ.get(name, "")
        if len(value) < _MIN_SECRET_LEN:
            continue
        needle = value.encode()
        for path, data in files:
            if needle in data:
                raise InputError(f"refusing to upload: it contains the value of ${name}", file=path)
    for path, data in files:
        label = redact.found_in(data)
        if label is not None:
            raise InputError(f"refusing to upload: it contains a secret ({label})", file=path)


def _collect(run_dir: Path, repo_id: str, card: dict[str, Any]) -> list[tuple[str, bytes]]:
    if not (run_dir / "export").is_dir():
        raise InputError("no export folder: run the export first", file=str(run_dir / "export"))
    files, empty = _export_files(run_dir)
    if not files:
        raise InputError("no export rows to upload", file=str(run_dir / "export"))
    config = run_dir / "config.yaml"
    if not config.is_file():
        raise InputError("the run's resolved config is missing", file=str(config))
    out = [(f"data/{fmt}.jsonl", p.read_bytes()) for fmt, p, _ in files]
    out.append(("config.yaml", config.read_bytes()))
    out.append(("README.md", _card(repo_id, files, empty, card).encode()))
    return out


def push_to_hub(
    run_dir: Path,
    repo_id: str,
    *,
    token_env: str = "HF_TOKEN",
    private: bool = False,
    dry_run: bool = False,
    card: dict[str, Any] | None = None,
) -> list[str]:
    """Upload the export as a dataset repo (created if needed); return the repo paths uploaded (or, dry, to be)."""
    run_dir = Path(run_dir)
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise InputError(f"repo id must look like 'user/name', got {repo_id!r}")
    files = _collect(run_dir, repo_id, card or {})
    _check_secrets(files, token_env)
    paths = [p for p, _ in files]
    if dry_run:
        return paths
    token = os.environ.get(token_env)
    if not token:
        raise InputError(f"${token_env} is not set: a Hugging Face token with write access is needed to push")

    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")  # our tool does not phone home
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    endpoint = os.environ.get("HF_ENDPOINT") or None
    api = HfApi(endpoint=endpoint.rstrip("/") if endpoint else None, token=token)
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        api.create_commit(
            repo_id,
            repo_type="dataset",
            operations=[CommitOperationAdd(path_in_repo=p, path_or_fileobj=data) for p, data in files],
            commit_message=f"rubricrun export of run {run_dir.name}",
        )
    except HfHubHTTPError as e:
        raise RubricrunError(f"push to {repo_id} failed: {e}") from None
    return paths


def hub_card(cfg: Config, summary: dict[str, Any]) -> dict[str, Any]:
    """What the dataset card says about the run: models, judges, thresholds, export counts."""
    ecfg = cfg.export
    return {
        "run_id": summary["run_id"],
        "models": sorted({m.model or w.model for m in cfg.candidates for w in (m.models or [None]) if m.model or w}),
        "candidates": [c.name for c in cfg.candidates],
        "judges": [f"{j.name} ({j.model})" for j in cfg.judge_pool],
        "thresholds": {
            "score": ecfg.score if ecfg else "normalized",
            "sft_threshold": ecfg.sft_threshold if ecfg else None,
            "kto_threshold": ecfg.kto_threshold if ecfg else None,
            "min_margin": ecfg.min_margin if ecfg else None,
        },
        "export": summary.get("export", {}),
    }
