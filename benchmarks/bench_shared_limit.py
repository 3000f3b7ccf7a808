"""Shared limit: one model used as candidate AND as judge, `rpm` set on both entries, one server enforcing that rpm.

    .venv/bin/python benchmarks/bench_shared_limit.py [--examples 800] [--rpm 600] [--latency 0.1] [--code DIR]

The fake server (tests/fakeserver.py, its own process) allows `--rpm` requests in any ROLLING 60 s window and answers
429 with Retry-After beyond it, with x-ratelimit-* headers. rubricrun runs `--examples` generic examples with one
criterion each: one candidate and one judge, both `openai/bench-shared` on that server with the same key variable
and `rpm: --rpm` (so examples x 2 calls, concurrency 32 and 32 judge workers, cache in a fresh temp dir). The provider
counts both roles against one limit; rubricrun must too. The baseline is the limit itself. From the server's log:
  achieved rate / limit: accepted requests per minute from the first to the last accepted request / rpm (goal >= 0.95);
  429 share:             requests answered 429 / all requests (goal < 2 %);
plus the most accepted in any rolling 60 s and in any 1 s, per role, and how long both roles were sending at once.
`--code DIR` runs another checkout's run.py (e.g. /work/main, for a before/after); `--split` gives the judge another
key variable, so rubricrun sees two accounts and keeps one bucket per role (what the shared bucket prevents). 800 examples (1,600 calls) at 600/min take about 160 s.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from common import FakeServer, banner, max_in_window, model_entry, run_cli, summary, workdir, write_dataset  # noqa: E402

SPLIT_KEY_ENV = "RUBRICRUN_BENCH_KEY_JUDGE"  # --split: the judge names another key variable (same key)


def write_shared_config(wd: Path, base_url: str, data: Path, rpm: float, workers: int, split: bool = False) -> Path:
    shared = "openai/bench-shared"
    judge_key = {"api_key_env": SPLIT_KEY_ENV} if split else {}
    cand = model_entry("cand", shared, base_url, rpm=rpm)
    judge = model_entry("judge", shared, base_url, rpm=rpm, **judge_key)
    return common.save_config(wd, data, [cand], [judge], workers=workers, judge_workers=workers)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=800)
    ap.add_argument("--rpm", type=float, default=600.0)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--workers", type=int, default=32)
    ap.add_argument("--code", default=None, help="run this checkout's run.py instead")
    ap.add_argument(
        "--split",
        action="store_true",
        help="the judge entry names another key variable (same key, same server): rubricrun sees two accounts, "
        "one bucket per role, as before issue 13 item 2 (what-if)",
    )
    args = ap.parse_args()
    os.environ[SPLIT_KEY_ENV] = common.FAKE_KEY
    common.use_code(args.code)
    n, rpm = args.examples, args.rpm
    banner(f"shared limit: {n} examples x (candidate + judge) on one model, server and rubricrun rpm {rpm:g}")
    print(f"run.py: {common.RUN_PY}; expected duration at the limit: {(2 * n - 1) * 60 / rpm:.1f} s", flush=True)
    with FakeServer(latency=args.latency, rpm=rpm) as server, workdir() as wd:
        data = write_dataset(wd / "data.jsonl", n, criteria=1)
        cfg = write_shared_config(wd, server.base_url, data, rpm, args.workers, args.split)
        res = run_cli(["--config", str(cfg), "--run-id", "shared"], timeout=max(600, 2 * n * 60 / rpm * 3)).check()
        log = sorted((r for r in server.requests() if r["method"] == "POST"), key=lambda r: r["t"])
        s = summary(wd / "outputs" / "shared")

    role = {True: "judge", False: "candidate"}
    ok = [r["t"] for r in log if r["status"] == 200]
    limited = [r for r in log if r["status"] == 429]
    by_role = collections.Counter((role["response_format" in (r["body"] or {})], r["status"]) for r in log)
    span = ok[-1] - ok[0]
    rate = (len(ok) - 1) / span * 60 if span > 0 else float("nan")
    share = len(limited) / len(log)
    print(f"server requests: {len(log)}; by (role, status): {dict(sorted(by_role.items()))}")
    print(f"rubricrun: rc {res.rc}, wall {res.wall_s:.1f} s, calls {s['calls']}")
    sent = {
        name: [r["t"] for r in log if role["response_format" in (r["body"] or {})] == name] for name in role.values()
    }
    if all(sent.values()):  # do the roles call at the same time? (stages in sequence: no)
        t0 = log[0]["t"]
        both = min(sent["candidate"][-1], sent["judge"][-1]) - max(sent["candidate"][0], sent["judge"][0])
        print(
            f"candidate requests +{sent['candidate'][0] - t0:.1f}..+{sent['candidate'][-1] - t0:.1f} s, judge requests "
            f"+{sent['judge'][0] - t0:.1f}..+{sent['judge'][-1] - t0:.1f} s: both roles sending for {max(0, both):.1f} s"
        )
    print(f"max accepted in any rolling 60 s: {max_in_window(ok):.0f} (limit {rpm:g}); in any 1 s: "
          f"{max_in_window(ok, 1.0):.0f} (smooth pacing: {rpm / 60:.0f})")  # fmt: skip
    if limited:
        t0 = log[0]["t"]
        tens = collections.Counter(int((r["t"] - t0) // 10) * 10 for r in limited)
        print("429s by 10 s of the run: " + ", ".join(f"{k}-{k + 10}s: {v}" for k, v in sorted(tens.items())))
    print(f"achieved rate: {rate:.1f}/min over {span:.1f} s -> {rate / rpm:.3f} of the limit")
    print(f"goal achieved/limit >= 0.95: {rate / rpm:.3f} {'MET' if rate / rpm >= 0.95 else 'MISSED'}")
    print(f"goal 429 share < 2%: {100 * share:.2f}% {'MET' if share < 0.02 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
