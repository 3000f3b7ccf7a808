"""Candidate-call throughput: rubricrun's real path against the raw `openai` client and bare `litellm.completion`.

    .venv/bin/python benchmarks/bench_throughput.py [--calls 2000] [--threads 64] [--latency 0.2] [--rounds 3]

One fake server (tests/fakeserver.py, its own process, 200 ms latency) answers four sides in turn, each in its own
fresh process and each making `--calls` calls with distinct prompts at `--threads` threads:
  (a) openai:    one shared `openai.OpenAI` client, max_retries=0;
  (b) litellm:   `litellm.completion(model, messages, api_base, api_key, timeout, num_retries=0, max_retries=0)`;
  (b') litellm+freeze: the same after `gc.freeze()` following the import, which rubricrun does itself (see
                 providers.import_litellm): against it the ratio shows the cost of rubricrun's own layers alone;
  (c) rubricrun: `python run.py --config ...` on a generic dataset of `--calls` examples, 1 candidate, no judges,
                 concurrency `--threads`, cache enabled in a fresh temp dir.
Timings, per side:
  submit->last reply: (a) and (b) only, first submit to last reply in the worker (imports excluded, the first
                      calls' lazy setup included);
  window:             first request's arrival at the server (its log) to the last reply (the worker's clock, or the
                      last candidate event in trace.jsonl): the same yardstick for all four sides;
  generation stage:   (c) only, run.log's 'N examples' line to the last candidate trace event (adds the lazy LiteLLM
                      import that rubricrun's first call pays, ~3-4 s);
  whole run.py:       (c) only, the subprocess from spawn to exit (startup, import, artifacts, summary);
  whole process:      (b) only, its worker subprocess from spawn to exit (interpreter, LiteLLM import, calls): the
                      like-for-like yardstick for whole run.py, since submit->last reply leaves the import out.
CPU ms per call: of the calls only (the workers' process_time around the pool) and of the whole process (user + sys
of the worker process, or of the run.py subprocess from os.wait4): less sensitive than wall time to other load on
a shared machine, since at 64 threads x 200 ms every side here is bound by its own CPU (the GIL), not by latency.
Ratios are the median over `--rounds` rounds of the per-round ratio; the rounds interleave the sides so that load
from other processes on the machine hits all of them alike. Goal: ours/litellm >= 0.85 (window / window). The server
log is checked for exactly `--calls` requests per side, all answered 200.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    FAKE_KEY,
    PY,
    FakeServer,
    banner,
    bench_env,
    read_jsonl,
    run_cli,
    setup_litellm,
    stage_window,
    summary,
    workdir,
    write_config,
    write_dataset,
)

TIMEOUT_S = 120.0


def _worker(kind: str, base_url: str, calls: int, threads: int) -> dict:
    """One baseline side, in this process: returns wall, CPU and errors of `calls` calls."""
    if kind == "openai":
        import openai

        client = openai.OpenAI(base_url=base_url, api_key=FAKE_KEY, max_retries=0, timeout=TIMEOUT_S)

        def call(i: int) -> str:
            r = client.chat.completions.create(
                model="bench-openai", messages=[{"role": "user", "content": f"openai side prompt {i}"}]
            )
            return r.choices[0].message.content or ""

    else:
        litellm = setup_litellm()
        if kind == "litellm_frozen":
            import gc

            gc.freeze()

        def call(i: int) -> str:
            r = litellm.completion(
                model="openai/bench-litellm",
                messages=[{"role": "user", "content": f"litellm side prompt {i}"}],
                api_base=base_url,
                api_key=FAKE_KEY,
                timeout=TIMEOUT_S,
                num_retries=0,
                max_retries=0,
            )
            return r.choices[0].message.content or ""

    errors = 0

    def safe(i: int) -> None:
        nonlocal errors
        try:
            call(i)
        except Exception:  # noqa: BLE001 - counted, reported
            errors += 1

    cpu0, t0 = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(safe, range(calls)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    ru = resource.getrusage(resource.RUSAGE_SELF)  # the whole process: interpreter start and imports included
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "proc_cpu_s": ru.ru_utime + ru.ru_stime,
        "errors": errors,
        "t_end": time.time(),
    }


def run_worker(kind: str, server: FakeServer, calls: int, threads: int) -> dict:
    cmd = [PY, __file__, "--worker", kind, "--base-url", server.base_url, "--calls", str(calls)]
    cmd += ["--threads", str(threads)]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=bench_env(), capture_output=True, text=True, timeout=1800, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["process_s"] = time.perf_counter() - t0  # spawn to exit: interpreter, LiteLLM import and calls
    return res


def first_arrival(server: FakeServer, calls: int, side: str) -> float:
    """When the first request of this side reached the server; checks the count and statuses, clears the log."""
    log = [r for r in server.requests() if r["method"] == "POST"]
    ok = sum(r["status"] == 200 for r in log)
    if len(log) != calls or ok != calls:
        print(f"  WARNING {side}: server saw {len(log)} requests ({ok} x 200), expected {calls} x 200")
    server.reset()
    return min(r["t"] for r in log)


NAMES = {
    "openai": "openai (submit->last reply)",
    "openai_w": "openai window",
    "litellm": "litellm (submit->last reply)",
    "litellm_w": "litellm window",
    "litellm_p": "litellm whole process",
    "litellmf_w": "litellm+freeze window",
    "ours_w": "rubricrun window",
    "ours_stage": "rubricrun generation stage",
    "ours_whole": "rubricrun whole run.py",
}
RATIOS = [  # (ours, baseline, what)
    ("ours_w", "litellm_w", "window / window (same yardstick)"),
    ("ours_w", "litellmf_w", "window / window, against litellm+freeze (our layers alone)"),
    ("ours_stage", "litellm", "generation stage / litellm submit->last reply"),
    ("ours_whole", "litellm", "whole run.py / litellm submit->last reply"),
    ("ours_whole", "litellm_p", "whole run.py / litellm whole process (both pay the LiteLLM import)"),
    ("ours_w", "openai_w", "window / window"),
    ("ours_stage", "openai", "generation stage / openai submit->last reply"),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--rounds", type=int, default=3, help="the four sides in turn, this many times (median)")
    ap.add_argument("--worker", choices=["openai", "litellm", "litellm_frozen"], help=argparse.SUPPRESS)
    ap.add_argument("--base-url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker, args.base_url, args.calls, args.threads)))
        return 0

    banner(f"throughput: {args.calls} calls, {args.threads} threads, server latency {args.latency} s")
    n = args.calls
    rates: dict[str, list[float]] = {k: [] for k in NAMES}
    print(f"{'':<48} {'CPU ms per call':>21}")
    print(f"{'round':<6} {'side':<30} {'wall s':>8} {'calls/s':>9} {'calls':>10} {'process':>10}")
    with FakeServer(latency=args.latency) as server:
        for rnd in range(1, args.rounds + 1):
            oa = run_worker("openai", server, n, args.threads)
            oa["window_s"] = oa["t_end"] - first_arrival(server, n, "openai")
            ll = run_worker("litellm", server, n, args.threads)
            ll["window_s"] = ll["t_end"] - first_arrival(server, n, "litellm")
            lf = run_worker("litellm_frozen", server, n, args.threads)
            lf["window_s"] = lf["t_end"] - first_arrival(server, n, "litellm+freeze")
            with workdir() as wd:
                data = write_dataset(wd / "data.jsonl", n, prefix=f"r{rnd}-")
                cfg = write_config(wd, server.base_url, data, concurrency=args.threads)
                res = run_cli(["--config", str(cfg), "--run-id", "tp"]).check()
                arrival = first_arrival(server, n, "rubricrun")
                run_dir = wd / "outputs" / "tp"
                s = summary(run_dir)
                w = stage_window(run_dir)
                errs = [e for e in read_jsonl(run_dir / "trace.jsonl") if e["status"] != "ok"]
            for e in errs[:3]:
                print(f"  rubricrun failed attempt (retried): {e['error']} after {e['latency_ms']:.0f} ms")
            assert w["end"] and w["stage_start"], "no generation stage found in run.log / trace.jsonl"
            walls = {
                "openai": (oa["wall_s"], (oa["cpu_s"], oa["proc_cpu_s"])),
                "openai_w": (oa["window_s"], None),
                "litellm": (ll["wall_s"], (ll["cpu_s"], ll["proc_cpu_s"])),
                "litellm_w": (ll["window_s"], None),
                "litellm_p": (ll["process_s"], None),
                "litellmf_w": (lf["window_s"], (lf["cpu_s"], lf["proc_cpu_s"])),
                "ours_w": (w["end"] - arrival, None),
                "ours_stage": (w["end"] - w["stage_start"], None),
                "ours_whole": (res.wall_s, (None, res.cpu_s)),
            }
            for key, (wall, cpu) in walls.items():
                rates[key].append(n / wall)
                calls_cpu, proc_cpu = cpu or (None, None)
                cpu_txt = f"{calls_cpu / n * 1000:10.1f}" if calls_cpu is not None else f"{'':>10}"
                cpu_txt += f" {proc_cpu / n * 1000:10.1f}" if proc_cpu is not None else ""
                print(f"{rnd:<6} {NAMES[key]:<30} {wall:8.2f} {n / wall:9.1f} {cpu_txt}")
            print(
                f"{rnd:<6} errors: openai {oa['errors']}, litellm {ll['errors']}, litellm+freeze {lf['errors']}, "
                f"rubricrun {s['calls']}; "
                f"rubricrun stage start to first request (LiteLLM import) {arrival - w['stage_start']:.2f} s",
                flush=True,
            )

    print(f"-- median of {args.rounds} round(s), calls/s:")
    for key, name in NAMES.items():
        print(f"   {name:<30} {statistics.median(rates[key]):7.1f}")
    print("-- ratios ours/baseline (median of the per-round ratios):")
    for ours, base, what in RATIOS:
        r = statistics.median(a / b for a, b in zip(rates[ours], rates[base], strict=True))
        print(f"   ours/{base.split('_')[0]:<8} {r:.3f}  {what}")
    r = statistics.median(a / b for a, b in zip(rates["ours_w"], rates["litellm_w"], strict=True))
    print(f"goal ours/litellm >= 0.85 (window / window): {r:.3f} {'MET' if r >= 0.85 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
