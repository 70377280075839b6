"""The watermark of a table's last committed snapshot: what "since the last snapshot" means.

It reads the output side (the latest snapshot committed under an output folder) and checks it
against the metastore's names and write-id lists, so it sits above both.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..acid.writeids import parse_write_id_list
from ..metastore.changes import SnapshotWatermark
from ..metastore.client import split_table_name
from ..metastore.errors import WriteIdListMismatchError
from ..metastore.view import check_view_table


def snapshot_watermark(
    out_uri: str,
    table: str,
    *,
    committed_before: dt.datetime | str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> SnapshotWatermark:
    """The watermark of the latest snapshot committed under ``out_uri`` (only those committed
    before ``committed_before`` count, as for ``output.last_committed_write_id``).

    A snapshot of another table (by the name its manifest records) is a
    ``WriteIdListMismatchError``: the sensor would otherwise compare unrelated write ids.
    """
    from ..output import latest_snapshot  # pyarrow: not for the triggerer's imports

    last = latest_snapshot(
        out_uri, committed_before=committed_before, storage_options=storage_options
    )
    if last is None:
        return SnapshotWatermark(0)
    name = ".".join(split_table_name(table))
    if last.table_name and ".".join(split_table_name(last.table_name)) != name:
        raise WriteIdListMismatchError(
            f"the last snapshot under {out_uri} ({last.snapshot_id}) is of table "
            f"{last.table_name}, not {name}"
        )
    write_ids = last.write_ids or None
    if write_ids is not None:
        parsed = parse_write_id_list(write_ids, name)
        check_view_table(parsed, name)
        write_ids = None if parsed.is_all_committed else str(parsed)
    return SnapshotWatermark(last.max_write_id, write_ids, last.snapshot_id)


__all__ = ["snapshot_watermark"]
