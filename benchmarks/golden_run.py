#!/usr/bin/env python3
"""Artifact equality across two checkouts: the same config and run id, run by each tree's own `run.py`
against one local fake server (tests/fakeserver.py, deterministic replies), then every artifact compared.

Not a benchmark: the check a behaviour-neutral change (a restructure) must pass.

    .venv/bin/python benchmarks/golden_run.py OLD_TREE NEW_TREE [--variant all] [--out DIR]

OLD_TREE can be a `git worktree add /tmp/old <commit>`. Variants (`--variant`, repeatable, or `all`):
`binary` (every sample dataset, two candidates, two judges voting on each criterion, every export format),
`graded5` and `graded10` (the same at judging.scale 1-5 and 1-10), `pairwise` (three candidates, every pair),
`tie` (three judges, two voting, a tie broken by the third) and `per-dataset` (`binary`, one run per sample file,
named after it). Both trees run in the same folder, one after the other, so paths in the artifacts agree.

Compared as parsed data, not bytes (JSON's separators are the codec's business, ExecPlan 018): examples,
responses, judgments and export files line by line, each line parsed; config.yaml parsed; summary.json parsed,
without its timing (`wall_s`); report.html without its two clock facts (wall time, report generated); run.log
without timestamps; trace.jsonl as a multiset of events without `ts`, `latency_ms`, `invocation`, `worker`; and
`--validate`'s JSON before the run (empty cache) and after it (warm cache).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from fakeserver import FakeOpenAIServer, default_reply, is_judge_request, message_text  # noqa: E402

KEY_ENV = "RUBRICRUN_GOLDEN_KEY"
VARIANTS = ("binary", "graded5", "graded10", "pairwise", "tie", "per-dataset")
_TIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d| UTC)?")
_CLOCK_FACTS = re.compile(r"(wall time \(s\)|report generated)</dt><dd>[^<]*</dd>")
_TRACE_DROP = ("ts", "latency_ms", "invocation", "worker")  # worker: host:pid of the process that made the attempt


def reply(body: dict) -> str:
    """The fake server's answer, readable on every scale: a verdict that depends on the judge model too (so two
    judges can split and `tie` sees tie-breaks), a 1-5 score, an MT-Bench rating, a pairwise verdict."""
    text = "\n".join(message_text(m) for m in body.get("messages") or [] if isinstance(m, dict))
    d = hashlib.sha256(f"{body.get('model')}\n{text}".encode()).digest()[0]
    if '"[[A]]" if assistant A is better' in text:
        return f"Compared. [[{'ABC'[d % 3]}]]"
    if "[[rating]]" in text:
        return f"Rated. Rating: [[{1 + d % 10}]]"
    if '"score" (an integer from 1 to 5)' in text:
        return json.dumps({"reasoning": "Scored.", "score": 1 + d % 5})
    if is_judge_request(body):
        return json.dumps({"explanation": "Judged.", "criteria_met": bool(d & 1)})
    return default_reply(body)


def entry(name: str, model: str, base_url: str) -> dict:
    return {"name": name, "model": model, "api_base": base_url, "api_key_env": KEY_ENV}


def config(variant: str, out: Path, base_url: str, datasets: list[Path]) -> dict:
    cands = [entry("alpha", "openai/cand-alpha", base_url), entry("beta", "openai/cand-beta", base_url)]
    judges = [entry("j1", "openai/judge-one", base_url), entry("j2", "openai/judge-two", base_url)]
    judging: dict = {
        "judges_per_criterion": 2,
        "default_rubric": [{"id": "relevant", "text": "Answers the question.", "weight": 1}],
    }
    if variant == "graded5":
        judging["scale"] = "1-5"
    elif variant == "graded10":
        judging = {"judges_per_criterion": 2, "scale": "1-10"}
    elif variant == "pairwise":
        cands.append(entry("gamma", "openai/cand-gamma", base_url))
        judging["pairwise"] = {"all_pairs": True}
    elif variant == "tie":
        judges.append(entry("j3", "openai/judge-three", base_url))
        judging["on_tie"] = "judge"
    return {
        "candidates": cands,
        "judges": judges,
        "datasets": [{"path": str(p)} for p in datasets],
        "judging": judging,
        "run": {
            "output_dir": str(out / "outputs"),
            "progress": False,
            "bootstrap_samples": 200,
            # One thread per stage: with several, two identical requests in flight race for the cache and
            # `cache_hit` differs from run to run (seen: old tree against itself).
            "concurrency": 1,
            "judge_parallel_workers": 1,
        },
        "cache": {"dir": str(out / "cache")},
        "export": {"formats": ["sft", "dpo", "kto", "reward", "hybrid"]},
    }


def _cli(tree: Path, args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, KEY_ENV: "sk-golden-not-a-key", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    proc = subprocess.run([sys.executable, "run.py", *args], cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{tree}: {' '.join(args)}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return proc


def run(tree: Path, work: Path, cfg: dict) -> None:
    """Validate (cold), run, validate (warm) in `work`; the run folder is work/outputs/golden."""
    cfg_path = work / "config.yaml"
    work.mkdir(parents=True, exist_ok=True)
    cfg_path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    (work / "validate_cold.json").write_text(_cli(tree, ["--config", str(cfg_path), "--validate"]).stdout)
    _cli(tree, ["--config", str(cfg_path), "--run-id", "golden"])
    (work / "validate_warm.json").write_text(_cli(tree, ["--config", str(cfg_path), "--validate"]).stdout)


def comparable(path: Path) -> object:
    text = path.read_text(encoding="utf-8")
    if path.name == "summary.json":
        obj = json.loads(text)
        obj.pop("wall_s", None)
        return obj
    if path.suffix == ".json":
        return json.loads(text)
    if path.suffix == ".yaml":
        return yaml.safe_load(text)
    if path.suffix == ".jsonl" and not path.name.startswith(("trace.jsonl", "run.log")):
        return [json.loads(line) for line in text.split("\n") if line]  # not splitlines: U+2028 is inside strings
    if path.name == "report.html":
        return _CLOCK_FACTS.sub(r"\1", text)
    if path.name.startswith("run.log"):
        return _TIME.sub("<t>", text)
    if path.name == "trace.jsonl":
        events = []
        for line in filter(None, text.split("\n")):
            ev = json.loads(line)
            events.append(json.dumps({k: v for k, v in ev.items() if k not in _TRACE_DROP}, sort_keys=True))
        return Counter(events)
    return text


def compare(label: str, old: Path, new: Path) -> bool:
    names = sorted(
        {p.relative_to(d).as_posix() for d in (old, new) for p in d.rglob("*") if p.is_file() and ".lock" not in p.name}
    )
    same = True
    for name in names:
        a, b = old / name, new / name
        equal = a.exists() and b.exists() and comparable(a) == comparable(b)
        same &= equal
        size = a.stat().st_size if a.exists() else -1
        print(f"{'same' if equal else 'DIFFERENT':9} {label}: {name}  ({size} bytes)")
    return same


def jobs(variants: list[str]) -> list[tuple[str, str, list[Path]]]:
    """(label, variant, datasets) of every run to make."""
    samples = sorted((REPO / "data").glob("*_sample.jsonl"))
    out = []
    for v in variants:
        if v == "per-dataset":
            out += [(p.name.removesuffix(".jsonl"), "binary", [p]) for p in samples]
        elif v == "graded5":  # the MT-Bench sample's own categories crash 1-5 scoring up to 0e3fb82 (KeyError:
            # `category:<c>` had no `rating:category:<c>`; fixed in tasks/mt_bench.regroup), so old trees leave it out
            out.append((v, v, [p for p in samples if not p.name.startswith("mtbench")]))
        else:
            out.append((v, v, samples))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--variant", action="append", choices=[*VARIANTS, "all"], help="default: binary")
    ap.add_argument("--out", type=Path, default=None, help="where both runs write (default: a temp dir)")
    args = ap.parse_args()
    chosen = args.variant or ["binary"]
    variants = list(VARIANTS) if "all" in chosen else list(dict.fromkeys(chosen))
    out = args.out or Path(tempfile.mkdtemp(prefix="golden-"))
    same = True
    with FakeOpenAIServer(responder=reply) as server:
        for label, variant, datasets in jobs(variants):
            work = out / "work"
            for side, tree in (("old", args.old), ("new", args.new)):
                shutil.rmtree(work, ignore_errors=True)
                run(tree.resolve(), work, config(variant, work, server.base_url, datasets))
                shutil.rmtree(work / "cache")
                dest = out / label / side
                shutil.rmtree(dest, ignore_errors=True)
                dest.parent.mkdir(parents=True, exist_ok=True)
                work.rename(dest)
            same &= compare(label, out / label / "old", out / label / "new")
    print(f"runs under {out}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
