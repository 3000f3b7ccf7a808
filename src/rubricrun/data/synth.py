"""Prompt synthesis: main topic -> subtopics -> prompts, with over-generation, dedupe and one shortfall retry.

Each step asks for `target * (1 + over_generation_buffer)` items (rounded up) as a JSON array of strings, dedupes
what it reads and, when short, asks once more for the shortfall (plus the buffer), excluding the `max_exclusions`
most recent items; the result is trimmed to the target (a step still short says so in its log line). Attempt 0 and
1 (the retry) have their own cache keys, so a rerun with the same config is all cache hits.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from ..config import SynthesizeConfig
from ..errors import InputError, ProviderError, read_text
from ..types import Example, LLMResponse
from .jsonread import first, quoted_in

Call = Callable[[list[dict], int], LLMResponse]  # (messages, attempt_no) -> response

TEMPLATES_DIR = Path(__file__).parent / "templates"
SUBTOPICS_TEMPLATE = "subtopics.j2"
PROMPTS_TEMPLATE = "prompts.j2"


@dataclass(frozen=True)
class SynthLog:
    """What one step asked for and got. `asked` and `received` add up both asks when the retry ran."""

    step: str  # "subtopics" or "prompts[<sub_topic index>] <sub_topic>"
    requested: int  # the target
    asked: int  # items asked for, first ask plus retry
    received: int  # items parsed from the replies (before dedupe)
    unique: int  # items left after dedupe (before trimming)
    final: int  # items kept
    error: str | None = None  # a ProviderError that cut the step short (prompts steps only)


# --------------------------------------------------------------------------------------------------
# Parsing and dedupe


def parse_json_list(text: str) -> list[str]:
    """The non-empty strings of the first JSON array in `text` that holds any, read leniently (data/jsonread.py),
    stripped; [] when there is none. Other items are skipped, not stringified (they are no prompts), and from a
    repaired array only double-quoted strings count: bare or single-quoted words are more likely junk."""
    return first(text, lambda node, chunk: _strings(node, None if chunk is None else text) or None) or []


def _strings(node: Any, quoted_from: str | None = None) -> list[str]:
    """A list's non-empty string items, stripped (when repaired: only those written as complete JSON strings)."""
    if not isinstance(node, list):
        return []
    return [
        s.strip()
        for s in node
        if isinstance(s, str) and s.strip() and (quoted_from is None or quoted_in(s, quoted_from))
    ]


def _key(item: str) -> str:
    return " ".join(item.split()).casefold()


def dedupe(items: Iterable[str], *, exclude: Iterable[str] = ()) -> list[str]:
    """`items` without blanks, repeats or anything in `exclude` (case- and whitespace-insensitive), in order, each
    in its first spelling."""
    seen = {_key(x) for x in exclude}
    out: list[str] = []
    for item in items:
        k = _key(item)
        if k and k not in seen:
            seen.add(k)
            out.append(item)
    return out


# --------------------------------------------------------------------------------------------------
# Templates


def load_template(path: str | None, default_name: str) -> jinja2.Template:
    """The Jinja2 template at `path`, else the packaged `default_name`: a misspelt variable is an error
    (StrictUndefined), a line holding only a `{% ... %}` tag leaves no blank line; a bad file is an InputError."""
    label = os.path.expanduser(path) if path is not None else str(TEMPLATES_DIR / default_name)
    source = read_text(label, "template")

    def load(name: str) -> tuple[str, str, Callable[[], bool]] | None:
        return (source, label, lambda: True) if name == label else None

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(load),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    try:
        return env.get_template(label)
    except jinja2.TemplateSyntaxError as e:
        raise InputError(f"Jinja2 syntax error: {e.message}", file=label, line=e.lineno) from None


def render(template: jinja2.Template, **variables: Any) -> str:
    """The rendered template; a render error (undefined variable, ...) is an InputError naming file and line."""
    try:
        return template.render(**variables).strip()
    except jinja2.TemplateError as e:
        line = None
        tb = e.__traceback__
        while tb is not None:  # Jinja2 rewrites tracebacks so template frames carry the template's file and line
            if tb.tb_frame.f_code.co_filename == template.filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        names = ", ".join(sorted(variables))
        raise InputError(f"template error: {e} (variables: {names})", file=template.filename, line=line) from None


# --------------------------------------------------------------------------------------------------
# Synthesis


def _with_buffer(n: int, buffer: float) -> int:
    """ceil(n * (1 + buffer)), rounded first so float noise (100 * 1.1 = 110.00000000000001) does not add one."""
    return math.ceil(round(n * (1 + buffer), 9))


def _step(
    step: str,
    target: int,
    prompt_for: Callable[..., str],  # (count=, exclusions=) -> the prompt
    call: Call,
    cfg: SynthesizeConfig,
    exclude: Iterable[str],
    log: Callable[[str], None],
    *,
    catch: bool,
) -> tuple[list[str], SynthLog]:
    """One step: ask, dedupe, retry once for a shortfall, trim, log. `catch`: turn a ProviderError into a log."""
    exclude = list(exclude)
    asked = received = 0
    unique: list[str] = []
    error: str | None = None
    try:
        for attempt in (0, 1):  # the first ask, then one for a shortfall
            if attempt and len(unique) >= target:
                break
            count = _with_buffer(target - len(unique), cfg.over_generation_buffer)
            exclusions = unique[-cfg.max_exclusions :] if cfg.max_exclusions else []
            asked += count
            reply = call([{"role": "user", "content": prompt_for(count=count, exclusions=exclusions)}], attempt)
            items = parse_json_list(reply.text or "")
            received += len(items)
            unique += dedupe(items, exclude=exclude + unique)
    except ProviderError as e:
        if not catch:
            raise
        error = str(e)
    final = unique[:target]
    entry = SynthLog(step, target, asked, received, len(unique), len(final), error)
    counts = " ".join(f"{k}={getattr(entry, k)}" for k in ("requested", "asked", "received", "unique", "final"))
    line = f"synthesize {step}: {counts}"
    if len(final) < target:
        line += f" (short by {target - len(final)})"
    if error:
        line += f"; model error: {error}"
    log(line)
    return final, entry


def synthesize(
    cfg: SynthesizeConfig,
    call: Call,
    *,
    log: Callable[[str], None] = print,
    on_step: Callable[[SynthLog, list[Example]], None] = lambda entry, examples: None,
) -> tuple[list[Example], list[SynthLog]]:
    """One Example per prompt for `cfg.main_topic`, in subtopic then prompt order. A ProviderError while asking for
    subtopics propagates; one for a subtopic's prompts is logged and the others go on. Both templates are rendered
    with sample values first, so a template error costs no call."""
    sub_tpl = load_template(cfg.subtopic_template, SUBTOPICS_TEMPLATE)
    prm_tpl = load_template(cfg.prompt_template, PROMPTS_TEMPLATE)
    for exclusions in ([], ["an example"]):  # both sides of an `{% if exclusions %}`
        render(sub_tpl, main_topic=cfg.main_topic, count=1, exclusions=exclusions)
        render(prm_tpl, main_topic=cfg.main_topic, sub_topic="a subtopic", count=1, exclusions=exclusions)

    subtopics_prompt = functools.partial(render, sub_tpl, main_topic=cfg.main_topic)
    subtopics, first = _step("subtopics", cfg.num_subtopics, subtopics_prompt, call, cfg, (), log, catch=False)
    logs = [first]
    on_step(first, [])  # each finished step is reported at once: a run stopped mid-synthesis keeps what was done
    examples: list[Example] = []
    accepted: list[str] = []  # every prompt so far, so no prompt repeats across subtopics
    for si, sub_topic in enumerate(subtopics):
        prompt_for = functools.partial(render, prm_tpl, main_topic=cfg.main_topic, sub_topic=sub_topic)
        prompts, entry = _step(
            f"prompts[{si}] {sub_topic}", cfg.prompts_per_subtopic, prompt_for, call, cfg, accepted, log, catch=True
        )
        logs.append(entry)
        accepted += prompts
        start = len(examples)
        for pi, prompt in enumerate(prompts):
            digest = hashlib.sha256(f"{cfg.main_topic}|{sub_topic}|{prompt}".encode()).hexdigest()[:12]
            examples.append(
                Example(
                    id=f"{cfg.dataset_name}/{digest}",
                    dataset=cfg.dataset_name,
                    source=f"synthesize:{si}:{pi}",
                    messages=({"role": "user", "content": prompt},),
                    metadata={"main_topic": cfg.main_topic, "sub_topic": sub_topic, "synthesized": True},
                )
            )
        on_step(entry, examples[start:])
    return examples, logs
