"""The metastore's bookkeeping of one table's writes, as the simulator keeps it.

Every write gets the table's next write id and a transaction id; it is open until committed or
aborted (an aborted write's files stay on storage, readers must ignore them). Readers get the
table's valid write ids as Hive's serialized ``ValidReaderWriteIdList``
(:class:`WriteIdSnapshot`); the compactor works only below the lowest open write.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

#: ``minOpenWriteId`` of a valid-write-id list when no write is open (Java ``Long.MAX_VALUE``).
NO_OPEN_WRITE_ID = 9223372036854775807


class WriteState(str, enum.Enum):
    """State of a write id in the (simulated) metastore."""

    OPEN = "open"
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclass(frozen=True)
class WriteIdSnapshot:
    """Hive's ``ValidReaderWriteIdList`` of one table: which write ids a reader may see.

    ``str(snapshot)`` is Hive's serialized form
    ``db.table:highWatermark:minOpenWriteId:open,ids:aborted,ids``.
    """

    table_name: str
    high_watermark: int
    open_write_ids: tuple[int, ...] = ()
    aborted_write_ids: tuple[int, ...] = ()

    @property
    def min_open_write_id(self) -> int:
        return min(self.open_write_ids, default=NO_OPEN_WRITE_ID)

    def is_valid(self, write_id: int) -> bool:
        """Whether rows written by ``write_id`` are visible (0, the original files, always is)."""
        return (
            write_id <= self.high_watermark
            and write_id not in self.open_write_ids
            and write_id not in self.aborted_write_ids
        )

    def __str__(self) -> str:
        open_ids = ",".join(map(str, sorted(self.open_write_ids)))
        aborted = ",".join(map(str, sorted(self.aborted_write_ids)))
        return (
            f"{self.table_name}:{self.high_watermark}:{self.min_open_write_id}:{open_ids}:{aborted}"
        )

    @classmethod
    def parse(cls, text: str) -> WriteIdSnapshot:
        """Parse the serialized form (the inverse of ``str()``)."""
        parts = text.split(":")
        if len(parts) != 5:
            raise ValueError(f"not a serialized valid write id list: {text!r}")
        name, hwm, _min_open, open_ids, aborted = parts

        def ids(s: str) -> tuple[int, ...]:
            return tuple(int(x) for x in s.split(",") if x)

        return cls(name, int(hwm), ids(open_ids), ids(aborted))


@dataclass
class Write:
    """One write id: its transaction and the statements it has run."""

    write_id: int
    txn_id: int
    state: WriteState = WriteState.OPEN
    statements: set[int] = field(default_factory=set)

    def statement(self, statement_id: int | None) -> int:
        if statement_id is None:
            statement_id = max(self.statements, default=-1) + 1
        if statement_id in self.statements:
            raise ValueError(f"statement {statement_id} of write {self.write_id} already used")
        self.statements.add(statement_id)
        return statement_id


class WriteHistory:
    """Write ids and transaction ids of one table, and the state of each write."""

    def __init__(self) -> None:
        self.writes: dict[int, Write] = {}
        self._next_write_id = 1
        self._next_txn_id = 1

    def begin(self) -> Write:
        """Open a write: allocate a transaction id and the table's next write id."""
        write = Write(self._next_write_id, self.allocate_txn())
        self.writes[write.write_id] = write
        self._next_write_id += 1
        return write

    def allocate_txn(self) -> int:
        txn = self._next_txn_id
        self._next_txn_id += 1
        return txn

    def open_write(self, write_id: int) -> Write:
        write = self.writes.get(write_id)
        if write is None:
            raise KeyError(f"unknown write id {write_id}")
        if write.state is not WriteState.OPEN:
            raise ValueError(f"write {write_id} is {write.state.value}, not open")
        return write

    def commit(self, write_id: int) -> None:
        self.open_write(write_id).state = WriteState.COMMITTED

    def abort(self, write_id: int) -> None:
        self.open_write(write_id).state = WriteState.ABORTED

    def state(self, write_id: int) -> WriteState:
        return self.writes[write_id].state

    def committed(self, write_id: int) -> bool:
        """Whether ``write_id`` is committed (0, the original files, always is)."""
        return write_id == 0 or self.writes[write_id].state is WriteState.COMMITTED

    def validity(self, snapshot: str | WriteIdSnapshot | None) -> Callable[[int], bool]:
        """Which write ids a reader of ``snapshot`` sees (None: the committed ones now)."""
        if snapshot is None:
            return self.committed
        if isinstance(snapshot, str):
            snapshot = WriteIdSnapshot.parse(snapshot)
        return snapshot.is_valid

    def snapshot(self, table_name: str) -> WriteIdSnapshot:
        """The valid write ids of the table right now."""
        writes = self.writes.values()
        return WriteIdSnapshot(
            table_name,
            max(self.writes, default=0),
            tuple(sorted(w.write_id for w in writes if w.state is WriteState.OPEN)),
            tuple(sorted(w.write_id for w in writes if w.state is WriteState.ABORTED)),
        )

    def valid_transactions(self) -> str:
        """Hive's serialized ``ValidReadTxnList``: ``hwm:minOpenTxn:open,txns:aborted,txns``."""
        writes = self.writes.values()
        open_txns = sorted(w.txn_id for w in writes if w.state is WriteState.OPEN)
        aborted = sorted(w.txn_id for w in writes if w.state is WriteState.ABORTED)
        return (
            f"{self._next_txn_id - 1}:{min(open_txns, default=NO_OPEN_WRITE_ID)}:"
            f"{','.join(map(str, open_txns))}:{','.join(map(str, aborted))}"
        )

    def compactor_high_watermark(self) -> int:
        """The highest write id the compactor may compact: below the lowest open write."""
        open_ids = [w.write_id for w in self.writes.values() if w.state is WriteState.OPEN]
        if open_ids:
            return min(open_ids) - 1
        return max(self.writes, default=0)
