"""Provider batch jobs for entries with `batch: true`: their calls are collected, sent as batch jobs through
LiteLLM's files and batches API, and their replies land in the same cache as online calls.

The run goes in passes (runner.py). In a pass, `DeferringProvider` (right under the cache) records each uncached
request of a batch entry and raises `Deferred` (the task gets no row in this pass); `Batcher.settle()` then submits
them (one job per model and account, split by `batch.max_requests` / `batch.max_bytes`), polls until every job ends
and writes each reply into the cache, where the next pass finds it. Each job is written to `batches.json` before each
step that creates something at the provider, so a rerun after Ctrl+C or kill -9 polls the jobs it finds there and
never submits a request twice (a batch created but not written down is found by its input file). A request a batch
failed or let expire is sent online or in a new job (`batch.on_failed`); either way each failure is traced.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config import Config, Price
from ..errors import Deferred, InputError, ProviderError
from ..types import LLMRequest, LLMResponse
from .base import BaseProvider
from .cache import CachingProvider, cache_key
from .litellm import classify_error, completion_kwargs, credentials, import_litellm, usage_of, valid_text
from .pricing import Budget, call_cost, upper_bound
from .redact import redact
from .routing import routes
from .trace import Tracer

log = logging.getLogger("rubricrun")

STATE_FORMAT = 1
ENDED = ("completed", "failed", "expired", "cancelled")  # a batch in one of these states runs no more lines
_ENDPOINT = "/v1/chat/completions"


def batch_entries(cfg: Config) -> set[str]:
    """The rate-limit names (`section:name`, as LLMRequest.limiter) of the entries with `batch: true`."""
    out = {f"candidate:{m.name}" for m in cfg.candidates if m.batch}
    return out | {f"judge:{m.name}" for m in cfg.judge_pool if m.batch}


class DeferringProvider(BaseProvider):
    """Records the requests of batch entries for the Batcher instead of making them; others pass through."""

    def __init__(self, inner: BaseProvider, batcher: Batcher):
        self.inner, self.batcher = inner, batcher

    def generate(self, request: LLMRequest) -> LLMResponse:
        if request.limiter in self.batcher.limiters and self.batcher.defer(request):
            raise Deferred("sent as a batch job")
        return self.inner.generate(request)


def line_body(request: LLMRequest) -> dict[str, Any]:
    """The chat completion body of a request, as a batch file line carries it: the online call's arguments without
    the call's own options (timeout, retries), the model without its prefix."""
    body = completion_kwargs(request)
    del body["timeout"], body["num_retries"]
    body["model"] = request.model.split("/", 1)[1]
    return body


def reply_of(body: dict[str, Any], model: str, prices: Mapping[str, Price]) -> LLMResponse:
    """An output line's chat completion as the LLMResponse the online path would have returned, its cost at `prices`
    (price_table gives batch entries their batch price)."""
    choice = body["choices"][0]
    message = choice.get("message") or {}
    usage = usage_of(body.get("usage") or {})
    reasoning = message.get("reasoning_content")
    return LLMResponse(
        text=valid_text(message.get("content") or ""),
        finish_reason=choice.get("finish_reason"),
        usage=usage,
        model=body.get("model") or model,
        cost_usd=call_cost(model, usage.prompt_tokens, usage.completion_tokens, prices),
        reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
    )


class Batcher:
    """Submits deferred requests as batch jobs, polls them, and delivers their replies into the cache."""

    def __init__(self, cfg: Config, path: Path, save: Callable[[Path, Any], None], tracer: Tracer):
        self.settings, self.path, self._save, self.tracer = cfg.batch, path, save, tracer
        self.limiters = batch_entries(cfg)
        # batches.json names each job's server as redact.py writes it (no password in a URL reaches the run folder);
        # the config gives the URL back.
        entries = [*cfg.candidates, *cfg.judge_pool]
        self._bases = {redact(r.api_base): r.api_base for m in entries for r, _ in routes(m) if r.api_base}
        self.progress_interval_s = cfg.run.progress_interval_s
        self.caching: CachingProvider | None = None
        self.budget: Budget | None = None
        self._lock = threading.Lock()
        self._deferred: dict[str, LLMRequest] = {}
        state: dict[str, Any] = {}
        if path.exists():
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise InputError(f"cannot read the batch jobs of this run ({exc})", file=str(path)) from None
            if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
                raise InputError(f"not a batch state of format {STATE_FORMAT}", file=str(path))
        self.failed: dict[str, int] = state.get("failed", {})  # key -> failures in batch jobs
        # A job killed before its file was uploaded never reached the provider: its requests are deferred anew.
        self.jobs = [j for j in state.get("jobs", []) if j["input_file_id"] is not None or j["status"] != "uploading"]
        self._job_of: dict[str, dict[str, Any]] = {k: j for j in self.jobs for k, _ in j["keys"]}  # the latest job
        self._ids = itertools.count(len(state.get("jobs", [])) + 1)

    def attach(self, caching: CachingProvider, budget: Budget) -> None:
        self.caching, self.budget = caching, budget
        if self._budgeted:  # jobs still open from an earlier invocation keep their reservation
            budget.reserve(sum(j.get("reserved", 0.0) for j in self.jobs if not j["collected"]))

    @property
    def _budgeted(self) -> bool:
        return self.budget is not None and self.budget.budget_usd is not None

    # -- during a pass (pool threads)

    def defer(self, request: LLMRequest) -> bool:
        """Whether this request waits for a batch job (recorded for one); False: make it online now."""
        key = cache_key(request)
        job = self._job_of.get(key)
        if job is not None and job["collected"]:
            n = self.failed.get(key, 0)
            if not n or self.settings.on_failed == "online" or n >= self.settings.max_batch_attempts:
                return False  # failed and retried online, or answered before but no longer in the cache
        with self._lock:
            self._deferred.setdefault(key, request)
        return True

    # -- between passes (main thread)

    def settle(self) -> str:
        """Submit what the pass deferred and wait for every job: "again" (run the next pass), "done" (nothing was
        deferred, or nothing more can be done) or "interrupted" (Ctrl+C while polling; the state is saved)."""
        with self._lock:
            deferred, self._deferred = list(self._deferred.values()), {}
        if self.caching is not None:
            self.caching.new_pass()
        if not deferred:
            return "done"
        try:
            submitted = self._submit([r for r in deferred if not self._pending(cache_key(r))])
            collected = self._wait()
        except KeyboardInterrupt:
            self._write()
            log.warning("batch: interrupted while waiting; rerun with the same --run-id to resume polling")
            return "interrupted"
        return "again" if submitted or collected else "done"

    def _pending(self, key: str) -> bool:
        job = self._job_of.get(key)
        return job is not None and not job["collected"]

    def _write(self) -> None:
        self._save(self.path, {"format": STATE_FORMAT, "jobs": self.jobs, "failed": self.failed})

    def _submit(self, requests: Sequence[LLMRequest]) -> int:
        """One job per model and account, split by the provider's limits; returns how many requests were sent."""
        groups: dict[tuple[str, str | None, str | None], list[LLMRequest]] = {}
        for r in requests:  # each reserved at its upper bound; those the budget no longer allows stay unsent
            if self._budgeted and not self.budget.reserve(upper_bound(r, self.budget.prices)):
                break  # (the run stops on budget)
            groups.setdefault((r.model, r.api_base, r.api_key_env), []).append(r)
        sent = 0
        for (model, api_base, key_env), group in groups.items():
            for chunk in self._chunks(group):
                keys = [[cache_key(r), r.role] for r, _ in chunk]
                shown = redact(api_base) if api_base else None
                job = {"id": f"job-{next(self._ids)}", "model": model, "api_base": shown, "api_key_env": key_env}
                job.update(keys=keys, input_file_id=None, batch_id=None, status="uploading", collected=False)
                job["reserved"] = sum(upper_bound(r, self.budget.prices) for r, _ in chunk) if self._budgeted else 0.0
                self.jobs.append(job)
                for k, _ in keys:
                    self._job_of[k] = job
                self._write()  # the intent first: a kill from here on leaves a job to resume, not to resubmit
                self._start(job, "".join(line for _, line in chunk).encode())
                sent += len(chunk)
        if sent:
            log.info("batch: %d requests submitted in %d jobs", sent, sum(1 for j in self.jobs if not j["collected"]))
        return sent

    def _chunks(self, group: list[LLMRequest]) -> list[list[tuple[LLMRequest, str]]]:
        """The requests with their input file lines, in jobs of at most batch.max_requests lines and max_bytes."""
        chunks: list[list[tuple[LLMRequest, str]]] = [[]]
        size = 0
        for r in group:
            body = {"custom_id": cache_key(r), "method": "POST", "url": _ENDPOINT, "body": line_body(r)}
            line = json.dumps(body, ensure_ascii=False) + "\n"
            n = len(line.encode())
            if chunks[-1] and (len(chunks[-1]) >= self.settings.max_requests or size + n > self.settings.max_bytes):
                chunks.append([])
                size = 0
            chunks[-1].append((r, line))
            size += n
        return chunks

    def _start(self, job: dict[str, Any], data: bytes | None) -> None:
        """Upload the job's file (unless it has one) and create its batch, writing each id down. `data` None: a job of
        a killed run, whose batch may have been created without its id written down: it is found by its input file."""
        try:
            if job["input_file_id"] is None:
                upload = (f"rubricrun-{job['id']}.jsonl", data)
                job["input_file_id"] = str(self._call(job, "create_file", file=upload, purpose="batch").id)
                self._write()
            file_id = job["input_file_id"]
            if data is None:
                listed = getattr(self._call(job, "list_batches", limit=100), "data", None) or []
                job["batch_id"] = next(
                    (str(b.id) for b in listed if getattr(b, "input_file_id", None) == file_id), None
                )
            if job["batch_id"] is None:
                created = self._call(
                    job,
                    "create_batch",
                    completion_window=self.settings.completion_window,
                    endpoint=_ENDPOINT,
                    input_file_id=file_id,
                    metadata={"rubricrun_job": job["id"]},
                )
                job["batch_id"] = str(created.id)
            job["status"] = "validating"
            self._write()
        except ProviderError as exc:
            log.warning("batch %s (%s): could not submit: %s", job["id"], job["model"], exc)
            job.update(status="failed", error=str(exc))
            self._write()

    def _wait(self) -> int:
        """Poll every job not yet collected until it ends; collect each as it ends. Returns requests collected."""
        collected, last_line = 0, 0.0
        while True:
            for job in [j for j in self.jobs if not j["collected"]]:
                collected += self._poll(job)
            still = [j for j in self.jobs if not j["collected"]]
            if not still:
                return collected
            if time.monotonic() - last_line >= self.progress_interval_s:
                last_line = time.monotonic()
                log.info("batch: %s", "; ".join(self._progress(j) for j in still))
            time.sleep(self.settings.poll_interval_s)  # Ctrl+C lands here: settle() saves and returns

    @staticmethod
    def _progress(job: dict[str, Any]) -> str:
        counts = job.get("counts") or {}
        done = int(counts.get("completed") or 0) + int(counts.get("failed") or 0)
        return f"{job['batch_id'] or job['id']} {job['status']} {done}/{len(job['keys'])}"

    def _call(self, job: dict[str, Any], name: str, **kwargs: Any) -> Any:
        """One LiteLLM files or batches call for the job's model and account; a failure becomes a ProviderError."""
        model, base, key_env = job["model"], job.get("api_base"), job.get("api_key_env")
        auth = credentials(model, self._bases.get(base, base) if base else None, key_env)
        try:
            return getattr(import_litellm(), name)(custom_llm_provider=model.split("/", 1)[0], **auth, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every provider failure becomes a ProviderError
            raise classify_error(exc, model, (auth["api_key"],) if key_env else ()) from None

    def _poll(self, job: dict[str, Any]) -> int:
        if job["batch_id"] is None and job["status"] != "failed":
            self._start(job, None)  # a job from a killed run: find or create its batch
        if job["batch_id"] is None:
            return self._collect(job, None)
        try:
            b = self._call(job, "retrieve_batch", batch_id=job["batch_id"])
        except ProviderError as exc:
            if not exc.retryable:  # the provider does not know the batch (any more): its requests failed
                job.update(status="failed", error=str(exc))
                return self._collect(job, None)
            log.warning("batch %s: cannot poll (%s); trying again", job["batch_id"], exc)
            return 0
        counts = getattr(b, "request_counts", None)
        job["counts"] = {k: getattr(counts, k, 0) for k in ("total", "completed", "failed")} if counts else {}
        if job["status"] != b.status:
            job["status"] = str(b.status)
            self._write()
        return self._collect(job, b) if b.status in ENDED else 0

    def _collect(self, job: dict[str, Any], b: Any) -> int:
        """Deliver an ended job's replies into the cache and trace each line; then mark it collected."""
        roles = dict(map(tuple, job["keys"]))  # those not answered yet
        for file_id in (getattr(b, "output_file_id", None), getattr(b, "error_file_id", None)):
            if file_id:
                data = bytes(self._call(job, "file_content", file_id=file_id).content).decode("utf-8")
                for line in map(json.loads, filter(str.strip, data.splitlines())):
                    if (role := roles.pop(line.get("custom_id"), None)) is not None:
                        self._line(job, role, line)
        why = f"batch {job['status']}" + (f": {job['error']}" if job.get("error") else "")
        for key, role in roles.items():
            self._failure(job, key, role, why, None)
        if self.budget is not None:
            self.budget.settle(job.get("reserved", 0.0), job.pop("cost", 0.0))
        job["collected"] = True
        self._write()
        return len(job["keys"])

    def _line(self, job: dict[str, Any], role: str, line: dict[str, Any]) -> None:
        key, resp = line["custom_id"], line.get("response") or {}
        status, body = resp.get("status_code"), resp.get("body") or {}
        if status == 200 and body.get("choices"):
            assert self.caching is not None
            reply = reply_of(body, job["model"], self.budget.prices if self.budget else {})
            job["cost"] = job.get("cost", 0.0) + (reply.cost_usd or 0.0)
            self.caching.deliver(key, reply)
            self.failed.pop(key, None)
            self._trace(job, key, role, status="ok", usage=reply.usage)
            return
        error = line.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
        message = error.get("message") or error.get("code") or f"HTTP {status}"
        self._failure(job, key, role, f"{error.get('code') or 'failed'}: {message}", status)

    def _failure(self, job: dict[str, Any], key: str, role: str, error: str, status: int | None) -> None:
        self.failed[key] = self.failed.get(key, 0) + 1
        error = f"batch {job['batch_id'] or job['id']}: {error}"
        self._trace(job, key, role, status="error", error=error, status_code=status)

    def _trace(self, job: dict[str, Any], key: str, role: str, **event: Any) -> None:
        self.tracer.emit(role=role, model=job["model"], key=key, cache_hit=False, attempt=1, latency_ms=0.0, **event)
