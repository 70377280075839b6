"""Operators of pruning: the slice manifest of a predicate, and the metrics it and a snapshot give.

:class:`AcidSliceManifestOperator` writes the pruned slice manifest (and its pruning report)
that the snapshot operators of :mod:`~airflow_provider_acid.operators.acid` plan, compact and
commit; :class:`AcidPublishPruningMetricsOperator` publishes what the manifest pruned and what
the commit wrote (Airflow metrics, XCom, ``metrics.json``). Both are importable from
``operators.acid`` too, where they were first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from ..hooks.acid import AcidHook
from ..hooks.metastore import AcidMetastoreHook
from ..pruning.manifest import compute_manifest, default_index_uri
from ..pruning.manifest_files import write_manifest
from ..pruning.metrics import format_record, metrics_record, write_metrics_record
from ..pruning.report import build_report, report_uri_for, write_report
from . import lineage
from .lineage import OpenLineageMixin
from .links import REPORT_CONN_XCOM_KEY, REPORT_XCOM_KEY, AcidPruningReportLink
from .publishing import emit_stats
from .task_arguments import (
    lineage_of_arguments,
    log_warnings,
    manifest_uri_for,
    none_if_blank,
    open_task_source,
    table_arguments,
)


class AcidSliceManifestOperator(OpenLineageMixin, BaseOperator):
    """Writes the pruned slice manifest of a predicate and returns a small summary.

    The summary (XCom) is ``{"manifest_uri", "table_uri", "table_name", "metastore",
    "predicate", "write_ids", "txns", "slice_keys", "metrics", "warnings"}``; ``slice_keys`` is
    a list usable by ``.expand``. ``write_ids`` and ``txns`` are the pinned view every later
    step reads with; ``metastore`` is ``thrift://HOST:PORT`` (never credentials), None
    storage-only; ``warnings`` says when the table was read storage-only.

    :param table_uri: the Hive ACID table (path, fsspec URL, or relative to the connection).
    :param table: or the table by name, ``DB.TABLE``, read through ``metastore_conn_id``: its
        definition, only the partitions ``where`` may match, and one read view.
    :param metastore_conn_id: the ``hive_metastore`` connection (default
        ``metastore_default``); only with ``table``.
    :param output_uri: the output root: the index defaults to ``OUT/_index`` and the manifest
        to ``OUT/_manifests/<run_id>.json``.
    :param where: SQL ``WHERE`` fragment or DNF filter list; empty keeps every slice.
    :param valid_write_ids: Hive write-id list the snapshot is read with (empty: by name the
        metastore's, by location every write on storage counts as committed).
    :param valid_txns: Hive transaction list, with ``valid_write_ids`` (empty: by name the
        metastore's).
    :param index_uri: column-stats index location (default ``OUT/_index``).
    :param refresh_index: bring the index up to date with the table's files first.
    :param manifest_uri: where the manifest goes (default ``OUT/_manifests/<run_id>.json``).
    :param granularity: ``"slice"`` (drop whole bucket slices) or ``"file"`` (drop files).
    :param partition_types: ``{partition column: Hive type}`` for a table read by location
        (by name, the metastore's types are used); untyped partition values are strings.
    :param acid_conn_id: the ``acid`` connection with the storage credentials and URI prefix.
    :param ignore_unrecognised: write the manifest although files of the table cannot be
        placed in any slice (by default they fail the task, named); its ``warnings`` then name
        each file left out.
    :param bucketing: ``{"columns": [...], "buckets": n, "version": 1 | 2}`` for bucket
        pruning of a table read by location (by name, the metastore's bucketing is used).
    :param report: write the pruning report next to the manifest (``<manifest>.html``: every
        slice kept or pruned and why, files and bytes kept, the skipping ratio per partition;
        :mod:`~airflow_provider_acid.pruning.report`); the summary's ``report_uri`` (and XCom
        ``report_uri``) names it and the task's "Pruning report" link opens it. The commit
        task adds its rows per partition to it.

    Templated fields: ``table_uri``, ``table``, ``metastore_conn_id``, ``output_uri``,
    ``where``, ``valid_write_ids``, ``valid_txns``, ``index_uri``, ``manifest_uri``,
    ``acid_conn_id``.
    """

    operator_extra_links = (AcidPruningReportLink(),)
    template_fields: Sequence[str] = (
        "table_uri",
        "table",
        "metastore_conn_id",
        "output_uri",
        "where",
        "valid_write_ids",
        "valid_txns",
        "index_uri",
        "manifest_uri",
        "acid_conn_id",
    )
    template_fields_renderers = {"where": "sql"}
    ui_color = "#e8f6f3"

    def __init__(
        self,
        *,
        table_uri: str | None = None,
        output_uri: str,
        table: str | None = None,
        metastore_conn_id: str | None = None,
        where: str | list | None = None,
        valid_write_ids: str | None = None,
        valid_txns: str | None = None,
        index_uri: str | None = None,
        refresh_index: bool = True,
        manifest_uri: str | None = None,
        granularity: str = "slice",
        partition_types: Mapping[str, str] | None = None,
        acid_conn_id: str | None = None,
        ignore_unrecognised: bool = False,
        bucketing: Mapping[str, Any] | None = None,
        report: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.ignore_unrecognised = ignore_unrecognised
        self.bucketing = bucketing
        self.report = report
        self.table_uri = table_uri
        self.table = table
        self.metastore_conn_id = metastore_conn_id
        self.output_uri = output_uri
        self.where = where
        self.valid_write_ids = valid_write_ids
        self.valid_txns = valid_txns
        self.index_uri = index_uri
        self.refresh_index = refresh_index
        self.manifest_uri = manifest_uri
        self.granularity = granularity
        self.partition_types = partition_types
        self.acid_conn_id = acid_conn_id

    def _lineage_on_start(self) -> lineage.RunLineage | None:
        return lineage_of_arguments(self)

    def execute(self, context: Any) -> dict[str, Any]:
        table_uri, table, conn_id = table_arguments(
            self.table_uri, self.table, self.metastore_conn_id
        )
        hook = AcidHook(self.acid_conn_id)
        output_uri = hook.resolve_uri(self.output_uri)
        index_uri = (
            hook.resolve_uri(self.index_uri) if self.index_uri else (default_index_uri(output_uri))
        )
        where = none_if_blank(self.where)
        source = open_task_source(
            self,
            hook,
            table_uri=table_uri,
            table=table,
            metastore=AcidMetastoreHook(conn_id).address if table else None,
            where=where,
            write_ids=self.valid_write_ids,
            txns=self.valid_txns,
        )
        manifest = compute_manifest(
            source,
            where,
            index_uri=index_uri,
            refresh=self.refresh_index,
            granularity=self.granularity,
            partition_types=self.partition_types,
            storage_options=hook.storage_options,
            index_storage_options=hook.storage_options,
            ignore_unrecognised=bool(self.ignore_unrecognised),
            bucketing=self.bucketing,
            explain=bool(self.report),
        )
        uri = self.manifest_uri or manifest_uri_for(output_uri, context.get("run_id"))
        path = write_manifest(manifest, hook.resolve_uri(uri), hook.storage_options)
        report_uri = None
        if self.report:
            report_uri = write_report(
                build_report(manifest, path), report_uri_for(path), hook.storage_options
            )
            self.log.info("Pruning report %s", report_uri)
            ti = context.get("ti") if hasattr(context, "get") else None
            if ti is not None:
                ti.xcom_push(key=REPORT_XCOM_KEY, value=report_uri)
                ti.xcom_push(key=REPORT_CONN_XCOM_KEY, value=self.acid_conn_id)
        self._keep_lineage(lambda: lineage.manifest_lineage(manifest, path))
        log_warnings(self, manifest.warnings)
        metrics = manifest.metrics.to_dict()
        self.log.info(
            "Manifest %s: %d of %d slices kept (skipping ratio %.1f%%) for %s",
            path,
            metrics["slices_kept"],
            metrics["slices_total"],
            100 * metrics["skipping_ratio"],
            manifest.predicate,
        )
        definition = manifest.definition
        return {
            "manifest_uri": uri,
            "table_uri": manifest.table,
            "table_name": definition.name if definition else None,
            "metastore": definition.metastore if definition else None,
            "predicate": manifest.predicate,
            "write_ids": manifest.write_ids,
            "txns": manifest.txns,
            "slice_keys": manifest.slice_keys,
            "metrics": metrics,
            "warnings": list(manifest.warnings),
            "report_uri": report_uri,
        }


class AcidPublishPruningMetricsOperator(OpenLineageMixin, BaseOperator):
    """Publishes a manifest's and a compaction's metrics: as Airflow metrics (gauges and
    counters tagged with table and partition, through StatsD or OpenTelemetry when enabled),
    as XCom (the returned record), and as ``OUT/_snapshots/<id>/metrics.json``.

    :param manifest: the manifest operator's summary (``.output``), or None.
    :param snapshot: the commit operator's summary (``.output``), or None.
    :param table_name: the ``table`` tag (default: the manifest's table name when it was read
        by name, else its location).
    :param acid_conn_id: the ``acid`` connection for writing ``metrics.json``.

    Templated fields: ``manifest``, ``snapshot``, ``table_name``, ``acid_conn_id``.
    """

    template_fields: Sequence[str] = ("manifest", "snapshot", "table_name", "acid_conn_id")

    def __init__(
        self,
        *,
        manifest: Any = None,
        snapshot: Any = None,
        table_name: str | None = None,
        acid_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.manifest = manifest
        self.snapshot = snapshot
        self.table_name = table_name
        self.acid_conn_id = acid_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        manifest = self.manifest or {}
        table = (
            self.table_name or manifest.get("table_name") or manifest.get("table_uri") or "unknown"
        )
        record = metrics_record(table, manifest or None, self.snapshot or None)
        snapshot = self.snapshot or None
        self._keep_lineage(lambda: lineage.metrics_lineage(manifest, snapshot))
        emit_stats(record, table)
        if self.snapshot:
            hook = AcidHook(self.acid_conn_id)
            record["record_path"] = write_metrics_record(
                record,
                hook.resolve_uri(self.snapshot["output_uri"]),
                self.snapshot["snapshot_id"],
                hook.storage_options,
            )
        self.log.info("Pruning and compaction metrics:\n%s", format_record(record))
        return record
