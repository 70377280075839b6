"""Simulated tables registered in a real Hive Metastore, written under its write ids.

The simulator (:class:`~.table_writer.AcidTableWriter`) plays Hive's part on storage; with
:func:`register_table` the metastore plays its own part for real:

* the table is created through the metastore's API (:func:`thrift_table`: its columns, partition
  columns and bucketing with their Hive types, ORC, ``transactional`` properties);
* every write opens a transaction there and allocates the table's write id there
  (:class:`MetastoreWriteHistory`): file names carry the metastore's write ids, and commits and
  aborts are the metastore's ``commit_txn`` and ``abort_txn``. A write left open stays open in
  the metastore (until its transaction timeout, which ``scripts/metastore.py`` makes an hour);
* every partition the writer creates is added to the metastore (``add_partitions``) with its
  folder as location, and :meth:`RegisteredTable.add_external_partition` puts a partition
  outside the table's folder: the writer writes that partition's files at that location.

Hive 4 metastores refuse some things a simulator would take for granted, and this module does
what Hive's own clients do about them:

* ``create_table`` (the old call, without processor capabilities) is refused for an ACID table by
  Hive 4's default metadata transformer ("Processor has no capabilities"): tables are created
  with ``create_table_req`` (:meth:`MetastoreClient.create_table`), which states them;
* a managed table's location must lie strictly inside the metastore's managed warehouse or inside
  its database's ``managedLocationUri``: :func:`ensure_database` gives a database it creates the
  folder holding the table's folder as managed location (Hive's ``ALTER DATABASE ... SET
  MANAGEDLOCATION``, after creating it: a database created with an explicit managed location must
  not have that folder yet);
* ``get_table_req`` refuses an insert-only table to a client that does not state it reads them:
  ``MetastoreClient.get_table`` states it.

Nothing here fakes the metastore: the tests that use it run against a real one
(``scripts/metastore.py start``).
"""

from __future__ import annotations

import copy
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..metastore.client import MetastoreClient, split_table_name
from ..metastore.errors import MetastoreError, TableNotFoundError
from ..metastore.view import ReadView, read_view
from .acid_layout import format_partition_value
from .table_layout import Partition, TableLayout
from .write_history import Write, WriteHistory, WriteIdSnapshot, WriteState

if TYPE_CHECKING:
    import pyarrow as pa

    from .table_writer import AcidTableWriter

ORC_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"


def _ttypes() -> Any:
    from hive_metastore import ttypes

    return ttypes


# ----------------------------------------------------------------------------------------------
# Locations


def metastore_location(fs: Any, path: str) -> str:
    """A filesystem path as the metastore records locations: ``file:/x`` for a local path,
    ``s3a://bucket/x`` on S3, ``PROTOCOL://path`` otherwise (``metastore.tables.storage_uri``
    turns each back into the fsspec form)."""
    protocols = fs.protocol if isinstance(fs.protocol, tuple | list) else (fs.protocol,)
    path = fs._strip_protocol(path).rstrip("/") or "/"
    if "file" in protocols or "local" in protocols:
        return "file:" + path
    if "s3" in protocols or "s3a" in protocols:
        return "s3a://" + path
    if "hdfs" in protocols:
        return fs.unstrip_protocol(path)  # hdfs://AUTHORITY/path: the namenode kept
    return f"{protocols[0]}://{path}"


def _parent(path: str) -> str:
    return posixpath.dirname(path.rstrip("/")) or "/"


# ----------------------------------------------------------------------------------------------
# The table's definition


def thrift_table(
    writer: AcidTableWriter,
    location: str | None = None,
    *,
    bucketing_version: int = 2,
    extra_params: Mapping[str, str] | None = None,
    transactional: bool = True,
    owner: str = "airflow-provider-acid",
) -> Any:
    """The metastore's ``Table`` for ``writer``'s table, as Hive would define it.

    ``dbName``/``tableName`` are the writer's ``database``/``table_name`` (lower-cased), the
    location ``location`` (default: the writer's folder in the metastore's form, see
    :func:`metastore_location`), columns and partition columns with their Hive types, ORC
    formats and serde, the writer's buckets and bucketing columns (``numBuckets`` -1 for a table
    without bucketing columns, as Hive records an unbucketed table), and the table parameters
    ``transactional``, ``transactional_properties`` and ``bucketing_version`` (plus
    ``extra_params``).

    With ``transactional=False`` a plain (non-ACID) ORC table instead: an ``EXTERNAL_TABLE``
    without the ``transactional`` parameters, what a Hive 4 metastore makes of any non-ACID
    table; for tests of refusals.
    """
    t = _ttypes()
    db, name = split_table_name(writer.full_name)
    bucketed = bool(writer.bucket_by)
    sd = t.StorageDescriptor(
        cols=[t.FieldSchema(c.name, str(c.type), None) for c in writer.columns],
        location=location or metastore_location(writer.fs, writer.path),
        inputFormat=ORC_INPUT_FORMAT,
        outputFormat=ORC_OUTPUT_FORMAT,
        compressed=False,
        numBuckets=writer.buckets if bucketed else -1,
        serdeInfo=t.SerDeInfo(name=None, serializationLib=ORC_SERDE, parameters={}),
        bucketCols=list(writer.bucket_by),
        sortCols=[],
        parameters={},
    )
    params = {"bucketing_version": str(bucketing_version)}
    if transactional:
        params["transactional"] = "true"
        params["transactional_properties"] = writer.transactional_properties
        table_type = "MANAGED_TABLE"
    else:
        params["EXTERNAL"] = "TRUE"
        table_type = "EXTERNAL_TABLE"
    params.update(extra_params or {})
    return t.Table(
        tableName=name,
        dbName=db,
        owner=owner,
        sd=sd,
        partitionKeys=[t.FieldSchema(c.name, str(c.type), None) for c in writer.partition_columns],
        parameters=params,
        tableType=table_type,
    )


def create_table(client: MetastoreClient, table: Any) -> None:
    """Create ``table`` (a Thrift ``Table``) in the metastore (``create_table_req``, which states
    the client's processor capabilities: a Hive 4 metastore refuses an ACID table to a client
    that states none), naming the table and its location when the metastore refuses it."""
    t = _ttypes()
    try:
        client.create_table(table)
    except (MetastoreError, t.AlreadyExistsException, t.InvalidObjectException) as exc:
        raise MetastoreError(
            f"{client.where}: creating table {table.dbName}.{table.tableName} at "
            f"{table.sd.location} failed: {getattr(exc, 'message', exc)}"
        ) from None


def ensure_database(client: MetastoreClient, name: str, managed_location: str | None = None) -> Any:
    """The database ``name`` (its Thrift ``Database``), created if missing.

    A database created here gets ``managed_location`` (a metastore location, e.g.
    ``file:/tmp/wh``) as its ``managedLocationUri``: its managed tables may then live anywhere
    inside that folder. It is set as Hive's ``ALTER DATABASE ... SET MANAGEDLOCATION`` does, after
    creating the database, because a Hive 4 metastore creating a database with an explicit
    managed location makes that folder itself, and refuses when it exists already. An existing
    database is returned as it is.
    """
    name = name.lower()
    try:
        return client.get_database(name)
    except TableNotFoundError:
        pass
    client.create_database(name)  # an existing one is left as it is
    database = client.get_database(name)
    if managed_location:
        database.managedLocationUri = managed_location
        client.alter_database(name, database)
        database = client.get_database(name)
    return database


def drop_database(client: MetastoreClient, name: str) -> None:
    """Drop the database and its tables from the metastore (their files stay on storage)."""
    client.drop_database(name, cascade=True, delete_data=False)


# ----------------------------------------------------------------------------------------------
# Write ids and transactions from the metastore


class HistoryMismatchError(AssertionError):
    """The simulator's bookkeeping of a table's writes and the metastore's view disagree."""


class MetastoreWriteHistory(WriteHistory):
    """A :class:`WriteHistory` whose transactions and write ids are the metastore's.

    :meth:`begin` opens a transaction (``open_txns``) and allocates the table's write id in it
    (``allocate_table_write_ids``); those are the write's ids in the simulator, so its folders
    are named by the metastore's write ids. :meth:`commit` and :meth:`abort` commit and abort the
    transaction in the metastore. :meth:`allocate_txn` is the compactor's transaction (the ``T``
    of ``base_W_vT`` and ``delta_A_B_vT``): opened and committed in the metastore right away, as
    the simulator's compaction treats it as committed (Hive's compactor commits it once its
    folders are written: readers see those folders only through a committed ``T``).

    :meth:`snapshot` and :meth:`valid_transactions` are still computed from the simulator's own
    bookkeeping (:meth:`valid_transactions` lists this table's transactions only);
    :meth:`differences` and :meth:`check` compare them with the metastore's read view.
    """

    def __init__(self, client: MetastoreClient, table: str) -> None:
        super().__init__()
        self.client = client
        self.table = ".".join(split_table_name(table))
        #: transactions of the compactor (committed in the metastore), in order
        self.compactor_txns: list[int] = []

    def _saw_txn(self, txn: int) -> None:
        self._next_txn_id = max(self._next_txn_id, txn + 1)

    def begin(self) -> Write:
        (txn,) = self.client.open_txns(1)
        self._saw_txn(txn)
        try:
            write_id = self.client.allocate_write_ids(self.table, [txn])[txn]
            if write_id in self.writes:
                raise MetastoreError(
                    f"{self.client.where} allocated write id {write_id} of {self.table} again"
                )
        except BaseException:
            self.client.abort_txn(txn)
            raise
        write = Write(write_id, txn)
        self.writes[write_id] = write
        self._next_write_id = max(self._next_write_id, write_id + 1)
        return write

    def allocate_txn(self) -> int:
        (txn,) = self.client.open_txns(1)
        self._saw_txn(txn)
        self.client.commit_txn(txn)
        self.compactor_txns.append(txn)
        return txn

    def commit(self, write_id: int) -> None:
        write = self.open_write(write_id)
        self.client.commit_txn(write.txn_id)
        write.state = WriteState.COMMITTED

    def abort(self, write_id: int) -> None:
        write = self.open_write(write_id)
        self.client.abort_txn(write.txn_id)
        write.state = WriteState.ABORTED

    def txn_ids(self, state: WriteState) -> list[int]:
        """The transactions of this table's writes in ``state``."""
        return sorted(w.txn_id for w in self.writes.values() if w.state is state)

    def differences(self, view: ReadView) -> list[str]:
        """Where the metastore's ``view`` of the table disagrees with the simulator's history
        (empty when they agree): the write ids' high watermark and which are open and aborted,
        and the state of each of the writes' (and the compactor's) transactions."""
        problems = []
        local = self.snapshot(self.table)
        ids = view.write_ids
        if ids.high_watermark != local.high_watermark:
            problems.append(
                f"write id high watermark: metastore {ids.high_watermark}, "
                f"simulator {local.high_watermark}"
            )
        if tuple(ids.open_ids) != local.open_write_ids:
            problems.append(
                f"open write ids: metastore {list(ids.open_ids)}, "
                f"simulator {list(local.open_write_ids)}"
            )
        if tuple(ids.aborted_ids) != local.aborted_write_ids:
            problems.append(
                f"aborted write ids: metastore {list(ids.aborted_ids)}, "
                f"simulator {list(local.aborted_write_ids)}"
            )
        if ids.min_open_write_id != local.min_open_write_id:
            problems.append(
                f"min open write id: metastore {ids.min_open_write_id}, "
                f"simulator {local.min_open_write_id}"
            )
        txns = view.txns
        for w in sorted(self.writes.values(), key=lambda w: w.write_id):
            if w.state is WriteState.OPEN:
                ok = w.txn_id in txns.open_ids
            elif w.state is WriteState.ABORTED:
                ok = w.txn_id in txns.aborted_ids
            else:
                ok = txns.is_valid(w.txn_id)
            if not ok:
                problems.append(
                    f"write {w.write_id} is {w.state.value} in the simulator, but its txn "
                    f"{w.txn_id} is not in the metastore's transaction list {txns}"
                )
        for txn in self.compactor_txns:
            if not txns.is_valid(txn):
                problems.append(f"compactor txn {txn} is not committed in the metastore ({txns})")
        return problems

    def check(self, view: ReadView | None = None) -> ReadView:
        """The metastore's read view of the table, after checking it agrees with the simulator
        (:class:`HistoryMismatchError` listing the :meth:`differences` otherwise)."""
        view = view or read_view(self.client, self.table)
        problems = self.differences(view)
        if problems:
            raise HistoryMismatchError(
                f"{self.table}: the metastore's view ({view.write_ids}; {view.txns}) and the "
                "simulator's history disagree: " + "; ".join(problems)
            )
        return view


# ----------------------------------------------------------------------------------------------
# Partitions in the metastore


class RegisteringLayout(TableLayout):
    """A :class:`TableLayout` that tells the metastore of each partition it creates, and that
    may keep a partition's folder outside the table's folder.

    ``locations`` maps a partition's relative folder (``dt=2024-01-01``) to the absolute folder
    it lives in instead; :meth:`join` (through which the writer and the compactor name every
    folder and file of a partition) resolves it there.
    """

    def __init__(self, path: str, partition_columns: Iterable[Any]) -> None:
        self.locations: dict[str, str] = {}
        self.on_new_partition: Any = None
        self._next_location: str | None = None
        super().__init__(path, tuple(partition_columns))

    def join(self, *parts: str) -> str:
        if parts and parts[0] and parts[0] in self.locations:
            return "/".join([self.locations[parts[0]]] + [p for p in parts[1:] if p])
        return super().join(*parts)

    def index(self, values: tuple[Any, ...]) -> int:
        before = len(self.partitions)
        index = super().index(values)
        if len(self.partitions) > before:
            p = self.partitions[index]
            if self._next_location is not None:
                self.locations[p.path] = self._next_location
                self._next_location = None
            if self.on_new_partition is not None and self.partition_columns:
                self.on_new_partition(p)
        return index

    def create_at(self, partition: Any, folder: str) -> Partition:
        """Create ``partition`` (as for :meth:`static`) with its folder at ``folder``."""
        try:
            self.static(partition)
        except KeyError:
            pass
        else:
            raise ValueError(f"partition {partition!r} exists already")
        self._next_location = folder.rstrip("/")
        try:
            index = self.static(partition, create=True)
        finally:
            self._next_location = None
        return self.partitions[index]


@dataclass
class RegisteredTable:
    """A simulated table registered in a metastore (see :func:`register_table`)."""

    client: MetastoreClient
    writer: AcidTableWriter
    #: the Thrift ``Table`` as the metastore returned it after creating it
    table: Any
    #: each partition's location as added to the metastore, by partition index
    partition_locations: dict[int, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.writer.full_name

    @property
    def history(self) -> MetastoreWriteHistory:
        return self.writer.history  # type: ignore[return-value]

    @property
    def layout(self) -> RegisteringLayout:
        return self.writer.layout  # type: ignore[return-value]

    @property
    def location(self) -> str:
        return self.table.sd.location

    def _add_partition(self, p: Partition) -> None:
        t = _ttypes()
        folder = self.layout.join(p.path)
        location = metastore_location(self.writer.fs, folder)
        sd = copy.deepcopy(self.table.sd)
        sd.location = location
        db, name = split_table_name(self.name)
        partition = t.Partition(
            values=[format_partition_value(v) for v in p.values],
            dbName=db,
            tableName=name,
            sd=sd,
            parameters={},
        )
        try:
            self.client.add_partitions([partition])
        except (t.MetaException, t.AlreadyExistsException, t.InvalidObjectException) as exc:
            raise MetastoreError(
                f"{self.client.where}: adding partition {p.path} of {self.name} at {location} "
                f"failed: {getattr(exc, 'message', exc)}"
            ) from None
        self.partition_locations[p.index] = location

    def add_external_partition(self, partition: Any, location: str) -> str:
        """Add ``partition`` (a mapping, values, or a value) with its folder at ``location``,
        outside the table's folder; the writer writes every file of that partition there (its
        deltas, bases, compactions). Returns the location as the metastore records it.

        Call before any write to that partition. ``location`` is a path on the writer's
        filesystem. The table's :meth:`~AcidTableWriter.list_files` does not list these files
        (they are not under the table's folder).
        """
        folder = self.writer.fs._strip_protocol(location).rstrip("/")
        p = self.layout.create_at(partition, folder)
        return self.partition_locations[p.index]

    def read_view(self) -> ReadView:
        return read_view(self.client, self.name)

    def check_view(self) -> ReadView:
        """The metastore's read view, checked against the simulator's history."""
        return self.history.check()


def storage_only_rows(writer: AcidTableWriter) -> pa.Table:
    """The rows a storage-only reader returns (no metastore, no write-id list): those of every
    write found on storage, aborted and open ones included, as if all were committed.

    Exact for a table without compactions (a compactor's base hides the aborted rows of the
    deltas it replaced, which this still counts).
    """
    every = WriteIdSnapshot(writer.full_name, max(writer.history.writes, default=0))
    return writer.expected_rows(every)


def register_table(
    client: MetastoreClient,
    writer: AcidTableWriter,
    *,
    location: str | None = None,
    bucketing_version: int = 2,
    extra_params: Mapping[str, str] | None = None,
    create_database: bool = True,
) -> RegisteredTable:
    """Create ``writer``'s table in the metastore and make the writer write under the
    metastore's transactions and write ids, adding each partition it creates to the metastore.

    Call before the first write (the writer gets a :class:`MetastoreWriteHistory` and a
    :class:`RegisteringLayout`). The table is ``writer.full_name`` (lower-cased, as the
    metastore stores names); its location ``location`` or the writer's folder. With
    ``create_database`` a missing database is created, its managed location the folder holding
    the table's folder (see :func:`ensure_database`); the table's folder must lie inside an
    existing database's managed location (or inside the metastore's warehouse).
    """
    written = any(p.directories or p.original_copies for p in writer.layout.partitions)
    if writer.history.writes or written or (writer.partition_columns and writer.layout.partitions):
        raise ValueError(f"register table {writer.full_name} before writing to it")
    db, name = split_table_name(writer.full_name)
    writer.database, writer.table_name = db, name
    if create_database:
        ensure_database(client, db, metastore_location(writer.fs, _parent(writer.path)))
    definition = thrift_table(
        writer, location, bucketing_version=bucketing_version, extra_params=extra_params
    )
    create_table(client, definition)
    created = client.get_table(writer.full_name)
    layout = RegisteringLayout(writer.path, writer.partition_columns)
    writer.history = MetastoreWriteHistory(client, writer.full_name)
    writer.layout = layout
    registered = RegisteredTable(client, writer, created)
    layout.on_new_partition = registered._add_partition
    return registered


__all__ = [
    "ORC_INPUT_FORMAT",
    "ORC_OUTPUT_FORMAT",
    "ORC_SERDE",
    "HistoryMismatchError",
    "MetastoreWriteHistory",
    "RegisteredTable",
    "RegisteringLayout",
    "create_table",
    "drop_database",
    "ensure_database",
    "metastore_location",
    "register_table",
    "storage_only_rows",
    "thrift_table",
]
