"""The changes of a slice Hive compacted inside the range, by diffing row identities.

A major compaction (``base_N``) folds the events of writes up to N into plain rows and drops
the delete events; after the Cleaner, the deltas are gone too. A row's identity
``(originalTransaction, bucket, rowId)`` survives compaction, so the provider's own snapshot at
A, written with identity columns (``include_identity``), still tells what changed: rows live
at B whose identity the snapshot lacks were inserted, rows of the snapshot whose identity is no
longer live were deleted. These are net changes: a row both inserted and deleted inside the
range does not show, and a delete's write is unknown (null, unless paired with an update's
insert on the key).

Memory per bucket: the identities of the bucket's rows at A and at B (20 bytes a row), and
the changes.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from ..acid.listing import resolve_filesystem
from ..acid.read_view import BucketSlice
from ..acid.rows import SliceReader
from ..acid.table_columns import TableColumns
from ..acid.writeids import ValidWriteIdList, parse_write_id_list
from ..output.parquet_files import IDENTITY_COLUMNS
from ..output.protocol import committed_snapshots
from ..output.records import SnapshotResult
from .change_rows import IDENTITY, ROW_WRITE, SliceChanges, bookkeeping_rows
from .delete_keys import DeleteKeySet
from .row_order import arange

#: The snapshot's identity columns, as the feed names them.
_SNAPSHOT_IDENTITY = tuple(name for name, _ in IDENTITY_COLUMNS[:3])


class IdentitySnapshotError(ValueError):
    """No usable snapshot at A with identity columns (the message says what was found)."""


@dataclass(frozen=True)
class IdentitySnapshot:
    """The provider's committed snapshot at A, with identity columns, and its filesystem."""

    result: SnapshotResult
    fs: AbstractFileSystem

    def slice_files(self, slice_key: str) -> list[str]:
        for bucket in self.result.buckets:
            if bucket.slice_key == slice_key:
                return [posixpath.join(self.result.out, f.path) for f in bucket.files]
        return []  # the slice had no rows at A


def snapshot_write_id(result: SnapshotResult) -> int:
    """The write a committed snapshot shows the table at: its list's high watermark, or,
    read with every write committed, the highest write id of its source folders."""
    if result.write_ids:
        return parse_write_id_list(result.write_ids).high_watermark
    return result.max_write_id


def find_identity_snapshot(
    out_uri: str, table_uri: str, at_write_id: int, *, storage_options: dict | None = None
) -> IdentitySnapshot:
    """The latest snapshot of ``table_uri`` committed under ``out_uri`` at ``at_write_id``
    with identity columns; :class:`IdentitySnapshotError` naming what is there otherwise.

    :param out_uri: the snapshot's output folder.
    :param table_uri: the table it must be a snapshot of.
    :param at_write_id: A.
    :param storage_options: fsspec options.
    """
    fs, root = resolve_filesystem(out_uri, None, storage_options)
    found = [s for s in committed_snapshots(fs, root) if "changes" not in s.settings]
    usable = [
        s
        for s in found
        if s.table == table_uri
        and s.settings.get("include_identity")
        and snapshot_write_id(s) == at_write_id
        and not s.settings.get("row_filter")
    ]
    if not usable:
        seen = ", ".join(
            f"{s.snapshot_id} (write {snapshot_write_id(s)}, "
            f"{'with' if s.settings.get('include_identity') else 'without'} identity)"
            for s in found
        )
        raise IdentitySnapshotError(
            f"--identity-snapshot {out_uri}: no snapshot of {table_uri} at write {at_write_id} "
            f"written with identity columns (found: {seen or 'none'}); write one with "
            f"compact --include-identity at write {at_write_id}, or take a full snapshot"
        )
    return IdentitySnapshot(usable[-1], fs)


def _anti(rows_ids: pa.Table, other: pa.Table) -> pa.Array:
    """A mask of the rows (by identity) that ``other`` lacks."""
    n = rows_ids.num_rows
    if n == 0:
        return pa.array([], pa.bool_())
    positions = arange(n)
    keyed = rows_ids.append_column("__p", positions)
    kept = keyed.join(other, keys=list(IDENTITY), join_type="left anti")["__p"]
    return pc.is_in(positions, value_set=kept.combine_chunks())


def _ids_of(table: pa.Table) -> pa.Table:
    return pa.table(
        {
            IDENTITY[0]: pc.cast(table[_SNAPSHOT_IDENTITY[0]], pa.int64()),
            IDENTITY[1]: pc.cast(table[_SNAPSHOT_IDENTITY[1]], pa.int32()),
            IDENTITY[2]: pc.cast(table[_SNAPSHOT_IDENTITY[2]], pa.int64()),
        }
    )


def diff_changes(
    bucket_slice: BucketSlice,
    fs: AbstractFileSystem,
    columns: TableColumns,
    write_ids: ValidWriteIdList,
    at_a: IdentitySnapshot,
    *,
    batch_rows: int = 131_072,
    timestamp_unit: str = "us",
) -> SliceChanges:
    """The slice's changes between the snapshot at A and the read view at B, by identity.

    :param bucket_slice: the slice at B.
    :param fs: the table's filesystem.
    :param columns: the table's columns at B.
    :param write_ids: the write-id list at B.
    :param at_a: the snapshot at A.
    :param batch_rows: rows read at a time.
    :param timestamp_unit: unit of timestamp columns.
    """
    names = list(columns.names)
    fields = columns.arrow_fields(timestamp_unit)
    files_a = at_a.slice_files(bucket_slice.key)
    ids_a = [_ids_of(_read(at_a.fs, p, list(_SNAPSHOT_IDENTITY))) for p in files_a]
    schema_ids = pa.schema(
        [(IDENTITY[0], pa.int64()), (IDENTITY[1], pa.int32()), (IDENTITY[2], pa.int64())]
    )
    at_a_ids = pa.concat_tables(ids_a) if ids_a else schema_ids.empty_table()
    reader = SliceReader(
        bucket_slice, fs, columns, write_ids, batch_rows=batch_rows, timestamp_unit=timestamp_unit
    )
    keys = None
    if bucket_slice.delete_delta_files:
        keys = DeleteKeySet.from_batches(reader.delete_batches())
    live_ids, inserted = [], []
    for batch in reader.data_batches():
        keep = batch.visible
        hits = keys.match(batch.original_transaction, batch.bucket, batch.row_id) if keys else None
        if hits is not None:
            keep = pc.invert(hits) if keep is None else pc.and_(keep, pc.invert(hits))
        identity = [batch.original_transaction, batch.bucket, batch.row_id]
        values = list(batch.columns)
        if keep is not None:
            identity = [pc.filter(a, keep) for a in identity]
            values = [pc.filter(a, keep) for a in values]
        ids = pa.Table.from_arrays(identity, schema=schema_ids)
        live_ids.append(ids)
        new = _anti(ids, at_a_ids)
        if pc.any(new).as_py():
            part = pa.Table.from_arrays(
                [pc.filter(a, new) for a in values + identity],
                schema=pa.schema(list(fields) + list(schema_ids)),
            )
            inserted.append(part)
    at_b_ids = pa.concat_tables(live_ids) if live_ids else schema_ids.empty_table()
    deleted = []
    for path in files_a:
        table = _read(at_a.fs, path, None)
        ids = _ids_of(table)
        gone = _anti(ids, at_b_ids)
        if pc.any(gone).as_py():
            deleted.append(_as_columns(table.filter(gone), fields).hstack_ids(ids.filter(gone)))
    insert_rows = _bookkeep(inserted, fields, schema_ids, names, kind=0)
    delete_rows = _bookkeep(deleted, fields, schema_ids, names, kind=1)
    rows = pa.concat_tables([insert_rows, delete_rows])
    rows_read = reader.rows_in_files + at_a_ids.num_rows
    return SliceChanges(rows, rows_read, rows_read - rows.num_rows, 0)


def _read(fs: AbstractFileSystem, path: str, columns: list[str] | None) -> pa.Table:
    with fs.open(path, "rb") as handle:
        return pq.read_table(handle, columns=columns)


class _Values:
    """A snapshot's rows as the table's columns at B (by name; a column it lacks is null)."""

    def __init__(self, table: pa.Table, fields: list[pa.Field]) -> None:
        lowered = {n.lower(): n for n in table.column_names}
        self.columns = []
        for f in fields:
            name = lowered.get(f.name.lower())
            if name is None:
                self.columns.append(pa.nulls(table.num_rows, f.type))
            else:
                self.columns.append(pc.cast(table[name], f.type))
        self.fields = fields

    def hstack_ids(self, ids: pa.Table) -> pa.Table:
        return pa.Table.from_arrays(
            self.columns + list(ids.columns), schema=pa.schema(self.fields + list(ids.schema))
        )


def _as_columns(table: pa.Table, fields: list[pa.Field]) -> _Values:
    return _Values(table, fields)


def _bookkeep(
    parts: list[pa.Table], fields: list[pa.Field], ids: pa.Schema, names: list[str], *, kind: int
) -> pa.Table:
    schema = pa.schema(list(fields) + list(ids))
    table = pa.concat_tables(parts) if parts else schema.empty_table()
    n = table.num_rows
    writer = table[IDENTITY[0]]  # the row's originalTransaction: the write that inserted it
    table = table.append_column(ROW_WRITE, writer)
    commit = writer if kind == 0 else pa.nulls(n, pa.int64())
    zero = pa.repeat(pa.scalar(0, pa.int64()), n)
    return bookkeeping_rows(
        table,
        names,
        kind=kind,
        commit=commit,
        statement=pc.cast(
            pc.bit_wise_and(table[IDENTITY[1]], pa.scalar(0xFFF, pa.int32())), pa.int64()
        )
        if kind == 0
        else zero,
        phase=pa.repeat(pa.scalar(1 if kind == 0 else 0, pa.int64()), n),
    )


__all__ = [
    "IdentitySnapshot",
    "IdentitySnapshotError",
    "diff_changes",
    "find_identity_snapshot",
    "snapshot_write_id",
]
