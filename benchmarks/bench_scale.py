"""Scale: 100,000 generic examples, 1 candidate, no judges, fully cached: warm rerun memory and --validate time.

    .venv/bin/python benchmarks/bench_scale.py [--examples 100000] [--workdir DIR] [--chunk 0]

Cold run: `python run.py` against the fake server (tests/fakeserver.py, its own process, zero latency) at
concurrency 64, filling the cache in `--workdir` (a fresh temp dir by default, removed at the end; give a folder to
keep the filled cache and skip the cold run next time: it is skipped when DIR/outputs/scale/summary.json already says
every response was made; the server then takes the same port, since api_base is part of the cache key).
With `--chunk N` the cold run is done as successive resumed runs of N, 2N, ... examples (`--max-examples`), which
rubricrun supports (same run id, the cache picks up where the last one stopped).
Then, on the same config, each `--repeat` times:
  warm rerun: `python run.py --run-id scale` (zero server requests, checked): wall time and the subprocess's own peak
              RSS from os.wait4 (goal < 1 GB);
  validate:   `python run.py --validate`: wall time (goal < 10 s), and it must count every call as cached.
The baseline for both is the cold run (its wall time and peak RSS).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    FakeServer,
    banner,
    print_warm,
    run_cli,
    run_validate,
    stage_window,
    summary,
    write_config,
    write_dataset,
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=100_000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--workdir", help="keep config, data, cache and outputs here (reused when already filled)")
    ap.add_argument("--chunk", type=int, default=0, help="fill the cache in resumed runs of this many more examples")
    ap.add_argument("--cold-timeout", type=float, default=7200)
    ap.add_argument("--repeat", type=int, default=2, help="warm reruns and validations to time")
    args = ap.parse_args()
    if args.workdir:
        wd = Path(args.workdir)
        wd.mkdir(parents=True, exist_ok=True)
        return measure(args, wd)
    wd = Path(tempfile.mkdtemp(prefix="rubricrun-bench-scale-"))
    try:
        return measure(args, wd)
    finally:
        shutil.rmtree(wd, ignore_errors=True)


def measure(args: argparse.Namespace, wd: Path) -> int:
    n = args.examples
    run_dir = wd / "outputs" / "scale"
    banner(f"scale: {n} examples, 1 candidate, no judges (workdir {wd})")
    # api_base is part of the cache key: a reused workdir needs the server on the port that filled its cache.
    port_file = wd / "port.txt"
    port = int(port_file.read_text()) if port_file.exists() else 0
    with FakeServer(latency=0.0, port=port) as server:
        port_file.write_text(server.base_url.rsplit(":", 1)[1].split("/")[0])
        data = wd / "data.jsonl"
        if not data.exists() or sum(1 for _ in open(data)) != n:
            write_dataset(data, n)
        cfg = write_config(wd, server.base_url, data, concurrency=args.concurrency)
        run_args = ["--config", str(cfg), "--run-id", "scale"]
        filled = False
        if (run_dir / "summary.json").exists():
            s = summary(run_dir)
            filled = s["calls"]["made"] + s["calls"]["cache_hits"] == n and s["responses_not_done"] == 0
        if filled:
            print("cold run: skipped, the cache in the workdir is already filled")
            cold = None
        else:
            steps = list(range(args.chunk, n, args.chunk)) + [n] if args.chunk else [n]
            total_wall, peak = 0.0, 0.0
            for m in steps:
                res = run_cli([*run_args, "--max-examples", str(m)], timeout=args.cold_timeout)
                total_wall += res.wall_s
                peak = max(peak, res.maxrss_mb)
                s = summary(run_dir) if (run_dir / "summary.json").exists() else {}
                w = stage_window(run_dir)
                calls_s = (w["end"] - w["first_request"]) if w["end"] and w["first_request"] else float("nan")
                print(
                    f"cold run to {m} examples: rc {res.rc}, {res.wall_s:.1f} s (calls window {calls_s:.1f} s), "
                    f"peak RSS {res.maxrss_mb:.0f} MB, calls {s.get('calls')}",
                    flush=True,
                )
                if res.rc != 0:
                    sys.stderr.write(res.stderr[-3000:])
                    return 1
            cold = (total_wall, peak)
            print(f"cold run total: {total_wall:.1f} s ({n / total_wall:.1f} calls/s), peak RSS {peak:.0f} MB")
        before = server.stats()["total"]
        warm_walls, warm_rss, val_walls = [], [], []
        for i in range(args.repeat):
            warm = run_cli(run_args, timeout=1800).check()
            s = summary(run_dir)
            after = server.stats()["total"]
            print_warm(f"warm rerun {i + 1}", warm, s, after - before)
            before = after
            warm_walls.append(warm.wall_s)
            warm_rss.append(warm.maxrss_mb)
            val, _ = run_validate(cfg, f"validate {i + 1}", timeout=1800)
            val_walls.append(val.wall_s)
    rss, wall, vwall = max(warm_rss), statistics.median(warm_walls), max(val_walls)
    if cold:
        print(f"ratio warm/cold wall: {wall / cold[0]:.4f}; warm/cold peak RSS: {rss / cold[1]:.2f}")
    verdict = "MET" if rss < 1024 else "MISSED"
    print(
        f"goal warm rerun peak RSS < 1 GB: worst of {len(warm_rss)} {rss:.0f} MB {verdict} (median wall {wall:.1f} s)"
    )
    print(f"goal --validate < 10 s: worst {vwall:.2f} s {'MET' if vwall < 10 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
