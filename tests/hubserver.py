"""A minimal stand-in for the Hugging Face Hub API, enough for HfApi.create_repo + HfApi.create_commit.

It answers, on 127.0.0.1, the endpoints huggingface_hub (1.x, see hf_api.py and _commit_api.py) calls for a commit of
small files:

- POST /api/repos/create                          -> {"url": ...} (409 when the repo exists: exist_ok handles it)
- POST /api/validate-yaml                         -> {"errors": [], "warnings": []} (README.md metadata check)
- POST /api/{type}s/{ns}/{name}/preupload/{rev}   -> every file "regular" (inline base64 in the commit, no LFS/xet)
- POST /api/{type}s/{ns}/{name}/commit/{rev}      -> stores the ndjson payload's files, {"commitUrl", "commitOid"}

Anything else gets a 404 and is recorded, so a test can assert that no unexpected call was made. (With telemetry on,
huggingface_hub 1.x also GETs {HF_ENDPOINT as read at import}/api/agent-harnesses without the token; a 404 is ignored.)
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_REPO_PATH = re.compile(r"^/api/(models|datasets|spaces)/([^/]+/[^/]+)/(preupload|commit)/([^/?]+)")


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class HubStandIn:
    """Start with `start()`, point HF_ENDPOINT at `url`, read `requests`, `repos`, `commits` afterwards."""

    requests: list[Recorded] = field(default_factory=list)
    repos: dict[str, dict[str, Any]] = field(default_factory=dict)  # "dataset:ns/name" -> {"private", "files"}
    commits: list[dict[str, Any]] = field(default_factory=list)  # {"repo", "revision", "header", "files"}
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> HubStandIn:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def _body(self) -> bytes:
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _reply(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                rec = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self._body())
                stand_in.requests.append(rec)
                status, payload = stand_in.answer(rec)
                self._reply(status, payload)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # ------------------------------------------------------------------------------------------------------------
    def answer(self, rec: Recorded) -> tuple[int, Any]:
        path = rec.path.split("?", 1)[0]
        if rec.method == "POST" and path == "/api/repos/create":
            p = rec.json()
            repo_type = p.get("type") or "model"
            repo_id = f"{p['organization']}/{p['name']}" if p.get("organization") else p["name"]
            key = f"{repo_type}:{repo_id}"
            prefix = "" if repo_type == "model" else f"{repo_type}s/"
            if key in self.repos:
                return 409, {"error": "You already created this dataset repo", "url": f"{self.url}/{prefix}{repo_id}"}
            self.repos[key] = {"visibility": p.get("visibility"), "files": {}}
            return 200, {"url": f"{self.url}/{prefix}{repo_id}"}
        if rec.method == "POST" and path == "/api/validate-yaml":
            return 200, {"errors": [], "warnings": []}
        m = _REPO_PATH.match(path)
        if rec.method == "POST" and m:
            repo_type, repo_id, action, revision = m.group(1)[:-1], m.group(2), m.group(3), m.group(4)
            repo = self.repos.get(f"{repo_type}:{repo_id}")
            if repo is None:
                return 404, {"error": "Repository not found"}
            if action == "preupload":
                files = rec.json()["files"]
                return 200, {
                    "files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]
                }
            lines = [json.loads(line) for line in rec.body.splitlines() if line.strip()]
            header = next(x["value"] for x in lines if x["key"] == "header")
            files: dict[str, bytes] = {}
            for item in lines:
                if item["key"] == "file":
                    v = item["value"]
                    if v.get("encoding") != "base64":
                        return 400, {"error": f"unexpected encoding {v.get('encoding')!r}"}
                    files[v["path"]] = base64.b64decode(v["content"])
                elif item["key"] != "header":
                    return 400, {"error": f"stand-in does not handle {item['key']!r} operations"}
            repo["files"].update(files)
            self.commits.append({"repo": repo_id, "revision": revision, "header": header, "files": files})
            oid = hashlib.sha1(rec.body).hexdigest()
            return 200, {"commitUrl": f"{self.url}/{repo_type}s/{repo_id}/commit/{oid}", "commitOid": oid}
        return 404, {"error": f"stand-in has no route for {rec.method} {path}"}
