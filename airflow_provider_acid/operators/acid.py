"""Operators of snapshots: planning, per-slice compaction, commit (and, re-exported, the manifest).

Each operator parses its arguments, calls one library function and publishes what it
returns (XCom, Airflow metrics, asset events). Storage credentials come from an ``acid``
connection through :class:`~airflow_provider_acid.hooks.acid.AcidHook` and never reach XCom.

A table is given by location (``table_uri``) or by name (``table="db.tbl"`` with a
``hive_metastore`` connection, ``metastore_conn_id``). By name, the metastore is the source of
truth: the manifest reads its transaction and write-id lists once (the *pinned view*) and
every later step (plan, each mapped compaction, commit) reads with that view, so a write
committed during the fan-out reaches no bucket. By location without a write-id list the
table is read *storage-only*: every write on storage, aborted and open ones included, counts
as committed; the operators log that as a warning and return it in ``warnings``.

A scheduled snapshot maps compaction over the manifest's slices::

    manifest = AcidSliceManifestOperator(task_id="manifest", table="sales.orders",
                                         metastore_conn_id="metastore_default",
                                         output_uri=..., where="amount > 100")
    plan = AcidPlanSnapshotOperator(task_id="plan", manifest=manifest.output,
                                    output_uri=...)
    parts = AcidCompactOperator.partial(task_id="compact", output_uri=...,
                                        snapshot_id=plan.output["snapshot_id"]
                                        ).expand(slice_key=plan.output)
    commit = AcidCommitSnapshotOperator(task_id="commit", output_uri=...,
                                        snapshot_id=plan.output["snapshot_id"],
                                        bucket_results=parts.output, outlets=[asset])
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from ..engine.compaction import compact_table
from ..engine.manifest_compaction import compact_manifest, compact_planned_slice, plan_from_manifest
from ..engine.memory_pool import use_worker_memory_pool
from ..engine.options import CompactionOptions
from ..hooks.acid import AcidHook
from ..hooks.metastore import AcidMetastoreHook
from ..output import BucketResult, commit_snapshot
from ..output.sinks import (
    DEFAULT_OUTPUT_FORMAT,
    check_sink,
)
from ..pruning.metrics import (
    snapshot_summary,
)
from . import lineage
from .lineage import OpenLineageMixin
from .pruning import AcidPublishPruningMetricsOperator, AcidSliceManifestOperator
from .publishing import (
    add_failure_to_report,
    add_to_report,
    keep_count,
    output_format_argument,
    publish_and_expire,
)
from .task_arguments import (
    compaction_options,
    lineage_of_arguments,
    lineage_of_slice,
    log_warnings,
    mapped_results,
    none_if_blank,
    open_task_source,
    replan_needed,
    table_arguments,
)

__all__ = [
    "AcidCommitSnapshotOperator",
    "AcidCompactOperator",
    "AcidPlanSnapshotOperator",
    "AcidPublishPruningMetricsOperator",
    "AcidSliceManifestOperator",
]

#: a mapped compaction task's name in the UI: its slice key (``dt=2024-01-01#3``)
SLICE_MAP_INDEX_TEMPLATE = "{{ task.slice_key }}"


class AcidPlanSnapshotOperator(OpenLineageMixin, BaseOperator):
    """Plans the snapshot of a manifest's kept slices: fixes its id and output schema.

    Returns the list of slice keys to compute, to map :class:`AcidCompactOperator` over
    (``.expand(slice_key=plan.output)``; Airflow maps only over return values). Slices
    unchanged since the last committed snapshot are reused, not recomputed. The snapshot id
    is pushed as XCom ``snapshot_id`` (``plan.output["snapshot_id"]``), and the reused slice
    keys as ``reused_slice_keys``, and the plan's ``warnings`` (e.g. storage-only) too.

    The metastore is not asked again: the manifest holds the pinned view (write-id and
    transaction lists, and by name the table's definition) the whole snapshot is read with.

    :param manifest: the manifest operator's summary (its ``.output``) or a manifest URI.
    :param output_uri: the output root the snapshot is planned in (as on the manifest task).
    :param partition_types: ``{partition column: Hive type}``, as on the manifest operator.
    :param target_file_size: bytes after which a slice's output starts a new Parquet file.
    :param include_identity: also write each row's identity as ``_acid_*`` columns.
    :param acid_conn_id: the ``acid`` connection with the storage credentials and URI prefix.
    :param ignore_unrecognised: as on the manifest operator (give both the same value): plan
        although files of the table cannot be placed in any slice.

    Templated fields: ``manifest``, ``output_uri``, ``acid_conn_id``.
    """

    template_fields: Sequence[str] = ("manifest", "output_uri", "acid_conn_id")

    def __init__(
        self,
        *,
        manifest: Any,
        output_uri: str,
        partition_types: Mapping[str, str] | None = None,
        target_file_size: int = 256 * 1024**2,
        include_identity: bool = False,
        acid_conn_id: str | None = None,
        ignore_unrecognised: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.ignore_unrecognised = ignore_unrecognised
        self.manifest = manifest
        self.output_uri = output_uri
        self.partition_types = partition_types
        self.target_file_size = target_file_size
        self.include_identity = include_identity
        self.acid_conn_id = acid_conn_id

    def execute(self, context: Any) -> list[str]:
        hook = AcidHook(self.acid_conn_id)
        manifest_uri = (
            self.manifest["manifest_uri"] if isinstance(self.manifest, Mapping) else self.manifest
        )
        with replan_needed():
            plan = plan_from_manifest(
                hook.resolve_uri(manifest_uri),
                hook.resolve_uri(self.output_uri),
                storage_options=hook.storage_options,
                options=compaction_options(
                    self.partition_types,
                    target_file_size=self.target_file_size,
                    include_identity=self.include_identity,
                    ignore_unrecognised=bool(self.ignore_unrecognised),
                ),
            )
        out_uri = hook.resolve_uri(self.output_uri)
        self._keep_lineage(lambda: lineage.plan_lineage(plan, out_uri))
        to_compute = list(plan.keys_to_compute)
        reused = [k for k in plan.slice_keys if k not in set(to_compute)]
        self.log.info(
            "Snapshot %s: %d slice(s) to compute, %d reused",
            plan.snapshot_id,
            len(to_compute),
            len(reused),
        )
        log_warnings(self, plan.warnings)
        context["ti"].xcom_push(key="snapshot_id", value=plan.snapshot_id)
        context["ti"].xcom_push(key="reused_slice_keys", value=reused)
        context["ti"].xcom_push(key="warnings", value=list(plan.warnings))
        return to_compute


class AcidCompactOperator(OpenLineageMixin, BaseOperator):
    """Compacts one slice of a planned snapshot, or a whole snapshot.

    Mapped over a plan's slices (``.partial(output_uri=..., snapshot_id=...)
    .expand(slice_key=...)``), each task writes one bucket's Parquet files and returns the
    bucket's result for :class:`AcidCommitSnapshotOperator`; nothing is visible until then.
    A mapped task reads with the plan's pinned view and lists only its slice's partition; a
    source file that vanished since the plan (Hive's Cleaner removing what a compaction made
    obsolete) fails it at once, without retries (``SourceChangedError``, naming the file): the
    snapshot must be re-planned (a new DAG run, or clearing from the manifest task, reads a
    new view). Other errors (a storage hiccup) fail it with the task's retries as usual.

    Without ``slice_key`` it compacts and commits the whole snapshot of ``table_uri``, of
    ``table`` (by name, through ``metastore_conn_id``), or of ``manifest_uri``'s kept slices
    in one task and returns the snapshot summary, with an asset event on each of its
    ``outlets``; ``keep_snapshots`` then expires older snapshots, as on
    :class:`AcidCommitSnapshotOperator`. By name it holds a read transaction in the metastore
    (kept alive by heartbeats) while it reads, so Hive's Cleaner keeps the files it reads.
    Files of the table that cannot be placed in any slice fail it, named, unless
    ``ignore_unrecognised``: the snapshot's warnings then name each file left out.
    ``output_format`` and ``sink_options`` publish the whole snapshot as on
    :class:`AcidCommitSnapshotOperator`.

    Mapped, each task is named by its slice key in the UI (``map_index_template``).

    :param output_uri: the output root (the plan's, for a mapped slice).
    :param snapshot_id: the plan's snapshot id (``plan.output["snapshot_id"]``); needed with
        ``slice_key``.
    :param slice_key: the slice to compact (``.expand(slice_key=plan.output)``); None
        compacts and commits the whole snapshot in this task.
    :param table_uri: whole snapshot: the table's location (storage-only without
        ``valid_write_ids``).
    :param table: whole snapshot: or the table by name, ``DB.TABLE``, through
        ``metastore_conn_id``.
    :param metastore_conn_id: the ``hive_metastore`` connection (default
        ``metastore_default``); only with ``table``.
    :param manifest_uri: whole snapshot: or a slice manifest, whose kept slices are compacted
        with its predicate and read view.
    :param valid_write_ids: whole snapshot: the Hive write-id list to read with.
    :param partition_types: ``{partition column: Hive type}`` for a table read by location.
    :param acid_conn_id: the ``acid`` connection with the storage credentials and URI prefix.
    :param keep_snapshots: whole snapshot: after the commit keep only the newest N snapshots,
        as on :class:`AcidCommitSnapshotOperator` (not on a mapped slice).
    :param ignore_unrecognised: whole snapshot: leave out (and name) files that cannot be
        placed in any slice instead of failing.
    :param output_format: whole snapshot: ``parquet``, ``iceberg`` or ``delta``, as on
        :class:`AcidCommitSnapshotOperator`.
    :param sink_options: whole snapshot: the table format's options, as on
        :class:`AcidCommitSnapshotOperator`.

    Templated fields: ``output_uri``, ``snapshot_id``, ``slice_key``, ``table_uri``,
    ``table``, ``metastore_conn_id``, ``manifest_uri``, ``valid_write_ids``, ``acid_conn_id``,
    ``keep_snapshots``, ``output_format``, ``sink_options``.
    """

    template_fields: Sequence[str] = (
        "output_uri",
        "snapshot_id",
        "slice_key",
        "table_uri",
        "table",
        "metastore_conn_id",
        "manifest_uri",
        "valid_write_ids",
        "acid_conn_id",
        "keep_snapshots",
        "output_format",
        "sink_options",
    )

    def __init__(
        self,
        *,
        output_uri: str,
        snapshot_id: str | None = None,
        slice_key: str | None = None,
        table_uri: str | None = None,
        table: str | None = None,
        metastore_conn_id: str | None = None,
        manifest_uri: str | None = None,
        valid_write_ids: str | None = None,
        partition_types: Mapping[str, str] | None = None,
        acid_conn_id: str | None = None,
        keep_snapshots: int | str | None = None,
        ignore_unrecognised: bool = False,
        output_format: str = DEFAULT_OUTPUT_FORMAT,
        sink_options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.output_format = output_format_argument(output_format)
        self.sink_options = sink_options
        self.ignore_unrecognised = ignore_unrecognised
        self.output_uri = output_uri
        self.snapshot_id = snapshot_id
        self.slice_key = slice_key
        self.keep_snapshots = keep_snapshots
        self.table_uri = table_uri
        self.table = table
        self.metastore_conn_id = metastore_conn_id
        self.manifest_uri = manifest_uri
        self.valid_write_ids = valid_write_ids
        self.partition_types = partition_types
        self.acid_conn_id = acid_conn_id

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:
        """As ``BaseOperator.partial``; each mapped task is named by its slice key unless a
        ``map_index_template`` is given."""
        from airflow.sdk.bases.operator import partial

        if kwargs.get("map_index_template") is None:
            kwargs["map_index_template"] = SLICE_MAP_INDEX_TEMPLATE
        return partial(cls, **kwargs)

    def _lineage_on_start(self) -> lineage.RunLineage | None:
        return None if self.slice_key is not None else lineage_of_arguments(self)

    def execute(self, context: Any) -> dict[str, Any]:
        use_worker_memory_pool()  # (this task's own process)
        hook = AcidHook(self.acid_conn_id)
        out = hook.resolve_uri(self.output_uri)
        keep = keep_count(self.keep_snapshots)  # a bad value fails before any work
        if self.slice_key is None:  # bad sink options fail before the whole snapshot's work
            check_sink(
                self.output_format,
                out,
                options=self.sink_options,
                storage_options=hook.storage_options,
            )
        if self.slice_key is not None:
            if not self.snapshot_id:
                raise ValueError("slice_key needs snapshot_id (the plan's snapshot id)")
            if keep is not None:
                raise ValueError("keep_snapshots belongs on the commit task, not a mapped slice")
            with replan_needed():
                result = compact_planned_slice(
                    out, self.snapshot_id, self.slice_key, storage_options=hook.storage_options
                )
            self._keep_lineage(lambda: lineage_of_slice(hook, out, result))
            self.log.info(
                "Slice %s: %d rows read, %d deleted, %d written",
                self.slice_key,
                result.rows_read,
                result.rows_deleted,
                result.rows_written,
            )
            return result.to_dict()
        options = compaction_options(
            self.partition_types, ignore_unrecognised=bool(self.ignore_unrecognised)
        )
        if none_if_blank(self.manifest_uri):
            if none_if_blank(self.table_uri) or none_if_blank(self.table):
                raise ValueError(
                    "manifest_uri names the table and its read view: drop table_uri and table"
                )
            with replan_needed():
                result = compact_manifest(
                    hook.resolve_uri(self.manifest_uri),
                    out,
                    storage_options=hook.storage_options,
                    options=options,
                )
        elif none_if_blank(self.table_uri) or none_if_blank(self.table):
            result = self._compact_table(hook, out, options)
        else:
            raise ValueError("give slice_key (mapped), manifest_uri, table_uri or table")
        self._keep_lineage(lambda: lineage.snapshot_lineage(result, out))
        log_warnings(self, result.warnings)
        summary = snapshot_summary(result)
        return publish_and_expire(self, context, hook, result, keep, summary)

    def _compact_table(self, hook: AcidHook, out: str, options: CompactionOptions) -> Any:
        """The whole snapshot in this process; by name inside a read transaction."""
        table_uri, table, conn_id = table_arguments(
            self.table_uri, self.table, self.metastore_conn_id
        )
        if not table:
            source = open_task_source(
                self, hook, table_uri=table_uri, table=None, write_ids=self.valid_write_ids
            )
            return compact_table(source, out, storage_options=hook.storage_options, options=options)
        from ..metastore.transactions import ReadTransaction

        address = AcidMetastoreHook(conn_id).address
        with ReadTransaction(address) as txn:
            self.log.info("Read transaction %s open in %s", txn.txn_id, address.uri)
            source = open_task_source(
                self,
                hook,
                table_uri=None,
                table=table,
                metastore=address,
                write_ids=self.valid_write_ids,
                current_txn=txn.txn_id,
            )
            result = compact_table(
                source, out, storage_options=hook.storage_options, options=options
            )
        self.log.info("Read transaction %s committed", txn.txn_id)
        return result


class AcidCommitSnapshotOperator(OpenLineageMixin, BaseOperator):
    """Commits a snapshot once every mapped slice succeeded: verifies, reconciles, and writes
    the manifest last. Returns the snapshot summary and adds an asset event, with the snapshot
    id, rows and files in its extra, to each of its ``outlets``.

    :param output_uri: the output root (the plan's).
    :param snapshot_id: the plan's snapshot id (``plan.output["snapshot_id"]``).
    :param bucket_results: the mapped :class:`AcidCompactOperator`'s ``.output``.
    :param acid_conn_id: the ``acid`` connection with the storage credentials and URI prefix.
    :param keep_snapshots: after the commit, keep only the newest N committed snapshots and
        delete the others' files that no kept snapshot references (``expire_snapshots``); with
        1, a plain folder read of ``output_uri`` is exactly the new snapshot. None keeps all.
        Readers still reading an older snapshot lose its files: keep 2 or more if they exist.
        With a table format, expiry goes through the table's own (Iceberg's snapshot
        expiration, Delta's vacuum), and no file a kept table snapshot references is deleted.
    :param output_format: ``parquet`` (the folder and its manifests, the default), ``iceberg``
        or ``delta``: after the manifest's commit, the snapshot is also published as one
        commit of that table over the same files (idempotent: a re-run publishes a committed
        manifest the table lacks). The summary (XCom) then carries ``output_format``,
        ``asset_uri``, ``table_version`` (the Iceberg snapshot id or Delta version) and the
        format's block (``iceberg``/``delta``, as the CLI's ``--json``); asset events carry
        the first three, and the ``acid.snapshot.table_version`` gauge the version.
    :param sink_options: the sink's options (``output.iceberg``: ``catalog`` properties and
        ``table``; ``output.delta``: ``uri``).
    :param report_uri: the manifest task's pruning report, to which the commit adds its rows
        read, deleted, filtered and written per partition (the manifest summary's
        ``report_uri``). None: the report of this run's default manifest location
        (``OUT/_manifests/<run_id>.html``), when there is one.

    Templated fields: ``output_uri``, ``snapshot_id``, ``bucket_results``, ``acid_conn_id``,
    ``keep_snapshots``, ``output_format``, ``sink_options``, ``report_uri``.
    """

    template_fields: Sequence[str] = (
        "output_uri",
        "snapshot_id",
        "bucket_results",
        "acid_conn_id",
        "keep_snapshots",
        "output_format",
        "sink_options",
        "report_uri",
    )

    def __init__(
        self,
        *,
        output_uri: str,
        snapshot_id: str,
        bucket_results: Any = None,
        acid_conn_id: str | None = None,
        keep_snapshots: int | str | None = None,
        output_format: str = DEFAULT_OUTPUT_FORMAT,
        sink_options: Mapping[str, Any] | None = None,
        report_uri: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.output_format = output_format_argument(output_format)
        self.sink_options = sink_options
        self.report_uri = report_uri
        self.output_uri = output_uri
        self.snapshot_id = snapshot_id
        self.bucket_results = bucket_results
        self.acid_conn_id = acid_conn_id
        self.keep_snapshots = keep_snapshots

    def execute(self, context: Any) -> dict[str, Any]:
        hook = AcidHook(self.acid_conn_id)
        keep = keep_count(self.keep_snapshots)  # a bad value fails before the commit
        check_sink(
            self.output_format,
            hook.resolve_uri(self.output_uri),
            options=self.sink_options,
            storage_options=hook.storage_options,
        )
        results = [
            r if isinstance(r, (Mapping, BucketResult)) else json.loads(r)
            for r in mapped_results(self.bucket_results, "bucket_results")
        ]
        try:
            result = commit_snapshot(
                hook.resolve_uri(self.output_uri),
                self.snapshot_id,
                results,
                storage_options=hook.storage_options,
            )
        except Exception as exc:
            add_failure_to_report(self, hook, context, exc)
            raise
        out_uri = hook.resolve_uri(self.output_uri)
        self._keep_lineage(lambda: lineage.snapshot_lineage(result, out_uri))
        summary = snapshot_summary(result)
        self.log.info(
            "Snapshot %s %s: %d rows in %d files (%s)",
            result.snapshot_id,
            "committed" if result.newly_committed else "was already committed",
            summary["rows_written"],
            summary["files"],
            result.manifest_path,
        )
        log_warnings(self, result.warnings)
        add_to_report(self, hook, context, result)
        return publish_and_expire(self, context, hook, result, keep, summary)
