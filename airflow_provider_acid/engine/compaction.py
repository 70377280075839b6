"""Per-bucket anti-join compaction of a Hive ACID snapshot into clean Parquet.

For each bucket slice: ``rows(originals + base + deltas) ANTI JOIN delete keys`` on the full
key ``(originalTransaction, bucket field as stored, rowId)``. Buckets are independent units of
work: :func:`plan_snapshot` fixes what a snapshot holds, :func:`compact_slice` writes one
bucket (on any worker), :func:`commit_snapshot` verifies and commits them all;
:func:`compact_table` does the three in one process.

Memory per bucket: the delete keys (about 8 bytes per delete, grouped by
``(originalTransaction, bucket)``), one ORC stripe or Parquet batch being read, and one Parquet
row group being written; never the bucket's data as a whole. A bucket without delete deltas is
a straight copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from fsspec import AbstractFileSystem

from ..acid.hive_types import TIMESTAMP_UNITS, HiveType, partition_scalar
from ..acid.layout_checks import check_read_view
from ..acid.listing import location_uri, resolve_filesystem
from ..acid.locations import check_outside_table
from ..acid.partition_listing import partition_specs
from ..acid.read_view import BucketSlice, TableReadView
from ..acid.resolution import check_placed, resolve_read_view
from ..acid.rows import SliceReader, TableColumns, table_columns
from ..acid.schema import partition_columns
from ..acid.source import TableDefinition, TableSource, storage_only_warning
from ..acid.writeids import RangeValidity, ValidTxnList, ValidWriteIdList, parse_write_id_list
from ..output.parquet_files import (
    IDENTITY_COLUMNS,
    BucketFileWriter,
    dictionary_columns,
    output_schema,
)
from ..output.protocol import (
    commit_snapshot,
    complete_commit,
    read_manifest,
    read_plan,
    reuse_candidates,
    write_plan,
)
from ..output.records import BucketResult, CommitError, PlannedSlice, SnapshotPlan, SnapshotResult
from .delete_keys import DeleteKeySet
from .memory_budget import delete_key_budget, within_budget

#: A row filter: given a batch of output rows, which to keep (nulls count as False).
RowFilter = Callable[[pa.Table], "pa.Array | pa.ChunkedArray"]

#: Told after each slice :func:`compact_table` computes: its result, slices done, slices to
#: compute (reused slices are not computed). Called one at a time, from the worker threads.
ProgressCallback = Callable[[BucketResult, int, int], None]

_SETTINGS_VERSION = 1


@dataclass(frozen=True)
class CompactionOptions:
    """How snapshots are written.

    :param compression: Parquet codec (``zstd``, ``snappy``, ``gzip``, ``lz4``, ``none``).
    :param compression_level: codec level (None: the codec's default).
    :param target_file_size: bytes after which a bucket's output rolls over to a new file.
    :param row_group_rows: rows per Parquet row group (also the write buffer).
    :param batch_rows: rows processed at a time (ORC stripes are sliced to this).
    :param include_identity: also write the row identity as ``_acid_*`` columns.
    :param timestamp_unit: unit of timestamp columns (``us`` is what Spark reads; a value
        finer than it is an error, not a silent truncation; ``ns`` keeps Hive's precision).
    :param schema: the table's columns (a pyarrow Schema, ``(name, hive type)`` pairs or a
        mapping); by default those of the newest ACID file.
    :param partition_types: Hive types of partition columns, e.g. ``{"dt": "date"}``; others
        are inferred from the folder values (bigint, date, else string).
    :param reuse: reuse the files of unchanged buckets of the latest committed snapshot.
    :param max_workers: buckets compacted at once by :func:`compact_table`.
    :param ignore_unrecognised: plan the snapshot even though files of the table cannot be
        placed in any slice (see :func:`~.snapshot.check_placed`); the plan and the manifest
        record each file so left out. By default such files refuse the plan.
    """

    compression: str = "zstd"
    compression_level: int | None = None
    target_file_size: int = 256 * 1024 * 1024
    row_group_rows: int = 262_144
    batch_rows: int = 131_072
    include_identity: bool = False
    timestamp_unit: str = "us"
    schema: Any = None
    partition_types: Mapping[str, str] | None = None
    reuse: bool = True
    max_workers: int | None = None
    ignore_unrecognised: bool = False

    def __post_init__(self) -> None:
        if self.timestamp_unit not in TIMESTAMP_UNITS:
            raise ValueError(f"timestamp_unit must be one of {TIMESTAMP_UNITS}")
        for name in ("target_file_size", "row_group_rows", "batch_rows"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.max_workers is not None and self.max_workers < 1:
            raise ValueError("max_workers must be positive")

    def workers(self) -> int:
        return self.max_workers or max(1, min(4, os.cpu_count() or 1))


# -- choosing slices -------------------------------------------------------------------------


def select_slices(
    snapshot: TableReadView,
    partitions: Iterable[str | Mapping[str, Any]] | None = None,
    buckets: Iterable[int] | None = None,
    slice_keys: Iterable[str] | None = None,
) -> tuple[BucketSlice, ...]:
    """The slices to compact: those of the given partitions (``dt=2024-01-01`` or mappings; a
    slice matches if it matches any spec), buckets and slice keys (all when None)."""
    chosen = list(snapshot.slices)
    if partitions is not None:
        specs = partition_specs(partitions)
        keys = set(snapshot.partition_keys())
        for spec in specs:
            unknown = sorted(set(spec) - keys)
            if unknown:
                raise ValueError(
                    f"partitions: {unknown} are not partition columns of {snapshot.root} "
                    f"(columns: {sorted(keys) or 'none, the table is unpartitioned'})"
                )

        def matches(s: BucketSlice, spec: Mapping[str, Any]) -> bool:
            values = s.partition.as_dict()
            return all(values.get(k) == v for k, v in spec.items())

        for spec in specs:
            if not any(matches(s, spec) for s in chosen):
                shown = "/".join(f"{k}={v}" for k, v in spec.items())
                raise ValueError(f"partitions: {shown!r} matches no partition of {snapshot.root}")
        chosen = [s for s in chosen if any(matches(s, spec) for spec in specs)]
    if buckets is not None:
        wanted = {int(b) for b in buckets}
        present = {s.bucket_id for s in chosen}
        missing = sorted(wanted - present)
        if missing:
            raise ValueError(
                f"buckets: {missing} not in {snapshot.root}"
                f"{' (of the partitions given)' if partitions is not None else ''}; its "
                f"buckets are {sorted(present) or 'none'}"
            )
        chosen = [s for s in chosen if s.bucket_id in wanted]
    if slice_keys is not None:
        wanted_keys = list(dict.fromkeys(slice_keys))
        known = {s.key for s in snapshot.slices}
        unknown = [k for k in wanted_keys if k not in known]
        if unknown:
            raise ValueError(f"slice_keys: {unknown} are not slices of {snapshot.root}")
        wanted_set = set(wanted_keys)
        chosen = [s for s in chosen if s.key in wanted_set]
    return tuple(chosen)


# -- planning --------------------------------------------------------------------------------


def _output_settings(
    options: CompactionOptions,
    columns: TableColumns,
    partition_columns: Sequence[tuple[str, HiveType]],
    row_filter_key: str | None,
) -> dict[str, Any]:
    names = [c.name.lower() for c in columns.columns] + [k.lower() for k, _ in partition_columns]
    if options.include_identity:
        names += [n for n, _ in IDENTITY_COLUMNS]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise ValueError(f"output columns {clashes} appear twice (table, partition, identity)")
    return {
        "version": _SETTINGS_VERSION,
        "columns": columns.to_dict()["columns"],  # not where they came from: that changes
        "partition_columns": [{"name": k, "hive_type": str(t)} for k, t in partition_columns],
        "include_identity": options.include_identity,
        "timestamp_unit": options.timestamp_unit,
        "compression": options.compression,
        "compression_level": options.compression_level,
        "target_file_size": options.target_file_size,
        "row_group_rows": options.row_group_rows,
        "batch_rows": options.batch_rows,
        "row_filter": row_filter_key,
    }


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def relative_path(root: str, path: str) -> str:
    """``path`` relative to the table root, as plans and manifests name files; a file outside
    it (a metastore partition stored elsewhere) keeps its full path."""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def name_files(paths: Sequence[str], at_most: int = 5) -> str:
    """``a, b, c and 4 more``: files an error names."""
    shown = ", ".join(paths[:at_most])
    return shown + (f" and {len(paths) - at_most} more" if len(paths) > at_most else "")


def slice_fingerprint(
    snapshot: TableReadView, bucket_slice: BucketSlice, settings: Mapping[str, Any]
) -> str:
    """A hash of everything a bucket's output depends on: its files (path, size, version),
    which of their writes the write-id list shows, and the output settings."""
    write_ids = snapshot.write_ids
    described = []
    for data_file in bucket_slice.files:
        folder = data_file.folder
        visibility: Any = "all"
        if folder is not None:
            validity = write_ids.range_validity(folder.min_write_id, folder.max_write_id)
            if validity is not RangeValidity.ALL:
                top = min(folder.max_write_id, write_ids.high_watermark)
                visibility = [top, list(write_ids.invalid_ids_in(folder.min_write_id, top))]
        described.append(
            [
                data_file.role.value,
                relative_path(snapshot.root, data_file.path),
                data_file.file.size,
                data_file.file.version,
                visibility,
            ]
        )
    return _digest([settings, bucket_slice.key, described])[:32]


def _snapshot_id(
    snapshot: TableReadView,
    settings: Mapping[str, Any],
    slices: list[PlannedSlice],
    ignored: Sequence[str] = (),
) -> str:
    write_ids = None if snapshot.write_ids.is_all_committed else str(snapshot.write_ids)
    described: list[Any] = [
        "airflow-acid/snapshot/1",
        snapshot.root,
        write_ids,
        str(snapshot.txns) if snapshot.txns else None,
        snapshot.insert_only,
        settings,
        [[s.key, s.fingerprint] for s in slices],
    ]
    if ignored:  # what was left out by choice is part of what the snapshot is
        described.append(sorted(ignored))
    return _digest(described)[:16]


def plan_for(
    snapshot: TableReadView,
    out_uri: str,
    *,
    fs: AbstractFileSystem,
    partitions: Iterable[str | Mapping[str, Any]] | None = None,
    buckets: Iterable[int] | None = None,
    slice_keys: Iterable[str] | None = None,
    row_filter_key: str | None = None,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
    options: CompactionOptions = CompactionOptions(),  # noqa: B008 - frozen, shared safely
    ignore_unrecognised: bool = False,
) -> SnapshotPlan:
    """Plan a snapshot of an already resolved table snapshot (see :func:`plan_snapshot`).

    Files of the table that cannot be placed in any slice refuse the plan
    (:class:`~.snapshot.UnplacedFilesError`, naming them) unless ``ignore_unrecognised`` (or
    ``options.ignore_unrecognised``); the plan's warnings then name each file left out.
    """
    ignored = check_placed(
        snapshot, ignore_unrecognised=ignore_unrecognised or options.ignore_unrecognised
    )
    out_fs, out_root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    # Where workers open the table again (compact_slice(plan.table, ...)): keep its protocol.
    table_uri = location_uri(fs, snapshot.root)
    check_outside_table(location_uri(out_fs, out_root), table_uri, "output location")
    chosen = select_slices(snapshot, partitions, buckets, slice_keys)
    columns = table_columns(snapshot, fs, options.schema)
    settings = _output_settings(
        options, columns, partition_columns(snapshot, options.partition_types), row_filter_key
    )
    planned = [
        PlannedSlice(
            s.key,
            s.partition.path,
            s.bucket_id,
            slice_fingerprint(snapshot, s, settings),
            files=tuple(relative_path(snapshot.root, f.path) for f in s.files),
        )
        for s in chosen
    ]
    snapshot_id = _snapshot_id(snapshot, settings, planned, ignored)
    if read_manifest(out_fs, out_root, snapshot_id) is not None:
        return read_plan(out_fs, out_root, snapshot_id)
    previous = None
    if options.reuse:
        previous, usable = reuse_candidates(out_fs, out_root, table_uri)
        planned = [
            replace(p, reused=reused)
            if (reused := usable.get(p.key)) is not None and reused.fingerprint == p.fingerprint
            else p
            for p in planned
        ]
    plan = SnapshotPlan(
        snapshot_id=snapshot_id,
        out=out_root,
        table=table_uri,
        write_ids=None if snapshot.write_ids.is_all_committed else str(snapshot.write_ids),
        txns=str(snapshot.txns) if snapshot.txns else None,
        insert_only=snapshot.insert_only,
        settings=settings,
        slices=tuple(planned),
        previous_snapshot_id=previous,
        max_write_id=max(
            (f.folder.max_write_id for f in snapshot.files if f.folder is not None), default=0
        ),
        definition=snapshot.definition.to_dict() if snapshot.definition else None,
        warnings=_warnings(snapshot) + ignored,
    )
    write_plan(out_fs, plan)
    return plan


def _warnings(snapshot: TableReadView) -> tuple[str, ...]:
    warning = storage_only_warning(snapshot.write_ids, snapshot.definition)
    return (warning,) if warning else ()


def _resolve(
    table_uri: str | TableSource,
    write_ids: ValidWriteIdList | str | None,
    txns: ValidTxnList | str | None,
    insert_only: bool,
    filesystem: AbstractFileSystem | None,
    storage_options: dict[str, Any] | None,
    partitions: Iterable[str | Mapping[str, Any]] | None = None,
    *,
    strict: bool = True,
) -> tuple[TableReadView, AbstractFileSystem, dict[str, str]]:
    """The snapshot, of only the given partitions' folders when ``partitions`` names some and
    the table is read storage-only (:mod:`.partition_listing`; with ``strict`` a spec matching
    no partition is an error naming it, else the table is listed whole); and then the
    partition columns' types as every partition folder found gives them (what a whole
    listing infers), else ``{}``."""
    location = table_uri.location if isinstance(table_uri, TableSource) else table_uri
    fs, _ = resolve_filesystem(location, filesystem, storage_options)
    if isinstance(write_ids, str):
        write_ids = parse_write_id_list(write_ids)
    if partitions is not None:
        from ..acid.partition_listing import (
            resolve_partition_specs,
            resolve_partitions,
            spec_filter,
        )

        specs = list(partitions)
        if strict:
            scoped = resolve_partition_specs(
                table_uri, specs, write_ids, txns, insert_only=insert_only, filesystem=fs
            )
        else:
            scoped = resolve_partitions(
                table_uri,
                spec_filter(specs),
                write_ids,
                txns,
                insert_only=insert_only,
                filesystem=fs,
            )
        types: dict[str, str] = {}
        if scoped.scoped and scoped.listing is not None:
            from ..pruning.partition_pruning import partition_types_of

            types = partition_types_of(scoped.listing.partitions)
        check_read_view(scoped.snapshot, write_ids_given=_write_ids_given(table_uri, write_ids))
        return scoped.snapshot, fs, types
    snapshot = resolve_read_view(table_uri, write_ids, txns, insert_only=insert_only, filesystem=fs)
    check_read_view(snapshot, write_ids_given=_write_ids_given(table_uri, write_ids))
    return snapshot, fs, {}


def _write_ids_given(table_uri: str | TableSource, write_ids: Any) -> bool:
    """The read has a write-id list (given, or the source's: the metastore's or the user's)."""
    if write_ids is not None:
        return True
    return isinstance(table_uri, TableSource) and table_uri.write_ids is not None


def _with_partition_types(
    options: CompactionOptions, types: Mapping[str, str]
) -> CompactionOptions:
    """``options`` with the partition types of the whole table (declared ones first)."""
    if not types:
        return options
    declared = {k.lower() for k in options.partition_types or {}}
    inferred = {k: t for k, t in types.items() if k.lower() not in declared}
    return replace(options, partition_types={**inferred, **dict(options.partition_types or {})})


def plan_snapshot(
    table_uri: str | TableSource,
    out_uri: str,
    *,
    write_ids: ValidWriteIdList | str | None = None,
    txns: ValidTxnList | str | None = None,
    insert_only: bool = False,
    partitions: Iterable[str | Mapping[str, Any]] | None = None,
    buckets: Iterable[int] | None = None,
    slice_keys: Iterable[str] | None = None,
    row_filter_key: str | None = None,
    filesystem: AbstractFileSystem | None = None,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
    options: CompactionOptions = CompactionOptions(),  # noqa: B008
    ignore_unrecognised: bool = False,
) -> SnapshotPlan:
    """Resolve the table, choose its slices, fix the output schema and store the plan.

    The snapshot id is a hash of the source and the output settings: planning twice gives the
    same id. ``plan.keys_to_compute`` are the slices for :func:`compact_slice`; the others
    reuse the latest committed snapshot's files. ``row_filter_key`` names the row filter the
    workers will apply (it is part of the id: a callable has no stable identity of its own).
    Files that cannot be placed in any slice refuse the plan unless ``ignore_unrecognised``
    (see :func:`plan_for`).
    """
    snapshot, fs, types = _resolve(
        table_uri, write_ids, txns, insert_only, filesystem, storage_options, partitions
    )
    return plan_for(
        snapshot,
        out_uri,
        fs=fs,
        partitions=partitions,
        buckets=buckets,
        slice_keys=slice_keys,
        row_filter_key=row_filter_key,
        out_filesystem=out_filesystem,
        storage_options=storage_options,
        options=_with_partition_types(options, types),
        ignore_unrecognised=ignore_unrecognised,
    )


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
    writer = BucketFileWriter(
        out_fs,
        plan.out,
        bucket_slice.partition.path,
        plan.snapshot_id,
        bucket_slice.bucket_id,
        schema,
        settings,
    )
    writer.remove_leftovers()
    invalid = deleted = filtered = written = 0
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
        snapshot, fs, _ = _resolve(
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
    them; see :func:`plan_snapshot`, :func:`compact_slice` and :func:`commit_snapshot`. With a
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
    snapshot, fs, types = _resolve(
        table_uri, write_ids, txns, insert_only, filesystem, storage_options, partitions
    )
    plan = plan_for(
        snapshot,
        out_uri,
        fs=fs,
        partitions=partitions,
        buckets=buckets,
        slice_keys=slice_keys,
        row_filter_key=row_filter_key if row_filter is not None else None,
        out_filesystem=out_filesystem,
        storage_options=storage_options,
        options=_with_partition_types(options, types),
        ignore_unrecognised=ignore_unrecognised,
    )
    out_fs, out_root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    committed = complete_commit(out_fs, out_root, plan.snapshot_id)  # finishes a killed commit
    if committed is not None:
        return committed

    keys = plan.keys_to_compute
    reported = threading.Lock()
    done = 0

    def run(key: str) -> BucketResult:
        nonlocal done
        result = compact_slice(
            snapshot,
            key,
            out_uri,
            plan.snapshot_id,
            row_filter=row_filter,
            plan=plan,
            filesystem=fs,
            out_filesystem=out_fs,
            storage_options=storage_options,
        )
        if progress is not None:
            with reported:
                done += 1
                progress(result, done, len(keys))
        return result

    workers = min(options.workers(), max(1, len(keys)))
    if workers == 1:
        results = [run(k) for k in keys]
    else:
        pool = ThreadPoolExecutor(max_workers=workers)
        try:
            results = list(pool.map(run, keys))
        finally:
            # On an error (or Ctrl-C) start no other slice: only wait for the running ones.
            pool.shutdown(wait=True, cancel_futures=True)
    return commit_snapshot(
        out_uri,
        plan.snapshot_id,
        results,
        plan=plan,
        out_filesystem=out_fs,
        storage_options=storage_options,
    )


def options_from_dict(data: Mapping[str, Any]) -> CompactionOptions:
    """:class:`CompactionOptions` from plain data (e.g. an Airflow task's parameters)."""
    known = {f.name for f in fields(CompactionOptions)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown compaction options {unknown}; known: {sorted(known)}")
    return CompactionOptions(**dict(data))


__all__ = [
    "IDENTITY_COLUMNS",
    "CompactionOptions",
    "DeleteKeySet",
    "ProgressCallback",
    "REPLAN",
    "RowFilter",
    "SourceChangedError",
    "compact_bucket",
    "compact_slice",
    "compact_table",
    "dictionary_columns",
    "options_from_dict",
    "name_files",
    "output_schema",
    "plan_for",
    "plan_snapshot",
    "relative_path",
    "select_slices",
    "slice_fingerprint",
]
