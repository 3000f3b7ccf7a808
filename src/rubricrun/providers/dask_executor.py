"""Provider attempts made by the workers of a Dask cluster (`executor: {engine: dask}`; the seam: executor.py).

The run's process keeps everything that holds state (cache, budget, retry, rate limits, trace, rows) and builds
and paces each request as with threads; `DaskAttempts.generate` then hands the attempt to a worker instead of making
it. The Dask client that carries them runs in a relay process the run starts (`Relay`; its network loop held 40 % of
the run's interpreter lock when it ran in the run's process), which the run talks to in MessagePack frames over a
pipe. One Dask actor a worker (`Mailbox`) and one thread a worker in the relay (a lane) carry the attempts: each
exchange, a direct call from the relay's client to the worker (no scheduler, no task), hands over the attempts queued
and takes back those finished since the last one, both ways as one MessagePack blob. On the worker the attempts run
at once on its own threads (LiteLLM, through a litellm.Router for entries with `deployments:`), and each comes back
with its reply or error, and the rate-limit pause its headers asked for, to the run's process, which retries,
caches and writes exactly as with threads. An exchange costs about a millisecond of the relay's CPU whatever it
carries, so a lane exchanges at most once every PACE (5-100 ms, set by the load): the figures are in
.agent/plans/020-dask-engine.md.

Secrets: a worker redacts its errors as the run's process does (redact.py, from the config and the worker's own
environment: `AttemptPlugin.setup`), and the run's process redacts what comes back once more with what it knows.

A worker lost mid-run (killed, preempted), or one that does not answer an exchange within executor.timeout_s: the
attempts out there come back as retryable errors and are made again on the others (a new worker gets a lane when
the relay sees it), so only those may be paid twice. The relay ends when its stdin closes: at the run's end, or
when the run's process is gone (kill -9). The embedded llama.cpp model (`local/...`) runs in the run's
process, where it is loaded once; provider batch jobs (batch.py) never come here.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import logging
import os
import pickle
import queue
import select
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from distributed import Client, WorkerPlugin, get_worker

from .. import codec
from ..config import Config, scheduler_address_error
from ..errors import Cancelled, InputError, ProviderError
from ..types import LLMRequest, LLMResponse
from . import redact
from .base import BaseProvider
from .executor import MakeProvider, RateLimitHook, local_provider
from .litellm import LiteLLMProvider, classify_error, import_litellm, worker_name

log = logging.getLogger("rubricrun")

ADDRESS_ENV = "DASK_SCHEDULER_ADDRESS"
PACE_MIN_S, PACE_MAX_S = 0.005, 0.1  # the least time between two exchanges with a worker, as the load sets it
BATCH = 32  # attempts (sent and received) an exchange carries when the load allows: Dask's cost is per exchange
IDLE_MAX_S = 0.2  # attempts out and none coming back: the looks for their outcomes slow down to this
MAX_SEND = 512  # attempts sent in one exchange at most
ATTEMPT_THREADS = 2048  # threads a worker may run attempts on (the run's process bounds what is in flight)
WATCH_S = 2.0  # how often the run looks at which workers are there (a line in the log when one leaves or joins)


# ---------------------------------------------------------------------------------------------------
# On the worker


@dataclass(frozen=True)
class Outcome:
    """One attempt as a worker made it: its reply, or the error it raised; and the seconds its reply's rate-limit
    headers said the account has nothing left (the run's throttle pauses the account)."""

    response: LLMResponse | None
    error: BaseException | None
    pause_s: float = 0.0


_local = threading.local()  # .pause: the rate-limit pause heard during this thread's attempt
_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _heard_pause(request: LLMRequest, seconds: float) -> None:
    _local.pause = max(getattr(_local, "pause", 0.0), seconds)


def _attempt(provider: BaseProvider, request: LLMRequest) -> Outcome:
    _local.pause = 0.0
    try:
        return Outcome(provider.generate(request), None, _local.pause)
    except (ProviderError, InputError) as exc:  # an InputError (a key variable missing here) stops the run
        return Outcome(None, exc, _local.pause)
    except Exception as exc:  # noqa: BLE001 - as the retry layer would read it in the run's process
        return Outcome(None, classify_error(exc, request.model), _local.pause)


def _attempt_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(ATTEMPT_THREADS, thread_name_prefix="rubricrun-attempt")
        return _pool


_Sent = list[tuple[int, LLMRequest]]  # attempts handed to a worker, each with its number
_Finished = list[tuple[int, LLMResponse | None, bytes | None, float]]  # number, reply or pickled error, pause


class Mailbox:
    """A Dask actor, one per run on each worker: the run's process calls `exchange` on it directly (no scheduler
    in between). Each call hands over attempts, which start at once on this worker's attempt threads, and takes
    back the outcomes finished since the last call. Called with `separate_thread=False`, it runs on the worker's
    event loop and returns at once: it never waits for an attempt, nor holds the worker's actor thread. Both ways
    the attempts travel as one MessagePack blob (codec.pack): Dask would pickle a list item by item."""

    name = ""  # "host:pid", as the trace names this process (declared here: an actor handle reads what the class has)

    def __init__(self, plugin: str) -> None:
        self.provider = get_worker().plugins[plugin].provider
        self.name = worker_name()
        self._finished: _Finished = []
        self._lock = threading.Lock()

    def exchange(self, sent: bytes) -> bytes:
        pool = _attempt_pool()
        for n, request in codec.unpack(sent, _Sent):
            pool.submit(self._attempt, n, request)
        with self._lock:
            finished, self._finished = self._finished, []
        return codec.pack(finished)

    def _attempt(self, n: int, request: LLMRequest) -> None:
        outcome = _attempt(self.provider, request)
        error = pickle.dumps(outcome.error) if outcome.error is not None else None
        with self._lock:
            self._finished.append((n, outcome.response, error, outcome.pause_s))


class AttemptPlugin(WorkerPlugin):
    """Set up on every worker of the cluster, and on each that joins later: the attempt maker built (through a
    litellm.Router for the entries with `deployments:`) and LiteLLM imported before the first attempt."""

    def __init__(self, name: str, cfg: Config, make: MakeProvider, warm: Callable[[], object]):
        self.name, self.cfg, self.make, self.warm = name, cfg, make, warm
        self.provider: BaseProvider | None = None

    def setup(self, worker: Any) -> None:
        # The credentials this worker can send (the config's variables as its own environment holds them, its
        # URLs, its params): every error made here is redacted with them before it leaves (classify_error). Those
        # of another run this worker served are kept (redact.use replaces them): masking more is harmless.
        redact.use([*redact.secrets_of(self.cfg), *redact.secrets().items()])
        self.warm()
        provider = self.make()
        provider.on_rate_limit = _heard_pause  # type: ignore[attr-defined]
        self.provider = local_provider(self.cfg, lambda: provider)


def _missing_env(names: list[str]) -> list[str]:
    """On a worker: the variables among `names` its environment lacks."""
    return [n for n in names if not os.environ.get(n)]


# ---------------------------------------------------------------------------------------------------
# In the run's process


class _Slot:
    """One attempt handed to the cluster: the calling thread waits on `done` (a lock held until the outcome lands: a
    C call each way, where an Event costs a Condition and its Python code per attempt) for its outcome."""

    __slots__ = ("n", "request", "done", "outcome")

    def __init__(self, n: int, request: LLMRequest) -> None:
        self.n, self.request = n, request
        self.done = threading.Lock()
        self.done.acquire()
        self.outcome: Outcome | None = None

    def land(self, outcome: Outcome) -> None:
        self.outcome = self.outcome or outcome
        try:
            self.done.release()
        except RuntimeError:  # landed already (the relay gone, and close)
            pass


def _write(out: Any, data: bytes) -> None:
    """One frame on a pipe: its length, then the bytes."""
    out.write(len(data).to_bytes(4, "little") + data)
    out.flush()


def _read(inp: Any) -> bytes | None:
    """The next frame from a pipe; None at its end."""
    head = inp.read(4)
    if len(head) < 4:
        return None
    n = int.from_bytes(head, "little")
    data = inp.read(n)
    return data if len(data) == n else None


_Back = tuple[_Finished, list[str], int, int]  # relay -> run: outcomes, warnings to log, exchanges and attempts so far
_RawSent = list[tuple[int, msgspec.Raw]]  # the relay passes requests and outcomes on without decoding them
_RawFinished = list[tuple[int, msgspec.Raw, msgspec.Raw, float]]


class DaskAttempts(BaseProvider):
    """The bottom of the run's stack with the dask engine: `generate` queues the attempt and waits for its outcome.
    The Dask client that carries the attempts to the workers lives in a relay process of its own (`Relay`): its
    network loop, the actor calls' framing and the lanes' pacing no longer share this process's interpreter lock
    (they held 40 % of it: plan 020, Surprise 15). Here a sender thread writes what is queued to the relay's stdin as
    one frame, and a receiver thread reads the outcomes back and hands each to its waiting thread. `start` is called
    once the cluster is up (the executor's `warm`, before the first attempt); a watcher thread then logs the workers
    that leave and join (the relay gives each new one a lane)."""

    def __init__(self, on_rate_limit: RateLimitHook, local: BaseProvider) -> None:
        self.on_rate_limit, self.local = on_rate_limit, local
        self.exchanges = self.attempts = 0  # exchanges with the workers that sent attempts, and those attempts
        self.client: Client | None = None
        self._queue: queue.SimpleQueue[_Slot | None] = queue.SimpleQueue()  # a put wakes the sender: one C call
        self._numbers = itertools.count()
        self._out: dict[int, _Slot] = {}  # sent to the relay, outcome not back yet
        self._relay: subprocess.Popen[bytes] | None = None
        self._known: set[str] = set()  # the workers at the last look
        self._closed = False
        self._gone: InputError | None = None  # the relay exited while the run was on

    def start(self, client: Client, plugin: str, timeout_s: float, *, direct: bool) -> None:
        self.client = client
        self._relay = _start_relay(client.scheduler.address, plugin, timeout_s, direct)
        self._watch(log_changes=False)
        for target, name in ((self._send, "send"), (self._receive, "receive"), (self._watcher, "watch")):
            threading.Thread(target=target, name=f"rubricrun.dask-{name}", daemon=True).start()

    def generate(self, request: LLMRequest) -> LLMResponse:
        if request.model.startswith("local/"):  # the embedded model is loaded here, once: it stays here
            return self.local.generate(request)
        if self._gone is not None:
            raise self._gone
        if self._closed:
            raise Cancelled("run is stopping")
        slot = _Slot(next(self._numbers), request)
        self._queue.put(slot)
        if self._closed:  # closed meanwhile: nothing will send it
            self._cancel_queued()
        slot.done.acquire()
        outcome = slot.outcome
        assert outcome is not None
        if outcome.pause_s > 0:
            self.on_rate_limit(request, outcome.pause_s)
        if outcome.error is not None:
            raise _redacted(outcome.error)
        assert outcome.response is not None
        return outcome.response

    def _send(self) -> None:
        """What is queued, to the relay: one frame for all that waits (MAX_SEND at most)."""
        q, out = self._queue, self._out
        assert self._relay is not None and self._relay.stdin is not None
        pipe = self._relay.stdin
        while (slot := q.get()) is not None:
            batch = [slot, *(q.get() for _ in range(min(q.qsize(), MAX_SEND - 1)))]
            end = batch[-1] is None
            sent = [s for s in batch if s is not None]
            for s in sent:
                out[s.n] = s
            try:
                _write(pipe, codec.pack([(s.n, s.request) for s in sent]))
            except (OSError, ValueError):  # the relay is gone or closing: the receiver lands what is out
                return
            if end:
                return

    def _receive(self) -> None:
        """The outcomes the relay sends back, each to its waiting thread; at the relay's end, what is still out."""
        assert self._relay is not None and self._relay.stdout is not None
        pipe, out = self._relay.stdout, self._out
        while (data := _read(pipe)) is not None:
            finished, notes, self.exchanges, self.attempts = codec.unpack(data, _Back)
            for note in notes:
                log.warning("%s", redact.redact(note))
            for n, response, error, pause_s in finished:
                slot = out.pop(n, None)
                if slot is not None:  # the worker's pickled error: what Dask itself would have sent
                    slot.land(Outcome(response, pickle.loads(error) if error else None, pause_s))  # noqa: S301
        if not self._closed:  # the relay died under a running run: stop it (a rerun resumes from the cache)
            self._gone = InputError(f"executor: the Dask relay process exited ({self._relay.poll()}); run again")
            log.error("%s", self._gone)
        for slot in list(out.values()):
            slot.land(Outcome(None, self._gone or Cancelled("run is stopping")))
        out.clear()
        self._cancel_queued()

    # -- the workers ----------------------------------------------------------------------------------------

    def _watcher(self) -> None:
        while not self._closed:
            time.sleep(WATCH_S)
            if not self._closed:
                self._watch(log_changes=True)

    def _watch(self, *, log_changes: bool) -> None:
        """A line in the log when a worker left or joined (the relay gives each new one a lane)."""
        assert self.client is not None
        try:
            workers = set(self.client.scheduler_info(n_workers=-1)["workers"])
        except Exception:  # noqa: BLE001 - the scheduler is busy or gone: the relay's lanes say so themselves
            return
        if log_changes:
            for w in sorted(self._known - workers):
                log.warning("dask: worker %s left; its attempts in flight are made again by the others", w)
            for w in sorted(workers - self._known):
                log.info("dask: worker %s joined", w)
        self._known = workers

    def close(self) -> None:
        """No new attempt starts; the threads still waiting get Cancelled (not done: a rerun picks them up)."""
        if self.exchanges and not self._closed:
            log.info("dask: %d attempts sent in %d exchanges (%.1f an exchange)", self.attempts, self.exchanges,
                     self.attempts / self.exchanges)  # fmt: skip
        self._closed = True
        self._queue.put(None)
        relay, self._relay = self._relay, None
        self._cancel_queued()
        for slot in list(self._out.values()):
            slot.land(Outcome(None, Cancelled("run is stopping")))
        if relay is not None:  # its stdin closed: it cancels its mailboxes (a cluster at an address keeps nothing)
            with contextlib.suppress(OSError, ValueError):
                relay.stdin.close()  # type: ignore[union-attr]
            try:
                relay.wait(timeout=10)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.wait(timeout=10)

    def _cancel_queued(self) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                slot = self._queue.get_nowait()
                if slot is not None:
                    slot.land(Outcome(None, Cancelled("run is stopping")))


def _start_relay(address: str, plugin: str, timeout_s: float, direct: bool) -> subprocess.Popen[bytes]:
    """The relay process, its lanes to the workers up (it says so in its first frame). It ends when its stdin closes:
    at the run's close, or when the run's process is gone (even after kill -9); in a session of its own, as the
    local cluster's processes, so that Ctrl+C reaches the run alone (the calls of its grace period go through it)."""
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", __name__, "relay", address, plugin, str(timeout_s), "1" if direct else "0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=_child_env(), start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    poll = select.poll()  # (not select.select: a run with many threads may hold more than 1,024 descriptors)
    poll.register(proc.stdout, select.POLLIN)
    if not poll.poll(1000 * (timeout_s + 30)) or _read(proc.stdout) is None:
        proc.kill()
        proc.wait(timeout=10)
        err.seek(0)
        tail = [ln for ln in err.read().decode(errors="replace").splitlines() if ln.strip()][-1:]
        raise InputError(f"executor: the Dask relay process did not start ({'; '.join(tail) or 'no answer'})")
    err.close()  # (its stderr, later: nothing of ours writes there; Dask's own lines are silenced to ERROR)
    return proc


class _Lane:
    """The relay's line to one worker: its Mailbox, and the attempts sent there whose outcome has not come back."""

    def __init__(self, worker: str, mailbox: Any, future: Any) -> None:
        self.worker, self.mailbox, self.future = worker, mailbox, future
        self.name: str = mailbox.name  # "host:pid", as the trace names the worker (asked once)
        self.inflight: dict[int, msgspec.Raw] = {}
        self.last = 0.0  # when the last exchange began (monotonic)


class Relay:
    """In the relay process: the run's attempts to the workers and their outcomes back. One Dask actor a worker
    (`Mailbox`) and one thread a worker (a lane) carry the attempts: each exchange, a direct call from this client to
    the worker (no scheduler, no task), hands over the lane's share of what is queued and takes back what finished
    there since the last one. A lane with nothing out exchanges as soon as an attempt is queued; while attempts are
    out, at most once every PACE_S (so a busy lane sends and takes many at once). Requests and outcomes pass through
    undecoded (msgspec.Raw); a lane whose worker is lost sends its attempts back as retryable errors."""

    def __init__(self, client: Client, plugin: str, timeout_s: float, out: Any) -> None:
        self.client, self.plugin, self.timeout_s, self.out = client, plugin, timeout_s, out
        self.exchanges = self.attempts = 0
        self._queue: deque[tuple[int, msgspec.Raw]] = deque()
        self._wake = threading.Event()  # something was queued (or the relay is closing)
        self._lanes: dict[str, _Lane] = {}  # worker address -> its lane
        self._lanes_lock = threading.Lock()
        self._out_lock = threading.Lock()
        self._closed = False

    def serve(self, inp: Any) -> None:
        """Lanes for the workers there now, then the run's frames until its pipe ends."""
        self._watch()
        threading.Thread(target=self._watcher, name="rubricrun.dask-watch", daemon=True).start()
        gc.freeze()  # what Dask's import and the client leave lives as long as the relay (Surprise 4)
        self._back([], [])  # ready
        while (data := _read(inp)) is not None:
            self._queue.extend(codec.unpack(data, _RawSent))
            self._wake.set()
        self._closed = True
        self._wake.set()
        with self._lanes_lock:
            futures = [lane.future for lane in self._lanes.values()]
        threading.Timer(5.0, os._exit, (0,)).start()  # the tidying below is bounded
        with contextlib.suppress(Exception):  # the mailboxes end with their futures
            self.client.cancel(futures)
            self.client.close(timeout=4)

    def _back(self, finished: list[Any], notes: list[str]) -> None:
        data = codec.pack((finished, notes, self.exchanges, self.attempts))
        with self._out_lock:
            _write(self.out, data)

    def _run_lane(self, lane: _Lane) -> None:
        pace = PACE_MIN_S  # the least time between two exchanges: adapts so that one carries about BATCH attempts
        idle = pace  # how long to wait for outcomes when nothing is queued: grows while none come back
        peak = 1  # the most attempts this lane has had out at once (a lane with few out cannot fill a batch)
        while not self._closed:
            wait = lane.last + pace - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if not self._queue:
                self._wake.clear()  # before looking at the queue again: an attempt queued now sets it
                wait = lane.last + idle - time.monotonic() if lane.inflight else WATCH_S
                if not self._queue and not self._wake.wait(max(wait, 0)) and not lane.inflight:
                    continue
            batch = self._share(lane)
            if not batch and not lane.inflight:
                continue
            out, held = len(lane.inflight) - len(batch), len(lane.inflight)  # held: out there, or going now
            peak = max(peak, held)
            lane.last = time.monotonic()
            try:
                got = lane.mailbox.exchange(codec.pack(batch), separate_thread=False).result(timeout=self.timeout_s)
                finished = codec.unpack(got, _RawFinished)
            except BaseException as exc:  # noqa: BLE001 - the worker is gone, or did not answer in time
                self._lost(lane, exc)
                return
            if batch:
                self.exchanges += 1
                self.attempts += len(batch)
            for f in finished:
                lane.inflight.pop(f[0], None)
            if finished:
                self._back(finished, [])
            # Every attempt out came back while nearly all of this lane's were with the cluster: the run waits for
            # the lane itself, so exchange sooner. Else few attempts an exchange: wait longer between two (Dask's
            # cost is per exchange); many: sooner.
            carried, goal = len(batch) + len(finished), min(BATCH, peak)
            if (len(finished) >= out and 4 * held >= 3 * peak) or carried >= 2 * goal:
                pace = max(pace / 1.25, PACE_MIN_S)
            elif carried < goal:
                pace = min(pace * 1.25, PACE_MAX_S)
            idle = pace if carried else min(2 * idle, IDLE_MAX_S)

    def _share(self, lane: _Lane) -> list[tuple[int, msgspec.Raw]]:
        """This lane's share of the queue: what brings its attempts out to the average over the lanes (at least one
        when it has none out), at most MAX_SEND."""
        queue = self._queue
        lanes = list(self._lanes.values())
        out = sum(len(x.inflight) for x in lanes)
        take = min(MAX_SEND, -(-(len(queue) + out) // max(1, len(lanes))) - len(lane.inflight))
        batch: list[tuple[int, msgspec.Raw]] = []
        while len(batch) < max(take, 0 if lane.inflight else 1):
            try:
                item = queue.popleft()
            except IndexError:
                break
            lane.inflight[item[0]] = item[1]
            batch.append(item)
        return batch

    def _lost(self, lane: _Lane, exc: BaseException) -> None:
        """A lane whose exchange failed (its worker was lost, or did not answer within executor.timeout_s): its
        attempts out there go back as retryable errors (made again on the others), and the lane ends."""
        with self._lanes_lock:
            if self._lanes.get(lane.worker) is lane:
                del self._lanes[lane.worker]
        inflight, lane.inflight = lane.inflight, {}
        if self._closed:
            return
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"

        def error(raw: msgspec.Raw) -> msgspec.Raw:
            model = codec.unpack(raw, LLMRequest).model
            message = f"dask: the attempt did not come back from {lane.worker} ({why})"
            err = ProviderError(message, model=model, retryable=True, worker=lane.name)
            return msgspec.Raw(codec.pack(pickle.dumps(err)))

        nothing = msgspec.Raw(codec.pack(None))
        back = [(n, nothing, error(raw), 0.0) for n, raw in inflight.items()]
        self._back(back, [f"dask: worker {lane.worker} did not answer ({why}): its {len(back)} attempts in flight "
                          f"are retried"])  # fmt: skip
        self._wake.set()  # what it would have taken is for the others now

    def _watcher(self) -> None:
        while not self._closed:
            time.sleep(WATCH_S)
            if not self._closed:
                self._watch()

    def _watch(self) -> None:
        """A lane for every worker that has none (at the start; a worker that joined, e.g. one a nanny started in
        place of one that died)."""
        try:
            workers = set(self.client.scheduler_info(n_workers=-1)["workers"])
        except Exception:  # noqa: BLE001 - the scheduler is busy or gone: the lanes say so themselves
            return
        for w in sorted(workers - set(self._lanes)):
            try:
                with self.client.as_current():  # the actor handle finds the client through it
                    future = self.client.submit(
                        Mailbox, self.plugin, actor=True, workers=[w], allow_other_workers=False, pure=False
                    )
                    lane = _Lane(w, future.result(timeout=self.timeout_s), future)
            except Exception as exc:  # noqa: BLE001 - the worker left meanwhile: the next look tries again
                self._back([], [f"dask: no mailbox on worker {w} ({type(exc).__name__}: {exc})"])
                continue
            with self._lanes_lock:
                if self._closed:
                    return
                self._lanes[w] = lane
            threading.Thread(target=self._run_lane, args=(lane,), name=f"rubricrun.dask-lane-{w}", daemon=True).start()


def _redacted(exc: BaseException) -> BaseException:
    """An error that came back from a worker, with every secret this process knows taken out of its message too (the
    worker took out its own: a key its environment holds and this one does not)."""
    if len(exc.args) == 1 and isinstance(exc.args[0], str):
        exc.args = (redact.redact(exc.args[0]),)
    return exc


class DaskExecutor:
    """A Dask cluster making the run's attempts: a local one of `workers` processes that this run starts (closed at
    the end), or the one at executor.address / DASK_SCHEDULER_ADDRESS (left running). Nothing starts before the
    first attempt (`warm`), so a rerun the cache answers in full starts no cluster."""

    engine = "dask"

    def __init__(
        self,
        cfg: Config,
        client: Client | None,
        workers: int,
        where: str,
        make: MakeProvider,
        warm: Callable[[], object],
    ) -> None:
        self.cfg, self.client, self.workers, self.where = cfg, client, workers, where
        self.cluster: LocalProcesses | None = None
        self.make, self._warm = make, warm
        self.plugin = f"rubricrun-attempts-{uuid.uuid4().hex[:12]}"
        self._ready = False
        self._failed: InputError | None = None  # why the workers could not be set up (every caller hears it)
        self._lock = threading.Lock()
        self._attempts: DaskAttempts | None = None

    @classmethod
    def open(
        cls, cfg: Config, *, make: MakeProvider = LiteLLMProvider, warm: Callable[[], object] = import_litellm
    ) -> DaskExecutor:
        """For executor.address (or DASK_SCHEDULER_ADDRESS): connect, wait for the workers and check that they have
        the key variables the config names; bad input (exit 2, no call made) when that fails within
        executor.timeout_s. For a local cluster: nothing yet (`warm` starts it). `make` and `warm` build and ready
        the provider a worker makes its attempts with (default: LiteLLM)."""
        e = cfg.executor
        address, key = e.address, "executor.address"
        if address is None and os.environ.get(ADDRESS_ENV):
            address, key = os.environ[ADDRESS_ENV], ADDRESS_ENV
            if why := scheduler_address_error(address):
                raise InputError(why, key=ADDRESS_ENV)
        logging.getLogger("distributed").setLevel(logging.ERROR)  # its own lines; ours say what matters
        if address is None:
            return cls(cfg, None, e.workers or os.cpu_count() or 1, "the local cluster", make, warm)

        def fail(message: str) -> InputError:
            return cfg.fail(key, message) if key == "executor.address" else InputError(message, key=key)

        try:
            client = Client(address, set_as_default=False, timeout=e.timeout_s)
        except (OSError, TimeoutError) as exc:
            raise fail(f"no Dask scheduler at {address} answered within {e.timeout_s:g} s ({exc})") from None
        where, n = f"the scheduler at {address}", e.workers or 1
        try:
            client.wait_for_workers(n, timeout=e.timeout_s)
            _check_env(client, cfg, where)
            workers = len(client.scheduler_info(n_workers=-1)["workers"])
        except BaseException as exc:
            client.close()
            if isinstance(exc, TimeoutError):
                raise fail(f"{where} has fewer than {n} workers after {e.timeout_s:g} s") from None
            raise
        log.info("dask: %d workers at %s (dashboard: %s)", workers, address, client.dashboard_link)
        return cls(cfg, client, workers, where, make, warm)

    def attempts(self, cfg: Config, on_rate_limit: RateLimitHook) -> BaseProvider:
        self._attempts = DaskAttempts(on_rate_limit, local_provider(cfg, self.make))  # `local/` models: here
        with self._lock:
            if self._ready:
                self._start()
        return self._attempts

    def warm(self) -> None:
        """Before the first attempt: start the local cluster, and set every worker up (LiteLLM imported there; this
        process does not need it). Later calls return at once."""
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            if self._failed is None:
                try:
                    self._set_up()
                except InputError as exc:
                    self._failed = exc
            if self._failed is not None:
                raise self._failed

    def _set_up(self) -> None:
        if self.client is None:
            self.cluster = LocalProcesses.start(self.workers, self.cfg.executor.timeout_s)
            self.client = self.cluster.client
        plugin = AttemptPlugin(self.plugin, self.cfg, self.make, self._warm)
        try:
            self.client.register_plugin(plugin, name=self.plugin)
        except Exception as exc:  # noqa: BLE001 - e.g. rubricrun missing on the workers
            raise InputError(
                f"executor: the workers of {self.where} cannot make attempts ({type(exc).__name__}: {exc}); "
                f"each needs the same Python, and rubricrun with its requirements (docs/scale.md)"
            ) from None
        # What Dask's import and the client leave in this process lives as long as the run: the collector need not
        # walk it again (its full collections were up to half this process's CPU per attempt: plan 020).
        gc.freeze()
        if self._attempts is not None:
            self._start()
        self._ready = True

    def _start(self) -> None:
        assert self._attempts is not None and self.client is not None
        self._attempts.start(self.client, self.plugin, self.cfg.executor.timeout_s, direct=self.cluster is not None)

    def close(self) -> None:
        if self._attempts is not None:
            self._attempts.close()
        if self.client is not None and self.cluster is None and self._ready:
            try:  # a cluster that outlives the run keeps nothing of it
                self.client.unregister_worker_plugin(self.plugin)
            except Exception:  # noqa: BLE001, S110 - the scheduler may be gone: nothing left to tidy
                pass
        if self.cluster is not None:
            self.cluster.close()
        elif self.client is not None:
            self.client.close()


class LocalProcesses:
    """The local cluster a run starts: Dask's own `dask scheduler` and `dask worker --nworkers N` commands, each in
    a process of its own (the scheduler's work stays off the run's process, where it cost about a third of the CPU
    an attempt: plan 020) and in a session of its own (Ctrl+C in a terminal reaches the run's process alone, which
    needs the workers for the calls in flight in its grace period). Each ends when its stdin closes: when the run
    closes the cluster, or when the run's process is gone (even after kill -9); the nanny's worker processes end
    with it."""

    def __init__(self, procs: list[subprocess.Popen[bytes]], folder: str, client: Client | None = None) -> None:
        self.procs, self.folder, self.client = procs, folder, client

    @classmethod
    def start(cls, workers: int, timeout_s: float) -> LocalProcesses:
        log.info("dask: starting a local cluster of %d worker processes", workers)
        t0 = time.monotonic()
        folder = tempfile.mkdtemp(prefix="rubricrun-dask-")
        env = _child_env()
        here = cls([], folder)
        try:
            file = os.path.join(folder, "scheduler.json")
            here._spawn("scheduler", ["--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", file],
                        env)  # fmt: skip
            address = here._address(file, timeout_s)
            here._spawn("worker", [address, "--nworkers", str(workers), "--nthreads", "1", "--no-dashboard",
                                   "--host", "127.0.0.1", "--death-timeout", "60"], env)  # fmt: skip
            here.client = Client(address, set_as_default=False, timeout=timeout_s, direct_to_workers=True)
            here.client.wait_for_workers(workers, timeout=timeout_s)
        except BaseException as exc:
            why = here._log_tail() or f"{type(exc).__name__}: {exc}"
            here.close()
            if isinstance(exc, (OSError, TimeoutError, RuntimeError)):
                raise InputError(f"executor: cannot start a local Dask cluster ({why})") from None
            raise
        log.info("dask: %d workers up in %.1f s", workers, time.monotonic() - t0)
        return here

    def _spawn(self, role: str, args: list[str], env: dict[str, str]) -> None:
        with open(os.path.join(self.folder, f"{role}.log"), "wb") as out:
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", __name__, role, *args],
                    stdin=subprocess.PIPE,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )  # fmt: skip
            )

    def _address(self, file: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.procs[0].poll() is not None:
                raise RuntimeError(f"the scheduler exited ({self.procs[0].returncode})")
            try:
                with open(file, encoding="utf-8") as fh:
                    return str(json.load(fh)["address"])
            except (OSError, ValueError, KeyError):
                time.sleep(0.05)
        raise TimeoutError(f"no scheduler after {timeout_s:g} s")

    def _log_tail(self) -> str:
        lines: list[str] = []
        for role in ("scheduler", "worker"):
            try:
                text = Path(self.folder, f"{role}.log").read_text(errors="replace")
            except OSError:
                continue
            lines += [f"{role}: {ln.strip()}" for ln in text.splitlines() if "Error" in ln or "error" in ln][-2:]
        return "; ".join(lines)

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.close()
            except Exception:  # noqa: BLE001, S110 - closing what is already gone
                pass
        for p in reversed(self.procs):  # workers first: their stdin closes, they exit at once
            if p.stdin is not None:
                p.stdin.close()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        self.procs = []
        for name in ("scheduler.json", "scheduler.log", "worker.log"):
            try:
                os.unlink(os.path.join(self.folder, name))
            except OSError:
                pass
        try:
            os.rmdir(self.folder)
        except OSError:
            pass


def _child_env() -> dict[str, str]:
    """The environment of a process this one starts: rubricrun imported from where this process imports it."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def _required_env(cfg: Config) -> list[str]:
    """The key variables the attempts read (where they are made): entries, their models and deployments."""
    names: set[str] = set()
    for m in [*cfg.candidates, *cfg.judge_pool]:
        for env in [m.api_key_env, *(w.api_key_env for w in m.models), *(d.api_key_env for d in m.deployments)]:
            if env and not m.model.startswith("local/"):
                names.add(env)
    return sorted(names)


def _check_env(client: Client, cfg: Config, where: str) -> None:
    names = _required_env(cfg)
    if not names:
        return
    missing = {w: m for w, m in client.run(_missing_env, names).items() if m}
    if missing:
        worker, lacking = next(iter(sorted(missing.items())))
        raise InputError(
            f"executor: worker {worker} of {where} lacks the environment variable(s) {', '.join(lacking)} "
            f"({len(missing)} of its workers lack some): workers read API keys from their own environment"
        )


def _relay(address: str, plugin: str, timeout_s: str, direct: str) -> None:
    """`python -m rubricrun.providers.dask_executor relay ADDRESS PLUGIN TIMEOUT_S DIRECT`: the Relay, its frames on
    stdin and stdout (anything else printed goes to stderr), until its stdin ends."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    logging.getLogger("distributed").setLevel(logging.ERROR)
    client = Client(address, set_as_default=False, timeout=float(timeout_s), direct_to_workers=direct == "1" or None)
    Relay(client, plugin, float(timeout_s), out).serve(sys.stdin.buffer)
    os._exit(0)


def _serve(argv: list[str]) -> None:
    """`python -m rubricrun.providers.dask_executor scheduler|worker ARGS`: Dask's own command, ended at once when
    its stdin closes (LocalProcesses holds the other end: closed at the end of the run, or by the kernel when the
    run's process is gone); `relay ARGS`: the run's relay (`_relay`)."""
    if argv[0] == "relay":
        _relay(*argv[1:])
        return

    def watch() -> None:
        sys.stdin.buffer.read()
        os._exit(0)

    threading.Thread(target=watch, name="rubricrun.parent-watch", daemon=True).start()
    from distributed.cli import dask_scheduler, dask_worker

    command = dask_scheduler.main if argv[0] == "scheduler" else dask_worker.main
    command(argv[1:])


if __name__ == "__main__":  # through the module's own name: the relay's Mailbox is pickled by reference to it
    from rubricrun.providers.dask_executor import _serve as serve

    serve(sys.argv[1:])
