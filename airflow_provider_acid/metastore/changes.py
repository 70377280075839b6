"""Committed writes since a watermark, as the metastore tells them: what the metastore sensor
waits for.

A table's writes, as the metastore's reader view gives them (``view.read_view``), are committed,
open or aborted. Only committed ones count here, never open or aborted ones. "Since" is either

* a watermark (``above_write_id``): the committed write ids above it; or
* the write-id list a snapshot was read with (``snapshot_write_ids``, Hive's serialized form, as
  the snapshot's manifest records it): the write ids committed now that were not committed in
  that list. Those above its high watermark, and those it had open: a write open when the
  snapshot was read and committed later counts, which a bare number cannot tell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..acid.writeids import parse_write_id_list
from .client import MetastoreClient, split_table_name
from .connection import MetastoreAddress
from .tables import check_transactional
from .view import ReadView, check_view_table, read_view


@dataclass(frozen=True)
class CommittedWrites:
    """One look at a table's writes: the ones committed since the watermark (if any).

    ``write_ids`` are sorted; ``valid_write_ids`` is the table's write-id list at the time of
    the look (Hive's serialized form) and ``high_watermark`` its high watermark.
    ``snapshot_write_ids`` is the list "since" meant, when it was a snapshot's.
    """

    table: str
    watermark: int
    write_ids: tuple[int, ...]
    valid_write_ids: str
    high_watermark: int
    snapshot_write_ids: str | None = None

    @property
    def found(self) -> bool:
        return bool(self.write_ids)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "watermark": self.watermark,
            "write_ids": list(self.write_ids),
            "valid_write_ids": self.valid_write_ids,
            "high_watermark": self.high_watermark,
            "snapshot_write_ids": self.snapshot_write_ids,
        }


def committed_writes_since(
    metastore: str | MetastoreAddress | MetastoreClient,
    table: str,
    *,
    above_write_id: int | None = None,
    snapshot_write_ids: str | None = None,
    check_table: bool = True,
) -> CommittedWrites:
    """The writes of ``db.table`` committed since ``above_write_id`` or since the write-id list
    ``snapshot_write_ids`` (at most one of them; neither: since write 0, i.e. any commit).

    With ``check_table`` the table is read first: an unknown table is a
    ``TableNotFoundError`` and a non-transactional one a ``NotTransactionalError`` (the
    metastore answers the write-id list of an unknown table as an empty one, which would make
    a typo wait forever). A snapshot list of another table is a ``WriteIdListMismatchError``.
    Blocking (Thrift): in an event loop, call it in a thread.
    """
    if above_write_id is not None and snapshot_write_ids:
        raise ValueError("give above_write_id or snapshot_write_ids, not both")
    name = ".".join(split_table_name(table))
    before = None
    if snapshot_write_ids:
        before = parse_write_id_list(snapshot_write_ids, name)
        check_view_table(before, name)
        if before.is_all_committed:  # no list in effect: nothing to compare with
            before = None
    watermark = before.high_watermark if before is not None else int(above_write_id or 0)
    if isinstance(metastore, MetastoreClient):
        view = _look(metastore, name, check_table)
    else:
        with MetastoreClient(metastore) as client:
            view = _look(client, name, check_table)
    return CommittedWrites(
        table=name,
        watermark=watermark,
        write_ids=tuple(sorted(view.newly_committed(before, watermark))),
        valid_write_ids=str(view.write_ids),
        high_watermark=view.write_ids.high_watermark,
        snapshot_write_ids=str(before) if before is not None else None,
    )


def _look(client: MetastoreClient, name: str, check_table: bool) -> ReadView:
    if check_table:
        check_transactional(client.get_table(name))
    return read_view(client, name)


@dataclass(frozen=True)
class SnapshotWatermark:
    """What "since the last snapshot" means for one table: ``above_write_id`` (the snapshot's
    highest source write id, 0 without a snapshot) and, when the snapshot was read with one,
    its write-id list (then the list is what counts: see :func:`committed_writes_since`)."""

    above_write_id: int
    write_ids: str | None = None
    snapshot_id: str | None = None

    def since(self) -> dict[str, Any]:
        """The keyword arguments of :func:`committed_writes_since` this watermark means."""
        if self.write_ids:
            return {"above_write_id": None, "snapshot_write_ids": self.write_ids}
        return {"above_write_id": self.above_write_id, "snapshot_write_ids": None}


__all__ = [
    "CommittedWrites",
    "SnapshotWatermark",
    "committed_writes_since",
]
