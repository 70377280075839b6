"""AcidMetastoreWriteTrigger: waits, in the triggerer, for committed writes to a Hive ACID table."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..metastore.changes import committed_writes_since
from ..metastore.client import load_bindings
from ..metastore.connection import MetastoreAddress

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

    :param table: ``db.table`` in the metastore.
    :param metastore_conn_id: the ``hive_metastore`` connection, fetched in the triggerer.
    :param above_write_id: the watermark write id (or give ``snapshot_write_ids``).
    :param snapshot_write_ids: the write-id list of the last snapshot: writes committed since
        count, those open then and committed later too.
    :param poll_interval: seconds between looks.
    """

    def __init__(
        self,
        table: str,
        metastore_conn_id: str,
        above_write_id: int | None = None,
        snapshot_write_ids: str | None = None,
        poll_interval: float = 60.0,
    ) -> None:
        super().__init__()
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
            },
        )

    async def _address(self) -> MetastoreAddress:
        from ..hooks.metastore import AcidMetastoreHook, address_from_connection

        conn = await AcidMetastoreHook.aget_connection(self.metastore_conn_id)
        return address_from_connection(conn, self.metastore_conn_id)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            address = await self._address()
            while True:
                writes = await asyncio.to_thread(
                    committed_writes_since,
                    address,
                    self.table,
                    above_write_id=self.above_write_id,
                    snapshot_write_ids=self.snapshot_write_ids,
                )
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
