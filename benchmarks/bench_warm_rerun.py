"""Warm rerun: a fully cached rerun (same --run-id) against the cold run that filled the cache.

    .venv/bin/python benchmarks/bench_warm_rerun.py [--examples 1000] [--criteria 10] [--latency 0.01] [--warm-runs 3]

Generic dataset of `--examples` rows, each with a `--criteria`-criterion rubric; 2 candidates, 2 judges (one judge
per criterion), concurrency 32 and 32 judge workers, cache in a fresh temp dir, all against the fake server
(tests/fakeserver.py, its own process, replies naming the model so that the two candidates' responses and the judge
calls on them are distinct) with `--latency` per request. The cold run makes examples x 2 candidate calls
and examples x 2 x criteria judge calls; the warm rerun must make zero server requests (checked on the server's log
and in summary.json). Figures: warm wall / cold wall (both `python run.py` subprocesses, startup included), and the
warm reruns' absolute seconds with peak RSS, and their median against the goal of issue 20 (1,000 examples: under
3 s; 300: under 1.5 s). The floor: one process that only reads every cached reply (one `diskcache` get each) and
writes one JSON line per reply, what a fully cached run must at least do; the warm rerun's median over the floor's
is the ratio to watch (1.0 would be rubricrun doing nothing else).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    PY,
    FakeServer,
    banner,
    bench_env,
    run_cli,
    stage_window,
    summary,
    workdir,
    write_config,
    write_dataset,
)

GOALS_S = {1000: 3.0, 300: 1.5}  # issue 20: median warm rerun at default settings, by examples (x 2 x 10)


def floor(cache_dir: str, out: str) -> None:
    """The floor (run in its own process): every cached reply read once and written as one JSON line."""
    import diskcache

    cache = diskcache.Cache(cache_dir, eviction_policy="none", sqlite_mmap_size=0, sqlite_cache_size=256)
    keys = list(cache.iterkeys())
    with open(out, "w", encoding="utf-8") as fh:
        for key in keys:
            value = cache.get(key)  # JSON bytes (ExecPlan 018) or, in a cache of an older version, a pickled dict
            fh.write(json.dumps(json.loads(value) if type(value) is bytes else value, ensure_ascii=False) + "\n")


def time_floor(cache_dir: Path, out: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([PY, __file__, "--floor", str(cache_dir), str(out)], check=True, env=bench_env(), timeout=600)
    return time.perf_counter() - t0


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--floor":
        floor(sys.argv[2], sys.argv[3])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=1000)
    ap.add_argument("--criteria", type=int, default=10)
    ap.add_argument("--latency", type=float, default=0.01)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--warm-runs", type=int, default=3, help="warm reruns to time (each is reported)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder (config, cache, outputs)")
    args = ap.parse_args()
    n, k = args.examples, args.criteria
    cand_calls, judge_calls = n * 2, n * 2 * k
    banner(f"warm rerun: {n} examples x 2 candidates x {k} criteria ({cand_calls} + {judge_calls} calls)")
    with FakeServer(latency=args.latency, model_in_reply=True) as server, workdir(keep=args.keep) as wd:
        data = write_dataset(wd / "data.jsonl", n, criteria=k)
        conc = args.concurrency
        cfg = write_config(wd, server.base_url, data, candidates=2, judges=2, concurrency=conc, judge_workers=conc)
        run_args = ["--config", str(cfg), "--run-id", "warm"]
        cold = run_cli(run_args, timeout=3600).check()
        cold_sum = summary(wd / "outputs" / "warm")
        before = server.stats()["total"]
        print(
            f"cold: {cold.wall_s:.1f} s, peak RSS {cold.maxrss_mb:.0f} MB, calls {cold_sum['calls']}, "
            f"server requests {before}",
            flush=True,
        )
        warms = []
        for i in range(args.warm_runs):
            warm = run_cli(run_args, timeout=600).check()
            s = summary(wd / "outputs" / "warm")
            after = server.stats()["total"]
            gw, jw = stage_window(wd / "outputs" / "warm"), stage_window(wd / "outputs" / "warm", "judge")
            stages = ""
            if gw["stage_start"] and gw["end"] and jw["end"]:
                stages = f" (generation {gw['end'] - gw['stage_start']:.1f} s, judging {jw['end'] - gw['end']:.1f} s)"
            print(
                f"warm {i + 1}: {warm.wall_s:.2f} s{stages}, CPU {warm.cpu_s:.1f} s, peak RSS {warm.maxrss_mb:.0f} MB, "
                f"calls {s['calls']}, summary wall_s {s['wall_s']}, new server requests {after - before}",
                flush=True,
            )
            if after != before or s["calls"]["made"] != 0:
                print("  WARNING: the warm rerun was not fully cached")
            before = after
            warms.append(warm.wall_s)
        floors = [time_floor(wd / "cache", wd / "floor.jsonl") for _ in range(args.warm_runs)]
    med, worst = statistics.median(warms), max(warms)
    print(f"ratio warm/cold: {med / cold.wall_s:.3f}  (median warm {med:.2f} s / cold {cold.wall_s:.1f} s)")
    fl = statistics.median(floors)
    print(
        f"floor (one process: every cached reply read, one JSON line each): median {fl:.2f} s; warm/floor {med / fl:.2f}"
    )
    goal = GOALS_S.get(n) if k == 10 else None
    if goal is not None:
        verdict = "MET" if med < goal else "MISSED"
        print(f"goal median warm rerun < {goal:g} s: median {med:.2f} s, worst {worst:.2f} s {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
