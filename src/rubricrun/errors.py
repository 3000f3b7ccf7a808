"""The few exception types rubricrun raises, each carrying its context in the message."""

from __future__ import annotations

from typing import Any


class RubricrunError(Exception):
    """Base class."""


class InputError(RubricrunError):
    """Bad config, data or CLI input: printed as one line, exit code 2.

    The message names the file, line and key: `config.yaml: key 'run.concurrency': expected int`.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, key: str | None = None):
        self.file, self.line, self.key = file, line, key
        place = f"{file}:{line}" if file and line else file or ""
        where = [w for w in (place, f"key '{key}'" if key else "") if w]
        super().__init__(": ".join([*where, message]))


def type_name(v: Any) -> str:
    """How a message names the type of a JSON value ("a list", "null")."""
    if v is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(v), "a number")


def read_text(path: str, what: str, *, key: str | None = None, max_bytes: int | None = None) -> str:
    """The UTF-8 text of the file at `path`, or the InputError that names it (and `key`): `what` says what the file
    is ("config", "template"). A file over `max_bytes` is refused unread past that size."""
    try:
        with open(path, "rb") as fh:
            data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
        if max_bytes is not None and len(data) > max_bytes:
            raise InputError(f"the {what} is larger than {max_bytes >> 20} MiB", file=path, key=key)
        return data.decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} file not found", file=path, key=key) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read {what}: {e}", file=path, key=key) from None


class ProviderError(RubricrunError):
    """A model call failed. `retryable` says whether the retry policy may try again."""

    def __init__(
        self,
        message: str,
        *,
        model: str = "",
        status_code: int | None = None,
        retryable: bool = False,
        retry_after_s: float | None = None,
        deployment: str | None = None,
        worker: str | None = None,
    ):
        self.model, self.status_code, self.retryable, self.retry_after_s = model, status_code, retryable, retry_after_s
        self.deployment = deployment  # a Router entry's deployment that failed (for the trace)
        self.worker = worker  # the process ("host:pid") that made the failed attempt (for the trace)
        code = f" (HTTP {status_code})" if status_code else ""
        super().__init__(f"{model}{code}: {message}" if model else message)


class RunLockedError(RubricrunError):
    """Another process holds the run id."""


class NotDone(RubricrunError):
    """A call that was not made and is not an error: its task has no row, and a rerun of the run id picks it up."""


class BudgetExceeded(NotDone):
    """The run's spend would pass `budget_usd`; no new calls are started."""


class Cancelled(NotDone):
    """The run is stopping (Ctrl+C or budget): no new call is started."""


class Deferred(NotDone):
    """A call of an entry with `batch: true`: recorded for a provider batch job instead of made now. The runner
    submits the recorded calls, writes their replies into the cache and runs the pass again (providers/batch.py)."""
