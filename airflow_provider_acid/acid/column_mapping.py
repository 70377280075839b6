"""Mapping a data file's columns onto the table's, as Hive does (:mod:`.evolution`): ORC files
by position, Parquet files by name (unless their columns are named ``_col0, _col1, ...``);
missing columns read as nulls, and a column whose type changed is converted with Hive's
result, or refused naming the file and the column. ``char(n)`` values come padded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from .data_file_open import AcidFormatError, FileFormat, OpenFile
from .evolution import EvolutionError, column_sources, convert
from .hive_types import HiveType, pad_char
from .table_columns import TableColumns

_POSITIONAL = re.compile(r"^_col(\d+)$")


@dataclass(frozen=True)
class ColumnMap:
    """For each table column: the index of the file field holding it (None: all null), with
    the file's and the table's Hive types of that column."""

    sources: tuple[int | None, ...]
    targets: tuple[pa.Field, ...]
    file_types: tuple[HiveType | None, ...]
    table_types: tuple[HiveType, ...]


def file_column_map(
    opened: OpenFile, columns: TableColumns, targets: Sequence[pa.Field]
) -> ColumnMap:
    """Table columns onto the file's: ORC by position, Parquet by name (unless its columns are
    named ``_col0, _col1, ...``); see :mod:`.evolution`.

    :param opened: the opened data file.
    :param columns: the table's columns.
    :param targets: the Arrow fields the table's columns are read as.
    """
    path = opened.path
    row_type = opened.row_type
    if isinstance(row_type, pa.Schema):
        names = list(row_type.names)
    else:
        names = [row_type.field(i).name for i in range(row_type.num_fields)]
    positional = opened.format is FileFormat.ORC or (
        bool(names) and all(_POSITIONAL.match(n) for n in names)
    )
    sources = column_sources(names, columns.names, by_position=positional)
    if not positional and names and targets and all(s is None for s in sources):
        raise AcidFormatError(
            f"{path}: none of its columns {names} is a table column "
            f"{[t.name for t in targets]} (pass the table's schema if the names differ)"
        )
    file_types: list[HiveType | None] = []
    for source, column in zip(sources, columns.columns, strict=True):
        if source is None:
            file_types.append(None)
            continue
        file_type = (
            opened.row_hive_types[source]
            if source < len(opened.row_hive_types)
            else column.hive_type
        )
        file_types.append(file_type)
    return ColumnMap(
        tuple(sources),
        tuple(targets),
        tuple(file_types),
        tuple(c.hive_type for c in columns.columns),
    )


def map_columns(
    children: Sequence[pa.Array], column_map: ColumnMap, length: int, path: str
) -> list[pa.Array]:
    """The table's columns from a file's: converted to the table's types, nulls for the
    columns the file lacks, ``char(n)`` padded; a column that cannot be converted is an
    :class:`.AcidFormatError` naming the file and the column.

    :param children: the file's columns (of the ``row`` struct, or the file's own).
    :param column_map: the map :func:`file_column_map` made for the file.
    :param length: the number of rows.
    :param path: the file's path (for errors).
    """
    out = []
    for source, target, file_type, table_type in zip(
        column_map.sources,
        column_map.targets,
        column_map.file_types,
        column_map.table_types,
        strict=True,
    ):
        if source is None or file_type is None:
            out.append(pa.nulls(length, target.type))
            continue
        array = children[source]
        try:
            array = convert(array, file_type, table_type, target.type)
        except EvolutionError as exc:
            raise AcidFormatError(
                f"{path}: column {target.name!r} (file column {source + 1}, {file_type}) "
                f"cannot be read as the table's {table_type}: {exc}"
            ) from None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            hint = ""
            if "lose data" in str(exc) and "timestamp" in str(target.type):
                hint = " (pass timestamp_unit='ns' to keep sub-microsecond timestamps)"
            raise AcidFormatError(
                f"{path}: column {target.name!r} of type {array.type} cannot be read as "
                f"{target.type}: {exc}{hint}"
            ) from None
        out.append(pad_char(array, table_type))
    return out


__all__ = ["ColumnMap", "file_column_map", "map_columns"]
