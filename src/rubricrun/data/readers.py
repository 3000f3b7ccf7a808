"""Raw rows from where people keep data: JSONL (also gzipped), a JSON array, CSV/TSV, Parquet, a Hugging Face dataset.

`read_rows(cfg)` yields one `RawRow` per data row: the parsed value, or why the row could not be parsed, with where
it came from: the 1-based line (JSONL, CSV), else the 0-based row (`data/x.parquet:row 3`,
`hf:openai/gsm8k[main/test]:row 3`). A problem with the whole source (missing file, not Parquet, a Hub name that
cannot be loaded) raises `InputError` naming `source_label(cfg)` and no line.

Text is valid Unicode or the row is bad: a JSON string may write a lone surrogate (`"\\ud800"`), which Python decodes
as is and no UTF-8 file can hold (writing examples.jsonl would fail after the run began).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from msgspec import Struct

from ..errors import InputError, type_name
from .jsonread import SURROGATE

if TYPE_CHECKING:
    from ..config import DatasetConfig

_GZIP_MAGIC = b"\x1f\x8b"
_PARQUET_MAGIC = b"PAR1"
_MAX_REASON = 300  # characters of a library's error message kept in the one-line error


class RawRow(Struct, frozen=True):  # a Struct: one per dataset row, read twice a run (preflight, --validate's count)
    file: str  # what an error names: the path, or "<path>:row <i>" where a source has no lines
    line: int | None  # 1-based line for JSONL and CSV
    value: Any = None  # the parsed row (normally a dict)
    error: str | None = None  # why the row could not be parsed

    def object(self) -> dict[str, Any]:
        """The row's JSON object, else the InputError naming its file and line: why it could not be parsed, or
        what it is instead."""
        if self.error is not None:
            raise InputError(self.error, file=self.file, line=self.line)
        if not isinstance(self.value, dict):
            raise InputError(f"expected a JSON object, got {type_name(self.value)}", file=self.file, line=self.line)
        return self.value


def source_label(cfg: DatasetConfig) -> str:
    """How errors name a dataset: its path, or `hf:<name>[<config>/<split>]`."""
    if not cfg.hf:
        return cfg.path
    where = "/".join(x for x in (cfg.config, cfg.split) if x)
    return f"hf:{cfg.hf}[{where}]" if where else f"hf:{cfg.hf}"


def read_rows(cfg: DatasetConfig) -> Iterator[RawRow]:
    """The rows of a dataset entry: its Hub dataset, or its file."""
    return _hf_rows(cfg) if cfg.hf else file_rows(cfg.path)


def file_rows(path: str) -> Iterator[RawRow]:
    """The rows of a local file, its format from its first bytes and its name (also a references or answers file)."""
    kind, gz = _kind(path)
    if kind == "parquet":
        yield from _parquet_rows(path)
        return
    f = _open(path)
    with f:
        stream: IO[bytes] = gzip.GzipFile(fileobj=f) if gz else f
        if kind == "json":  # a JSON array, or JSON lines under a .json name (common): the first non-blank byte decides
            try:
                head = stream.read(4096).lstrip(b"\xef\xbb\xbf").lstrip()[:1]  # after a UTF-8 BOM
                stream.seek(0)
            except (OSError, EOFError) as e:
                raise InputError(f"cannot read dataset file: {_reason(e)}", file=path) from None
            if head == b"[":
                yield from _json_array_rows(stream, path)
                return
        if kind == "csv" or kind == "tsv":
            yield from _csv_rows(stream, path, "\t" if kind == "tsv" else ",")
            return
        yield from _jsonl_rows(stream, path)


def _kind(path: str) -> tuple[str, bool]:
    """(format, gzipped) from the file's first bytes (gzip, Parquet) and then its name."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError:
        magic = b""  # _open reports the problem
    name = Path(path).name.lower()
    gz = magic.startswith(_GZIP_MAGIC) or name.endswith(".gz")
    if name.endswith(".gz"):
        name = name[: -len(".gz")]
    if magic == _PARQUET_MAGIC or name.endswith(".parquet"):
        return "parquet", False
    for ext in ("json", "csv", "tsv"):
        if name.endswith("." + ext):
            return ext, gz
    return "jsonl", gz  # .jsonl, .ndjson and anything else: one JSON object per line


def _open(path: str) -> IO[bytes]:
    try:
        return open(path, "rb")  # binary: a bad byte is one bad row, with its line number
    except FileNotFoundError:
        raise InputError("dataset file not found", file=path) from None
    except IsADirectoryError:
        raise InputError("cannot read dataset file: it is a directory", file=path) from None
    except OSError as e:
        raise InputError(f"cannot read dataset file: {e.strerror or e}", file=path) from None


def _jsonl_rows(stream: IO[bytes], path: str) -> Iterator[RawRow]:
    lineno = 0
    try:
        for lineno, raw in enumerate(stream, 1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
                value = json.loads(text)
            except _NOT_JSON as e:
                yield RawRow(path, lineno, error=_not_json(e))
                continue
            bad = lone_surrogate(value) if "\\u" in text else None  # only a \u escape can write one
            yield RawRow(path, lineno, value, error=bad)
    except (OSError, EOFError) as e:  # a read error, or a corrupt/truncated gzip stream
        raise InputError(f"cannot read dataset file: {_reason(e)}", file=path, line=lineno + 1) from None


_NOT_JSON = (UnicodeDecodeError, json.JSONDecodeError, RecursionError)


def _not_json(e: Exception) -> str:
    """Why bytes are not JSON text (one of _NOT_JSON)."""
    if isinstance(e, UnicodeDecodeError):
        return f"not valid UTF-8 ({e.reason} at byte {e.start})"
    if isinstance(e, json.JSONDecodeError):
        return f"malformed JSON: {e.msg} (column {e.colno})"
    return "malformed JSON: nested too deeply"


def lone_surrogate(value: Any, key: str = "") -> str | None:
    """Why a parsed value is not valid Unicode (a string or key holding a lone surrogate, named by its key path), or
    None when it is."""
    if isinstance(value, str):
        if SURROGATE.search(value):
            return f"not valid Unicode: a lone surrogate (a \\ud800-\\udfff escape) in {key or 'the row'}"
    elif isinstance(value, dict):
        for k, v in value.items():
            sub = f"{key}.{k}" if key else str(k)
            bad = lone_surrogate(k, f"a key of {key or 'the row'}") or lone_surrogate(v, sub)
            if bad:
                return bad
    elif isinstance(value, list):
        for i, v in enumerate(value):
            bad = lone_surrogate(v, f"{key}[{i}]")
            if bad:
                return bad
    return None


def _json_array_rows(stream: IO[bytes], path: str) -> Iterator[RawRow]:
    """A whole-file JSON array: a syntax error is about the file (it names the line), a bad element is one row."""
    try:
        text = stream.read().decode("utf-8-sig")
        data = json.loads(text)
    except _NOT_JSON as e:
        raise InputError(_not_json(e), file=path, line=getattr(e, "lineno", None)) from None
    except (OSError, EOFError) as e:
        raise InputError(f"cannot read dataset file: {_reason(e)}", file=path) from None
    check = "\\u" in text
    for i, value in enumerate(data):
        yield RawRow(f"{path}:row {i}", None, value, error=lone_surrogate(value) if check else None)


def _csv_rows(stream: IO[bytes], path: str, delimiter: str) -> Iterator[RawRow]:
    """CSV with a header line. Empty cells are absent keys; a cell holding a JSON list or object (a rubric, a message
    list, choices) is read as that JSON; every other cell is a string."""
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))  # the 128 KiB default refuses long reference texts
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")
    reader = csv.DictReader(text, delimiter=delimiter)
    start = 2  # the line the next row starts on (line 1 is the header)
    try:
        for rec in reader:
            line, start = start, reader.line_num + 1
            if None in rec:
                yield RawRow(
                    path,
                    line,
                    error=f"{len(rec[None]) + len(reader.fieldnames or [])} fields but the "
                    f"header has {len(reader.fieldnames or [])}",
                )
                continue
            row = {k: _csv_cell(v) for k, v in rec.items() if v not in (None, "")}
            bad = lone_surrogate(row) if any("\\u" in v for v in rec.values() if v) else None  # a JSON cell's
            yield RawRow(path, line, row, error=bad)
    except UnicodeDecodeError as e:
        raise InputError(f"not valid UTF-8 ({e.reason})", file=path, line=reader.line_num + 1) from None
    except csv.Error as e:
        raise InputError(f"malformed CSV: {e}", file=path, line=reader.line_num) from None
    except (OSError, EOFError) as e:
        raise InputError(f"cannot read dataset file: {_reason(e)}", file=path, line=reader.line_num + 1) from None
    finally:
        text.detach()


def _csv_cell(value: str) -> Any:
    s = value.strip()
    if s[:1] in ("[", "{"):
        try:
            return json.loads(s)
        except (json.JSONDecodeError, RecursionError):
            pass
    return value


def _parquet_rows(path: str) -> Iterator[RawRow]:
    import pyarrow.parquet as pq  # lazy: a heavy import only Parquet needs

    _open(path).close()  # missing file, directory: the same errors as the other formats
    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises ArrowInvalid/OSError for a file that is not Parquet
        raise InputError(f"cannot read Parquet file: {_reason(e)}", file=path) from None
    i = 0
    try:
        for batch in pf.iter_batches(batch_size=1024):
            for rec in _records(batch):
                bad = "not valid UTF-8 text" if rec is None else None
                yield RawRow(f"{path}:row {i}", None, _drop_nulls(rec or {}), error=bad)
                i += 1
    except OSError as e:
        raise InputError(f"cannot read Parquet file: {_reason(e)} (after row {i})", file=path) from None


def _records(batch: Any) -> list[dict[str, Any] | None]:
    """A record batch's rows; None for a row whose text is not valid UTF-8 (Arrow does not check what it reads)."""
    try:
        return batch.to_pylist()
    except UnicodeDecodeError:
        out: list[dict[str, Any] | None] = []
        for j in range(batch.num_rows):
            try:
                out.append(batch.slice(j, 1).to_pylist()[0])
            except UnicodeDecodeError:
                out.append(None)
        return out


def _hf_rows(cfg: DatasetConfig) -> Iterator[RawRow]:
    label = source_label(cfg)
    try:
        import datasets  # lazy: `datasets` pulls pyarrow and pandas; only Hub datasets need it
    except ImportError:
        raise InputError(
            "the `datasets` package is not installed (pip install -r requirements.txt)", file=label, key="hf"
        ) from None
    datasets.disable_progress_bars()
    hf_log = logging.getLogger("datasets")
    level = hf_log.level
    hf_log.setLevel(logging.CRITICAL)  # it logs its failures too; ours is the one line
    try:
        ds = datasets.load_dataset(cfg.hf, cfg.config, split=cfg.split)
    except Exception as e:  # noqa: BLE001 - `datasets` raises many types (not found, offline, bad config/split)
        raise InputError(f"cannot load Hugging Face dataset: {_reason(e)}", file=label, key="hf") from None
    finally:
        hf_log.setLevel(level)
    if isinstance(ds, datasets.DatasetDict):  # no split given
        if len(ds) != 1:
            raise InputError(f"the dataset has splits {', '.join(ds)}: choose one with split:", file=label, key="split")
        ds = next(iter(ds.values()))
    i = 0
    try:
        for i, rec in enumerate(ds):
            yield RawRow(f"{label}:row {i}", None, _drop_nulls(rec))
    except UnicodeDecodeError:  # Arrow text that is not UTF-8: the rows after it cannot be read either
        raise InputError("not valid UTF-8 text", file=f"{label}:row {i + 1}") from None


def _drop_nulls(rec: dict[str, Any]) -> dict[str, Any]:
    """Columnar sources give every column to every row, null where a row has no value: null means absent."""
    return {k: v for k, v in rec.items() if v is not None}


def _reason(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    text = lines[0] if lines else type(e).__name__
    return text if len(text) <= _MAX_REASON else text[:_MAX_REASON] + "..."
