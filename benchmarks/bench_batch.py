"""Provider batch jobs: a batch run killed (kill -9) while its batches are pending, then resumed; against an online run.

    .venv/bin/python benchmarks/bench_batch.py [--examples 1000] [--kills 2] [--pending-s 600]

tests/fakebatch.py (OpenAI's /v1/files and /v1/batches over the fake chat server) runs in this process; rubricrun runs
as `run.py` subprocesses. `--examples` generic examples with one criterion each: one candidate and one judge, both
`openai/gpt-4o-mini` (LiteLLM's price map has its online and batch prices) on the fake server, so examples x 2 calls.
1. Online: the config without `batch:` (its own cache): the baseline's distinct requests and cost.
2. Batch: every entry `batch: true`. The server holds each batch pending; the run is killed with SIGKILL as soon as
   batches.json shows a submitted batch that has not ended, `--kills` times (each time the next pass's batch), each
   kill followed by a resume with the same --run-id; the last resume runs with batches completing at once.
Figures: submissions / distinct requests (goal 1.0: zero duplicate submissions across the kills), batch cost /
online cost for the same requests (LiteLLM's batch price for gpt-4o-mini is half its online price), and whether the
batch run's responses and judgments equal the online run's.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import common  # noqa: E402
from common import banner, model_entry, read_jsonl, workdir, write_dataset  # noqa: E402
from fakebatch import FakeBatchServer  # noqa: E402

from rubricrun.providers.pricing import unit_prices  # noqa: E402

MODEL = "openai/gpt-4o-mini"


def write_config(wd: Path, base_url: str, data: Path, batch: bool) -> Path:
    extra = {"batch": True} if batch else {}
    cfg = {
        "candidates": [model_entry("cand", MODEL, base_url, params={"max_tokens": 64}, **extra)],
        "judges": [model_entry("judge", MODEL, base_url, params={"max_tokens": 64}, **extra)],
        "datasets": [{"path": str(data), "format": "generic"}],
        "run": {"output_dir": str(wd / "outputs"), "concurrency": 16, "judge_parallel_workers": 16, "progress": False},
        "cache": {"dir": str(wd / "cache"), "enabled": True},
        "batch": {"poll_interval_s": 0.5},
    }
    path = wd / "config.yaml"
    wd.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def paid(run_dir: Path, batch: bool) -> tuple[float, tuple[int, int]]:
    """USD and tokens of every paid reply in trace.jsonl (all invocations), at the online or the batch price."""
    p_in, p_out = unit_prices(MODEL, batch=batch)
    events = [e for e in read_jsonl(run_dir / "trace.jsonl") if e["status"] == "ok" and not e["cache_hit"]]
    prompt = sum(e["usage"]["prompt_tokens"] for e in events)
    completion = sum(e["usage"]["completion_tokens"] for e in events)
    return prompt * p_in + completion * p_out, (prompt, completion)


def drop_hit(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "cache_hit"}


def run(cfg: Path, run_id: str, timeout: float = 900) -> tuple[int, float]:
    t0 = time.monotonic()
    p = subprocess.run(
        [common.PY, common.RUN_PY, "--config", str(cfg), "--run-id", run_id],
        env=common.bench_env(),
        cwd=common.REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-3000:])
    return p.returncode, time.monotonic() - t0


def kill_when_pending(cfg: Path, run_id: str, state: Path, seen_jobs: int, timeout: float = 600) -> int:
    """Start a run; SIGKILL it once a batch beyond the first `seen_jobs` is submitted and pending. Returns the jobs."""
    p = subprocess.Popen(
        [common.PY, common.RUN_PY, "--config", str(cfg), "--run-id", run_id],
        env=common.bench_env(),
        cwd=common.REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            jobs = json.loads(state.read_text())["jobs"] if state.exists() else []
            fresh = [j for j in jobs[seen_jobs:] if j["batch_id"] and not j["collected"]]
            if fresh:
                p.send_signal(signal.SIGKILL)
                p.wait(30)
                print(f"  killed -9 with {len(fresh)} batch(es) pending: {[j['batch_id'] for j in fresh]}")
                return len(jobs)
            if p.poll() is not None:
                raise SystemExit(f"run ended (rc {p.returncode}) before a batch was pending")
            time.sleep(0.05)
        raise SystemExit("no batch pending in time")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=1000)
    ap.add_argument("--kills", type=int, default=2)
    ap.add_argument("--pending-s", type=float, default=600.0, help="how long a batch stays pending before a kill")
    args = ap.parse_args()
    banner("batch jobs: kill -9 while pending, resume")
    with workdir() as wd, FakeBatchServer() as server:
        data = write_dataset(wd / "data.jsonl", args.examples, criteria=1)
        online = write_config(wd / "online", server.base_url, data, batch=False)
        rc, wall = run(online, "on")
        distinct = len(server.fingerprint_counts())
        print(f"online: rc {rc}, {server.count()} chat calls ({distinct} distinct requests), {wall:.1f} s")
        server.reset_log()
        batched = write_config(wd / "batch", server.base_url, data, batch=True)
        state = wd / "batch" / "outputs" / "b" / "batches.json"
        server.complete_after_s = args.pending_s
        jobs = 0
        for _ in range(args.kills):
            jobs = kill_when_pending(batched, "b", state, jobs)
            for entry in server.batches.values():  # the pending batches end while nobody polls them
                entry["t0"] -= args.pending_s
        server.complete_after_s = 0.0
        rc, wall = run(batched, "b")
        print(
            f"batch: resumed after {args.kills} kills: rc {rc}, {wall:.1f} s (last resume), {server.count()} chat calls"
        )
        submitted = len(server.submitted)
        dup = server.duplicate_submissions()
        print(f"submissions {submitted} / distinct requests {distinct} = {submitted / distinct:.3f} ({dup} duplicates)")
        on_usd, on_tokens = paid(wd / "online" / "outputs" / "on", batch=False)
        b_usd, b_tokens = paid(wd / "batch" / "outputs" / "b", batch=True)
        print(f"paid tokens (prompt, completion): online {on_tokens}, batch {b_tokens} (all invocations)")
        print(f"cost online ${on_usd:.6f}, batch ${b_usd:.6f}: batch/online = {b_usd / on_usd:.3f}")
        last = json.loads((wd / "batch" / "outputs" / "b" / "summary.json").read_text())["costs"]
        row = last["by_model"].get(f"judge:{MODEL}") or next(iter(last["by_model"].values()))
        p_in, p_out = unit_prices(MODEL)
        at_online = row["prompt_tokens"] * p_in + row["completion_tokens"] * p_out
        print(
            f"summary.json of the last resume: {row['role']} ${row['usd']:.6f} = {row['usd'] / at_online:.3f} x online price"
        )
        pairs = [
            (read_jsonl(wd / "online" / "outputs" / "on" / n), read_jsonl(wd / "batch" / "outputs" / "b" / n))
            for n in ("responses.jsonl", "judgments.jsonl")
        ]
        same = all([drop_hit(r) for r in a] == [drop_hit(r) for r in b] for a, b in pairs)
        hits = sum(r.get("cache_hit", False) for _, b in pairs for r in b)  # rows have no cache_hit since issue 13
        print(f"responses and judgments equal to the online run's apart from cache_hit: {same}")
        print(f"  ({hits} batch rows read cache_hit: true, answered by a batch an earlier invocation collected)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
