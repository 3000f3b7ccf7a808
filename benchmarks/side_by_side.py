#!/usr/bin/env python3
"""One `run.py` command timed in two checkouts, old and new in turn, each in its own workdir: a before/after on one
machine, in one process (ExecPlan 018). `{wd}` in the arguments is the side's workdir.

    .venv/bin/python benchmarks/side_by_side.py OLD_TREE OLD_WORKDIR NEW_TREE NEW_WORKDIR [--rounds 3] -- ARGS...

Each side needs a workdir of its own when the command reads a cache: a cache's rows are in its writer's format
(pickled before ExecPlan 018, JSON after), so fill each with its own tree, e.g.

    (cd OLD_TREE && .venv/bin/python benchmarks/bench_warm_rerun.py --examples 300 --warm-runs 1 --keep)
    (cd NEW_TREE && .venv/bin/python benchmarks/bench_warm_rerun.py --examples 300 --warm-runs 1 --keep)
    .venv/bin/python benchmarks/side_by_side.py OLD_TREE /tmp/rubricrun-bench-A NEW_TREE /tmp/rubricrun-bench-B \\
        --rounds 5 -- --config {wd}/config.yaml --run-id warm

Prints each round's wall time, CPU and peak RSS per side (as os.wait4 reports them for run.py), then for wall and
CPU the median of each side and the median of the per-round ratios new / old (the figure to read on a busy machine:
both sides of a round ran minutes apart at most; on a loaded one, CPU moves less than wall).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old_tree", type=Path)
    ap.add_argument("old_wd", type=Path)
    ap.add_argument("new_tree", type=Path)
    ap.add_argument("new_wd", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=3600)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a, args = ap.parse_args(argv[:cut]), argv[cut + 1 :]  # after --: run.py's arguments ({wd}: the side's workdir)
    common.banner(f"side by side: run.py {' '.join(args)}")
    sides = {"old": (a.old_tree, a.old_wd), "new": (a.new_tree, a.new_wd)}
    walls: dict[str, list[float]] = {"old": [], "new": []}
    cpus: dict[str, list[float]] = {"old": [], "new": []}
    for r in range(1, a.rounds + 1):
        for side, (tree, wd) in sides.items():
            common.use_code(str(tree))
            res = common.run_cli([x.replace("{wd}", str(wd)) for x in args], timeout=a.timeout, cwd=wd)
            if res.rc not in (0, 3):
                print(res.stderr[-2000:])
                return 1
            walls[side].append(res.wall_s)
            cpus[side].append(res.cpu_s)
            print(
                f"round {r} {side}: {res.wall_s:.2f} s, CPU {res.cpu_s:.1f} s, peak RSS {res.maxrss_mb:.0f} MB",
                flush=True,
            )
    for name, figs in (("wall", walls), ("CPU", cpus)):
        ratios = [n / o for o, n in zip(figs["old"], figs["new"], strict=True)]
        old, new = statistics.median(figs["old"]), statistics.median(figs["new"])
        print(
            f"{name}: median old {old:.2f} s, new {new:.2f} s; per-round new/old {', '.join(f'{x:.3f}' for x in ratios)}"
        )
        print(f"{name}: median of per-round ratios new/old {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
