"""Per-file column statistics read from ORC and Parquet footers only.

The values reported here are *bounds that can be trusted*: every lossy statistic is
widened or dropped, never passed on as exact. ``None`` always means "unknown".

* ORC (read with pyorc; pyarrow does not expose ORC statistics): timestamps are stored in
  milliseconds, so bounds are widened by 1 ms (and corrected for pyorc's conversion of
  pre-1970 values); string bounds that a writer truncated or dropped are unknown; CHAR
  bounds are unknown (padding); NaN-polluted or inverted bounds are unknown; a double
  column's NaN count is 0 only when its sum is present and not NaN (a NaN poisons the sum),
  otherwise unknown. For Hive ACID files the columns are the fields of the ``row`` struct.
* Parquet (pyarrow metadata): row-group statistics merged per file; bounds flagged
  inexact, absent on any non-empty row group, or from INT96 timestamps are unknown;
  nanosecond timestamps are rounded outwards to microseconds.

A column that a file does not have (added later by schema evolution) has no entry in
:attr:`FileStats.columns`; callers must treat it as unknown, never as all-null.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..acid.data_file_open import ACID_COLUMNS
from ..acid.footers import FileTail, FooterError, TailFile, read_tail

__all__ = [
    "ACID_COLUMNS",
    "ColumnStats",
    "FileStats",
    "StatsError",
    "detect_format",
    "orc_column_stats",
    "read_file_stats",
    "read_orc_stats",
    "read_parquet_stats",
]

_EPOCH = dt.datetime(1970, 1, 1)
_ONE_MS = dt.timedelta(milliseconds=1)


_POSITIONAL = re.compile(r"^_col\d+$")


class StatsError(ValueError):
    """A file's statistics cannot be read (the message names the file)."""


@dataclass(frozen=True)
class ColumnStats:
    """Statistics of one column in one file; ``None`` means unknown.

    ``min``/``max`` are inclusive bounds of the non-null, non-NaN values (ints, floats,
    ``decimal.Decimal``, ``str``, ``datetime.date``, naive ``datetime.datetime`` in
    microseconds (UTC for zoned types), ``bool``). ``value_count`` counts rows including
    nulls; ``nan_count`` is only meaningful for floating point columns.
    """

    column: str
    min: Any = None
    max: Any = None
    null_count: int | None = None
    value_count: int | None = None
    nan_count: int | None = None
    type: pa.DataType | None = None


@dataclass(frozen=True)
class FileStats:
    """Statistics of one data file: its row count and one :class:`ColumnStats` per column."""

    path: str
    format: str
    row_count: int | None
    columns: dict[str, ColumnStats] = field(default_factory=dict, hash=False)


# --------------------------------------------------------------------------- helpers


def _family(t: pa.DataType | None) -> str | None:
    from .column_types import type_family

    return None if t is None else type_family(t)


def _naive_utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def _valid_bound(value: Any, family: str | None) -> bool:
    if value is None or family is None:
        return False
    if family == "bool":
        return isinstance(value, bool)
    if family == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if family == "float":
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and not (math.isnan(value))
        )
    if family == "decimal":
        return isinstance(value, decimal.Decimal) and value.is_finite()
    if family == "string":
        return isinstance(value, str)
    if family == "date":
        return isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    if family == "timestamp":
        return isinstance(value, dt.datetime) and value.tzinfo is None
    return False


def _checked_bounds(lo: Any, hi: Any, family: str | None) -> tuple[Any, Any]:
    """Both bounds, or (None, None) when either is unusable or they are inverted."""
    if not (_valid_bound(lo, family) and _valid_bound(hi, family)):
        return None, None
    if family == "float":
        lo, hi = float(lo), float(hi)
    try:
        if lo > hi:
            return None, None
    except TypeError:
        return None, None
    return lo, hi


def detect_format(filesystem: Any, path: str) -> str:
    """``"parquet"`` when the file ends with the Parquet magic, else ``"orc"``."""
    try:
        size = filesystem.size(path)
        with filesystem.open(path, "rb") as f:
            if size >= 4:
                f.seek(size - 4)
                if f.read(4) == b"PAR1":
                    return "parquet"
    except FileNotFoundError as exc:
        raise StatsError(f"cannot read statistics of {path}: file not found") from exc
    return "orc"


def _read_tail(filesystem: Any, path: str, size: int | None, kind: str = "") -> FileTail:
    """The file's footer bytes, in at most two ranged reads (:func:`.acid.footers.read_tail`)."""
    try:
        return read_tail(filesystem, path, size)
    except FileNotFoundError as exc:
        raise StatsError(f"cannot read {kind}statistics of {path}: file not found") from exc
    except (FooterError, OSError, ValueError) as exc:
        raise StatsError(f"cannot read {kind}statistics of {path}: {exc}") from exc


def read_file_stats(
    filesystem: Any,
    path: str,
    *,
    column_names: Sequence[str] | None = None,
    file_format: str | None = None,
    size: int | None = None,
) -> FileStats:
    """Read the footer statistics of one ORC or Parquet file (format sniffed if not given).

    ``column_names`` renames the table columns by position, for old ORC files whose
    columns are ``_col0, _col1, ...``. ``size``: the file's size as listed, which saves a
    request. Only the footer is fetched: at most two ranged reads, and the footer's bytes plus
    64 KiB (:mod:`.footers`).
    """
    tail = _read_tail(filesystem, path, size)
    fmt = (file_format or ("parquet" if tail.is_parquet else "orc")).lower()
    if fmt == "orc":
        return read_orc_stats(filesystem, path, column_names=column_names, tail=tail)
    if fmt == "parquet":
        return read_parquet_stats(filesystem, path, column_names=column_names, tail=tail)
    raise StatsError(f"unknown file format {file_format!r} for {path}")


# --------------------------------------------------------------------------- ORC


def _orc_arrow_type(td: Any) -> pa.DataType | None:
    from pyorc.enums import TypeKind

    kind = td.kind
    simple = {
        TypeKind.BOOLEAN: pa.bool_(),
        TypeKind.BYTE: pa.int8(),
        TypeKind.SHORT: pa.int16(),
        TypeKind.INT: pa.int32(),
        TypeKind.LONG: pa.int64(),
        TypeKind.FLOAT: pa.float32(),
        TypeKind.DOUBLE: pa.float64(),
        TypeKind.STRING: pa.string(),
        TypeKind.VARCHAR: pa.string(),
        TypeKind.CHAR: pa.string(),
        TypeKind.BINARY: pa.binary(),
        TypeKind.DATE: pa.date32(),
        TypeKind.TIMESTAMP: pa.timestamp("ns"),
        TypeKind.TIMESTAMP_INSTANT: pa.timestamp("ns", tz="UTC"),
    }
    if kind in simple:
        return simple[kind]
    if kind == TypeKind.DECIMAL:
        return pa.decimal128(td.precision, td.scale) if td.precision <= 38 else None
    if kind == TypeKind.STRUCT:
        fields = [(n, _orc_arrow_type(t)) for n, t in td.fields.items()]
        if any(t is None for _, t in fields):
            return None
        return pa.struct(fields)
    if kind == TypeKind.LIST:
        inner = _orc_arrow_type(td.type)
        return None if inner is None else pa.list_(inner)
    if kind == TypeKind.MAP:
        k, v = _orc_arrow_type(td.key), _orc_arrow_type(td.value)
        return None if k is None or v is None else pa.map_(k, v)
    return None


def _orc_ts_bounds(stats: dict) -> tuple[Any, Any]:
    lows = [stats.get("minimum"), stats.get("lower_bound")]
    highs = [stats.get("maximum"), stats.get("upper_bound")]
    lows = [_naive_utc(v) for v in lows if isinstance(v, dt.datetime)]
    highs = [_naive_utc(v) for v in highs if isinstance(v, dt.datetime)]
    if not lows or not highs:
        return None, None
    lo, hi = min(lows), max(highs)
    try:
        # pyorc turns -1500 ms into -1 s + 500 ms (it adds |ms % 1000|): a value before
        # 1970-01-01 00:00:01 may really be up to twice its sub-second part lower.
        if lo < _EPOCH + dt.timedelta(seconds=1):
            lo -= 2 * dt.timedelta(microseconds=lo.microsecond)
        lo -= _ONE_MS
        hi += _ONE_MS
    except OverflowError:
        return None, None
    return lo, hi


def orc_column_stats(
    name: str,
    td: Any,
    stats: dict,
    row_count: int | None,
) -> ColumnStats:
    """Turn one pyorc statistics dict (``reader[col].statistics``) into trusted bounds."""
    from pyorc.enums import TypeKind

    kind = td.kind
    arrow_type = _orc_arrow_type(td)
    family = _family(arrow_type)
    number = stats.get("number_of_values")
    null_count = None
    if isinstance(number, int) and row_count is not None and 0 <= number <= row_count:
        null_count = row_count - number
    lo = hi = None
    nan_count = None
    if kind == TypeKind.BOOLEAN:
        falses, trues = stats.get("false_count"), stats.get("true_count")
        if isinstance(falses, int) and isinstance(trues, int) and falses + trues > 0:
            lo = falses == 0
            hi = trues > 0
    elif kind in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMP_INSTANT):
        lo, hi = _orc_ts_bounds(stats)
    elif kind == TypeKind.CHAR or family is None:
        lo = hi = None
    else:
        lo, hi = stats.get("minimum"), stats.get("maximum")
    if family == "float":
        total = stats.get("sum")
        if isinstance(total, float) and not math.isnan(total):
            nan_count = 0
    if family == "decimal" and arrow_type is not None:
        lo, hi = _decimal_or_none(lo), _decimal_or_none(hi)
    lo, hi = _checked_bounds(lo, hi, family)
    return ColumnStats(
        column=name,
        min=lo,
        max=hi,
        null_count=null_count,
        value_count=row_count,
        nan_count=nan_count,
        type=arrow_type,
    )


def _decimal_or_none(value: Any) -> decimal.Decimal | None:
    if isinstance(value, decimal.Decimal):
        return value
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        try:
            return decimal.Decimal(value)
        except decimal.InvalidOperation:
            return None
    return None


def _is_acid_schema(schema: Any) -> bool:
    from pyorc.enums import TypeKind

    names = [n.lower() for n in schema.fields]
    if names != [c.lower() for c in ACID_COLUMNS]:
        return False
    return schema.fields[list(schema.fields)[5]].kind == TypeKind.STRUCT


def read_orc_stats(
    filesystem: Any,
    path: str,
    *,
    column_names: Sequence[str] | None = None,
    tail: FileTail | None = None,
) -> FileStats:
    """Footer statistics of one ORC file (plain or Hive ACID), read with pyorc from its
    footer's bytes only (``tail``, else fetched with :func:`.acid.footers.read_tail`)."""
    import pyorc
    from pyorc.enums import TypeKind

    if tail is None:
        tail = _read_tail(filesystem, path, None, "ORC ")
    try:
        with TailFile(tail, filesystem) as f:
            reader = pyorc.Reader(f)
            schema = reader.schema
            row_count = len(reader)
            if _is_acid_schema(schema):
                table_type = schema.fields[list(schema.fields)[5]]
            else:
                table_type = schema
            top = list(table_type.fields.items())
            if column_names is not None:
                # By position, as Hive reads ORC: the file's i-th column is the table's i-th;
                # table columns the file lacks (added later) have no statistics (unknown), and
                # file columns past the table's are not the table's.
                top = [(str(new), td) for new, (_, td) in zip(column_names, top, strict=False)]
            columns: dict[str, ColumnStats] = {}

            def walk(prefix: str, items: list[tuple[str, Any]]) -> None:
                for name, td in items:
                    full = prefix + name
                    try:
                        raw = reader[td.column_id].statistics
                    except Exception:  # a column without statistics: unknown
                        raw = {}
                    columns[full] = orc_column_stats(full, td, raw, row_count)
                    if td.kind == TypeKind.STRUCT:
                        walk(full + ".", list(td.fields.items()))

            walk("", top)
    except StatsError:
        raise
    except FileNotFoundError as exc:
        raise StatsError(f"cannot read ORC statistics of {path}: file not found") from exc
    except Exception as exc:
        raise StatsError(f"cannot read ORC statistics of {path}: {exc}") from exc
    return FileStats(path=path, format="orc", row_count=row_count, columns=columns)


# --------------------------------------------------------------------------- Parquet


def _arrow_leaf(schema: pa.Schema, parts: list[str]) -> pa.DataType | None:
    fields: Any = schema
    t: pa.DataType | None = None
    for i, part in enumerate(parts):
        idx = fields.get_field_index(part)
        if idx < 0:
            return None
        t = fields.field(idx).type
        if i < len(parts) - 1:
            if not pa.types.is_struct(t):
                return None
            fields = t
    return t


def _ts_from_micros(micros: int) -> dt.datetime | None:
    try:
        return _EPOCH + dt.timedelta(microseconds=micros)
    except OverflowError:
        return None


def _parquet_bound(stats: Any, which: str, family: str, col_schema: Any) -> Any:
    if family == "timestamp":
        if col_schema.physical_type != "INT64":
            return None  # INT96 statistics are not reliable
        try:
            logical = json.loads(col_schema.logical_type.to_json())
        except Exception:
            logical = {}
        unit = str(logical.get("timeUnit", "")).lower()
        raw = getattr(stats, which + "_raw")
        if not isinstance(raw, int):
            return None
        if unit.startswith("milli"):
            micros = raw * 1000
        elif unit.startswith("micro"):
            micros = raw
        elif unit.startswith("nano"):
            micros = raw // 1000 if which == "min" else -(-raw // 1000)
        else:
            return None
        return _ts_from_micros(micros)
    try:
        value = getattr(stats, which)
    except (ValueError, TypeError, OverflowError, pa.ArrowException):
        return None
    if family == "decimal":
        return _decimal_or_none(value) if isinstance(value, decimal.Decimal) else None
    if family == "string" and isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if family == "date" and isinstance(value, dt.datetime):
        return None
    return value


def read_parquet_stats(
    filesystem: Any,
    path: str,
    *,
    column_names: Sequence[str] | None = None,
    tail: FileTail | None = None,
) -> FileStats:
    """Footer statistics of one Parquet file, row groups merged per column, read from its
    footer's bytes only (``tail``, else fetched with :func:`.acid.footers.read_tail`)."""
    import pyarrow.parquet as pq

    if tail is None:
        tail = _read_tail(filesystem, path, None, "Parquet ")
    try:
        with TailFile(tail, filesystem) as f:
            pf = pq.ParquetFile(f)
            md = pf.metadata
            arrow_schema = pf.schema_arrow
    except FileNotFoundError as exc:
        raise StatsError(f"cannot read Parquet statistics of {path}: file not found") from exc
    except Exception as exc:
        raise StatsError(f"cannot read Parquet statistics of {path}: {exc}") from exc

    rename: dict[str, str] = {}
    if column_names is not None and not all(_POSITIONAL.match(n) for n in arrow_schema.names):
        column_names = None  # Parquet is read by name (Hive's rule), but for _col0, _col1, ...
    if column_names is not None:
        if len(column_names) != len(arrow_schema):
            raise StatsError(
                f"{path}: {len(column_names)} column names given but the file has "
                f"{len(arrow_schema)} columns ({', '.join(arrow_schema.names)})"
            )
        rename = {old: str(new) for old, new in zip(arrow_schema.names, column_names, strict=True)}

    row_count = md.num_rows
    columns: dict[str, ColumnStats] = {}
    for i in range(md.num_columns):
        col_schema = md.schema.column(i)
        if col_schema.max_repetition_level > 0:
            continue
        parts = col_schema.path.split(".")
        arrow_type = _arrow_leaf(arrow_schema, parts)
        if arrow_type is None:
            continue
        family = _family(arrow_type)
        null_count: int | None = 0
        lows: list[Any] = []
        highs: list[Any] = []
        bounds_ok = family is not None
        for rg in range(md.num_row_groups):
            group = md.row_group(rg)
            if group.num_rows == 0:
                continue
            st = group.column(i).statistics
            if st is None or not st.has_null_count:
                null_count = None
                bounds_ok = False
                continue
            if null_count is not None:
                null_count += st.null_count
            if not bounds_ok:
                continue
            if not st.has_min_max:
                if st.null_count == group.num_rows:
                    continue  # all null: no bounds needed
                bounds_ok = False
                continue
            if getattr(st, "is_min_value_exact", None) is False:
                bounds_ok = False
                continue
            if getattr(st, "is_max_value_exact", None) is False:
                bounds_ok = False
                continue
            lo = _parquet_bound(st, "min", family, col_schema)
            hi = _parquet_bound(st, "max", family, col_schema)
            lo, hi = _checked_bounds(lo, hi, family)
            if lo is None:
                bounds_ok = False
                continue
            lows.append(lo)
            highs.append(hi)
        lo = hi = None
        if bounds_ok and lows:
            lo, hi = _checked_bounds(min(lows), max(highs), family)
        name = ".".join([rename.get(parts[0], parts[0])] + parts[1:])
        columns[name] = ColumnStats(
            column=name,
            min=lo,
            max=hi,
            null_count=null_count,
            value_count=row_count,
            nan_count=None,
            type=arrow_type,
        )
    return FileStats(path=path, format="parquet", row_count=row_count, columns=columns)
