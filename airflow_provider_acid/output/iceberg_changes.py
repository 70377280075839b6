"""A committed change feed applied to the Iceberg table the provider published.

The migration path: publish the snapshot at write N as an Iceberg table (``compact --format
iceberg``), then apply the feeds N..M to it, then cut over. Each feed is one Iceberg snapshot
(one pyiceberg transaction): the rows of every key the feed touches are deleted, and the key's
state at B (its last insert or post-image, unless a later delete removed it) appended.
pyiceberg's delete rewrites only the data files holding a touched key (copy-on-write; files
whose column metrics rule the keys out are not even read), so the files of unchanged buckets
stay as they are.

The key (``--key``, or the feed's own) must identify rows. A feed computed without the deleted
rows' values (``--no-delete-values``) applies on the row identity instead: the table must
hold it, published from a snapshot written with ``--include-identity`` (whose columns
``_acid_original_transaction``, ``_acid_bucket``, ``_acid_row_id`` a feed's rows are matched to,
its ``_acid_original_write_id`` renamed). The snapshot summary records
``airflow-acid.changes-write-id`` = B: the table's watermark. A feed at or below it is not
applied again; a feed that does not start at it is refused, naming both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..acid.listing import resolve_filesystem
from ..acid.writeids import parse_write_id_list
from .parquet_files import IDENTITY_COLUMNS
from .records import SnapshotResult

SUMMARY_CHANGES_WRITE_ID = "airflow-acid.changes-write-id"
SUMMARY_FEED_ID = "airflow-acid.feed-id"
_ADDS = ("insert", "update_postimage")
#: The row identity in a snapshot's columns (``--include-identity``), and its write: a feed
#: names the first ``_acid_original_write_id``.
_IDENTITY = tuple(name for name, _ in IDENTITY_COLUMNS[:3])
_CURRENT = IDENTITY_COLUMNS[3][0]
_FEED_ORIGINAL = "_acid_original_write_id"


@dataclass(frozen=True)
class IcebergApplication:
    """What applying a feed did: the Iceberg snapshot (None: nothing to apply), the data
    files it rewrote and the table's watermark."""

    snapshot_id: int | None
    files_removed: tuple[str, ...]
    files_added: tuple[str, ...]
    watermark: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "snapshot_id": self.snapshot_id,
            "files_removed": list(self.files_removed),
            "files_added": list(self.files_added),
            "watermark": self.watermark,
        }


def iceberg_watermark(table: Any) -> int | None:
    """The write the Iceberg table stands at: its last feed's B, else the provider snapshot's
    write-id list high watermark (or highest write id); None for another writer's table."""
    snapshot = table.current_snapshot()
    summary = snapshot.summary if snapshot is not None else None
    if summary is None:
        return None
    if summary.get(SUMMARY_CHANGES_WRITE_ID) is not None:
        return int(summary.get(SUMMARY_CHANGES_WRITE_ID))
    if summary.get("airflow-acid.write-ids"):
        return parse_write_id_list(summary.get("airflow-acid.write-ids")).high_watermark
    if summary.get("airflow-acid.max-write-id") is not None:
        return int(summary.get("airflow-acid.max-write-id"))
    return None


def _data_files(table: Any) -> set[str]:
    return {task.file.file_path for task in table.scan().plan_files()}


def key_states(rows: pa.Table, key: Sequence[str]) -> tuple[list[tuple], pa.Table]:
    """The keys whose rows a feed removes (deletes, pre-images), and the row each key the feed
    touches ends with at B (none when a delete is its last change)."""
    rows = rows.take(pc.sort_indices(rows, sort_keys=[("_change_ordinal", "ascending")]))
    keys = list(zip(*(rows[k].to_pylist() for k in key), strict=True))
    last: dict[tuple, int | None] = {}
    removed: dict[tuple, None] = {}
    kinds = rows["_change_type"].to_pylist()
    for position, (k, kind) in enumerate(zip(keys, kinds, strict=True)):
        last[k] = position if kind in _ADDS else None
        if kind not in _ADDS:
            removed[k] = None
    present = sorted(p for p in last.values() if p is not None)
    return list(removed), rows.take(pa.array(present, pa.int64()))


def _in_snapshot_names(rows: pa.Table) -> pa.Table:
    """A feed's rows with the identity columns a snapshot's table has: the original write
    renamed, and the row's write (the write that inserted it, a feed's commit write id)."""
    rows = rows.rename_columns(
        [_IDENTITY[0] if c == _FEED_ORIGINAL else c for c in rows.column_names]
    )
    current = pc.coalesce(rows["_commit_write_id"], rows[_IDENTITY[0]])
    return rows.append_column(_CURRENT, current)


def _touched(key: Sequence[str], values: list[tuple]) -> Any:
    from pyiceberg.expressions import And, EqualTo, In, IsNull, Or

    # the keys grouped by their columns but the last: one ``In`` of the last a group (a few
    # terms for the row identity, whose rowIds are numbered per write and bucket)
    groups: dict[tuple, list[Any]] = {}
    for row in values:
        groups.setdefault(tuple(row[:-1]), []).append(row[-1])
    terms = []
    for prefix, lasts in groups.items():
        present = [v for v in lasts if v is not None]
        last: Any = In(key[-1], present) if present else None
        if len(present) < len(lasts):
            last = Or(last, IsNull(key[-1])) if last is not None else IsNull(key[-1])
        conditions = [
            IsNull(k) if v is None else EqualTo(k, v) for k, v in zip(key[:-1], prefix, strict=True)
        ]
        terms.append(reduce(And, [*conditions, last]))
    return reduce(Or, terms)


def apply_to_iceberg(
    feed: SnapshotResult, table: Any, *, key: Sequence[str] | None = None
) -> IcebergApplication:
    """Apply a committed feed to a pyiceberg ``table`` in one Iceberg snapshot.

    :param feed: the committed feed (its manifest, as ``compute_changes`` returns it).
    :param table: the pyiceberg Table (the provider's publication of the snapshot at A).
    :param key: the key columns (default: the feed's ``--key``; the row identity for a feed
        without the deleted rows' values).
    """
    changes = feed.settings.get("changes")
    if not changes:
        raise ValueError(f"{feed.manifest_path}: not a change feed's manifest")
    start, end = int(changes["from_write_id"]), int(changes["to_write_id"])
    name = ".".join(table.name()) if hasattr(table, "name") else str(table)
    key = tuple(key or changes.get("key") or ())
    if changes.get("delete_values", True) is False:
        if key and key != _IDENTITY:
            raise ValueError(
                f"feed {feed.snapshot_id} gives its deletes' identity only (--no-delete-values):"
                f" it applies on the row identity, not on {list(key)}"
            )
        key = _IDENTITY
        missing = [c for c in key if c not in table.schema().column_names]
        if missing:
            raise ValueError(
                f"Iceberg table {name} has no {missing}: feed {feed.snapshot_id} applies on the "
                "row identity (--no-delete-values); publish the snapshot at A with "
                "--include-identity, or compute the feed with the deleted rows' values"
            )
    if not key:
        raise ValueError(
            f"applying feed {feed.snapshot_id} to Iceberg needs the table's key: compute the "
            "feed with --key COL[,COL...] or pass key"
        )
    watermark = iceberg_watermark(table)
    if watermark is not None and end <= watermark:
        return IcebergApplication(None, (), (), watermark)  # applied already
    if watermark != start:
        raise ValueError(
            f"Iceberg table {name} stands at write {watermark}: feed {feed.snapshot_id} "
            f"starts at {start} (apply the feeds in order, from the snapshot's write)"
        )
    fs, _ = resolve_filesystem(feed.out)
    parts = []
    for path in feed.file_paths():
        with fs.open(path, "rb") as handle:
            parts.append(pq.read_table(handle))
    properties = {SUMMARY_CHANGES_WRITE_ID: str(end), SUMMARY_FEED_ID: feed.snapshot_id}
    schema = table.schema().as_arrow()
    before = _data_files(table)
    with table.transaction() as transaction:
        if parts and (rows := pa.concat_tables(parts)).num_rows:
            if _IDENTITY[0] in schema.names:  # published with identity columns
                rows = _in_snapshot_names(rows)
            removed, final = key_states(rows, key)
            if removed:
                transaction.delete(_touched(key, removed), snapshot_properties=properties)
            appended = pa.Table.from_arrays(
                [pc.cast(final[f.name], f.type) for f in schema], schema=schema
            )
            if appended.num_rows:
                transaction.append(appended, snapshot_properties=properties)
        else:  # nothing changed: the watermark moves all the same
            transaction.append(schema.empty_table(), snapshot_properties=properties)
    table = table.refresh()
    after = _data_files(table)
    return IcebergApplication(
        table.current_snapshot().snapshot_id,
        tuple(sorted(before - after)),
        tuple(sorted(after - before)),
        end,
    )


__all__ = [
    "IcebergApplication",
    "SUMMARY_CHANGES_WRITE_ID",
    "apply_to_iceberg",
    "iceberg_watermark",
    "key_states",
]
