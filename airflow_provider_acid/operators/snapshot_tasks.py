"""The snapshot chain as one call: manifest -> plan -> compact (mapped) -> commit -> metrics.

Both example DAGs, and most DAGs that materialise a table, wire the same five tasks the same
way. :func:`acid_snapshot_tasks` adds them to the DAG (or TaskGroup) being defined and returns
them, so a DAG only adds what is its own: a sensor or a validation task before, outlets on the
commit, anything after. Inside ``with TaskGroup("sales"):`` the task ids get the group's prefix,
which lets one DAG materialise several tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow.sdk import Asset

from airflow_provider_acid.operators.acid import (
    AcidCommitSnapshotOperator,
    AcidCompactOperator,
    AcidPlanSnapshotOperator,
    AcidPublishPruningMetricsOperator,
    AcidSliceManifestOperator,
)
from airflow_provider_acid.output.sinks import table_asset_uri

# Every slice may be reused from the previous snapshot, leaving no mapped compact task; the
# commit and the metrics still run then (and not when something failed).
AFTER_MAPPED_COMPACTION = "none_failed_min_one_success"


@dataclass(frozen=True)
class AcidSnapshotTasks:
    """The tasks :func:`acid_snapshot_tasks` added, first to last."""

    manifest: AcidSliceManifestOperator
    plan: AcidPlanSnapshotOperator
    compact: Any  # the mapped AcidCompactOperator (an Airflow MappedOperator)
    commit: AcidCommitSnapshotOperator
    publish_metrics: AcidPublishPruningMetricsOperator

    @property
    def first(self) -> AcidSliceManifestOperator:
        """Where upstream tasks attach: ``wait >> tasks.first``."""
        return self.manifest

    @property
    def last(self) -> AcidPublishPruningMetricsOperator:
        """Where downstream tasks attach: ``tasks.last >> notify``."""
        return self.publish_metrics


def acid_snapshot_tasks(
    *,
    table_uri: str | None = None,
    output_uri: str,
    table: str | None = None,
    metastore_conn_id: str | None = None,
    where: Any = None,
    valid_write_ids: str | None = None,
    acid_conn_id: str | None = None,
    outlets: Sequence[Any] = (),
    keep_snapshots: int | str | None = None,
    manifest_kwargs: dict[str, Any] | None = None,
    compact_kwargs: dict[str, Any] | None = None,
    ignore_unrecognised: bool = False,
    output_format: str = "parquet",
    sink_options: dict[str, Any] | None = None,
) -> AcidSnapshotTasks:
    """Add the snapshot chain to the DAG or TaskGroup being defined and return its tasks.

    The table is ``table_uri`` (its location; storage-only without ``valid_write_ids``) or
    ``table`` (``DB.TABLE``, by name through the ``hive_metastore`` connection
    ``metastore_conn_id``): exactly one. By name the manifest task pins the metastore's read
    view and the plan, every mapped compaction and the commit read with it.

    :param table_uri: the table's location (path, fsspec URL, or relative to the connection).
    :param output_uri: the output root: snapshots, the index and the manifests.
    :param table: or the table by name, ``DB.TABLE``.
    :param metastore_conn_id: the ``hive_metastore`` connection (default
        ``metastore_default``); only with ``table``.
    :param where: SQL ``WHERE`` fragment or DNF filter list; empty keeps every row.
    :param valid_write_ids: Hive write-id list to read with (by name: the metastore's).
    :param acid_conn_id: the ``acid`` connection with the storage credentials and URI prefix.
    :param outlets: go on the commit task, which adds the asset event with the snapshot id,
        rows and files.
    :param keep_snapshots: on the commit task: expire all but the newest N snapshots after
        the commit (None keeps all).
    :param manifest_kwargs: more arguments for :class:`AcidSliceManifestOperator` (e.g.
        ``granularity``, ``index_uri``, ``valid_txns``).
    :param compact_kwargs: more arguments for the mapped :class:`AcidCompactOperator` (e.g.
        ``retries``, ``pool``).
    :param ignore_unrecognised: let the manifest and the plan leave out files that cannot be
        placed in any slice (by default they fail the manifest task, named).
    :param output_format: ``parquet``, ``iceberg`` or ``delta``, for the commit task, which
        then also publishes the snapshot as a table over the same files (see
        ``output.sinks``). With a table format and no ``outlets``, the commit's outlet is the
        table's asset (``iceberg://...`` or the Delta table's URI), when ``output_uri`` is not
        a template; its events carry the table's snapshot id or version in their extra.
    :param sink_options: the table format's options, for the commit task.

    Templated fields: ``table_uri``, ``table``, ``metastore_conn_id``, ``output_uri``,
    ``where``, ``valid_write_ids`` and ``acid_conn_id`` are templated, as on the operators.
    """
    manifest = AcidSliceManifestOperator(
        task_id="manifest",
        table_uri=table_uri,
        table=table,
        metastore_conn_id=metastore_conn_id,
        output_uri=output_uri,
        where=where,
        valid_write_ids=valid_write_ids,
        acid_conn_id=acid_conn_id,
        ignore_unrecognised=ignore_unrecognised,
        **(manifest_kwargs or {}),
    )
    plan = AcidPlanSnapshotOperator(
        task_id="plan",
        manifest=manifest.output,
        output_uri=output_uri,
        acid_conn_id=acid_conn_id,
        ignore_unrecognised=ignore_unrecognised,
    )
    compact = AcidCompactOperator.partial(
        task_id="compact",
        output_uri=output_uri,
        snapshot_id=plan.output["snapshot_id"],
        acid_conn_id=acid_conn_id,
        **(compact_kwargs or {}),
    ).expand(slice_key=plan.output)
    commit = AcidCommitSnapshotOperator(
        task_id="commit",
        output_uri=output_uri,
        snapshot_id=plan.output["snapshot_id"],
        bucket_results=compact.output,
        acid_conn_id=acid_conn_id,
        outlets=list(outlets)
        or _table_outlets(output_format, output_uri, sink_options, table, table_uri),
        keep_snapshots=keep_snapshots,
        output_format=output_format,
        sink_options=sink_options,
        trigger_rule=AFTER_MAPPED_COMPACTION,
    )
    publish_metrics = AcidPublishPruningMetricsOperator(
        task_id="publish_metrics",
        manifest=manifest.output,
        snapshot=commit.output,
        acid_conn_id=acid_conn_id,
        trigger_rule=AFTER_MAPPED_COMPACTION,
    )
    return AcidSnapshotTasks(manifest, plan, compact, commit, publish_metrics)


def _table_outlets(
    output_format: str,
    output_uri: str,
    sink_options: dict[str, Any] | None,
    table: str | None,
    table_uri: str | None,
) -> list[Any]:
    """The table-format table as the commit's asset (none for parquet or templated names)."""
    if any("{{" in str(v) for v in (output_format, output_uri, table, table_uri, sink_options)):
        return []
    uri = table_asset_uri(
        output_format, output_uri, options=sink_options, table=table, table_uri=table_uri
    )
    return [Asset(uri)] if uri else []
