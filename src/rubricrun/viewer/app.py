"""The viewer's Flask app and `serve`: Werkzeug's threaded server, bound to 127.0.0.1 unless told otherwise.

Handlers are plain functions (pages.py: HTML; api.py: the JSON twin). Pages are rendered with Jinja2, autoescape
on, from templates/ (the report's dataset section comes from results/templates: the same figures as report.html),
with the report's filters and our CSS and JavaScript inlined; no page loads anything from the network. Every
response carries a Content-Security-Policy that lets only the page's own inline script (by nonce) run, so even a
model's text that escaped the escaping could not run a script.

Bound to a loopback address, the app answers only requests whose Host is a loopback name (a web page elsewhere
cannot reach it by rebinding a name of its own to 127.0.0.1), and the one write (POST labels) must be JSON from
the viewer's own origin, which a form on another site cannot send.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
from flask import Flask, abort, g, jsonify, request, url_for
from markupsafe import Markup
from werkzeug.exceptions import Conflict, HTTPException

from ..errors import InputError
from ..results import report
from . import runs
from .index import RunIndex, cache_dir
from .rows import StaleIndex
from .views import scale_points

log = logging.getLogger("rubricrun")
TEMPLATES = Path(__file__).parent / "templates"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
CSP = (
    "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; img-src data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


class Viewer:
    """What the app holds: the outputs folder, one index per run folder (built on first use), the last
    comparisons."""

    def __init__(self, outputs: Path, cache: Path | None = None) -> None:
        self.outputs = Path(outputs).resolve()
        self.cache = Path(cache) if cache is not None else cache_dir()
        self._indexes: dict[str, RunIndex] = {}
        self._lock = threading.Lock()
        self.compares: dict[tuple, Any] = {}
        self.compare_lock = threading.Lock()  # one comparison made at a time (it holds both runs' rows)

    def run_dir(self, run_id: str) -> Path:
        """The folder of a run id named in a URL; 404 unless it is a run folder directly under outputs."""
        if not run_id or "/" in run_id or "\\" in run_id or run_id.startswith("."):
            abort(404, f"no run {run_id!r}")
        path = self.outputs / run_id
        if not runs.is_run_folder(path):
            abort(404, f"no run {run_id!r} in {self.outputs}")
        return path

    def index(self, run_id: str) -> RunIndex:
        """The run's index, brought up to what its files hold now."""
        path = self.run_dir(run_id)
        with self._lock:
            idx = self._indexes.get(run_id)
            if idx is None:
                idx = self._indexes[run_id] = RunIndex(path, self.cache)
        idx.refresh()
        return idx

    def close(self) -> None:
        with self._lock:
            for idx in self._indexes.values():
                idx.close()
            self._indexes.clear()


@functools.cache
def _env() -> jinja2.Environment:
    """Our templates, then the report's (its dataset section and charts), with the report's filters and globals
    and its bound on every text shown (`report.clip`: a page of a 50 MB row is not 50 MB; the JSON twin has it
    whole)."""
    base = report._env()
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([TEMPLATES, report.TEMPLATES, report.TASK_TEMPLATES]),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=base.finalize,
    )
    env.policies.update(base.policies)
    env.filters.update(base.filters)
    env.globals.update(base.globals)
    env.globals.update(url_for=url_for, scale_points=scale_points)
    env.filters.update(when=_when, as_json=lambda v: json.dumps(v, ensure_ascii=False, indent=1, default=str))
    return env


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "–"


@functools.cache
def _asset(name: str) -> Markup:
    """Our own CSS or JS, inlined as is (checked for '</', which would end the inline block)."""
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    if "</" in text:
        raise ValueError(f"{TEMPLATES / name}: contains '</', which would end the inline block")
    return Markup(text)


def render(template: str, **ctx: Any) -> str:
    """A page: its template with the nonce of this response's policy, our CSS (the report's, then ours) and JS."""
    css = Markup(report._asset("report.css") + "\n" + _asset("viewer.css"))
    return _env().get_template(template).render(nonce=g.nonce, css=css, js=_asset("viewer.js"), **ctx)


def viewer() -> Viewer:
    from flask import current_app

    return current_app.extensions["rubricrun.viewer"]


def create_app(outputs: Path, cache: Path | None = None, loopback_only: bool = True) -> Flask:
    """The app over the run folders under `outputs`; `cache`: where the indexes go (default: cache_dir())."""
    from . import api, pages

    app = Flask("rubricrun.viewer", static_folder=None)
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["rubricrun.viewer"] = Viewer(outputs, cache)
    app.register_blueprint(pages.bp)
    app.register_blueprint(api.bp)

    @app.before_request
    def _guard() -> Any:
        g.nonce = secrets.token_urlsafe(16)
        if loopback_only and _hostname(request.host) not in LOOPBACK:
            abort(403, "this viewer answers only on 127.0.0.1 / localhost")
        return None

    @app.after_request
    def _headers(resp: Any) -> Any:
        resp.headers.setdefault("Content-Security-Policy", CSP.format(nonce=getattr(g, "nonce", "")))
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Referrer-Policy"] = "no-referrer"
        resp.headers["Cache-Control"] = "no-store"
        return resp

    @app.errorhandler(StaleIndex)
    def _stale(exc: StaleIndex) -> Any:
        return _error(Conflict(f"{exc}: the run was started again; reload the page"))

    @app.errorhandler(HTTPException)
    def _error(exc: HTTPException) -> Any:
        message = exc.description or exc.name
        if request.path.startswith("/api/"):
            return jsonify(error=message), exc.code
        return render("error.html.j2", code=exc.code, name=exc.name, message=message), exc.code

    return app


def _hostname(host: str) -> str:
    """The name part of a Host header: `127.0.0.1:8765` -> 127.0.0.1, `[::1]:8765` -> ::1."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port), as Werkzeug would make it; OSError when that address cannot be bound."""
    from werkzeug.serving import get_sockaddr, select_address_family

    family = select_address_family(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(get_sockaddr(host, port, family))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def serve(outputs: Path, host: str, port: int, announce: Callable[[str], None] | None = None) -> None:
    """Serve until Ctrl+C. OSError when the address cannot be bound (in use, unknown host): the CLI says so."""
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    sock = _listen(host, port)  # ours: Werkzeug's own bind prints a paragraph and exits 1 when the port is taken
    app = create_app(outputs, loopback_only=host in LOOPBACK)
    try:
        server = make_server(host, port, app, threaded=True, fd=sock.fileno())
    finally:
        sock.close()  # (the server holds its own duplicate)
    shown = f"[{host}]" if ":" in host else host
    line = f"rubricrun viewer on http://{shown}:{server.port}/ (run folders in {outputs}); Ctrl+C stops it"
    (announce or functools.partial(print, flush=True))(line)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        app.extensions["rubricrun.viewer"].close()


def view(outputs_dir: str, host: str, port: int) -> int:
    """`--view OUTPUTS_DIR`: serve until Ctrl+C (exit 0); a missing folder or an address it cannot bind is bad input."""
    outputs = Path(outputs_dir)
    if not outputs.is_dir():
        raise InputError(f"--view {outputs_dir}: no such folder (run folders are written under run.output_dir)")
    try:
        serve(outputs, host, port)
    except OSError as exc:
        raise InputError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})") from None
    except KeyboardInterrupt:
        pass
    return 0
