"""Helpers for the pruning tests: write real ORC (pyorc) and Parquet (pyarrow) files."""

from __future__ import annotations

import datetime as dt
import decimal
import zoneinfo
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as paorc
import pyarrow.parquet as pq
import pyorc

UTC = zoneinfo.ZoneInfo("UTC")


def orc_type(t: pa.DataType) -> str:
    """ORC schema text for a pyarrow type."""
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t):
        return "tinyint"
    if pa.types.is_int16(t):
        return "smallint"
    if pa.types.is_int32(t):
        return "int"
    if pa.types.is_int64(t):
        return "bigint"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t):
        return "string"
    if pa.types.is_date32(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{f.name}:{orc_type(f.type)}" for f in t) + ">"
    raise TypeError(f"no ORC type for {t}")


def _orc_value(v: Any, t: pa.DataType) -> Any:
    if v is None:
        return None
    if pa.types.is_struct(t):
        return tuple(_orc_value(v.get(f.name), f.type) for f in t)
    if pa.types.is_timestamp(t):
        return v.replace(tzinfo=UTC)
    return v


def write_orc(
    path: Path | str,
    table: pa.Table,
    *,
    acid: bool = False,
    compression: int = pyorc.CompressionKind.ZLIB,
    stripe_size: int = 64 * 1024,
) -> str:
    """Write ``table`` with pyorc; ``acid=True`` wraps the rows in Hive ACID insert events."""
    row_type = pa.struct(list(table.schema))
    if acid:
        schema = (
            "struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,"
            f"currentTransaction:bigint,row:{orc_type(row_type)}>"
        )
    else:
        schema = orc_type(row_type)
    rows = table.to_pylist()
    with open(path, "wb") as f:
        w = pyorc.Writer(f, schema, timezone=UTC, compression=compression, stripe_size=stripe_size)
        for i, row in enumerate(rows):
            values = tuple(_orc_value(row[fld.name], fld.type) for fld in table.schema)
            w.write((0, 1, 536870912, i, 1, values) if acid else values)
        w.close()
    return str(path)


def read_orc_rows(path: Path | str) -> pa.Table:
    """The table rows of an ORC file written by :func:`write_orc` (ACID ``row`` unwrapped)."""
    table = paorc.ORCFile(str(path)).read()
    if table.column_names[-1:] == ["row"] and "rowId" in table.column_names:
        return pa.Table.from_struct_array(table.column("row").combine_chunks())
    return table


def write_parquet(path: Path | str, table: pa.Table, *, row_group_size: int | None = None) -> str:
    pq.write_table(table, str(path), row_group_size=row_group_size)
    return str(path)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def truncate_orc_string_stats(path: Path | str, minimum: str, maximum: str) -> None:
    """Rewrite an uncompressed ORC footer the way a Java writer stores strings over its
    statistics limit (ORC-203): ``minimum``/``maximum`` become ``lowerBound``/``upperBound``.

    Only protobuf field tags change (1 -> 4, 2 -> 5; same wire type and length), so every
    offset in the file stays valid.
    """
    data = bytearray(Path(path).read_bytes())
    with open(path, "rb") as f:
        lengths = pyorc.Reader(f).bytes_lengths
    ps_len = lengths["file_postscript_length"]
    footer_len = lengths["file_footer_length"]
    meta_len = lengths["stripe_statistics_length"]
    end = len(data) - 1 - ps_len
    start = end - footer_len - meta_len
    patched = 0
    for tag, new_tag, value in ((0x0A, 0x22, minimum), (0x12, 0x2A, maximum)):
        needle = bytes([tag]) + _varint(len(value.encode())) + value.encode()
        pos = data.find(needle, start, end)
        while pos != -1:
            data[pos] = new_tag
            patched += 1
            pos = data.find(needle, pos + 1, end)
    if patched < 2:
        raise AssertionError("string statistics not found in the ORC footer")
    Path(path).write_bytes(bytes(data))


EXAMPLE_SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("d", pa.float64()),
        ("s", pa.string()),
        ("ts", pa.timestamp("us")),
        ("dec", pa.decimal128(10, 2)),
        ("dt", pa.date32()),
        ("b", pa.bool_()),
    ]
)


def table_of(rows: Sequence[dict], schema: pa.Schema = EXAMPLE_SCHEMA) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=schema)


D = decimal.Decimal
T0 = dt.datetime(2024, 1, 1, 12, 0, 0)
