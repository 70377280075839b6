"""Hive's compactor, simulated: major and minor compaction of a simulated table.

Major compaction rewrites a partition's base, deltas and original files as one
``base_W_vT``; minor compaction merges the current deltas into ``delta_A_B_vT`` and
``delete_delta_A_B_vT``. Both work only on writes below the lowest open write, on the folders
Hive's ``AcidUtils.getAcidState`` picks (:func:`current_directories`), and leave the old folders
in place (Hive's cleaner removes them later).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pyarrow as pa

from .row_history import RowHistory
from .table_files import TableFiles
from .table_layout import Directory, Partition, TableLayout
from .write_history import WriteHistory


class SimulatedTable(Protocol):
    """What compaction uses of a simulated table (:class:`.table_writer.AcidTableWriter`)."""

    files: TableFiles
    history: WriteHistory
    layout: TableLayout
    row_history: RowHistory


def compact_major(table: SimulatedTable, partition: Any = None) -> list[str]:
    """Major compaction: write ``base_W_vT`` per partition from its base, deltas, originals.

    W is the highest write id compacted (only writes below the lowest open write are),
    T the compactor's transaction id. Live rows keep their original identities. Old
    folders are left in place (Hive's cleaner removes them later). Returns the new folders.
    """
    written = []
    hwm = table.history.compactor_high_watermark()
    for p in table.layout.selected(partition):
        base, deltas = current_directories(p, hwm, table.history.committed)
        has_originals = bool(p.original_copies) and base is None
        if not deltas and not has_originals:
            continue
        write_id = max((d.max_write_id for d in deltas), default=hwm)
        txn = table.history.allocate_txn()  # the compactor's (committed) txn
        directory = Directory("base", write_id, write_id, None, txn)
        folder = table.layout.join(p.path, directory.name)
        rows = table.row_history.live(
            lambda w, top=write_id: table.history.committed(w) and w <= top, {p.index}
        )
        table.files.write_rows_by_bucket(folder, rows)
        table.files.mark_compacted(folder)
        p.directories.append(directory)
        written.append(folder)
    return written


def compact_minor(table: SimulatedTable, partition: Any = None) -> list[str]:
    """Minor compaction: merge the current deltas into ``delta_A_B_vT`` and
    ``delete_delta_A_B_vT`` (identities unchanged, deletes not applied).

    Only deltas above the current base and below the lowest open write are compacted;
    aborted writes' events are dropped. Returns the new folders.
    """
    written = []
    hwm = table.history.compactor_high_watermark()
    for p in table.layout.selected(partition):
        base, deltas = current_directories(p, hwm, table.history.committed)
        already_compacted = all(d.statement_id is None for d in deltas) and (
            len({(d.min_write_id, d.max_write_id) for d in deltas}) == 1
        )
        if not deltas or already_compacted:
            continue
        low = min(d.min_write_id for d in deltas)
        high = max(d.max_write_id for d in deltas)
        txn = table.history.allocate_txn()  # the compactor's (committed) txn

        def in_range(w: int, low: int = low, high: int = high) -> bool:
            return low <= w <= high and table.history.committed(w)

        batches = [
            b.table
            for b in table.row_history.row_batches
            if b.partition == p.index and b.kind == "delta" and in_range(b.write_id)
        ]
        delta = Directory("delta", low, high, None, txn)
        folder = table.layout.join(p.path, delta.name)
        rows = pa.concat_tables(batches) if batches else table.row_history.empty()
        table.files.write_rows_by_bucket(folder, rows)
        p.directories.append(delta)
        written.append(folder)
        deletes = [
            b.table
            for b in table.row_history.delete_batches
            if b.partition == p.index and in_range(b.write_id)
        ]
        if deletes:
            delete_delta = Directory("delete_delta", low, high, None, txn)
            folder = table.layout.join(p.path, delete_delta.name)
            table.files.write_delete_files(folder, pa.concat_tables(deletes))
            p.directories.append(delete_delta)
            written.append(folder)
    return written


def current_directories(
    p: Partition, hwm: int, committed: Callable[[int], bool]
) -> tuple[Directory | None, list[Directory]]:
    """The base and deltas of partition ``p`` the compactor works on (Hive's ``getAcidState``),
    for writes up to ``hwm`` of which ``committed`` are."""

    def valid(d: Directory) -> bool:
        if d.max_write_id > hwm:
            return False
        if d.visibility_txn_id is not None:
            return True  # written by the (committed) compactor
        return any(committed(w) for w in range(d.min_write_id, d.max_write_id + 1))

    bases = [d for d in p.directories if d.kind == "base" and valid(d)]
    base = max(bases, key=lambda d: d.max_write_id, default=None)
    floor = base.max_write_id if base else -1
    candidates = sorted(
        (d for d in p.directories if d.kind != "base" and d.min_write_id > floor and valid(d)),
        key=Directory.sort_key,
    )
    chosen: list[Directory] = []
    current, last_stmt, prev = floor, -1, None
    for d in candidates:
        stmt = -1 if d.statement_id is None else d.statement_id
        if d.max_write_id > current:
            chosen.append(d)
            current, last_stmt, prev = d.max_write_id, stmt, d
        elif d.max_write_id == current and last_stmt >= 0:
            chosen.append(d)
            prev = d
        elif prev is not None and (d.min_write_id, d.max_write_id, d.statement_id) == (
            prev.min_write_id,
            prev.max_write_id,
            prev.statement_id,
        ):
            chosen.append(d)
            prev = d
    return base, chosen
