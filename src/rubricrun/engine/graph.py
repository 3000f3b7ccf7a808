"""The stage graph: each call of a run starts as soon as what it needs has landed (stages.py says what follows what).
Candidate calls run on one thread pool (run.concurrency), judge and pairwise calls on another
(run.judge_parallel_workers); with the dask executor both are that many per worker.

The unit of work is one example. Units are admitted in input order into a bounded window (memory does not grow with
the dataset) and leave from its head to the sink, so rows are written in input order whatever order calls finish in.
Design and reasons: ExecPlan 009.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .. import codec
from ..config import MAX_THREADS, Config
from ..providers.base import BaseProvider
from ..providers.executor import Executor, Threads, describe
from ..types import Example
from .calls import synthesize
from .progress import Progress
from .stages import Stages, Unit, Work, conversations
from .stop import GRACE_S, THREAD_PREFIX, stop_on_signal

if TYPE_CHECKING:
    from ..results.artifacts import RowFiles  # the sink: each example as admitted, then with its rows, in order

log = logging.getLogger("rubricrun")


class Graph:
    """Runs the examples of one run through the stack; `run` returns whether Ctrl+C (or a stop) cut it short."""

    def __init__(
        self, cfg: Config, stack: BaseProvider, stop: threading.Event, sink: RowFiles, executor: Executor | None = None
    ) -> None:
        self.cfg, self.stop, self.sink, self.stack = cfg, stop, sink, stack
        self.stages = Stages(cfg, stack, self._submit, self._ended)
        run = cfg.run
        executor = executor or Threads()
        n = executor.workers  # a blocked thread per attempt in flight: plan 020 (Decision Log) says why

        def threads(per_worker: int) -> int:  # at most MAX_THREADS in one process, however many workers
            return max(1, min(per_worker * n, MAX_THREADS))

        self.pools = {
            "generate": Pool(threads(run.concurrency), THREAD_PREFIX + "generate", self._call),
            "judge": Pool(threads(run.judge_parallel_workers), THREAD_PREFIX + "judge", self._call),
        }
        shown = {"generate": True, "judge": bool(cfg.judge_pool), "pairwise": self.stages.pairing is not None}
        on = None if executor.engine == "threads" else describe(executor)  # progress lines: "... on dask, 8 workers"
        self.bars = {k: Progress(k, 0, run.progress and shown[k], grows=True, on=on) for k in shown}  # no empty bar
        # Counts for the bars: any thread puts (kind, added, done), the conductor alone updates the bars (a put is
        # one C call under the GIL: no lock per call).
        self.counts: queue.SimpleQueue[tuple[str, int, int]] = queue.SimpleQueue()
        self.conductor = threading.get_ident()  # the thread that runs `run` (set again there)
        self.lock = threading.Lock()  # guards what follows
        self.failure: BaseException | None = None
        self.expected = 0  # candidate turns the run expects (a conversation ended by a failed turn expects no more)
        self.ended: dict[int, list[int]] = {}  # turn -> [conversations ended there, later turns not asked]
        self.wake: queue.SimpleQueue[Unit | None] = queue.SimpleQueue()
        self.head: Unit | None = None  # the unit the conductor waits for: the window's head (only its end wakes it)
        # Examples in flight at most: enough that one slow example does not starve the pools.
        self.size = max(64, 8 * (run.concurrency + run.judge_parallel_workers) * n)
        # Synthesis (calls.synthesize) on a pool of one thread, so a stop gives its call in flight the calls' grace
        # period; its examples follow the given ones, each step's as soon as the step ends. `synthesis`: the steps
        # done, as rows; a step that ends after the run stopped waiting for it is left out.
        self.synthesis: list[Any] = []
        self.synthesized: queue.SimpleQueue[Any] = queue.SimpleQueue()  # examples, then _END or the error that ended it
        self.synthesis_left = self.synthesis_interrupted = False
        steps = 1 + cfg.synthesize.num_subtopics if cfg.synthesize is not None else 0  # a step an ask
        self.synthesis_bar = Progress("synthesize", steps, run.progress)  # (none shown at 0)
        if cfg.synthesize is not None:
            self.pools["synthesize"] = Pool(1, THREAD_PREFIX + "synthesis", self._synthesize)

    # -- the conductor (the calling thread) --------------------------------------------------------------

    def run(self, given: Iterable[Example]) -> bool:
        """Admit, in input order, the given examples then the synthesized ones, and hand each finished unit to the
        sink in input order. On Ctrl+C: calls in flight get the grace period, every admitted unit goes to the sink
        with what it finished, the examples not admitted go with nothing, and True is returned."""
        self.conductor = threading.get_ident()
        examples: Iterator[Example | None] = iter(given)
        if "synthesize" in self.pools:
            self.pools["synthesize"].submit("synthesize")
            examples = itertools.chain(examples, self._synthesized())
        with stop_on_signal(self.stop):
            window: deque[Unit] = deque()
            more = True
            try:
                while more or window:
                    while window and window[0].finished:
                        unit = window.popleft()
                        self.sink.finish(unit.example, *unit.rows())
                    if self.failure is not None:
                        raise self.failure
                    if self.stop.is_set():
                        raise KeyboardInterrupt
                    if more and len(window) < self.size:
                        ex = next(examples, _END)
                        if ex is _END:
                            more = False
                        elif ex is not None:
                            window.append(self._admit(ex))
                            self._count_bars()
                        continue
                    self.head = window[0] if window else None  # (set before looking: see _release)
                    if self.head is not None and not self.head.finished:
                        self._wait()
            except BaseException as exc:
                self.stop.set()
                if not isinstance(exc, KeyboardInterrupt):
                    raise
                self._stop_pools(time.monotonic() + GRACE_S)  # the calls running get GRACE_S in all to land
                self._leave_synthesis()
                for unit in window:  # what finished, in input order
                    self.sink.finish(unit.example, *unit.rows())
                for ex in examples:  # the rest counts as examples, with no rows
                    if ex is not None:
                        self.sink.finish(ex, *self._admit(ex, calls=False).rows())
                return True
            finally:
                self._close()
            return self.synthesis_interrupted

    def _wait(self) -> None:
        try:
            self.wake.get(timeout=0.5)
        except queue.Empty:
            for bar in self.bars.values():
                bar.tick()  # a stalled run still shows in the log
        self._count_bars()

    def _count_bars(self) -> None:
        while not self.counts.empty():  # (the conductor alone takes from it)
            kind, added, done = self.counts.get_nowait()
            bar = self.bars[kind]
            if added:
                bar.add(added)
            if done:
                bar.update(done)

    def _admit(self, ex: Example, *, calls: bool = True) -> Unit:
        self.sink.admit(ex)
        cands = conversations(self.cfg, ex)
        unit = Unit(ex, cands)
        with self.lock:
            self.expected += len(cands) * ex.turns
        with unit.lock:  # held while submitting, so neither count reaches 0 before every first turn is in
            unit.pending, unit.generating = 1, 1
        if calls:
            self.stages.start(unit)
        self._release(unit, generated=True)
        return unit

    def _stop_pools(self, deadline: float | None) -> None:
        """Stop paying for new calls: queued calls are dropped; the calls running are waited for until `deadline`
        (time.monotonic(); None: until they end). Their results land in the cache either way."""
        for pool in self.pools.values():
            pool.shutdown()
        for pool in self.pools.values():
            pool.join(deadline)

    def _close(self) -> None:
        self._count_bars()
        for bar in self.bars.values():
            bar.close()
        # After a stop (the grace period spent or no call to wait for): the threads end after their call, unwaited.
        self._stop_pools(time.monotonic() if self.stop.is_set() else None)
        self._leave_synthesis()
        for turn, (convs, cut) in sorted(self.ended.items()):
            log.warning("%d conversations ended at a failed turn %d: %d later turns not asked", convs, turn, cut)

    def _synthesized(self) -> Iterator[Example | None]:
        """The synthesized examples as they come; None while none is ready (the conductor writes units meanwhile)."""
        while True:
            try:
                got = self.synthesized.get(timeout=0.1)
            except queue.Empty:
                yield None
                continue
            if got is _END or isinstance(got, BaseException):
                break
            yield got
        self.synthesis_bar.close()
        self.synthesis_interrupted = self.stop.is_set()
        if got is not _END:
            raise got

    def _leave_synthesis(self) -> None:
        """The run waits no longer for synthesis: a step that ends from now on is not recorded."""
        with self.lock:
            self.synthesis_left = True
            self.synthesis_bar.close()
        self.synthesized.put(_END)

    # -- the calls (pool threads) ------------------------------------------------------------------------

    def _submit(self, work: Work) -> None:
        """stages.Submit: run the work here when the cache answers all its calls, else on its kind's pool."""
        if self.stop.is_set():  # stopping: no new calls
            return
        kind, unit = work.kind, work.unit
        gen = kind == "generate"
        with unit.lock:
            unit.pending += 1
            unit.generating += gen
        if self.stack.try_cached(self.stages.run, work):  # answered from the cache, here: never waits for a pool
            self.counts.put((kind, 1, 1))
            self._release(unit, generated=gen)
            return
        self.counts.put((kind, 1, 0))
        if not self.pools["generate" if gen else "judge"].submit(work):  # the pool shut down meanwhile (a stop)
            with unit.lock:
                unit.pending -= 1
                unit.generating -= gen

    def _call(self, work: Work) -> None:
        try:
            self.stages.run(work)
        except BaseException as exc:  # noqa: BLE001 - a failure a row cannot hold (cache, disk): stop the run
            with self.lock:
                self.failure = self.failure or exc
            self.stop.set()
        finally:
            self.counts.put((work.kind, 0, 1))
            self._release(work.unit, generated=work.kind == "generate")

    def _release(self, unit: Unit, *, generated: bool) -> None:
        """One piece of the unit's work ended: after its last candidate call, its comparisons; after its last
        call, the unit is finished and the conductor is woken."""
        if generated:
            with unit.lock:
                unit.generating -= 1
                last = unit.generating == 0
            if last:
                self.stages.compare(unit)
        with unit.lock:
            unit.pending -= 1
            unit.finished = unit.pending == 0
        # Only the end of the window's head wakes the conductor (the units behind it wait for it anyway), or a
        # failure; never work it did itself (a queue it never waits on would keep every unit it finished alive).
        if (unit.finished and unit is self.head or self.failure) and threading.get_ident() != self.conductor:
            self.wake.put(unit)

    def _synthesize(self, _: str) -> None:
        try:
            synthesize(self.cfg, self.stack, self._synthesis_step)
            self.synthesized.put(_END)
        except BaseException as exc:  # noqa: BLE001 - raised again in the conductor, after the examples made
            self.synthesized.put(exc)

    def _synthesis_step(self, entry: Any, new: list[Example]) -> None:
        with self.lock:
            if self.synthesis_left:
                return
            self.synthesis.append(codec.to_data(entry))
            self.synthesis_bar.update()
        for ex in new:
            self.synthesized.put(ex)

    def _ended(self, turn: int, cut: int) -> None:
        """A failed turn ended a conversation, `cut` later turns not asked (logged at the end of the run)."""
        with self.lock:
            ended = self.ended.setdefault(turn, [0, 0])
            ended[0] += 1
            ended[1] += cut
            self.expected -= cut


_END: Any = object()


class Pool:
    """Up to `size` threads (started as calls come) running `call(work)` for each work submitted: a ThreadPoolExecutor
    without a Future, its Condition and a callback per call (plan 020, Surprise 14). Not daemons, as its threads."""

    def __init__(self, size: int, name: str, call: Callable[[Any], None]) -> None:
        self.size, self.name, self.call = size, name, call
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self.lock, self.closed, self.submitted = threading.Lock(), False, 0  # submitted: calls handed to it

    def submit(self, work: Any) -> bool:
        """Queue the work; False (nothing queued) once the pool is shut down."""
        with self.lock:
            if self.closed:
                return False
            self.queue.put(work)
            self.submitted += 1
            if len(self._threads) < self.size:  # a thread more a call until there are `size`
                self._threads.append(threading.Thread(target=self._serve, name=f"{self.name}_{len(self._threads)}"))
                self._threads[-1].start()
        return True

    def _serve(self) -> None:
        while (work := self.queue.get()) is not None:
            self.call(work)

    def shutdown(self) -> None:
        """No new work; the work not started is dropped; each thread ends after the call it is in."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            while not self.queue.empty():
                self.queue.get_nowait()
            for _ in self._threads:
                self.queue.put(None)

    def join(self, deadline: float | None = None) -> None:
        """Waits for the threads to end (after shutdown), until `deadline` (time.monotonic()) if given."""
        for t in self._threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
