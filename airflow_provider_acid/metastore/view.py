"""The reader's view of a table's writes, as the metastore gives it to Hive's own readers.

Hive reads a transactional table in two calls (``TxnCommonUtils``): ``get_open_txns`` gives
the transaction list (``createValidReadTxnList``), then ``get_valid_write_ids`` with that list
gives the table's write-id list (``createValidReaderWriteIdList``). Writes that are open or
aborted at that moment are exceptions; everything up to the high watermark else is committed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..acid.writeids import NO_OPEN_ID, ValidTxnList, ValidWriteIdList
from .client import MetastoreClient, split_table_name
from .errors import MetastoreError, WriteIdListMismatchError


def _bits(data: bytes | None) -> set[int]:
    """The positions set in a ``java.util.BitSet.toByteArray()`` (little-endian bytes)."""
    return {
        index * 8 + bit
        for index, byte in enumerate(data or b"")
        for bit in range(8)
        if byte >> bit & 1
    }


def txn_list_from(response: Any, current_txn: int | None = None) -> ValidTxnList:
    """``createValidReadTxnList``: open and aborted transactions below the high watermark.

    ``current_txn``, the reader's own transaction (if it opened one), is left out: it writes
    nothing, and Hive's own readers do not count themselves either.
    """
    high = int(response.txn_high_water_mark)
    aborted_positions = _bits(response.abortedBits)
    open_ids: list[int] = []
    aborted: list[int] = []
    for position, txn in enumerate(response.open_txns or ()):
        if txn > high or txn == current_txn:
            continue
        (aborted if position in aborted_positions else open_ids).append(int(txn))
    open_ids.sort()
    min_open = open_ids[0] if open_ids else NO_OPEN_ID  # Hive: the first open exception
    return ValidTxnList(high, min_open, tuple(open_ids), tuple(sorted(aborted)))


def write_id_list_from(table_write_ids: Any) -> ValidWriteIdList:
    """``createValidReaderWriteIdList`` of one table's ``TableValidWriteIds``."""
    invalid = [int(w) for w in table_write_ids.invalidWriteIds or ()]
    aborted_positions = _bits(table_write_ids.abortedBits)
    aborted = tuple(w for i, w in enumerate(invalid) if i in aborted_positions)
    open_ids = tuple(w for i, w in enumerate(invalid) if i not in aborted_positions)
    min_open = table_write_ids.minOpenWriteId
    return ValidWriteIdList(
        table_write_ids.fullTableName,
        int(table_write_ids.writeIdHighWaterMark),
        int(min_open) if min_open is not None else NO_OPEN_ID,
        tuple(sorted(open_ids)),
        tuple(sorted(aborted)),
    )


@dataclass(frozen=True)
class ReadView:
    """One moment's view of one table's writes: the transaction list and the write-id list."""

    table: str
    txns: ValidTxnList
    write_ids: ValidWriteIdList
    taken_at: str = field(
        default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    )

    def committed_above(self, watermark: int) -> tuple[int, ...]:
        """Committed write ids above ``watermark`` (never open or aborted ones)."""
        return tuple(
            w
            for w in range(watermark + 1, self.write_ids.high_watermark + 1)
            if self.write_ids.is_valid(w)
        )

    def newly_committed(
        self, before: ValidWriteIdList | None, watermark: int = 0
    ) -> tuple[int, ...]:
        """Write ids committed now that ``before`` (an earlier view) did not show as committed:
        those above its high watermark, and those it had open. Without ``before``, those above
        ``watermark``."""
        if before is None or before.is_all_committed:
            return self.committed_above(watermark)
        reopened = tuple(w for w in before.open_ids if self.write_ids.is_valid(w))
        return tuple(sorted({*reopened, *self.committed_above(before.high_watermark)}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "txns": str(self.txns),
            "write_ids": str(self.write_ids),
            "taken_at": self.taken_at,
        }


def read_view(client: MetastoreClient, table: str, *, current_txn: int | None = None) -> ReadView:
    """The table's read view now: ``get_open_txns``, then ``get_valid_write_ids``."""
    return read_views(client, [table], current_txn=current_txn)[0]


def read_views(
    client: MetastoreClient, tables: Sequence[str], *, current_txn: int | None = None
) -> list[ReadView]:
    """Read views of several tables at one moment (one transaction list for all)."""
    txns = txn_list_from(client.get_open_txns(), current_txn)
    wanted = [".".join(split_table_name(t)) for t in tables]
    answered = client.get_valid_write_ids(wanted, str(txns))
    by_name = {str(t.fullTableName).lower(): t for t in answered}
    views = []
    for name in wanted:
        found = by_name.get(name)
        if found is None:
            got = ", ".join(sorted(by_name)) or "none"
            if len(answered) == 1:
                raise WriteIdListMismatchError(
                    f"{client.where} returned the write-id list of {got} when asked for {name}"
                )
            raise MetastoreError(
                f"{client.where} returned no write-id list for {name} (it returned: {got})"
            )
        views.append(ReadView(name, txns, write_id_list_from(found)))
    return views


def check_view_table(view_write_ids: ValidWriteIdList, table: str) -> None:
    """A write-id list (e.g. given by hand) must be for ``table``."""
    wanted = ".".join(split_table_name(table))
    if view_write_ids.table is not None and view_write_ids.table.lower() != wanted:
        raise WriteIdListMismatchError(
            f"the write-id list {view_write_ids} is for table {view_write_ids.table}, not {wanted}"
        )


__all__ = [
    "ReadView",
    "check_view_table",
    "read_view",
    "read_views",
    "txn_list_from",
    "write_id_list_from",
]
