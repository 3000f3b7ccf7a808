"""Headless Chromium for the tests of web pages (the viewer's), as a user's browser renders them.

- `chromium(tmp, url, *args)`: one `chromium --headless` run with the flags below and a fresh profile under `tmp`
  (`--dump-dom` prints the DOM after the page's scripts ran; `--screenshot=PATH` writes a PNG). Returns
  (stdout, stderr).
- `Driver`: Chromium driven through chromedriver's W3C WebDriver API (plain HTTP JSON, no selenium): open a page,
  type, click, run a script, wait for a condition. For pages whose scripts act after load (labelling, polling).

Both need only the system packages (`chromium`, and `chromium-driver` for `Driver`); tests skip with a reason
where they are missing. Every process started here is stopped by its own pid.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)
_ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference


def _profile(tmp: Path) -> Path:
    n = 0
    while (tmp / f"chromium-profile-{n}").exists():
        n += 1
    path = tmp / f"chromium-profile-{n}"
    path.mkdir(parents=True)
    return path


def chromium(tmp: Path, url: str, *args: str, timeout: float = 120) -> tuple[str, str]:
    cmd = [CHROMIUM or "chromium", *FLAGS, f"--user-data-dir={_profile(tmp)}", *args, url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    return proc.stdout, proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Driver:
    """One Chromium session through chromedriver. Use as a context manager."""

    def __init__(self, tmp: Path, window: str = "1280,1000") -> None:
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [CHROMEDRIVER or "chromedriver", f"--port={self.port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait_up()
        args = [*FLAGS, f"--user-data-dir={_profile(tmp)}", f"--window-size={window}"]
        caps = {"alwaysMatch": {"goog:chromeOptions": {"binary": CHROMIUM, "args": args}}}
        self.session = self._call("POST", "/session", {"capabilities": caps})["sessionId"]

    def _wait_up(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                self._call("GET", "/status")
                return
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return json.loads(resp.read())["value"]
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"webdriver {method} {path}: {exc.read().decode(errors='replace')[:500]}") from None

    def _s(self, path: str) -> str:
        return f"/session/{self.session}{path}"

    def get(self, url: str) -> None:
        self._call("POST", self._s("/url"), {"url": url})

    def find(self, css: str) -> str:
        return self._call("POST", self._s("/element"), {"using": "css selector", "value": css})[_ELEMENT]

    def click(self, css: str) -> None:
        self._call("POST", self._s(f"/element/{self.find(css)}/click"), {})

    def type(self, css: str, text: str) -> None:
        element = self.find(css)
        self._call("POST", self._s(f"/element/{element}/clear"), {})
        self._call("POST", self._s(f"/element/{element}/value"), {"text": text})

    def script(self, js: str, *args: Any) -> Any:
        return self._call("POST", self._s("/execute/sync"), {"script": js, "args": list(args)})

    def text(self, css: str) -> str:
        return self.script("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", css)

    def url(self) -> str:
        return self._call("GET", self._s("/url"))

    def wait(self, what: Callable[[], Any], timeout: float = 20, message: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            got = what()
            if got:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout} s for {message or what}")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> None:
        import base64

        path.write_bytes(base64.b64decode(self._call("GET", self._s("/screenshot"))))

    def close(self) -> None:
        try:
            self._call("DELETE", self._s(""))
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
