"""The cache trusts nothing it reads (issue 28, items 1 and 13): a cache folder from elsewhere, with pickled objects
planted under keys a run uses (in the database, in a value file, in a file outside the folder), makes no code run
in a rerun or in `--validate`; the run pays for those calls again and overwrites the rows, and deletes no file
outside the folder. After a normal exit, `cache.db` alone (without its -wal and -shm files) holds every row.

Real `python run.py` processes over the fake server; the planted rows are written the way another program would
(diskcache's own default Disk, which pickles, and sqlite3 on the folder's database)."""

from __future__ import annotations

import pathlib
import pickle
import shutil
import sqlite3
from pathlib import Path

import diskcache
from conftest import DATA, model_entry, read_jsonl, run_cli, run_dir
from fakeserver import FakeOpenAIServer

from rubricrun.providers.cache import ResponseCache

MARKER = "planted-code-ran"
THIS_FORMAT = 2  # the tag this version stores its rows with (codec.CACHE_FORMAT)


class Planted:
    """Unpickling one creates the marker file: proof that a read ran its code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (pathlib.Path.touch, (self.marker,))


def _config(tmp_path: Path, make_config, server: FakeOpenAIServer) -> Path:
    return make_config(
        server,
        datasets=[{"path": str(DATA / "generic_sample.jsonl"), "limit": 2}],
        candidates=[model_entry("alpha", "openai/cand-alpha", server)],
        judges=[model_entry("j1", "openai/judge-one", server)],
    )


def _keys(run: Path) -> list[str]:
    rows = [*read_jsonl(run / "responses.jsonl"), *read_jsonl(run / "judgments.jsonl")]
    return list(dict.fromkeys(r["key"] for r in rows if r.get("key") and r.get("status", "ok") == "ok"))


def _plant(cache_dir: Path, keys: list[str], marker: Path, outside: Path) -> None:
    """Four rows another program could have left under keys the run uses."""
    k1, k2, k3, k4 = keys[:4]
    other = diskcache.Cache(str(cache_dir))  # diskcache's default Disk: values are pickled
    other.set(k1, Planted(marker))  # in the database, untagged (as rows were before tags)
    other.set(k2, Planted(marker), tag=THIS_FORMAT)  # in the database, claiming this version's format by its tag
    other.close()
    in_files = diskcache.Cache(str(cache_dir), disk_min_file_size=0)
    in_files.set(k3, Planted(marker))  # in a value file inside the folder
    in_files.close()
    with diskcache.Cache(str(cache_dir)) as c:
        c.set(k4, b"")
    outside.write_bytes(pickle.dumps(Planted(marker)))  # a pickle, outside the folder
    con = sqlite3.connect(cache_dir / "cache.db")
    with con:
        con.execute(
            "UPDATE Cache SET mode = ?, filename = ?, value = NULL WHERE key = ?",
            (diskcache.core.MODE_PICKLE, str(outside), k4),
        )
    con.close()


def test_planted_pickles_never_run_and_are_paid_for_and_overwritten(tmp_path: Path, make_config) -> None:
    marker, outside = tmp_path / MARKER, tmp_path / "outside" / "not-the-caches.bin"
    outside.parent.mkdir()
    with FakeOpenAIServer() as server:
        cfg = _config(tmp_path, make_config, server)
        assert run_cli(["--config", str(cfg), "--run-id", "r"]).returncode == 0
        run, cache_dir = run_dir(tmp_path, "r"), tmp_path / "cache"
        keys = _keys(run)
        assert len(keys) >= 4
        _plant(cache_dir, keys, marker, outside)
        paid = server.count(status=200)

        rc, out, err = run_cli(["--config", str(cfg), "--validate"])
        assert rc == 0, err
        assert not marker.exists(), "--validate ran a planted object's code"

        before = len(read_jsonl(run / "trace.jsonl"))
        rc, _, err = run_cli(["--config", str(cfg), "--run-id", "r"])
        assert rc == 0, err
        assert not marker.exists(), "the rerun ran a planted object's code"
        assert server.count(status=200) - paid == 4  # each planted row was a miss: paid once more
        rerun = read_jsonl(run / "trace.jsonl")[before:]
        assert sorted(e["key"] for e in rerun if not e["cache_hit"]) == sorted(keys[:4])
    assert outside.exists(), "a file outside the cache folder was deleted"
    cache = ResponseCache(cache_dir)
    try:
        assert all(cache.get(k) is not None for k in keys)  # overwritten with this version's rows
        assert cache.fresh_many(keys) == set(keys)
    finally:
        cache.close()
    assert not marker.exists()


def test_after_a_normal_exit_cache_db_alone_holds_every_row(tmp_path: Path, make_config) -> None:
    with FakeOpenAIServer() as server:
        cfg = _config(tmp_path, make_config, server)
        assert run_cli(["--config", str(cfg), "--run-id", "r"]).returncode == 0
        paid = server.count(status=200)
    keys = _keys(run_dir(tmp_path, "r"))
    assert paid == len(keys) > 0
    alone = tmp_path / "copy"
    alone.mkdir()
    shutil.copy(tmp_path / "cache" / "cache.db", alone / "cache.db")  # not cache.db-wal, not cache.db-shm
    con = sqlite3.connect(alone / "cache.db")
    assert con.execute("SELECT COUNT(*) FROM Cache").fetchone()[0] == len(keys)
    con.close()
    cache = ResponseCache(alone)
    try:
        assert all(cache.get(k) is not None for k in keys)
    finally:
        cache.close()


def test_a_row_naming_a_file_is_never_read_nor_its_file_deleted(tmp_path: Path) -> None:
    """A row whose value "lives in a file" (diskcache's file modes) names any path it likes: the store reads it as a
    miss and, overwriting the row, deletes nothing outside its folder, nor the database itself."""
    from rubricrun.types import LLMResponse

    cache_dir, outside = tmp_path / "cache", tmp_path / "outside.bin"
    outside.write_bytes(b'{"format":2,"text":"from a file"}')  # even a valid row is not read from a file
    reply = LLMResponse(text="stored")
    names = ["cache.db", "../outside.bin", str(outside), "ab/../../outside.bin", "ab/cd/../../../outside.bin"]
    for name in names:
        cache = ResponseCache(cache_dir)
        cache.set("k", reply)
        cache.close()
        con = sqlite3.connect(cache_dir / "cache.db")
        with con:
            for mode in (diskcache.core.MODE_BINARY, diskcache.core.MODE_TEXT, diskcache.core.MODE_PICKLE):
                con.execute("UPDATE Cache SET mode = ?, filename = ?, value = NULL WHERE key = 'k'", (mode, name))
        con.close()
        cache = ResponseCache(cache_dir)
        try:
            assert cache.get("k") is None, name
            assert cache.fresh_many(["k"]) == set()  # --validate counts it as the run will: a miss
            cache.set("k", reply)  # overwrites the row: diskcache removes the file the old row named, if inside
            assert cache.get("k") is not None
            cache.delete("k")
        finally:
            cache.close()
        assert outside.exists() and (cache_dir / "cache.db").exists(), name
