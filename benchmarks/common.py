"""Shared helpers for the benchmark scripts (not a benchmark itself).

- `FakeServer`: tests/fakeserver.py started as a SEPARATE process (its CPU does not share the client's GIL), on
  127.0.0.1 only; `stats()`, `requests()` and `reset()` talk to its admin endpoints.
- `write_dataset` / `write_config`: a synthetic generic JSONL dataset and a rubricrun YAML config pointing at it.
- `run_cli`: `python run.py ...` as a subprocess, with its wall time and its own peak RSS (os.wait4 rusage).
- `stage_window`: start, first request and end of one stage of a run, from run.log and trace.jsonl.

Every process started here is bounded by a timeout and is stopped by its own pid.
"""

from __future__ import annotations

import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
RUN_PY = str(REPO / "run.py")  # what run_cli runs (a what-if experiment may point it at a patched copy)
KEY_ENV = "RUBRICRUN_BENCH_KEY"
FAKE_KEY = "sk-rubricrun-bench-fake-key"


def bench_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for every child: fake key, offline LiteLLM price map, no proxy for 127.0.0.1."""
    env = dict(os.environ)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env.pop(var, None)
    env.update(
        {
            KEY_ENV: FAKE_KEY,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env


def setup_litellm() -> Any:
    """Import LiteLLM in this process the way rubricrun does (offline cost map, quiet)."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def load_avg() -> str:
    try:
        a, b, c = os.getloadavg()
        return f"load avg {a:.2f} {b:.2f} {c:.2f}"
    except OSError:
        return "load avg n/a"


# --------------------------------------------------------------------------------------------------
# The fake server, in its own process


class FakeServer:
    """`python tests/fakeserver.py --port 0 ...` in a subprocess; `base_url` is the first line it prints."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        rpm: float | None = None,
        extra: list[str] | None = None,
        model_in_reply: bool = False,
        port: int = 0,
    ):
        # model_in_reply: candidate replies end with the model name, so two candidates' responses (and the judge
        # calls on them) differ; served through this module's __main__, which wraps the fake server's CLI.
        if model_in_reply:
            args = [PY, __file__, "serve-model-in-reply"]
        else:
            args = [PY, str(REPO / "tests" / "fakeserver.py")]
        args += ["--host", "127.0.0.1", "--port", str(port)]
        args += ["--latency", str(latency), "--stats-on-exit"]
        if rpm is not None:
            args += ["--rpm", str(rpm)]
        args += extra or []
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=bench_env(), cwd=REPO
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()  # the server prints its URL at once
        if not line.startswith("http://127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"fake server did not start (got {line!r})")
        self.base_url = line
        self.admin = line.rsplit("/v1", 1)[0] + "/_admin"
        self.exit_stats: dict[str, Any] | None = None

    def _get(self, path: str, timeout: float = 60) -> Any:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{self.admin}/{path}", timeout=timeout) as r:
            return json.loads(r.read())

    def stats(self) -> dict[str, Any]:
        return self._get("stats")

    def requests(self) -> list[dict[str, Any]]:
        """The request log: t, model, body, status, fault, ... (heavy: the bodies come with it)."""
        return self._get("requests", timeout=300)

    def reset(self) -> None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        req = urllib.request.Request(f"{self.admin}/reset", data=b"{}", method="POST")
        with opener.open(req, timeout=30) as r:
            r.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace").strip().splitlines()
        self._stderr.close()
        for line in reversed(tail):
            if line.startswith("{"):
                try:
                    self.exit_stats = json.loads(line)
                except ValueError:
                    pass
                break

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------------
# Data and configs


PROMPT = "Write two sentences about topic number {i} for a throughput benchmark."


def write_dataset(path: Path, n: int, *, criteria: int = 0, prefix: str = "ex") -> Path:
    """`n` generic rows with distinct prompts; with `criteria` > 0 each row carries a rubric of that many criteria,
    else a final answer, so the rows are scored without a judge (a dataset that nothing can score is refused
    before any call since issue 11; the answer adds one judge-free match per response, no model call)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            row: dict[str, Any] = {"id": f"{prefix}{i}", "prompt": PROMPT.format(i=i)}
            if not criteria:
                row["answer"] = str(i)
            if criteria:
                row["rubric"] = [
                    {"id": f"c{k + 1}", "text": f"The response satisfies requirement {k + 1}.", "weight": 1 + k % 3}
                    for k in range(criteria)
                ]
            fh.write(json.dumps(row) + "\n")
    return path


def save_config(
    wd: Path,
    data: Path,
    candidates: list[dict[str, Any]],
    judges: list[dict[str, Any]] | None = None,
    *,
    workers: int,
    judge_workers: int | None = None,
) -> Path:
    """wd/config.yaml for a benchmark's run: these entries on `data` (generic rows), outputs/ and cache/ under `wd`,
    `workers` candidate threads (and `judge_workers` judge threads), no progress bar, the benchmarks' retry policy."""
    run: dict[str, Any] = {"output_dir": str(wd / "outputs"), "concurrency": workers}
    if judge_workers is not None:
        run["judge_parallel_workers"] = judge_workers
    run["progress"] = False
    cfg: dict[str, Any] = {"candidates": candidates, **({"judges": judges} if judges else {})}
    cfg.update(
        datasets=[{"path": str(data), "format": "generic"}],
        run=run,
        cache={"dir": str(wd / "cache"), "enabled": True},
        retry={"max_attempts": 5, "initial_wait_s": 1.0, "max_wait_s": 60.0},
    )
    path = wd / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def model_entry(name: str, model: str, base_url: str, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "model": model, "api_base": base_url, "api_key_env": KEY_ENV}
    entry.update(extra)
    return entry


def write_config(
    workdir: Path,
    base_url: str,
    dataset: Path,
    *,
    candidates: int = 1,
    judges: int = 0,
    concurrency: int = 64,
    judge_workers: int = 8,
    candidate_rpm: float | None = None,
    retry: dict[str, Any] | None = None,
    run_extra: dict[str, Any] | None = None,
) -> Path:
    """A config under `workdir` (outputs/ and cache/ live there too): `candidates` candidates, `judges` judges."""
    cands = []
    for i in range(candidates):
        extra = {"rpm": candidate_rpm} if candidate_rpm else {}
        cands.append(model_entry(f"cand{i + 1}", f"openai/bench-cand-{i + 1}", base_url, **extra))
    cfg: dict[str, Any] = {
        "candidates": cands,
        "datasets": [{"path": str(dataset), "format": "generic"}],
        "run": {
            "output_dir": str(workdir / "outputs"),
            "concurrency": concurrency,
            "judge_parallel_workers": judge_workers,
            "progress": False,
            **(run_extra or {}),
        },
        "cache": {"dir": str(workdir / "cache"), "enabled": True},
        "retry": retry or {"max_attempts": 5, "initial_wait_s": 1.0, "max_wait_s": 60.0},
    }
    if judges:
        cfg["judges"] = [model_entry(f"judge{i + 1}", f"openai/bench-judge-{i + 1}", base_url) for i in range(judges)]
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


@contextmanager
def workdir(keep: bool = False, prefix: str = "rubricrun-bench-") -> Iterator[Path]:
    """A fresh temp folder (removed afterwards unless `keep`)."""
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        yield Path(d)
    finally:
        if keep:
            print(f"(kept {d})")
        else:
            subprocess.run(["rm", "-rf", d], check=False)


# --------------------------------------------------------------------------------------------------
# Running rubricrun


class CliResult:
    def __init__(self, rc: int, wall_s: float, maxrss_mb: float, cpu_s: float, stdout: str, stderr: str):
        self.rc, self.wall_s, self.maxrss_mb, self.cpu_s = rc, wall_s, maxrss_mb, cpu_s
        self.stdout, self.stderr = stdout, stderr
        # Peaks of /proc/PID/status RssAnon and RssFile, sampled every 0.2 s (file-backed pages, e.g. SQLite's mmap
        # of the cache, count in ru_maxrss once per mapping). ru_maxrss is the larger of run.py and its own children
        # (a large run's tally runs in one: engine/second_process.py); peak_tree_mb is the sampled peak of their sum.
        self.peak_anon_mb = self.peak_file_mb = self.peak_tree_mb = 0.0

    def check(self) -> CliResult:
        if self.rc != 0:
            sys.stderr.write(self.stderr[-4000:])
            raise SystemExit(f"run.py exited {self.rc}")
        return self


def _rss_split(pid: int) -> tuple[float, float]:
    """(RssAnon, RssFile) of a live process in MB; zeros when unreadable."""
    anon = file = 0.0
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    anon = int(line.split()[1]) / 1024
                elif line.startswith("RssFile:"):
                    file = int(line.split()[1]) / 1024
    except OSError:
        pass
    return anon, file


def _tree_rss(pid: int) -> float:
    """VmRSS of a live process and of its children, summed, in MB (Linux /proc; zero when unreadable)."""
    total, pids = 0.0, [pid]
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            pids += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as fh:
                total += next((int(ln.split()[1]) for ln in fh if ln.startswith("VmRSS:")), 0) / 1024
        except OSError:
            pass
    return total


def run_cli(args: list[str], *, timeout: float = 3600, cwd: Path = REPO) -> CliResult:
    """`python run.py ARGS`: wall time from spawn to exit, the child's own peak RSS and CPU (os.wait4)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([PY, RUN_PY, *args], cwd=cwd, env=bench_env(), stdout=out, stderr=err)
        deadline = t0 + timeout
        peak_anon = peak_file = peak_tree = 0.0
        next_sample = t0
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            now = time.perf_counter()
            if now > deadline:
                proc.kill()
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            if now >= next_sample:
                anon, file = _rss_split(proc.pid)
                peak_anon, peak_file = max(peak_anon, anon), max(peak_file, file)
                peak_tree = max(peak_tree, _tree_rss(proc.pid))
                next_sample = now + 0.2
            time.sleep(0.005)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        res = CliResult(
            proc.returncode,
            wall,
            ru.ru_maxrss / 1024,  # KiB on Linux
            ru.ru_utime + ru.ru_stime,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
        )
        res.peak_anon_mb, res.peak_file_mb, res.peak_tree_mb = peak_anon, peak_file, peak_tree
        return res


def max_in_window(times: list[float], window: float = 60.0, weights: list[float] | None = None) -> float:
    """The most requests (or, with `weights`, the largest sum of weights) in any rolling `window` seconds;
    `times` sorted."""
    w = weights or [1.0] * len(times)
    best = total = 0.0
    j = 0
    for i, t in enumerate(times):
        total += w[i]
        while times[j] <= t - window:
            total -= w[j]
            j += 1
        best = max(best, total)
    return best


def use_code(checkout: str | None) -> None:
    """Run another checkout's run.py (and so its src/) instead of this one's: a before/after on one machine."""
    global RUN_PY
    if checkout:
        RUN_PY = str(Path(checkout).resolve() / "run.py")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _log_time(line: str) -> float | None:
    try:
        return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


_RUN_LINE = re.compile(r": \d+ candidates[,;] ")


def stage_window(run_dir: Path, role: str = "candidate") -> dict[str, float | None]:
    """Timings of one stage of the run's last invocation, in epoch seconds:
    `stage_start`: the run.log line 'run ID: ... N candidates, M judges' (logged just before the calls start; candidates
    only), `first_request`: the earliest attempt start (trace ts - latency_ms; latency_ms covers the whole attempt,
    throttle wait and the lazy LiteLLM import included), `end`: the last trace event of `role`."""
    out: dict[str, float | None] = {"stage_start": None, "first_request": None, "end": None}
    events = read_jsonl(run_dir / "trace.jsonl")
    if not events:
        return out
    last_inv = events[-1].get("invocation")
    events = [e for e in events if e.get("invocation") == last_inv and e["role"] == role]
    if not events:
        return out
    out["end"] = max(e["ts"] for e in events)
    out["first_request"] = min(e["ts"] - e["latency_ms"] / 1000 for e in events)
    log_path = run_dir / "run.log"
    if role == "candidate" and log_path.exists():
        lines = log_path.read_text().splitlines()
        # 'run ID: N candidates, M judges', or 'run ID: N candidates; generation only: ...' without judges
        starts = [t for line in lines if _RUN_LINE.search(line) and (t := _log_time(line))]
        if starts:
            out["stage_start"] = starts[-1]
    return out


def summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())


def run_validate(cfg: Path, label: str, timeout: float) -> tuple[CliResult, dict[str, Any]]:
    """`python run.py --config CFG --validate`, checked, with its line (wall, CPU, peak RSS, calls it counts)."""
    val = run_cli(["--config", str(cfg), "--validate"], timeout=timeout).check()
    counts = json.loads(val.stdout)
    print(
        f"{label}: {val.wall_s:.2f} s, CPU {val.cpu_s:.1f} s, peak RSS {val.maxrss_mb:.0f} MB, candidate_calls "
        f"{counts['candidate_calls']:,}, cached {counts['candidate_cached']:,}",
        flush=True,
    )
    return val, counts


def print_warm(label: str, warm: CliResult, s: dict[str, Any], new_requests: int) -> None:
    """One line for a warm rerun (wall, CPU, peak RSS, calls, server requests it made), and a warning when it was not
    fully cached."""
    print(
        f"{label}: {warm.wall_s:.2f} s, CPU {warm.cpu_s:.1f} s, peak RSS {warm.maxrss_mb:.0f} MB (sampled peaks: "
        f"anon {warm.peak_anon_mb:.0f} MB, file-backed {warm.peak_file_mb:.0f} MB, with its child processes "
        f"{warm.peak_tree_mb:.0f} MB), calls {s['calls']}, "
        f"new server requests {new_requests}",
        flush=True,
    )
    if new_requests or s["calls"]["made"] != 0:
        print("  WARNING: the warm rerun was not fully cached")


def rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def code_version() -> str:
    """The commit measured, and whether src/ or run.py differ from it (read-only git commands)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src", "run.py"], cwd=REPO, capture_output=True, text=True
        )
    except OSError:
        return "git n/a"
    return f"{head.stdout.strip() or '?'}{' + uncommitted src changes' if dirty.stdout.strip() else ''}"


def banner(title: str) -> None:
    print(
        f"== {title} ==  ({time.strftime('%Y-%m-%d %H:%M')}, {machine()}, {load_avg()}, {code_version()})", flush=True
    )


def _serve_model_in_reply(argv: list[str]) -> None:
    """tests/fakeserver.py's CLI, with candidate replies that end with the model name."""
    sys.path.insert(0, str(REPO / "tests"))
    import fakeserver

    plain = fakeserver.default_reply

    def reply(body: dict[str, Any]) -> str:
        text = plain(body)
        return text if fakeserver.is_judge_request(body) else f"{text} ({body.get('model')})"

    fakeserver.default_reply = reply
    fakeserver.main(argv)


if __name__ == "__main__" and sys.argv[1:2] == ["serve-model-in-reply"]:
    _serve_model_in_reply(sys.argv[2:])
