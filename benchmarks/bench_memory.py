"""Memory and speed at scale (issues 13 and 20): peak RSS of a warm rerun of 1,000,000 generic examples against a
100,000 one (goal: under 2 x); the warm rerun's time (issue 20, default bootstrap_samples: 100,000 under 15 s,
1,000,000 under 150 s); `--validate` on 1,000,000 examples (issue 20: under 30 s).

    .venv/bin/python benchmarks/bench_memory.py [--sizes 100000 1000000] [--workdir DIR] [--skip-warm]
    .venv/bin/python benchmarks/bench_memory.py --tally-only [--sizes 100000 1000000]

For each size: `--sizes` generic rows with a final answer (scored judge-free, no judge), one candidate, no judges
(benchmarks/common.py write_dataset / write_config). A cold run of a million calls is too slow on a 2-core machine,
so the cache is filled directly: for every example, the candidate's request is built as the run builds it
(tests/oracles.first_turns) and its reply is stored under that request's cache key through ResponseCache, the
store CachingProvider writes, with the text the fake server would send ("Answer to: ..."). Then, each in its own
process (peak RSS from os.wait4: the larger of run.py and its tally process; their sampled sum is printed too):
  warm rerun:  `python run.py --run-id mem` with the fake server up; it must make zero server requests (checked);
  validate:    `python run.py --validate`; it must count every call as cached.
`--bootstrap N` sets run.bootstrap_samples (the summary's bootstraps cost N x examples of CPU, whatever the
memory). `--tally-only` measures results/tally.Tally alone instead: a child process feeds it N synthetic examples (one
response each, a 300-character text, one judge-free verdict), then writes summary, export (sft) and report.html,
and prints its peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    PY,
    REPO,
    FakeServer,
    banner,
    bench_env,
    print_warm,
    run_cli,
    run_validate,
    summary,
    write_config,
    write_dataset,
)


def fill_cache(cfg_path: Path) -> int:
    """Store every candidate reply of the config's run in its cache, as CachingProvider would after a call."""
    sys.path[:0] = [str(REPO / "src"), str(REPO / "tests")]
    from oracles import first_turns

    from rubricrun.config import load_config
    from rubricrun.engine.preflight import preflight
    from rubricrun.providers.cache import cache_key
    from rubricrun.providers.stack import open_cache
    from rubricrun.types import LLMResponse, Usage

    os.environ.update(bench_env())  # the fake key the config names (preflight checks it is set)
    cfg = load_config(cfg_path)
    cache = open_cache(cfg)
    assert cache is not None
    n = 0

    def chunks() -> Any:
        chunk = []
        for ex in preflight(cfg, None).examples:
            chunk.append(ex)
            if len(chunk) == 1000:
                yield chunk
                chunk = []
        yield chunk

    try:
        for chunk in chunks():
            for t in first_turns(cfg, chunk):
                prompt = t.request.messages[-1]["content"]
                text = f"Answer to: {prompt[:60]}"
                usage = Usage(prompt_tokens=len(prompt) // 4 + 3, completion_tokens=len(text) // 4 + 1)
                usage = Usage(
                    usage.prompt_tokens, usage.completion_tokens, usage.prompt_tokens + usage.completion_tokens
                )
                reply = LLMResponse(text=text, finish_reason="stop", usage=usage, model=t.request.model.split("/")[-1])
                cache.set(cache_key(t.request), reply)
                n += 1
    finally:
        cache.close()
    return n


def measure_run(n: int, wd: Path, skip_warm: bool, boot: int) -> dict[str, float]:
    banner(f"memory: {n:,} generic examples, 1 candidate, no judges (workdir {wd})")
    wd.mkdir(parents=True, exist_ok=True)
    port_file = wd / "port.txt"  # api_base is part of the cache key: a reused workdir keeps its server port
    port = int(port_file.read_text()) if port_file.exists() else 0
    out: dict[str, float] = {}
    with FakeServer(latency=0.0, port=port) as server:
        port_file.write_text(server.base_url.rsplit(":", 1)[1].split("/")[0])
        data = wd / "data.jsonl"
        if not data.exists():
            write_dataset(data, n)
        cfg = write_config(wd, server.base_url, data, concurrency=64, run_extra={"bootstrap_samples": boot})
        marker = wd / "filled.txt"
        if not marker.exists():
            t0 = time.perf_counter()
            filled = fill_cache(cfg)
            marker.write_text(str(filled))
            print(f"cache filled directly: {filled:,} replies in {time.perf_counter() - t0:.1f} s", flush=True)
        val, _ = run_validate(cfg, "validate", timeout=3600)
        out["validate_s"], out["validate_rss"] = val.wall_s, val.maxrss_mb
        if skip_warm:
            return out
        before = server.stats()["total"]
        warm = run_cli(["--config", str(cfg), "--run-id", "mem"], timeout=7200).check()
        s, after = summary(wd / "outputs" / "mem"), server.stats()["total"]
        print_warm("warm rerun", warm, s, after - before)
        out["warm_s"], out["warm_rss"] = warm.wall_s, warm.maxrss_mb
    return out


def tally_child(n: int, out_dir: str) -> None:
    """Feed a Tally n synthetic examples and write its results; print JSON with the peak RSS and timings."""
    sys.path.insert(0, str(REPO / "src"))
    from rubricrun.config import load_config
    from rubricrun.results.artifacts import Finished
    from rubricrun.results.tally import Tally
    from rubricrun.types import Example, Judgment, Response, Usage

    cfg = load_config(Path(out_dir) / "config.yaml")
    tally = Tally(cfg, "mem")
    t0 = time.perf_counter()
    for i in range(n):
        eid = f"gen/ex{i}"
        ex = Example(
            id=eid,
            dataset="gen",
            source=f"data.jsonl:{i + 1}",
            messages=({"role": "user", "content": f"Q {i}?"},),
            answer=str(i),
        )
        r = Response(
            id=f"{eid}#cand1#0",
            example_id=eid,
            candidate="cand1",
            model="openai/bench-cand-1",
            sample_index=0,
            status="ok",
            text="x" * 300,
            error=None,
            finish_reason="stop",
            usage=Usage(20, 80, 100),
            key=f"{i:064x}",
        )
        j = Judgment(
            id=f"{r.id}#correct",
            response_id=r.id,
            example_id=eid,
            candidate="cand1",
            criterion_id="correct",
            weight=1.0,
            judge="auto:answer",
            verdict="met" if i % 3 else "not_met",
            explanation="matched",
            error=None,
        )
        tally.take(Finished(ex, [r], [j], [], (b"", b"", b"", b"")))
    t_add = time.perf_counter() - t0
    rss_add = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    s = tally.summary()
    t_sum = time.perf_counter() - t0
    t0 = time.perf_counter()
    tally.export(Path(out_dir), ["sft"])
    tally.report(Path(out_dir), s)
    t_out = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "n": n,
                "add_s": t_add,
                "summary_s": t_sum,
                "export_report_s": t_out,
                "rss_after_add": rss_add,
                "peak_rss": rss,
                "report_kb": os.path.getsize(Path(out_dir) / "report.html") / 1024,
            }
        )
    )


def measure_tally(n: int, wd: Path, boot: int) -> dict[str, float]:
    wd.mkdir(parents=True, exist_ok=True)
    write_config(
        wd, "http://127.0.0.1:9/v1", write_dataset(wd / "data.jsonl", 1), run_extra={"bootstrap_samples": boot}
    )
    proc = subprocess.run(
        [PY, __file__, "--tally-child", str(n), str(wd)], capture_output=True, text=True, check=False, timeout=7200
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"tally child exited {proc.returncode}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        f"tally {n:,}: add {got['add_s']:.1f} s, summary {got['summary_s']:.1f} s, export+report "
        f"{got['export_report_s']:.1f} s, peak RSS after add {got['rss_after_add']:.0f} MB, peak RSS "
        f"{got['peak_rss']:.0f} MB, report.html {got['report_kb']:.0f} KB",
        flush=True,
    )
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--workdir", help="keep data, cache and outputs here, one folder per size (reused when filled)")
    ap.add_argument("--skip-warm", action="store_true", help="validate only")
    ap.add_argument("--tally-only", action="store_true", help="measure results/tally.Tally alone")
    ap.add_argument("--bootstrap", type=int, default=1000, help="run.bootstrap_samples (CPU grows with it x examples)")
    ap.add_argument("--tally-child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.tally_child:
        tally_child(int(args.tally_child[0]), args.tally_child[1])
        return 0
    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="rubricrun-bench-memory-"))
    try:
        results = {}
        for n in args.sizes:
            wd = root / f"n{n}"
            if args.tally_only:
                results[n] = measure_tally(n, wd / "tally", args.bootstrap)
            else:
                results[n] = measure_run(n, wd, args.skip_warm, args.bootstrap)
        small, big = min(args.sizes), max(args.sizes)
        key = "peak_rss" if args.tally_only else "warm_rss"
        if small != big and key in results[small]:
            ratio = results[big][key] / results[small][key]
            verdict = "MET" if ratio < 2 else "MISSED"
            print(f"goal peak RSS {big:,} / {small:,} < 2: {ratio:.2f} {verdict}")
        if not args.tally_only:
            print_goals(results, args.bootstrap)
        return 0
    finally:
        if not args.workdir:
            shutil.rmtree(root, ignore_errors=True)


WARM_GOALS_S = {100_000: 15.0, 1_000_000: 150.0}  # issue 20, at the default bootstrap_samples (1,000)
VALIDATE_GOALS_S = {1_000_000: 30.0}


def print_goals(results: dict[int, dict[str, float]], boot: int) -> None:
    def line(what: str, n: int, got: float, goal: float) -> None:
        print(f"goal {what} on {n:,} < {goal:g} s: {got:.1f} s {'MET' if got < goal else 'MISSED'}")

    for n, r in sorted(results.items()):
        if "warm_s" in r and n in WARM_GOALS_S and boot == 1000:
            line("warm rerun", n, r["warm_s"], WARM_GOALS_S[n])
        if n in VALIDATE_GOALS_S:
            line("--validate", n, r["validate_s"], VALIDATE_GOALS_S[n])


if __name__ == "__main__":
    sys.exit(main())
