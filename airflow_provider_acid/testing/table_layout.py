"""The partitions of a simulated table and the base and delta folders in each.

:class:`TableLayout` maps partition values (given statically, or carried by the rows: dynamic
partitioning) to partitions and their escaped ``k=v`` folders, and keeps, per partition, the
base/delta folders written and the pre-ACID original files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .acid_layout import base_dir_name, delta_dir_name, format_partition_value, partition_dir_name
from .orc_types import orc_arrow_type
from .table_columns import Column, normalise


@dataclass(frozen=True)
class Directory:
    """A base or delta folder of one partition."""

    kind: str  # "base" | "delta" | "delete_delta"
    min_write_id: int
    max_write_id: int
    statement_id: int | None = None
    visibility_txn_id: int | None = None

    @property
    def name(self) -> str:
        if self.kind == "base":
            return base_dir_name(self.max_write_id, self.visibility_txn_id)
        return delta_dir_name(
            self.min_write_id,
            self.max_write_id,
            self.statement_id,
            self.visibility_txn_id,
            delete=self.kind == "delete_delta",
        )

    def sort_key(self) -> tuple:
        # Hive's ParsedDelta order: min asc, max desc, statement asc (none first), then path.
        stmt = -1 if self.statement_id is None else self.statement_id
        return (self.min_write_id, -self.max_write_id, stmt, self.name)


@dataclass
class Partition:
    index: int
    values: tuple[Any, ...]
    path: str  # relative folder, "" for an unpartitioned table
    directories: list[Directory] = field(default_factory=list)
    original_copies: dict[int, int] = field(default_factory=dict)  # bucket -> files written
    original_rows: dict[int, int] = field(default_factory=dict)  # bucket -> rows written


class TableLayout:
    """Partitions (by ``partition_columns``) of the table in folder ``path``."""

    def __init__(self, path: str, partition_columns: Sequence[Column]) -> None:
        self.path = path
        self.partition_columns = tuple(partition_columns)
        self.partitions: list[Partition] = []
        self._keys: dict[tuple[str, ...], int] = {}
        if not self.partition_columns:
            self.index(())

    def join(self, *parts: str) -> str:
        """Path of ``parts`` (relative folders and names; "" skipped) under the table folder."""
        return "/".join([self.path] + [p for p in parts if p])

    def register_directory(self, p: Partition, directory: Directory) -> str:
        """Record that ``p`` has folder ``directory``; returns the folder's path."""
        if directory not in p.directories:
            p.directories.append(directory)
        return self.join(p.path, directory.name)

    def specs(self) -> list[dict[str, Any]]:
        """Partition specs (column name -> value), in creation order."""
        names = [c.name for c in self.partition_columns]
        return [dict(zip(names, p.values, strict=True)) for p in self.partitions if names]

    def selected(self, partition: Any) -> list[Partition]:
        """The partition given (as for :meth:`static`), or all of them for None."""
        if partition is None:
            return list(self.partitions)
        return [self.partitions[self.static(partition)]]

    def value_columns(self, codes: pa.ChunkedArray | pa.Array) -> list[pa.Array]:
        """The partition columns' values of rows in the partitions ``codes``."""
        out = []
        for i, column in enumerate(self.partition_columns):
            values = pa.array([p.values[i] for p in self.partitions], orc_arrow_type(column.type))
            out.append(pc.take(values, codes))
        return out

    def static(self, partition: Any, *, create: bool = False) -> int:
        """Index of a partition given as a mapping, a sequence of values or a single value
        (KeyError for an unknown one unless ``create``)."""
        if not self.partition_columns:
            if partition not in (None, {}, ()):
                raise ValueError("the table is not partitioned")
            return 0
        names = [c.name for c in self.partition_columns]
        if partition is None:
            raise ValueError(f"a partition ({', '.join(names)}) is needed")
        if isinstance(partition, Mapping):
            if set(partition) != set(names):
                raise ValueError(f"partition must give exactly {names}, got {list(partition)}")
            values = [partition[n] for n in names]
        elif isinstance(partition, list | tuple):
            values = list(partition)
        else:
            values = [partition]
        if len(values) != len(names):
            raise ValueError(f"partition must give {len(names)} values")
        typed = tuple(
            normalise(pa.array([v]), orc_arrow_type(c.type), c.type).to_pylist()[0]
            for v, c in zip(values, self.partition_columns, strict=True)
        )
        if not create:
            key = tuple(format_partition_value(v) for v in typed)
            if key not in self._keys:
                raise KeyError(f"no partition {dict(zip(names, typed, strict=True))}")
        return self.index(typed)

    def index(self, values: tuple[Any, ...]) -> int:
        """Index of the partition of ``values``, registered if new."""
        values = tuple(None if v == "" else v for v in values)
        key = tuple(format_partition_value(v) for v in values)
        index = self._keys.get(key)
        if index is None:
            index = len(self.partitions)
            path = partition_dir_name(
                zip([c.name for c in self.partition_columns], values, strict=True)
            )
            self.partitions.append(Partition(index, values, path))
            self._keys[key] = index
        return index

    def indexes(self, table: pa.Table, *, create: bool) -> pa.Array:
        """Partition index (int32) of every row of ``table``, from its partition columns.

        With ``create`` unknown partitions are registered (dynamic partitioning); otherwise
        they map to -1.
        """
        names = [c.name for c in self.partition_columns]
        if not names:
            return pa.repeat(pa.scalar(0, pa.int32()), table.num_rows)
        columns = []
        for name in names:
            column = table[name].combine_chunks()
            if pa.types.is_string(column.type):  # Hive stores '' as the default partition
                column = pc.if_else(pc.equal(column, ""), pa.scalar(None, pa.string()), column)
            columns.append(column)
        uniques = [pc.unique(c) for c in columns]
        combined = pa.repeat(pa.scalar(0, pa.int64()), table.num_rows)
        stride = 1
        for column, unique in zip(columns, uniques, strict=True):
            code = pc.cast(pc.index_in(column, value_set=unique, skip_nulls=False), pa.int64())
            combined = pc.add(combined, pc.multiply(code, stride))
            stride *= len(unique)
        py_uniques = [u.to_pylist() for u in uniques]
        lookup: dict[int, int] = {}
        for code in pc.unique(combined).to_pylist():
            values, rest = [], code
            for unique in py_uniques:
                values.append(unique[rest % len(unique)])
                rest //= len(unique)
            if create:
                lookup[code] = self.index(tuple(values))
            else:
                key = tuple(format_partition_value(v) for v in values)
                lookup[code] = self._keys.get(key, -1)
        keys = pa.array(list(lookup), pa.int64())
        targets = pa.array(list(lookup.values()), pa.int32())
        return pc.take(targets, pc.index_in(combined, value_set=keys))
