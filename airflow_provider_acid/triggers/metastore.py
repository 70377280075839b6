"""AcidMetastoreWriteTrigger: waits, in the triggerer, for committed writes to a Hive ACID table."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..metastore.changes import committed_writes_since
from ..metastore.client import MetastoreClient, load_bindings
from ..metastore.connection import MetastoreAddress
from ..metastore.notifications import TableLogReader, current_event_id

WAIT_ON = ("write_ids", "notifications")

# The Thrift bindings are large modules (about a second to load): loaded with this module, not
# in the first poll's worker thread, where loading them held the interpreter long enough for
# the triggerer to report its event loop blocked.
load_bindings()


class AcidMetastoreWriteTrigger(BaseTrigger):
    """Polls the metastore until the table has writes committed since the watermark.

    "Since" is ``above_write_id``, or the write-id list ``snapshot_write_ids`` (see
    :func:`~airflow_provider_acid.metastore.changes.committed_writes_since`); open and aborted
    writes never count. The Thrift calls block, so each look runs in a worker thread
    (``asyncio.to_thread``) and the triggerer's event loop is never blocked. The connection is
    fetched here, in the triggerer (no password is serialised). Yields exactly one event:
    ``{"status": "success", "metastore", "table", "watermark", "write_ids", "valid_write_ids",
    ...}`` or ``{"status": "error", "message": "..."}``. Holds only primitive arguments.

    With ``wait_on="notifications"`` it reads the metastore's notification log instead of
    polling the write-id list: it looks at the write-id list once when it starts, then reads
    the log from the event-id cursor ``after_event_id`` on and looks again only when the log
    shows a commit of the table (mapped through its ``ALLOC_WRITE_ID_EVENT``) or of a
    transaction allocated before the cursor; another table's commit or an abort never wakes
    it. The cursor is an argument: a triggerer restart reads
    the log again from it, so no commit since the deferral is missed. Its event adds
    ``last_event_id``, the cursor to resume from, and ``alter_event_ids``, the table's
    ``ALTER_TABLE`` events read.

    :param table: ``db.table`` in the metastore.
    :param metastore_conn_id: the ``hive_metastore`` connection, fetched in the triggerer.
    :param above_write_id: the watermark write id (or give ``snapshot_write_ids``).
    :param snapshot_write_ids: the write-id list of the last snapshot: writes committed since
        count, those open then and committed later too.
    :param poll_interval: seconds between looks.
    :param wait_on: ``write_ids`` (poll the write-id list) or ``notifications`` (read the log).
    :param after_event_id: ``notifications``: the cursor, the id of the last event already
        seen (None: the newest event when the trigger starts).
    """

    def __init__(
        self,
        table: str,
        metastore_conn_id: str,
        above_write_id: int | None = None,
        snapshot_write_ids: str | None = None,
        poll_interval: float = 60.0,
        wait_on: str = "write_ids",
        after_event_id: int | None = None,
    ) -> None:
        super().__init__()
        if wait_on not in WAIT_ON:
            raise ValueError(f"wait_on must be one of {WAIT_ON}, got {wait_on!r}")
        self.wait_on = wait_on
        self.after_event_id = int(after_event_id) if after_event_id is not None else None
        self.table = table
        self.metastore_conn_id = metastore_conn_id
        self.above_write_id = int(above_write_id) if above_write_id is not None else None
        self.snapshot_write_ids = snapshot_write_ids or None
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table": self.table,
                "metastore_conn_id": self.metastore_conn_id,
                "above_write_id": self.above_write_id,
                "snapshot_write_ids": self.snapshot_write_ids,
                "poll_interval": self.poll_interval,
                "wait_on": self.wait_on,
                "after_event_id": self.after_event_id,
            },
        )

    async def _address(self) -> MetastoreAddress:
        from ..hooks.metastore import AcidMetastoreHook, address_from_connection

        conn = await AcidMetastoreHook.aget_connection(self.metastore_conn_id)
        return address_from_connection(conn, self.metastore_conn_id)

    def _writes(self, address: MetastoreAddress) -> Any:
        return committed_writes_since(
            address,
            self.table,
            above_write_id=self.above_write_id,
            snapshot_write_ids=self.snapshot_write_ids,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            address = await self._address()
            if self.wait_on == "notifications":
                async for event in self._run_on_log(address):
                    yield event
                return
            while True:
                writes = await asyncio.to_thread(self._writes, address)
                if writes.found:
                    yield TriggerEvent(
                        {"status": "success", "metastore": address.uri, **writes.to_dict()}
                    )
                    return
                self.log.info(
                    "No write of %s committed since write %s (write ids now %s); next look in %ss",
                    writes.table,
                    writes.watermark,
                    writes.valid_write_ids,
                    self.poll_interval,
                )
                await asyncio.sleep(self.poll_interval)
        except Exception as exc:  # reported to the sensor, which fails the task with it
            yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})

    async def _run_on_log(self, address: MetastoreAddress) -> AsyncIterator[TriggerEvent]:
        reader = await asyncio.to_thread(self._reader, address)
        alters: list[int] = []
        look = True  # once at the start: what was committed before the cursor counts too
        while True:
            log = await asyncio.to_thread(_read, address, reader)
            alters += log.alter_event_ids
            if look or log.committed_write_ids or log.unmatched_commits:
                look = False
                writes = await asyncio.to_thread(self._writes, address)
                if writes.found:
                    yield TriggerEvent(
                        {
                            "status": "success",
                            "metastore": address.uri,
                            **writes.to_dict(),
                            "last_event_id": log.last_event_id,
                            "alter_event_ids": alters,
                        }
                    )
                    return
            self.log.info(
                "No commit of %s in the notification log up to event %d; next look in %ss",
                self.table,
                log.last_event_id,
                self.poll_interval,
            )
            await asyncio.sleep(self.poll_interval)

    def _reader(self, address: MetastoreAddress) -> TableLogReader:
        if self.after_event_id is not None:
            return TableLogReader(self.table, self.after_event_id)
        with MetastoreClient(address) as client:
            return TableLogReader(self.table, current_event_id(client))


def _read(address: MetastoreAddress, reader: TableLogReader) -> Any:
    with MetastoreClient(address) as client:
        return reader.read(client)
