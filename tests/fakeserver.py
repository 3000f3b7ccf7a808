"""A local OpenAI-compatible server for integration tests, fault tests and benchmarks (stdlib only).

    with FakeOpenAIServer(latency_s=0.01, p_429=0.1, seed=1) as server:
        litellm.completion(model="openai/fake-model", api_base=server.base_url, api_key="sk-test", messages=...)
        assert server.count(status=200) == ...

Endpoints (all under ``base_url`` = ``http://127.0.0.1:PORT/v1``):
    POST /v1/chat/completions   a chat.completion JSON (or an SSE stream when the body has "stream": true)
    GET  /v1/models             the models it has seen, plus "fake-model"
    anything else               404 with an OpenAI-style JSON error
Admin endpoints (not logged, not under /v1; for a server run in another process with the CLI):
    GET  /_admin/stats          {"total", "by_status", "by_model", "by_fault", "duplicate_fingerprints"}
    GET  /_admin/requests       the request log (without headers)
    POST /_admin/reset          clears the request log and the rate-limit window
    POST /_admin/configure      JSON body of `configure()` keyword arguments (rules excluded)

How one chat request is answered, in this order:
    1. a body that is not JSON -> 400.
    2. `latency_s` sleep (fixed, per request).
    3. `rules`, first match wins: (match, status, count) where match is a model-name substring or a predicate on
       the request dict, and count is how many times the rule fires (None = always).
    4. rate limit: `rpm` (global) and `model_rpm` (per exact model name) are ROLLING WINDOWS of `rpm_window_s`
       (default 60 s): a request arriving when the window already holds N accepted requests gets 429 with
       Retry-After = whole seconds until the oldest one leaves the window. Only accepted requests enter the
       window (rejected ones do not); a request admitted here counts even if a random fault follows.
       `tpm` (global) is a rolling window of tokens: a request is admitted while the window's tokens plus its
       prompt tokens fit in `tpm` (else 429, fault "tpm", Retry-After = whole seconds until they would), and its
       completion tokens join the window (at its admission time) once the reply is made. Tokens are counted as
       the reply's `usage` reports them: prompt = sum over messages of (chars / 4, rounded up) + 3.
       With `rpm` or `tpm` set, every chat reply (and every 429 of the limit) carries OpenAI's headers
       x-ratelimit-{limit,remaining,reset}-{requests,tokens} for the limits that are set; `reset` is the time
       until the oldest entry leaves the window (when the next unit frees), written like "0.25s".
    5. random faults, one draw of a seeded `random.Random` per request: p_429 (Retry-After: `retry_after_s`),
       p_500, p_hang (sleep `hang_s` - 30 s by default - then reply normally), p_bad_json (200, body not JSON).
    6. the reply: the per-model FIFO queue (`enqueue(..., model=...)`), then the global queue, then `responder`,
       then the deterministic default: for a judge request (it has a response_format, or a system/user message
       says "criteria_met") the JSON text {"explanation": ..., "criteria_met": <bool from a hash of the
       messages>}; otherwise "Answer to: <first 60 chars of the last user message>".

A reply (queued, or returned by `responder`) is either a string (the message content) or a dict:
    {"content": str, "finish_reason": "stop"|"length"|..., "usage": {...}, "model": str,
     "reasoning_content": str (sent beside the content, as reasoning models served by vLLM or DeepSeek do),
     "status": int (non-200 answers an OpenAI-style error), "message": str (the error message),
     "retry_after": float (Retry-After header for a 429), "raw": str (send this body verbatim, status 200 unless
     "status" says otherwise), "delay_s": float (extra sleep before answering)}
or a full response body (a dict with "choices"), which is sent as is.

Every request (including faults) is logged with its time, model, parsed body, answered status and a fingerprint
(sha256 of the canonical JSON body); see `requests`, `count()`, `fingerprint_counts()` and `reset_log()`.
Stopping never waits for hanging requests: `stop()` wakes every sleeping handler and closes every connection.
Several server processes can share one port (`--reuse-port`, SO_REUSEPORT: the kernel spreads the connections), so
that a benchmark's server is not its limit (benchmarks/bench_executor.py); each keeps its own log and counts.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import http.server
import json
import math
import random
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

Match = str | Callable[[dict[str, Any]], bool]
Reply = str | dict[str, Any]

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", None),
}
_MESSAGES = {  # OpenAI's wording: LiteLLM picks its exception class partly from these strings
    400: "Invalid request.",
    401: "Incorrect API key provided: sk-te****. You can find your API key at https://platform.openai.com/account/api-keys.",
    403: "You are not allowed to sample from this model.",
    404: "The model `{model}` does not exist or you do not have access to it.",
    429: "Rate limit reached for requests. Please try again in {retry_after}s.",
    500: "The server had an error while processing your request. Sorry about that!",
    502: "Bad gateway.",
    503: "The engine is currently overloaded, please try again later.",
}
_BAD_JSON_BODY = "<html><body>upstream proxy error: this is not JSON</body></html>"


def fingerprint(body: Any) -> str:
    """sha256 of the canonical JSON of a request body (sorted keys, no spaces); raw bytes are hashed as is."""
    if isinstance(body, bytes | bytearray):
        data = bytes(body)
    else:
        data = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()


def estimate_tokens(text: str) -> int:
    """Roughly 4 characters a token, at least 1."""
    return max(1, math.ceil(len(text) / 4))


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message whose content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt tokens a reply's usage reports (and `tpm` counts): per message, chars / 4 rounded up, + 3."""
    return sum(estimate_tokens(message_text(m)) + 3 for m in body.get("messages") or [] if isinstance(m, dict))


def is_judge_request(body: dict[str, Any]) -> bool:
    if body.get("response_format"):
        return True
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") in ("system", "user") and "criteria_met" in message_text(m):
            return True
    return False


def default_reply(body: dict[str, Any]) -> str:
    """The deterministic reply to a request (see the module docstring)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if is_judge_request(body):
        digest = hashlib.sha256(json.dumps([message_text(m) for m in messages]).encode()).digest()
        met = bool(digest[0] & 1)
        explanation = "The response satisfies the criterion." if met else "The response does not satisfy the criterion."
        return json.dumps({"explanation": explanation, "criteria_met": met})
    users = [m for m in messages if m.get("role") == "user"]
    last = message_text(users[-1]) if users else ""
    return f"Answer to: {last[:60]}"


@dataclass(frozen=True)
class LoggedRequest:
    t: float  # time.time() when the request arrived
    method: str
    path: str
    model: str | None
    body: Any  # the parsed JSON body (the raw text when it was not JSON; None for GET)
    status: int  # the status it answered
    fingerprint: str
    fault: str | None = None  # "rule", "rpm", "p_429", "p_500", "p_hang", "p_bad_json", "queued_error", ...
    headers: dict[str, str] = field(default_factory=dict)
    client_port: int = 0  # the client's TCP port: one port per kept-alive connection
    tokens: int = 0  # prompt + completion tokens the reply's usage reported (0 when there was no completion)


@dataclass
class Rule:
    """Answer `status` to the requests `match` accepts, `count` times (None: always)."""

    match: Match
    status: int
    count: int | None = None
    message: str = ""
    retry_after_s: float | None = None  # Retry-After header of a 429 (default: the server's retry_after_s)

    def matches(self, body: dict[str, Any]) -> bool:
        if self.count is not None and self.count <= 0:
            return False
        if callable(self.match):
            return bool(self.match(body))
        return self.match in str(body.get("model", ""))


def _as_rule(rule: Rule | tuple[Any, ...]) -> Rule:
    if isinstance(rule, Rule):
        return rule
    return Rule(*rule)


_CONFIG_KEYS = (
    "latency_s",
    "p_429",
    "p_500",
    "p_hang",
    "p_bad_json",
    "hang_s",
    "retry_after_s",
    "rpm",
    "model_rpm",
    "rpm_window_s",
    "tpm",
    "responder",
    "honor_max_tokens",
)


class FakeOpenAIServer:
    handler: type = None  # type: ignore[assignment] # the request handler class (_Handler; fakebatch.py extends it)

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_s: float = 0.0,
        p_429: float = 0.0,
        p_500: float = 0.0,
        p_hang: float = 0.0,
        p_bad_json: float = 0.0,
        hang_s: float = 30.0,
        retry_after_s: float = 1.0,
        rpm: float | None = None,
        model_rpm: dict[str, float] | None = None,
        rpm_window_s: float = 60.0,
        tpm: float | None = None,
        rules: Iterable[Rule | tuple[Any, ...]] = (),
        responder: Callable[[dict[str, Any]], Reply] | None = None,
        honor_max_tokens: bool = False,  # truncate replies to max_tokens*4 chars with finish_reason "length"
        seed: int = 0,
        reuse_port: bool = False,  # SO_REUSEPORT: several server processes share one port (the kernel spreads them)
    ):
        self._lock = threading.Lock()
        self.reuse_port = reuse_port
        self.host, self._port = host, port
        self.latency_s, self.p_429, self.p_500, self.p_hang, self.p_bad_json = (
            latency_s,
            p_429,
            p_500,
            p_hang,
            p_bad_json,
        )
        self.hang_s, self.retry_after_s = hang_s, retry_after_s
        self.rpm, self.model_rpm, self.rpm_window_s = rpm, dict(model_rpm or {}), rpm_window_s
        self.tpm = tpm
        self.responder, self.honor_max_tokens = responder, honor_max_tokens
        self._rules = [_as_rule(r) for r in rules]
        self._rng = random.Random(seed)
        self._log: list[LoggedRequest] = []
        self._queue: collections.deque[Reply] = collections.deque()
        self._model_queues: dict[str, collections.deque[Reply]] = {}
        self._window: collections.deque[float] = collections.deque()
        self._model_windows: dict[str, collections.deque[float]] = {}
        self._token_window: collections.deque[list[float]] = collections.deque()  # [admitted at, tokens]
        self._token_sum = 0.0
        self._models_seen: set[str] = set()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()

    # ---------------------------------------------------------------------------------------------
    # Lifecycle

    def start(self) -> FakeOpenAIServer:
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._stopping.clear()
        self._httpd = _HTTPServer((self.host, self._port), self.handler or _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fakeserver", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()  # wakes every latency/hang sleep
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:  # idle keep-alive connections: their handler threads exit on EOF
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # ---------------------------------------------------------------------------------------------
    # Runtime control (thread-safe)

    def configure(self, **kwargs: Any) -> None:
        """Change fault settings while serving, e.g. `configure(p_500=0.0, latency_s=0.2)`."""
        unknown = set(kwargs) - set(_CONFIG_KEYS)
        if unknown:
            raise TypeError(f"unknown settings: {sorted(unknown)}")
        with self._lock:
            for key, value in kwargs.items():
                setattr(self, key, dict(value or {}) if key == "model_rpm" else value)

    def add_rule(self, match: Match, status: int, count: int | None = None, **kwargs: Any) -> Rule:
        rule = Rule(match, status, count, **kwargs)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear_rules(self) -> None:
        with self._lock:
            self._rules.clear()

    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    def enqueue(self, reply: Reply, model: str | None = None) -> None:
        """Queue a reply (FIFO). With `model`, only a request for exactly that model name takes it."""
        with self._lock:
            if model is None:
                self._queue.append(reply)
            else:
                self._model_queues.setdefault(model, collections.deque()).append(reply)

    def pending(self) -> int:
        """Queued replies not yet consumed."""
        with self._lock:
            return len(self._queue) + sum(len(q) for q in self._model_queues.values())

    # ---------------------------------------------------------------------------------------------
    # Request log (thread-safe)

    @property
    def requests(self) -> list[LoggedRequest]:
        with self._lock:
            return list(self._log)

    def count(self, status: int | None = None, model: str | None = None) -> int:
        """Logged chat requests, optionally only those answered `status` / for exactly `model`."""
        with self._lock:
            return sum(
                1
                for r in self._log
                if r.method == "POST" and (status is None or r.status == status) and (model is None or r.model == model)
            )

    def fingerprint_counts(self, status: int | None = None) -> collections.Counter[str]:
        """How many times each distinct chat request body was received (optionally only those answered `status`)."""
        with self._lock:
            return collections.Counter(
                r.fingerprint for r in self._log if r.method == "POST" and (status is None or r.status == status)
            )

    def reset_log(self) -> None:
        """Forget logged requests and the rate-limit windows (rules, queues and settings stay)."""
        with self._lock:
            self._log.clear()
            self._window.clear()
            self._model_windows.clear()
            self._token_window.clear()
            self._token_sum = 0.0

    def stats(self) -> dict[str, Any]:
        with self._lock:
            posts = [r for r in self._log if r.method == "POST"]
        fps = collections.Counter(r.fingerprint for r in posts)
        return {
            "total": len(posts),
            "by_status": dict(collections.Counter(str(r.status) for r in posts)),
            "by_model": dict(collections.Counter(str(r.model) for r in posts)),
            "by_fault": dict(collections.Counter(str(r.fault) for r in posts if r.fault)),
            "duplicate_fingerprints": sum(1 for n in fps.values() if n > 1),
        }

    # ---------------------------------------------------------------------------------------------
    # Decisions (called by the handler)

    def _record(self, entry: LoggedRequest) -> None:
        with self._lock:
            self._log.append(entry)

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops first; True if it stopped."""
        if seconds <= 0:
            return self._stopping.is_set()
        return self._stopping.wait(seconds)

    def _decide(self, body: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None, list[float] | None]:
        """(fault name, error spec) or (random fault name for hang/bad json, None) or (None, None) for a reply,
        and the request's entry in the token window (None without `tpm`), which its completion tokens join."""
        model = str(body.get("model", ""))
        with self._lock:
            self._models_seen.add(model)
            for rule in self._rules:
                if rule.matches(body):
                    if rule.count is not None:
                        rule.count -= 1
                    wait = rule.retry_after_s if rule.retry_after_s is not None else self.retry_after_s
                    spec = {
                        "status": rule.status,
                        "message": rule.message or _message(rule.status, model, "rule", wait),
                    }
                    if rule.retry_after_s is not None:
                        spec["retry_after"] = rule.retry_after_s
                    return "rule", spec, None
            now = time.monotonic()
            prompt = prompt_tokens(body) if self.tpm is not None else 0
            for fault, wait in (("rpm", self._rate_limit_wait(now, model)), ("tpm", self._token_wait(now, prompt))):
                if wait is not None:
                    message = _message(429, model, fault, wait)
                    headers = self._limit_headers(now, model)
                    return fault, {"status": 429, "message": message, "retry_after": wait, "headers": headers}, None
            self._window.append(now)
            if model in self.model_rpm:
                self._model_windows.setdefault(model, collections.deque()).append(now)
            entry = None
            if self.tpm is not None:
                entry = [now, float(prompt)]
                self._token_window.append(entry)
                self._token_sum += prompt
            r = self._rng.random()
            edge = 0.0
            for name in ("p_429", "p_500", "p_hang", "p_bad_json"):
                edge += getattr(self, name)
                if r < edge:
                    if name == "p_429":
                        return name, {"status": 429, "message": _message(429, model, name, self.retry_after_s)}, entry
                    if name == "p_500":
                        return name, {"status": 500, "message": _message(500, model, name)}, entry
                    return name, None, entry
            return None, None, entry

    def _token_wait(self, now: float, prompt: int) -> int | None:
        """Whole seconds until `prompt` more tokens fit in the token window, or None if they fit now (lock held)."""
        if self.tpm is None:
            return None
        window = self._token_window
        while window and window[0][0] <= now - self.rpm_window_s:
            self._token_sum -= window.popleft()[1]
        if self._token_sum + prompt <= self.tpm:
            return None
        left = self._token_sum
        for t, tokens in window:
            left -= tokens
            if left + prompt <= self.tpm:
                return max(1, math.ceil(t + self.rpm_window_s - now))
        return max(1, math.ceil(self.rpm_window_s))

    def _add_tokens(self, entry: list[float] | None, tokens: int) -> None:
        """A reply's completion tokens join its entry in the token window (if the entry is still in it)."""
        if entry is None:
            return
        with self._lock:
            entry[1] += tokens
            if entry[0] > time.monotonic() - self.rpm_window_s:
                self._token_sum += tokens

    def _limit_headers(self, now: float, model: str) -> dict[str, str]:
        """OpenAI's x-ratelimit-* headers for the limits that are set (lock held; windows already trimmed)."""
        headers: dict[str, str] = {}
        requests = [(self.rpm, self._window)]
        if model in self.model_rpm:
            requests.append((self.model_rpm[model], self._model_windows.setdefault(model, collections.deque())))
        best = None
        for limit, window in requests:
            if limit is not None and (best is None or limit - len(window) < best[0] - len(best[1])):
                best = (limit, window)
        if best is not None:
            limit, window = best
            reset = window[0] + self.rpm_window_s - now if window else 0.0
            headers["x-ratelimit-limit-requests"] = str(int(limit))
            headers["x-ratelimit-remaining-requests"] = str(max(0, int(limit) - len(window)))
            headers["x-ratelimit-reset-requests"] = _fmt_reset(reset)
        if self.tpm is not None:
            window = self._token_window
            reset = window[0][0] + self.rpm_window_s - now if window else 0.0
            headers["x-ratelimit-limit-tokens"] = str(int(self.tpm))
            headers["x-ratelimit-remaining-tokens"] = str(max(0, int(self.tpm - self._token_sum)))
            headers["x-ratelimit-reset-tokens"] = _fmt_reset(reset)
        return headers

    def rate_headers(self, model: str) -> dict[str, str]:
        """The x-ratelimit-* headers as of now (empty when no limit is set)."""
        with self._lock:
            if self.rpm is None and self.tpm is None and model not in self.model_rpm:
                return {}
            now = time.monotonic()
            self._rate_limit_wait(now, model)  # trims the request windows
            self._token_wait(now, 0)  # trims the token window
            return self._limit_headers(now, model)

    def _rate_limit_wait(self, now: float, model: str) -> int | None:
        """Whole seconds until a slot frees, or None if the request may go (caller holds the lock)."""
        waits = []
        limits = [(self.rpm, self._window)]
        if model in self.model_rpm:
            limits.append((self.model_rpm[model], self._model_windows.setdefault(model, collections.deque())))
        for limit, window in limits:
            if limit is None:
                continue
            while window and window[0] <= now - self.rpm_window_s:
                window.popleft()
            if len(window) >= limit:
                waits.append(max(1, math.ceil(window[0] + self.rpm_window_s - now)))
        return max(waits) if waits else None

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        model = str(body.get("model", ""))
        with self._lock:
            queue = self._model_queues.get(model)
            if queue:
                return queue.popleft()
            if self._queue:
                return self._queue.popleft()
            responder = self.responder
        if responder is not None:
            return responder(body)
        return default_reply(body)

    def _completion(self, body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        content = reply.get("content", "")
        finish_reason = reply.get("finish_reason", "stop")
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        if self.honor_max_tokens and isinstance(max_tokens, int) and estimate_tokens(content) > max_tokens:
            content, finish_reason = content[: max_tokens * 4], "length"
        prompt = prompt_tokens(body)
        completion_tokens = estimate_tokens(content)
        usage = reply.get("usage") or {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
        }
        seed_text = fingerprint(body)[:24]
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if reply.get("reasoning_content") is not None:
            message["reasoning_content"] = reply["reasoning_content"]
        return {
            "id": f"chatcmpl-{seed_text}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.get("model") or body.get("model", "fake-model"),
            "system_fingerprint": "fp_fakeserver",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": usage,
        }


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type, fake: FakeOpenAIServer):
        self.fake = fake
        self.allow_reuse_port = fake.reuse_port
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # a client reset its connection: not our concern
            return
        super().handle_error(request, client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1.0"
    disable_nagle_algorithm = True
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        fake = self.server.fake
        with fake._lock:
            fake._conns.add(self.connection)

    def finish(self) -> None:
        fake = self.server.fake
        with fake._lock:
            fake._conns.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence the per-request stderr line
        pass

    # ---------------------------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length))
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return b""

    def _send(self, status: int, body: bytes, content_type: str = "application/json", headers: dict | None = None):
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client went away (timed out on a hang, or the server is stopping)
            self.close_connection = True

    def _send_json(self, status: int, obj: Any, headers: dict | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), headers=headers)

    def _send_error(
        self, status: int, message: str, retry_after: float | None = None, headers: dict | None = None
    ) -> None:
        err_type, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
        headers = dict(headers or {})
        if status == 429:
            headers["Retry-After"] = _fmt_seconds(retry_after if retry_after is not None else 1)
        body = {"error": {"message": message, "type": err_type, "param": None, "code": code}}
        self._send_json(status, body, headers)

    def _log(
        self, t: float, model: str | None, body: Any, status: int, fp: str, fault: str | None = None, tokens: int = 0
    ) -> None:
        headers = dict(self.headers.items())
        entry = LoggedRequest(
            t, self.command, self.path, model, body, status, fp, fault, headers, self.client_address[1], tokens
        )
        self.server.fake._record(entry)

    # ---------------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        fake = self.server.fake
        path = self.path.split("?")[0].rstrip("/")
        if path == "/_admin/stats":
            return self._send_json(200, fake.stats())
        if path == "/_admin/requests":
            rows = [{k: v for k, v in asdict(r).items() if k != "headers"} for r in fake.requests]
            return self._send_json(200, rows)
        t = time.time()
        if path in ("/v1/models", "/models"):
            with fake._lock:
                names = sorted(fake._models_seen | {"fake-model"})
            data = [{"id": n, "object": "model", "created": 0, "owned_by": "fakeserver"} for n in names]
            self._log(t, None, None, 200, fingerprint(b""))
            return self._send_json(200, {"object": "list", "data": data})
        self._log(t, None, None, 404, fingerprint(b""))
        self._send_error(404, f"Unknown path: GET {self.path}")

    def do_POST(self) -> None:
        fake = self.server.fake
        t = time.time()
        raw = self._read_body()
        path = self.path.split("?")[0].rstrip("/")
        if path.startswith("/_admin/"):
            return self._admin(path, raw)
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            self._log(t, None, raw.decode(errors="replace"), 400, fingerprint(raw), "bad_request_json")
            return self._send_error(400, "We could not parse the JSON body of your request.")
        fp = fingerprint(body)
        model = str(body.get("model")) if isinstance(body, dict) and "model" in body else None
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._log(t, model, body, 404, fp)
            return self._send_error(404, f"Unknown path: POST {self.path}")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._log(t, model, body, 400, fp, "bad_request" if raw else "empty_body")
            return self._send_error(400, "'messages' is a required property")

        if fake._sleep(fake.latency_s):
            self.close_connection = True
            return
        fault, spec, tokens_entry = fake._decide(body)
        if spec is not None:
            self._log(t, model, body, spec["status"], fp, fault)
            retry_after = spec.get("retry_after", fake.retry_after_s)
            return self._send_error(spec["status"], spec["message"], retry_after, spec.get("headers"))
        if fault == "p_bad_json":
            self._log(t, model, body, 200, fp, fault)
            return self._send(200, _BAD_JSON_BODY.encode())
        if fault == "p_hang":
            self._log(t, model, body, 200, fp, fault)
            if fake._sleep(fake.hang_s):
                self.close_connection = True
                return

        reply = fake._next_reply(body)
        if isinstance(reply, str):
            reply = {"content": reply}
        if not isinstance(reply, dict):
            raise TypeError(f"a reply must be a str or a dict, got {type(reply).__name__}")
        if reply.get("delay_s") and fake._sleep(float(reply["delay_s"])):
            self.close_connection = True
            return
        status = int(reply.get("status", 200))
        completion = None
        if status == 200 and "raw" not in reply:
            completion = reply if "choices" in reply else fake._completion(body, reply)
        usage = (completion or {}).get("usage") or {}
        completion_tokens = int(usage.get("completion_tokens") or 0)
        fake._add_tokens(tokens_entry, completion_tokens)
        if fault is None:
            tokens = int(usage.get("prompt_tokens") or 0) + completion_tokens
            self._log(t, model, body, status, fp, "queued_error" if status != 200 else None, tokens)
        if "raw" in reply:
            return self._send(status, str(reply["raw"]).encode())
        if status != 200:
            message = reply.get("message") or _message(status, str(model), "queued")
            return self._send_error(status, message, reply.get("retry_after"))
        assert completion is not None
        headers = fake.rate_headers(str(model))
        if body.get("stream"):
            return self._send(200, _sse(completion, body), "text/event-stream", headers)
        self._send_json(200, completion, headers)

    def _admin(self, path: str, raw: bytes) -> None:
        fake = self.server.fake
        if path == "/_admin/reset":
            fake.reset_log()
            return self._send_json(200, {"ok": True})
        if path == "/_admin/configure":
            try:
                fake.configure(**{k: v for k, v in json.loads(raw or b"{}").items() if k != "responder"})
            except (TypeError, ValueError) as e:
                return self._send_error(400, str(e))
            return self._send_json(200, {"ok": True})
        self._send_error(404, f"Unknown admin path: {path}")


def _message(status: int, model: str, source: str, retry_after: float | None = None) -> str:
    text = _MESSAGES.get(status, f"HTTP {status}.").format(model=model, retry_after=_fmt_seconds(retry_after or 1))
    return f"{text} (fakeserver: {source})"


def _fmt_reset(seconds: float) -> str:
    """A reset time as OpenAI writes short ones: "0.25s", "12s"."""
    return f"{max(0.0, seconds):.3f}".rstrip("0").rstrip(".") + "s"


def _fmt_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


def _sse(completion: dict[str, Any], body: dict[str, Any]) -> bytes:
    """The completion as a (single content chunk) server-sent event stream."""
    choice = completion["choices"][0]
    base = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint") if k in completion}
    base["object"] = "chat.completion.chunk"
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": choice["message"]["content"]}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason", "stop")}]},
    ]
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": completion.get("usage")})
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


# -------------------------------------------------------------------------------------------------
# CLI: python tests/fakeserver.py --port 0 --latency 0.2 --rpm 600


def _parse_rule(spec: str) -> Rule:
    """'SUBSTRING:STATUS[:COUNT]' (an empty substring matches every model), e.g. 'bad:400', ':429:3'."""
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        raise argparse.ArgumentTypeError(f"rule {spec!r}: expected SUBSTRING:STATUS[:COUNT]")
    return Rule(parts[0], int(parts[1]), int(parts[2]) if len(parts) == 3 else None)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Local OpenAI-compatible fake server. Prints its base URL first.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds slept per request")
    ap.add_argument("--rpm", type=float, default=None, help="rolling 60 s window limit, 429 beyond it")
    ap.add_argument("--rpm-window", type=float, default=60.0)
    ap.add_argument("--tpm", type=float, default=None, help="rolling window limit on tokens, 429 beyond it")
    ap.add_argument("--p-429", type=float, default=0.0)
    ap.add_argument("--p-500", type=float, default=0.0)
    ap.add_argument("--p-hang", type=float, default=0.0)
    ap.add_argument("--p-bad-json", type=float, default=0.0)
    ap.add_argument("--hang", type=float, default=30.0, help="seconds a hanging request sleeps")
    ap.add_argument("--retry-after", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rule", action="append", type=_parse_rule, default=[], help="SUBSTRING:STATUS[:COUNT]")
    ap.add_argument("--stats-on-exit", action="store_true", help="print stats JSON to stderr on exit")
    ap.add_argument(
        "--reuse-port", action="store_true", help="SO_REUSEPORT: start several with one --port to share the load"
    )
    args = ap.parse_args(argv)
    server = FakeOpenAIServer(
        host=args.host,
        port=args.port,
        latency_s=args.latency,
        rpm=args.rpm,
        rpm_window_s=args.rpm_window,
        tpm=args.tpm,
        p_429=args.p_429,
        p_500=args.p_500,
        p_hang=args.p_hang,
        p_bad_json=args.p_bad_json,
        hang_s=args.hang,
        retry_after_s=args.retry_after,
        seed=args.seed,
        rules=args.rule,
        reuse_port=args.reuse_port,
    ).start()
    print(server.base_url, flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    try:
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
        if args.stats_on_exit:
            print(json.dumps(server.stats()), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
