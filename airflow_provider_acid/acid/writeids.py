"""Hive's serialized views of committed writes: write-id lists and transaction lists.

Three forms, parsed into value objects and written back exactly as Hive writes them:

* one table: ``db.tbl:HWM:MIN_OPEN:open,ids:aborted,ids`` (``ValidReaderWriteIdList``);
  MIN_OPEN is 9223372036854775807 when no write is open;
* several tables: ``TXNID$db.t1:...$db.t2:...`` (``ValidTxnWriteIdList``);
* the transaction list: ``HWM:MIN_OPEN_TXN:open:aborted`` (``ValidReadTxnList``), whose id
  lists may also use ``a-b`` ranges.

Absent a list, every write present on storage counts as committed
(:meth:`ValidWriteIdList.all_committed`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from enum import Enum

NO_OPEN_ID = 9223372036854775807  # Java's Long.MAX_VALUE, Hive's "nothing is open"


class WriteIdListError(ValueError):
    """A write-id or transaction list string that is not in Hive's serialized form."""


class RangeValidity(str, Enum):
    """How many writes of a range a reader may see (Hive's ``RangeResponse``)."""

    ALL = "all"
    SOME = "some"
    NONE = "none"


def _parse_int(text: str, what: str, source: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise WriteIdListError(f"{what} {text!r} is not a number in {source!r}") from None


def _parse_ids(text: str, what: str, source: str) -> tuple[int, ...]:
    if text == "":
        return ()
    ids: list[int] = []
    for part in text.split(","):
        low, dash, high = part.partition("-")
        if dash:
            first = _parse_int(low, what, source)
            last = _parse_int(high, what, source)
            if last < first:
                raise WriteIdListError(f"{what} range {part!r} is reversed in {source!r}")
            ids.extend(range(first, last + 1))
        else:
            ids.append(_parse_int(part, what, source))
    return tuple(sorted(ids))


def _format_ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


def _count_in(ids: Collection[int], low: int, high: int) -> int:
    return sum(1 for i in ids if low <= i <= high)


@dataclass(frozen=True)
class ValidWriteIdList:
    """One table's view of its writes: committed up to the high watermark, minus exceptions."""

    table: str | None
    high_watermark: int
    min_open_write_id: int = NO_OPEN_ID
    open_ids: tuple[int, ...] = ()
    aborted_ids: tuple[int, ...] = ()
    _exceptions: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_exceptions", frozenset(self.open_ids + self.aborted_ids))

    @classmethod
    def all_committed(cls, table: str | None = None) -> ValidWriteIdList:
        """The default absent a list: every write present on storage is committed."""
        return cls(table, NO_OPEN_ID)

    @classmethod
    def parse(cls, text: str) -> ValidWriteIdList:
        """Parse ``db.tbl:HWM:MIN_OPEN:open:aborted`` (trailing empty lists may be omitted)."""
        parts = text.strip().split(":")
        if len(parts) < 3 or len(parts) > 5:
            raise WriteIdListError(
                f"expected 'db.table:highWatermark:minOpenWriteId:open:aborted', got {text!r}"
            )
        parts += [""] * (5 - len(parts))
        table = None if parts[0] in ("", "null") else parts[0]
        high_watermark = _parse_int(parts[1], "high watermark", text)
        min_open = _parse_int(parts[2], "min open write id", text)
        open_ids = _parse_ids(parts[3], "open write id", text)
        aborted_ids = _parse_ids(parts[4], "aborted write id", text)
        overlap = set(open_ids) & set(aborted_ids)
        if overlap:
            raise WriteIdListError(
                f"write ids {sorted(overlap)} are both open and aborted in {text!r}"
            )
        return cls(table, high_watermark, min_open, open_ids, aborted_ids)

    @property
    def is_all_committed(self) -> bool:
        """The default list: no table, no exceptions, no high watermark in effect."""
        return self == ValidWriteIdList.all_committed(self.table)

    def __str__(self) -> str:
        return ":".join(
            [
                self.table if self.table is not None else "null",
                str(self.high_watermark),
                str(self.min_open_write_id),
                _format_ids(self.open_ids),
                _format_ids(self.aborted_ids),
            ]
        )

    def is_valid(self, write_id: int) -> bool:
        """A committed write the reader may see."""
        return write_id <= self.high_watermark and write_id not in self._exceptions

    def is_aborted(self, write_id: int) -> bool:
        return write_id in self.aborted_ids

    def is_valid_base(self, write_id: int) -> bool:
        """A compacted base is usable only if no write at or below it is still open."""
        return write_id < self.min_open_write_id and write_id <= self.high_watermark

    def range_validity(self, min_write_id: int, max_write_id: int) -> RangeValidity:
        """Whether all, some or none of the writes ``min..max`` are valid."""
        if min_write_id > self.high_watermark:
            return RangeValidity.NONE
        invalid = max(0, max_write_id - self.high_watermark)
        if self._exceptions:
            invalid += _count_in(
                self._exceptions, min_write_id, min(max_write_id, self.high_watermark)
            )
        if invalid == 0:
            return RangeValidity.ALL
        if invalid == max_write_id - min_write_id + 1:
            return RangeValidity.NONE
        return RangeValidity.SOME

    def is_range_aborted(self, min_write_id: int, max_write_id: int) -> bool:
        """Every write of ``min..max`` aborted: the folder is garbage, never data."""
        return _count_in(self.aborted_ids, min_write_id, max_write_id) == (
            max_write_id - min_write_id + 1
        )

    def invalid_ids_in(self, min_write_id: int, max_write_id: int) -> tuple[int, ...]:
        """The writes of a range a reader must not see: open or aborted ones, and those above
        the high watermark (for rows of partly valid ranges)."""
        below = (i for i in self._exceptions if min_write_id <= i <= max_write_id)
        above = range(max(min_write_id, self.high_watermark + 1), max_write_id + 1)
        return tuple(sorted({*below, *above}))


@dataclass(frozen=True)
class ValidTxnWriteIdList:
    """Several tables' write-id lists taken in one transaction: ``TXNID$db.t1:...$db.t2:...``."""

    txn_id: int
    tables: tuple[ValidWriteIdList, ...]

    @classmethod
    def parse(cls, text: str) -> ValidTxnWriteIdList:
        head, *tables = text.strip().split("$")
        if not tables:
            raise WriteIdListError(f"expected 'txnId$db.table:...[$db.table:...]', got {text!r}")
        txn_id = _parse_int(head, "transaction id", text)
        return cls(txn_id, tuple(ValidWriteIdList.parse(t) for t in tables))

    def __str__(self) -> str:
        return "$".join([str(self.txn_id), *(str(t) for t in self.tables)])

    def for_table(self, table: str) -> ValidWriteIdList:
        """The list of one table, by its ``db.table`` name (case-insensitive)."""
        for candidate in self.tables:
            if candidate.table is not None and candidate.table.lower() == table.lower():
                return candidate
        known = ", ".join(str(t.table) for t in self.tables)
        raise WriteIdListError(f"no write-id list for table {table!r} (lists for: {known})")


def parse_write_id_list(text: str, table: str | None = None) -> ValidWriteIdList:
    """Parse either form; a multi-table list needs ``table`` unless it holds only one."""
    if "$" not in text:
        return ValidWriteIdList.parse(text)
    multi = ValidTxnWriteIdList.parse(text)
    if table is not None:
        return multi.for_table(table)
    if len(multi.tables) == 1:
        return multi.tables[0]
    raise WriteIdListError(
        f"{text!r} holds lists for {len(multi.tables)} tables; name the table to use"
    )


@dataclass(frozen=True)
class ValidTxnList:
    """Hive's ``ValidReadTxnList``: which transactions' results a reader may see."""

    high_watermark: int
    min_open_txn_id: int = NO_OPEN_ID
    open_ids: tuple[int, ...] = ()
    aborted_ids: tuple[int, ...] = ()
    text: str | None = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, text: str) -> ValidTxnList:
        parts = text.strip().split(":")
        if len(parts) < 2 or len(parts) > 4:
            raise WriteIdListError(
                f"expected 'highWatermark:minOpenTxnId:open:aborted', got {text!r}"
            )
        parts += [""] * (4 - len(parts))
        return cls(
            high_watermark=_parse_int(parts[0], "high watermark", text),
            min_open_txn_id=_parse_int(parts[1], "min open transaction id", text),
            open_ids=_parse_ids(parts[2], "open transaction id", text),
            aborted_ids=_parse_ids(parts[3], "aborted transaction id", text),
            text=text.strip(),
        )

    def __str__(self) -> str:
        if self.text is not None:
            return self.text  # keeps Hive's own range notation byte for byte
        return ":".join(
            [
                str(self.high_watermark),
                str(self.min_open_txn_id),
                _format_ids(self.open_ids),
                _format_ids(self.aborted_ids),
            ]
        )

    def is_valid(self, txn_id: int) -> bool:
        return (
            txn_id <= self.high_watermark
            and txn_id not in self.open_ids
            and txn_id not in self.aborted_ids
        )

    def is_aborted(self, txn_id: int) -> bool:
        return txn_id in self.aborted_ids
