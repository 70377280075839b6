"""What the Trino tests share: a SQL runner, a schema of tables, the provider's read by name, and
an order-independent comparison of the provider's rows with Trino's (every column, nulls and
value types exact)."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import struct
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import trino.dbapi

from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.metastore import MetastoreClient, ReadTransaction, open_table
from airflow_provider_acid.output import SnapshotResult

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Trino:
    """A running Trino server and the metastore its catalogs use."""

    url: str
    metastore_uri: str

    def connect(self, **session: Any) -> trino.dbapi.Connection:
        host, port = self.url.removeprefix("http://").split(":")
        return trino.dbapi.connect(
            host=host, port=int(port), user="acid", catalog="hive", session_properties=session
        )

    def sql(self, statement: str, **session: Any) -> list[list[Any]]:
        """Runs one statement; returns its rows (raises Trino's error)."""
        with self.connect(**session) as conn:
            cur = conn.cursor()
            cur.execute(statement)
            return cur.fetchall()

    def select(self, statement: str, **session: Any) -> tuple[list[str], list[list[Any]]]:
        """A query's column names and rows."""
        with self.connect(**session) as conn:
            cur = conn.cursor()
            cur.execute(statement)
            rows = cur.fetchall()
            return [d[0] for d in cur.description], rows


@dataclass
class Schema:
    """A Hive schema of Trino's in a temporary folder."""

    trino: Trino
    name: str
    folder: Path
    tables: list[str] = field(default_factory=list)

    def create(self, table: str, columns: str, **properties: Any) -> str:
        """``CREATE TABLE hive.<schema>.<table> (<columns>) WITH (transactional = true, ...)``;
        returns the qualified name."""
        props = {"transactional": True, "format": "'ORC'", **properties}
        with_clause = ", ".join(f"{k} = {_sql_value(v)}" for k, v in props.items())
        qualified = f"hive.{self.name}.{table}"
        self.trino.sql(f"CREATE TABLE {qualified} ({columns}) WITH ({with_clause})")
        self.tables.append(qualified)
        return qualified

    def hive_name(self, table: str) -> str:
        return f"{self.name}.{table}"

    def compact_by_name(self, table: str, out: Path, **kw: Any) -> SnapshotResult:
        """The provider's snapshot of the table, read by name through the metastore as the CLI
        and the operators read it: inside a read transaction of its own (held while reading,
        so Hive's Cleaner keeps the files), whose id is in the view's transaction list."""
        uri = self.trino.metastore_uri
        with ReadTransaction(uri) as txn, MetastoreClient(uri) as client:
            source = open_table(client, self.hive_name(table), current_txn=txn.txn_id)
            return compact_table(source, str(out), **kw)

    @staticmethod
    def read_output(out: Path) -> pa.Table:
        """The rows of a snapshot's Parquet files."""
        return ds.dataset(str(out), format="parquet").to_table()

    def read_by_name(self, table: str, out: Path, **kw: Any) -> pa.Table:
        """:meth:`compact_by_name`, then the rows it wrote."""
        self.compact_by_name(table, out, **kw)
        return self.read_output(out)

    def drop(self) -> None:
        """Drops the tables made here or registered with :attr:`tables` (any catalog), then
        the schema."""
        for qualified in reversed(self.tables):
            self.trino.sql(f"DROP TABLE IF EXISTS {qualified}")
        self.trino.sql(f"DROP SCHEMA IF EXISTS hive.{self.name}")


def _sql_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "ARRAY[" + ", ".join(_sql_value(v) for v in value) + "]"
    return str(value)


# -- comparing rows --------------------------------------------------------------------------


def canonical(value: Any) -> Any:
    """A value as comparable data: structs as tuples, maps as sorted pairs, NaN as a marker,
    each scalar tagged with its Python type (so 1 is not 1.0, Decimal('1.50') keeps its
    digits, a date is not a timestamp)."""
    if value is None:
        return None
    if isinstance(value, Mapping):  # a pyarrow struct (dict) or a Trino map (dict)
        raise TypeError("use canonical_typed: a dict is a struct or a map")
    if isinstance(value, float) and math.isnan(value):
        return ("float", "NaN")
    if isinstance(value, decimal.Decimal):
        return ("Decimal", str(value))
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    return (type(value).__name__, value)


def canonical_typed(value: Any, arrow_type: pa.DataType) -> Any:
    """:func:`canonical` guided by the column's Arrow type (struct vs map)."""
    if value is None:
        return None
    if pa.types.is_struct(arrow_type):
        items = list(value.values()) if isinstance(value, Mapping) else list(value)
        return tuple(canonical_typed(v, arrow_type.field(i).type) for i, v in enumerate(items))
    if pa.types.is_map(arrow_type):
        pairs = value.items() if isinstance(value, Mapping) else value
        return tuple(
            sorted(
                (
                    (
                        canonical_typed(k, arrow_type.key_type),
                        canonical_typed(v, arrow_type.item_type),
                    )
                    for k, v in pairs
                ),
                key=repr,
            )
        )
    if pa.types.is_list(arrow_type):
        return tuple(canonical_typed(v, arrow_type.value_type) for v in value)
    if pa.types.is_floating(arrow_type) and not isinstance(value, float):
        value = float(value)
    if pa.types.is_float32(arrow_type) and not math.isnan(value):
        # Trino's client sends a real as its shortest text (3.4028235E38), pyarrow the exact
        # double of the float32: both as the float32 they are
        value = struct.unpack("<f", struct.pack("<f", value))[0]
    return canonical(value)


def provider_rows(table: pa.Table, columns: Iterable[str]) -> Counter:
    names = list(columns)
    types = [table.schema.field(n).type for n in names]
    rows = zip(*(table.column(n).to_pylist() for n in names), strict=True)
    return Counter(
        tuple(canonical_typed(v, t) for v, t in zip(r, types, strict=True)) for r in rows
    )


def trino_rows(rows: Iterable[Iterable[Any]], types: Iterable[pa.DataType]) -> Counter:
    types = list(types)
    return Counter(
        tuple(canonical_typed(v, t) for v, t in zip(r, types, strict=True)) for r in rows
    )


def assert_same_rows(trino: Trino, query: str, table: pa.Table, **session: Any) -> int:
    """The provider's ``table`` holds exactly the rows of Trino's ``query`` (order-independent,
    duplicates counted, every column of the query, value types exact); returns the count."""
    names, rows = trino.select(query, **session)
    types = [table.schema.field(n).type for n in names]
    theirs = trino_rows(rows, types)
    ours = provider_rows(table, names)
    missing, extra = theirs - ours, ours - theirs
    assert not missing and not extra, (
        f"{sum(missing.values())} of Trino's rows missing, {sum(extra.values())} extra; "
        f"missing {list(missing)[:3]}, extra {list(extra)[:3]}"
    )
    return sum(theirs.values())


#: Trino's type names to the Arrow type the provider writes (timestamps in microseconds).
_SIMPLE = {
    "boolean": pa.bool_(),
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "real": pa.float32(),
    "double": pa.float64(),
    "varchar": pa.string(),
    "varbinary": pa.binary(),
    "date": pa.date32(),
    "timestamp(6)": pa.timestamp("us"),
}


def arrow_type_of(trino_type: str) -> pa.DataType:
    """The Arrow type the provider writes for a column Trino describes as ``trino_type``."""
    t = trino_type.strip()
    if t in _SIMPLE:
        return _SIMPLE[t]
    if re.fullmatch(r"(var)?char\(\d+\)", t):
        return pa.string()
    found = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", t)
    if found:
        return pa.decimal128(int(found.group(1)), int(found.group(2)))
    if t.startswith("array(") and t.endswith(")"):
        return pa.list_(arrow_type_of(t[6:-1]))
    if t.startswith("map(") and t.endswith(")"):
        key, value = _split_top(t[4:-1])
        return pa.map_(arrow_type_of(key), arrow_type_of(value))
    if t.startswith("row(") and t.endswith(")"):
        fields = []
        for part in _split_top(t[4:-1]):
            name, kind = part.strip().split(" ", 1)
            fields.append(pa.field(name.strip('"'), arrow_type_of(kind)))
        return pa.struct(fields)
    raise ValueError(f"no Arrow type known for Trino's {trino_type!r}")


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def assert_types(trino: Trino, qualified: str, table: pa.Table) -> None:
    """Every column Trino describes has the Arrow type the provider should write for it."""
    described = trino.sql(f"DESCRIBE {qualified}")
    for name, kind, *_ in described:
        want = arrow_type_of(kind)
        got = table.schema.field(name).type
        assert got == want, f"column {name} ({kind}): provider wrote {got}, expected {want}"


def as_datetime(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)
