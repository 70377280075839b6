"""A thin client of the Hive Metastore's Thrift API, in its Hive 3.1 and Hive 4 forms.

The Thrift bindings are the ones Apache Iceberg's pyiceberg ships (``hive_metastore``,
generated from Hive's ``hive_metastore.thrift``); this module only picks the calls, translates
errors into ones that name the metastore and the table, and speaks both API generations:

=========================  =====================================  ==========================
what                        Hive 4 form (tried first)              Hive 3.1 form (fallback)
=========================  =====================================  ==========================
creating a table            ``create_table_req``                   ``create_table(Table)``
partitions by name          ``get_partitions_by_names_req``        ``get_partitions_by_names``
=========================  =====================================  ==========================

A table is read with ``get_table_req`` in both (Hive 3.0 added it; Hive 4 removed the older
``get_table``, which stays the fallback for Hive 2). Partition names (``get_partition_names``)
and the transaction calls (``get_open_txns``, ``get_valid_write_ids``, ``open_txns``,
``heartbeat``, ``commit_txn``, ``abort_txn``, ``allocate_table_write_ids``) have one form in
both. ``api="auto"`` tries the Hive 4 form and falls back, for the rest of the connection, when
the metastore answers that it does not know the method; ``api="hive3"`` uses only the 3.1
forms and ``api="hive4"`` only the newer ones. Hive 4's request forms carry this client's
processor capabilities, without which a Hive 4 metastore refuses to create ACID tables.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from thrift.Thrift import TApplicationException
from thrift.transport.TTransport import TTransportException

from .connection import MetastoreAddress, open_client
from .errors import MetastoreConnectionError, MetastoreError, TableNotFoundError

T = TypeVar("T")
API_FORMS = ("auto", "hive3", "hive4")
#: What this client tells a Hive 4 metastore it can do (its ``MetastoreDefaultTransformer``
#: hides or refuses ACID tables to processors that declare nothing): read full-ACID and
#: insert-only tables and bucketing version 2, and (for the simulator) write them.
PROCESSOR_CAPABILITIES = [
    "HIVEFULLACIDREAD",
    "HIVEMANAGEDINSERTREAD",
    "HIVEBUCKET2",
    "EXTREAD",
    "HIVEFULLACIDWRITE",
    "HIVEMANAGEDINSERTWRITE",
]
PROCESSOR_IDENTIFIER = "airflow-provider-acid"
_BATCH = 500  # partitions fetched per call


def load_bindings() -> tuple[Any, Any]:
    """The Thrift service and types modules (``hive_metastore``), imported on first use."""
    return _bindings()


def _bindings() -> tuple[Any, Any]:
    try:
        from hive_metastore import ThriftHiveMetastore, ttypes
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise MetastoreError(
            "the Hive Metastore Thrift bindings are missing: install pyiceberg "
            "(pip install 'airflow-provider-acid[metastore]')"
        ) from exc
    return ThriftHiveMetastore, ttypes


def split_table_name(name: str) -> tuple[str, str]:
    """``db.table`` -> (``db``, ``table``), lower-cased as the metastore stores them; a name
    without a database is in ``default``."""
    text = (name or "").strip()
    if not text:
        raise ValueError("table: no table name given (expected DB.TABLE)")
    db, _, table = text.rpartition(".")
    db = db or "default"
    if not table or "." in db:
        raise ValueError(f"table {name!r} is not DB.TABLE")
    return db.lower(), table.lower()


class MetastoreClient:
    """One connection to a Hive Metastore. Use as a context manager, or call :meth:`close`.

    :param address: ``thrift://HOST:PORT`` or a :class:`MetastoreAddress` (with auth).
    :param api: ``auto``, ``hive3`` or ``hive4`` (see the module's table).
    """

    def __init__(self, address: str | MetastoreAddress, *, api: str = "auto") -> None:
        if api not in API_FORMS:
            raise ValueError(f"api must be one of {API_FORMS}, got {api!r}")
        self.address = MetastoreAddress.parse(address)
        self.api = api
        self._legacy: set[str] = set()  # calls this metastore answered "unknown method" to
        self._client: Any = None
        self._transport: Any = None
        self.endpoint: tuple[str, int] | None = None
        self.calls: list[str] = []  # every Thrift call made, in order (for tests and logs)

    # -- the connection ---------------------------------------------------------------------

    def open(self) -> MetastoreClient:
        if self._client is None:
            service, _ = _bindings()
            self._client, self._transport, self.endpoint = open_client(self.address, service.Client)
        return self

    def close(self) -> None:
        if self._transport is not None:
            try:
                self._transport.close()
            finally:
                self._client = self._transport = None

    def __enter__(self) -> MetastoreClient:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def where(self) -> str:
        host, port = self.endpoint or self.address.endpoints[0]
        return f"Hive Metastore at {host}:{port}"

    def _call(self, name: str, *args: Any) -> Any:
        self.open()
        self.calls.append(name)
        _, ttypes = _bindings()
        try:
            return getattr(self._client, name)(*args)
        except (TimeoutError, TTransportException, OSError) as exc:
            self.close()
            raise MetastoreConnectionError(f"{self.where}: {name} failed: {exc}") from exc
        except ttypes.MetaException as exc:
            # the metastore's own error, with its message (pyiceberg's exception objects are
            # immutable: re-raised through a context manager they would hide it)
            raise MetastoreError(f"{self.where}: {name} failed: {exc.message}") from None

    def _either(
        self,
        name4: str,
        call4: Callable[[], T],
        name3: str,
        call3: Callable[[], T],
        *,
        in_hive3: bool = False,
    ) -> T:
        """The newer form, or the older one where the metastore lacks it (or ``api`` says).

        ``in_hive3``: Hive 3.1 has the newer form too (the older one predates it)."""
        if (self.api == "hive3" and not in_hive3) or name4 in self._legacy:
            return call3()
        try:
            return call4()
        except TApplicationException as exc:
            if exc.type != TApplicationException.UNKNOWN_METHOD or self.api == "hive4":
                raise MetastoreError(f"{self.where}: {name4} failed: {exc}") from exc
            self._legacy.add(name4)
            return call3()

    def _not_found(self, exc: Exception, what: str) -> TableNotFoundError:
        message = getattr(exc, "message", None) or str(exc)
        return TableNotFoundError(f"{what} not found in the {self.where}: {message}")

    # -- tables and partitions --------------------------------------------------------------

    def get_table(self, name: str) -> Any:
        """The Thrift ``Table`` of ``db.table``; :class:`TableNotFoundError` if there is none."""
        db, table = split_table_name(name)
        _, ttypes = _bindings()
        try:
            return self._either(
                "get_table_req",
                lambda: (
                    self._call(
                        "get_table_req",
                        ttypes.GetTableRequest(
                            dbName=db,
                            tblName=table,
                            # without it Hive 4 refuses insert-only tables ("Your client does
                            # not appear to support insert-only tables")
                            capabilities=ttypes.ClientCapabilities(
                                [ttypes.ClientCapability.INSERT_ONLY_TABLES]
                            ),
                            processorCapabilities=PROCESSOR_CAPABILITIES,
                            processorIdentifier=PROCESSOR_IDENTIFIER,
                        ),
                    ).table
                ),
                "get_table",
                lambda: self._call("get_table", db, table),
                in_hive3=True,
            )
        except ttypes.NoSuchObjectException as exc:
            raise self._not_found(exc, f"table {db}.{table}") from None

    def databases(self) -> list[str]:
        return list(self._call("get_all_databases"))

    def get_database(self, name: str) -> Any:
        _, ttypes = _bindings()
        try:
            return self._call("get_database", name.lower())
        except ttypes.NoSuchObjectException as exc:
            raise self._not_found(exc, f"database {name}") from None

    def partition_names(self, name: str) -> list[str]:
        """Every partition's name (``k=v/k2=v2``, escaped as Hive names folders).

        ``get_partition_names`` in both API generations: Hive 4's request forms of it need a
        filter expression or partial values, which listing every name has not."""
        db, table = split_table_name(name)
        _, ttypes = _bindings()
        try:
            return list(self._call("get_partition_names", db, table, -1))
        except ttypes.NoSuchObjectException as exc:
            raise self._not_found(exc, f"table {db}.{table}") from None

    def partitions_by_names(self, name: str, names: Sequence[str]) -> list[Any]:
        """The Thrift ``Partition`` objects of the named partitions, ``_BATCH`` a call."""
        db, table = split_table_name(name)
        _, ttypes = _bindings()
        found: list[Any] = []
        for start in range(0, len(names), _BATCH):
            batch = list(names[start : start + _BATCH])
            try:
                found += self._either(
                    "get_partitions_by_names_req",
                    lambda batch=batch: (
                        self._call(
                            "get_partitions_by_names_req",
                            ttypes.GetPartitionsByNamesRequest(
                                db_name=db,
                                tbl_name=table,
                                names=batch,
                                processorCapabilities=PROCESSOR_CAPABILITIES,
                                processorIdentifier=PROCESSOR_IDENTIFIER,
                            ),
                        ).partitions
                    ),
                    "get_partitions_by_names",
                    lambda batch=batch: self._call("get_partitions_by_names", db, table, batch),
                )
            except ttypes.NoSuchObjectException as exc:
                raise self._not_found(exc, f"partitions of {db}.{table}") from None
        return found

    # -- transactions and write ids ---------------------------------------------------------

    def get_open_txns(self) -> Any:
        """Open and aborted transactions, as a reader's view needs them (Hive 4 leaves out
        read-only transactions: they write nothing)."""
        return self._call("get_open_txns")

    def open_transactions(self) -> dict[int, Any]:
        """Every transaction the metastore has open or aborted, read-only ones included:
        ``{txn id: TxnInfo}`` (``state``, ``user``, ``hostname``, ``agentInfo``)."""
        return {t.id: t for t in self._call("get_open_txns_info").open_txns or ()}

    def get_valid_write_ids(self, names: Iterable[str], txn_list: str) -> list[Any]:
        _, ttypes = _bindings()
        full = [".".join(split_table_name(n)) for n in names]
        try:
            response = self._call(
                "get_valid_write_ids",
                ttypes.GetValidWriteIdsRequest(fullTableNames=full, validTxnList=txn_list),
            )
        except (ttypes.NoSuchTxnException, ttypes.MetaException) as exc:
            raise MetastoreError(
                f"{self.where}: get_valid_write_ids for {', '.join(full)} failed: "
                f"{getattr(exc, 'message', exc)}"
            ) from None
        return list(response.tblValidWriteIds or ())

    def open_txns(
        self, count: int = 1, *, read_only: bool = False, user: str | None = None
    ) -> list[int]:
        _, ttypes = _bindings()
        request = ttypes.OpenTxnRequest(
            num_txns=count,
            user=user or _user(),
            hostname=socket.gethostname(),
            agentInfo="airflow-provider-acid",
            txn_type=ttypes.TxnType.READ_ONLY if read_only else None,
        )
        return list(self._call("open_txns", request).txn_ids)

    def heartbeat(self, txn_id: int) -> None:
        _, ttypes = _bindings()
        self._call("heartbeat", ttypes.HeartbeatRequest(txnid=txn_id))

    def commit_txn(self, txn_id: int) -> None:
        _, ttypes = _bindings()
        self._call("commit_txn", ttypes.CommitTxnRequest(txnid=txn_id))

    def abort_txn(self, txn_id: int) -> None:
        _, ttypes = _bindings()
        self._call("abort_txn", ttypes.AbortTxnRequest(txnid=txn_id))

    def allocate_write_ids(self, name: str, txn_ids: Sequence[int]) -> dict[int, int]:
        """A write id of ``db.table`` for each open transaction: ``{txn id: write id}``."""
        db, table = split_table_name(name)
        _, ttypes = _bindings()
        response = self._call(
            "allocate_table_write_ids",
            ttypes.AllocateTableWriteIdsRequest(dbName=db, tableName=table, txnIds=list(txn_ids)),
        )
        return {t.txnId: t.writeId for t in response.txnToWriteIds}

    # -- the notification log ---------------------------------------------------------------

    def current_notification_event_id(self) -> int:
        """The id of the newest event in the metastore's notification log (0: none ever)."""
        return int(self._call("get_current_notificationEventId").eventId)

    def next_notifications(self, last_event: int, max_events: int) -> list[Any]:
        """At most ``max_events`` Thrift ``NotificationEvent`` objects after ``last_event``."""
        _, ttypes = _bindings()
        request = ttypes.NotificationEventRequest(lastEvent=last_event, maxEvents=max_events)
        return list(self._call("get_next_notification", request).events or ())

    # -- defining tables (the simulator and the tests register theirs) ----------------------

    def create_database(
        self, name: str, location: str | None = None, managed_location: str | None = None
    ) -> None:
        """Create a database; Hive 4 wants managed (ACID) tables below ``managed_location``
        (or its warehouse), and refuses a ``managed_location`` folder that exists already
        (set it with :meth:`alter_database` then); Hive 3 ignores it."""
        _, ttypes = _bindings()
        database = ttypes.Database(
            name=name.lower(), locationUri=location, managedLocationUri=managed_location
        )
        try:
            self._call("create_database", database)
        except ttypes.AlreadyExistsException:
            pass

    def alter_database(self, name: str, database: Any) -> None:
        self._call("alter_database", name.lower(), database)

    def drop_database(self, name: str, *, cascade: bool = True, delete_data: bool = False) -> None:
        _, ttypes = _bindings()
        try:
            self._call("drop_database", name.lower(), delete_data, cascade)
        except ttypes.NoSuchObjectException:
            pass

    def table_names(self, database: str) -> list[str]:
        return list(self._call("get_all_tables", database.lower()))

    def create_table(self, table: Any) -> None:
        """Create a table (a Thrift ``Table``), declaring this client's capabilities."""
        _, ttypes = _bindings()
        self._either(
            "create_table_req",
            lambda: self._call(
                "create_table_req",
                ttypes.CreateTableRequest(
                    table=table,
                    processorCapabilities=PROCESSOR_CAPABILITIES,
                    processorIdentifier=PROCESSOR_IDENTIFIER,
                ),
            ),
            "create_table",
            lambda: self._call("create_table", table),
        )

    def drop_table(self, name: str, *, delete_data: bool = False) -> None:
        db, table = split_table_name(name)
        _, ttypes = _bindings()
        try:
            self._call("drop_table", db, table, delete_data)
        except ttypes.NoSuchObjectException:
            pass

    def add_partitions(self, partitions: Sequence[Any]) -> None:
        for start in range(0, len(partitions), _BATCH):
            self._call("add_partitions", list(partitions[start : start + _BATCH]))


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in some containers
        return "airflow"


__all__ = ["API_FORMS", "MetastoreClient", "split_table_name"]
