"""Startup: `python run.py --help` wall time against `python -c pass` (the interpreter's own start).

    .venv/bin/python benchmarks/bench_startup.py [--runs 5]

Each command runs `--runs` times as a subprocess, alternating, after one untimed run of each (warm file cache);
figures are the medians. Goal: run.py --help under 1 s. Also printed: the modules `--help` imports that are heavy
(`python -X importtime`, top 8 by cumulative time), to catch an eager import of LiteLLM or the like.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PY, REPO, banner, bench_env  # noqa: E402


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, env=bench_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    return time.perf_counter() - t0


def heavy_imports(cmd: list[str], top: int = 8) -> list[tuple[float, str]]:
    out = subprocess.run(
        [PY, "-X", "importtime", *cmd[1:]], cwd=REPO, env=bench_env(), capture_output=True, text=True, timeout=60
    )
    rows = []
    for line in out.stderr.splitlines():  # "import time:   self_us |   cumulative_us | [indent]module"
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        rows.append((int(parts[1]) / 1e6, parts[2].strip()))
    return sorted(rows, reverse=True)[:top]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    banner(f"startup: median of {args.runs}")
    cmds = {"python -c pass": [PY, "-c", "pass"], "run.py --help": [PY, str(REPO / "run.py"), "--help"]}
    for cmd in cmds.values():
        timed(cmd)  # untimed: warms the OS file cache and the .pyc files
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(args.runs):
        for name, cmd in cmds.items():
            times[name].append(timed(cmd))
    for name, ts in times.items():
        print(f"{name:<16} median {statistics.median(ts):.3f} s   runs {' '.join(f'{t:.3f}' for t in ts)}")
    base, ours = statistics.median(times["python -c pass"]), statistics.median(times["run.py --help"])
    print(f"ratio run.py --help / python -c pass: {ours / base:.1f}x (+{ours - base:.3f} s)")
    print("heaviest imports of run.py --help (cumulative s):")
    for secs, name in heavy_imports(cmds["run.py --help"]):
        print(f"  {secs:.3f}  {name}")
    print(f"goal run.py --help < 1 s: {ours:.3f} s {'MET' if ours < 1 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
