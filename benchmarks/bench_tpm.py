"""TPM: rubricrun's `tpm` against a server that enforces tokens per minute.

    .venv/bin/python benchmarks/bench_tpm.py [--calls 1500] [--tpm 24000] [--max-tokens 100] [--latency 0.1]

The fake server (tests/fakeserver.py, its own process) allows `--tpm` tokens in any ROLLING 60 s window: a request
is admitted while the window's tokens plus its prompt tokens fit, and its completion tokens join the window (429 with
Retry-After beyond it, x-ratelimit-* headers on every reply). rubricrun runs `--calls` candidate calls (generic
dataset, one candidate with `tpm: --tpm` and `max_tokens: --max-tokens`, no judges, concurrency 64, fresh cache).
Each call reserves its prompt estimate plus max_tokens (about 3.5 times what it uses with the defaults) and is settled
by the usage of its reply. The baseline is the limit itself. From the server's log (tokens = the reply's usage):
  tokens used / limit: accepted tokens per minute from the first to the last accepted request / tpm (goal >= 0.9);
  429 share:           requests answered 429 / all requests (goal < 2 %);
plus the most tokens in any rolling 60 s. 1,500 calls of about 39 tokens at 24,000/min take about 150 s.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from common import FakeServer, banner, max_in_window, model_entry, run_cli, summary, workdir, write_dataset  # noqa: E402


def write_tpm_config(wd: Path, base_url: str, data: Path, tpm: float, max_tokens: int, workers: int) -> Path:
    cand = model_entry("cand", "openai/bench-tpm", base_url, tpm=tpm, params={"max_tokens": max_tokens})
    return common.save_config(wd, data, [cand], workers=workers)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1500)
    ap.add_argument("--tpm", type=float, default=24000.0)
    ap.add_argument("--max-tokens", type=int, default=100)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--code", default=None, help="run this checkout's run.py instead")
    args = ap.parse_args()
    common.use_code(args.code)
    n, tpm = args.calls, args.tpm
    banner(f"tpm: {n} calls, server and rubricrun tpm {tpm:g}, max_tokens {args.max_tokens}")
    with FakeServer(latency=args.latency, extra=["--tpm", str(tpm)]) as server, workdir() as wd:
        data = write_dataset(wd / "data.jsonl", n)
        cfg = write_tpm_config(wd, server.base_url, data, tpm, args.max_tokens, args.concurrency)
        res = run_cli(["--config", str(cfg), "--run-id", "tpm"], timeout=900).check()
        log = sorted((r for r in server.requests() if r["method"] == "POST"), key=lambda r: r["t"])
        s = summary(wd / "outputs" / "tpm")

    ok = [r for r in log if r["status"] == 200]
    times, tokens = [r["t"] for r in ok], [float(r["tokens"]) for r in ok]
    limited = [r for r in log if r["status"] == 429]
    span = times[-1] - times[0]
    # Tokens per minute over the span: the last request's tokens are the ones that end it, not inside it.
    rate = (sum(tokens) - tokens[-1]) / span * 60 if span > 0 else float("nan")
    share = len(limited) / len(log)
    print(f"server requests: {len(log)} ({len(ok)} x 200, {len(limited)} x 429); tokens accepted {sum(tokens):.0f}, "
          f"{sum(tokens) / len(ok):.1f} a request")  # fmt: skip
    print(f"rubricrun: rc {res.rc}, wall {res.wall_s:.1f} s, calls {s['calls']}")
    print(f"max tokens in any rolling 60 s: {max_in_window(times, 60.0, tokens):.0f} (limit {tpm:g})")
    if limited:
        t0 = log[0]["t"]
        tens = collections.Counter(int((r["t"] - t0) // 10) * 10 for r in limited)
        print("429s by 10 s of the run: " + ", ".join(f"{k}-{k + 10}s: {v}" for k, v in sorted(tens.items())))
    print(f"tokens used: {rate:.0f}/min over {span:.1f} s -> {rate / tpm:.3f} of the limit")
    print(f"goal tokens used/limit >= 0.9: {rate / tpm:.3f} {'MET' if rate / tpm >= 0.9 else 'MISSED'}")
    print(f"goal 429 share < 2%: {100 * share:.2f}% {'MET' if share < 0.02 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
