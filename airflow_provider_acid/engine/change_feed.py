"""A change feed of a Hive ACID table between two write ids, committed like a snapshot.

``(A, B]``: every row inserted, deleted or updated by the writes above A up to B, as Parquet
files under ``OUT`` with the table's columns (partition columns included) and
``_change_type``, ``_commit_write_id``, ``_change_ordinal``, ``_acid_original_write_id``,
``_acid_bucket``, ``_acid_row_id`` (see :mod:`.change_rows`). Applied to the table at A (inserts
and post-images added, deletes and pre-images removed, as multisets), the feed gives the table
at B.

The work is planned, done per bucket slice (only slices holding folders of the range) and
committed with the snapshot protocol (:mod:`..output.protocol`): ``plan.json`` first, one
Parquet file set per slice, ``manifest.json`` the commit point. A feed's id is a hash of the
table, the write-id list, the range and the settings: a re-run writes the same files and
returns the committed feed. The manifest's ``max_write_id`` is B: the watermark the next feed
into the same ``OUT`` starts from (:func:`feed_watermark`), so a scheduled DAG delivers each
change once.

B defaults to the write-id list's high watermark (the metastore's, by name); a B above it is
an error; aborted and open writes never appear. Where Hive compacted a partition inside the
range (a ``base_N`` with A < N), the slice is diffed against the provider's own snapshot at A
when one written with identity columns is given (:mod:`.change_diff`), else refused.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from ..acid.hive_types import HiveType, partition_scalar
from ..acid.listing import location_uri, resolve_filesystem
from ..acid.locations import check_outside_table
from ..acid.read_view import BucketSlice, TableReadView
from ..acid.resolution import check_placed, resolve_read_view
from ..acid.schema import partition_columns
from ..acid.source import ReadArguments, TableSource
from ..acid.table_columns import TableColumns, table_columns
from ..acid.writeids import NO_OPEN_ID, ValidWriteIdList
from ..output.parquet_files import (
    BucketFileWriter,
    count_values,
    footer_value_counts,
    output_schema,
)
from ..output.protocol import (
    latest_committed,
    read_manifest,
    write_plan,
)
from ..output.records import BucketResult, PlannedSlice, SnapshotPlan, SnapshotResult
from .change_diff import IdentitySnapshot, diff_changes, find_identity_snapshot
from .change_pairs import change_writes_metadata, file_footer
from .change_rows import (
    CHANGE_COLUMNS,
    CHANGE_TYPE,
    CHANGE_TYPES,
    IDENTITY,
    ChangeRange,
    CompactedRangeError,
    compacted_base,
    event_changes,
    finish,
    slice_has_changes,
)

CHANGES_FORMAT = "airflow-acid/changes"
#: A feed's columns of write ids: a few distinct values (the writes of the range, and those
#: that inserted the rows deleted), dictionary-encoded in its files.
WRITE_COLUMNS = ("_commit_write_id", IDENTITY[0])
_SETTINGS_VERSION = 1
IDENTITY_DIFF_WARNING = (
    "Hive compacted {where} inside the range: its changes were computed by diffing row "
    "identities against snapshot {snapshot} at write {at} (net changes: a row both inserted "
    "and deleted inside the range does not show, and deletes carry no write id)"
)


NO_DELETE_VALUES_WARNING = (
    "deletes carry the deleted row's identity and partition, not always its other columns "
    "(--no-delete-values: null where they would be read from the base); apply the feed by "
    "identity, to a snapshot written with --include-identity"
)


@dataclass(frozen=True)
class FeedOptions:
    """How a feed is written.

    :param compression: Parquet codec (``zstd``, ``snappy``, ``gzip``, ``lz4``, ``none``).
    :param target_file_size: bytes after which a slice's output rolls over to a new file.
    :param row_group_rows: rows per Parquet row group.
    :param batch_rows: rows read at a time.
    :param timestamp_unit: unit of timestamp columns (``us`` or ``ns``).
    :param schema: the table's columns, when not those of the metastore or the newest file.
    """

    compression: str = "zstd"
    target_file_size: int = 256 * 1024 * 1024
    row_group_rows: int = 262_144
    batch_rows: int = 131_072
    timestamp_unit: str = "us"
    schema: Any = None


@dataclass(frozen=True)
class ChangeFeed:
    """A committed feed (or None when the range holds no write) and what it counts.

    ``counts`` maps each change type to its rows; ``warnings`` are the plan's.
    """

    from_write_id: int
    to_write_id: int
    out: str
    result: SnapshotResult | None
    counts: Mapping[str, int]
    warnings: tuple[str, ...] = ()
    schema_changes: tuple[str, ...] = field(default=())

    @property
    def files(self) -> list[str]:
        return [f.path for f in self.result.files] if self.result else []

    def to_dict(self) -> dict[str, Any]:
        """The stable ``--json`` form."""
        return {
            "format": CHANGES_FORMAT,
            "version": 1,
            "from_write_id": self.from_write_id,
            "to_write_id": self.to_write_id,
            "counts": {t: int(self.counts.get(t, 0)) for t in CHANGE_TYPES},
            "out": self.out,
            "files": self.files,
            "warnings": list(self.warnings),
            "feed_id": self.result.snapshot_id if self.result else None,
            "manifest_path": self.result.manifest_path if self.result else None,
            "newly_committed": bool(self.result and self.result.newly_committed),
            "schema_changes": list(self.schema_changes),
        }


# -- the range and the read view at B --------------------------------------------------------


def bounded_write_ids(
    write_ids: ValidWriteIdList | None, to_write_id: int | None, highest_on_storage: int
) -> tuple[ValidWriteIdList, list[str]]:
    """The write-id list at B (B defaults to the list's high watermark) and its warnings.

    :param write_ids: the reader's list (None or all committed: storage-only).
    :param to_write_id: B as asked (None: the high watermark).
    :param highest_on_storage: the highest write id of any folder (B's default storage-only).
    """
    warnings: list[str] = []
    if write_ids is None or write_ids.is_all_committed:
        top = highest_on_storage
        where = "the highest write id on storage (no write-id list: storage-only)"
        table = write_ids.table if write_ids is not None else None
        write_ids = ValidWriteIdList(table, top)
    else:
        top = write_ids.high_watermark
        where = f"the high watermark of {write_ids.table or 'the table'}'s write-id list"
        table = write_ids.table
    end = top if to_write_id is None else int(to_write_id)
    if end > top:
        raise ValueError(f"--to-write-id {end} is above {where}, {top}: those writes do not exist")
    open_ids = tuple(i for i in write_ids.open_ids if i <= end)
    aborted = tuple(i for i in write_ids.aborted_ids if i <= end)
    if open_ids:
        warnings.append(
            f"writes {list(open_ids)} are open at write {end}: left out, and a later feed "
            f"starting at {end} will not carry them if they commit"
        )
    bounded = ValidWriteIdList(table, end, min(open_ids, default=NO_OPEN_ID), open_ids, aborted)
    return bounded, warnings


def _highest_write_id(snapshot: TableReadView) -> int:
    return max((f.folder.max_write_id for f in snapshot.files if f.folder is not None), default=0)


def resolve_at(
    table_uri: str | TableSource,
    to_write_id: int | None,
    *,
    write_ids: ValidWriteIdList | str | None = None,
    txns: Any = None,
    filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> tuple[TableReadView, AbstractFileSystem, list[str]]:
    """The read view at B (aborted and open writes out), the table's filesystem, warnings."""
    read = ReadArguments.of(table_uri, write_ids, txns)
    fs, _ = resolve_filesystem(read.location, filesystem, storage_options)
    highest = 0
    if read.write_ids is None or read.write_ids.is_all_committed:
        highest = _highest_write_id(resolve_read_view(table_uri, read.write_ids, filesystem=fs))
    bounded, warnings = bounded_write_ids(read.write_ids, to_write_id, highest)
    snapshot = resolve_read_view(table_uri, bounded, read.txns, filesystem=fs)
    return snapshot, fs, warnings


# -- planning --------------------------------------------------------------------------------


def feed_schema(settings: Mapping[str, Any]) -> pa.Schema:
    """The Arrow schema of a feed's files: the snapshot's columns, then the change columns."""
    fields = list(output_schema(settings))
    return pa.schema(
        fields + [pa.field(n, t, nullable=n == "_commit_write_id") for n, t in CHANGE_COLUMNS]
    )


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _fingerprint(snapshot: TableReadView, bucket_slice: BucketSlice, settings: Any) -> str:
    described = [[f.role.value, f.path, f.file.size, f.file.version] for f in bucket_slice.files]
    return _digest([settings, bucket_slice.key, str(snapshot.write_ids), described])[:32]


def plan_changes(
    snapshot: TableReadView,
    fs: AbstractFileSystem,
    out_uri: str,
    change_range: ChangeRange,
    *,
    identity_snapshot: str | None = None,
    options: FeedOptions = FeedOptions(),  # noqa: B008 - frozen, shared safely
    warnings: Sequence[str] = (),
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> tuple[SnapshotPlan, IdentitySnapshot | None]:
    """Plan the feed of ``change_range`` over the read view at B, and store the plan.

    Only slices holding a folder of the range are planned. A partition Hive compacted inside
    the range needs ``identity_snapshot`` (an output folder holding the provider's snapshot at
    A written with identity columns), else :class:`CompactedRangeError` names its base.
    """
    out_fs, out_root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    table_uri = location_uri(fs, snapshot.root)
    check_outside_table(location_uri(out_fs, out_root), table_uri, "output location")
    ignored = check_placed(snapshot)
    columns = table_columns(snapshot, fs, options.schema)
    partitions = partition_columns(snapshot)
    names = [n.lower() for n in (*columns.names, *(k for k, _ in partitions))]
    missing = [k for k in change_range.key if k.lower() not in names]
    if missing:
        raise ValueError(f"--key: {missing} are not columns of {table_uri} ({names})")
    chosen, diffed, compacted = [], [], []
    for p in snapshot.partitions:
        base = compacted_base(p.base, change_range)
        if base is not None:
            compacted.append((p.partition, base))
        for s in p.slices:
            if base is not None:
                diffed.append((s, base))
            elif slice_has_changes(s, change_range):
                chosen.append(s)
    at_a = None
    plan_warnings = list(warnings) + list(ignored)
    if not change_range.delete_values:
        plan_warnings.append(NO_DELETE_VALUES_WARNING)
    if diffed:
        where = sorted({posixpath.join(s.partition.path, b.name).lstrip("/") for s, b in diffed})
        if identity_snapshot is None:
            base = diffed[0][1]
            raise CompactedRangeError(
                f"{table_uri}: Hive compacted writes up to {base.write_id} into "
                f"{', '.join(where)} inside the range ({change_range.from_write_id}, "
                f"{change_range.to_write_id}]: the events of those writes are gone from the "
                f"table. Write snapshots with identity columns (compact --include-identity) at "
                f"write {change_range.from_write_id} and pass that folder as "
                f"--identity-snapshot, or take a full snapshot at {change_range.to_write_id}"
            )
        at_a = find_identity_snapshot(identity_snapshot, table_uri, change_range.from_write_id)
        plan_warnings.append(
            IDENTITY_DIFF_WARNING.format(
                where=", ".join(where),
                snapshot=at_a.result.snapshot_id,
                at=change_range.from_write_id,
            )
        )
        # a bucket the compaction left without rows has no slice at B: diffed as empty
        present = {s.key for s in snapshot.slices}
        for partition, base in compacted:
            for bucket in at_a.result.buckets:
                if bucket.partition == partition.path and bucket.slice_key not in present:
                    diffed.append((BucketSlice(partition, bucket.bucket), base))
        chosen += [s for s, _ in diffed]
    chosen.sort(key=lambda s: s.key)
    before = _columns_at_a(out_fs, out_root, change_range.from_write_id, at_a)
    changed = schema_changes(before, columns.to_dict()["columns"]) if before else []
    plan_warnings += [f"the table's schema changed inside the range: {c}" for c in changed]
    settings = {
        "version": _SETTINGS_VERSION,
        "columns": columns.to_dict()["columns"],
        "partition_columns": [{"name": k, "hive_type": str(t)} for k, t in partitions],
        "include_identity": False,
        "timestamp_unit": options.timestamp_unit,
        "compression": options.compression,
        "compression_level": None,
        "target_file_size": options.target_file_size,
        "row_group_rows": options.row_group_rows,
        "batch_rows": options.batch_rows,
        "row_filter": None,
        "changes": {
            "format": CHANGES_FORMAT,
            "from_write_id": change_range.from_write_id,
            "to_write_id": change_range.to_write_id,
            "key": list(change_range.key),
            "net": change_range.net,
            "delete_values": change_range.delete_values,
            "identity_diff_slices": sorted(s.key for s, _ in diffed),
            "identity_snapshot": at_a.result.snapshot_id if at_a else None,
            "identity_snapshot_out": at_a.result.out if at_a else None,
            "schema_changes": changed,
        },
    }
    planned = [
        PlannedSlice(
            s.key,
            s.partition.path,
            s.bucket_id,
            _fingerprint(snapshot, s, settings),
            files=tuple(f.path for f in s.files),
        )
        for s in chosen
    ]
    feed_id = _digest(
        [CHANGES_FORMAT, table_uri, settings, [[p.key, p.fingerprint] for p in planned]]
    )[:16]
    plan = SnapshotPlan(
        snapshot_id=feed_id,
        out=out_root,
        table=table_uri,
        write_ids=str(snapshot.write_ids),
        txns=str(snapshot.txns) if snapshot.txns else None,
        insert_only=snapshot.insert_only,
        settings=settings,
        slices=tuple(planned),
        max_write_id=change_range.to_write_id,  # the watermark the next feed starts from
        definition=snapshot.definition.to_dict() if snapshot.definition else None,
        warnings=tuple(plan_warnings),
    )
    if read_manifest(out_fs, out_root, feed_id) is None:
        write_plan(out_fs, plan)
    return plan, at_a


def schema_changes(
    before: Sequence[Mapping[str, str]], after: Sequence[Mapping[str, str]]
) -> list[str]:
    """How the columns changed, compared by position as Hive reads files: renamed, retyped,
    added and dropped columns, one text each.

    :param before: the columns at A (``{"name", "hive_type"}`` each).
    :param after: the columns at B.
    """
    changes = []
    for index in range(max(len(before), len(after))):
        old = before[index] if index < len(before) else None
        new = after[index] if index < len(after) else None
        if old is None:
            changes.append(f"column {new['name']} {new['hive_type']} added")
        elif new is None:
            changes.append(f"column {old['name']} dropped")
        else:
            if old["name"].lower() != new["name"].lower():
                changes.append(f"column {old['name']} renamed to {new['name']}")
            if old["hive_type"] != new["hive_type"]:
                changes.append(
                    f"column {new['name']} changed from {old['hive_type']} to {new['hive_type']}"
                )
    return changes


def _columns_at_a(
    out_fs: AbstractFileSystem, out_root: str, at: int, at_a: IdentitySnapshot | None
) -> list[Mapping[str, str]] | None:
    """The table's columns at A as the output knows them: those of the last feed ending at
    or before A, else the identity snapshot's (None: unknown)."""
    feed = latest_committed(
        out_fs, out_root, lambda s: "changes" in s.settings and s.max_write_id <= at
    )
    if feed is not None:
        return list(feed.settings["columns"])
    return list(at_a.result.settings["columns"]) if at_a is not None else None


def slice_of(snapshot: TableReadView, plan: SnapshotPlan, slice_key: str) -> BucketSlice | None:
    """The read view's slice of a planned key; an empty slice for a bucket the identity diff
    covers that has no files at B (all its rows gone); None if neither."""
    for s in snapshot.slices:
        if s.key == slice_key:
            return s
    if slice_key in plan.settings["changes"]["identity_diff_slices"]:
        planned = plan.planned(slice_key)
        for p in snapshot.partitions:
            if p.partition.path == planned.partition:
                return BucketSlice(p.partition, planned.bucket)
    return None


# -- one slice -------------------------------------------------------------------------------


def change_range_of(plan: SnapshotPlan) -> ChangeRange:
    """The range a feed's plan (or manifest settings) covers."""
    changes = plan.settings["changes"]
    return ChangeRange(
        int(changes["from_write_id"]),
        int(changes["to_write_id"]),
        tuple(changes["key"]),
        bool(changes["net"]),
        bool(changes.get("delete_values", True)),
    )


def compute_slice(
    snapshot: TableReadView,
    bucket_slice: BucketSlice,
    fs: AbstractFileSystem,
    out_fs: AbstractFileSystem,
    plan: SnapshotPlan,
    *,
    at_a: IdentitySnapshot | None = None,
) -> BucketResult:
    """Compute and write the changes of one planned slice (no commit)."""
    settings = plan.settings
    unit = settings["timestamp_unit"]
    change_range = change_range_of(plan)
    columns = TableColumns.from_dict(settings["columns"])
    values = bucket_slice.partition.as_dict()
    partition_values = [
        (
            c["name"],
            partition_scalar(
                c["name"], values.get(c["name"]), HiveType.parse(c["hive_type"]), unit
            ),
        )
        for c in settings["partition_columns"]
    ]
    in_slice = {k.lower() for k, _ in partition_values}
    # partition columns are the same for every row of a slice: a key pairs on the others
    slice_range = replace(
        change_range, key=tuple(k for k in change_range.key if k.lower() not in in_slice)
    )
    if bucket_slice.key in settings["changes"]["identity_diff_slices"]:
        if at_a is None:
            raise ValueError(
                f"slice {bucket_slice.key} is diffed against a snapshot at write "
                f"{change_range.from_write_id}: pass it (at_a)"
            )
        changes = diff_changes(
            bucket_slice,
            fs,
            columns,
            snapshot.write_ids,
            at_a,
            batch_rows=settings["batch_rows"],
            timestamp_unit=unit,
        )
        finished = finish(changes.rows, slice_range, partition_values, pair_any_write=True)
    else:
        changes = event_changes(
            bucket_slice,
            fs,
            columns,
            snapshot.write_ids,
            change_range,
            batch_rows=settings["batch_rows"],
            timestamp_unit=unit,
        )
        finished = finish(changes.rows, slice_range, partition_values)
    # the writes of the slice's unpaired changes, in its files' footers (change_pairs)
    schema = feed_schema(settings).with_metadata(change_writes_metadata(finished.rows))
    writer = BucketFileWriter.for_slice(
        out_fs,
        plan.out,
        bucket_slice.partition.path,
        plan.snapshot_id,
        bucket_slice.bucket_id,
        schema,
        settings,
        counted=CHANGE_TYPE,  # its footer counts the changes of each type (change_counts)
        dictionary=WRITE_COLUMNS,
    )
    try:
        table = finished.rows.select(schema.names).cast(schema)
        for start in range(0, table.num_rows, settings["row_group_rows"]):
            writer.write(table.slice(start, settings["row_group_rows"]))
        files = writer.close()
    except BaseException:
        writer.abort()
        raise
    planned = plan.planned(bucket_slice.key)
    result = BucketResult(
        snapshot_id=plan.snapshot_id,
        slice_key=bucket_slice.key,
        partition=bucket_slice.partition.path,
        bucket=bucket_slice.bucket_id,
        fingerprint=planned.fingerprint,
        files=files,
        rows_read=changes.rows_read,
        rows_invalid=changes.rows_unchanged,
        rows_deleted=0,
        rows_filtered=finished.netted,
        rows_written=finished.rows.num_rows,
        delete_keys=changes.delete_events,
    )
    result.check_reconciled()
    return result


# -- the whole feed --------------------------------------------------------------------------


def feed_watermark(
    out_uri: str,
    *,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> int | None:
    """The last write id delivered into ``out_uri`` (None when it holds no feed)."""
    fs, root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    latest = latest_committed(fs, root, lambda s: "changes" in s.settings)
    return latest.max_write_id if latest is not None else None


def change_counts(
    result: SnapshotResult,
    fs: AbstractFileSystem,
    footers: dict[str, pq.FileMetaData] | None = None,
) -> dict[str, int]:
    """Rows of each change type in a committed feed: from its files' footers, which count
    their ``_change_type`` values (``parquet_files.footer_value_counts``), or from the column
    itself in a file whose footer does not (a feed written before footers counted).

    :param result: the committed feed.
    :param fs: its output filesystem.
    :param footers: the files' footers read already, by path (see
        :func:`.change_pairs.file_footer`).
    """
    counts = dict.fromkeys(CHANGE_TYPES, 0)
    for path in result.file_paths():
        found = footer_value_counts(file_footer(fs, path, footers), CHANGE_TYPE)
        if found is None:
            with fs.open(path, "rb") as handle:
                column = pq.ParquetFile(handle).read(columns=[CHANGE_TYPE])[CHANGE_TYPE]
            found = count_values(column)
        for value, rows in found.items():
            counts[value] += rows
    return counts


__all__ = [
    "CHANGES_FORMAT",
    "ChangeFeed",
    "FeedOptions",
    "bounded_write_ids",
    "change_counts",
    "change_range_of",
    "compute_slice",
    "feed_schema",
    "feed_watermark",
    "plan_changes",
    "slice_of",
    "resolve_at",
]
