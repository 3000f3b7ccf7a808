"""Router: one candidate entry with `deployments:` over three servers, each enforcing its own rpm.

    .venv/bin/python benchmarks/bench_router.py [--examples 1800] [--rpm 300] [--servers 3] [--latency 0.1]
                                                [--strategy usage-based-routing-v2] [--workers 32] [--fail-one]
                                                [--code DIR]

Each fake server (tests/fakeserver.py, its own process) allows `--rpm` requests in any ROLLING 60 s window and
answers 429 with Retry-After beyond it. rubricrun runs `--examples` generic examples (judge-free: each row carries
a final answer) with one candidate whose `deployments:` are the servers, each `rpm: --rpm`: rubricrun paces the
entry at servers x rpm, and litellm.Router (`--strategy`) spreads the calls over the deployments. The baseline is
the sum of the limits. From the servers' logs:
  achieved rate / limit: accepted requests per minute, first to last accepted, over all servers / (servers x rpm)
                         (goal >= 0.9);
  429 share:             requests answered 429 / all requests (goal < 2 %);
plus each server's share and the most it accepted in any rolling 60 s. 1,800 examples at 900/min take about 120 s.
`--fail-one`: the last server answers 500 to every request (a dead node); the limit is then the others' sum.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from common import KEY_ENV, FakeServer, banner, max_in_window, run_cli, summary, workdir, write_dataset  # noqa: E402


def write_router_config(wd: Path, urls: list[str], data: Path, rpm: float, strategy: str, workers: int) -> Path:
    deployments = [{"model": "openai/bench-router", "api_base": u, "api_key_env": KEY_ENV, "rpm": rpm} for u in urls]
    entry = {"name": "pool", "deployments": deployments, "router": {"strategy": strategy}}
    return common.save_config(wd, data, [entry], workers=workers)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=1800)
    ap.add_argument("--rpm", type=float, default=300.0)
    ap.add_argument("--servers", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--strategy", default="usage-based-routing-v2")
    ap.add_argument("--workers", type=int, default=32)
    ap.add_argument("--fail-one", action="store_true", help="the last server answers 500 to everything")
    ap.add_argument("--code", default=None, help="run this checkout's run.py instead")
    args = ap.parse_args()
    common.use_code(args.code)
    n, rpm, k = args.examples, args.rpm, args.servers
    limit = rpm * (k - 1 if args.fail_one else k)
    banner(f"router: {n} examples over {k} servers x rpm {rpm:g} (limit {limit:g}/min), strategy {args.strategy}")
    print(f"run.py: {common.RUN_PY}; expected duration at the limit: {(n - 1) * 60 / limit:.1f} s", flush=True)
    with ExitStack() as stack:
        dead = ["--rule", "bench-router:500"] if args.fail_one else []
        servers = [
            stack.enter_context(FakeServer(latency=args.latency, rpm=rpm, extra=dead if i == k - 1 else None))
            for i in range(k)
        ]
        wd = stack.enter_context(workdir())
        data = write_dataset(wd / "data.jsonl", n)
        cfg = write_router_config(wd, [s.base_url for s in servers], data, rpm, args.strategy, args.workers)
        res = run_cli(["--config", str(cfg), "--run-id", "router"], timeout=max(600, n * 60 / limit * 3)).check()
        logs = [sorted((r for r in s.requests() if r["method"] == "POST"), key=lambda r: r["t"]) for s in servers]
        s = summary(wd / "outputs" / "router")
        rows = (wd / "outputs" / "router" / "responses.jsonl").read_text(encoding="utf-8").splitlines()
        bad_rows = sum(json.loads(line)["status"] != "ok" for line in rows if line.strip())

    every = sorted((r for log in logs for r in log), key=lambda r: r["t"])
    ok = [r["t"] for r in every if r["status"] == 200]
    limited = sum(r["status"] == 429 for r in every)
    if args.fail_one:
        every = [r for log in logs[:-1] for r in log]  # the 429 share among the live servers' requests
    span = ok[-1] - ok[0]
    rate = (len(ok) - 1) / span * 60 if span > 0 else float("nan")
    share = limited / len(every)
    print(f"rubricrun: rc {res.rc}, wall {res.wall_s:.1f} s, calls {s['calls']}, response rows in error {bad_rows}")
    for i, log in enumerate(logs):
        mine = [r["t"] for r in log if r["status"] == 200]
        print(f"server {i}: {len(log)} requests, {len(mine)} accepted, {sum(r['status'] == 429 for r in log)} 429s, "
              f"max accepted in any rolling 60 s: {max_in_window(mine):.0f} (limit {rpm:g})")  # fmt: skip
    print(f"achieved rate: {rate:.1f}/min over {span:.1f} s -> {rate / limit:.3f} of the limit {limit:g}")
    print(f"goal achieved/limit >= 0.9: {rate / limit:.3f} {'MET' if rate / limit >= 0.9 else 'MISSED'}")
    print(f"goal 429 share < 2%: {100 * share:.2f}% ({limited} of {len(every)}) {'MET' if share < 0.02 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
