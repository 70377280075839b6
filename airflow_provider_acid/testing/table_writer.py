"""A simulator of Hive 3 transactions that writes real ACID table folders through fsspec.

:class:`AcidTableWriter` plays the part of Hive (and of its metastore's write-id bookkeeping) for
one table: inserts, deletes, updates (split update: a delete event plus an insert event),
multi-statement writes, aborted and open writes, pre-ACID original files, INSERT OVERWRITE,
schema changes (:meth:`AcidTableWriter.alter_columns`: renames, added columns, widened types) and
major/minor compaction. Every operation writes the folders and ORC files Hive 3 would write,
and the simulator keeps, independently of those files, the logical history needed to say which
rows a correct reader must return: :meth:`AcidTableWriter.expected_rows`.

Example::

    table = AcidTableWriter("memory://warehouse/t", [("id", "bigint"), ("name", "string")],
                            partition_columns=[("dt", "string")], buckets=2, bucket_by="id")
    table.insert([{"id": 1, "name": "a", "dt": "2024-01-01"}])
    table.delete(lambda row: row["id"] == 1)
    table.valid_write_ids()       # 'default.t:2:9223372036854775807::'
    table.expected_rows()         # pyarrow.Table with id, name, dt
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from . import compaction
from .acid_format import encode_bucket_v1
from .acid_layout import original_file_name
from .orc_types import struct_type
from .orc_writer import WrittenFile
from .row_events import RowEvents, SetValues, StatementResult, Where
from .row_history import (
    BUCKET,
    ORIGINAL_TXN,
    POSITION,
    ROW_ID,
    RowHistory,
    arange,
)
from .table_columns import (
    Column,
    arrow_schema,
    check_alter,
    check_column_names,
    columns_of,
    evolve_column,
)
from .table_files import TableFiles
from .table_layout import TableLayout
from .write_history import Write, WriteHistory, WriteIdSnapshot, WriteState

__all__ = ["AcidTableWriter", "StatementResult", "Transaction"]

_MAX_ORIGINAL_COPY = 9


class Transaction:
    """An open write id (one Hive transaction on this table) taking several statements.

    Each call is one statement: ``delta_W_W_0000``, ``delta_W_W_0001``, ... Use as a context
    manager to commit on success and abort on an exception; otherwise call :meth:`commit` or
    :meth:`abort`, or leave it open.
    """

    def __init__(self, table: AcidTableWriter, write_id: int) -> None:
        self.table = table
        self.write_id = write_id

    @property
    def state(self) -> WriteState:
        return self.table.write_state(self.write_id)

    def insert(
        self, rows: Any, partition: Any = None, statement_id: int | None = None
    ) -> StatementResult:
        return self.table.insert(rows, partition, write_id=self.write_id, statement_id=statement_id)

    def insert_overwrite(
        self, rows: Any, partition: Any = None, statement_id: int | None = None
    ) -> StatementResult:
        return self.table.insert(
            rows, partition, write_id=self.write_id, statement_id=statement_id, overwrite=True
        )

    def delete(
        self, where: Where, partition: Any = None, statement_id: int | None = None
    ) -> StatementResult:
        return self.table.delete(
            where, partition, write_id=self.write_id, statement_id=statement_id
        )

    def update(
        self, where: Where, set: SetValues, partition: Any = None, statement_id: int | None = None
    ) -> StatementResult:
        return self.table.update(
            where, set, partition, write_id=self.write_id, statement_id=statement_id
        )

    def commit(self) -> None:
        self.table.commit(self.write_id)

    def abort(self) -> None:
        self.table.abort(self.write_id)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.state is WriteState.OPEN:
            if exc_type is None:
                self.commit()
            else:
                self.abort()

    def __repr__(self) -> str:
        return f"Transaction(write_id={self.write_id}, state={self.state.value})"


class AcidTableWriter(RowEvents):
    """Simulates Hive 3 writing one transactional table under ``root`` (any fsspec URL).

    :param root: table folder, e.g. ``/tmp/wh/t`` or ``memory://wh/t``.
    :param columns: table columns: an Arrow schema, ``(name, hive type)`` pairs or a mapping.
    :param partition_columns: partition columns (same forms; a bare name means ``string``).
    :param buckets: number of buckets (``bucket_00000`` ... files per folder).
    :param bucket_by: bucketing column(s); rows go to Hive's bucket for their value
        (``bucketing_version=2`` Murmur3). Without it each statement splits the rows of a
        partition into ``buckets`` contiguous chunks (one per writer task), starting at the
        bucket after the one the previous statement started at.
    :param filesystem: fsspec filesystem; by default derived from ``root``.
    :param stripe_rows: rows per ORC stripe (files with more rows have several stripes).
    :param compression: ORC compression (``zlib`` like Hive, ``snappy``, ``zstd``, ``none``...).
    :param orc_writer: ``auto`` (pyarrow's fast ORC writer unless a char/varchar column needs
        pyorc), ``pyarrow`` or ``pyorc``.
    :param transactional_properties: ``"default"`` (full ACID) or ``"insert_only"``.
    :param database: database name used in :meth:`valid_write_ids`.
    :param table_name: table name (default: the last component of ``root``).
    :param seed: seed of the random generator :meth:`sample_identities` uses.
    """

    def __init__(
        self,
        root: str,
        columns: Any,
        partition_columns: Any = (),
        *,
        buckets: int = 1,
        bucket_by: str | Sequence[str] | None = None,
        filesystem: Any = None,
        stripe_rows: int = 100_000,
        compression: str = "zlib",
        orc_writer: str = "auto",
        transactional_properties: str = "default",
        database: str = "default",
        table_name: str | None = None,
        seed: int = 0,
    ) -> None:
        if filesystem is None:
            filesystem, path = fsspec.core.url_to_fs(root)
        else:
            path = filesystem._strip_protocol(root)
        self.root = root
        self.fs = filesystem
        self.path = path.rstrip("/")
        self.columns = columns_of(columns)
        self.partition_columns = columns_of(partition_columns)
        check_column_names(self.columns, self.partition_columns)
        if not 1 <= buckets <= 4096:
            raise ValueError("buckets must be in 1..4096")
        self.buckets = buckets
        self.bucket_by = (bucket_by,) if isinstance(bucket_by, str) else tuple(bucket_by or ())
        names = {c.name for c in self.columns}
        for name in self.bucket_by:
            if name not in names:
                raise ValueError(f"bucketing column {name!r} is not a table column")
        self.stripe_rows = stripe_rows
        self.compression = compression
        self.orc_writer = orc_writer
        if transactional_properties not in ("default", "insert_only"):
            raise ValueError("transactional_properties must be 'default' or 'insert_only'")
        self.transactional_properties = transactional_properties
        self.database = database
        self.table_name = table_name or self.path.rsplit("/", 1)[-1]
        self.random = random.Random(seed)

        self.row_type = struct_type((c.name, c.type) for c in self.columns)
        self.arrow_schema = arrow_schema(self.columns)
        self.partition_schema = arrow_schema(self.partition_columns)
        self._round_robin = 0

        #: The simulator's parts: the metastore's write ids, the logical rows (what readers
        #: must see), the partitions and their folders, and the files.
        self.history = WriteHistory()
        self.row_history = RowHistory(self.arrow_schema)
        self.layout = TableLayout(self.path, self.partition_columns)
        self.files = TableFiles(
            self.fs,
            self.row_type,
            insert_only=self.insert_only,
            stripe_rows=stripe_rows,
            compression=compression,
            engine=orc_writer,
        )
        self.fs.makedirs(self.path, exist_ok=True)

    # ------------------------------------------------------------------------------------
    # Public properties
    # ------------------------------------------------------------------------------------

    @property
    def insert_only(self) -> bool:
        return self.transactional_properties == "insert_only"

    @property
    def full_name(self) -> str:
        return f"{self.database}.{self.table_name}"

    @property
    def schema(self) -> pa.Schema:
        """Arrow schema of what a reader returns: table columns then partition columns."""
        return pa.schema(list(self.arrow_schema) + list(self.partition_schema))

    def partitions(self) -> list[dict[str, Any]]:
        """Partition specs written so far (column name -> value), in creation order."""
        return self.layout.specs()

    def partition_path(self, partition: Any) -> str:
        """Filesystem path of a partition folder."""
        p = self.layout.partitions[self.layout.static(partition)]
        return self.layout.join(p.path)

    def list_files(self) -> list[str]:
        """Every file under the table folder, sorted (paths relative to the table folder)."""
        prefix = self.path + "/"
        return sorted(f[len(prefix) :] for f in self.fs.find(self.path) if f.startswith(prefix))

    def write_state(self, write_id: int) -> WriteState:
        return self.history.state(write_id)

    # ------------------------------------------------------------------------------------
    # Transactions
    # ------------------------------------------------------------------------------------

    def begin(self) -> Transaction:
        """Open a transaction: allocate a transaction id and the table's next write id."""
        return Transaction(self, self.history.begin().write_id)

    def commit(self, write_id: int) -> None:
        self.history.commit(write_id)

    def abort(self, write_id: int) -> None:
        """Abort a write: its files stay on storage, but readers must ignore them."""
        self.history.abort(write_id)

    def valid_write_ids(self) -> str:
        """Hive's serialized valid write id list of the table right now.

        e.g. ``default.t:5:9223372036854775807::3`` (write 3 aborted, none open).
        """
        return str(self.write_id_snapshot())

    def write_id_snapshot(self) -> WriteIdSnapshot:
        return self.history.snapshot(self.full_name)

    def valid_transactions(self) -> str:
        """Hive's serialized ``ValidReadTxnList``: ``hwm:minOpenTxn:open,txns:aborted,txns``."""
        return self.history.valid_transactions()

    # ------------------------------------------------------------------------------------
    # Statements
    # ------------------------------------------------------------------------------------

    def insert(
        self,
        rows: Any,
        partition: Any = None,
        *,
        write_id: int | None = None,
        statement_id: int | None = None,
        overwrite: bool = False,
    ) -> StatementResult:
        """INSERT rows (a pyarrow Table, a list of dicts or a column mapping).

        With ``partition`` (a mapping, a sequence of values, or a single value) all rows go to
        that partition and must not carry partition columns; otherwise the rows carry the
        partition columns (dynamic partitioning). Without ``write_id`` the insert runs in its
        own, committed, write; with it, it is the next statement of that open write. With
        ``overwrite``, an INSERT OVERWRITE (see :meth:`insert_overwrite`).
        """
        with self._statement(write_id, statement_id) as (write, stmt):
            return self._insert(rows, partition, write, stmt, overwrite=overwrite)

    def insert_overwrite(
        self, rows: Any, partition: Any = None, **write_and_statement_id: int | None
    ) -> StatementResult:
        """INSERT OVERWRITE: write ``base_W`` holding just these rows in each partition touched.

        Everything older in those partitions becomes invisible. With a static ``partition`` and
        no rows, an empty ``base_W`` truncates the partition. ``write_id``, ``statement_id``: as
        for :meth:`insert`.
        """
        return self.insert(rows, partition, overwrite=True, **write_and_statement_id)

    def delete(
        self,
        where: Where = None,
        partition: Any = None,
        *,
        write_id: int | None = None,
        statement_id: int | None = None,
    ) -> StatementResult:
        """DELETE the rows matching ``where`` and write ``delete_delta_W_W_S`` folders.

        ``where`` is a function of the row (a dict of table and partition columns), a pyarrow
        compute expression, a table of identities (``originalTransaction``, ``bucket``,
        ``rowId`` and, unless ``partition`` is given, the partition columns), a sequence of
        :class:`RowIdentity` (needs ``partition`` in a partitioned table), or None for all rows.
        Only rows this write can see are candidates (committed writes and its own statements).
        """
        self._require_full_acid("DELETE")
        with self._statement(write_id, statement_id) as (write, stmt):
            targets = self._targets(write, where, partition)
            files = self._write_delete_events(write, stmt, targets)
            return StatementResult(
                write.write_id, stmt, self._empty_identities(), self._identity_view(targets), files
            )

    def update(
        self,
        where: Where,
        set: SetValues,
        partition: Any = None,
        *,
        write_id: int | None = None,
        statement_id: int | None = None,
    ) -> StatementResult:
        """UPDATE as Hive 3 does: delete events for the old rows plus inserts of the new rows.

        ``set`` maps column names to a constant, a pyarrow compute expression or a function of
        the row; or is a function of the row returning such a mapping. Partition and bucketing
        columns cannot be updated (as in Hive). The new rows keep their partition and bucket
        and get new identities ``(W, bucket of statement S, 0..)`` in ``delta_W_W_S``.
        """
        self._require_full_acid("UPDATE")
        with self._statement(write_id, statement_id) as (write, stmt):
            targets = self._targets(write, where, partition)
            new_data = self._updated_data(targets, set)
            files = list(self._write_delete_events(write, stmt, targets))
            new_rows = targets.drop_columns(self.arrow_schema.names).append_column(
                POSITION, arange(targets.num_rows)
            )
            for name in self.arrow_schema.names:
                new_rows = new_rows.append_column(name, new_data[name])
            inserted, insert_files = self._write_insert_events(write, stmt, new_rows)
            files.extend(insert_files)
            return StatementResult(
                write.write_id,
                stmt,
                inserted,
                self._identity_view(targets),
                tuple(files),
            )

    def add_original_files(
        self,
        rows: Any,
        bucket: int = 0,
        *,
        copies: int = 0,
        partition: Any = None,
    ) -> list[WrittenFile]:
        """Write pre-ACID files ``{bucket:06d}_0`` and ``_copy_1`` ... ``_copy_{copies}``.

        ``rows`` (one table split evenly over the ``copies + 1`` files, or a list of tables,
        one per file) land at the partition root with the plain table schema. Their rows have
        the synthetic identity ``(0, encode_bucket_v1(bucket), position)``, the position counted
        across the bucket's original files in name order. Call again to add more copies.
        """
        if not 0 <= bucket <= 4095:
            raise ValueError("bucket must be in 0..4095")
        parts: list[pa.Table]
        if isinstance(rows, list | tuple) and rows and not isinstance(rows[0], Mapping):
            parts = [self._to_table(r, with_partitions=False) for r in rows]
        else:
            table = self._to_table(rows, with_partitions=False)
            n, k = table.num_rows, copies + 1
            bounds = [n * i // k for i in range(k + 1)]
            parts = [table.slice(bounds[i], bounds[i + 1] - bounds[i]) for i in range(k)]
        p = self.layout.partitions[self.layout.static(partition, create=True)]
        if any(d.kind == "base" for d in p.directories):
            raise ValueError("the partition has a base: readers would ignore new original files")
        written = []
        for part in parts:
            copy = p.original_copies.get(bucket, 0)
            if copy > _MAX_ORIGINAL_COPY:
                # Hive orders original files by path: _copy_10 would sort before _copy_2 and
                # shift the row ids of the files already written.
                raise ValueError(f"at most {_MAX_ORIGINAL_COPY} copies per bucket")
            first_row = p.original_rows.get(bucket, 0)
            path = self.layout.join(p.path, original_file_name(bucket, copy))
            written.append(self.files.write_plain(path, part))
            bucket_field = encode_bucket_v1(bucket)
            self.row_history.record_rows("original", 0, p.index, 0, bucket_field, first_row, part)
            p.original_copies[bucket] = copy + 1
            p.original_rows[bucket] = first_row + part.num_rows
        return written

    # ------------------------------------------------------------------------------------
    # Schema changes
    # ------------------------------------------------------------------------------------

    def alter_columns(self, columns: Any) -> None:
        """ALTER TABLE: the table's columns become ``columns`` (same forms as the constructor).

        Compared by position, as Hive does: a column may be renamed, change type as Hive allows
        (integer and float widening, widening to decimal, string/varchar/char) and columns may
        be added at the end; dropping columns is not simulated. Files already written keep
        their schema; new files (and compactions) are written with the new one.
        :meth:`expected_rows` then gives what Hive shows: old rows by position, converted,
        added columns null. Bucketing columns cannot change.
        """
        new = columns_of(columns)
        check_column_names(new, self.partition_columns)
        old = self.columns
        check_alter(old, new)
        for index, column in enumerate(old):
            if column.name in self.bucket_by and new[index] != column:
                raise ValueError(f"bucketing column {column.name!r} cannot be changed")
        self.columns = new
        self.row_type = struct_type((c.name, c.type) for c in new)
        self.arrow_schema = arrow_schema(new)
        self.row_history.evolve(
            self.arrow_schema,
            lambda index, values: evolve_column(values, old[index].type, new[index].type),
        )
        self.files.set_row_type(self.row_type)

    def rename_column(self, old_name: str, new_name: str) -> None:
        """ALTER TABLE ... CHANGE old_name new_name (same type)."""
        self.alter_columns(
            [Column(new_name, c.type) if c.name == old_name else c for c in self.columns]
        )

    def change_column_type(self, name: str, hive_type: str) -> None:
        """ALTER TABLE ... CHANGE name name hive_type."""
        self.alter_columns(
            [Column.of((name, hive_type)) if c.name == name else c for c in self.columns]
        )

    def add_columns(self, columns: Any) -> None:
        """ALTER TABLE ... ADD COLUMNS (at the end)."""
        self.alter_columns(list(self.columns) + list(columns_of(columns)))

    # ------------------------------------------------------------------------------------
    # Compaction
    # ------------------------------------------------------------------------------------

    def compact_major(self, partition: Any = None) -> list[str]:
        """Major compaction: write ``base_W_vT`` per partition from its base, deltas, originals.

        W is the highest write id compacted (only writes below the lowest open write are),
        T the compactor's transaction id. Live rows keep their original identities. Old
        folders are left in place (Hive's cleaner removes them later). Returns the new folders.
        """
        return compaction.compact_major(self, partition)

    def compact_minor(self, partition: Any = None) -> list[str]:
        """Minor compaction: merge the current deltas into ``delta_A_B_vT`` and
        ``delete_delta_A_B_vT`` (identities unchanged, deletes not applied).

        Only deltas above the current base and below the lowest open write are compacted;
        aborted writes' events are dropped. Returns the new folders.
        """
        return compaction.compact_minor(self, partition)

    # ------------------------------------------------------------------------------------
    # What a reader must see
    # ------------------------------------------------------------------------------------

    def expected_rows(
        self, snapshot: str | WriteIdSnapshot | None = None, *, with_row_id: bool = False
    ) -> pa.Table:
        """The rows a correct reader returns: table columns then partition columns.

        By default for the committed writes now; with ``snapshot`` (a serialized valid write id
        list, e.g. an earlier :meth:`valid_write_ids`) for that snapshot. Aborted and open
        writes are excluded. Rows come in (partition, originalTransaction, bucket, rowId)
        order. ``with_row_id`` adds Hive's ``row__id`` struct (writeid, bucketid, rowid).
        """
        rows = self.row_history.live(self.history.validity(snapshot), sort=True)
        table = self._user_view(rows)
        if with_row_id:
            row_id = pa.StructArray.from_arrays(
                [
                    rows[ORIGINAL_TXN].combine_chunks(),
                    rows[BUCKET].combine_chunks(),
                    rows[ROW_ID].combine_chunks(),
                ],
                names=["writeid", "bucketid", "rowid"],
            )
            table = table.append_column("row__id", row_id)
        return table

    def expected_identities(self, snapshot: str | WriteIdSnapshot | None = None) -> pa.Table:
        """Partition columns, ``originalTransaction``, ``bucket``, ``rowId`` of the live rows."""
        return self._identity_view(
            self.row_history.live(self.history.validity(snapshot), sort=True)
        )

    def sample_identities(
        self, fraction: float, *, partition: Any = None, seed: int | None = None
    ) -> pa.Table:
        """A random sample of about ``fraction`` of the committed live rows, as an identity
        table ready to pass to :meth:`delete` or :meth:`update` as ``where``.

        Each row is drawn independently (deterministic for the table's ``seed`` and history,
        or for ``seed``).
        """
        if not 0 <= fraction <= 1:
            raise ValueError("fraction must be in [0, 1]")
        rng = self.random if seed is None else random.Random(seed)
        parts = None if partition is None else {self.layout.static(partition)}
        rows = self.row_history.live(self.history.committed, parts)
        draws = pc.random(rows.num_rows, initializer=rng.randrange(1 << 62))
        return self._identity_view(rows.filter(pc.less(draws, fraction)))

    # ------------------------------------------------------------------------------------
    # Internals: writes and visibility
    # ------------------------------------------------------------------------------------

    class _StatementContext:
        def __init__(self, table: AcidTableWriter, write_id: int | None, statement_id: int | None):
            self.table = table
            self.autocommit = write_id is None
            self.txn = table.begin() if write_id is None else None
            self.write = table.history.open_write(self.txn.write_id if self.txn else write_id)
            self.statement_id = statement_id

        def __enter__(self) -> tuple[Write, int]:
            try:
                return self.write, self.write.statement(self.statement_id)
            except BaseException:
                self.__exit__(ValueError, None, None)
                raise

        def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
            if self.autocommit:
                if exc_type is None:
                    self.table.commit(self.write.write_id)
                else:
                    self.table.abort(self.write.write_id)

    def _statement(self, write_id: int | None, statement_id: int | None) -> _StatementContext:
        return AcidTableWriter._StatementContext(self, write_id, statement_id)

    def _require_full_acid(self, what: str) -> None:
        if self.insert_only:
            raise ValueError(f"{what} is not supported on an insert-only table")
