#!/usr/bin/env python3
"""`ResponseCache.fresh_many` (what `--validate` asks the cache for every judge-free leaf) and `get` (a warm rerun's
hit), two checkouts side by side, each in its own process over a cache it filled itself (ExecPlan 018).

    .venv/bin/python benchmarks/bench_fresh_many.py OLD_TREE [NEW_TREE] [--keys 1000000] [--workdir DIR]

Each side fills a cache of `--keys` replies through its own ResponseCache.set (its own format), then times
fresh_many over every key in chunks of 1,000 (as engine/estimate.py asks, a chunk of examples at a time) with every
key stored (a warm --validate), the same over keys that are not stored (a cold one), and 20,000 `get`s. Prints
microseconds per key and new / old. A reused --workdir keeps both caches (the fill is the slow part).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHUNK = 1000


def side(tree: str, cache_dir: str, n: int) -> None:
    """In its own process: `tree`'s ResponseCache, filled if empty, timed; prints JSON."""
    sys.path.insert(0, str(Path(tree) / "src"))
    from rubricrun.providers.cache import ResponseCache
    from rubricrun.types import LLMResponse, Usage

    keys = [f"{i:064x}" for i in range(n)]
    cache = ResponseCache(cache_dir)
    filled = Path(cache_dir) / "filled.txt"
    if not filled.exists():
        reply = LLMResponse(text="Answer to: " + "x" * 60, finish_reason="stop", usage=Usage(20, 16, 36), model="m")
        for lo in range(0, n, 10_000):
            with cache._cache.transact():  # noqa: SLF001 - a benchmark's fill, one transaction per 10,000 rows
                for key in keys[lo : lo + 10_000]:
                    cache.set(key, reply)
        filled.write_text(str(n))
    out = {}
    for label, ask in (("warm", keys), ("cold", [f"miss-{k}" for k in keys])):
        t0 = time.perf_counter()
        found = sum(len(cache.fresh_many(ask[lo : lo + CHUNK])) for lo in range(0, len(ask), CHUNK))
        out[label] = (time.perf_counter() - t0) * 1e6 / len(ask)
        assert found == (len(ask) if label == "warm" else 0), (label, found)
    t0 = time.perf_counter()
    assert all(cache.get(k) is not None for k in keys[:20_000])
    out["get"] = (time.perf_counter() - t0) * 1e6 / 20_000
    cache.close()
    print(json.dumps(out))


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--side":
        side(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path, nargs="?", default=REPO)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    wd = args.workdir or Path(tempfile.mkdtemp(prefix="rubricrun-fresh-"))
    res = {}
    for name, tree in (("old", args.old), ("new", args.new)):
        cmd = [sys.executable, __file__, "--side", str(tree.resolve()), str(wd / f"cache-{name}"), str(args.keys)]
        res[name] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        print(f"{name}: " + ", ".join(f"{k} {v:.2f} us/key" for k, v in res[name].items()), flush=True)
    print("new/old: " + ", ".join(f"{k} {res['new'][k] / res['old'][k]:.2f}" for k in res["old"]))
    print(f"caches under {wd}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
