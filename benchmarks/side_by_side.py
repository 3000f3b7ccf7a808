#!/usr/bin/env python3
"""Two checkouts' `run.py` on one workload, in turn (old, new, old, new, ...): wall seconds, CPU seconds and peak RSS
of each whole process (its children included: the tally's or the count's second process), and the new/old ratio
pair by pair, so that a machine whose speed drifts moves both sides of a pair alike.

    .venv/bin/python benchmarks/side_by_side.py OLD_TREE NEW_TREE --workdir DIR [--runs 3] -- RUN_PY_ARGS ...

RUN_PY_ARGS are given to each tree's run.py, from DIR (relative paths in a config are DIR's). The workdirs are the
benchmarks' own (RESULTS.md): `bench_warm_rerun.py --keep` for 1,000 x 2 x 10 (and `--max-examples 300` on the same
cache for 300 x 2 x 10), `bench_memory.py --workdir` for 100k and 1M rows (`--validate` for the count). Every call
must already be cached: the script only times; a run that exits non-zero is reported and stops it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import bench_env  # noqa: E402


def timed(tree: Path, args: list[str], cwd: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of `python TREE/run.py ARGS`, as os.wait4 reports the process (its waited-for
    children included: CPU summed, RSS the largest)."""
    env = bench_env()
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, str(tree / "run.py"), *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            sys.exit(f"{tree}: run.py exited {proc.returncode}:\n{err.read().decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=3)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a, args = ap.parse_args(argv[:cut]), argv[cut + 1 :]
    print(f"# {' '.join(args)} in {a.workdir} ({time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.1f})")
    rows: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
    for i in range(a.runs):
        for side, tree in (("old", a.old), ("new", a.new)):
            wall, cpu, peak = timed(tree.resolve(), args, a.workdir)
            rows[side].append((wall, cpu))
            print(f"run {i + 1} {side}: wall {wall:7.2f} s  cpu {cpu:7.2f} s  peak {peak:6.1f} MB")
    ratios = [n[0] / o[0] for o, n in zip(rows["old"], rows["new"], strict=True)]
    med = {side: statistics.median(w for w, _ in r) for side, r in rows.items()}
    print(f"median wall: old {med['old']:.2f} s, new {med['new']:.2f} s; new/old by pair: "
          f"{', '.join(f'{r:.3f}' for r in ratios)}; median {statistics.median(ratios):.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
