"""Row and config builders shared by the tests (plain functions; the fixtures are in conftest.py).

- `example(eid, ...)`, `response(eid, cand, text, ...)`, `judgment(response, cid, verdict, ...)`: the rows of
  types.py as the run writes them, with the defaults most tests want; any field can be given by name.
- `model_entry(name, model, server)`: a candidate or judge entry that calls the fake server with the fake key;
  `one_candidate(server)`: the one-candidate list a test that needs no comparison gives as `candidates=`.
- `FakeClock(t)`: a clock for the rate limiters (providers/ratelimit.py) that moves only when a test sets `t`.
"""

from __future__ import annotations

from typing import Any

from fakeserver import FakeOpenAIServer

from rubricrun.types import Example, Judgment, Response, Usage

KEY_ENV = "RUBRICRUN_TEST_KEY"


def example(eid: str, *, dataset: str = "d", prompt: str | None = None, **fields: Any) -> Example:
    """An example with one user message (`prompt`, default its id) unless `messages` is given."""
    messages = fields.pop("messages", ({"role": "user", "content": eid if prompt is None else prompt},))
    fields.setdefault("source", f"{dataset}.jsonl:1")
    return Example(id=eid, dataset=dataset, messages=tuple(messages), **fields)


def response(eid: str, cand: str = "alpha", text: str | None = "t", *, sample: int = 0, **fields: Any) -> Response:
    """A response `<eid>#<cand>#<sample>`; `status="error"` gives it an error and no finish reason unless given."""
    status = fields.pop("status", "ok")
    ok = status == "ok"
    row = {
        "id": f"{eid}#{cand}#{sample}",
        "example_id": eid,
        "candidate": cand,
        "model": f"openai/{cand}",
        "sample_index": sample,
        "status": status,
        "text": text,
        "error": None if ok else "boom",
        "finish_reason": "stop" if ok else None,
        "usage": Usage(),
        "key": f"k-{eid}-{cand}",
    }
    return Response(**{**row, **fields})


def judgment(r: Response, cid: str, verdict: str = "met", *, weight: float = 1.0, **fields: Any) -> Judgment:
    """The verdict of judge `j` on criterion `cid` of response `r`."""
    row = {
        "id": f"{r.id}#{cid}",
        "response_id": r.id,
        "example_id": r.example_id,
        "candidate": r.candidate,
        "criterion_id": cid,
        "weight": weight,
        "judge": "j",
        "verdict": verdict,
        "explanation": "",
        "error": None,
    }
    return Judgment(**{**row, **fields})


def model_entry(name: str, model: str, server: FakeOpenAIServer | None, **extra: Any) -> dict[str, Any]:
    """A candidate or judge entry that calls the fake server with the fake key."""
    entry: dict[str, Any] = {"name": name, "model": model}
    if server is not None:
        entry["api_base"] = server.base_url
    entry["api_key_env"] = KEY_ENV
    entry.update(extra)
    return entry


def one_candidate(server: FakeOpenAIServer | None, **extra: Any) -> list[dict[str, Any]]:
    """`candidates=` for a test with one candidate: alpha on the fake server's `cand-alpha`."""
    return [model_entry("alpha", "openai/cand-alpha", server, **extra)]


class FakeClock:
    """A clock that stands still at `t` (seconds) until the test moves it."""

    def __init__(self, t: float = 100.0):
        self.t = t

    def __call__(self) -> float:
        return self.t
