"""The metastore's notification log: a table's committed writes and schema changes, as events.

A metastore with a notification listener (Hive's ``DbNotificationListener`` in production)
records its events in a log read with ``get_current_notificationEventId`` and
``get_next_notification``. The messages are Hive's JSON (``json-2.0``), gzipped and base64'd in
Hive 4's default format (``gzip(json-2.0)``).

A table's committed writes are derived from it as Hive's replication does: in Hive 4.0 a
``COMMIT_TXN`` message may carry only its transaction id, so the transaction is mapped to the
table through the table's ``ALLOC_WRITE_ID_EVENT`` messages (``dbName``, ``tableName``,
``txnIdList``, ``writeIdList``). A commit whose allocation lies before the cursor (the write was
open when the reading began) cannot be mapped from the log alone: it is reported as unmatched,
and the sensor then confirms with the table's write-id list.

The log keeps events for a time (``hive.metastore.event.db.listener.timetolive``, a day by
default; Hive's cleaner removes the older ones). A reader whose cursor the log has left behind
gets a :class:`~airflow_provider_acid.metastore.errors.NotificationEventsLostError`, never a
silent skip of what it missed.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from thrift.Thrift import TApplicationException

from .client import MetastoreClient, split_table_name
from .connection import MetastoreAddress
from .errors import MetastoreError, NotificationEventsLostError, NotificationLogError

COMMIT_TXN = "COMMIT_TXN"
ABORT_TXN = "ABORT_TXN"
ALLOC_WRITE_ID = "ALLOC_WRITE_ID_EVENT"  # EventType.ALLOC_WRITE_ID's name in the log
ALTER_TABLE = "ALTER_TABLE"
PAGE = 500  # events asked per get_next_notification call


@dataclass(frozen=True)
class LogEvent:
    """One event of the notification log, its message decoded (Hive's JSON as a dict)."""

    event_id: int
    event_type: str
    event_time: int
    db: str | None
    table: str | None
    message: Mapping[str, Any]


def decode_message(text: str | None, message_format: str | None) -> dict[str, Any]:
    """An event's message as a dict: ``gzip(json-...)`` is base64'd gzip, others plain JSON.

    :param text: the event's ``message``.
    :param message_format: the event's ``messageFormat`` (``gzip(json-2.0)``, ``json-2.0``).
    """
    if not text:
        return {}
    if (message_format or "").startswith("gzip("):
        text = gzip.decompress(base64.b64decode(text)).decode("utf-8")
    return json.loads(text)


def _where(client: MetastoreClient) -> str:
    return f"the notification log of {client.address.uri}"


def _refused(client: MetastoreClient, exc: Exception) -> NotificationLogError:
    return NotificationLogError(
        f"{_where(client)} cannot be read ({exc}); the metastore needs a notification "
        "listener (metastore.transactional.event.listeners) and the notification API open to "
        "this client (hive.metastore.event.db.notification.api.auth)"
    )


def current_event_id(client: MetastoreClient) -> int:
    """The newest event's id; :class:`NotificationLogError` when the log is off or refused.

    :param client: an open client of the metastore.
    """
    try:
        newest = client.current_notification_event_id()
    except (MetastoreError, TApplicationException) as exc:
        raise _refused(client, exc) from None
    if newest <= 0:
        raise NotificationLogError(
            f"{_where(client)} is empty: no event was ever written, so no listener writes it "
            "(metastore.transactional.event.listeners names none)"
        )
    return newest


def _lost(client: MetastoreClient, table: str | None, cursor: int, detail: str) -> str:
    whose = f" (of {table})" if table else ""
    commits = f"commits of {table}" if table else "what happened"
    return (
        f"{_where(client)} has lost the events after the cursor {cursor}{whose}: {detail}. "
        f"The {commits} in between cannot be known from the log. Start the reader again without "
        "a cursor (the metastore sensor without after_event_id: its first look reads the "
        "table's write-id list), and keep events longer than the longest wait "
        "(hive.metastore.event.db.listener.timetolive)"
    )


def events_after(
    client: MetastoreClient,
    after_event_id: int,
    *,
    max_events: int = PAGE,
    table: str | None = None,
) -> Iterator[LogEvent]:
    """Every event after ``after_event_id``, in order, ``max_events`` a call.

    The log's newest id is read first: every event from the cursor up to it must then be
    there, one after another, as Hive's own client checks (``REPL_EVENTS_MISSING_IN_METASTORE``).
    An event missing (Hive's cleaner removed the events older than
    ``hive.metastore.event.db.listener.timetolive``; also when all of them are gone and none
    came since), or a cursor beyond the newest event (the log was reset), is a
    :class:`NotificationEventsLostError` naming the cursor and ``table``, never a silent skip.

    :param client: an open client of the metastore.
    :param after_event_id: the cursor: the id of the last event already seen.
    :param max_events: events asked per ``get_next_notification`` call.
    :param table: ``db.table`` the reading is for, named in the errors.
    """
    cursor = int(after_event_id)
    newest = current_event_id(client)
    if cursor > newest:
        reset = f"its newest event is {newest} (was the metastore's database replaced?)"
        raise NotificationEventsLostError(_lost(client, table, cursor, reset))
    while True:
        try:
            page = client.next_notifications(cursor, max_events)
        except (MetastoreError, TApplicationException) as exc:
            raise _refused(client, exc) from None
        for raw in page:
            if raw.eventId <= cursor:  # Hive's REPL_EVENTS_WITH_DUPLICATE_ID_IN_METASTORE
                raise NotificationLogError(
                    f"{_where(client)} returned event {raw.eventId} after the cursor {cursor}: "
                    "two events share an id, the listener wrote the log wrongly"
                )
            if raw.eventId != cursor + 1:
                gone = f"events {cursor + 1} to {raw.eventId - 1} are no longer in it"
                raise NotificationEventsLostError(_lost(client, table, cursor, gone))
            yield LogEvent(
                event_id=raw.eventId,
                event_type=raw.eventType,
                event_time=raw.eventTime,
                db=(raw.dbName or "").lower() or None,
                table=(raw.tableName or "").lower() or None,
                message=decode_message(raw.message, raw.messageFormat),
            )
            cursor = raw.eventId
        if len(page) < max_events:
            if cursor < newest:  # the events up to the newest one were there, and are gone
                gone = f"events {cursor + 1} to {newest} are no longer in it"
                raise NotificationEventsLostError(_lost(client, table, cursor, gone))
            return


@dataclass(frozen=True)
class TableLog:
    """What the log told about one table between two cursors (event ids).

    ``committed_write_ids`` and ``aborted_write_ids`` are the table's writes whose allocation
    and end both lie in the range; ``unmatched_commits`` the transactions committed in it whose
    allocation lies before (open when the range began: of this table or another);
    ``alter_event_ids`` the table's ``ALTER_TABLE`` events.
    """

    table: str
    after_event_id: int
    last_event_id: int
    committed_write_ids: tuple[int, ...] = ()
    aborted_write_ids: tuple[int, ...] = ()
    unmatched_commits: tuple[int, ...] = ()
    alter_event_ids: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "after_event_id": self.after_event_id,
            "last_event_id": self.last_event_id,
            "committed_write_ids": list(self.committed_write_ids),
            "aborted_write_ids": list(self.aborted_write_ids),
            "unmatched_commits": list(self.unmatched_commits),
            "alter_event_ids": list(self.alter_event_ids),
        }


@dataclass
class TableLogReader:
    """Reads one table's events from a cursor on, call after call, keeping the mapping of
    transactions to tables (from ``ALLOC_WRITE_ID_EVENT``) between calls.

    :meth:`state` and :meth:`resume` carry a reader from one process to the next (the metastore
    sensor keeps it in Airflow's task state store between reschedules).

    :param table: ``db.table``.
    :param after_event_id: the cursor: the id of the last event already seen.
    :param max_events: events asked per ``get_next_notification`` call.
    """

    table: str
    after_event_id: int
    max_events: int = PAGE
    # open transactions seen allocating: this table's write id, or None (another table's)
    _txns: dict[int, int | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.table = ".".join(split_table_name(self.table))
        self.after_event_id = int(self.after_event_id)

    def state(self) -> dict[str, Any]:
        """The cursor and the open transactions seen allocating, as JSON-ready values."""
        return {
            "table": self.table,
            "after_event_id": self.after_event_id,
            "write_ids": {str(txn): wid for txn, wid in self._txns.items() if wid is not None},
            "other_txns": sorted(txn for txn, wid in self._txns.items() if wid is None),
        }

    @classmethod
    def resume(cls, state: Mapping[str, Any], max_events: int = PAGE) -> TableLogReader:
        """The reader a :meth:`state` was taken of.

        :param state: what :meth:`state` returned.
        :param max_events: events asked per ``get_next_notification`` call.
        """
        reader = cls(state["table"], state["after_event_id"], max_events)
        reader._txns = {int(txn): int(wid) for txn, wid in state.get("write_ids", {}).items()}
        reader._txns.update(dict.fromkeys(map(int, state.get("other_txns", ())), None))
        return reader

    def read(self, client: MetastoreClient) -> TableLog:
        """The table's events since the last read (or the cursor); moves the cursor on, only
        when the whole read succeeded (an error leaves the reader as it was).

        :param client: an open client of the metastore.
        """
        start = cursor = self.after_event_id
        txns = dict(self._txns)
        committed: list[int] = []
        aborted: list[int] = []
        unmatched: list[int] = []
        alters: list[int] = []
        for event in events_after(client, start, max_events=self.max_events, table=self.table):
            cursor = event.event_id
            message = event.message
            if event.event_type == ALLOC_WRITE_ID:
                name = f"{message.get('dbName', '')}.{message.get('tableName', '')}".lower()
                ours = name == self.table
                txn_ids = message.get("txnIdList") or ()
                for txn, wid in zip(txn_ids, message.get("writeIdList") or (), strict=True):
                    txns[int(txn)] = int(wid) if ours else None
            elif event.event_type in (COMMIT_TXN, ABORT_TXN):
                txn = int(message.get("txnid", -1))
                if txn in txns:
                    write_id = txns.pop(txn)
                    if write_id is not None:
                        (committed if event.event_type == COMMIT_TXN else aborted).append(write_id)
                elif event.event_type == COMMIT_TXN:
                    unmatched.append(txn)
            elif event.event_type == ALTER_TABLE and f"{event.db}.{event.table}" == self.table:
                alters.append(event.event_id)
        self.after_event_id, self._txns = cursor, txns
        return TableLog(
            table=self.table,
            after_event_id=start,
            last_event_id=cursor,
            committed_write_ids=tuple(sorted(committed)),
            aborted_write_ids=tuple(sorted(aborted)),
            unmatched_commits=tuple(unmatched),
            alter_event_ids=tuple(alters),
        )


def table_log_since(
    metastore: str | MetastoreAddress | MetastoreClient,
    table: str,
    after_event_id: int,
    *,
    max_events: int = PAGE,
) -> TableLog:
    """The events of ``db.table`` after ``after_event_id`` (one read of a
    :class:`TableLogReader`). Blocking (Thrift): in an event loop, call it in a thread.

    :param metastore: ``thrift://HOST:PORT``, an address or an open client.
    :param table: ``db.table``.
    :param after_event_id: the cursor: the id of the last event already seen.
    :param max_events: events asked per ``get_next_notification`` call.
    """
    reader = TableLogReader(table, after_event_id, max_events)
    if isinstance(metastore, MetastoreClient):
        return reader.read(metastore)
    with MetastoreClient(metastore) as client:
        return reader.read(client)


__all__ = [
    "LogEvent",
    "TableLog",
    "TableLogReader",
    "current_event_id",
    "decode_message",
    "events_after",
    "table_log_since",
]
