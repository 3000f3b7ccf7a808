"""Past one process: calls/s of the threads engine against the dask engine with 1, 2, 4, 8 workers, in one run.

    .venv/bin/python benchmarks/bench_executor.py [--calls 6000] [--workers 1,2,4,8] [--servers 4] [--latency 0]

Every side is a cold run (a fresh cache) of `--calls` candidate calls with distinct prompts (generic rows, one
candidate, no judge: the rows are scored by their answers; `--criteria N` adds one judge and N criteria a row),
against `--servers` fake server processes sharing one port (tests/fakeserver.py --reuse-port, `--latency` seconds a
reply), so that the server is not the limit:
  threads     `python run.py` with the threads engine, run.concurrency `--concurrency`;
  dask W      the same with `executor: {engine: dask, workers: W}` (a local cluster the run starts), run.concurrency
              `--per-worker` (with dask it is per worker, so the run keeps W x that many calls in flight);
  bare 1, bare N   the reference: `--calls` bare `litellm.completion` calls from 1 and from N processes (N = the
              largest W) of `--bare-threads` threads each, split evenly, with the same prompts' shape;
  ceiling     the run's own process alone: `execute()` in a process of its own whose Dask workers answer at once
              (no LiteLLM, no HTTP), `--ceiling-calls` attempts; and the same with the threads engine answering at
              once (the run's own path without Dask).
Rates are calls/s over the steady part of each side: completions 10 % .. 90 % by their timestamps (trace.jsonl for
a run, the workers' clocks for bare LiteLLM), so start-up (a cluster, LiteLLM's import) and the tail are left out;
the whole run.py wall (spawn to exit) is printed beside it. Ratios are against the threads side (and dask N against
bare N). Goals (issue 30): 2 cores: dask 2 >= 1.3 x threads; 16 cores: dask 8 >= 6 x threads and >= 0.8 x bare 8,
the run's process >= 3,000 attempts/s.

Runs on a bare machine with this repository, Python and the wheels of benchmarks/device_executor.sh (LiteLLM, Dask
and rubricrun's requirements): no network, no other tool.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    FAKE_KEY,
    KEY_ENV,
    PY,
    REPO,
    banner,
    bench_env,
    read_jsonl,
    run_cli,
    workdir,
    write_config,
    write_dataset,
)

TIMEOUT_S = 120.0


# --------------------------------------------------------------------------------------------------
# Fake servers: several processes on one port (SO_REUSEPORT)


class Servers:
    def __init__(self, n: int, latency: float) -> None:
        with socket.socket() as s:  # a free port; the servers bind it with SO_REUSEPORT
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.procs = []
        for _ in range(n):
            cmd = [PY, str(REPO / "tests" / "fakeserver.py"), "--host", "127.0.0.1", "--port", str(port)]
            cmd += ["--latency", str(latency), "--reuse-port"]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=bench_env())
            assert p.stdout is not None
            line = p.stdout.readline().strip()
            if not line.startswith("http://127.0.0.1:"):
                self.stop()
                raise RuntimeError(f"fake server did not start (got {line!r})")
            self.procs.append(p)
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


# --------------------------------------------------------------------------------------------------
# Rates


def with_executor(path: Path, executor: dict[str, Any]) -> None:
    cfg = yaml.safe_load(path.read_text())
    cfg["executor"] = executor
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))


def steady_rate(times: list[float]) -> float:
    """Completions per second between the 10 % and the 90 % completion."""
    times = sorted(times)
    if len(times) < 10:
        return float("nan")
    lo, hi = len(times) // 10, (len(times) * 9) // 10
    span = times[hi] - times[lo]
    return (hi - lo) / span if span > 0 else float("nan")


def paid_times(run_dir: Path) -> list[float]:
    return [e["ts"] for e in read_jsonl(run_dir / "trace.jsonl") if not e["cache_hit"] and e["status"] == "ok"]


# --------------------------------------------------------------------------------------------------
# Sides


def run_side(
    label: str, base_url: str, calls: int, criteria: int, executor: dict[str, Any] | None, conc: int
) -> dict[str, Any]:
    """One cold `python run.py`; its steady calls/s, whole wall, CPU of run.py itself, and the calls made."""
    per_example = 1 + criteria
    with workdir() as wd:
        data = write_dataset(wd / "data.jsonl", calls // per_example, criteria=criteria, prefix=f"{label}-")
        cfg = write_config(wd, base_url, data, judges=1 if criteria else 0, concurrency=conc, judge_workers=conc)
        if executor:
            with_executor(cfg, executor)
        res = run_cli(["--config", str(cfg), "--run-id", "x"], timeout=1800)
        if res.rc != 0:
            sys.stderr.write(res.stderr[-3000:])
            raise SystemExit(f"{label}: run.py exited {res.rc}")
        run_dir = wd / "outputs" / "x"
        times = paid_times(run_dir)
        s = json.loads((run_dir / "summary.json").read_text())
        trace = read_jsonl(run_dir / "trace.jsonl")
        workers = {e["worker"] for e in trace if e.get("worker")}
        for e in [e for e in trace if e["status"] != "ok"][:3]:  # a failed attempt says why (and how long it took)
            print(f"    {label}: failed attempt after {e['latency_ms']:.0f} ms: {e.get('error')}", flush=True)
        log = (run_dir / "run.log").read_text()
        batch = re.search(r"dask: \d+ attempts sent in \d+ exchanges \(([\d.]+) an exchange\)", log)
        up = re.search(r"dask: \d+ workers up in ([\d.]+) s", log)
    return {
        "batch": float(batch.group(1)) if batch else None,
        "up_s": float(up.group(1)) if up else None,
        "rate": steady_rate(times),
        "wall": res.wall_s,
        "cpu": res.cpu_s,
        "made": s["calls"]["made"],
        "errors": s["calls"]["errors"],
        "workers_seen": len(workers),
    }


def _bare_worker(base_url: str, calls: int, threads: int, tag: str) -> dict[str, Any]:
    """In this process: `calls` bare litellm.completion calls on `threads` threads; each call's end time."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import gc

    import litellm

    gc.freeze()  # as rubricrun does after its import (providers/litellm.py)
    litellm.suppress_debug_info = True
    litellm.telemetry = False
    ends: list[float] = []
    errors = 0

    def call(i: int) -> None:
        nonlocal errors
        try:
            litellm.completion(
                model="openai/bench-bare",
                messages=[
                    {"role": "user", "content": f"Write two sentences about topic number {tag}-{i} for a bench."}
                ],
                api_base=base_url,
                api_key=FAKE_KEY,
                timeout=TIMEOUT_S,
                num_retries=0,
                max_retries=0,
            )
            ends.append(time.time())
        except Exception:  # noqa: BLE001 - counted
            errors += 1

    cpu0 = time.process_time()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(call, range(calls)))
    return {"ends": ends, "errors": errors, "cpu": time.process_time() - cpu0}


def bare_side(base_url: str, calls: int, procs: int, threads: int) -> dict[str, Any]:
    """`procs` bare LiteLLM processes at once, `calls` in all."""
    cmds = [
        [PY, __file__, "--bare", "--base-url", base_url, "--calls", str(calls // procs), "--threads", str(threads),
         "--tag", f"{procs}-{i}"]
        for i in range(procs)
    ]  # fmt: skip
    t0 = time.perf_counter()
    running = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True, env=bench_env()) for c in cmds]
    outs = [json.loads(p.communicate(timeout=1800)[0].strip().splitlines()[-1]) for p in running]
    ends = [t for o in outs for t in o["ends"]]
    return {
        "rate": steady_rate(ends),
        "wall": time.perf_counter() - t0,
        "made": len(ends),
        "errors": sum(o["errors"] for o in outs),
        "cpu": sum(o["cpu"] for o in outs),
    }


# --------------------------------------------------------------------------------------------------
# The run's own ceiling: workers that answer at once


class Instant:
    """A provider that answers at once, without LiteLLM or HTTP: what the ceiling's workers (or threads) make."""

    on_rate_limit = None

    def generate(self, request: Any) -> Any:
        from rubricrun.types import LLMResponse, Usage

        text = '{"explanation": "ok", "criteria_met": true}' if request.role == "judge" else "Answer: 1"
        return LLMResponse(text=text, finish_reason="stop", usage=Usage(20, 10, 30), model=request.model)


def _ceiling(engine: str, workers: int, calls: int, criteria: int, conc: int) -> dict[str, Any]:
    """In this process: one cold run through execute() whose attempts are answered at once."""
    sys.path.insert(0, str(REPO / "src"))
    os.environ.setdefault(KEY_ENV, FAKE_KEY)
    import logging

    from rubricrun.config import load_config
    from rubricrun.engine.runner import execute
    from rubricrun.providers.executor import Threads

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("rubricrun").setLevel(logging.WARNING)
    if os.environ.get("BENCH_VERBOSE"):
        logging.getLogger("rubricrun").setLevel(logging.INFO)
    with workdir() as wd:
        data = write_dataset(wd / "data.jsonl", calls // (1 + criteria), criteria=criteria, prefix="ceil-")
        path = write_config(wd, "http://127.0.0.1:9/v1", data, judges=1 if criteria else 0, concurrency=conc,
                            judge_workers=conc)  # fmt: skip
        if engine == "dask":
            with_executor(path, {"engine": "dask", "workers": workers})
        cfg = load_config(path)
        if engine == "dask":
            from rubricrun.providers.dask_executor import DaskExecutor

            executor: Any = DaskExecutor.open(cfg, make=Instant, warm=lambda: None)
            executor.warm()  # the cluster up before the clock starts
        else:
            executor = Threads(make=Instant, warm=lambda: None)
        clock: list[tuple[float, float]] = []  # (time, this process's CPU) every 50 ms: for the steady part's CPU
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.05):
                clock.append((time.time(), time.process_time()))

        threading.Thread(target=sample, daemon=True).start()
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        try:
            out = execute(cfg, "ceil", executor=executor)
        finally:
            executor.close()
        wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
        done.set()
        times = sorted(paid_times(wd / "outputs" / "ceil"))
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    # The steady part's CPU an attempt: between the first and the last sample inside the window steady_rate reads
    # (10 % .. 90 % of the completions), so start-up and the end (rows closed, the report) are left out.
    lo, hi = times[len(times) // 10], times[len(times) * 9 // 10]
    inside = [(t, c) for t, c in clock if lo <= t <= hi]
    made = sum(inside[0][0] < t <= inside[-1][0] for t in times) if len(inside) > 1 else 0
    steady = 1000 * (inside[-1][1] - inside[0][1]) / made if made else float("nan")
    return {
        "rate": steady_rate(times),
        "wall": wall,
        "made": len(times),
        "cpu_ms": 1000 * cpu / max(1, len(times)),
        "steady_cpu_ms": steady,
        "rc": out.exit_code,
    }


def ceiling_side(engine: str, workers: int, calls: int, criteria: int, conc: int) -> dict[str, Any]:
    cmd = [PY, __file__, "--ceiling", engine, "--ceiling-workers", str(workers), "--calls", str(calls)]
    cmd += ["--criteria", str(criteria), "--per-worker", str(conc)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=bench_env(), timeout=1800, cwd=REPO)
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-3000:])
        raise SystemExit(f"ceiling {engine}: exited {out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------------


def _line(label: str, r: dict[str, Any], base: float | None = None, note: str = "") -> None:
    ratio = f"{r['rate'] / base:6.2f}x" if base else " " * 7
    extra = f"  errors {r['errors']}" if r.get("errors") else ""
    print(f"  {label:<22} {r['rate']:9.1f} calls/s {ratio}  wall {r['wall']:6.1f} s  made {r['made']:>6}{extra}{note}",
          flush=True)  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=6000, help="calls per side")
    ap.add_argument("--workers", default="1,2,4,8", help="dask sides: worker counts")
    ap.add_argument("--servers", type=int, default=4, help="fake server processes on one port")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds the server takes per reply")
    ap.add_argument("--criteria", type=int, default=0, help="criteria a row, judged by one judge (0: no judge)")
    ap.add_argument("--concurrency", type=int, default=64, help="threads engine: run.concurrency")
    ap.add_argument("--per-worker", type=int, default=32, help="dask: run.concurrency (per worker)")
    ap.add_argument("--bare-threads", type=int, default=64)
    ap.add_argument("--ceiling-calls", type=int, default=20000)
    ap.add_argument("--ceiling-workers", type=int, default=0, help="ceiling: workers (default: the largest W)")
    ap.add_argument("--skip", default="", help="comma-separated sides to leave out: threads, dask, bare, ceiling")
    ap.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ceiling", choices=["dask", "threads"], help=argparse.SUPPRESS)
    ap.add_argument("--base-url", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=64, help=argparse.SUPPRESS)
    ap.add_argument("--tag", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.bare:
        print(json.dumps(_bare_worker(args.base_url, args.calls, args.threads, args.tag)))
        return 0
    if args.ceiling:
        w = args.ceiling_workers or 1
        print(json.dumps(_ceiling(args.ceiling, w, args.calls, args.criteria, args.per_worker)))
        return 0

    counts = [int(w) for w in args.workers.split(",") if w]
    skip = set(args.skip.split(","))
    n_max = max(counts)
    banner(
        f"executor: {args.calls} calls a side, {args.servers} servers at {args.latency} s, criteria {args.criteria}, "
        f"threads {args.concurrency}, dask {args.per_worker} a worker"
    )
    results: dict[str, dict[str, Any]] = {}
    servers = Servers(args.servers, args.latency)
    try:
        print(f"servers: {servers.base_url} x {args.servers}", flush=True)
        if "threads" not in skip:
            results["threads"] = run_side("threads", servers.base_url, args.calls, args.criteria, None,
                                          args.concurrency)  # fmt: skip
            _line("threads", results["threads"])
        base = results.get("threads", {}).get("rate")
        if "dask" not in skip:
            for w in counts:
                ex = {"engine": "dask", "workers": w}
                r = results[f"dask {w}"] = run_side(f"dask{w}", servers.base_url, args.calls, args.criteria, ex,
                                                    args.per_worker)  # fmt: skip
                _line(f"dask {w}", r, base, f"  ({r['workers_seen']} workers in the trace, {r['batch']} attempts an "
                                            f"exchange, cluster up in {r['up_s']} s)")  # fmt: skip
        if "bare" not in skip:
            for procs in sorted({1, n_max}):
                r = results[f"bare {procs}"] = bare_side(servers.base_url, args.calls, procs, args.bare_threads)
                _line(f"bare litellm {procs}", r, base)
    finally:
        servers.stop()
    if "ceiling" not in skip:
        cw = args.ceiling_workers or n_max
        for engine in ("threads", "dask"):
            r = results[f"ceiling {engine}"] = ceiling_side(engine, cw, args.ceiling_calls, args.criteria,
                                                            args.per_worker)  # fmt: skip
            where = f"{cw} instant workers" if engine == "dask" else "instant threads"
            print(f"  ceiling {engine:<14} {r['rate']:9.1f} attempts/s (run's process, {where}), "
                  f"CPU {r['cpu_ms']:.3f} ms an attempt ({r['steady_cpu_ms']:.3f} steady), made {r['made']}", flush=True)  # fmt: skip
    _goals(results, counts)
    return 0


def _goals(results: dict[str, dict[str, Any]], counts: list[int]) -> None:
    def rate(k: str) -> float | None:
        return results[k]["rate"] if k in results else None

    cores = os.cpu_count() or 1
    checks = []
    t = rate("threads")
    if t and rate("dask 2"):
        checks.append(("dask 2 / threads", rate("dask 2") / t, 1.3, cores <= 4))  # type: ignore[operator]
    if t and rate("dask 8"):
        checks.append(("dask 8 / threads", rate("dask 8") / t, 6.0, cores >= 16))  # type: ignore[operator]
    if rate("dask 8") and rate("bare 8"):
        checks.append(("dask 8 / bare litellm 8", rate("dask 8") / rate("bare 8"), 0.8, cores >= 16))  # type: ignore[operator]
    n = max(counts)
    if rate(f"dask {n}") and rate(f"bare {n}") and n != 8:
        checks.append((f"dask {n} / bare litellm {n}", rate(f"dask {n}") / rate(f"bare {n}"), 0.8, False))  # type: ignore[operator]
    if rate("ceiling dask"):
        checks.append(("run's process attempts/s", rate("ceiling dask"), 3000.0, cores >= 16))
    print(f"goals ({cores} cores; a goal is judged on the machine it is set for):")
    for what, value, goal, applies in checks:
        verdict = ("MET" if value >= goal else "MISSED") if applies else "(not this machine's goal)"
        print(f"  {what:<28} {value:9.2f}  goal >= {goal:g}  {verdict}")


if __name__ == "__main__":
    sys.exit(main())
