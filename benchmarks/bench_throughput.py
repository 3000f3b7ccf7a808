"""Candidate-call throughput: rubricrun's real path against the raw `openai` client and bare `litellm.completion`.

    .venv/bin/python benchmarks/bench_throughput.py [--calls 2000] [--threads 64] [--latency 0.2] [--rounds 3]

One fake server (tests/fakeserver.py, its own process, 200 ms latency) answers three sides in turn, each in its own
fresh process and each making `--calls` calls with distinct prompts at `--threads` threads:
  (a) openai:    one shared `openai.OpenAI` client, max_retries=0;
  (b) litellm:   `litellm.completion(model, messages, api_base, api_key, timeout, num_retries=0, max_retries=0)`;
  (c) rubricrun: `python run.py --config ...` on a generic dataset of `--calls` examples, 1 candidate, no judges,
                 concurrency `--threads`, cache enabled in a fresh temp dir.
(a) and (b) are timed from the first submit to the last reply (imports excluded). (c) is reported three ways:
  calls window:     first request start to last reply, from trace.jsonl (comparable with (a) and (b));
  generation stage: run.log's 'N examples' line to the last candidate trace event (adds the lazy LiteLLM import
                    that the first call pays, ~3 s);
  whole run.py:     the subprocess from spawn to exit (startup, import, artifacts, summary).
Ratios are the median over `--rounds` rounds of the per-round ratio; the rounds interleave the sides so that load
from other processes on the machine hits all of them alike. Goal: ours/litellm >= 0.85. The server log is checked
for exactly `--calls` requests per side, all answered 200.
"""

from __future__ import annotations

import argparse
import json
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
    return {"wall_s": wall, "cpu_s": cpu, "errors": errors}


def run_worker(kind: str, server: FakeServer, calls: int, threads: int) -> dict:
    cmd = [PY, __file__, "--worker", kind, "--base-url", server.base_url, "--calls", str(calls)]
    cmd += ["--threads", str(threads)]
    out = subprocess.run(cmd, env=bench_env(), capture_output=True, text=True, timeout=1800, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_server(server: FakeServer, calls: int, side: str) -> dict:
    st = server.stats()
    ok = st["by_status"].get("200", 0)
    if st["total"] != calls or ok != calls:
        print(f"  WARNING {side}: server saw {st['total']} requests ({st['by_status']}), expected {calls} x 200")
    server.reset()
    return st


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--rounds", type=int, default=3, help="the three sides in turn, this many times (median)")
    ap.add_argument("--worker", choices=["openai", "litellm"], help=argparse.SUPPRESS)
    ap.add_argument("--base-url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker, args.base_url, args.calls, args.threads)))
        return 0

    banner(f"throughput: {args.calls} calls, {args.threads} threads, server latency {args.latency} s")
    n = args.calls
    names = ["openai", "litellm", "rubricrun calls window", "rubricrun generation stage", "rubricrun whole run.py"]
    rates: dict[str, list[float]] = {k: [] for k in names}
    print(f"{'round':<6} {'side':<28} {'wall s':>8} {'calls/s':>9} {'CPU ms/call':>12}")
    with FakeServer(latency=args.latency) as server:
        for rnd in range(1, args.rounds + 1):
            oa = run_worker("openai", server, n, args.threads)
            check_server(server, n, "openai")
            ll = run_worker("litellm", server, n, args.threads)
            check_server(server, n, "litellm")
            with workdir() as wd:
                data = write_dataset(wd / "data.jsonl", n, prefix=f"r{rnd}-")
                cfg = write_config(wd, server.base_url, data, concurrency=args.threads)
                res = run_cli(["--config", str(cfg), "--run-id", "tp"]).check()
                check_server(server, n, "rubricrun")
                run_dir = wd / "outputs" / "tp"
                s = summary(run_dir)
                w = stage_window(run_dir)
            nan = float("nan")
            stage_s = (w["end"] - w["stage_start"]) if w["end"] and w["stage_start"] else nan
            calls_s = (w["end"] - w["first_request"]) if w["end"] and w["first_request"] else nan
            rows = [
                ("openai", oa["wall_s"], oa["cpu_s"]),
                ("litellm", ll["wall_s"], ll["cpu_s"]),
                ("rubricrun calls window", calls_s, None),
                ("rubricrun generation stage", stage_s, None),
                ("rubricrun whole run.py", res.wall_s, res.cpu_s),
            ]
            for name, wall, cpu in rows:
                rates[name].append(n / wall)
                cpu_txt = f"{cpu / n * 1000:12.1f}" if cpu is not None else f"{'':>12}"
                print(f"{rnd:<6} {name:<28} {wall:8.2f} {n / wall:9.1f} {cpu_txt}")
            print(
                f"{rnd:<6} errors: openai {oa['errors']}, litellm {ll['errors']}, rubricrun {s['calls']}; "
                f"LiteLLM import + pool start inside the stage {stage_s - calls_s:.2f} s",
                flush=True,
            )

    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"-- median of {args.rounds} round(s), calls/s: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items()))
    for base in ("openai", "litellm"):
        parts = "   ".join(
            f"{k.split(' ', 1)[1]} {statistics.median(r / b for r, b in zip(rates[k], rates[base], strict=True)):.3f}"
            for k in names[2:]
        )
        print(f"ratio ours/{base:<8}: {parts}")
    for k in names[2:4]:
        r = statistics.median(a / b for a, b in zip(rates[k], rates["litellm"], strict=True))
        print(f"goal ours/litellm >= 0.85 ({k.split(' ', 1)[1]}): {r:.3f} {'MET' if r >= 0.85 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
