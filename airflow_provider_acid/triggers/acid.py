"""AcidDeltaTrigger: waits, in the triggerer, for new delta folders in a Hive ACID table."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..acid.changes import new_delta_folders, parse_kinds
from ..acid.listing import aclose_filesystem, alist_table_files, open_async_filesystem
from ..acid.partition_listing import alist_watched_partitions


class AcidDeltaTrigger(BaseTrigger):
    """Polls a table until it holds delta folders with write ids above ``above_write_id``.

    Listing is asynchronous where the filesystem supports it (s3fs) and runs in a worker
    thread otherwise, so the triggerer's event loop is never blocked; with ``partitions``,
    only those partition folders are listed. Yields exactly one event:
    ``{"status": "success", "folders": [...]}`` or ``{"status": "error", "message": "..."}``.
    Holds only primitive arguments, so it serialises as it is.

    :param table_uri: the table's location (resolved already: no connection prefix).
    :param above_write_id: the watermark: only folders with write ids above it count.
    :param kinds: ``"delta"``, ``"delete_delta"`` or both.
    :param partitions: only these partition paths (``k=v[/k2=v2]``); None lists them all.
    :param poll_interval: seconds between looks.
    :param acid_conn_id: the ``acid`` connection for storage credentials, fetched in the
        triggerer.
    """

    def __init__(
        self,
        table_uri: str,
        above_write_id: int,
        kinds: list[str] | tuple[str, ...] = ("delta", "delete_delta"),
        partitions: list[str] | None = None,
        poll_interval: float = 60.0,
        acid_conn_id: str | None = None,
    ) -> None:
        super().__init__()
        self.table_uri = table_uri
        self.above_write_id = int(above_write_id)
        self.kinds = list(kinds)
        self.partitions = list(partitions) if partitions is not None else None
        self.poll_interval = float(poll_interval)
        self.acid_conn_id = acid_conn_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table_uri": self.table_uri,
                "above_write_id": self.above_write_id,
                "kinds": self.kinds,
                "partitions": self.partitions,
                "poll_interval": self.poll_interval,
                "acid_conn_id": self.acid_conn_id,
            },
        )

    async def _storage_options(self) -> dict[str, Any]:
        if not self.acid_conn_id:
            return {}
        from ..hooks.acid import AcidHook, storage_options_from_extra

        conn = await AcidHook.aget_connection(self.acid_conn_id)
        return storage_options_from_extra(conn.extra_dejson or {})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        fs = None
        try:
            kinds = parse_kinds(self.kinds)
            fs, root = open_async_filesystem(self.table_uri, await self._storage_options())
            while True:
                if self.partitions is None:
                    files = await alist_table_files(fs, root)
                else:  # only the partitions watched are listed, in parallel
                    files = await alist_watched_partitions(fs, root, self.partitions)
                folders = new_delta_folders(
                    files, root, self.above_write_id, kinds, self.partitions
                )
                if folders:
                    yield TriggerEvent(
                        {"status": "success", "folders": [f.to_dict() for f in folders]}
                    )
                    return
                self.log.info(
                    "No delta folder above write %s in %s yet; next look in %ss",
                    self.above_write_id,
                    self.table_uri,
                    self.poll_interval,
                )
                await asyncio.sleep(self.poll_interval)
        except Exception as exc:  # reported to the sensor, which fails the task with it
            yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
        finally:
            if fs is not None:
                await aclose_filesystem(fs)
