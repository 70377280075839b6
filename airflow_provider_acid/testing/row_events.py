"""The row events of a simulated statement: rows in, insert and delete events out.

:class:`RowEvents` is the part of :class:`~.table_writer.AcidTableWriter` that turns a
statement's rows into ACID events: the rows as a table of the table's types, their buckets
(Hive's hash, or a writer task each), the insert events and delete events written per partition
and bucket (and recorded in the row history), the rows a DELETE or UPDATE targets and the new
values of an UPDATE. What a statement did is a :class:`StatementResult`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from .acid_format import RowIdentity, encode_bucket_v1
from .bucketing import hive_bucket_ids
from .orc_writer import WrittenFile
from .row_history import (
    BUCKET,
    IDENTITY_NAMES,
    ORIGINAL_TXN,
    PARTITION,
    POSITION,
    ROW_ID,
    ROW_KEY,
    WRITE_ID,
    arange,
)
from .table_columns import (
    rows_to_table,
)
from .table_layout import Directory
from .write_history import Write


@dataclass(frozen=True)
class StatementResult:
    """What one statement did.

    ``inserted`` lists the identities given to inserted rows, in the order the rows were passed
    (partition columns plus ``originalTransaction``, ``bucket``, ``rowId``); ``deleted`` the
    identities of the rows deleted (for an update: the old identities, in identity order).
    """

    write_id: int
    statement_id: int
    inserted: pa.Table
    deleted: pa.Table
    files: tuple[WrittenFile, ...] = ()

    @property
    def inserted_identities(self) -> list[RowIdentity]:
        return _identities(self.inserted)

    @property
    def deleted_identities(self) -> list[RowIdentity]:
        return _identities(self.deleted)


def _identities(table: pa.Table) -> list[RowIdentity]:
    cols = [table[n].to_pylist() for n in IDENTITY_NAMES]
    return [RowIdentity(*t) for t in zip(*cols, strict=True)]


Where = (
    Callable[[dict[str, Any]], bool]
    | pc.Expression
    | pa.Table
    | Sequence[RowIdentity | tuple[int, int, int]]
    | None
)
SetValues = Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]


class RowEvents:
    """A statement's rows and events, as a mixin of :class:`~.table_writer.AcidTableWriter`:
    it uses the writer's columns, bucketing, layout, row history, files and filesystem."""

    def _user_view(self, rows: pa.Table) -> pa.Table:
        columns = [rows[c.name] for c in self.columns]
        columns += self.layout.value_columns(rows[PARTITION])
        return pa.Table.from_arrays(columns, schema=self.schema)

    def _identity_view(self, rows: pa.Table) -> pa.Table:
        columns = self.layout.value_columns(rows[PARTITION]) + [
            rows[ORIGINAL_TXN],
            rows[BUCKET],
            rows[ROW_ID],
        ]
        names = [c.name for c in self.partition_columns] + list(IDENTITY_NAMES)
        return pa.Table.from_arrays(columns, names=names)

    def _empty_identities(self) -> pa.Table:
        return self._identity_view(self.row_history.empty())

    # -- rows in ------------------------------------------------------------------------

    def _to_table(self, rows: Any, *, with_partitions: bool) -> pa.Table:
        """Rows as a table of the table columns (+ partition columns) with their Arrow types."""
        target = self.schema if with_partitions else self.arrow_schema
        return rows_to_table(rows, target, self.columns + self.partition_columns)

    def _bucket_ids(self, table: pa.Table) -> pa.Array:
        if self.buckets == 1:
            return pa.repeat(pa.scalar(0, pa.int32()), table.num_rows)
        if self.bucket_by:
            types = {c.name: c.type for c in self.columns}
            return hive_bucket_ids(
                [table[n] for n in self.bucket_by], [types[n] for n in self.bucket_by], self.buckets
            )
        n, k = table.num_rows, self.buckets
        start = self._round_robin
        self._round_robin = (self._round_robin + 1) % k
        chunks = [
            pa.repeat(pa.scalar((start + i) % k, pa.int32()), n * (i + 1) // k - n * i // k)
            for i in range(k)
        ]
        return pa.concat_arrays(chunks)

    # -- events out ---------------------------------------------------------------------

    def _insert(
        self, rows: Any, partition: Any, write: Write, stmt: int, *, overwrite: bool
    ) -> StatementResult:
        static = partition is not None or not self.partition_columns
        table = self._to_table(rows, with_partitions=not static)
        if static:
            index = self.layout.static(partition, create=True)
            codes = pa.repeat(pa.scalar(index, pa.int32()), table.num_rows)
        else:
            codes = self.layout.indexes(table, create=True)
        staged = table.select(self.arrow_schema.names)
        staged = staged.append_column(PARTITION, codes)
        staged = staged.append_column(POSITION, arange(table.num_rows))
        inserted, files = self._write_insert_events(write, stmt, staged, overwrite=overwrite)
        if overwrite:
            touched = set(pc.unique(codes).to_pylist())
            if static:
                touched.add(self.layout.static(partition, create=True))
            for p in sorted(touched):
                self.row_history.record_overwrite(p, write.write_id)
                folder = self.layout.register_directory(
                    self.layout.partitions[p], Directory("base", write.write_id, write.write_id)
                )
                self.files.ensure_version_file(folder)
                self.fs.makedirs(folder, exist_ok=True)
        return StatementResult(write.write_id, stmt, inserted, self._empty_identities(), files)

    def _write_insert_events(
        self, write: Write, stmt: int, staged: pa.Table, *, overwrite: bool = False
    ) -> tuple[pa.Table, tuple[WrittenFile, ...]]:
        """Write insert events for ``staged``: data columns, PARTITION, POSITION (and, for
        updates, BUCKET).

        Rows keep the bucket in ``BUCKET`` when present (updates), else get one assigned.
        Returns the identities in ``POSITION`` order and the files written.
        """
        files = []
        identity_parts = []
        for p_index in sorted(set(pc.unique(staged[PARTITION]).to_pylist())):
            part = staged.filter(pc.equal(staged[PARTITION], p_index))
            p = self.layout.partitions[p_index]
            if BUCKET in part.column_names:
                bucket_ids = pc.cast(
                    pc.bit_wise_and(pc.shift_right(part[BUCKET], 16), 0xFFF), pa.int32()
                )
            else:
                bucket_ids = self._bucket_ids(part)
            if overwrite:
                directory = Directory("base", write.write_id, write.write_id)
                if directory in p.directories:
                    raise ValueError(
                        f"write {write.write_id} already overwrote {p.path or 'the table'}"
                    )
            else:
                directory = Directory("delta", write.write_id, write.write_id, stmt)
            folder = self.layout.register_directory(p, directory)
            for bucket_id in sorted(set(pc.unique(bucket_ids).to_pylist())):
                rows = part.filter(pc.equal(bucket_ids, bucket_id))
                bucket = encode_bucket_v1(bucket_id, stmt)
                data = rows.select(self.arrow_schema.names)
                kind = "base" if overwrite else "delta"
                recorded = self.row_history.record_rows(
                    kind, write.write_id, p_index, write.write_id, bucket, 0, data
                )
                files.append(self.files.write_data_file(folder, bucket_id, recorded))
                identity_parts.append(
                    recorded.select([PARTITION, ORIGINAL_TXN, BUCKET, ROW_ID]).append_column(
                        POSITION, rows[POSITION]
                    )
                )
        if identity_parts:
            identities = pa.concat_tables(identity_parts)
            identities = identities.take(pc.sort_indices(identities[POSITION]))
        else:
            identities = self.row_history.empty().select([PARTITION, ORIGINAL_TXN, BUCKET, ROW_ID])
        return self._identity_view(identities), tuple(files)

    def _targets(self, write: Write, where: Where, partition: Any) -> pa.Table:
        """Rows visible to ``write`` that ``where`` selects (bookkeeping table), in
        (partition, identity) order."""
        w = write.write_id
        parts = None if partition is None else {self.layout.static(partition)}
        visible = self.row_history.live(lambda x: x == w or self.history.committed(x), parts)
        if where is None or not visible.num_rows:
            selected = visible
        elif isinstance(where, pc.Expression):
            view = self._user_view(visible).append_column(POSITION, arange(visible.num_rows))
            selected = visible.take(view.filter(where)[POSITION])
        elif callable(where):
            rows = self._user_view(visible).to_pylist()
            selected = visible.filter(pa.array([bool(where(r)) for r in rows], pa.bool_()))
        else:
            if isinstance(where, pa.Table):
                ids = where
            else:
                triples = [tuple(x) for x in where]
                ids = pa.table(
                    {
                        "originalTransaction": pa.array([t[0] for t in triples], pa.int64()),
                        "bucket": pa.array([t[1] for t in triples], pa.int32()),
                        "rowId": pa.array([t[2] for t in triples], pa.int64()),
                    }
                )
            selected = self._match_identities(visible, ids, parts)
        if selected.num_rows > 1:
            selected = selected.take(pc.sort_indices(selected, [(k, "ascending") for k in ROW_KEY]))
        return selected

    def _match_identities(
        self, visible: pa.Table, ids: pa.Table, parts: set[int] | None
    ) -> pa.Table:
        has_partition_columns = all(c.name in ids.column_names for c in self.partition_columns)
        if self.partition_columns and parts is None:
            if not has_partition_columns:
                raise ValueError("identities of a partitioned table need a partition")
            codes = self.layout.indexes(ids, create=False)
        else:
            codes = pa.repeat(
                pa.scalar(next(iter(parts)) if parts else 0, pa.int32()), ids.num_rows
            )
        wanted = pa.table(
            {
                PARTITION: codes,
                ORIGINAL_TXN: pc.cast(ids["originalTransaction"], pa.int64()),
                BUCKET: pc.cast(ids["bucket"], pa.int32()),
                ROW_ID: pc.cast(ids["rowId"], pa.int64()),
            }
        )
        keys = visible.select(ROW_KEY).append_column(POSITION, arange(visible.num_rows))
        hits = keys.join(wanted, keys=ROW_KEY, join_type="left semi")
        idx = hits[POSITION].combine_chunks()
        return visible.take(pc.take(idx, pc.sort_indices(idx)))

    def _write_delete_events(
        self, write: Write, stmt: int, targets: pa.Table
    ) -> tuple[WrittenFile, ...]:
        files: list[WrittenFile] = []
        if not targets.num_rows:
            return ()
        keys = targets.select(ROW_KEY)
        n = keys.num_rows
        deletes = pa.table(
            {
                PARTITION: keys[PARTITION],
                WRITE_ID: pa.repeat(pa.scalar(write.write_id, pa.int64()), n),
                ORIGINAL_TXN: keys[ORIGINAL_TXN],
                BUCKET: keys[BUCKET],
                ROW_ID: keys[ROW_ID],
            }
        )
        for p_index in sorted(set(pc.unique(deletes[PARTITION]).to_pylist())):
            part = deletes.filter(pc.equal(deletes[PARTITION], p_index))
            p = self.layout.partitions[p_index]
            directory = Directory("delete_delta", write.write_id, write.write_id, stmt)
            folder = self.layout.register_directory(p, directory)
            files.extend(self.files.write_delete_files(folder, part))
            self.row_history.record_deletes(write.write_id, p_index, part)
        return tuple(files)

    def _updated_data(self, targets: pa.Table, set_values: SetValues) -> pa.Table:
        """The new table-column values of the updated rows."""
        view = self._user_view(targets)
        protected = {c.name for c in self.partition_columns} | set(self.bucket_by)
        names = self.arrow_schema.names
        if callable(set_values) and not isinstance(set_values, Mapping):
            rows = view.to_pylist()
            changes = [dict(set_values(r)) for r in rows]
            changed = {k for c in changes for k in c}
            self._check_updatable(changed, protected)
            new_rows = [{**r, **c} for r, c in zip(rows, changes, strict=True)]
            return self._to_table(
                [{n: r[n] for n in names} for r in new_rows], with_partitions=False
            )
        self._check_updatable(set(set_values), protected)
        columns = {n: view[n] for n in names}
        for name, value in set_values.items():
            if isinstance(value, pc.Expression):
                columns[name] = pads.dataset(view).to_table(columns={name: value})[name]
            elif callable(value):
                columns[name] = pa.array([value(r) for r in view.to_pylist()])
            else:
                columns[name] = (
                    pa.repeat(pa.scalar(value), view.num_rows)
                    if value is not None
                    else pa.nulls(view.num_rows)
                )
        return self._to_table(pa.table(columns), with_partitions=False)

    def _check_updatable(self, changed: set[str], protected: set[str]) -> None:
        unknown = changed - set(self.arrow_schema.names) - protected
        if unknown:
            raise ValueError(f"unknown columns in update: {sorted(unknown)}")
        bad = changed & protected
        if bad:
            raise ValueError(f"partition and bucketing columns cannot be updated: {sorted(bad)}")
