"""Pruned slice manifests: which bucket slices of a snapshot can hold rows matching a predicate.

The steps, as in Hudi's data skipping, with Iceberg's inclusive rules:

1. Resolve the snapshot (the table model) and prune partitions on their values.
2. Read the column-stats index for only the queried columns and only the snapshot's data
   files (one row per file) and evaluate the predicate on it, vectorised; every null or
   unknown statistic means "might match".
3. Data files the index does not cover stay candidates.
4. A slice (partition, bucket: originals, base, deltas, delete deltas) is kept when any of its
   data files is a candidate, found vectorised (the distinct slices of the candidate files).
   A kept slice is kept whole; with ``granularity="file"`` its non-candidate base and delta
   files are dropped too (in Hive 3 an update rewrites the whole row into a delta, so no row
   is split across files), while its original files stay all or nothing (their synthetic row
   ids count the rows of the earlier ones) and its delete deltas always travel with it.

Bucket pruning (:mod:`.bucket_pruning`) composes with steps 2 to 4: in a bucketed table, a
slice whose bucket Hive's bucketing hash rules out for the predicate is dropped before the index
is read (its files are not looked up), so a slice is kept only if both keep it; the dropped ones
count as ``slices_pruned_by_bucket``.

The manifest lists the kept slices with their files, the write-id list, the normalised predicate
and the metrics; it is written as JSON, JSON lines (``.jsonl``) or Parquet (``.parquet``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice, repeat
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from fsspec import AbstractFileSystem

from ..acid.layout_checks import check_read_view, read_view_warnings
from ..acid.listing import location_uri, resolve_filesystem
from ..acid.locations import check_outside_table
from ..acid.read_view import BucketSlice, DataFile, FileRole, PartitionReadView, TableReadView
from ..acid.resolution import check_placed
from ..acid.source import TableSource, storage_only_warning
from .bucket_pruning import bucket_spec, possible_buckets
from .dnf_filters import parse_dnf_filters
from .evaluator import might_match
from .explain import explain_slices
from .expressions import AlwaysTrue, Expr, referenced_columns, to_sql
from .index import FileKey, refresh
from .index import read as read_index
from .manifest_files import GRANULARITIES, KeptSlice, ManifestFile, PruningMetrics, SliceManifest
from .partition_stats import partition_arrays, partitions_might_match, with_partition_columns
from .sql_where import parse_sql_where

# -- predicates ------------------------------------------------------------------------------


def parse_predicate(where: str | Sequence[Any] | Expr | None) -> Expr:
    """A SQL ``WHERE`` fragment, a pyarrow-style DNF filter list, an expression, or None."""
    if where is None or (isinstance(where, str) and not where.strip()):
        return AlwaysTrue()
    if isinstance(where, str):
        return parse_sql_where(where)
    if isinstance(where, (list, tuple)):
        return parse_dnf_filters(where)
    return where


# -- the steps -------------------------------------------------------------------------------


def file_key(data_file: DataFile) -> FileKey:
    """The index key of a snapshot file (path, size, and its version on storage)."""
    return FileKey(data_file.path, data_file.file.size, data_file.file.version or "")


_ROLE_NAMES = {role: role.value for role in FileRole}


@dataclass(frozen=True)
class _SnapshotColumns:
    """The snapshot in columns. Per collected slice (a slice of a kept partition whose bucket
    can hold a match): its partition's position, its own position in that partition and its
    number of data files; per data file of those slices, in order: path, size and version
    ("" for none). Totals over every slice, for the metrics."""

    slice_partition: pa.Array
    slice_position: pa.Array
    counts: pa.Array
    paths: pa.Array
    sizes: pa.Array
    versions: pa.Array
    slices_total: int
    files_total: int
    other_bytes: int  # every file's bytes but the collected slices' data files'
    slices_pruned_by_bucket: int = 0

    @classmethod
    def collect(
        cls,
        parts: Sequence[PartitionReadView],
        kept: Sequence[bool],
        buckets: frozenset[int] | None = None,
    ) -> _SnapshotColumns:
        """One loop over the slices, touching each file once: a million files are a million
        objects scattered in memory, and every further pass over them costs about as much
        again. The Python lists become Arrow arrays before anything else allocates, so no
        garbage collection pass visits their million items.

        ``buckets``: the bucket ids that can hold a match (None: all); a kept partition's
        slices of other buckets are left out, their files counted with the others'."""
        slice_parts: list[int] = []
        slice_positions: list[int] = []
        counts: list[int] = []
        paths: list[str] = []
        sizes: list[int] = []
        versions: list[str | None] = []
        add_count, add_path = counts.append, paths.append
        add_size, add_version = sizes.append, versions.append
        other_files = other_bytes = slices_total = pruned_by_bucket = 0
        for i, (part, keep) in enumerate(zip(parts, kept, strict=True)):
            slices_total += len(part.slices)
            for j, s in enumerate(part.slices):
                if keep and (buckets is None or s.bucket_id in buckets):
                    slice_parts.append(i)
                    slice_positions.append(j)
                    n = 0
                    for group in (s.original_files, s.base_files, s.delta_files):
                        n += len(group)
                        for f in group:
                            stored = f.file
                            add_path(stored.path)
                            add_size(stored.size)
                            add_version(stored.version)
                    add_count(n)
                else:
                    if keep:
                        pruned_by_bucket += 1
                    for group in (s.original_files, s.base_files, s.delta_files):
                        other_files += len(group)
                        for f in group:
                            other_bytes += f.file.size
                for f in s.delete_delta_files:
                    other_bytes += f.file.size
        return cls(
            slice_partition=pa.array(slice_parts, pa.int64()),
            slice_position=pa.array(slice_positions, pa.int64()),
            counts=pa.array(counts, pa.int64()),
            paths=pa.array(paths, pa.string()),
            sizes=pa.array(sizes, pa.int64()),
            versions=pc.fill_null(pa.array(versions, pa.string()), ""),
            slices_total=slices_total,
            files_total=len(paths) + other_files,
            other_bytes=other_bytes,
            slices_pruned_by_bucket=pruned_by_bucket,
        )


def _owners(counts: pa.Array) -> pa.Array:
    """For ``counts[i]`` items owned by owner i, in owner order: each item's owner (int64)."""
    offsets = pc.cumulative_sum(pa.concat_arrays([pa.array([0], pa.int64()), counts]))
    lists = pa.LargeListArray.from_arrays(offsets, pa.nulls(offsets[-1].as_py()))
    return pc.list_parent_indices(lists)


def _kept_slice(
    part: PartitionReadView,
    s: BucketSlice,
    flags: list[bool],
    granularity: str,
    prefix: str,
) -> KeptSlice:
    """A kept slice's manifest entry; ``flags`` tells which of its data files are candidates."""
    data = s.original_files + s.base_files + s.delta_files
    chosen: Iterable[tuple[DataFile, bool]] = zip(data, flags, strict=True)
    if granularity == "file":
        # originals all or nothing (their row ids count the earlier ones); the rest by file
        n_orig = len(s.original_files)
        originals = any(flags[:n_orig])
        chosen = [(f, c) for i, (f, c) in enumerate(chosen) if c or (i < n_orig and originals)]
    cut = len(prefix)
    entries = []
    for f, candidate in chain(chosen, zip(s.delete_delta_files, repeat(True))):
        path = f.file.path
        entries.append(
            ManifestFile(
                path[cut:] if path.startswith(prefix) else path,
                f.file.size,
                _ROLE_NAMES[f.role],
                candidate,
            )
        )
    return KeptSlice(
        s.key, part.partition.path, part.partition.as_dict(), s.bucket_id, tuple(entries)
    )


def _possible_buckets(
    snapshot: TableReadView,
    expr: Expr,
    schema: pa.Schema,
    bucketing: Mapping[str, Any] | None,
) -> frozenset[int] | None:
    """The buckets that can hold a match, or None (all: not bucketed, or not judged)."""
    spec = bucket_spec(snapshot.definition, bucketing, schema)
    if spec is None:
        return None
    # A file of a bucket beyond the declared count was not written with this bucketing (the
    # count was altered since): its rows may be anywhere, so prune nothing.
    if any(s.bucket_id >= spec.num_buckets for p in snapshot.partitions for s in p.slices):
        return None
    return possible_buckets(expr, spec)


def build_manifest(
    snapshot: TableReadView,
    expr: Expr,
    schema: pa.Schema,
    index_uri: str | None = None,
    *,
    granularity: str = "slice",
    index_storage_options: dict[str, Any] | None = None,
    bucketing: Mapping[str, Any] | None = None,
    index_columns: Sequence[str] | None = None,
    explain: bool = False,
    partitions_total: int | None = None,
) -> SliceManifest:
    """Steps 1 to 4 for a resolved snapshot and a predicate already bound to ``schema``.

    ``index_columns``: the table columns the index was refreshed with (see
    :func:`refresh_index`), None for an index keyed without them. ``partitions_total``: the
    partitions of the table when ``snapshot`` holds only some (a partition-scoped listing).

    In a bucketed table (the metastore's definition, else ``bucketing={"columns": [...],
    "buckets": n, "version": 1 | 2}``) only the slices of buckets Hive's bucketing hash allows
    for the predicate are considered (:func:`.bucket_pruning.possible_buckets`).

    With ``explain`` the manifest holds every slice's verdict (:mod:`.explain`): kept, or the
    step and the predicate term that pruned it, for the pruning report.
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    started = time.perf_counter()
    keys = list(snapshot.partition_keys())
    columns = [c for c in referenced_columns(expr) if c.lower() not in {k.lower() for k in keys}]

    # 1. partitions, on their values alone (data columns unknown)
    parts = snapshot.partitions
    part_values = partition_arrays(parts, schema, keys)
    part_kept = partitions_might_match(expr, schema, [p.partition.as_dict() for p in parts])

    # 1b. buckets, by Hive's bucketing hash of the values the predicate pins
    buckets = _possible_buckets(snapshot, expr, schema, bucketing)

    # One pass over the slices: the kept partitions' data files in columns, and the totals.
    snap = _SnapshotColumns.collect(parts, part_kept, buckets)
    n_files = len(snap.paths)
    paths, sizes = snap.paths, snap.sizes
    file_slice = _owners(snap.counts)  # per data file, its slice (an index into snap's)

    # 2. the index, for the queried columns and the kept partitions' data files only
    index_started = time.perf_counter()
    if index_uri and n_files and columns:
        versions = snap.versions
        if index_columns is not None:
            versions = pc.binary_join_element_wise(
                versions, pa.scalar(index_columns_tag(index_columns)), "#"
            )
        keys_table = pa.table({"path": paths, "size": sizes, "version": versions})
        stats = read_index(index_uri, columns, keys_table, storage_options=index_storage_options)
    else:
        stats = pa.table({"path": paths, "row_count": pa.nulls(n_files, pa.int64())})
    index_seconds = time.perf_counter() - index_started
    evaluate_started = time.perf_counter()
    row_counts = stats.column("row_count").combine_chunks()
    file_partition = pc.take(snap.slice_partition, file_slice)
    file_values = {k: pc.take(v, file_partition) for k, v in part_values.items()}
    stats = with_partition_columns(stats, file_values, row_counts)
    mask = might_match(expr, stats, schema) if n_files else pa.array([], pa.bool_())
    mask = pc.fill_null(mask, True)  # might_match gives no nulls; unknown would mean kept
    evaluate_seconds = time.perf_counter() - evaluate_started

    # 3. files the index does not cover are candidates (their stats are all null)
    if not columns:
        not_indexed = 0  # nothing to look up: the index plays no part
    elif index_uri:
        not_indexed = stats.column("row_count").null_count
    else:
        not_indexed = n_files

    # 4. slices: kept when any data file is a candidate, found vectorised (the slices of the
    # candidate files); then each kept slice with its files and their candidate flags
    kept_slices = pc.unique(pc.filter(file_slice, mask))  # ascending, as file_slice is
    flags = iter(pc.filter(mask, pc.is_in(file_slice, value_set=kept_slices)).to_pylist())
    prefix = snapshot.root.rstrip("/") + "/"
    kept = [
        _kept_slice(parts[p], parts[p].slices[j], list(islice(flags, n)), granularity, prefix)
        for p, j, n in zip(
            pc.take(snap.slice_partition, kept_slices).to_pylist(),
            pc.take(snap.slice_position, kept_slices).to_pylist(),
            pc.take(snap.counts, kept_slices).to_pylist(),
            strict=True,
        )
    ]
    verdicts = None
    if explain:
        verdicts = explain_slices(
            expr,
            parts,
            part_kept,
            buckets,
            file_slice,
            len(snap.counts),
            kept_slices,
            row_counts,
            lambda term: pc.fill_null(might_match(term, stats, schema), True),
            lambda term: partitions_might_match(
                term, schema, [p.partition.as_dict() for p in parts]
            ),
        )
    total = snapshot.definition.partitions_total if snapshot.definition else partitions_total
    metrics = PruningMetrics(
        # by name, partitions the metastore ruled out before listing count too
        partitions_total=total if total is not None else len(parts),
        partitions_kept=len({k.partition for k in kept}),
        slices_total=snap.slices_total,
        slices_kept=len(kept),
        slices_pruned_by_bucket=snap.slices_pruned_by_bucket,
        files_total=snap.files_total,
        files_candidate=pc.sum(mask.cast(pa.int64())).as_py() or 0,
        files_not_indexed=not_indexed,
        bytes_total=(pc.sum(sizes).as_py() or 0) + snap.other_bytes,
        bytes_kept=sum(f.size for k in kept for f in k.files),
        index_read_seconds=index_seconds,
        evaluate_seconds=evaluate_seconds,
        manifest_seconds=time.perf_counter() - started,
    )
    return SliceManifest(
        table=snapshot.root,
        write_ids=None if snapshot.write_ids.is_all_committed else str(snapshot.write_ids),
        txns=str(snapshot.txns) if snapshot.txns else None,
        predicate=to_sql(expr),
        granularity=granularity,
        index_uri=index_uri,
        slices=tuple(kept),
        metrics=metrics,
        definition=snapshot.definition,
        warnings=(
            (warning,)
            if (warning := storage_only_warning(snapshot.write_ids, snapshot.definition))
            else ()
        )
        + read_view_warnings(snapshot),
        verdicts=verdicts,
    )


def default_index_uri(out_uri: str) -> str:
    """The index's default home: under the output root, never inside the Hive table."""
    return out_uri.rstrip("/") + "/_index"


def index_columns_tag(columns: Sequence[str]) -> str:
    """A short tag of the table's column names in order, added to each file's index key.

    Hive reads ORC files by column position: a file's statistics are recorded under the
    table's column names by position, which a rename or an added column changes. Keyed with
    this tag, statistics recorded under other names are never looked up again (the file is
    read anew): after ``b`` is renamed ``c`` and a new ``b`` added, an old file's statistics of
    its second column cannot pass for the new ``b``'s."""
    return hashlib.sha256("\x00".join(c.lower() for c in columns).encode()).hexdigest()[:12]


def _tagged(version: str, tag: str | None) -> str:
    return f"{version}#{tag}" if tag else version


def refresh_index(
    snapshot: TableReadView,
    fs: AbstractFileSystem,
    index_uri: str,
    *,
    index_storage_options: dict[str, Any] | None = None,
    table_columns: Sequence[str] | None = None,
    scope: Any = None,
):
    """Bring the index in line with the snapshot's data files (delete deltas carry no data).

    With ``table_columns`` (the table's column names in order), ORC statistics are recorded
    under those names by position, as Hive reads ORC, and keyed with
    :func:`index_columns_tag`; :func:`build_manifest` must then be given the same columns.
    ``scope`` (``path -> bool``): the part of the table ``snapshot`` was listed from, when it
    holds only some partitions; indexed files outside it stay indexed."""
    check_outside_table(index_uri, location_uri(fs, snapshot.root), "index location")
    tag = index_columns_tag(table_columns) if table_columns is not None else None
    keys = [
        FileKey(k.path, k.size, _tagged(k.version, tag))
        for k in (file_key(f) for s in snapshot.slices for f in s.data_files)
    ]
    return refresh(
        index_uri,
        keys,
        fs,
        storage_options=index_storage_options,
        column_names=list(table_columns) if table_columns is not None else None,
        scope=scope,
    )


def compute_manifest(
    table_uri: str | TableSource,
    where: str | Sequence[Any] | Expr | None = None,
    *,
    index_uri: str | None = None,
    write_ids: Any = None,
    txns: Any = None,
    refresh: bool = False,
    granularity: str = "slice",
    schema: Any = None,
    partition_types: Mapping[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    index_storage_options: dict[str, Any] | None = None,
    bucketing: Mapping[str, Any] | None = None,
    ignore_unrecognised: bool = False,
    explain: bool = False,
) -> SliceManifest:
    """Resolve, (optionally) refresh the index, and build the manifest: the one library call
    behind ``airflow-acid manifest`` and ``AcidSliceManifestOperator``.

    Files that cannot be placed in any slice refuse the manifest, naming them, unless
    ``ignore_unrecognised``; its warnings then name each file left out (``check_placed``).

    ``bucketing`` (``{"columns": [...], "buckets": n, "version": 1 | 2}``) declares the
    bucketing of a table read storage-only; read by name, the metastore's is used.
    ``explain``: record every slice's verdict (see :func:`build_manifest`)."""
    location = table_uri.location if isinstance(table_uri, TableSource) else table_uri
    fs, _ = resolve_filesystem(location, storage_options=storage_options)
    expr = parse_predicate(where)
    # Storage-only, only the partitions the predicate's partition conjuncts keep are listed;
    # but a refresh brings the index in line with the whole table, so it lists it whole.
    from .partition_pruning import resolve_for_predicate

    resolved = resolve_for_predicate(
        table_uri,
        expr,
        fs,
        write_ids,
        txns,
        schema=schema,
        partition_types=partition_types,
        scoped=not (refresh and index_uri),
    )
    snapshot, bound_schema, bound = resolved.snapshot, resolved.schema, resolved.bound
    check_read_view(snapshot)
    ignored = check_placed(snapshot, ignore_unrecognised=ignore_unrecognised)
    # the index's names, by position: the table's columns, which the bound schema starts with
    names = bound_schema.names[: len(bound_schema.names) - len(snapshot.partition_keys())]
    if refresh and index_uri:
        refresh_index(
            snapshot,
            fs,
            index_uri,
            index_storage_options=index_storage_options,
            table_columns=names,
        )
    manifest = build_manifest(
        snapshot,
        bound,
        bound_schema,
        index_uri,
        granularity=granularity,
        index_storage_options=index_storage_options,
        bucketing=bucketing,
        index_columns=names,
        explain=explain,
        partitions_total=resolved.partitions_total,
    )
    # Whoever compacts the manifest opens the table again: keep its protocol (s3://...).
    return dataclasses.replace(
        manifest, table=location_uri(fs, snapshot.root), warnings=manifest.warnings + ignored
    )
