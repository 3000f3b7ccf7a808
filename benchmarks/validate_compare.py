#!/usr/bin/env python3
"""`--validate`'s JSON of two checkouts side by side, on a few configs, before a run (empty cache) and after it
(each tree's cache filled by its own run), with the calls those runs made (the fake server's log) beside them.

    .venv/bin/python benchmarks/validate_compare.py OLD_TREE NEW_TREE [--out DIR] [--variant NAME ...]

Variants: `binary` (every sample dataset, two candidates, two judges on each criterion), `pairwise` (all pairs),
`tie` (three judges, two on each criterion, `on_tie: judge`; judges differ by system prompt, so the fake server's
hashed verdicts split and the cache holds tied votes), `graded10` (scale 1-10), `judgefree` (no judges; multi-turn
rows among them). A 1-10 or pairwise judge asked at temperature 0 answers unreadably for about half the prompts,
so the cache holds re-asks. Every model has a price, so the cost bounds compare too. Prints, per variant and cache
state, each key whose value differs, and the run's calls by role. Not a benchmark: a before/after check of what
`--validate` counts (ExecPlan 016 step 9).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from fakeserver import FakeOpenAIServer, default_reply  # noqa: E402

KEY_ENV = "RUBRICRUN_GOLDEN_KEY"
VARIANTS = ("binary", "pairwise", "tie", "graded10", "judgefree")
RUBRIC = [{"id": "relevant", "text": "Answers the question.", "weight": 1}]


def responder(body: dict[str, Any]) -> str:
    """The fake server's default, except a 1-10 judge: unreadable at temperature 0 for half the prompts."""
    text = json.dumps(body.get("messages"))
    if "[[" not in text or "criteria_met" in text or body.get("response_format"):
        return default_reply(body)
    bits = hashlib.sha256(text.encode()).digest()[0]
    if bits & 1 and not body.get("temperature"):
        return "I would rather not say."
    if "[[A]]" in text:  # pairwise
        return "Both are fine. [[C]]" if bits & 2 else "The first is better. [[A]]"
    return "The answer is fine. Rating: [[7]]"


def config(variant: str, out: Path, base_url: str) -> dict:
    def entry(name: str, model: str, **more: Any) -> dict:
        price = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}  # so that the cost bounds compare too
        return {"name": name, "model": model, "api_base": base_url, "api_key_env": KEY_ENV, "price": price, **more}

    judges = [entry("j1", "openai/judge-one"), entry("j2", "openai/judge-two")]
    judging: dict[str, Any] = {"judges_per_criterion": 2, "default_rubric": RUBRIC}
    data = sorted((REPO / "data").glob("*_sample.jsonl"))
    if variant == "pairwise":
        judging = {"judges_per_criterion": 1, "pairwise": {"all_pairs": True}}
        data = [REPO / "data" / "mtbench_sample.jsonl", REPO / "data" / "generic_sample.jsonl"]
    elif variant == "tie":
        judges = [entry(f"j{i}", f"openai/judge-{i}", system_prompt=f"You are judge {i}.") for i in (1, 2, 3)]
        judging["on_tie"] = "judge"
    elif variant == "judgefree":  # no judge: every last turn is a leaf (asked for presence only)
        judges, judging = [], {}
        data = [REPO / "data" / f"{name}_sample.jsonl" for name in ("mc", "qa", "mtbench")]
    elif variant == "graded10":
        judging = {"judges_per_criterion": 1, "scale": "1-10", "default_rubric": RUBRIC}
        data = [REPO / "data" / "mtbench_sample.jsonl", REPO / "data" / "generic_sample.jsonl"]
    return {
        "candidates": [entry("alpha", "openai/cand-alpha"), entry("beta", "openai/cand-beta")],
        "judges": judges,
        "datasets": [{"path": str(p)} for p in data],
        "judging": judging,
        "run": {"output_dir": str(out / "outputs"), "progress": False, "concurrency": 1, "judge_parallel_workers": 1},
        "cache": {"dir": str(out / "cache")},
    }


def call(tree: Path, cfg_path: Path, *extra: str) -> str:
    env = {**os.environ, KEY_ENV: "sk-golden-not-a-key", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    cmd = [sys.executable, "run.py", "--config", str(cfg_path), *extra]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"{tree}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return proc.stdout


def validate(tree: Path, cfg_path: Path) -> dict:
    got = json.loads(call(tree, cfg_path, "--validate"))
    got.pop("config", None)
    return got


def show(label: str, old: dict, new: dict) -> None:
    keys = list(dict.fromkeys([*old, *new]))
    diff = [k for k in keys if old.get(k) != new.get(k)]
    print(f"  {label}: {'same' if not diff else 'differs'}")
    for k in diff:
        print(f"    {k}: {old.get(k, '-')} -> {new.get(k, '-')}")
    shown = {k: v for k, v in new.items() if k.endswith(("_calls", "_cached", "_at_most"))}
    print(f"    new: {shown}")


def _made(server: FakeOpenAIServer) -> dict[str, int]:
    roles: dict[str, int] = {}
    for r in server.requests:
        role = "judge" if (r.model or "").startswith("judge") else "candidate"
        roles[role] = roles.get(role, 0) + 1
    return roles


def one(variant: str, old: Path, new: Path, out: Path, server: FakeOpenAIServer) -> None:
    """Each tree over its own cache (a cache's rows are of its writer's format: ExecPlan 018), filled by its own run
    of the same config against the same server."""
    paths = {}
    for side in ("old", "new"):
        (out / side).mkdir(parents=True, exist_ok=True)
        paths[side] = out / side / "config.yaml"
        paths[side].write_text(yaml.safe_dump(config(variant, out / side, server.base_url)), encoding="utf-8")
    print(variant)
    show("empty cache", validate(old, paths["old"]), validate(new, paths["new"]))
    made = {}
    for side, tree in (("old", old), ("new", new)):
        server.reset_log()
        call(tree, paths[side], "--run-id", "filled")
        made[side] = _made(server)
    print(f"  the runs made: old {made['old']}, new {made['new']}")
    show("after the run", validate(old, paths["old"]), validate(new, paths["new"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--variant", nargs="*", default=list(VARIANTS), choices=VARIANTS)
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="validate-"))
    with FakeOpenAIServer(responder=responder) as server:
        for v in args.variant:
            one(v, args.old.resolve(), args.new.resolve(), out / v, server)
    print(f"under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
