"""The viewer at scale (issue 32): a run of 100,000 responses with 10 criteria each. Goals: the first open (the index
built from a cold cache) under 15 s; then a filtered page, a searched page and a deep page under 300 ms each; the
viewer's memory under 500 MB.

    .venv/bin/python benchmarks/bench_viewer.py [--responses 100000] [--criteria 10] [--repeat 5] [--workdir DIR]
    PYTHONPATH=/tmp/duckdb-site .venv/bin/python benchmarks/bench_viewer.py --duckdb   # also DuckDB, side by side

It writes a run folder synthetically, in the documented format (docs/run-folder.md; no model calls): examples with a
rubric of `--criteria` criteria, 2 candidates (so `--responses` / 2 examples), one verdict per criterion from one of
two judges with an explanation; texts drawn from a Zipf-distributed vocabulary of 20,000 made-up words (a prompt of
about 60 words, a response of about 150, an explanation of about 25). Then it starts the viewer as a user does,
`python run.py --view DIR --port 0`, with an empty cache (XDG_CACHE_HOME in the workdir), and times HTTP requests
from this process:

  first open:    GET /runs/<id>/examples, which builds the index (wall time of the request; the viewer's CPU)
  then, each `--repeat` times (median and worst; the goal is read on the median): the first list page again; a
  filtered page (criterion c3, not met); a judge filter with a candidate; a searched page (a word of middling
  frequency); a search with a filter, sorted by score; a deep page (the last); a deep page sorted by score; an
  example page; the JSON twin's deep page (50 rows with their judgments).

The viewer's peak memory is /proc/PID/status VmHWM of the server process after all of that. `--duckdb` builds the
same folder into DuckDB (read_json) and times its search (ILIKE: its full-text extension needs a download), the
evidence of ExecPlan 022's Decision Log; it needs `duckdb` importable (pip install --target /tmp/duckdb-site duckdb).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PY, RUN_PY, banner, workdir  # noqa: E402

RUN_ID = "bench"
VOCAB = 20_000


def _vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(VOCAB * 2)}
    return sorted(words)[:VOCAB]


class Texts:
    """Texts drawn from a Zipf-like vocabulary: 4,000 sentences made once, texts made of sentences."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = _vocabulary(rng)
        weights = [1 / (i + 1) for i in range(len(self.words))]
        self.sentences = [
            " ".join(rng.choices(self.words, weights, k=rng.randint(6, 18))).capitalize() + "." for _ in range(4000)
        ]

    def text(self, words: int) -> str:
        out, n = [], 0
        while n < words:
            s = self.rng.choice(self.sentences)
            out.append(s)
            n += s.count(" ") + 1
        return " ".join(out)


def write_run(folder: Path, responses: int, criteria: int, seed: int = 0) -> dict[str, Any]:
    """A run folder of `responses` responses (2 candidates) x `criteria` criteria, as a finished run writes it."""
    rng = random.Random(seed)
    texts = Texts(rng)
    folder.mkdir(parents=True, exist_ok=True)
    cands = ("alpha", "beta")
    (folder / "config.yaml").write_text(
        "candidates:\n- name: alpha\n- name: beta\njudges:\n- name: j1\n- name: j2\n"
        "datasets:\n- name: bench\n  path: bench.jsonl\n",
        encoding="utf-8",
    )
    with (
        open(folder / "examples.jsonl", "w", encoding="utf-8") as fe,
        open(folder / "responses.jsonl", "w", encoding="utf-8") as fr,
        open(folder / "judgments.jsonl", "w", encoding="utf-8") as fj,
    ):
        for i in range(responses // len(cands)):
            eid = f"bench/{i:07d}"
            rubric = [
                {"id": f"c{k}", "text": texts.text(10), "weight": rng.choice((1.0, 2.0, 3.0, 5.0, -2.0)), "tags": [],
                 "category": rng.choice(("accuracy", "safety", "clarity"))}
                for k in range(criteria)
            ]  # fmt: skip
            ex = {"id": eid, "dataset": "bench", "source": f"bench.jsonl:{i + 1}",
                  "messages": [{"role": "user", "content": texts.text(60)}], "reference": None, "choices": None,
                  "answer": None, "rubric": rubric, "metadata": {}, "later_turns": [], "prefilled": {}}  # fmt: skip
            fe.write(json.dumps(ex) + "\n")
            rlines, jlines = [], []
            for c in cands:
                rid = f"{eid}#{c}#0"
                rlines.append(json.dumps({
                    "id": rid, "example_id": eid, "candidate": c, "model": f"openai/{c}", "sample_index": 0,
                    "status": "ok", "text": texts.text(150), "error": None, "finish_reason": "stop",
                    "usage": {"prompt_tokens": 90, "completion_tokens": 200, "total_tokens": 290},
                    "key": f"{rng.getrandbits(256):064x}",
                    "flags": {"truncated": False, "empty": False, "refusal": False, "final_answer_marker": False,
                              "unclosed_reasoning": False, "chars": 900, "tokens": 200},
                    "reasoning": None, "turn": 1}))  # fmt: skip
                for k, crit in enumerate(rubric):
                    verdict = rng.choice(("met", "met", "not_met"))
                    jlines.append(json.dumps({
                        "id": f"{rid}#c{k}", "response_id": rid, "example_id": eid, "candidate": c,
                        "criterion_id": f"c{k}", "weight": crit["weight"], "judge": ("j1", "j2")[k % 2],
                        "verdict": verdict, "explanation": texts.text(25), "error": None,
                        "key": f"{rng.getrandbits(256):064x}", "votes": [],
                        "usage": {"prompt_tokens": 400, "completion_tokens": 40, "total_tokens": 440},
                        "score": None, "scale": "binary"}))  # fmt: skip
            fr.write("\n".join(rlines) + "\n")
            fj.write("\n".join(jlines) + "\n")
    summary = {"run_id": RUN_ID, "status": "complete", "examples": responses // 2, "datasets": {}}
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return {
        "bytes": sum((folder / f"{name}.jsonl").stat().st_size for name in ("examples", "responses", "judgments")),
        "search_word": texts.words[200],  # of middling frequency: the 200th most frequent word
    }


def _get(url: str) -> tuple[float, int]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as resp:
        body = resp.read()
    return time.perf_counter() - t, len(body)


def _cpu(pid: int) -> float:
    """User + system CPU seconds of a live process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _vmhwm(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) / 1024 for line in fh if line.startswith("VmHWM:"))


def bench_viewer(work: Path, responses: int, criteria: int, repeat: int) -> None:
    outputs = work / "outputs"
    made = work / f"run-{responses}x{criteria}.json"  # a --workdir run folder of this size is written once
    if made.is_file():
        info = json.loads(made.read_text())
        print(f"reusing the run folder in {outputs / RUN_ID}")
    else:
        t = time.perf_counter()
        shutil.rmtree(outputs, ignore_errors=True)
        info = write_run(outputs / RUN_ID, responses, criteria)
        made.write_text(json.dumps(info))
        took = time.perf_counter() - t
        print(f"wrote {responses:,} x {criteria} criteria ({info['bytes'] / 1e6:.0f} MB of JSONL) in {took:.1f} s")
    shutil.rmtree(work / "cache", ignore_errors=True)  # a cold cache: the first open builds the index
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [PY, RUN_PY, "--view", str(outputs), "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        text=True,
    )  # fmt: skip
    try:
        base = re.search(r"http://[^/ ]+/", proc.stdout.readline()).group(0).rstrip("/")  # type: ignore[union-attr]
        run = f"{base}/runs/{RUN_ID}"
        cpu0 = _cpu(proc.pid)
        first, _ = _get(f"{run}/examples")
        cpu = _cpu(proc.pid) - cpu0
        print(
            f"first open (index built): {first:.2f} s (the viewer's CPU {cpu:.2f} s)   goal < 15 s: "
            f"{'MET' if first < 15 else 'NOT MET'}"
        )
        last = -(-responses // 50)
        word = info["search_word"]
        pages = {
            "list page 1": f"{run}/examples",
            "filter criterion c3 not met": f"{run}/examples?criterion=c3&verdict=not_met",
            "filter judge j2 not met, candidate beta": f"{run}/examples?judge=j2&verdict=not_met&candidate=beta",
            f"search '{word}'": f"{run}/examples?q={word}",
            f"search '{word}' + candidate, by score": f"{run}/examples?q={word}&candidate=alpha&sort=score",
            f"deep page {last}": f"{run}/examples?page={last}",
            f"deep page {last // 2}, by score": f"{run}/examples?page={last // 2}&sort=-score",
            "example page": f"{run}/examples/bench/{responses // 4:07d}",
            "JSON twin, deep (50 rows + judgments)": f"{base}/api/runs/{RUN_ID}/responses?offset={responses - 50}&limit=50",
        }
        slowest = 0.0
        for label, url in pages.items():
            times = [_get(url)[0] for _ in range(repeat)]
            slowest = max(slowest, statistics.median(times))
            print(f"  {label:45s} median {statistics.median(times) * 1000:6.0f} ms   worst {max(times) * 1000:6.0f} ms")
        print(
            f"slowest page (median): {slowest * 1000:.0f} ms   goal < 300 ms: {'MET' if slowest < 0.3 else 'NOT MET'}"
        )
        peak = _vmhwm(proc.pid)
        print(f"viewer peak memory (VmHWM): {peak:.0f} MB   goal < 500 MB: {'MET' if peak < 500 else 'NOT MET'}")
        db = sum(p.stat().st_size for p in (work / "cache").rglob("*") if p.is_file()) / 1e6
        print(f"index on disk: {db:.0f} MB (in the viewer's cache, not the run folder)")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def bench_duckdb(work: Path, repeat: int) -> None:
    """The same run folder in DuckDB: build with read_json, search with ILIKE (no download: no FTS extension)."""
    import duckdb

    run = work / "outputs" / RUN_ID
    con = duckdb.connect(str(work / "bench.duckdb"))
    t = time.perf_counter()
    con.execute(
        f"create table examples as select id, messages[1].content as prompt from read_json('{run}/examples.jsonl', "
        "format='newline_delimited', columns={'id': 'VARCHAR', 'messages': 'STRUCT(role VARCHAR, content VARCHAR)[]'})"
    )
    con.execute(
        f"create table responses as select row_number() over () as n, id, example_id, candidate, text from "
        f"read_json('{run}/responses.jsonl', format='newline_delimited', columns={{'id': 'VARCHAR', "
        "'example_id': 'VARCHAR', 'candidate': 'VARCHAR', 'text': 'VARCHAR'})"
    )
    con.execute(
        f"create table judgments as select response_id, criterion_id, judge, verdict, explanation from "
        f"read_json('{run}/judgments.jsonl', format='newline_delimited', columns={{'response_id': 'VARCHAR', "
        "'criterion_id': 'VARCHAR', 'judge': 'VARCHAR', 'verdict': 'VARCHAR', 'explanation': 'VARCHAR'})"
    )
    print(f"duckdb build: {time.perf_counter() - t:.2f} s")
    word = next(iter(con.execute("select split_part(text, ' ', 3) from responses limit 1").fetchone()))
    queries = {
        "filter criterion c3 not met (count + page)": "select count(*) from responses where id in (select "
        "response_id from judgments where criterion_id = 'c3' and verdict = 'not_met')",
        f"search '{word}' (ILIKE over prompts, texts, explanations)": "select count(*) from responses r where "
        f"r.text ilike '%{word}%' or r.id in (select response_id from judgments where explanation ilike '%{word}%') "
        f"or r.example_id in (select id from examples where prompt ilike '%{word}%')",
    }
    for label, q in queries.items():
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            con.execute(q).fetchall()
            times.append(time.perf_counter() - t)
        print(f"  duckdb {label:55s} median {statistics.median(times) * 1000:6.0f} ms")
    print(f"duckdb process peak memory so far (VmHWM of this process): {_vmhwm(os.getpid()):.0f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--responses", type=int, default=100_000)
    ap.add_argument("--criteria", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workdir", help="keep the run folder and the index here")
    ap.add_argument("--duckdb", action="store_true", help="also build and search the run with DuckDB")
    args = ap.parse_args()
    banner(f"viewer: {args.responses:,} responses x {args.criteria} criteria")
    if args.workdir:
        work = Path(args.workdir)
        work.mkdir(parents=True, exist_ok=True)
        _all(work, args)
        return
    with workdir(prefix="rubricrun-bench-viewer-") as work:
        _all(work, args)


def _all(work: Path, args: argparse.Namespace) -> None:
    bench_viewer(work, args.responses, args.criteria, args.repeat)
    if args.duckdb:
        bench_duckdb(work, args.repeat)


if __name__ == "__main__":
    main()
