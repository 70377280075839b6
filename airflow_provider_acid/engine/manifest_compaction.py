"""Snapshots of what a slice manifest kept: its slices only, rows filtered by its predicate.

The fan-out steps the Airflow layer maps over workers: :func:`plan_from_manifest` (once),
:func:`compact_planned_slice` (once per slice, anywhere: it needs only the output location,
the snapshot id and the slice key) and ``output.commit_snapshot`` (once, at the end).
:func:`compact_manifest` does all three in one process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
from fsspec import AbstractFileSystem

from ..acid.listing import resolve_filesystem
from ..acid.read_view import TableReadView
from ..acid.resolution import resolve_read_view
from ..output import BucketResult, SnapshotPlan, SnapshotResult, read_plan
from ..output.parquet_files import output_schema
from ..pruning.binding import bind
from ..pruning.expressions import AlwaysTrue
from ..pruning.manifest import parse_predicate
from ..pruning.manifest_files import SliceManifest, read_manifest
from ..pruning.row_evaluation import evaluate_rows
from .compaction import REPLAN, SourceChangedError, compact_slice, compact_table
from .options import CompactionOptions
from .plan import plan_for, relative_path

RowFilter = Callable[[pa.Table], pa.Array]


def predicate_row_filter(predicate: str | None, schema: pa.Schema) -> RowFilter | None:
    """A row filter for compaction from a normalised predicate (None: keep every row)."""
    expr = bind(parse_predicate(predicate), schema)
    if isinstance(expr, AlwaysTrue):
        return None
    return lambda table: evaluate_rows(expr, table)


class _BindOnFirstBatch:
    """A row filter that binds its predicate to the schema of the batches it is given, so a
    caller needs no schema (and no plan) up front; compaction batches share one schema."""

    def __init__(self, predicate: str) -> None:
        self.expr = parse_predicate(predicate)
        self._bound: tuple[pa.Schema, Any] | None = None

    def __call__(self, table: pa.Table) -> pa.Array:
        if self._bound is None or not self._bound[0].equals(table.schema):
            self._bound = (table.schema, bind(self.expr, table.schema))
        return evaluate_rows(self._bound[1], table)


def _filter_key(manifest: SliceManifest) -> str | None:
    return (
        None
        if isinstance(parse_predicate(manifest.predicate), AlwaysTrue)
        else (manifest.predicate)
    )


def _load(manifest: SliceManifest | str, storage_options: dict[str, Any] | None) -> SliceManifest:
    return read_manifest(manifest, storage_options) if isinstance(manifest, str) else manifest


def _resolve_manifest(
    manifest: SliceManifest, storage_options: dict[str, Any] | None
) -> tuple[TableReadView, AbstractFileSystem]:
    """The manifest's pinned source, resolved again, with every file the manifest kept still
    there: a file that vanished since (Hive's Cleaner, after a compaction the pinned view does
    not see) would otherwise be missing from the plan, and its rows from the snapshot."""
    fs, _ = resolve_filesystem(manifest.table, storage_options=storage_options)
    snapshot = resolve_read_view(manifest.source, filesystem=fs)
    now = {s.key: {relative_path(snapshot.root, f.path) for f in s.files} for s in snapshot.slices}
    vanished = [
        f.path for s in manifest.slices for f in s.files if f.path not in now.get(s.key, ())
    ]
    if vanished:
        shown = ", ".join(vanished[:5]) + (
            f" and {len(vanished) - 5} more" if len(vanished) > 5 else ""
        )
        raise SourceChangedError(
            f"source files the slice manifest of {manifest.table} kept vanished since it was "
            f"computed: {shown}{REPLAN}"
        )
    return snapshot, fs


def plan_from_manifest(
    manifest: SliceManifest | str,
    out_uri: str,
    *,
    storage_options: dict[str, Any] | None = None,
    options: CompactionOptions | None = None,
) -> SnapshotPlan:
    """Plan the snapshot of a manifest's kept slices (stored under ``out_uri``), reading the
    table with the manifest's pinned view; :class:`SourceChangedError` if a file it kept
    vanished since."""
    manifest = _load(manifest, storage_options)
    snapshot, fs = _resolve_manifest(manifest, storage_options)
    return plan_for(
        snapshot,
        out_uri,
        fs=fs,
        slice_keys=manifest.slice_keys,
        row_filter_key=_filter_key(manifest),
        storage_options=storage_options,
        options=options or CompactionOptions(),
    )


def plan_row_filter(plan: SnapshotPlan) -> RowFilter | None:
    """The row filter a planned snapshot's workers apply (its predicate, bound to its schema)."""
    return predicate_row_filter(plan.settings.get("row_filter"), output_schema(plan.settings))


def compact_planned_slice(
    out_uri: str,
    snapshot_id: str,
    slice_key: str,
    *,
    storage_options: dict[str, Any] | None = None,
) -> BucketResult:
    """Compact one slice of a planned snapshot: the unit of work of a mapped Airflow task."""
    fs, root = resolve_filesystem(out_uri, storage_options=storage_options)
    plan = read_plan(fs, root, snapshot_id)
    return compact_slice(
        plan.table,
        slice_key,
        out_uri,
        snapshot_id,
        row_filter=plan_row_filter(plan),
        plan=plan,
        storage_options=storage_options,
    )


def compact_manifest(
    manifest: SliceManifest | str,
    out_uri: str,
    *,
    storage_options: dict[str, Any] | None = None,
    options: CompactionOptions | None = None,
    partition_types: Mapping[str, str] | None = None,
) -> SnapshotResult:
    """Plan, compact and commit a manifest's kept slices in one process."""
    manifest = _load(manifest, storage_options)
    options = options or CompactionOptions(partition_types=partition_types)
    key = _filter_key(manifest)
    _resolve_manifest(manifest, storage_options)  # nothing it kept has vanished
    return compact_table(
        manifest.source,
        out_uri,
        write_ids=manifest.write_ids,
        txns=manifest.txns,
        slice_keys=manifest.slice_keys,
        row_filter=_BindOnFirstBatch(manifest.predicate) if key else None,
        row_filter_key=key,
        storage_options=storage_options,
        options=options,
    )
