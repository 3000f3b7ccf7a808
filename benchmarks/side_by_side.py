#!/usr/bin/env python3
"""One `run.py` command timed in two checkouts, old and new in turn (old, new, old, new, ...): wall seconds, CPU
seconds and peak RSS of each whole process (its children included: the tally's or the count's second process), and
the new/old ratios round by round, so that a machine whose speed drifts moves both sides of a round alike.
`{wd}` in the arguments is the side's workdir; each run starts in it (relative paths in a config are its own).

    .venv/bin/python benchmarks/side_by_side.py OLD_TREE OLD_WORKDIR NEW_TREE NEW_WORKDIR [--rounds 3] -- ARGS...
    .venv/bin/python benchmarks/side_by_side.py OLD_TREE NEW_TREE --workdir DIR [--rounds 3] -- ARGS...

Each side needs a workdir of its own when the command reads a cache written before ExecPlan 018 on one side and
after it on the other: a cache's rows are in its writer's format (pickled before, JSON after), so fill each with its
own tree, e.g.

    (cd OLD_TREE && .venv/bin/python benchmarks/bench_warm_rerun.py --examples 300 --warm-runs 1 --keep)
    (cd NEW_TREE && .venv/bin/python benchmarks/bench_warm_rerun.py --examples 300 --warm-runs 1 --keep)
    .venv/bin/python benchmarks/side_by_side.py OLD_TREE /tmp/rubricrun-bench-A NEW_TREE /tmp/rubricrun-bench-B \\
        --rounds 5 -- --config {wd}/config.yaml --run-id warm

Two trees of the same cache format may share one workdir (`--workdir`): the benchmarks' own (RESULTS.md),
`bench_warm_rerun.py --keep` for 1,000 x 2 x 10 (and `--max-examples 300` on the same cache for 300 x 2 x 10),
`bench_memory.py --workdir` for 100k and 1M rows (`--validate` for the count). Every call must already be cached:
the script only times; a run that exits with another code than 0 or 3 is reported and stops it.

Prints each round's wall time, CPU and peak RSS per side (as os.wait4 reports them for run.py), then for wall and
CPU the median of each side and the median of the per-round ratios new / old (the figure to read on a busy machine:
on a loaded one, CPU moves less than wall).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trees", type=Path, nargs="+", help="OLD_TREE OLD_WORKDIR NEW_TREE NEW_WORKDIR, or OLD NEW")
    ap.add_argument("--workdir", type=Path, help="one workdir for both sides (with OLD_TREE NEW_TREE)")
    ap.add_argument("--rounds", "--runs", dest="rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=3600)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a, args = ap.parse_args(argv[:cut]), argv[cut + 1 :]  # after --: run.py's arguments ({wd}: the side's workdir)
    if len(a.trees) == 4 and a.workdir is None:
        sides = {"old": (a.trees[0], a.trees[1]), "new": (a.trees[2], a.trees[3])}
    elif len(a.trees) == 2 and a.workdir is not None:
        sides = {"old": (a.trees[0], a.workdir), "new": (a.trees[1], a.workdir)}
    else:
        ap.error("give OLD_TREE OLD_WORKDIR NEW_TREE NEW_WORKDIR, or OLD_TREE NEW_TREE --workdir DIR")
    common.banner(f"side by side: run.py {' '.join(args)}")
    walls: dict[str, list[float]] = {"old": [], "new": []}
    cpus: dict[str, list[float]] = {"old": [], "new": []}
    for r in range(1, a.rounds + 1):
        for side, (tree, wd) in sides.items():
            common.use_code(str(tree.resolve()))
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
