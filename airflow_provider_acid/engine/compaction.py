"""Per-bucket anti-join compaction of a Hive ACID read view into a clean Parquet snapshot.

For each bucket slice: ``rows(originals + base + deltas) ANTI JOIN delete keys`` on the full
key ``(originalTransaction, bucket field as stored, rowId)``. Buckets are independent units of
work: :func:`~.plan.plan_snapshot` fixes what a snapshot holds, :func:`compact_slice` writes one
bucket (on any worker), :func:`commit_snapshot` verifies and commits them all;
:func:`compact_table` does the three in one process.

Memory per bucket: the delete keys (about 8 bytes per delete, grouped by
``(originalTransaction, bucket)``), one ORC stripe or Parquet batch being read, and one Parquet
row group being written; never the bucket's data as a whole. A bucket without delete deltas is
a straight copy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from ..acid.hive_types import HiveType, partition_scalar
from ..acid.listing import location_uri, resolve_filesystem
from ..acid.ranged_reads import fetch_early, forget_early
from ..acid.read_view import BucketSlice, TableReadView
from ..acid.rows import SliceReader
from ..acid.source import TableDefinition, TableSource
from ..acid.table_columns import TableColumns
from ..acid.writeids import ValidTxnList, ValidWriteIdList
from ..output.background_uploads import StoredUploads, uploads_in_background
from ..output.parquet_files import (
    BucketFileWriter,
    output_schema,
)
from ..output.protocol import (
    commit_snapshot,
    complete_commit,
    read_manifest,
    read_plan,
)
from ..output.records import BucketResult, CommitError, PlannedSlice, SnapshotPlan, SnapshotResult
from .delete_keys import DeleteKeySet
from .memory_budget import delete_key_budget, within_budget
from .options import CompactionOptions, ProgressCallback, RowFilter
from .plan import (
    name_files,
    plan_or_committed,
    relative_path,
    resolve_for_plan,
    select_slices,
    slice_fingerprint,
    with_partition_types,
)

#: Every this many batches written from a source not on a local disk (whose reads are
#: prefetched into memory), the memory pyarrow's pool freed is handed back to the system
#: (``release_unused``). mimalloc, pyarrow's default pool, otherwise keeps the freed pages of
#: decoded stripes and encoded row groups, 40 to 50 MiB of a worker's peak RSS in the S3
#: benchmark; taking them back costs page faults (a local compaction was 8 to 12% slower for it,
#: so it is not done there). A worker's own pool, jemalloc (:mod:`.memory_pool`), hands its freed
#: pages back by itself: there the call costs nothing measurable.
RELEASE_EVERY_BATCHES = 2

# -- writing one bucket ----------------------------------------------------------------------


def _true_count(mask: pa.Array | pa.ChunkedArray) -> int:
    if isinstance(mask, pa.ChunkedArray):
        return sum(c.true_count for c in mask.chunks)
    return mask.true_count


def compact_bucket(
    snapshot: TableReadView,
    bucket_slice: BucketSlice,
    fs: AbstractFileSystem,
    out_fs: AbstractFileSystem,
    plan: SnapshotPlan,
    *,
    fingerprint: str,
    row_filter: RowFilter | None = None,
) -> BucketResult:
    """Anti-join one bucket slice against its delete keys and write it as Parquet files."""
    settings = plan.settings
    unit = settings["timestamp_unit"]
    reader = SliceReader(
        bucket_slice,
        fs,
        TableColumns.from_dict(settings["columns"]),
        snapshot.write_ids,
        insert_only=snapshot.insert_only,
        batch_rows=settings["batch_rows"],
        timestamp_unit=unit,
    )
    keys = None
    if bucket_slice.delete_delta_files and not snapshot.insert_only:
        keys = DeleteKeySet.from_batches(
            within_budget(
                reader.delete_batches(),
                delete_key_budget(),
                f"slice {bucket_slice.key} of {snapshot.root}",
            )
        )
    schema = output_schema(settings)
    values = bucket_slice.partition.as_dict()
    partition_values = [
        partition_scalar(c["name"], values.get(c["name"]), HiveType.parse(c["hive_type"]), unit)
        for c in settings["partition_columns"]
    ]
    writer = BucketFileWriter.for_slice(
        out_fs,
        plan.out,
        bucket_slice.partition.path,
        plan.snapshot_id,
        bucket_slice.bucket_id,
        schema,
        settings,
    )
    invalid = deleted = filtered = written = batches = 0
    release = not isinstance(fs, LocalFileSystem)
    try:
        for batch in reader.data_batches():
            n = batch.num_rows
            keep = batch.visible
            if keep is not None:
                invalid += n - keep.true_count
            hits = (
                keys.match(batch.original_transaction, batch.bucket, batch.row_id) if keys else None
            )
            if hits is not None:
                if keep is not None:
                    hits = pc.and_(hits, keep)
                count = hits.true_count
                deleted += count
                if count:
                    dropped = pc.invert(hits)
                    keep = dropped if keep is None else pc.and_(keep, dropped)
            columns = list(batch.columns)
            identity = (
                [batch.original_transaction, batch.bucket, batch.row_id, batch.current_transaction]
                if settings["include_identity"]
                else []
            )
            rows = n
            if keep is not None and (rows := keep.true_count) < n:
                # column by column: measured cheaper than Table.filter on these batches
                columns = [pc.filter(c, keep) for c in columns]
                identity = [pc.filter(c, keep) for c in identity]
            partition = [pa.repeat(v, rows) for v in partition_values]
            table = pa.Table.from_arrays(columns + partition + identity, schema=schema)
            if row_filter is not None and table.num_rows:
                mask = pc.fill_null(row_filter(table), False)
                kept = _true_count(mask)
                filtered += table.num_rows - kept
                if kept < table.num_rows:
                    table = table.filter(mask)
            written += table.num_rows
            writer.write(table)
            batches += 1
            if release and batches % RELEASE_EVERY_BATCHES == 0:
                pa.default_memory_pool().release_unused()
        files = writer.close()
    except BaseException:
        writer.abort()
        raise
    result = BucketResult(
        snapshot_id=plan.snapshot_id,
        slice_key=bucket_slice.key,
        partition=bucket_slice.partition.path,
        bucket=bucket_slice.bucket_id,
        fingerprint=fingerprint,
        files=files,
        rows_read=reader.rows_in_files,
        rows_invalid=invalid,
        rows_deleted=deleted,
        rows_filtered=filtered,
        rows_written=written,
        delete_keys=len(keys) if keys is not None else 0,
    )
    result.check_reconciled()
    return result


# -- the entry points ------------------------------------------------------------------------


def compact_slice(
    source: TableReadView | str,
    slice_key: str,
    out_uri: str,
    snapshot_id: str,
    *,
    row_filter: RowFilter | None = None,
    plan: SnapshotPlan | None = None,
    filesystem: AbstractFileSystem | None = None,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> BucketResult:
    """Compact one bucket slice of a planned snapshot into its Parquet files (no commit).

    ``source`` is the resolved table snapshot or the table's URI (then resolved with the
    plan's write-id list); with a snapshot of a table outside the local filesystem, pass its
    ``filesystem`` too (a snapshot keeps paths, not the filesystem). The plan is read from
    ``out_uri`` unless given. Idempotent: a slice of a committed snapshot returns its committed
    result, a reused slice its earlier files, and a re-run overwrites the files of an earlier
    attempt. Fails if the slice's files changed since planning.
    """
    out_fs, out_root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    committed = read_manifest(out_fs, out_root, snapshot_id)
    if committed is not None:
        for bucket in committed.buckets:
            if bucket.slice_key == slice_key:
                return bucket
        raise KeyError(f"slice {slice_key!r} is not part of committed snapshot {snapshot_id}")
    return _compact_uncommitted(
        source,
        slice_key,
        out_root,
        snapshot_id,
        row_filter=row_filter,
        plan=plan,
        filesystem=filesystem,
        out_fs=out_fs,
        storage_options=storage_options,
    )


def _compact_uncommitted(
    source: TableReadView | str,
    slice_key: str,
    out_root: str,
    snapshot_id: str,
    *,
    row_filter: RowFilter | None,
    plan: SnapshotPlan | None,
    filesystem: AbstractFileSystem | None,
    out_fs: AbstractFileSystem,
    storage_options: dict[str, Any] | None,
) -> BucketResult:
    """:func:`compact_slice` of a snapshot known not to be committed yet."""
    if plan is None:
        plan = read_plan(out_fs, out_root, snapshot_id)
    elif plan.snapshot_id != snapshot_id:
        raise ValueError(f"plan is for snapshot {plan.snapshot_id}, not {snapshot_id}")
    planned = plan.planned(slice_key)
    if planned.reused is not None:
        return planned.reused
    if (row_filter is None) != (plan.settings["row_filter"] is None):
        raise ValueError(
            f"snapshot {snapshot_id} was planned "
            + (
                f"with row filter {plan.settings['row_filter']!r}: pass row_filter"
                if row_filter is None
                else "without a row filter: pass none (or plan with row_filter_key)"
            )
        )
    if isinstance(source, TableReadView):
        snapshot = source
        fs, _ = resolve_filesystem(snapshot.root, filesystem, storage_options)
    else:
        snapshot, fs, _ = resolve_for_plan(
            _planned_source(plan, planned, source),
            plan.write_ids,
            plan.txns,
            plan.insert_only,
            filesystem,
            storage_options,
            # storage-only, the worker lists the slice's partition folder only
            partitions=[planned.partition] if planned.partition and not plan.definition else None,
            strict=False,  # a partition gone since the plan is reported as the slice gone
        )
    if plan.table not in (snapshot.root, location_uri(fs, snapshot.root)):
        raise ValueError(
            f"snapshot {snapshot_id} was planned for {plan.table}, not {snapshot.root}"
        )
    bucket_slice = next((s for s in snapshot.slices if s.key == slice_key), None)
    fingerprint = slice_fingerprint(snapshot, bucket_slice, plan.settings) if bucket_slice else ""
    if fingerprint != planned.fingerprint:
        raise SourceChangedError(_changed(snapshot, bucket_slice, planned, snapshot_id))
    try:
        return compact_bucket(
            snapshot, bucket_slice, fs, out_fs, plan, fingerprint=fingerprint, row_filter=row_filter
        )
    except FileNotFoundError as exc:  # removed while it was read
        raise SourceChangedError(
            f"source file {exc.filename or exc} of slice {slice_key} vanished while snapshot "
            f"{snapshot_id} was read{REPLAN}"
        ) from exc


#: How to recover from a source that changed under a planned snapshot.
REPLAN = (
    ". Hive's Cleaner deletes the files a compaction made obsolete; the snapshot must be "
    "re-planned: run the DAG again from its manifest task, which reads a new view (re-running "
    "the plan alone reads the same, outdated view)"
)


class SourceChangedError(CommitError):
    """A slice's source files changed or vanished since its snapshot was planned."""


def _changed(
    snapshot: TableReadView,
    bucket_slice: BucketSlice | None,
    planned: PlannedSlice,
    snapshot_id: str,
) -> str:
    now = (
        {relative_path(snapshot.root, f.path) for f in bucket_slice.files}
        if bucket_slice
        else set()
    )
    vanished = [f for f in planned.files if f not in now]
    if vanished:
        return (
            f"source files of slice {planned.key} in {snapshot.root} vanished since snapshot "
            f"{snapshot_id} was planned: {name_files(vanished)}{REPLAN}"
        )
    if bucket_slice is None:
        return f"slice {planned.key!r} is no longer in {snapshot.root}{REPLAN}"
    return (
        f"the files of slice {planned.key} in {snapshot.root} changed since snapshot "
        f"{snapshot_id} was planned{REPLAN}"
    )


def _planned_source(plan: SnapshotPlan, planned: PlannedSlice, table_uri: str) -> str | TableSource:
    """What a worker lists to compact ``planned``: with a metastore's definition, only the
    slice's partition location; without, the whole table."""
    if not plan.definition:
        return table_uri
    definition = TableDefinition.from_dict(plan.definition)
    if definition.partitions is not None:
        definition = definition.with_partitions([planned.partition])
    return TableSource(
        table_uri, plan.write_ids, plan.txns, plan.insert_only, definition, plan.warnings
    )


def _in_turn(
    run: Callable[[str], BucketResult],
    keys: Sequence[str],
    snapshot: TableReadView,
    fs: AbstractFileSystem,
) -> list[BucketResult]:
    """``run`` of each slice in turn, by one worker. Away from a local disk its waits overlap
    its work: the next slice's small files and footers are fetched while it computes one
    (:func:`.ranged_reads.fetch_early`; the first slice's all at once as it starts), and each
    data file's upload completes while it goes on to the next (inside the caller's
    :func:`.background_uploads.uploads_in_background`)."""
    files = {s.key: _slice_files(s) for s in snapshot.slices}
    results = []
    try:
        if keys:  # the first slice's files at once, not each as its reader comes to it
            fetch_early(fs, files.get(keys[0], []))
        for index, key in enumerate(keys):
            if index + 1 < len(keys):
                fetch_early(fs, files.get(keys[index + 1], []))
            results.append(run(key))
            forget_early(files.get(key, []))  # what it did not read
    finally:  # (its own: another compaction in this process may be fetching early too)
        forget_early([f for slice_files in files.values() for f in slice_files])
    return results


def _slice_files(bucket_slice: BucketSlice) -> list[tuple[str, int | None]]:
    """(path, size) of a slice's files, as :func:`.ranged_reads.fetch_early` takes them: the
    delete deltas first (their keys are read before any row)."""
    return [
        (f.path, f.file.size) for f in bucket_slice.delete_delta_files + bucket_slice.data_files
    ]


def compact_table(
    table_uri: str | TableSource,
    out_uri: str,
    *,
    write_ids: ValidWriteIdList | str | None = None,
    txns: ValidTxnList | str | None = None,
    insert_only: bool = False,
    partitions: Iterable[str | Mapping[str, Any]] | None = None,
    buckets: Iterable[int] | None = None,
    slice_keys: Iterable[str] | None = None,
    row_filter: RowFilter | None = None,
    row_filter_key: str | None = None,
    filesystem: AbstractFileSystem | None = None,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
    options: CompactionOptions = CompactionOptions(),  # noqa: B008
    progress: ProgressCallback | None = None,
    ignore_unrecognised: bool = False,
) -> SnapshotResult:
    """Write and commit one Parquet snapshot of a Hive ACID table (or of chosen slices of it).

    Plans the snapshot, compacts its slices (``options.max_workers`` at a time) and commits
    them; see :func:`.plan_snapshot`, :func:`compact_slice` and :func:`commit_snapshot`. With a
    ``row_filter``, give ``row_filter_key`` too: a stable text naming the filter (it is part of
    the snapshot id), unless the filter object has a ``key`` attribute. ``progress`` is called
    after each computed slice with ``(result, done, total)`` (see :data:`ProgressCallback`).
    If a slice fails, slices not started yet are not started; the error is raised once the
    running ones have stopped, and nothing is committed. Files of the table that cannot be
    placed in any slice refuse it before any work (naming them) unless ``ignore_unrecognised``;
    the manifest's ``source.warnings`` then name each file left out.
    """
    if row_filter is not None and row_filter_key is None:
        row_filter_key = getattr(row_filter, "key", None)
        if not isinstance(row_filter_key, str):
            raise ValueError(
                "row_filter needs row_filter_key: a stable text naming the filter, so that "
                "the snapshot id stays deterministic"
            )
    snapshot, fs, types = resolve_for_plan(
        table_uri, write_ids, txns, insert_only, filesystem, storage_options, partitions
    )
    # One worker starts fetching its first slice's files while the plan's round trips go on
    # (the committed manifest, the snapshots to reuse, the plan's write). Away from a local
    # disk that is two round trips or more; what the plan leaves out is forgotten.
    first: list[tuple[str, int | None]] = []
    if options.workers() == 1:
        chosen = select_slices(snapshot, partitions, buckets, slice_keys)
        first = _slice_files(chosen[0]) if chosen else []
        fetch_early(fs, first)
    try:
        found = plan_or_committed(
            snapshot,
            out_uri,
            fs=fs,
            partitions=partitions,
            buckets=buckets,
            slice_keys=slice_keys,
            row_filter_key=row_filter_key if row_filter is not None else None,
            out_filesystem=out_filesystem,
            storage_options=storage_options,
            options=with_partition_types(options, types),
            ignore_unrecognised=ignore_unrecognised,
        )
    except BaseException:
        forget_early(first)
        raise
    out_fs, out_root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    if isinstance(found, SnapshotResult):  # committed already: finish a killed commit's markers
        forget_early(first)
        return complete_commit(out_fs, out_root, found.snapshot_id, committed=found) or found
    plan = found

    keys = plan.keys_to_compute
    reported = threading.Lock()
    done = 0

    def run(key: str) -> BucketResult:
        nonlocal done
        result = _compact_uncommitted(  # (plan_or_committed above: not committed)
            snapshot,
            key,
            out_root,
            plan.snapshot_id,
            row_filter=row_filter,
            plan=plan,
            filesystem=fs,
            out_fs=out_fs,
            storage_options=storage_options,
        )
        if progress is not None:
            with reported:
                done += 1
                progress(result, done, len(keys))
        return result

    workers = min(options.workers(), max(1, len(keys)))

    def commit(results: list[BucketResult], stored: StoredUploads | None) -> SnapshotResult:
        return commit_snapshot(
            out_uri,
            plan.snapshot_id,
            results,
            plan=plan,
            out_filesystem=out_fs,
            storage_options=storage_options,
            files_stored=stored,
        )

    if workers == 1:  # the last uploads complete while the commit takes its lock
        with uploads_in_background() as stored:
            return commit(_in_turn(run, keys, snapshot, fs), stored)
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        results = list(pool.map(run, keys))
    finally:
        # On an error (or Ctrl-C) start no other slice: only wait for the running ones.
        pool.shutdown(wait=True, cancel_futures=True)
    return commit(results, None)


__all__ = [
    "REPLAN",
    "CompactionOptions",
    "SourceChangedError",
    "compact_bucket",
    "compact_slice",
    "compact_table",
]
