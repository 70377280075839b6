"""Arrow columns as the Python values pyorc writes.

pyorc takes rows as Python tuples. Timestamps, dates and decimals go in as plain integers
(nanoseconds, days, unscaled values) through pass-through converters, computed column-wise with
Arrow compute where possible; nested values are encoded recursively.
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyorc.converters import ORCConverter
from pyorc.enums import TypeKind

from ..acid.hive_types import HiveType

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH_DATETIME = dt.datetime(1970, 1, 1)
_NANOS = 1_000_000_000


class _PassThroughTimestamp(ORCConverter):
    """Timestamps arrive as nanoseconds since the epoch (wall clock, written as UTC)."""

    @staticmethod
    def from_orc(seconds: int, nanoseconds: int, timezone: Any) -> tuple[int, int]:
        return seconds, nanoseconds

    @staticmethod
    def to_orc(obj: int, timezone: Any) -> tuple[int, int]:
        return divmod(obj, _NANOS)


class _PassThroughDate(ORCConverter):
    """Dates arrive as days since the epoch."""

    @staticmethod
    def from_orc(days: int) -> int:
        return days

    @staticmethod
    def to_orc(obj: int) -> int:
        return obj


class _PassThroughDecimal(ORCConverter):
    """Decimals arrive as their unscaled integer."""

    @staticmethod
    def from_orc(decimal: str) -> str:
        return decimal

    @staticmethod
    def to_orc(precision: int, scale: int, obj: int) -> int:
        return obj


#: Converters for ``pyorc.Writer(converters=...)``.
PYORC_CONVERTERS: dict[TypeKind, type[ORCConverter]] = {
    TypeKind.TIMESTAMP: _PassThroughTimestamp,
    TypeKind.DATE: _PassThroughDate,
    TypeKind.DECIMAL: _PassThroughDecimal,
}


def _datetime_to_nanos(value: dt.datetime | int) -> int:
    if isinstance(value, int):
        return value
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    delta = value - _EPOCH_DATETIME
    return (delta.days * 86_400 + delta.seconds) * _NANOS + delta.microseconds * 1_000


def _python_encoder(hive_type: HiveType) -> Callable[[Any], Any] | None:
    """A function turning a ``to_pylist()`` value into what pyorc writes (None = unchanged)."""
    name = hive_type.name
    if name == "decimal":
        scale = hive_type.params[1]
        context = decimal.Context(prec=80)  # the default 28 digits would round decimal(38,s)
        return lambda v: None if v is None else int(Decimal(v).scaleb(scale, context))
    if name == "date":
        return lambda v: None if v is None else (v - _EPOCH_DATE).days
    if name == "timestamp":
        return lambda v: None if v is None else _datetime_to_nanos(v)
    if name == "array":
        inner = _python_encoder(hive_type.children[0])
        if inner is None:
            return None
        return lambda v: None if v is None else [inner(x) for x in v]
    if name == "map":
        key_enc = _python_encoder(hive_type.children[0]) or (lambda x: x)
        val_enc = _python_encoder(hive_type.children[1]) or (lambda x: x)
        return lambda v: None if v is None else {key_enc(k): val_enc(x) for k, x in v}
    if name == "struct":
        encs = [(n, _python_encoder(t) or (lambda x: x)) for n, t in hive_type.fields]
        return lambda v: None if v is None else tuple(enc(v[n]) for n, enc in encs)
    return None


def _encode_column(array: pa.Array | pa.ChunkedArray, hive_type: HiveType) -> list[Any]:
    """The Python values pyorc writes for an Arrow column of ``orc_arrow_type(hive_type)``."""
    name = hive_type.name
    if name == "decimal" and hive_type.params[0] <= 18:
        scale = hive_type.params[1]
        factor = pa.scalar(Decimal(10**scale), pa.decimal128(scale + 1, 0))
        return pc.cast(pc.multiply(array, factor), pa.int64()).to_pylist()
    if name == "timestamp":
        return pc.cast(pc.cast(array, pa.timestamp("ns")), pa.int64()).to_pylist()
    if name == "date":
        return pc.cast(array, pa.int32()).to_pylist()
    values = array.to_pylist()
    encoder = _python_encoder(hive_type)
    if encoder is None:
        return values
    return [encoder(v) for v in values]


def _row_tuples(rows: pa.Table | pa.StructArray, row_type: HiveType) -> Iterable[tuple]:
    """Row tuples (struct_repr=TUPLE) of a table or non-null struct array."""
    if isinstance(rows, pa.Table):
        columns = [rows.column(n) for n in row_type.field_names]
    else:
        columns = rows.flatten()
    encoded = [_encode_column(col, t) for col, t in zip(columns, row_type.children, strict=True)]
    if not encoded:
        return itertools.repeat((), len(rows))
    return zip(*encoded, strict=True)


def pyorc_rows(table: pa.Table, orc_type: HiveType) -> Iterable[tuple]:
    """Row tuples for pyorc; a top-level struct column that is null becomes None."""
    columns = []
    for name, t in orc_type.fields:
        column = table[name].combine_chunks()
        if t.name == "struct" and len(column) and column.null_count == len(column):
            columns.append(itertools.repeat(None, len(column)))  # delete events
        elif t.name == "struct" and column.null_count:
            tuples = _row_tuples(column, t)
            valid = column.is_valid().to_pylist()
            columns.append([v if ok else None for v, ok in zip(tuples, valid, strict=True)])
        elif t.name == "struct":
            columns.append(_row_tuples(column, t))
        else:
            columns.append(_encode_column(column, t))
    return zip(*columns, strict=True) if columns else iter(())
