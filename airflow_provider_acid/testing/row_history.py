"""The logical history of a simulated table's rows, and the rows a correct reader must return.

Kept apart from the files: which rows each write inserted (with the identity Hive gave them),
which identities each write deleted and which partitions each INSERT OVERWRITE replaced. From
it, :meth:`RowHistory.live` computes the rows live for any set of valid writes: what
``AcidTableWriter.expected_rows`` returns, and what the compactor rewrites.

Rows are kept as Arrow tables of bookkeeping columns (partition index, write id, identity) plus
the table's data columns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

# Bookkeeping columns (data columns may not use the prefix).
PARTITION = "__acid_partition"
WRITE_ID = "__acid_write"
ORIGINAL_TXN = "__acid_otxn"
BUCKET = "__acid_bucket"
ROW_ID = "__acid_rowid"
#: A row's position in the table a statement was given (not kept in the history).
POSITION = "__acid_index"
#: What identifies a row: its partition and its ``ROW__ID``.
ROW_KEY = [PARTITION, ORIGINAL_TXN, BUCKET, ROW_ID]
#: Names of the identity columns in identity tables (``ROW__ID``'s fields in ACID files).
IDENTITY_NAMES = ("originalTransaction", "bucket", "rowId")


@dataclass(frozen=True)
class RowBatch:
    """Inserted rows: bookkeeping columns plus the data columns."""

    kind: str  # "original" | "delta" | "base"
    write_id: int
    partition: int
    table: pa.Table


@dataclass(frozen=True)
class DeleteBatch:
    write_id: int
    partition: int
    table: pa.Table  # PARTITION, WRITE_ID, ORIGINAL_TXN, BUCKET, ROW_ID


def arange(count: int, start: int = 0) -> pa.Array:
    """int64 ``start, start + 1, ...`` (``count`` values), built without a Python loop."""
    if count == 0:
        return pa.array([], pa.int64())
    ones = pa.repeat(pa.scalar(1, pa.int64()), count)
    return pc.cumulative_sum(ones, start=pa.scalar(start - 1, pa.int64()))


class RowHistory:
    """Rows inserted and deleted by the writes of one table whose data columns are
    ``arrow_schema``."""

    def __init__(self, arrow_schema: pa.Schema) -> None:
        self.arrow_schema = arrow_schema
        self.row_batches: list[RowBatch] = []
        self.delete_batches: list[DeleteBatch] = []
        self._overwrites: list[tuple[int, int]] = []  # (partition, write id)
        self._write_ids: set[int] = set()
        self._partition_count = 0
        self._rows_cache: pa.Table | None = None

    @property
    def schema(self) -> pa.Schema:
        """Bookkeeping columns then data columns."""
        return pa.schema(
            [
                (PARTITION, pa.int32()),
                (WRITE_ID, pa.int64()),
                (ORIGINAL_TXN, pa.int64()),
                (BUCKET, pa.int32()),
                (ROW_ID, pa.int64()),
            ]
            + list(self.arrow_schema)
        )

    def empty(self) -> pa.Table:
        return self.schema.empty_table()

    def all_rows(self) -> pa.Table:
        """Every row ever inserted, live or not."""
        if self._rows_cache is None:
            tables = [b.table for b in self.row_batches]
            self._rows_cache = pa.concat_tables(tables) if tables else self.empty()
        return self._rows_cache

    def record_rows(
        self,
        kind: str,
        write_id: int,
        partition: int,
        original_transaction: int,
        bucket: int,
        first_row_id: int,
        data: pa.Table,
    ) -> pa.Table:
        """Record rows inserted with identities ``(original_transaction, bucket,
        first_row_id..)``; returns them as a bookkeeping table."""
        n = data.num_rows
        columns = {
            PARTITION: pa.repeat(pa.scalar(partition, pa.int32()), n),
            WRITE_ID: pa.repeat(pa.scalar(write_id, pa.int64()), n),
            ORIGINAL_TXN: pa.repeat(pa.scalar(original_transaction, pa.int64()), n),
            BUCKET: pa.repeat(pa.scalar(bucket, pa.int32()), n),
            ROW_ID: arange(n, first_row_id),
        }
        table = pa.Table.from_arrays(
            list(columns.values()) + [data[name] for name in self.arrow_schema.names],
            schema=self.schema,
        )
        self.row_batches.append(RowBatch(kind, write_id, partition, table))
        self._write_ids.add(write_id)
        self._partition_count = max(self._partition_count, partition + 1)
        self._rows_cache = None
        return table

    def evolve(
        self, arrow_schema: pa.Schema, convert: Callable[[int, pa.ChunkedArray], pa.Array]
    ) -> None:
        """The table's columns changed to ``arrow_schema`` (``ALTER TABLE``): every recorded row
        now shows, for each column, ``convert(position, old column)``, or null for a column
        added after the row was written (Hive reads files by position)."""
        old_names = self.arrow_schema.names
        bookkeeping = list(self.schema)[: len(self.schema) - len(old_names)]
        new_schema = pa.schema(bookkeeping + list(arrow_schema))
        batches = []
        for batch in self.row_batches:
            table = batch.table
            columns = [table[f.name] for f in bookkeeping]
            for index, target in enumerate(arrow_schema):
                if index < len(old_names):
                    columns.append(convert(index, table[old_names[index]]))
                else:
                    columns.append(pa.nulls(table.num_rows, target.type))
            evolved = pa.Table.from_arrays(columns, schema=new_schema)
            batches.append(RowBatch(batch.kind, batch.write_id, batch.partition, evolved))
        self.row_batches = batches
        self.arrow_schema = arrow_schema
        self._rows_cache = None

    def record_deletes(self, write_id: int, partition: int, deletes: pa.Table) -> None:
        """Record delete events (a table of PARTITION, WRITE_ID, ORIGINAL_TXN, BUCKET, ROW_ID)."""
        self.delete_batches.append(DeleteBatch(write_id, partition, deletes))

    def record_overwrite(self, partition: int, write_id: int) -> None:
        """Record that ``write_id`` replaced everything older in ``partition``."""
        self._overwrites.append((partition, write_id))

    def live(
        self,
        valid: Callable[[int], bool],
        partitions: set[int] | None = None,
        *,
        sort: bool = False,
    ) -> pa.Table:
        """Live rows (bookkeeping table) for a write-id validity function.

        A row is live when its write is valid, no valid INSERT OVERWRITE of its partition
        came after it, and no valid delete event names its identity. With ``sort``, rows
        come in (partition, originalTransaction, bucket, rowId) order.
        """
        rows = self.all_rows()
        valid_ids = [0] + [w for w in sorted(self._write_ids) if w != 0 and valid(w)]
        mask = pc.is_in(rows[WRITE_ID], value_set=pa.array(valid_ids, pa.int64()))
        if partitions is not None:
            mask = pc.and_(
                mask, pc.is_in(rows[PARTITION], value_set=pa.array(sorted(partitions), pa.int32()))
            )
        rows = rows.filter(mask)
        barrier: dict[int, int] = {}
        for p, w in self._overwrites:
            if valid(w):
                barrier[p] = max(barrier.get(p, 0), w)
        if barrier:
            floors = pa.array([barrier.get(i, 0) for i in range(self._partition_count)], pa.int64())
            rows = rows.filter(pc.greater_equal(rows[WRITE_ID], pc.take(floors, rows[PARTITION])))
        deletes = [b.table for b in self.delete_batches if valid(b.write_id)]
        if deletes and rows.num_rows:
            positions = arange(rows.num_rows)
            keys = rows.select(ROW_KEY).append_column(POSITION, positions)
            dead = pa.concat_tables(deletes).select(ROW_KEY)
            hit = keys.join(dead, keys=ROW_KEY, join_type="left semi")[POSITION]
            rows = rows.filter(pc.invert(pc.is_in(positions, value_set=hit.combine_chunks())))
        if sort and rows.num_rows > 1:
            rows = rows.take(pc.sort_indices(rows, sort_keys=[(k, "ascending") for k in ROW_KEY]))
        return rows
