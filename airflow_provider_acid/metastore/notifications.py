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
from .errors import MetastoreError, NotificationLogError

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


def events_after(
    client: MetastoreClient, after_event_id: int, *, max_events: int = PAGE
) -> Iterator[LogEvent]:
    """Every event after ``after_event_id``, in order, ``max_events`` a call.

    An event missing right after the cursor (the log's time-to-live removed it) is a
    :class:`NotificationLogError`: the events in between are lost, as Hive's replication says.

    :param client: an open client of the metastore.
    :param after_event_id: the cursor: the id of the last event already seen.
    :param max_events: events asked per ``get_next_notification`` call.
    """
    cursor = int(after_event_id)
    while True:
        try:
            page = client.next_notifications(cursor, max_events)
        except (MetastoreError, TApplicationException) as exc:
            raise _refused(client, exc) from None
        if page and page[0].eventId > cursor + 1:
            raise NotificationLogError(
                f"{_where(client)} no longer holds events {cursor + 1} to "
                f"{page[0].eventId - 1} (removed after metastore.event.db.listener.timetolive): "
                "the events after the cursor are lost; start again from the write-id list"
            )
        for raw in page:
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

    :param table: ``db.table``.
    :param after_event_id: the cursor: the id of the last event already seen.
    :param max_events: events asked per ``get_next_notification`` call.
    """

    table: str
    after_event_id: int
    max_events: int = PAGE
    _txns: dict[int, tuple[str, int | None]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.table = ".".join(split_table_name(self.table))
        self.after_event_id = int(self.after_event_id)

    def read(self, client: MetastoreClient) -> TableLog:
        """The table's events since the last read (or the cursor); moves the cursor on.

        :param client: an open client of the metastore.
        """
        start = self.after_event_id
        committed: list[int] = []
        aborted: list[int] = []
        unmatched: list[int] = []
        alters: list[int] = []
        for event in events_after(client, start, max_events=self.max_events):
            self.after_event_id = event.event_id
            message = event.message
            if event.event_type == ALLOC_WRITE_ID:
                name = f"{message.get('dbName', '')}.{message.get('tableName', '')}".lower()
                txns = message.get("txnIdList") or ()
                for txn, write_id in zip(txns, message.get("writeIdList") or (), strict=True):
                    self._txns[int(txn)] = (name, int(write_id))
            elif event.event_type in (COMMIT_TXN, ABORT_TXN):
                txn = int(message.get("txnid", -1))
                name, write_id = self._txns.pop(txn, (None, None))
                if name == self.table and write_id is not None:
                    (committed if event.event_type == COMMIT_TXN else aborted).append(write_id)
                elif name is None and event.event_type == COMMIT_TXN:
                    unmatched.append(txn)
            elif event.event_type == ALTER_TABLE and f"{event.db}.{event.table}" == self.table:
                alters.append(event.event_id)
        return TableLog(
            table=self.table,
            after_event_id=start,
            last_event_id=self.after_event_id,
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
