"""`executor: {engine: dask}` (issue 30): provider attempts made by the workers of a real local Dask cluster (2 worker
processes) against the fake server, one run folder, the same rows as the threads engine. A worker killed mid-run,
a rerun, a scheduler that cannot be reached, SIGTERM and kill -9 of the run's process. Real run.py subprocesses."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import DELETE, FAKE_KEY, model_entry, read_jsonl, run_cli, start_cli, write_jsonl
from fakeserver import FakeOpenAIServer

from rubricrun.config import load_config
from rubricrun.errors import InputError

DASK = {"engine": "dask", "workers": 2, "timeout_s": 60}
ROW_FILES = ("examples.jsonl", "responses.jsonl", "judgments.jsonl")


def rubric_rows(tmp_path: Path, n: int) -> list[dict[str, Any]]:
    rows = [
        {
            "id": f"q{i}",
            "prompt": f"Question {i}: say something useful.",
            "rubric": [
                {"id": "c1", "text": "Answers it.", "weight": 1},
                {"id": "c2", "text": "Is short.", "weight": 2},
            ],
        }
        for i in range(n)
    ]
    return [{"path": str(write_jsonl(tmp_path / "data" / "rubric.jsonl", rows))}]


def config(make_config: Any, server: FakeOpenAIServer, tmp_path: Path, n: int, name: str, **over: Any) -> Path:
    """Two candidates, one judge, `n` rows of two criteria; the cache and the outputs its own (a cold run)."""
    return make_config(
        server,
        filename=f"{name}.yaml",
        datasets=rubric_rows(tmp_path, n),
        judges=[model_entry("j1", "openai/judge-one", server)],
        judging={"default_rubric": DELETE},
        cache={"dir": str(tmp_path / f"cache-{name}")},
        run={"output_dir": str(tmp_path / f"out-{name}"), "concurrency": 4, "judge_parallel_workers": 4},
        export={"formats": ["sft", "dpo"]},
        **over,
    )


def worker_pids(folder: Path) -> set[int]:
    """The processes that made attempts, as trace.jsonl names them ("host:pid")."""
    host = socket.gethostname()
    names = {e["worker"] for e in read_jsonl(folder / "trace.jsonl") if not e["cache_hit"]}
    assert all(isinstance(w, str) and w.startswith(f"{host}:") for w in names), names
    return {int(w.rsplit(":", 1)[1]) for w in names}


def descendants(pid: int) -> set[int]:
    """Every process under `pid`, from `ps` (the cluster's scheduler, workers and their worker processes)."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        p, pp = (int(x) for x in line.split())
        children.setdefault(pp, []).append(p)
    found, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.add(c)
            todo.append(c)
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of `pids` that `ps` still lists (zombies left out: their parent reaps them)."""
    out = subprocess.run(["ps", "-eo", "pid=,stat="], capture_output=True, text=True, check=True).stdout
    listed = {int(p): s for p, s in (line.split() for line in out.splitlines())}
    return {p for p in pids if p in listed and not listed[p].startswith("Z")}


def serve(role: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A Dask scheduler or worker of a cluster "at an address", as a user starts one (it ends when its stdin closes)."""
    return subprocess.Popen(
        [sys.executable, "-m", "rubricrun.providers.dask_executor", role, *args],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip


def end(proc: subprocess.Popen[bytes]) -> None:
    proc.stdin.close()  # type: ignore[union-attr]
    proc.wait(timeout=30)


def scheduler(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """A scheduler on 127.0.0.1 and its address."""
    file = tmp_path / "s.json"
    proc = serve("scheduler", ["--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(file)],
                 env)  # fmt: skip
    wait_until(file.exists, 60, "no scheduler")
    return proc, json.loads(file.read_text())["address"]


def wait_until(predicate: Any, timeout: float, what: str, proc: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None:
            assert proc.popen.poll() is None, proc.stderr
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


# --------------------------------------------------------------------------------------------------
# The same rows on either engine; a rerun makes no call


def test_dask_writes_the_rows_the_threads_engine_writes_and_a_rerun_makes_no_call(tmp_path: Path, make_config) -> None:
    """Two candidates, one of them a Router entry over two servers (its Router runs on the workers), one judge."""
    with FakeOpenAIServer(latency_s=0.01) as server, FakeOpenAIServer(latency_s=0.01) as other:
        pool = {
            "name": "beta",
            "deployments": [
                {"model": "openai/cand-beta", "api_base": s.base_url, "api_key_env": "RUBRICRUN_TEST_KEY"}
                for s in (server, other)
            ],
            "router": {"strategy": "simple-shuffle"},
        }
        cands = [model_entry("alpha", "openai/cand-alpha", server), pool]
        threads = config(make_config, server, tmp_path, 16, "threads", candidates=cands)
        dask = config(make_config, server, tmp_path, 16, "dask", candidates=cands, executor=DASK)

        def made() -> int:
            return server.count() + other.count()

        rc, _, err = run_cli(["--config", str(threads), "--run-id", "r"], timeout=180)
        assert rc == 0, err
        made_threads = made()
        rc, _, err = run_cli(["--config", str(dask), "--run-id", "r"], timeout=300)
        assert rc == 0, err
        assert made() == 2 * made_threads  # both cold: the same calls, each made once
        a, b = tmp_path / "out-threads" / "r", tmp_path / "out-dask" / "r"
        for name in (*ROW_FILES, "export/sft.jsonl", "export/dpo.jsonl"):
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
        sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
        assert sa.pop("executor") == {"engine": "threads", "workers": 1}
        assert sb.pop("executor") == {"engine": "dask", "workers": 2}
        for s in (sa, sb):
            s.pop("wall_s")
        assert sa == sb
        # The trace names who made each attempt: the run's own process, or the Dask workers (not the run's); the
        # Router entry's attempts name the deployment that served them on either engine.
        assert len(worker_pids(a)) == 1 and len(worker_pids(b)) >= 1 and not worker_pids(b) & worker_pids(a)
        for folder in (a, b):
            routed = [e for e in read_jsonl(folder / "trace.jsonl") if e["model"] == "router/beta"]
            assert routed and {e["deployment"] for e in routed} <= {
                f"openai/cand-beta@{s.base_url}" for s in (server, other)
            }
        log = (b / "run.log").read_text()
        assert "attempts on dask, 2 workers" in log and "dask: 2 workers up" in log

        before = made()
        rc, _, err = run_cli(["--config", str(dask), "--run-id", "r"], timeout=180)
        assert rc == 0, err
        assert made() == before  # every call from the cache
        assert "starting a local cluster" not in (b / "run.log").read_text().split("attempts on dask")[-1]
        s = json.loads((b / "summary.json").read_text())
        assert s["calls"]["made"] == 0 and s["calls"]["cache_hits"] == sb["calls"]["made"] + sb["calls"]["cache_hits"]
        for name in ROW_FILES:
            assert (a / name).read_bytes() == (b / name).read_bytes(), name


# --------------------------------------------------------------------------------------------------
# Faults


def test_a_worker_killed_mid_run_costs_only_its_attempts_in_flight(tmp_path: Path, make_config) -> None:
    with FakeOpenAIServer(latency_s=0.3) as server:  # attempts are in flight on the worker when it is killed
        cfg = config(make_config, server, tmp_path, 30, "kill", executor=DASK)
        p = start_cli(["--config", str(cfg), "--run-id", "k"], logs=tmp_path / "logs")
        out = tmp_path / "out-kill" / "k"
        wait_until(lambda: (out / "trace.jsonl").exists() and worker_pids(out), 180, "no attempt traced", p)
        victim = min(worker_pids(out))
        os.kill(victim, signal.SIGKILL)
        assert p.wait(timeout=300) == 0, p.stderr
        assert all(r["status"] == "ok" for r in read_jsonl(out / "responses.jsonl"))
        assert all(j["verdict"] != "error" for j in read_jsonl(out / "judgments.jsonl"))
        assert len(read_jsonl(out / "responses.jsonl")) == 2 * 30
        # Only what was in flight at the kill may have been paid twice: at most what the run keeps in flight.
        twice = sum(n - 1 for n in server.fingerprint_counts(status=200).values() if n > 1)
        assert twice <= (4 + 4) * 2, twice
        assert victim not in alive({victim})
        assert worker_pids(out) - {victim}, "no other worker made attempts"
        assert "left; its attempts in flight are made again by the others" in (out / "run.log").read_text()


def test_a_scheduler_that_cannot_be_reached_is_one_line_and_exit_2(tmp_path: Path, make_config) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with FakeOpenAIServer() as server:
        bad = {"engine": "dask", "address": f"tcp://127.0.0.1:{port}", "timeout_s": 2}
        cfg = config(make_config, server, tmp_path, 2, "bad", executor=bad)
        t0 = time.monotonic()
        rc, _, err = run_cli(["--config", str(cfg), "--run-id", "b"], timeout=120)
        assert rc == 2, err
        lines = [ln for ln in err.strip().splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and "Traceback" not in err, err
        assert f"{cfg}:" in lines[0] and "key 'executor.address'" in lines[0] and "no Dask scheduler" in lines[0]
        assert time.monotonic() - t0 < 60
        # The same from the environment, and a malformed one.
        cfg = config(make_config, server, tmp_path, 2, "env", executor={"engine": "dask", "timeout_s": 2})
        rc, _, err = run_cli(
            ["--config", str(cfg), "--run-id", "e"], env={"DASK_SCHEDULER_ADDRESS": f"127.0.0.1:{port}"}
        )
        assert rc == 2 and "key 'DASK_SCHEDULER_ADDRESS'" in err and "Traceback" not in err, err
        rc, _, err = run_cli(["--config", str(cfg), "--run-id", "e"], env={"DASK_SCHEDULER_ADDRESS": "nowhere"})
        assert rc == 2 and "not a scheduler address" in err, err
        assert server.count() == 0  # no call


@pytest.mark.parametrize(
    ("executor", "key", "words"),
    [
        ({"engine": "threads", "workers": 4}, "executor.workers", "only applies to executor.engine: dask"),
        ({"address": "tcp://10.0.0.5:8786"}, "executor.address", "only applies to executor.engine: dask"),
        ({"engine": "dask", "workers": 0}, "executor.workers", "expected an integer >= 1, got 0"),
        ({"engine": "dask", "workers": 5000}, "executor.workers", "expected an integer <= 1024, got 5000"),
        ({"engine": "dask", "timeout_s": 0}, "executor.timeout_s", "expected a number > 0.0, got 0"),
        ({"engine": "dask", "address": "10.0.0.5"}, "executor.address", "not a scheduler address"),
        ({"engine": "ray"}, "executor.engine", "expected one of"),
    ],
)
def test_bad_executor_settings_name_file_line_and_key(
    tmp_path: Path, make_config, executor: dict, key: str, words: str
) -> None:
    path = make_config(None, executor=executor)
    with pytest.raises(InputError) as e:
        load_config(path)
    assert f"{path}:" in str(e.value) and f"key '{key}'" in str(e.value) and words in str(e.value)


def test_no_workers_or_workers_lacking_a_key_variable_are_refused_before_any_call(tmp_path: Path, make_config) -> None:
    """A cluster at an address: a scheduler without workers within executor.timeout_s; then workers that lack the
    key variable (they read API keys from their own environment, which is checked first)."""
    env = dict(os.environ)
    env.pop("RUBRICRUN_TEST_KEY", None)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
    sched, address = scheduler(tmp_path, env)
    try:
        with FakeOpenAIServer() as server:  # a scheduler with no worker yet
            ex = {"engine": "dask", "address": address, "timeout_s": 2}
            cfg = config(make_config, server, tmp_path, 2, "noworker", executor=ex)
            rc, _, err = run_cli(["--config", str(cfg), "--run-id", "w"], timeout=120)
            assert rc == 2 and "has fewer than 1 workers after 2 s" in err and "Traceback" not in err, err
            assert server.count() == 0
        work = serve("worker", [address, "--nthreads", "1", "--no-dashboard"], env)
        try:
            with FakeOpenAIServer() as server:
                ex = {"engine": "dask", "address": address, "timeout_s": 60}
                cfg = config(make_config, server, tmp_path, 2, "nokey", executor=ex)
                rc, _, err = run_cli(["--config", str(cfg), "--run-id", "n"], timeout=120)
                assert rc == 2, err
                assert "lacks the environment variable(s) RUBRICRUN_TEST_KEY" in err and "Traceback" not in err, err
                assert server.count() == 0
        finally:
            end(work)
    finally:
        end(sched)
    assert FAKE_KEY not in err


def test_a_key_only_a_worker_holds_never_leaves_it(tmp_path: Path, make_config) -> None:
    """Secrets (issue 28) across processes: a provider echoes, in an error, the key a worker sent (its own
    OPENAI_API_KEY, which the run's process does not hold and so could not mask). The worker redacts its errors
    before they leave it: no file of the run folder, and nothing on the console, holds the key."""
    worker_key = "sk-worker-ONLYHERE-5d1c"
    env = dict(os.environ, OPENAI_API_KEY=worker_key)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
    sched, address = scheduler(tmp_path, env)
    work = serve("worker", [address, "--nthreads", "1", "--no-dashboard"], env)
    try:
        with FakeOpenAIServer() as server:
            server.add_rule("cand-echo", 401, message=f"Incorrect API key provided: {worker_key}.")
            data = write_jsonl(tmp_path / "q.jsonl", [{"id": f"q{i}", "prompt": f"Question {i}?"} for i in range(3)])
            cfg = make_config(
                server,
                candidates=[{"name": "a", "model": "openai/cand-echo", "api_base": server.base_url}],  # no key variable
                judges=DELETE,
                judging=DELETE,
                datasets=[{"path": str(data)}],
                executor={"engine": "dask", "address": address, "timeout_s": 60},
            )
            p = run_cli(["--config", str(cfg), "--run-id", "k"], env={"OPENAI_API_KEY": "sk-run-own-key-0000"})
            assert p.returncode == 1, p.stderr  # every candidate call failed
            assert {r.headers.get("Authorization") for r in server.requests} == {f"Bearer {worker_key}"}  # it was sent
    finally:
        end(work)
        end(sched)
    run_dir = tmp_path / "outputs" / "k"
    assert "Incorrect API key provided: ***" in (run_dir / "responses.jsonl").read_text()
    assert all(e["worker"] for e in read_jsonl(run_dir / "trace.jsonl"))  # the attempts were the worker's
    held = [str(f) for f in run_dir.rglob("*") if f.is_file() and b"ONLYHERE" in f.read_bytes()]
    assert held == [] and "ONLYHERE" not in p.stdout + p.stderr


# --------------------------------------------------------------------------------------------------
# Stopping: SIGTERM leaves none of the cluster's processes; kill -9 and resume


def test_sigterm_stops_the_cluster_and_kill_9_then_resume_works(tmp_path: Path, make_config) -> None:
    with FakeOpenAIServer(latency_s=0.2) as server:
        cfg = config(make_config, server, tmp_path, 16, "stop", executor=DASK)
        args = ["--config", str(cfg), "--run-id", "s"]
        out = tmp_path / "out-stop" / "s"

        p = start_cli(args, logs=tmp_path / "logs")
        cluster: set[int] = set()

        def started() -> bool:
            cluster.update(descendants(p.popen.pid))
            return server.count() >= 10

        wait_until(started, 180, "no calls", p)
        assert len(cluster) >= 4, cluster  # scheduler, the workers' nanny process, two worker processes
        p.popen.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 143, p.stderr
        assert "Traceback" not in p.stderr
        s = json.loads((out / "summary.json").read_text())
        assert s["status"] == "interrupted" and s["stopped_by"] == "SIGTERM"
        assert s["executor"] == {"engine": "dask", "workers": 2}
        wait_until(lambda: not alive(cluster), 30, f"left behind: {alive(cluster)}")

        p = start_cli(args, logs=tmp_path / "logs")
        cluster = set()
        n = server.count()

        def resumed() -> bool:
            cluster.update(descendants(p.popen.pid))
            return server.count() >= n + 10

        wait_until(resumed, 180, "no calls", p)
        p.popen.kill()
        p.popen.wait(timeout=30)
        wait_until(lambda: not alive(cluster), 30, f"left behind after kill -9: {alive(cluster)}")

        answered = {fp for fp, k in server.fingerprint_counts(status=200).items() if k}
        first = len(server.requests)
        p = start_cli(args, logs=tmp_path / "logs")
        assert p.wait(timeout=300) == 0, p.stderr
        again = Counter(r.fingerprint for r in server.requests[first:] if r.fingerprint in answered)
        # Replies that landed in the cache before the kill are not asked again; a reply that was on its way back
        # when the run's process died may be (at most what was in flight).
        assert sum(again.values()) <= (4 + 4) * 2, again
        assert len(read_jsonl(out / "responses.jsonl")) == 2 * 16
        assert all(r["status"] == "ok" for r in read_jsonl(out / "responses.jsonl"))


def test_the_relay_killed_mid_run_stops_the_run_with_one_line_and_leaves_no_process(
    tmp_path: Path, make_config
) -> None:
    """The relay process (Dask's client, out of the run's process) dies under a running run: one line, exit 2, and
    none of the cluster's processes is left (the rerun resumes from the cache, as after any stop)."""
    with FakeOpenAIServer(latency_s=0.3) as server:
        cfg = config(make_config, server, tmp_path, 30, "relay", executor=DASK)
        p = start_cli(["--config", str(cfg), "--run-id", "r"], logs=tmp_path / "logs")
        out = tmp_path / "out-relay" / "r"
        wait_until(lambda: (out / "trace.jsonl").exists() and worker_pids(out), 180, "no attempt traced", p)
        cluster = descendants(p.popen.pid)
        ps = subprocess.run(["ps", "-eww", "-o", "pid=,args="], capture_output=True, text=True, check=True).stdout
        relay = [int(ln.split()[0]) for ln in ps.splitlines() if "dask_executor relay" in ln]
        relay = [pid for pid in relay if pid in cluster]  # (another run on this machine may have one too)
        assert len(relay) == 1, ps
        os.kill(relay[0], signal.SIGKILL)
        assert p.wait(timeout=120) == 2, p.stderr
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and "relay process exited" in lines[0] and "Traceback" not in p.stderr, p.stderr
        wait_until(lambda: not alive(cluster), 30, f"left behind: {alive(cluster)}")
