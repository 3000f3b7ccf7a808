"""Progress of a run's stages: a bar on a terminal, log lines elsewhere (CI, nohup, a log file)."""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import IO, Any

log = logging.getLogger("rubricrun")


# Seconds between progress lines in the log when stderr is not a terminal (run.progress_interval_s sets it).
LOG_INTERVAL_S = 10.0


def set_log_interval(seconds: float) -> None:
    global LOG_INTERVAL_S
    LOG_INTERVAL_S = seconds


def _clock(seconds: float) -> str:
    """mm:ss, or h:mm:ss from an hour (as tqdm writes it)."""
    m, sec = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def progress_line(label: str, done: int, total: int, elapsed_s: float) -> str:
    """`generate 40/100 (40%) 8.0/s ETA 00:07`: what a log reader needs to see a stage moving."""
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    eta = _clock((total - done) / rate) if rate > 0 else "?"
    return f"{label} {done}/{total} ({100 * done // max(1, total)}%) {rate:.1f}/s ETA {eta}"


class Progress:
    """Progress of one stage. On a terminal: a tqdm bar with rate and ETA (console log lines are printed above
    it). Elsewhere (CI, nohup): a progress line in the log every LOG_INTERVAL_S seconds, since a bar redrawn
    with carriage returns is noise in a log file."""

    def __init__(
        self,
        label: str,
        total: int,
        enabled: bool = True,
        *,
        stream: IO[str] | None = None,
        grows: bool = False,
        on: str | None = None,
    ):
        self.label, self.total, self.done = label, total, 0
        self.on = f" on {on}" if on else ""  # where the calls run, when not on this process's threads
        self.start = self._last_line = time.monotonic()
        self.interval_s = LOG_INTERVAL_S
        stream = stream or sys.stderr
        on = enabled and (total > 0 or grows)  # grows: the total is learned as work is found (add)
        self._bar: Any = None  # a tqdm bar
        self._closing = contextlib.ExitStack()  # the bar, then the log's redirection to it
        if on and stream.isatty():
            from tqdm import tqdm  # imported only for a terminal (about 0.1 s)
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._closing.enter_context(logging_redirect_tqdm([log]))
            bar = tqdm(total=total, desc=label, file=stream, unit="call", dynamic_ncols=True, mininterval=0.1)
            self._bar = self._closing.enter_context(bar)
        self._lines = on and self._bar is None
        self._said: tuple[int, int] | None = None  # (done, total) of the last line logged (None: none yet)

    def add(self, n: int = 1) -> None:
        """n more to do (a stage whose work is found as the run goes)."""
        self.total += n
        if self._bar is not None:
            self._bar.total = self.total

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._said is not None and self.done >= self.total:
            self._line(time.monotonic())  # a stage that was shown running says once that it is done
        else:
            self.tick()

    def tick(self) -> None:
        """Log a progress line if the interval has passed and the stage is still running (called on every
        completion and while waiting): a finished stage is not repeated while later stages run (issue 23)."""
        now = time.monotonic()
        if self._lines and self.done < self.total and now - self._last_line >= self.interval_s:
            self._line(now)

    def _line(self, now: float) -> None:
        if (self.done, self.total) == self._said:
            return
        self._last_line, self._said = now, (self.done, self.total)
        log.info("progress %s%s", progress_line(self.label, self.done, self.total, now - self.start), self.on)

    def close(self) -> None:
        self._closing.close()
        self._bar = None
        if self._lines and self._said is not None:  # a stage long enough to show progress also says how it ended (once)
            self._line(time.monotonic())
            self._lines = False
