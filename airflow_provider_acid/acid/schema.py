"""The table's Arrow schema: its columns (from a file or the user) plus typed partition columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from fsspec import AbstractFileSystem

from .hive_types import HiveType, hive_field, infer_partition_type
from .read_view import TableReadView
from .source import TableDefinition
from .table_columns import table_columns


def partition_columns(
    snapshot: TableReadView, declared: Mapping[str, str] | None = None
) -> list[tuple[str, HiveType]]:
    """Partition columns with their Hive types: ``declared`` ones as given (``{"dt": "date"}``),
    then the metastore's (when the table was read by name), the others inferred from the
    folder values (bigint, date, else string)."""
    keys = snapshot.partition_keys()
    for part in snapshot.partitions:
        if part.partition.values and part.partition.keys != keys:
            raise ValueError(
                f"partition {part.partition.path!r} of {snapshot.root} has columns "
                f"{list(part.partition.keys)}, others {list(keys)}"
            )
    if snapshot.definition is not None:  # the metastore's types, unless overridden
        declared = {**snapshot.definition.partition_types, **(declared or {})}
    declared = {k.lower(): v for k, v in (declared or {}).items()}
    columns = []
    for index, key in enumerate(keys):
        if key.lower() in declared:
            columns.append((key, HiveType.parse(declared[key.lower()])))
        else:
            values = [
                p.partition.values[index][1] for p in snapshot.partitions if p.partition.values
            ]
            columns.append((key, infer_partition_type(values)))
    return columns


def table_schema(
    snapshot: TableReadView,
    fs: AbstractFileSystem,
    schema: Any = None,
    partition_types: Mapping[str, str] | None = None,
) -> pa.Schema:
    """Table columns then partition columns, as Arrow fields (what predicates bind to)."""
    columns = table_columns(snapshot, fs, schema)
    fields = columns.arrow_fields()
    fields += [hive_field(name, t) for name, t in partition_columns(snapshot, partition_types)]
    return pa.schema(fields)


def definition_schema(definition: TableDefinition) -> pa.Schema:
    """A metastore definition's columns then partition columns, as Arrow fields (what a
    predicate binds to before any file is read)."""
    columns = (*definition.columns, *definition.partition_columns)
    return pa.schema([hive_field(name, hive_type) for name, hive_type in columns])
