"""Partition columns as statistics: every row of a file holds its folder's value.

The manifest evaluates a predicate on partition values as it does on file statistics, so a
partition column's values are made into the same ``NAME__min``/``__max``/``__nulls`` columns
(:func:`with_partition_columns`); :func:`partitions_might_match` asks which partitions a
predicate might match on their values alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .evaluator import might_match
from .expressions import Expr


def _partition_stats(
    typed: pa.Array, name: str, row_counts: pa.Array | None
) -> dict[str, pa.Array]:
    """Statistics of a partition column: every row of a file holds its folder's value.

    Without row counts (the partition-level table) each partition counts as one row.
    """
    counts = row_counts if row_counts is not None else pa.array([1] * len(typed), pa.int64())
    return {
        f"{name}__min": typed,
        f"{name}__max": typed,
        f"{name}__nulls": pc.if_else(pc.is_null(typed), counts, pa.scalar(0, pa.int64())),
        f"{name}__values": counts,
        f"{name}__nans": pa.nulls(len(typed), pa.int64()),
    }


def partition_arrays(
    partitions: Sequence[Any], schema: pa.Schema, keys: Sequence[str]
) -> dict[str, pa.Array]:
    """Each partition column's values, one per partition, typed as the schema says.

    :param partitions: partitions (each with a ``partition``), one value per partition.
    :param schema: the table schema, for the columns' types.
    :param keys: the partition columns.
    """
    return _typed_values([p.partition.as_dict() for p in partitions], schema, keys)


def _typed_values(
    values: Sequence[Mapping[str, str | None]], schema: pa.Schema, keys: Sequence[str]
) -> dict[str, pa.Array]:
    return {
        key: pc.cast(pa.array([v.get(key) for v in values], pa.string()), schema.field(key).type)
        for key in keys
    }


def partitions_might_match(
    expr: Expr, schema: pa.Schema, values: Sequence[Mapping[str, str | None]]
) -> list[bool]:
    """Which partitions (their values, ``{"dt": "2024-01-01"}``) ``expr`` might match, on
    their values alone: data columns count as unknown. ``expr`` is bound to ``schema``.

    :param expr: the predicate, bound to ``schema``.
    :param schema: the table schema.
    :param values: each partition's values by column name.
    """
    if not values:
        return []
    keys = [k for k in values[0] if k in schema.names]
    table = pa.table({"row_count": pa.nulls(len(values), pa.int64())})
    table = with_partition_columns(table, _typed_values(values, schema, keys), None)
    return might_match(expr, table, schema).to_pylist()


def with_partition_columns(
    table: pa.Table, values: Mapping[str, pa.Array], row_counts: pa.Array | None
) -> pa.Table:
    """``table`` plus the statistics of the partition columns, one row per file or partition.

    :param table: the statistics table (one row per file or partition).
    :param values: each partition column's typed values, one per row.
    :param row_counts: the rows of each file (None: one row per partition).
    """
    for key, typed in values.items():
        for name, array in _partition_stats(typed, key, row_counts).items():
            table = table.append_column(name, array)
    return table


__all__ = ["partition_arrays", "partitions_might_match", "with_partition_columns"]
