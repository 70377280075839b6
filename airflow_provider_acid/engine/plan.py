"""The snapshot plan: which bucket slices an output snapshot holds, fixed before any is written.

:func:`plan_snapshot` resolves the read view (or takes one), chooses its slices
(:func:`select_slices`: partition specs, a slice filter), fingerprints each slice's files and
the output settings (:func:`slice_fingerprint`: a slice whose fingerprint matches the latest
committed snapshot's is reused, not rewritten) and writes the plan (:func:`plan_for`) that
every compaction worker then reads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from fsspec import AbstractFileSystem

from ..acid.hive_types import HiveType
from ..acid.layout_checks import check_read_view, read_view_warnings
from ..acid.listing import location_uri, resolve_filesystem
from ..acid.locations import check_outside_table
from ..acid.partition_listing import partition_specs
from ..acid.read_view import BucketSlice, TableReadView
from ..acid.resolution import check_placed, resolve_read_view
from ..acid.schema import partition_columns
from ..acid.source import TableSource, storage_only_warning
from ..acid.table_columns import TableColumns, table_columns
from ..acid.writeids import RangeValidity, ValidTxnList, ValidWriteIdList, parse_write_id_list
from ..output.parquet_files import (
    IDENTITY_COLUMNS,
)
from ..output.protocol import (
    read_manifest,
    read_plan,
    write_plan,
)
from ..output.records import PlannedSlice, SnapshotPlan, SnapshotResult
from ..output.reuse import reuse_candidates
from .options import CompactionOptions

_SETTINGS_VERSION = 1


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
    """The snapshot's id: a hash of what its rows depend on, and nothing that moves without a
    write. The transaction list is left out: its high mark is the reader's own transaction, so
    two runs by name with no write between them had two ids (and published twice). What the
    list decides, which compacted folders are visible, shows in the slices' files; the
    write-id list and the table's definition (without the metastore's address) stand for the
    rest."""
    write_ids = None if snapshot.write_ids.is_all_committed else str(snapshot.write_ids)
    definition = None
    if snapshot.definition is not None:
        definition = {k: v for k, v in snapshot.definition.to_dict().items() if k != "metastore"}
    described: list[Any] = [
        "airflow-acid/snapshot/2",
        snapshot.root,
        write_ids,
        definition,
        snapshot.insert_only,
        settings,
        [[s.key, s.fingerprint] for s in slices],
    ]
    if ignored:  # what was left out by choice is part of what the snapshot is
        described.append(sorted(ignored))
    return _digest(described)[:16]


def plan_for(snapshot: TableReadView, out_uri: str, **keywords: Any) -> SnapshotPlan:
    """Plan a snapshot of an already resolved table snapshot (see :func:`plan_snapshot`); the
    stored plan when the snapshot is committed already.

    Files of the table that cannot be placed in any slice refuse the plan
    (:class:`~..acid.read_view.UnplacedFilesError`, naming them) unless ``ignore_unrecognised`` (or
    ``options.ignore_unrecognised``); the plan's warnings then name each file left out.

    :param snapshot: the resolved table snapshot (:func:`resolve_for_plan`).
    :param out_uri: the output folder.
    :param keywords: those of :func:`plan_or_committed` (``fs`` at least).
    """
    found = plan_or_committed(snapshot, out_uri, **keywords)
    if isinstance(found, SnapshotPlan):
        return found
    out_fs, out_root = resolve_filesystem(
        out_uri, keywords.get("out_filesystem"), keywords.get("storage_options")
    )
    return read_plan(out_fs, out_root, found.snapshot_id)


def plan_or_committed(
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
) -> SnapshotPlan | SnapshotResult:
    """:func:`plan_for`, except that a snapshot committed already gives its committed result
    (its manifest, read once), not its stored plan: what a run that commits at once needs.

    :param snapshot: the resolved table snapshot (:func:`resolve_for_plan`).
    :param out_uri: the output folder.
    :param fs: the table's filesystem.
    :param partitions: only these partitions (None: all).
    :param buckets: only these bucket ids (None: all).
    :param slice_keys: only these slices (None: all).
    :param row_filter_key: the stable text naming the workers' row filter, if any.
    :param out_filesystem: the output's filesystem (None: from ``out_uri``).
    :param storage_options: fsspec options for URLs without a filesystem given.
    :param options: the output's settings (schema, sizes, reuse).
    :param ignore_unrecognised: leave out files no slice can hold (warned), not refuse.
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
    committed = read_manifest(out_fs, out_root, snapshot_id)
    if committed is not None:
        return committed
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
    return ((warning,) if warning else ()) + read_view_warnings(snapshot)


def resolve_for_plan(
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
    """The read view, of only the given partitions' folders when ``partitions`` names some and
    the table is read storage-only (:mod:`..acid.partition_listing`; with ``strict`` a spec matching
    no partition is an error naming it, else the table is listed whole); and then the
    partition columns' types as every partition folder found gives them (what a whole
    listing infers), else ``{}``.

    :param table_uri: the table's location, or its source.
    :param write_ids: the reader's write-id list (None: the source's, or all committed).
    :param txns: the reader's transaction list.
    :param insert_only: the table is insert-only.
    :param filesystem: the filesystem to read it with (None: from the location).
    :param storage_options: fsspec options for it.
    :param partitions: partition specs to list only (None: the whole table).
    :param strict: a spec matching no partition is an error.
    """
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
        check_read_view(scoped.snapshot)
        return scoped.snapshot, fs, types
    snapshot = resolve_read_view(table_uri, write_ids, txns, insert_only=insert_only, filesystem=fs)
    check_read_view(snapshot)
    return snapshot, fs, {}


def with_partition_types(options: CompactionOptions, types: Mapping[str, str]) -> CompactionOptions:
    """``options`` with the partition types of the whole table (declared ones first).

    :param options: the compaction options.
    :param types: partition column -> Hive type, as the listing found them.
    """
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
    snapshot, fs, types = resolve_for_plan(
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
        options=with_partition_types(options, types),
        ignore_unrecognised=ignore_unrecognised,
    )
