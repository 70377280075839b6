"""A simulated table's columns, and the rows given to it as Arrow tables of their types.

Columns are given as Arrow schemas, ``(name, hive type)`` pairs, mappings or bare names
(``string``). Rows (Arrow tables, lists of dicts, column mappings) are cast to the columns' Arrow
types, char/varchar values cut and padded as ORC stores them.

Schema changes (:func:`check_alter`, :func:`evolve_column`): what ``ALTER TABLE ... CHANGE`` /
``ADD COLUMNS`` allow and what Hive then shows for a value written before, written here
independently of the reader's :mod:`airflow_provider_acid.acid.evolution`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..acid.hive_types import HiveType
from .orc_types import hive_type_of_arrow, orc_arrow_type, parse_hive_type


@dataclass(frozen=True)
class Column:
    """A table or partition column: a name and its Hive type."""

    name: str
    type: HiveType

    @classmethod
    def of(cls, spec: Column | tuple[str, str | HiveType] | pa.Field | str) -> Column:
        """From a Column, a ``(name, hive type)`` pair, an Arrow field or a bare name (string)."""
        if isinstance(spec, Column):
            return spec
        if isinstance(spec, pa.Field):
            return cls(spec.name, hive_type_of_arrow(spec.type))
        if isinstance(spec, str):
            return cls(spec, HiveType("string"))
        name, hive_type = spec
        return cls(name, parse_hive_type(hive_type))


def columns_of(spec: Any) -> tuple[Column, ...]:
    """Columns from an Arrow schema, ``(name, hive type)`` pairs, a mapping or a bare name."""
    if isinstance(spec, pa.Schema):
        return tuple(Column.of(f) for f in spec)
    if isinstance(spec, Mapping):
        return tuple(Column.of(item) for item in spec.items())
    if isinstance(spec, str):
        return (Column.of(spec),)
    return tuple(Column.of(item) for item in spec)


def arrow_schema(columns: Iterable[Column]) -> pa.Schema:
    """The Arrow schema of ``columns`` (their values as the simulator takes and reads them)."""
    return pa.schema([pa.field(c.name, orc_arrow_type(c.type)) for c in columns])


def check_column_names(columns: Sequence[Column], partition_columns: Sequence[Column]) -> None:
    names = [c.name for c in columns] + [c.name for c in partition_columns]
    if len({n.lower() for n in names}) != len(names):
        raise ValueError(f"duplicate column names: {names}")
    if any(n.startswith("__acid_") for n in names):
        raise ValueError("column names may not start with '__acid_'")
    if not columns:
        raise ValueError("a table needs at least one column")


def rows_to_table(rows: Any, target: pa.Schema, columns: Iterable[Column]) -> pa.Table:
    """Rows as a table of ``target``'s columns with their Arrow types (``columns`` give the Hive
    types of those columns)."""
    if isinstance(rows, pa.RecordBatch):
        rows = pa.Table.from_batches([rows])
    if isinstance(rows, list | tuple):
        table = _table_from_dicts(rows, target)
    elif isinstance(rows, Mapping):
        table = pa.table(dict(rows))
    elif isinstance(rows, pa.Table):
        table = rows
    else:
        raise TypeError(
            f"rows must be a pyarrow Table, a list of dicts or a mapping, not {type(rows)}"
        )
    missing = [n for n in target.names if n not in table.column_names]
    if missing:
        raise ValueError(f"rows lack columns {missing}")
    arrays = []
    types = {c.name: c.type for c in columns}
    for f in target:
        arrays.append(normalise(table[f.name], f.type, types[f.name]))
    return pa.Table.from_arrays(arrays, schema=target)


def _table_from_dicts(rows: Sequence[Mapping[str, Any]], target: pa.Schema) -> pa.Table:
    """A table of ``target``'s columns from dict rows (a key absent from a row means null)."""
    present = {key for row in rows for key in row}
    arrays = {}
    for f in target:
        if f.name not in present:
            continue
        values = [row.get(f.name) for row in rows]
        try:
            arrays[f.name] = pa.array(values, f.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays[f.name] = pc.cast(pa.array(values), f.type)  # e.g. floats for a decimal
    if not rows:
        return target.empty_table()
    return pa.table(arrays)


def normalise(
    column: pa.Array | pa.ChunkedArray, arrow_type: pa.DataType, hive_type: HiveType
) -> pa.ChunkedArray | pa.Array:
    """Cast a column to its Arrow type and apply char/varchar length rules (as ORC stores them)."""
    if column.type != arrow_type:
        if pa.types.is_null(column.type):
            column = pa.nulls(len(column), arrow_type)
        else:
            column = pc.cast(column, arrow_type)
    if hive_type.name == "varchar":
        column = pc.utf8_slice_codeunits(column, 0, hive_type.params[0])
    elif hive_type.name == "char":
        length = hive_type.params[0]
        column = pc.utf8_rpad(pc.utf8_slice_codeunits(column, 0, length), length)
    return column


# -- schema changes --------------------------------------------------------------------------

_INTEGERS = ("tinyint", "smallint", "int", "bigint")
_INTEGER_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}
_STRINGS = ("string", "varchar", "char")


def change_allowed(old: HiveType, new: HiveType) -> bool:
    """Whether the simulator lets a column change from ``old`` to ``new``: the changes Hive's
    metastore allows (``ColumnType.areColTypesCompatible``) that Hive's ORC reader converts
    exactly: integer widening, integers to double, float to double, widening to decimal,
    changes among string, varchar and char, and date to those."""
    if str(old) == str(new):
        return True
    a, b = old.name, new.name
    if a in _INTEGERS and b in _INTEGERS:
        return _INTEGERS.index(a) < _INTEGERS.index(b)
    if a in _INTEGERS and b == "double" or (a, b) == ("float", "double"):
        return True
    if b == "decimal" and a in _INTEGERS:
        return new.params[0] - new.params[1] >= _INTEGER_DIGITS[a]
    if a == b == "decimal":
        (p, s), (q, t) = old.params, new.params
        return t >= s and q - t >= p - s
    return (a in _STRINGS or a == "date") and b in _STRINGS


def check_alter(old: Sequence[Column], new: Sequence[Column]) -> None:
    """ValueError unless ``new`` follows from ``old`` by renames, allowed type changes and
    columns added at the end (Hive compares the lists by position)."""
    if len(new) < len(old):
        raise ValueError("the simulator does not drop columns (REPLACE COLUMNS with fewer columns)")
    for index, (before, after) in enumerate(zip(old, new, strict=False)):
        if not change_allowed(before.type, after.type):
            raise ValueError(
                f"column {index + 1} ({before.name} {before.type} -> {after.name} "
                f"{after.type}): a type change Hive refuses"
            )


def evolve_column(
    column: pa.Array | pa.ChunkedArray, old: HiveType, new: HiveType
) -> pa.ChunkedArray | pa.Array:
    """Values written as ``old`` as Hive shows them once the column is ``new``: numbers
    widened exactly, strings cut for varchar and cut and padded for char (a char's own padding
    trimmed first)."""
    if str(old) == str(new):
        return column
    if old.name == "char":
        column = pc.utf8_rtrim(column, characters=" ")
    return normalise(column, orc_arrow_type(new), new)
