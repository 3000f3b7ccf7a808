"""Reading a dataset, one step after the other: the file's raw rows (readers.py), each row's schema detected or
forced and built (schemas.py, the tasks' builders), the `Example` it makes (`RowParser`, here), its id checked against
the ones before it, and its references joined (`join_references`). Nothing calls back up this line.

Every data error is an `InputError` that names the file, the 1-based line (or the 0-based row where a source has no
lines) and the key: `data/x.jsonl:7: key 'rubric[2].weight': expected a number, got 'heavy'`. Schemas, ids and the
`fields` mapping are described in data/README.md.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NoReturn

import msgspec

from ..config import DatasetConfig, dataset_name
from ..errors import InputError, type_name
from ..types import Example
from .readers import RawRow, file_rows, read_rows, source_label
from .schemas import MISSING, Fail, Row, RowSchema, content_id, fail_at, native_id, resolve, rubric_of, text_value

# The normalized names `DatasetConfig.fields` may map (normalized name -> key in the row); a schema's own keys
# (RowSchema.native_fields) are mappable too, when a file renames them.
NORMALIZED_FIELDS = tuple("id prompt messages system question choices answer reference rubric metadata".split())

_PROMPT_GUESSES = ("instruction", "input", "query", "question", "problem", "text", "content", "user", "request")
_MAX_KEYS_SHOWN = 20


def iter_dataset(
    cfg: DatasetConfig,
    *,
    schemas: Sequence[RowSchema],
    on_bad_row: str = "fail",
    max_examples: int | None = None,
    keep: Sequence[str] = (),
    skipped: list[str] | None = None,
    check_ids: bool = True,
    seen: IdHashes | None = None,
    elsewhere: list[Example] | None = None,
) -> Iterator[Example]:
    """The examples of `cfg.path` (or the Hub dataset `cfg.hf`) one at a time, in file order, holding none of them.
    `schemas`: the row schemas, in detection order (tasks.registry.TASKS). A bad row raises, or with on_bad_row
    "skip" its message goes to `skipped` (a source of bad rows only raises even then); a problem with the file or its
    `fields` always raises. `cfg.limit` and `max_examples` cap the examples. `keep`: the columns (dotted paths
    allowed) that `response_column:` candidates replay, kept in `Example.prefilled`.

    Duplicate ids are found from a set of id hashes (`seen`, IdHashes, which sources may share): only a hit
    reads the file again, for the first row with that id; a hit with no such row here goes to `elsewhere` for the
    caller to look up (or is a hash collision). `check_ids=False`: a source already checked."""
    parse = RowParser(cfg, schemas, keep)
    cap = min((c for c in (cfg.limit, max_examples) if c is not None), default=None)
    skipped = [] if skipped is None else skipped
    references = load_references(cfg.references) if cfg.references else None
    seen = IdHashes() if seen is None else seen  # hash(example id) of the rows read so far
    n = bad = 0
    if cap == 0:
        return
    for raw in read_rows(cfg):
        try:
            ex, id_key = parse(raw)
            if check_ids:
                h = hash(ex.id)
                if h in seen:
                    first = first_seen(parse.examples(read_rows(cfg)), ex.id, before=ex.source)
                    if first is not None:
                        _duplicate(ex, id_key, raw, first)
                    if elsewhere is not None:
                        elsewhere.append(ex)
                seen.add(h)
        except InputError as e:
            if on_bad_row == "skip":
                skipped.append(str(e))
                bad += 1
                continue
            raise
        yield join_references(ex, references) if references is not None else ex
        n += 1
        if cap is not None and n >= cap:
            break
    if bad and not n:  # `skip` is for a few bad rows; a file of bad rows is the wrong file or mapping
        raise InputError(f"every row of {source_label(cfg)} is bad ({bad} skipped); the first: {skipped[-bad]}")
    if not n:  # nothing to run on: a run would pay for nothing and say nothing (as --max-examples 0 is refused)
        raise InputError("the dataset has no rows", file=source_label(cfg))


def first_seen(examples: Iterable[Example], example_id: str, before: str | None = None) -> str | None:
    """The source of the first of `examples` with `example_id`, if it comes before the example from source `before`
    (None: none does, the id hash's hit was a collision). engine/preflight.py may give it earlier datasets' examples."""
    for ex in examples:
        if ex.source == before:
            break
        if ex.id == example_id:
            return ex.source
    return None


def _duplicate(ex: Example, id_key: str | None, raw: RawRow, first_source: str) -> NoReturn:
    native = ex.id.split("/", 1)[1]
    first = first_source.rsplit(":", 1)[-1]  # "path:4" (a line) or "path:row 3"
    first = f"line {first}" if first.isdigit() else first
    if id_key is None:
        raise InputError(
            f"duplicate row: same messages as {first} (content id '{native}'); give the rows distinct ids",
            file=raw.file,
            line=raw.line,
        )
    raise InputError(f"duplicate id '{native}' (first on {first})", file=raw.file, line=raw.line, key=id_key)


_EMPTY = 0


class IdHashes:
    """A set of 64-bit id hashes (what hash() returns: add() and `in`) in one array, what the duplicate-id check keeps
    per example: an open-addressing table kept at most half full, 16-32 bytes a hash against a Python set's 60 (plan
    009). A hit is confirmed by reading the data again, so a stored value may stand for more than one hash: 0 (empty)
    is stored as 1."""

    __slots__ = ("_n", "_table")

    def __init__(self) -> None:
        self._table = array("q", bytes(8 * 1024))
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def _slot(self, h: int) -> int:
        """The slot holding `h`, or the empty slot where it would go."""
        table = self._table
        mask = len(table) - 1
        i = (h ^ (h >> 29)) & mask  # the low bits of a str hash are well mixed already; fold the high ones in too
        while table[i] != _EMPTY and table[i] != h:
            i = (i + 1) & mask
        return i

    def __contains__(self, h: int) -> bool:
        h = h or 1
        return self._table[self._slot(h)] == h

    def add(self, h: int) -> None:
        h = h or 1
        i = self._slot(h)
        if self._table[i] == h:
            return
        self._table[i] = h
        self._n += 1
        if 2 * self._n > len(self._table):
            old, self._table = self._table, array("q", bytes(16 * len(self._table)))
            for v in old:
                if v != _EMPTY:
                    self._table[self._slot(v)] = v


def load_references(path: str) -> dict[str, list[str]]:
    """Reference answers kept apart from the questions (`datasets[].references`: FastChat's MT-Bench
    `reference_answer/gpt-4.jsonl`, or `{question_id, reference}` rows; docs/judging.md), by question_id (as a
    string), one per turn. Bad rows are InputErrors naming file, line and key."""
    out: dict[str, list[str]] = {}
    for raw in file_rows(path):
        row, fail = raw.object(), fail_at(raw.file, raw.line)
        if row.get("question_id") is None:
            fail("question_id", "expected an object with a question_id")
        out[str(row["question_id"])] = _turns(row, fail)
    return out


def _turns(row: dict, fail: Fail) -> list[str]:
    if "choices" in row:
        choices = row["choices"]
        turns = (
            choices[0].get("turns") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        )
        key = "choices[0].turns"
    else:
        turns, key = row.get("reference"), "reference"
        turns = [turns] if isinstance(turns, str) else turns
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
        fail(key, "expected a non-empty list of reference answers (strings), one per turn")
    return turns


def join_references(ex: Example, references: dict[str, list[str]]) -> Example:
    """The example with its references joined by native id: turn 1's to `reference`, each later turn's to its
    `later_turns[k].reference`, all to `metadata["references"]`; an empty reference in the file leaves the row's own.
    An example without a row in the file is returned as it is."""
    native = str(ex.metadata.get("question_id", ex.id.removeprefix(f"{ex.dataset}/")))
    turns = references.get(native)
    if turns is None:
        return ex
    metadata = {**ex.metadata, "references": list(turns)}
    later = tuple(
        msgspec.structs.replace(t, reference=turns[k] if k < len(turns) and turns[k] else t.reference)
        for k, t in enumerate(ex.later_turns, start=1)
    )
    own = turns[0] if turns[0] else ex.reference
    return msgspec.structs.replace(ex, reference=own, metadata=metadata, later_turns=later)


# --------------------------------------------------------------------------------------------------
# One row -> one Example


class RowParser:
    """A source's rows as Examples (`parser(raw)` -> the example and the key its id came from). What is the same for
    every row of the source is settled once: the `fields` mapping (checked), the forced schema (`format:`, a name
    tasks.registry.check_config has checked) or detection, the schemas' criterion readers, the dataset's name and
    the `keep` columns."""

    def __init__(self, cfg: DatasetConfig, schemas: Sequence[RowSchema], keep: Sequence[str] = ()) -> None:
        self.schemas, self.keep = schemas, keep
        self.fields = _check_fields(cfg.fields, source_label(cfg), schemas)
        self.forced = None if cfg.format == "auto" else {s.name: s for s in schemas}[cfg.format]
        self.readers = tuple(s.criterion_reader for s in schemas if s.criterion_reader is not None)
        self.dataset = dataset_name(cfg)

    def examples(self, rows: Iterable[RawRow]) -> Iterator[Example]:
        """The examples of the rows that parse (the others are not this parser's concern here)."""
        for raw in rows:
            try:
                yield self(raw)[0]
            except InputError:
                continue

    def __call__(self, raw: RawRow) -> tuple[Example, str | None]:
        row, fail = raw.object(), fail_at(raw.file, raw.line)
        for name, path in self.fields.items():  # a mapping to a key the row lacks is named here, not as a puzzle later
            if resolve(row, path) is MISSING:
                fail(path, f"missing (fields.{name} maps to it; the row has keys: {_keys_shown(row)})")
        r = Row(row, self.fields, self.readers)
        schema = self.forced
        if schema is None:  # detected: the first of the schemas whose `detect` takes the row
            keys = row.keys() if not self.fields else set(row) | set(self.fields)
            schema = next((s for s in self.schemas if s.detect(r, keys)), None)
        if schema is None:
            fail(None, _unknown_schema(row))
        ex, id_key = self._example(r, schema, raw, fail)
        if self.keep:  # the `keep` columns of the row go to `prefilled`, beside what its schema put there
            kept = {c: v for c in self.keep if (v := resolve(row, c)) not in (None, MISSING)}
            ex = msgspec.structs.replace(ex, prefilled={**ex.prefilled, **kept})
        return ex, id_key

    def _example(self, r: Row, schema: RowSchema, raw: RawRow, fail: Fail) -> tuple[Example, str | None]:
        """The row built by `schema` into an Example (and the key its id came from)."""
        b = schema.build(r, fail)
        messages = b["messages"]
        system = r.get("system")
        if system is not None:
            if not isinstance(system, str):
                fail(r.key("system"), f"expected a string, got {type_name(system)}")
            if system.strip() and messages[0]["role"] != "system":
                messages = [{"role": "system", "content": system}, *messages]
        messages = tuple(messages)
        if messages[-1]["role"] != "user":
            fail(b.get("messages_key"), f"the last message must be a user turn, got role '{messages[-1]['role']}'")

        id_key, native = _native_id(r, b, messages, fail)
        rubric = b.get("rubric")
        if rubric is None:
            rubric = rubric_of(r, "rubric", fail) or ()

        metadata: dict[str, Any] = {"format": schema.name, **b.get("metadata", {})}
        extra = r.get("metadata")
        if extra is not None:
            if not isinstance(extra, dict):
                fail(r.key("metadata"), f"expected an object, got {type_name(extra)}")
            metadata.update(extra)

        reference = b.get("reference")
        explicit = r.get("reference")
        if explicit is not None and not schema.reference_per_turn:  # it wins (else the builder picks one per turn)
            reference = text_value(explicit, r.key("reference"), fail)
        ex = Example(
            id=f"{self.dataset}/{native}",
            dataset=self.dataset,
            source=f"{raw.file}:{raw.line}" if raw.line is not None else raw.file,
            messages=messages,
            reference=reference,
            choices=b.get("choices"),
            answer=b.get("answer"),
            rubric=rubric,
            metadata=metadata,
            later_turns=b.get("later_turns", ()),
            prefilled=b.get("prefilled", {}),
        )
        return ex, id_key


def _check_fields(fields: dict[str, str], label: str, schemas: Sequence[RowSchema]) -> dict[str, str]:
    names = tuple(dict.fromkeys([*NORMALIZED_FIELDS, *(k for s in schemas for k in s.native_fields)]))
    for name, key in fields.items():
        if name not in names:
            raise InputError(f"unknown field name (accepted: {', '.join(names)})", file=label, key=f"fields.{name}")
        if "" in key.split("."):  # a string already (config.py): an empty key or path segment
            raise InputError(
                f"expected a row key or a dotted path (a.b), got {key!r}", file=label, key=f"fields.{name}"
            )
    return fields


def _unknown_schema(row: dict[str, Any]) -> str:
    msg = f"unknown schema (keys: {_keys_shown(row)})"
    strings = [k for k in row if isinstance(row[k], str) and row[k].strip()]
    guess = next((k for k in _PROMPT_GUESSES if k in strings), strings[0] if strings else None)
    if guess is None:
        return f"{msg}; set format: and fields: in the dataset config (see data/README.md)"
    return f"{msg}; add to the dataset config: format: generic, fields: {{prompt: {guess}}}"


def _native_id(r: Row, b: Any, messages: tuple[dict[str, Any], ...], fail: Fail) -> tuple[str | None, Any]:
    """(the key the id came from, the id): the row's native id (the builder names its key), else `id`, else a
    content hash of the messages (key None)."""
    if b.get("id") is not None:  # the builder's own id (a judge meta-evaluation: completion and criterion)
        return b.get("id_key"), b["id"]
    id_key = next((k for k in (b.get("id_key"), r.key("id")) if k and resolve(r.row, k) not in (None, MISSING)), None)
    if id_key is None:
        return None, content_id(list(messages))
    return id_key, native_id(resolve(r.row, id_key), id_key, fail)


def _keys_shown(row: dict[str, Any]) -> str:
    keys = list(row)
    shown = ", ".join(keys[:_MAX_KEYS_SHOWN]) + (f", ... ({len(keys)} keys)" if len(keys) > _MAX_KEYS_SHOWN else "")
    return shown or "none"
