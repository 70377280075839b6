"""OpenLineage datasets and facets from what the operators read and wrote.

The operators keep the library's results of a run (a slice manifest, a plan, a bucket's
result, a committed snapshot) and hand them here from ``get_openlineage_facets_on_complete``.
Two halves:

* plain naming, no OpenLineage needed: :class:`LineageDataset` names a dataset as
  OpenLineage's naming spec says. A Hive table read through a metastore is namespace
  ``hive://HOST:PORT``, name ``db.table``; a location is its storage's namespace and path
  (``file`` and the absolute path; ``s3://bucket`` and the key; ``hdfs://host:port`` and the
  path). :class:`RunLineage` gathers a run's inputs, outputs and figures.
* :meth:`RunLineage.to_operator_lineage` builds the provider's ``OperatorLineage``: datasets
  with a schema facet (the table definition's columns, partition columns included) and a
  storage facet, output statistics, and the provider's run facets (``lineage_facets``):
  ``acidReadView`` (the write-id list read), ``acidPruning`` (the manifest's metrics) and
  ``acidCompaction`` (rows read, deleted, filtered and written).

OpenLineage (the optional ``openlineage`` extra) is imported only inside that method and the
``*_lineage`` helpers, so this module and the operators import and run without it; the
helpers return None when it is absent.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

#: URL schemes whose dataset names are object keys (no leading slash), per the naming spec.
_OBJECT_STORES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "gcs": "gs"}
DEFAULT_METASTORE_PORT = 9083

FACET_READ_VIEW = "acidReadView"
FACET_PRUNING = "acidPruning"
FACET_COMPACTION = "acidCompaction"


@dataclass(frozen=True)
class LineageDataset:
    """A dataset as OpenLineage names it, with its columns (name, Hive type) when known.

    ``storage_layer`` and ``file_format`` fill the storage facet (``hive-acid``/``orc`` for
    the source table, the output format and ``parquet`` for a snapshot); ``partition_columns``
    are the names among ``columns`` that are partition columns.
    """

    namespace: str
    name: str
    columns: tuple[tuple[str, str], ...] = ()
    partition_columns: tuple[str, ...] = ()
    storage_layer: str | None = None
    file_format: str | None = None
    #: other names of the same dataset, ``(namespace, name, type)``: an Iceberg table's
    #: catalog name beside its location (the symlinks facet)
    symlinks: tuple[tuple[str, str, str], ...] = ()


def location_naming(uri: str) -> tuple[str, str]:
    """``(namespace, name)`` of a storage location, as OpenLineage's naming spec says.

    A local path (or ``file://``) is namespace ``file`` and its absolute path; ``s3://b/k``
    (also ``s3a``, ``s3n``) is ``s3://b`` and ``k``; ``gs://b/k`` is ``gs://b`` and ``k``; any
    other URL (``hdfs://host:port/p``, ``abfss://c@acct.dfs.core.windows.net/p``) is
    ``scheme://authority`` and the path; ``memory://p`` is ``memory`` and ``/p``.
    """
    text = str(uri).strip()
    if not text:
        raise ValueError("a dataset location is empty")
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if not scheme or len(scheme) == 1:  # a path (a drive letter is no scheme)
        return "file", posixpath.normpath(os.path.abspath(text))
    if scheme in ("file", "local"):
        return "file", posixpath.normpath(parts.path or "/")
    if scheme == "memory":
        return "memory", posixpath.normpath("/" + (parts.netloc + parts.path).lstrip("/"))
    path = parts.path.rstrip("/")
    if scheme in _OBJECT_STORES:
        return f"{_OBJECT_STORES[scheme]}://{parts.netloc}", path.lstrip("/") or "/"
    return f"{scheme}://{parts.netloc}", path or "/"


def hive_naming(metastore: str, table: str) -> tuple[str, str]:
    """``(hive://HOST:PORT, db.table)`` for a table read through ``metastore``
    (``thrift://HOST:PORT``; of several comma-separated endpoints, the first)."""
    first = str(metastore).split(",")[0].strip()
    parts = urlsplit(first if "://" in first else f"thrift://{first}")
    if not parts.hostname:
        raise ValueError(f"metastore {metastore!r} names no host")
    port = parts.port or DEFAULT_METASTORE_PORT
    name = table if "." in table else f"default.{table}"
    return f"hive://{parts.hostname}:{port}", name


def _columns(items: Any) -> tuple[tuple[str, str], ...]:
    """``(name, hive type)`` pairs from a definition's or a plan's column lists."""
    out = []
    for item in items or ():
        if isinstance(item, Mapping):
            out.append((str(item["name"]), str(item["hive_type"])))
        else:
            name, hive_type = item
            out.append((str(name), str(hive_type)))
    return tuple(out)


def table_dataset(
    location: str | None,
    definition: Any = None,
    *,
    columns: Any = (),
    partition_columns: Any = (),
    insert_only: bool = False,
) -> LineageDataset:
    """The Hive table read: by name when a metastore's definition is at hand (a
    ``TableDefinition`` or its ``to_dict()``), else by ``location``. Columns come from the
    definition, else from ``columns``/``partition_columns`` (a plan's settings)."""
    if definition is not None and not isinstance(definition, Mapping):
        definition = definition.to_dict()
    if definition:
        namespace, name = hive_naming(definition["metastore"], definition["name"])
        columns = definition.get("columns", ())
        partition_columns = definition.get("partition_columns", ())
        insert_only = str(definition.get("transactional_properties", "")).lower() == "insert_only"
    else:
        if not location:
            raise ValueError("the table has neither a definition nor a location")
        namespace, name = location_naming(location)
    data, keys = _columns(columns), _columns(partition_columns)
    return LineageDataset(
        namespace,
        name,
        data + keys,
        tuple(n for n, _ in keys),
        storage_layer="hive-acid",
        file_format=None if insert_only else "orc",
    )


def snapshot_dataset(
    output_uri: str,
    *,
    settings: Mapping[str, Any] | None = None,
    publication: Any = None,
) -> LineageDataset:
    """The snapshot written: the output folder, or, when a table-format sink published it
    (a ``Publication`` or its ``to_dict()`` with ``output_format`` iceberg or delta), that
    table (see :func:`_published_table`). Columns from the plan's ``settings``."""
    output_format = "parquet"
    target = output_uri
    symlinks: tuple[tuple[str, str, str], ...] = ()
    if publication is not None:
        pub = publication if isinstance(publication, Mapping) else publication.to_dict()
        output_format = str(pub.get("output_format") or "parquet")
        target, symlinks = _published_table(output_format, pub, output_uri)
    namespace, name = location_naming(target)
    settings = settings or {}
    data = _columns(settings.get("columns", ()))
    keys = _columns(settings.get("partition_columns", ()))
    return LineageDataset(
        namespace,
        name,
        data + keys,
        tuple(n for n, _ in keys),
        storage_layer=output_format,
        file_format="parquet",
        symlinks=symlinks,
    )


def _published_table(
    output_format: str, publication: Mapping[str, Any], output_uri: str
) -> tuple[str, tuple[tuple[str, str, str], ...]]:
    """Where a sink's table is, and its other names. A Delta table is named by its location
    (its ``asset_uri``); an Iceberg table by its location too (the output folder, where the
    sink puts it), with its catalog name (``iceberg://CATALOG`` and ``ns.table``) as a
    symlink, as OpenLineage's Spark integration names them."""
    asset_uri = str(publication.get("asset_uri") or "")
    details = publication.get("details") or {}
    if output_format == "delta" and asset_uri:
        return asset_uri, ()
    if output_format == "iceberg" and asset_uri.startswith("iceberg://") and details.get("table"):
        identifier = str(details["table"])
        suffix = "/" + identifier.replace(".", "/")  # iceberg://CATALOG/ns/name
        catalog = asset_uri[: -len(suffix)] if asset_uri.endswith(suffix) else asset_uri
        return output_uri, ((catalog, identifier, "TABLE"),)
    return output_uri, ()


@dataclass(frozen=True)
class RunLineage:
    """What one task read and wrote, and its figures, in plain data.

    ``read_view`` holds ``table``, ``validWriteIds``, ``validTxns``, ``metastore``,
    ``maxWriteId``, ``storageOnly``, ``warnings``; ``pruning`` a manifest's metrics
    (``PruningMetrics.to_dict()``) plus ``predicate``, ``granularity``, ``manifestUri``;
    ``compaction`` a snapshot's totals plus ``snapshotId``, ``sliceKey``, ``committed``.
    ``output_statistics`` is ``(rows, bytes, files)`` of the output when committed.
    """

    inputs: tuple[LineageDataset, ...] = ()
    outputs: tuple[LineageDataset, ...] = ()
    read_view: Mapping[str, Any] | None = None
    pruning: Mapping[str, Any] | None = None
    compaction: Mapping[str, Any] | None = None
    output_statistics: tuple[int, int, int] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_operator_lineage(self) -> Any:
        """The ``OperatorLineage`` the OpenLineage listener emits; None without OpenLineage."""
        try:
            from airflow.providers.openlineage.extractors import OperatorLineage
            from openlineage.client.event_v2 import InputDataset, OutputDataset
            from openlineage.client.facet_v2 import (
                output_statistics_output_dataset,
            )

            from . import lineage_facets as custom
        except ImportError:
            return None
        inputs = [InputDataset(d.namespace, d.name, facets=_dataset_facets(d)) for d in self.inputs]
        outputs = []
        for d in self.outputs:
            output_facets = {}
            if self.output_statistics is not None:
                rows, size, files = self.output_statistics
                output_facets["outputStatistics"] = (
                    output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                        rowCount=rows, size=size, fileCount=files
                    )
                )
            outputs.append(
                OutputDataset(
                    d.namespace, d.name, facets=_dataset_facets(d), outputFacets=output_facets
                )
            )
        run_facets: dict[str, Any] = {}
        if self.read_view is not None:
            run_facets[FACET_READ_VIEW] = custom.AcidReadViewRunFacet(**self.read_view)
        if self.pruning is not None:
            run_facets[FACET_PRUNING] = custom.AcidPruningRunFacet(**self.pruning)
        if self.compaction is not None:
            run_facets[FACET_COMPACTION] = custom.AcidCompactionRunFacet(**self.compaction)
        return OperatorLineage(inputs=inputs, outputs=outputs, run_facets=run_facets)


def _dataset_facets(dataset: LineageDataset) -> dict[str, Any]:
    from openlineage.client.facet_v2 import schema_dataset, storage_dataset, symlinks_dataset

    facets: dict[str, Any] = {}
    if dataset.columns:
        keys = set(dataset.partition_columns)
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[
                schema_dataset.SchemaDatasetFacetFields(
                    name=name,
                    type=hive_type,
                    description="partition column" if name in keys else None,
                )
                for name, hive_type in dataset.columns
            ]
        )
    if dataset.storage_layer:
        facets["storage"] = storage_dataset.StorageDatasetFacet(
            storageLayer=dataset.storage_layer, fileFormat=dataset.file_format
        )
    if dataset.symlinks:
        facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[
                symlinks_dataset.Identifier(namespace=ns, name=name, type=kind)
                for ns, name, kind in dataset.symlinks
            ]
        )
    return facets


class OpenLineageMixin:
    """``get_openlineage_facets_on_start``/``_on_complete`` for the provider's operators.

    ``execute`` records how to build its lineage (:meth:`_keep_lineage`, a function of the
    library's results, called only when the OpenLineage listener asks); ``_lineage_on_start``
    may name the inputs from the arguments alone. Both return None without OpenLineage, or
    when ``execute`` did not get as far as recording.
    """

    _lineage_of_run: Callable[[], RunLineage] | None = None

    def _keep_lineage(self, build: Callable[[], RunLineage]) -> None:
        self._lineage_of_run = build

    def _lineage_on_start(self) -> RunLineage | None:
        return None

    def get_openlineage_facets_on_start(self) -> Any:
        """Inputs known from the (rendered) arguments, before the task runs."""
        lineage = self._lineage_on_start()
        return None if lineage is None else lineage.to_operator_lineage()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Datasets and run facets from what the task read and wrote."""
        build = self._lineage_of_run
        if build is None:
            return self.get_openlineage_facets_on_start()
        return build().to_operator_lineage()


# -- from the library's results ---------------------------------------------------------------


def read_view(
    table: str,
    write_ids: str | None,
    txns: str | None,
    *,
    metastore: str | None = None,
    max_write_id: int | None = None,
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """The ``acidReadView`` facet's fields."""
    from ..acid.source import STORAGE_ONLY_WARNING

    return {
        "table": table,
        "validWriteIds": write_ids,
        "validTxns": txns,
        "metastore": metastore,
        "maxWriteId": max_write_id,
        "storageOnly": STORAGE_ONLY_WARNING in warnings,
        "warnings": list(warnings),
    }


def pruning_fields(
    metrics: Mapping[str, Any],
    predicate: str,
    *,
    granularity: str | None = None,
    manifest_uri: str | None = None,
) -> dict[str, Any]:
    """The ``acidPruning`` facet's fields from ``PruningMetrics.to_dict()``."""
    return {
        "predicate": predicate,
        "partitionsTotal": int(metrics["partitions_total"]),
        "partitionsKept": int(metrics["partitions_kept"]),
        "slicesTotal": int(metrics["slices_total"]),
        "slicesKept": int(metrics["slices_kept"]),
        "slicesPrunedByBucket": int(metrics.get("slices_pruned_by_bucket", 0)),
        "filesTotal": int(metrics["files_total"]),
        "filesCandidate": int(metrics["files_candidate"]),
        "filesNotIndexed": int(metrics["files_not_indexed"]),
        "bytesTotal": int(metrics["bytes_total"]),
        "bytesKept": int(metrics["bytes_kept"]),
        "skippingRatio": float(metrics["skipping_ratio"]),
        "granularity": granularity,
        "manifestUri": manifest_uri,
    }


def compaction_fields(
    totals: Mapping[str, Any],
    snapshot_id: str,
    *,
    slice_key: str | None = None,
    committed: bool = False,
    output_format: str = "parquet",
) -> dict[str, Any]:
    """The ``acidCompaction`` facet's fields from ``SnapshotResult.totals()`` (or one
    bucket's counts)."""
    return {
        "snapshotId": snapshot_id,
        "rowsRead": int(totals.get("rows_read", 0)),
        "rowsInvalid": int(totals.get("rows_invalid", 0)),
        "rowsDeleted": int(totals.get("rows_deleted", 0)),
        "rowsFiltered": int(totals.get("rows_filtered", 0)),
        "rowsWritten": int(totals.get("rows_written", 0)),
        "files": int(totals.get("files", 0)),
        "bytes": int(totals.get("bytes", 0)),
        "slices": int(totals.get("slices", 0)),
        "slicesReused": int(totals.get("slices_reused", 0)),
        "sliceKey": slice_key,
        "committed": committed,
        "outputFormat": output_format,
    }


def _metastore_of(definition: Any) -> str | None:
    if definition is None:
        return None
    return definition["metastore"] if isinstance(definition, Mapping) else definition.metastore


def manifest_lineage(manifest: Any, manifest_uri: str | None = None) -> RunLineage:
    """The manifest task: the table read (by name or location), its read view, the pruning."""
    source = table_dataset(manifest.table, manifest.definition)
    return RunLineage(
        inputs=(source,),
        read_view=read_view(
            source.name,
            manifest.write_ids,
            manifest.txns,
            metastore=_metastore_of(manifest.definition),
            warnings=manifest.warnings,
        ),
        pruning=pruning_fields(
            manifest.metrics.to_dict(),
            manifest.predicate,
            granularity=manifest.granularity,
            manifest_uri=manifest_uri,
        ),
    )


def _plan_input(plan: Any) -> LineageDataset:
    settings = plan.settings or {}
    return table_dataset(
        plan.table,
        plan.definition,
        columns=settings.get("columns", ()),
        partition_columns=settings.get("partition_columns", ()),
        insert_only=plan.insert_only,
    )


def plan_lineage(plan: Any, output_uri: str | None = None) -> RunLineage:
    """The plan task: the table (columns from the plan's settings) and the snapshot folder
    it plans (``output_uri``, the task's; the plan holds a path without its scheme), with
    the read view the whole snapshot is read with."""
    source = _plan_input(plan)
    return RunLineage(
        inputs=(source,),
        outputs=(snapshot_dataset(output_uri or plan.out, settings=plan.settings),),
        read_view=read_view(
            source.name,
            plan.write_ids,
            plan.txns,
            metastore=_metastore_of(plan.definition),
            max_write_id=plan.max_write_id,
            warnings=plan.warnings,
        ),
    )


def slice_lineage(plan: Any, bucket: Any, output_uri: str | None = None) -> RunLineage:
    """One mapped compaction task: the table, the snapshot folder (not yet committed), and
    the bucket's rows."""
    base = plan_lineage(plan, output_uri)
    totals = {
        "slices": 1,
        "slices_reused": 1 if bucket.reused_from else 0,
        "files": len(bucket.files),
        "bytes": sum(f.size for f in bucket.files),
        "rows_read": bucket.rows_read,
        "rows_invalid": bucket.rows_invalid,
        "rows_deleted": bucket.rows_deleted,
        "rows_filtered": bucket.rows_filtered,
        "rows_written": bucket.rows_written,
    }
    return RunLineage(
        inputs=base.inputs,
        outputs=base.outputs,
        read_view=base.read_view,
        compaction=compaction_fields(totals, bucket.snapshot_id, slice_key=bucket.slice_key),
    )


def snapshot_lineage(
    result: Any, output_uri: str | None = None, publication: Any = None
) -> RunLineage:
    """A committed snapshot (``SnapshotResult``): the table, the output with its statistics,
    the read view and the row totals. The output is the folder (``output_uri``, the task's),
    or, given the sink's ``publication`` of an Iceberg or Delta table, that table."""
    settings = result.settings or {}
    source = table_dataset(
        result.table,
        result.definition,
        columns=settings.get("columns", ()),
        partition_columns=settings.get("partition_columns", ()),
        insert_only=result.insert_only,
    )
    output = snapshot_dataset(output_uri or result.out, settings=settings, publication=publication)
    totals = result.totals()
    return RunLineage(
        inputs=(source,),
        outputs=(output,),
        read_view=read_view(
            source.name,
            result.write_ids,
            result.txns,
            metastore=_metastore_of(result.definition),
            max_write_id=result.max_write_id,
            warnings=result.warnings,
        ),
        compaction=compaction_fields(
            totals,
            result.snapshot_id,
            committed=True,
            output_format=output.storage_layer or "parquet",
        ),
        output_statistics=(totals["rows_written"], totals["bytes"], totals["files"]),
    )


def metrics_lineage(
    manifest: Mapping[str, Any] | None, snapshot: Mapping[str, Any] | None
) -> RunLineage:
    """The metrics task, from the manifest's and the commit's XCom summaries: the run facets
    of both (the table and the snapshot are the manifest's and the commit's datasets)."""
    manifest = manifest or {}
    pruning = None
    if manifest.get("metrics"):
        pruning = pruning_fields(
            manifest["metrics"],
            manifest.get("predicate") or "",
            manifest_uri=manifest.get("manifest_uri"),
        )
    compaction = None
    if snapshot:
        compaction = compaction_fields(
            snapshot.get("totals", {}), snapshot["snapshot_id"], committed=True
        )
    view = None
    if manifest.get("table_uri") or manifest.get("table_name"):
        definition = None
        if manifest.get("metastore") and manifest.get("table_name"):
            definition = {"metastore": manifest["metastore"], "name": manifest["table_name"]}
        source = table_dataset(manifest.get("table_uri"), definition)
        view = read_view(
            source.name,
            manifest.get("write_ids"),
            manifest.get("txns"),
            metastore=manifest.get("metastore"),
            warnings=manifest.get("warnings", ()),
        )
    return RunLineage(read_view=view, pruning=pruning, compaction=compaction)


def location_lineage(location: str) -> RunLineage:
    """A sensor watching a table at a location: that table as its input."""
    return RunLineage(inputs=(table_dataset(location),))


def named_table_lineage(
    metastore: str, table: str, valid_write_ids: str | None = None
) -> RunLineage:
    """A sensor or a task reading a table by name: ``hive://HOST:PORT`` ``db.table``; with
    the write-id list the metastore showed (a sensor's last look), its read view."""
    namespace, name = hive_naming(metastore, table)
    view = None
    if valid_write_ids:
        view = read_view(name, valid_write_ids, None, metastore=metastore)
    return RunLineage(
        inputs=(LineageDataset(namespace, name, storage_layer="hive-acid"),), read_view=view
    )


__all__ = [
    "FACET_COMPACTION",
    "FACET_PRUNING",
    "FACET_READ_VIEW",
    "LineageDataset",
    "OpenLineageMixin",
    "RunLineage",
    "compaction_fields",
    "hive_naming",
    "location_lineage",
    "location_naming",
    "manifest_lineage",
    "metrics_lineage",
    "named_table_lineage",
    "plan_lineage",
    "pruning_fields",
    "read_view",
    "slice_lineage",
    "snapshot_dataset",
    "snapshot_lineage",
    "table_dataset",
]
