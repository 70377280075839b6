"""A simulator of Hive 3 transactions that writes real ACID table folders through fsspec.

:class:`AcidTableWriter` plays the part of Hive (and of its metastore's write-id bookkeeping) for
one table: inserts, deletes, updates (split update: a delete event plus an insert event),
multi-statement writes, aborted and open writes, pre-ACID original files, INSERT OVERWRITE and
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

import datetime as dt
import enum
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from ..acid.hive_types import HiveType
from .acid_format import OPERATION_DELETE, OPERATION_INSERT, RowIdentity, encode_bucket_v1
from .acid_layout import (
    COMPACTOR_MARKER_CONTENT,
    COMPACTOR_MARKER_FILE,
    base_dir_name,
    bucket_file_name,
    delta_dir_name,
    format_partition_value,
    original_file_name,
    partition_dir_name,
    write_acid_version_file,
)
from .bucketing import hive_bucket_ids
from .orc_types import hive_type_of_arrow, orc_arrow_type, parse_hive_type, struct_type
from .orc_writer import WrittenFile, write_acid_file, write_plain_file

__all__ = [
    "AcidTableWriter",
    "Column",
    "StatementResult",
    "Transaction",
    "WriteIdSnapshot",
    "WriteState",
    "generate_demo_table",
]

#: ``minOpenWriteId`` of a valid-write-id list when no write is open (Java ``Long.MAX_VALUE``).
NO_OPEN_WRITE_ID = 9223372036854775807

# Internal bookkeeping columns (data columns may not use the prefix).
_P = "__acid_partition"
_W = "__acid_write"
_O = "__acid_otxn"
_B = "__acid_bucket"
_R = "__acid_rowid"
_IDX = "__acid_index"
_KEY = [_P, _O, _B, _R]
_IDENTITY_NAMES = ("originalTransaction", "bucket", "rowId")
_MAX_ORIGINAL_COPY = 9


class WriteState(str, enum.Enum):
    """State of a write id in the (simulated) metastore."""

    OPEN = "open"
    COMMITTED = "committed"
    ABORTED = "aborted"


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


def _columns(spec: Any) -> tuple[Column, ...]:
    if isinstance(spec, pa.Schema):
        return tuple(Column.of(f) for f in spec)
    if isinstance(spec, Mapping):
        return tuple(Column.of(item) for item in spec.items())
    if isinstance(spec, str):
        return (Column.of(spec),)
    return tuple(Column.of(item) for item in spec)


@dataclass(frozen=True)
class WriteIdSnapshot:
    """Hive's ``ValidReaderWriteIdList`` of one table: which write ids a reader may see.

    ``str(snapshot)`` is Hive's serialized form
    ``db.table:highWatermark:minOpenWriteId:open,ids:aborted,ids``.
    """

    table_name: str
    high_watermark: int
    open_write_ids: tuple[int, ...] = ()
    aborted_write_ids: tuple[int, ...] = ()

    @property
    def min_open_write_id(self) -> int:
        return min(self.open_write_ids, default=NO_OPEN_WRITE_ID)

    def is_valid(self, write_id: int) -> bool:
        """Whether rows written by ``write_id`` are visible (0, the original files, always is)."""
        return (
            write_id <= self.high_watermark
            and write_id not in self.open_write_ids
            and write_id not in self.aborted_write_ids
        )

    def __str__(self) -> str:
        open_ids = ",".join(map(str, sorted(self.open_write_ids)))
        aborted = ",".join(map(str, sorted(self.aborted_write_ids)))
        return (
            f"{self.table_name}:{self.high_watermark}:{self.min_open_write_id}:{open_ids}:{aborted}"
        )

    @classmethod
    def parse(cls, text: str) -> WriteIdSnapshot:
        """Parse the serialized form (the inverse of ``str()``)."""
        parts = text.split(":")
        if len(parts) != 5:
            raise ValueError(f"not a serialized valid write id list: {text!r}")
        name, hwm, _min_open, open_ids, aborted = parts

        def ids(s: str) -> tuple[int, ...]:
            return tuple(int(x) for x in s.split(",") if x)

        return cls(name, int(hwm), ids(open_ids), ids(aborted))


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
    cols = [table[n].to_pylist() for n in _IDENTITY_NAMES]
    return [RowIdentity(*t) for t in zip(*cols, strict=True)]


@dataclass(frozen=True)
class _Directory:
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
class _Partition:
    index: int
    values: tuple[Any, ...]
    path: str  # relative folder, "" for an unpartitioned table
    directories: list[_Directory] = field(default_factory=list)
    original_copies: dict[int, int] = field(default_factory=dict)  # bucket -> files written
    original_rows: dict[int, int] = field(default_factory=dict)  # bucket -> rows written


@dataclass
class _Write:
    write_id: int
    txn_id: int
    state: WriteState = WriteState.OPEN
    statements: set[int] = field(default_factory=set)

    def statement(self, statement_id: int | None) -> int:
        if statement_id is None:
            statement_id = max(self.statements, default=-1) + 1
        if statement_id in self.statements:
            raise ValueError(f"statement {statement_id} of write {self.write_id} already used")
        self.statements.add(statement_id)
        return statement_id


@dataclass(frozen=True)
class _RowBatch:
    """Inserted rows: bookkeeping columns plus the data columns."""

    kind: str  # "original" | "delta" | "base"
    write_id: int
    partition: int
    table: pa.Table


@dataclass(frozen=True)
class _DeleteBatch:
    write_id: int
    partition: int
    table: pa.Table  # _P, _W, _O, _B, _R


Where = (
    Callable[[dict[str, Any]], bool]
    | pc.Expression
    | pa.Table
    | Sequence[RowIdentity | tuple[int, int, int]]
    | None
)
SetValues = Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]


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
        return self.table.insert_overwrite(
            rows, partition, write_id=self.write_id, statement_id=statement_id
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


class AcidTableWriter:
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
        self.columns = _columns(columns)
        self.partition_columns = _columns(partition_columns)
        self._check_names()
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
        self.arrow_schema = pa.schema(
            [pa.field(c.name, orc_arrow_type(c.type)) for c in self.columns]
        )
        self.partition_schema = pa.schema(
            [pa.field(c.name, orc_arrow_type(c.type)) for c in self.partition_columns]
        )
        self._writes: dict[int, _Write] = {}
        self._next_write_id = 1
        self._next_txn_id = 1
        self._partitions: list[_Partition] = []
        self._partition_keys: dict[tuple[str, ...], int] = {}
        self._row_batches: list[_RowBatch] = []
        self._delete_batches: list[_DeleteBatch] = []
        self._overwrites: list[tuple[int, int]] = []  # (partition, write id)
        self._round_robin = 0
        self._folders_with_version_file: set[str] = set()
        self._rows_cache: pa.Table | None = None
        self.fs.makedirs(self.path, exist_ok=True)
        if not self.partition_columns:
            self._partition_index(())

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
        names = [c.name for c in self.partition_columns]
        return [dict(zip(names, p.values, strict=True)) for p in self._partitions if names]

    def partition_path(self, partition: Any) -> str:
        """Filesystem path of a partition folder."""
        p = self._partitions[self._static_partition(partition)]
        return self._join(p.path)

    def list_files(self) -> list[str]:
        """Every file under the table folder, sorted (paths relative to the table folder)."""
        prefix = self.path + "/"
        return sorted(f[len(prefix) :] for f in self.fs.find(self.path) if f.startswith(prefix))

    def write_state(self, write_id: int) -> WriteState:
        return self._writes[write_id].state

    # ------------------------------------------------------------------------------------
    # Transactions
    # ------------------------------------------------------------------------------------

    def begin(self) -> Transaction:
        """Open a transaction: allocate a transaction id and the table's next write id."""
        write = _Write(self._next_write_id, self._allocate_txn())
        self._writes[write.write_id] = write
        self._next_write_id += 1
        return Transaction(self, write.write_id)

    def commit(self, write_id: int) -> None:
        self._open_write(write_id).state = WriteState.COMMITTED

    def abort(self, write_id: int) -> None:
        """Abort a write: its files stay on storage, but readers must ignore them."""
        self._open_write(write_id).state = WriteState.ABORTED

    def valid_write_ids(self) -> str:
        """Hive's serialized valid write id list of the table right now.

        e.g. ``default.t:5:9223372036854775807::3`` (write 3 aborted, none open).
        """
        return str(self.write_id_snapshot())

    def write_id_snapshot(self) -> WriteIdSnapshot:
        writes = self._writes.values()
        return WriteIdSnapshot(
            self.full_name,
            max(self._writes, default=0),
            tuple(sorted(w.write_id for w in writes if w.state is WriteState.OPEN)),
            tuple(sorted(w.write_id for w in writes if w.state is WriteState.ABORTED)),
        )

    def valid_transactions(self) -> str:
        """Hive's serialized ``ValidReadTxnList``: ``hwm:minOpenTxn:open,txns:aborted,txns``."""
        writes = self._writes.values()
        open_txns = sorted(w.txn_id for w in writes if w.state is WriteState.OPEN)
        aborted = sorted(w.txn_id for w in writes if w.state is WriteState.ABORTED)
        return (
            f"{self._next_txn_id - 1}:{min(open_txns, default=NO_OPEN_WRITE_ID)}:"
            f"{','.join(map(str, open_txns))}:{','.join(map(str, aborted))}"
        )

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
    ) -> StatementResult:
        """INSERT rows (a pyarrow Table, a list of dicts or a column mapping).

        With ``partition`` (a mapping, a sequence of values, or a single value) all rows go to
        that partition and must not carry partition columns; otherwise the rows carry the
        partition columns (dynamic partitioning). Without ``write_id`` the insert runs in its
        own, committed, write; with it, it is the next statement of that open write.
        """
        with self._statement(write_id, statement_id) as (write, stmt):
            return self._insert(rows, partition, write, stmt, overwrite=False)

    def insert_overwrite(
        self,
        rows: Any,
        partition: Any = None,
        *,
        write_id: int | None = None,
        statement_id: int | None = None,
    ) -> StatementResult:
        """INSERT OVERWRITE: write ``base_W`` holding just these rows in each partition touched.

        Everything older in those partitions becomes invisible. With a static ``partition`` and
        no rows, an empty ``base_W`` truncates the partition.
        """
        with self._statement(write_id, statement_id) as (write, stmt):
            return self._insert(rows, partition, write, stmt, overwrite=True)

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
                _IDX, _arange(targets.num_rows)
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
        p = self._partitions[self._static_partition(partition, create=True)]
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
            path = self._join(p.path, original_file_name(bucket, copy))
            written.append(
                write_plain_file(
                    self.fs,
                    path,
                    part,
                    self.row_type,
                    stripe_rows=self.stripe_rows,
                    compression=self.compression,
                    engine=self.orc_writer,
                )
            )
            self._record_rows("original", 0, p.index, 0, encode_bucket_v1(bucket), first_row, part)
            p.original_copies[bucket] = copy + 1
            p.original_rows[bucket] = first_row + part.num_rows
        return written

    # ------------------------------------------------------------------------------------
    # Compaction
    # ------------------------------------------------------------------------------------

    def compact_major(self, partition: Any = None) -> list[str]:
        """Major compaction: write ``base_W_vT`` per partition from its base, deltas, originals.

        W is the highest write id compacted (only writes below the lowest open write are),
        T the compactor's transaction id. Live rows keep their original identities. Old
        folders are left in place (Hive's cleaner removes them later). Returns the new folders.
        """
        written = []
        hwm = self._compactor_high_watermark()
        for p in self._selected_partitions(partition):
            base, deltas = self._current_directories(p, hwm)
            has_originals = bool(p.original_copies) and base is None
            if not deltas and not has_originals:
                continue
            write_id = max((d.max_write_id for d in deltas), default=hwm)
            txn = self._allocate_txn()  # the compactor's (committed) txn
            directory = _Directory("base", write_id, write_id, None, txn)
            folder = self._join(p.path, directory.name)
            rows = self._visible(lambda w, top=write_id: self._committed(w) and w <= top, {p.index})
            self._write_rows_by_bucket(folder, rows)
            if not self.insert_only:
                self.fs.pipe_file(f"{folder}/{COMPACTOR_MARKER_FILE}", COMPACTOR_MARKER_CONTENT)
            p.directories.append(directory)
            written.append(folder)
        return written

    def compact_minor(self, partition: Any = None) -> list[str]:
        """Minor compaction: merge the current deltas into ``delta_A_B_vT`` and
        ``delete_delta_A_B_vT`` (identities unchanged, deletes not applied).

        Only deltas above the current base and below the lowest open write are compacted;
        aborted writes' events are dropped. Returns the new folders.
        """
        written = []
        hwm = self._compactor_high_watermark()
        for p in self._selected_partitions(partition):
            base, deltas = self._current_directories(p, hwm)
            already_compacted = all(d.statement_id is None for d in deltas) and (
                len({(d.min_write_id, d.max_write_id) for d in deltas}) == 1
            )
            if not deltas or already_compacted:
                continue
            low = min(d.min_write_id for d in deltas)
            high = max(d.max_write_id for d in deltas)
            txn = self._allocate_txn()  # the compactor's (committed) txn

            def in_range(w: int, low: int = low, high: int = high) -> bool:
                return low <= w <= high and self._committed(w)

            batches = [
                b.table
                for b in self._row_batches
                if b.partition == p.index and b.kind == "delta" and in_range(b.write_id)
            ]
            delta = _Directory("delta", low, high, None, txn)
            folder = self._join(p.path, delta.name)
            rows = pa.concat_tables(batches) if batches else self._empty_rows()
            self._write_rows_by_bucket(folder, rows)
            p.directories.append(delta)
            written.append(folder)
            deletes = [
                b.table
                for b in self._delete_batches
                if b.partition == p.index and in_range(b.write_id)
            ]
            if deletes:
                delete_delta = _Directory("delete_delta", low, high, None, txn)
                folder = self._join(p.path, delete_delta.name)
                self._write_delete_files(folder, pa.concat_tables(deletes))
                p.directories.append(delete_delta)
                written.append(folder)
        return written

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
        rows = self._visible(self._validity(snapshot), sort=True)
        table = self._user_view(rows)
        if with_row_id:
            row_id = pa.StructArray.from_arrays(
                [rows[_O].combine_chunks(), rows[_B].combine_chunks(), rows[_R].combine_chunks()],
                names=["writeid", "bucketid", "rowid"],
            )
            table = table.append_column("row__id", row_id)
        return table

    def expected_identities(self, snapshot: str | WriteIdSnapshot | None = None) -> pa.Table:
        """Partition columns, ``originalTransaction``, ``bucket``, ``rowId`` of the live rows."""
        return self._identity_view(self._visible(self._validity(snapshot), sort=True))

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
        parts = None if partition is None else {self._static_partition(partition)}
        rows = self._visible(self._committed, parts)
        draws = pc.random(rows.num_rows, initializer=rng.randrange(1 << 62))
        return self._identity_view(rows.filter(pc.less(draws, fraction)))

    # ------------------------------------------------------------------------------------
    # Internals: writes and visibility
    # ------------------------------------------------------------------------------------

    def _allocate_txn(self) -> int:
        txn = self._next_txn_id
        self._next_txn_id += 1
        return txn

    def _open_write(self, write_id: int) -> _Write:
        write = self._writes.get(write_id)
        if write is None:
            raise KeyError(f"unknown write id {write_id}")
        if write.state is not WriteState.OPEN:
            raise ValueError(f"write {write_id} is {write.state.value}, not open")
        return write

    def _committed(self, write_id: int) -> bool:
        return write_id == 0 or self._writes[write_id].state is WriteState.COMMITTED

    def _validity(self, snapshot: str | WriteIdSnapshot | None) -> Callable[[int], bool]:
        if snapshot is None:
            return self._committed
        if isinstance(snapshot, str):
            snapshot = WriteIdSnapshot.parse(snapshot)
        return snapshot.is_valid

    class _StatementContext:
        def __init__(self, table: AcidTableWriter, write_id: int | None, statement_id: int | None):
            self.table = table
            self.autocommit = write_id is None
            self.txn = table.begin() if write_id is None else None
            self.write = table._open_write(self.txn.write_id if self.txn else write_id)
            self.statement_id = statement_id

        def __enter__(self) -> tuple[_Write, int]:
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

    def _compactor_high_watermark(self) -> int:
        open_ids = [w.write_id for w in self._writes.values() if w.state is WriteState.OPEN]
        if open_ids:
            return min(open_ids) - 1
        return max(self._writes, default=0)

    def _selected_partitions(self, partition: Any) -> list[_Partition]:
        if partition is None:
            return list(self._partitions)
        return [self._partitions[self._static_partition(partition)]]

    def _current_directories(
        self, p: _Partition, hwm: int
    ) -> tuple[_Directory | None, list[_Directory]]:
        """The base and deltas the compactor works on (Hive's ``getAcidState``)."""

        def valid(d: _Directory) -> bool:
            if d.max_write_id > hwm:
                return False
            if d.visibility_txn_id is not None:
                return True  # written by the (committed) compactor
            return any(self._committed(w) for w in range(d.min_write_id, d.max_write_id + 1))

        bases = [d for d in p.directories if d.kind == "base" and valid(d)]
        base = max(bases, key=lambda d: d.max_write_id, default=None)
        floor = base.max_write_id if base else -1
        candidates = sorted(
            (d for d in p.directories if d.kind != "base" and d.min_write_id > floor and valid(d)),
            key=_Directory.sort_key,
        )
        chosen: list[_Directory] = []
        current, last_stmt, prev = floor, -1, None
        for d in candidates:
            stmt = -1 if d.statement_id is None else d.statement_id
            if d.max_write_id > current:
                chosen.append(d)
                current, last_stmt, prev = d.max_write_id, stmt, d
            elif d.max_write_id == current and last_stmt >= 0:
                chosen.append(d)
                prev = d
            elif prev is not None and (d.min_write_id, d.max_write_id, d.statement_id) == (
                prev.min_write_id,
                prev.max_write_id,
                prev.statement_id,
            ):
                chosen.append(d)
                prev = d
        return base, chosen

    def _all_rows(self) -> pa.Table:
        if self._rows_cache is None:
            tables = [b.table for b in self._row_batches]
            self._rows_cache = pa.concat_tables(tables) if tables else self._empty_rows()
        return self._rows_cache

    def _empty_rows(self) -> pa.Table:
        return self._bookkeeping_schema().empty_table()

    def _bookkeeping_schema(self) -> pa.Schema:
        return pa.schema(
            [
                (_P, pa.int32()),
                (_W, pa.int64()),
                (_O, pa.int64()),
                (_B, pa.int32()),
                (_R, pa.int64()),
            ]
            + list(self.arrow_schema)
        )

    def _visible(
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
        rows = self._all_rows()
        valid_ids = pa.array([0] + [w for w in self._writes if valid(w)], pa.int64())
        mask = pc.is_in(rows[_W], value_set=valid_ids)
        if partitions is not None:
            mask = pc.and_(
                mask, pc.is_in(rows[_P], value_set=pa.array(sorted(partitions), pa.int32()))
            )
        rows = rows.filter(mask)
        barrier: dict[int, int] = {}
        for p, w in self._overwrites:
            if valid(w):
                barrier[p] = max(barrier.get(p, 0), w)
        if barrier:
            floors = pa.array([barrier.get(i, 0) for i in range(len(self._partitions))], pa.int64())
            rows = rows.filter(pc.greater_equal(rows[_W], pc.take(floors, rows[_P])))
        deletes = [b.table for b in self._delete_batches if valid(b.write_id)]
        if deletes and rows.num_rows:
            positions = _arange(rows.num_rows)
            keys = rows.select(_KEY).append_column(_IDX, positions)
            dead = pa.concat_tables(deletes).select(_KEY)
            hit = keys.join(dead, keys=_KEY, join_type="left semi")[_IDX]
            rows = rows.filter(pc.invert(pc.is_in(positions, value_set=hit.combine_chunks())))
        if sort and rows.num_rows > 1:
            rows = rows.take(pc.sort_indices(rows, sort_keys=[(k, "ascending") for k in _KEY]))
        return rows

    def _user_view(self, rows: pa.Table) -> pa.Table:
        columns = [rows[c.name] for c in self.columns]
        columns += self._partition_value_columns(rows[_P])
        return pa.Table.from_arrays(columns, schema=self.schema)

    def _identity_view(self, rows: pa.Table) -> pa.Table:
        columns = self._partition_value_columns(rows[_P]) + [rows[_O], rows[_B], rows[_R]]
        names = [c.name for c in self.partition_columns] + list(_IDENTITY_NAMES)
        return pa.Table.from_arrays(columns, names=names)

    def _empty_identities(self) -> pa.Table:
        return self._identity_view(self._empty_rows())

    def _partition_value_columns(self, codes: pa.ChunkedArray | pa.Array) -> list[pa.Array]:
        out = []
        for i, column in enumerate(self.partition_columns):
            values = pa.array([p.values[i] for p in self._partitions], orc_arrow_type(column.type))
            out.append(pc.take(values, codes))
        return out

    # -- rows in ------------------------------------------------------------------------

    def _check_names(self) -> None:
        names = [c.name for c in self.columns] + [c.name for c in self.partition_columns]
        if len({n.lower() for n in names}) != len(names):
            raise ValueError(f"duplicate column names: {names}")
        if any(n.startswith("__acid_") for n in names):
            raise ValueError("column names may not start with '__acid_'")
        if not self.columns:
            raise ValueError("a table needs at least one column")

    def _to_table(self, rows: Any, *, with_partitions: bool) -> pa.Table:
        """Rows as a table of the table columns (+ partition columns) with their Arrow types."""
        target = self.schema if with_partitions else self.arrow_schema
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
        types = {c.name: c.type for c in self.columns + self.partition_columns}
        for f in target:
            arrays.append(_normalise(table[f.name], f.type, types[f.name]))
        return pa.Table.from_arrays(arrays, schema=target)

    def _static_partition(self, partition: Any, *, create: bool = False) -> int:
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
            _normalise(pa.array([v]), orc_arrow_type(c.type), c.type).to_pylist()[0]
            for v, c in zip(values, self.partition_columns, strict=True)
        )
        if not create:
            key = tuple(format_partition_value(v) for v in typed)
            if key not in self._partition_keys:
                raise KeyError(f"no partition {dict(zip(names, typed, strict=True))}")
        return self._partition_index(typed)

    def _partition_index(self, values: tuple[Any, ...]) -> int:
        values = tuple(None if v == "" else v for v in values)
        key = tuple(format_partition_value(v) for v in values)
        index = self._partition_keys.get(key)
        if index is None:
            index = len(self._partitions)
            path = partition_dir_name(
                zip([c.name for c in self.partition_columns], values, strict=True)
            )
            self._partitions.append(_Partition(index, values, path))
            self._partition_keys[key] = index
        return index

    def _partition_indexes(self, table: pa.Table, *, create: bool) -> pa.Array:
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
                lookup[code] = self._partition_index(tuple(values))
            else:
                key = tuple(format_partition_value(v) for v in values)
                lookup[code] = self._partition_keys.get(key, -1)
        keys = pa.array(list(lookup), pa.int64())
        targets = pa.array(list(lookup.values()), pa.int32())
        return pc.take(targets, pc.index_in(combined, value_set=keys))

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

    def _join(self, *parts: str) -> str:
        return "/".join([self.path] + [p for p in parts if p])

    def _ensure_version_file(self, folder: str) -> None:
        if self.insert_only or folder in self._folders_with_version_file:
            return
        write_acid_version_file(self.fs, folder)
        self._folders_with_version_file.add(folder)

    def _record_rows(
        self,
        kind: str,
        write_id: int,
        partition: int,
        original_transaction: int,
        bucket: int,
        first_row_id: int,
        data: pa.Table,
    ) -> pa.Table:
        n = data.num_rows
        columns = {
            _P: pa.repeat(pa.scalar(partition, pa.int32()), n),
            _W: pa.repeat(pa.scalar(write_id, pa.int64()), n),
            _O: pa.repeat(pa.scalar(original_transaction, pa.int64()), n),
            _B: pa.repeat(pa.scalar(bucket, pa.int32()), n),
            _R: _arange(n, first_row_id),
        }
        table = pa.Table.from_arrays(
            list(columns.values()) + [data[name] for name in self.arrow_schema.names],
            schema=self._bookkeeping_schema(),
        )
        self._row_batches.append(_RowBatch(kind, write_id, partition, table))
        self._rows_cache = None
        return table

    def _insert(
        self, rows: Any, partition: Any, write: _Write, stmt: int, *, overwrite: bool
    ) -> StatementResult:
        static = partition is not None or not self.partition_columns
        table = self._to_table(rows, with_partitions=not static)
        if static:
            index = self._static_partition(partition, create=True)
            codes = pa.repeat(pa.scalar(index, pa.int32()), table.num_rows)
        else:
            codes = self._partition_indexes(table, create=True)
        staged = table.select(self.arrow_schema.names)
        staged = staged.append_column(_P, codes)
        staged = staged.append_column(_IDX, _arange(table.num_rows))
        inserted, files = self._write_insert_events(write, stmt, staged, overwrite=overwrite)
        if overwrite:
            touched = set(pc.unique(codes).to_pylist())
            if static:
                touched.add(self._static_partition(partition, create=True))
            for p in sorted(touched):
                self._overwrites.append((p, write.write_id))
                folder = self._register_directory(
                    self._partitions[p], _Directory("base", write.write_id, write.write_id)
                )
                self._ensure_version_file(folder)
                self.fs.makedirs(folder, exist_ok=True)
        return StatementResult(write.write_id, stmt, inserted, self._empty_identities(), files)

    def _register_directory(self, p: _Partition, directory: _Directory) -> str:
        if directory not in p.directories:
            p.directories.append(directory)
        return self._join(p.path, directory.name)

    def _write_insert_events(
        self, write: _Write, stmt: int, staged: pa.Table, *, overwrite: bool = False
    ) -> tuple[pa.Table, tuple[WrittenFile, ...]]:
        """Write insert events for ``staged`` (data columns, _P, _IDX and, for updates, _B).

        Rows keep the bucket in ``_B`` when present (updates), else get one assigned.
        Returns the identities in ``_IDX`` order and the files written.
        """
        files = []
        identity_parts = []
        for p_index in sorted(set(pc.unique(staged[_P]).to_pylist())):
            part = staged.filter(pc.equal(staged[_P], p_index))
            p = self._partitions[p_index]
            if _B in part.column_names:
                bucket_ids = pc.cast(
                    pc.bit_wise_and(pc.shift_right(part[_B], 16), 0xFFF), pa.int32()
                )
            else:
                bucket_ids = self._bucket_ids(part)
            if overwrite:
                directory = _Directory("base", write.write_id, write.write_id)
                if directory in p.directories:
                    raise ValueError(
                        f"write {write.write_id} already overwrote {p.path or 'the table'}"
                    )
            else:
                directory = _Directory("delta", write.write_id, write.write_id, stmt)
            folder = self._register_directory(p, directory)
            for bucket_id in sorted(set(pc.unique(bucket_ids).to_pylist())):
                rows = part.filter(pc.equal(bucket_ids, bucket_id))
                bucket = encode_bucket_v1(bucket_id, stmt)
                data = rows.select(self.arrow_schema.names)
                kind = "base" if overwrite else "delta"
                recorded = self._record_rows(
                    kind, write.write_id, p_index, write.write_id, bucket, 0, data
                )
                files.append(self._write_data_file(folder, bucket_id, recorded))
                identity_parts.append(
                    recorded.select([_P, _O, _B, _R]).append_column(_IDX, rows[_IDX])
                )
        if identity_parts:
            identities = pa.concat_tables(identity_parts)
            identities = identities.take(pc.sort_indices(identities[_IDX]))
        else:
            identities = self._empty_rows().select([_P, _O, _B, _R])
        return self._identity_view(identities), tuple(files)

    def _write_data_file(self, folder: str, bucket_id: int, recorded: pa.Table) -> WrittenFile:
        """One bucket file of insert events (or a plain file in an insert-only table)."""
        data = recorded.select(self.arrow_schema.names)
        if self.insert_only:
            return write_plain_file(
                self.fs,
                f"{folder}/{original_file_name(bucket_id)}",
                data,
                self.row_type,
                stripe_rows=self.stripe_rows,
                compression=self.compression,
                engine=self.orc_writer,
            )
        self._ensure_version_file(folder)
        n = recorded.num_rows
        events = pa.table(
            {
                "operation": pa.repeat(pa.scalar(OPERATION_INSERT, pa.int32()), n),
                "originalTransaction": recorded[_O],
                "bucket": recorded[_B],
                "rowId": recorded[_R],
                "currentTransaction": recorded[_O],
                "row": pa.StructArray.from_arrays(
                    [c.combine_chunks() for c in data.columns], fields=list(self.arrow_schema)
                )
                if n
                else pa.array([], orc_arrow_type(self.row_type)),
            }
        )
        return write_acid_file(
            self.fs,
            f"{folder}/{bucket_file_name(bucket_id)}",
            events,
            self.row_type,
            stripe_rows=self.stripe_rows,
            compression=self.compression,
            engine=self.orc_writer,
        )

    def _write_rows_by_bucket(self, folder: str, rows: pa.Table) -> None:
        """Write rows (bookkeeping table) as insert events grouped by their bucket id."""
        if not self.insert_only:
            write_acid_version_file(self.fs, folder)
            self._folders_with_version_file.add(folder)
        else:
            self.fs.makedirs(folder, exist_ok=True)
        if not rows.num_rows:
            return
        bucket_ids = pc.bit_wise_and(pc.shift_right(rows[_B], 16), 0xFFF)
        for bucket_id in sorted(set(pc.unique(bucket_ids).to_pylist())):
            part = rows.filter(pc.equal(bucket_ids, bucket_id))
            self._write_data_file(folder, bucket_id, part)

    def _targets(self, write: _Write, where: Where, partition: Any) -> pa.Table:
        """Rows visible to ``write`` that ``where`` selects (bookkeeping table), in
        (partition, identity) order."""
        w = write.write_id
        parts = None if partition is None else {self._static_partition(partition)}
        visible = self._visible(lambda x: x == w or self._committed(x), parts)
        if where is None or not visible.num_rows:
            selected = visible
        elif isinstance(where, pc.Expression):
            view = self._user_view(visible).append_column(_IDX, _arange(visible.num_rows))
            selected = visible.take(view.filter(where)[_IDX])
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
            selected = selected.take(pc.sort_indices(selected, [(k, "ascending") for k in _KEY]))
        return selected

    def _match_identities(
        self, visible: pa.Table, ids: pa.Table, parts: set[int] | None
    ) -> pa.Table:
        has_partition_columns = all(c.name in ids.column_names for c in self.partition_columns)
        if self.partition_columns and parts is None:
            if not has_partition_columns:
                raise ValueError("identities of a partitioned table need a partition")
            codes = self._partition_indexes(ids, create=False)
        else:
            codes = pa.repeat(
                pa.scalar(next(iter(parts)) if parts else 0, pa.int32()), ids.num_rows
            )
        wanted = pa.table(
            {
                _P: codes,
                _O: pc.cast(ids["originalTransaction"], pa.int64()),
                _B: pc.cast(ids["bucket"], pa.int32()),
                _R: pc.cast(ids["rowId"], pa.int64()),
            }
        )
        keys = visible.select(_KEY).append_column(_IDX, _arange(visible.num_rows))
        hits = keys.join(wanted, keys=_KEY, join_type="left semi")
        idx = hits[_IDX].combine_chunks()
        return visible.take(pc.take(idx, pc.sort_indices(idx)))

    def _write_delete_events(
        self, write: _Write, stmt: int, targets: pa.Table
    ) -> tuple[WrittenFile, ...]:
        files: list[WrittenFile] = []
        if not targets.num_rows:
            return ()
        keys = targets.select(_KEY)
        n = keys.num_rows
        deletes = pa.table(
            {
                _P: keys[_P],
                _W: pa.repeat(pa.scalar(write.write_id, pa.int64()), n),
                _O: keys[_O],
                _B: keys[_B],
                _R: keys[_R],
            }
        )
        for p_index in sorted(set(pc.unique(deletes[_P]).to_pylist())):
            part = deletes.filter(pc.equal(deletes[_P], p_index))
            p = self._partitions[p_index]
            directory = _Directory("delete_delta", write.write_id, write.write_id, stmt)
            folder = self._register_directory(p, directory)
            files.extend(self._write_delete_files(folder, part))
            self._delete_batches.append(_DeleteBatch(write.write_id, p_index, part))
        return tuple(files)

    def _write_delete_files(self, folder: str, deletes: pa.Table) -> list[WrittenFile]:
        """Delete events (table with _W, _O, _B, _R) grouped into bucket files."""
        self._ensure_version_file(folder)
        files = []
        bucket_ids = pc.bit_wise_and(pc.shift_right(deletes[_B], 16), 0xFFF)
        for bucket_id in sorted(set(pc.unique(bucket_ids).to_pylist())):
            part = deletes.filter(pc.equal(bucket_ids, bucket_id))
            n = part.num_rows
            events = pa.table(
                {
                    "operation": pa.repeat(pa.scalar(OPERATION_DELETE, pa.int32()), n),
                    "originalTransaction": part[_O],
                    "bucket": part[_B],
                    "rowId": part[_R],
                    "currentTransaction": part[_W],
                    "row": pa.nulls(n, orc_arrow_type(self.row_type)),
                }
            )
            files.append(
                write_acid_file(
                    self.fs,
                    f"{folder}/{bucket_file_name(bucket_id)}",
                    events,
                    self.row_type,
                    stripe_rows=self.stripe_rows,
                    compression=self.compression,
                    engine=self.orc_writer,
                )
            )
        return files

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


def _arange(count: int, start: int = 0) -> pa.Array:
    """int64 ``start, start + 1, ...`` (``count`` values), built without a Python loop."""
    if count == 0:
        return pa.array([], pa.int64())
    ones = pa.repeat(pa.scalar(1, pa.int64()), count)
    return pc.cumulative_sum(ones, start=pa.scalar(start - 1, pa.int64()))


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


def _normalise(
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


# ------------------------------------------------------------------------------------------
# Demo table
# ------------------------------------------------------------------------------------------

DEMO_CATEGORIES = ("books", "games", "garden", "music", "outdoor", "tools", "toys", "video")
_DEMO_EPOCH_NS = 1_704_067_200 * 1_000_000_000  # 2024-01-01T00:00:00


def _demo_rows(first_id: int, count: int, partition_value: str | None, salt: int) -> pa.Table:
    """``count`` deterministic pseudo-random demo rows with ids ``first_id ..``."""
    ids = _arange(count, first_id)
    mixed = pc.multiply(
        pc.cast(pc.add(ids, salt * 7919 + 1), pa.uint64()),
        pa.scalar(0x9E3779B97F4A7C15, pa.uint64()),
    )
    mixed = pc.bit_wise_xor(mixed, pc.shift_right(mixed, pa.scalar(29, pa.uint64())))

    def mod(x: pa.Array, m: int) -> pa.Array:
        return pc.subtract(
            x, pc.multiply(pc.divide(x, pa.scalar(m, pa.uint64())), pa.scalar(m, pa.uint64()))
        )

    category = pc.take(
        pa.array(DEMO_CATEGORIES), pc.cast(mod(mixed, len(DEMO_CATEGORIES)), pa.int32())
    )
    cents = pc.cast(mod(pc.shift_right(mixed, pa.scalar(8, pa.uint64())), 1_000_000), pa.int64())
    amount = pc.cast(
        pc.divide(pc.cast(cents, pa.decimal128(19, 0)), pa.scalar(100, pa.decimal128(3, 0))),
        pa.decimal128(12, 2),
    )
    millis = pc.cast(mod(pc.shift_right(mixed, pa.scalar(20, pa.uint64())), 86_400_000), pa.int64())
    ts_ns = pc.add(pc.multiply(millis, 1_000_000), _DEMO_EPOCH_NS + salt * 86_400 * 1_000_000_000)
    ts = pc.cast(ts_ns, pa.timestamp("ns"))
    note_text = pc.binary_join_element_wise("order ", pc.cast(ids, pa.string()), "")
    note = pc.if_else(
        pc.equal(mod(mixed, 10), pa.scalar(0, pa.uint64())), pa.scalar(None, pa.string()), note_text
    )
    columns = {"id": ids, "category": category, "amount": amount, "ts": ts, "note": note}
    if partition_value is not None:
        columns["dt"] = pa.repeat(pa.scalar(partition_value), count)
    return pa.table(columns)


def generate_demo_table(
    root: str,
    *,
    partitions: int = 2,
    buckets: int = 4,
    rows_per_bucket: int = 500_000,
    insert_deltas: int = 3,
    delete_fraction: float = 0.05,
    updates: bool = True,
    originals: bool = False,
    aborted_writes: int = 0,
    seed: int = 0,
    filesystem: Any = None,
    stripe_rows: int = 100_000,
    compression: str = "zlib",
) -> AcidTableWriter:
    """Write a realistic full-ACID demo table and return its writer (for the expected rows).

    Columns ``id bigint, category string, amount decimal(12,2), ts timestamp, note string``,
    partitioned by ``dt`` (``2024-01-01``, ...), bucketed by ``id`` into ``buckets`` buckets.

    * write 1: INSERT OVERWRITE of about ``rows_per_bucket`` rows per bucket and partition into
      ``base_0000001`` (with ``originals``: pre-ACID ``00000B_0`` + ``_copy_1`` files instead);
    * ``insert_deltas`` writes each adding 2% new rows (``delta_W_W_0000``);
    * one write deleting ``delete_fraction`` of the rows (``delete_delta_W_W_0000``);
    * with ``updates``, one write updating ``delete_fraction / 2`` of the rows (delete delta plus
      insert delta of the same write);
    * ``aborted_writes`` aborted inserts whose files stay on storage.
    """
    rng = random.Random(seed)
    table = AcidTableWriter(
        root,
        [
            ("id", "bigint"),
            ("category", "string"),
            ("amount", "decimal(12,2)"),
            ("ts", "timestamp"),
            ("note", "string"),
        ],
        partition_columns=[("dt", "string")],
        buckets=buckets,
        bucket_by="id",
        filesystem=filesystem,
        stripe_rows=stripe_rows,
        compression=compression,
        seed=seed,
    )
    days = [(dt.date(2024, 1, 1) + dt.timedelta(days=d)).isoformat() for d in range(partitions)]
    per_partition = rows_per_bucket * buckets
    next_id = 1

    def batch(count: int, salt: int) -> pa.Table:
        nonlocal next_id
        parts = []
        for day in days:
            parts.append(_demo_rows(next_id, count, day, salt + seed))
            next_id += count
        return pa.concat_tables(parts)

    if originals:
        for day in days:
            rows = _demo_rows(next_id, per_partition, None, seed)
            next_id += per_partition
            bucket_of = hive_bucket_ids([rows["id"]], ["bigint"], buckets)
            for b in range(buckets):
                table.add_original_files(
                    rows.filter(pc.equal(bucket_of, b)), b, copies=1, partition={"dt": day}
                )
    else:
        table.insert_overwrite(batch(per_partition, 0))
    delta_rows = max(1, per_partition // 50)
    for i in range(insert_deltas):
        table.insert(batch(delta_rows, i + 1))
    for i in range(aborted_writes):
        txn = table.begin()
        txn.insert(batch(max(1, delta_rows // 4), 100 + i))
        txn.abort()
    if delete_fraction > 0:
        table.delete(table.sample_identities(delete_fraction, seed=rng.randrange(1 << 30)))
    if updates and delete_fraction > 0:
        targets = table.sample_identities(delete_fraction / 2, seed=rng.randrange(1 << 30))
        table.update(
            targets,
            {
                # amount < 10000.00, so doubling it still fits decimal(12,2)
                "amount": pc.multiply(pc.field("amount"), pa.scalar(2, pa.decimal128(1, 0))),
                "note": "updated",
            },
        )
    return table
