"""Dataset loading: rows of several schemas, from several kinds of files or the Hub -> one frozen `Example` type.

`load_dataset(cfg)` reads rows one by one (`readers.read_rows`: JSONL, JSON array, CSV/TSV, Parquet, gzip, a Hugging
Face dataset), detects each row's schema (or uses `cfg.format`), normalizes it with the builders in `schemas.py` and
returns the examples plus one line per skipped bad row. Every data error is an `InputError` that names the file, the
1-based line (or the 0-based row where a source has no lines) and the key: `data/x.jsonl:7: key 'rubric[2].weight':
expected a number, got 'heavy'`. Schemas, ids and the `fields` mapping are described in data/README.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from ..config import DatasetConfig, dataset_name
from ..errors import InputError
from ..types import Example
from .idset import IdHashes
from .readers import RawRow, read_rows, source_label
from .references import join_references, load_references
from .schemas import MISSING, CriterionReader, Row, RowSchema, resolve, rubric_of, text_value, type_name

# The normalized names `DatasetConfig.fields` may map (normalized name -> key in the row); a schema's own keys
# (RowSchema.native_fields) are mappable too, when a file renames them.
NORMALIZED_FIELDS = tuple("id prompt messages system question choices answer reference rubric metadata".split())

_PROMPT_GUESSES = ("instruction", "input", "query", "question", "problem", "text", "content", "user", "request")
_MAX_KEYS_SHOWN = 20


@dataclass(frozen=True)
class LoadResult:
    examples: list[Example]
    skipped: list[str]  # one "file:line: key 'x': reason" string per skipped row


# --------------------------------------------------------------------------------------------------
# Public API


def load_dataset(
    cfg: DatasetConfig,
    *,
    schemas: Sequence[RowSchema],
    on_bad_row: str = "fail",
    max_examples: int | None = None,
    keep: Sequence[str] = (),
) -> LoadResult:
    """Read `cfg.path` (or the Hub dataset `cfg.hf`) into examples. Bad rows raise, or are skipped and listed with
    on_bad_row="skip"; a source whose every row is bad raises even then. `schemas`: the row schemas, in detection
    order (tasks.registry.TASKS).

    File-level problems (missing or unreadable file, bad `fields`) always raise. `cfg.limit` and `max_examples` both
    cap the number of examples; reading stops as soon as the cap is reached. `keep` names the columns (dotted paths
    allowed) that `response_column:` candidates replay: a row's values go to `Example.prefilled`.
    """
    skipped: list[str] = []
    rows = iter_dataset(
        cfg, schemas=schemas, on_bad_row=on_bad_row, max_examples=max_examples, keep=keep, skipped=skipped
    )
    examples = list(rows)
    return LoadResult(examples, skipped)


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
    """load_dataset's examples one at a time, in file order, holding none of them: the skipped rows' messages go to
    `skipped`. Duplicate ids are found from a set of id hashes (`seen`, data/idset.py, which a caller may share between sources);
    only a hit reads the file again, for the first row with that id. A hit with no such row in this source is
    appended to `elsewhere` for the caller to look up (or passes: a hash collision). `check_ids=False` skips the
    check (a source already checked)."""
    if on_bad_row not in ("fail", "skip"):
        raise InputError(f"expected 'fail' or 'skip', got {on_bad_row!r}", key="run.on_bad_row")
    label = source_label(cfg)
    fields = _check_fields(cfg.fields, label, schemas)
    caps = [c for c in (cfg.limit, max_examples) if c is not None]
    for c in caps:
        if c < 0:
            raise InputError(f"expected a number >= 0, got {c}", file=label, key="limit")
    cap = min(caps) if caps else None
    forced = None if cfg.format == "auto" else _schema(schemas, cfg.format)
    readers = _readers(schemas)
    dataset = dataset_name(cfg)
    skipped = [] if skipped is None else skipped
    references = load_references(cfg.references) if cfg.references else None
    seen = IdHashes() if seen is None else seen  # hash(example id) of the rows read so far
    n = bad = 0
    if cap == 0:
        return
    for raw in read_rows(cfg):
        try:
            ex, id_key = _parse_row(raw, forced, schemas, readers, dataset, fields)
            ex = _with_kept(ex, raw.value, keep) if keep else ex
            if check_ids:
                h = hash(ex.id)
                if h in seen:
                    first = _first_seen(cfg, forced, schemas, dataset, fields, ex.id, raw)
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
        yield join_references([ex], dataset, references)[0] if references is not None else ex
        n += 1
        if cap is not None and n >= cap:
            break
    if bad and not n:  # `skip` is for a few bad rows; a file of bad rows is the wrong file or mapping
        raise InputError(f"every row of {label} is bad ({bad} skipped); the first: {skipped[-bad]}")
    if not n:  # nothing to run on: a run would pay for nothing and say nothing (as --max-examples 0 is refused)
        raise InputError("the dataset has no rows", file=label)


def _with_kept(ex: Example, row: Any, keep: Sequence[str]) -> Example:
    """The example with the `keep` columns of its row in `prefilled` (beside what its schema put there)."""
    kept = {c: v for c in keep if (v := resolve(row, c)) not in (None, MISSING)}
    return dataclasses.replace(ex, prefilled={**ex.prefilled, **kept})


def _schema(schemas: Sequence[RowSchema], name: str) -> RowSchema:
    for s in schemas:
        if s.name == name:
            return s
    names = ", ".join(s.name for s in schemas)
    raise InputError(f"unknown format {name!r} (expected auto or one of {names})", key="format")


def _first_seen(
    cfg: DatasetConfig,
    forced: RowSchema | None,
    schemas: Sequence[RowSchema],
    dataset: str,
    fields: dict[str, str],
    example_id: str,
    at: RawRow,
) -> str | None:
    """Where the first row with `example_id` is, before row `at`: "line 4" or "row 3" (None: none is)."""
    readers = _readers(schemas)
    for raw in read_rows(cfg):
        if (raw.line, raw.file) == (at.line, at.file):
            return None
        try:
            ex, _ = _parse_row(raw, forced, schemas, readers, dataset, fields)
        except InputError:
            continue
        if ex.id == example_id:
            return f"line {raw.line}" if raw.line is not None else raw.file.rsplit(":", 1)[-1]
    return None


def field_names(schemas: Sequence[RowSchema]) -> tuple[str, ...]:
    """The names `DatasetConfig.fields` may map: the normalized names, then the schemas' own keys."""
    return tuple(dict.fromkeys([*NORMALIZED_FIELDS, *(k for s in schemas for k in s.native_fields)]))


def _check_fields(fields: dict[str, str] | None, label: str, schemas: Sequence[RowSchema]) -> dict[str, str]:
    fields = dict(fields or {})
    names = field_names(schemas)
    for name, key in fields.items():
        if name not in names:
            raise InputError(f"unknown field name (accepted: {', '.join(names)})", file=label, key=f"fields.{name}")
        if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
            raise InputError(
                f"expected a row key or a dotted path (a.b), got {key!r}", file=label, key=f"fields.{name}"
            )
    return fields


def detect_format(row: dict, schemas: Sequence[RowSchema]) -> str | None:
    """The schema a row looks like, from its keys: the name of the first of `schemas` that takes it, or None."""
    if not isinstance(row, dict):
        return None
    schema = _detect(Row(row, {}), row.keys(), schemas)
    return None if schema is None else schema.name


def normalize_row(
    row: dict, fmt: str, *, dataset: str, source: str, fields: dict[str, str], schemas: Sequence[RowSchema]
) -> Example:
    """One parsed row of schema `fmt` as an Example. `source` is "path:line". Raises InputError on a bad row."""
    file, line = _split_source(source)
    schema = next((s for s in schemas if s.name == fmt), None)
    if schema is None:
        names = ", ".join(s.name for s in schemas)
        raise InputError(f"unknown format {fmt!r} (expected one of {names})", file=file, line=line)
    return _normalize(row, schema, _readers(schemas), dataset, source, file, line, fields or {})[0]


# --------------------------------------------------------------------------------------------------
# Lines, detection, ids


def _parse_row(
    raw: RawRow,
    forced: RowSchema | None,
    schemas: Sequence[RowSchema],
    readers: Sequence[CriterionReader],
    dataset: str,
    fields: dict[str, str],
) -> tuple[Example, str | None]:
    """One row as an Example (and the key its id came from). `readers`: _readers(schemas), which the caller
    computes once per source rather than once a row."""
    file, line = raw.file, raw.line
    if raw.error is not None:
        raise InputError(raw.error, file=file, line=line)
    row = raw.value
    if not isinstance(row, dict):
        raise InputError(f"expected a JSON object, got {type_name(row)}", file=file, line=line)
    for name, path in fields.items():  # a mapping to a key the row lacks is named here, not as a puzzle later
        if not _has_path(row, path):
            raise InputError(
                f"missing (fields.{name} maps to it; the row has keys: {_keys_shown(row)})",
                file=file,
                line=line,
                key=path,
            )
    schema = forced
    if schema is None:
        keys = row.keys() if not fields else set(row) | set(fields)
        schema = _detect(Row(row, fields), keys, schemas)
        if schema is None:
            raise InputError(_unknown_schema(row), file=file, line=line)
    return _normalize(row, schema, readers, dataset, _where(raw), file, line, fields)


def _readers(schemas: Sequence[RowSchema]) -> tuple[CriterionReader, ...]:
    """The schemas' own criterion readers: a rubric of any row is read with all of them."""
    return tuple(s.criterion_reader for s in schemas if s.criterion_reader is not None)


def _where(raw: RawRow) -> str:
    return f"{raw.file}:{raw.line}" if raw.line is not None else raw.file


def _has_path(row: dict[str, Any], path: str) -> bool:
    return resolve(row, path) is not MISSING


def _detect(row: Row, keys: Any, schemas: Sequence[RowSchema]) -> RowSchema | None:
    """`row` answers .get(name) for normalized names; `keys` holds the names present (after the fields mapping)."""
    for schema in schemas:
        if schema.detect(row, keys):
            return schema
    return None


def _unknown_schema(row: dict[str, Any]) -> str:
    keys = list(row)
    msg = f"unknown schema (keys: {_keys_shown(row)})"
    strings = [k for k in keys if isinstance(row[k], str) and row[k].strip()]
    guess = next((k for k in _PROMPT_GUESSES if k in strings), strings[0] if strings else None)
    if guess is None:
        return f"{msg}; set format: and fields: in the dataset config (see data/README.md)"
    return f"{msg}; add to the dataset config: format: generic, fields: {{prompt: {guess}}}"


def _content_id(messages: tuple[dict[str, Any], ...]) -> str:
    blob = json.dumps(list(messages), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def _native_id(
    row: dict[str, Any], r: Row, b: dict[str, Any], messages: tuple[dict[str, Any], ...], fail: Any
) -> tuple[str | None, Any]:
    """(the key the id came from, the id): the row's native id (the builder names its key), else `id`, else a
    content hash of the messages (key None)."""
    if b.get("id") is not None:  # the builder's own id (a judge meta-evaluation: completion and criterion)
        return b.get("id_key"), b["id"]
    id_key = next((k for k in (b.get("id_key"), r.key("id")) if k and resolve(row, k) not in (None, MISSING)), None)
    if id_key is None:
        return None, _content_id(messages)
    native = resolve(row, id_key)
    if isinstance(native, bool) or not isinstance(native, (str, int)) or not str(native).strip():
        fail(id_key, f"expected a non-empty string or integer id, got {native!r}")
    return id_key, native


def _duplicate(ex: Example, id_key: str | None, raw: RawRow, first: str) -> NoReturn:
    native = ex.id.split("/", 1)[1]
    if id_key is None:
        raise InputError(
            f"duplicate row: same messages as {first} (content id '{native}'); give the rows distinct ids",
            file=raw.file,
            line=raw.line,
        )
    raise InputError(f"duplicate id '{native}' (first on {first})", file=raw.file, line=raw.line, key=id_key)


def _keys_shown(row: dict[str, Any]) -> str:
    keys = list(row)
    shown = ", ".join(keys[:_MAX_KEYS_SHOWN]) + (f", ... ({len(keys)} keys)" if len(keys) > _MAX_KEYS_SHOWN else "")
    return shown or "none"


def _split_source(source: str) -> tuple[str, int | None]:
    file, sep, line = source.rpartition(":")
    if sep and line.isdigit():
        return file, int(line)
    return source, None


# --------------------------------------------------------------------------------------------------
# Normalization


def _normalize(
    row: dict[str, Any],
    schema: RowSchema,
    readers: Sequence[CriterionReader],
    dataset: str,
    source: str,
    file: str,
    line: int | None,
    fields: dict[str, str],
) -> tuple[Example, str | None]:
    def fail(key: str | None, msg: str) -> NoReturn:
        raise InputError(msg, file=file, line=line, key=key)

    if not isinstance(row, dict):
        fail(None, f"expected a JSON object, got {type_name(row)}")
    r = Row(row, fields, readers)
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

    id_key, native = _native_id(row, r, b, messages, fail)
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
    if r.get("reference") is not None and not schema.reference_per_turn:  # an explicit reference wins (else the
        # builder picks one per turn)
        reference = text_value(r.get("reference"), r.key("reference"), fail)
    ex = Example(
        id=f"{dataset}/{native}",
        dataset=dataset,
        source=source,
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
