"""Event triggers for asset watchers: a DAG scheduled on an asset runs when the table changes.

Airflow 3 runs an :class:`~airflow.sdk.AssetWatcher`'s trigger in the triggerer for as long as
a DAG is scheduled on the asset, and turns every event it yields into an asset event (whose
``extra`` holds the payload) and so into a DAG run. Unlike the sensors' triggers, which yield
one event and end, these two keep watching and yield one event per change:

* :class:`AcidDeltaEventTrigger`: per new delta or delete-delta folder on storage (the folder
  counts once it holds a non-empty file, as for :class:`~.acid.AcidDeltaTrigger`);
* :class:`AcidMetastoreWriteEventTrigger`: per write newly committed in the metastore (a write
  open at one look and committed later counts then; open and aborted writes never count).

Both start from the table as they first see it (only later changes count) unless
``above_write_id`` says from where. Their arguments are primitives and never change, so the
trigger's identity (``BaseEventTrigger.hash`` of its arguments) is stable; the watermark they
advance lives in the running trigger, and a restarted triggerer starts again from the table as
it then is (or from ``above_write_id``).

Usage::

    changes = Asset("sales_changes", watchers=[AssetWatcher(
        name="sales_deltas", trigger=AcidDeltaEventTrigger(table_uri="s3://wh/sales"))])
    with DAG("snapshot_on_change", schedule=[changes]): ...
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from ..acid.changes import new_delta_folders, parse_kinds
from ..acid.listing import aclose_filesystem, alist_table_files, open_async_filesystem
from .acid import AcidDeltaTrigger
from .metastore import AcidMetastoreWriteTrigger


class AcidDeltaEventTrigger(BaseEventTrigger):
    """Yields one event per new delta folder of a Hive ACID table, for as long as it runs.

    Each event's payload is ``{"table_uri", "partition", "folder", "kind", "min_write_id",
    "max_write_id"}``. A folder is new when the trigger has not seen it before: at start every
    folder present counts as seen (with ``above_write_id``, only those at or below it), so a
    delete delta sharing its write id with an update's delta still counts once it appears. A
    look that fails (the table's location unreachable) is logged and retried at the next
    poll: a watcher never ends.

    :param table_uri: the table's location.
    :param kinds: ``"delta"``, ``"delete_delta"`` or both.
    :param partitions: only these partition paths (``k=v[/k2=v2]``); None lists them all.
    :param poll_interval: seconds between looks.
    :param acid_conn_id: the ``acid`` connection for storage credentials, fetched in the
        triggerer.
    :param above_write_id: count every folder above this write id as new, those present at
        start included (None: only folders that appear later).
    """

    def __init__(
        self,
        table_uri: str,
        kinds: list[str] | tuple[str, ...] = ("delta", "delete_delta"),
        partitions: list[str] | None = None,
        poll_interval: float = 60.0,
        acid_conn_id: str | None = None,
        above_write_id: int | None = None,
    ) -> None:
        super().__init__()
        self.table_uri = table_uri
        self.kinds = list(kinds)
        self.partitions = list(partitions) if partitions is not None else None
        self.poll_interval = float(poll_interval)
        self.acid_conn_id = acid_conn_id
        self.above_write_id = int(above_write_id) if above_write_id is not None else None
        parse_kinds(self.kinds)  # a bad kind fails the DAG file, not the triggerer

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table_uri": self.table_uri,
                "kinds": self.kinds,
                "partitions": self.partitions,
                "poll_interval": self.poll_interval,
                "acid_conn_id": self.acid_conn_id,
                "above_write_id": self.above_write_id,
            },
        )

    _storage_options = AcidDeltaTrigger._storage_options

    async def run(self) -> AsyncIterator[TriggerEvent]:
        kinds = parse_kinds(self.kinds)
        fs, root = open_async_filesystem(self.table_uri, await self._storage_options())
        seen: set[tuple[str, str]] | None = None
        try:
            while True:
                try:
                    files = await alist_table_files(fs, root)
                except Exception as exc:  # retried: a watcher must outlive a storage hiccup
                    self.log.warning(
                        "Cannot list %s (%s); next look in %ss",
                        self.table_uri,
                        exc,
                        self.poll_interval,
                    )
                    await asyncio.sleep(self.poll_interval)
                    continue
                folders = new_delta_folders(files, root, 0, kinds, self.partitions)
                now = {(f.partition, f.folder) for f in folders}
                if seen is None:  # the first look: what is there already is not a change
                    floor = self.above_write_id
                    seen = {
                        (f.partition, f.folder)
                        for f in folders
                        if floor is None or f.max_write_id <= floor
                    }
                for folder in folders:
                    if (folder.partition, folder.folder) in seen:
                        continue
                    self.log.info("New %s folder %s in %s", folder.kind, folder.folder, root)
                    yield TriggerEvent({"table_uri": self.table_uri, **folder.to_dict()})
                # folders removed (Hive's Cleaner) never come back under the same name
                seen = now
                await asyncio.sleep(self.poll_interval)
        finally:
            await aclose_filesystem(fs)


class AcidMetastoreWriteEventTrigger(BaseEventTrigger):
    """Yields one event per write committed to a Hive ACID table in the metastore.

    Each event's payload is ``{"metastore", "table", "write_id", "valid_write_ids"}``, in
    write-id order; ``valid_write_ids`` is the table's write-id list at the look that saw the
    commit. Between looks the trigger keeps the last write-id list it saw, so a write open at
    one look that commits later fires then (compared as
    :func:`~airflow_provider_acid.metastore.changes.committed_writes_since` compares a
    snapshot's list). A failed look is logged and retried at the next poll.

    :param table: ``db.table`` in the metastore.
    :param metastore_conn_id: the ``hive_metastore`` connection, fetched in the triggerer.
    :param poll_interval: seconds between looks.
    :param above_write_id: count every commit above this write id, those made before the
        start included (None: only later commits).
    """

    def __init__(
        self,
        table: str,
        metastore_conn_id: str,
        poll_interval: float = 60.0,
        above_write_id: int | None = None,
    ) -> None:
        super().__init__()
        self.table = table
        self.metastore_conn_id = metastore_conn_id
        self.poll_interval = float(poll_interval)
        self.above_write_id = int(above_write_id) if above_write_id is not None else None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table": self.table,
                "metastore_conn_id": self.metastore_conn_id,
                "poll_interval": self.poll_interval,
                "above_write_id": self.above_write_id,
            },
        )

    _address = AcidMetastoreWriteTrigger._address

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from ..metastore.changes import committed_writes_since

        address = None
        since: dict[str, Any] | None = (
            {"above_write_id": self.above_write_id} if self.above_write_id is not None else None
        )
        while True:
            try:
                address = address or await self._address()
                if since is None:  # the first look: the list now is the starting point
                    first = await asyncio.to_thread(
                        committed_writes_since, address, self.table, above_write_id=0
                    )
                    since = {"snapshot_write_ids": first.valid_write_ids}
                writes = await asyncio.to_thread(
                    committed_writes_since, address, self.table, **since
                )
            except Exception as exc:  # retried: a watcher must outlive a metastore restart
                self.log.warning(
                    "Cannot read the writes of %s (%s); next look in %ss",
                    self.table,
                    exc,
                    self.poll_interval,
                )
                await asyncio.sleep(self.poll_interval)
                continue
            for write_id in writes.write_ids:
                self.log.info("Write %s of %s committed", write_id, writes.table)
                yield TriggerEvent(
                    {
                        "metastore": address.uri,
                        "table": writes.table,
                        "write_id": write_id,
                        "valid_write_ids": writes.valid_write_ids,
                    }
                )
            since = {"snapshot_write_ids": writes.valid_write_ids}
            await asyncio.sleep(self.poll_interval)
