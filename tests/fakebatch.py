"""A local server for OpenAI's Files and Batch APIs on top of the fake chat server (tests/fakeserver.py).

    with FakeBatchServer(complete_after_s=0.2) as server:
        # /v1/chat/completions answers as FakeOpenAIServer does; besides it:
        POST /v1/files                      multipart upload (purpose, file) -> a file object
        GET  /v1/files/{id}                 the file object;  GET /v1/files/{id}/content: its bytes
        POST /v1/batches                    {input_file_id, endpoint, completion_window} -> a batch (validating)
        GET  /v1/batches                    every batch, newest first (one page)
        GET  /v1/batches/{id}               the batch: in_progress until `complete_after_s` passed, then done
        POST /v1/batches/{id}/cancel        cancelled (lines not yet run are not run)

Every line of a batch is answered by the chat server's own reply logic (queues, responder, the deterministic
default), so a batch run and an online run of the same requests get the same replies. Lines are run when a
retrieve first finds the batch due. Knobs (attributes, set before or between batches):
    complete_after_s   seconds from create until the batch is done (in_progress before)
    expire_batches     the next N batches expire: their first `expire_keep` lines are answered, the rest are
                       written to the error file with error code "batch_expired"
    fail_line          fail_line(body) -> True: that line answers HTTP 500 in the error file
    fail_batches       the next N batches end "failed" (validation error, no output)
Submissions: `submitted` lists (batch id, custom_id, fingerprint of the line's body) for every line of every
created batch; `duplicate_submissions()` counts bodies submitted more than once.
"""

from __future__ import annotations

import collections
import itertools
import json
import threading
import time
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import default as email_policy
from typing import Any

from fakeserver import FakeOpenAIServer, _Handler, fingerprint


class FakeBatchServer(FakeOpenAIServer):
    def __init__(
        self,
        *,
        complete_after_s: float = 0.0,
        expire_batches: int = 0,
        expire_keep: int = 0,
        fail_line: Callable[[dict[str, Any]], bool] | None = None,
        fail_batches: int = 0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.complete_after_s, self.expire_batches, self.expire_keep = complete_after_s, expire_batches, expire_keep
        self.fail_line, self.fail_batches = fail_line, fail_batches
        self.files: dict[str, dict[str, Any]] = {}  # id -> {"object": file object, "data": bytes}
        self.batches: dict[str, dict[str, Any]] = {}
        self.submitted: list[tuple[str, str, str]] = []
        self._ids = itertools.count(1)
        self._batch_lock = threading.Lock()

    def duplicate_submissions(self) -> int:
        """Line bodies submitted in more than one batch (or twice in one): each extra submission counts."""
        counts = collections.Counter(fp for _, _, fp in self.submitted)
        return sum(n - 1 for n in counts.values())

    # Files

    def add_file(self, data: bytes, purpose: str, filename: str, prefix: str = "file") -> dict[str, Any]:
        fid = f"{prefix}-{next(self._ids)}"
        obj = {
            "id": fid,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }
        with self._batch_lock:
            self.files[fid] = {"object": obj, "data": data}
        return obj

    # Batches

    def create_batch(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        fid = body.get("input_file_id")
        with self._batch_lock:
            f = self.files.get(str(fid))
        if f is None:
            return 404, {"error": {"message": f"No such File object: {fid}", "type": "invalid_request_error"}}
        lines = [json.loads(x) for x in f["data"].decode().splitlines() if x.strip()]
        now = int(time.time())
        bid = f"batch_{next(self._ids)}"
        batch = {
            "id": bid,
            "object": "batch",
            "endpoint": body.get("endpoint", "/v1/chat/completions"),
            "errors": None,
            "input_file_id": fid,
            "completion_window": body.get("completion_window", "24h"),
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + 86400,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        with self._batch_lock:
            self.batches[bid] = {"batch": batch, "lines": lines, "t0": time.monotonic()}
            self.submitted += [(bid, ln.get("custom_id", ""), fingerprint(ln.get("body"))) for ln in lines]
        return 200, batch

    def retrieve_batch(self, bid: str) -> dict[str, Any] | None:
        with self._batch_lock:
            entry = self.batches.get(bid)
            if entry is None:
                return None
            batch = entry["batch"]
            if batch["status"] in ("validating", "in_progress"):
                if time.monotonic() - entry["t0"] < self.complete_after_s:
                    batch["status"] = "in_progress"
                    batch["in_progress_at"] = batch["in_progress_at"] or int(time.time())
                else:
                    self._finish(entry)
            return dict(batch)

    def cancel_batch(self, bid: str) -> dict[str, Any] | None:
        with self._batch_lock:
            entry = self.batches.get(bid)
            if entry is None:
                return None
            if entry["batch"]["status"] in ("validating", "in_progress"):
                entry["batch"].update(status="cancelled", cancelled_at=int(time.time()))
            return dict(entry["batch"])

    def _finish(self, entry: dict[str, Any]) -> None:
        """Run the batch's lines (under the batch lock) and write its output and error files."""
        batch, now = entry["batch"], int(time.time())
        if self.fail_batches > 0:
            self.fail_batches -= 1
            batch.update(
                status="failed",
                failed_at=now,
                errors={"object": "list", "data": [{"code": "invalid_file", "message": "fakebatch: failed"}]},
            )
            return
        expire = self.expire_batches > 0
        if expire:
            self.expire_batches -= 1
        out, err = [], []
        for i, line in enumerate(entry["lines"]):
            cid, body = line.get("custom_id"), line.get("body") or {}
            rid = f"batch_req_{entry['batch']['id']}_{i}"
            if expire and i >= self.expire_keep:
                error = {"code": "batch_expired", "message": "This request could not be executed before the window."}
                err.append({"id": rid, "custom_id": cid, "response": None, "error": error})
                continue
            status, reply = self._answer(body)
            row = {"id": rid, "custom_id": cid, "response": {"status_code": status, "request_id": rid, "body": reply}}
            row["error"] = None
            (out if status == 200 else err).append(row)
        counts = {"total": len(entry["lines"]), "completed": len(out), "failed": len(err)}
        batch.update(status="expired" if expire else "completed", request_counts=counts, finalizing_at=now)
        batch["expired_at" if expire else "completed_at"] = now
        for rows, key, name in ((out, "output_file_id", "output"), (err, "error_file_id", "error")):
            if rows:
                data = "".join(json.dumps(r) + "\n" for r in rows).encode()
                fid = f"file-{name}-{next(self._ids)}"
                obj = {"id": fid, "object": "file", "bytes": len(data), "created_at": now}
                obj.update(filename=f"{batch['id']}_{name}.jsonl", purpose="batch_output", status="processed")
                self.files[fid] = {"object": obj, "data": data}
                batch[key] = fid

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A line's (status, body), by the chat server's reply logic."""
        if self.fail_line is not None and self.fail_line(body):
            return 500, {"error": {"message": "fakebatch: line failed", "type": "server_error", "code": None}}
        reply = self._next_reply(body)
        if isinstance(reply, str):
            reply = {"content": reply}
        status = int(reply.get("status", 200))
        if status != 200:
            return status, {"error": {"message": reply.get("message") or f"HTTP {status}", "type": "server_error"}}
        return 200, reply if "choices" in reply else self._completion(body, reply)


class _BatchHandler(_Handler):
    def do_GET(self) -> None:
        fake: FakeBatchServer = self.server.fake  # type: ignore[assignment]
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["v1", "files"] and len(parts) >= 3:
            with fake._batch_lock:
                f = fake.files.get(parts[2])
            if f is None:
                return self._send_error(404, f"No such File object: {parts[2]}")
            if parts[3:] == ["content"]:
                return self._send(200, f["data"], "application/octet-stream")
            return self._send_json(200, f["object"])
        if parts == ["v1", "batches"]:
            with fake._batch_lock:
                data = [dict(e["batch"]) for e in reversed(fake.batches.values())]
            return self._send_json(200, {"object": "list", "data": data, "has_more": False})
        if parts[:2] == ["v1", "batches"] and len(parts) == 3:
            batch = fake.retrieve_batch(parts[2])
            return self._send_json(200, batch) if batch else self._send_error(404, f"No such batch: {parts[2]}")
        return super().do_GET()

    def do_POST(self) -> None:
        fake: FakeBatchServer = self.server.fake  # type: ignore[assignment]
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts == ["v1", "files"]:
            return self._upload(fake)
        if parts[:2] == ["v1", "batches"]:
            raw = self._read_body()
            if len(parts) == 2:
                status, obj = fake.create_batch(json.loads(raw or b"{}"))
                return self._send_json(status, obj)
            if len(parts) == 4 and parts[3] == "cancel":
                batch = fake.cancel_batch(parts[2])
                return self._send_json(200, batch) if batch else self._send_error(404, f"No such batch: {parts[2]}")
        return super().do_POST()

    def _upload(self, fake: FakeBatchServer) -> None:
        raw = self._read_body()
        head = f"Content-Type: {self.headers.get('Content-Type', '')}\r\n\r\n".encode()
        msg = BytesParser(policy=email_policy).parsebytes(head + raw)
        fields: dict[str, Any] = {}
        filename = "upload.jsonl"
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = part.get_payload(decode=True)
            if name == "file":
                filename = part.get_filename() or filename
        if "file" not in fields:
            return self._send_error(400, "missing file")
        purpose = (fields.get("purpose") or b"batch").decode()
        return self._send_json(200, fake.add_file(fields["file"], purpose, filename))


FakeBatchServer.handler = _BatchHandler
