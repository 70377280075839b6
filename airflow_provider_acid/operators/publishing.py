"""What the operators do after a commit: publish the snapshot to its sink, expire older ones,
add it to the pruning report, emit Airflow metrics and asset events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk.observability.stats import Stats

from ..hooks.acid import AcidHook
from ..output import expire_snapshots
from ..output.sinks import (
    DEFAULT_OUTPUT_FORMAT,
    check_output_format,
    publish_snapshot,
)
from ..pruning.report import add_failure, add_snapshot, report_uri_for
from . import lineage
from .task_arguments import (
    manifest_uri_for,
    none_if_blank,
)

METRIC_PREFIX = "acid"


def output_format_argument(value: str) -> str:
    """``output_format`` checked at DAG parse time, unless it is a template.

    :param value: the ``output_format`` argument.
    """
    return value if "{{" in str(value) else check_output_format(value)


def publish_and_expire(
    task: Any,
    context: Any,
    hook: AcidHook,
    result: Any,
    keep: int | None,
    summary: dict[str, Any],
) -> dict[str, Any]:
    """After the manifest's commit: publish the snapshot with the task's ``output_format``
    (an Iceberg or Delta commit over the same files), add the asset events, then expire all
    but the newest ``keep`` snapshots through the same sink (None: keep all).

    :param task: the commit task.
    :param context: the task's Airflow context.
    :param hook: the storage hook of the output.
    :param result: the committed snapshot.
    :param keep: how many snapshots to keep (None: all).
    :param summary: what the task returns, completed here.
    """
    output_format = check_output_format(task.output_format)
    if output_format == DEFAULT_OUTPUT_FORMAT:
        _publish_asset_events(context, task.outlets, summary)
        return _expire_older(task, hook, keep, summary)
    published = publish_snapshot(
        result,
        output_format,
        out_uri=hook.resolve_uri(task.output_uri),
        options=task.sink_options,
        storage_options=hook.storage_options,
        keep=keep,
    )
    publication = published.publication
    # OpenLineage: the output is the published Iceberg or Delta table, not the folder
    out_uri = hook.resolve_uri(task.output_uri)
    task._keep_lineage(lambda: lineage.snapshot_lineage(result, out_uri, publication))
    summary = {**summary, **published.summary_fields()}
    task.log.info(
        "Snapshot %s %s as %s (table version %s)",
        result.snapshot_id,
        "published" if publication.newly_published else "was already published",
        publication.asset_uri,
        publication.table_version,
    )
    if publication.table_version is not None:
        Stats.gauge(
            f"{METRIC_PREFIX}.snapshot.table_version",
            publication.table_version,
            tags={"table": publication.asset_uri, "format": output_format},
        )
    _publish_asset_events(context, task.outlets, summary)
    if published.expired is not None:
        task.log.info(
            "Kept %d snapshot(s); expired %d, removing %d file(s)",
            len(published.expired.kept),
            len(published.expired.removed_snapshots),
            len(published.expired.removed_files),
        )
        summary["expired"] = published.expired.to_dict()
    return summary


def _expire_older(
    task: Any, hook: AcidHook, keep: int | None, summary: dict[str, Any]
) -> dict[str, Any]:
    """After a commit: expire all but the newest ``keep`` snapshots (None: keep all)."""
    if keep is None:
        return summary
    expired = expire_snapshots(
        hook.resolve_uri(task.output_uri), keep=keep, storage_options=hook.storage_options
    )
    task.log.info(
        "Kept %d snapshot(s); expired %d, removing %d data file(s)",
        len(expired.kept),
        len(expired.removed_snapshots),
        len(expired.removed_files),
    )
    return {**summary, "expired": expired.to_dict()}


def keep_count(value: int | str | None) -> int | None:
    """``keep_snapshots`` as given or rendered from a template: None, "" or "none" keep all.

    :param value: the ``keep`` argument.
    """
    if value is None or str(value).strip().lower() in ("", "none"):
        return None
    try:
        keep = int(str(value).strip())
    except ValueError:
        keep = 0
    if keep < 1:
        raise ValueError(f"keep_snapshots must be a whole number of at least 1, not {value!r}")
    return keep


def report_of_commit(task: Any, hook: AcidHook, context: Any) -> str | None:
    """The commit task's pruning report: ``report_uri``, else this run's default one when the
    manifest task wrote it (None: there is none).

    :param task: the commit task.
    :param hook: the storage hook of the output.
    :param context: the task's Airflow context.
    """
    given = none_if_blank(task.report_uri)
    if given:
        return hook.resolve_uri(given)
    run_id = context.get("run_id") if hasattr(context, "get") else None
    uri = report_uri_for(manifest_uri_for(hook.resolve_uri(task.output_uri), run_id))
    from ..acid.listing import resolve_filesystem

    fs, path = resolve_filesystem(uri, storage_options=hook.storage_options)
    return uri if fs.exists(path) else None


def add_to_report(task: Any, hook: AcidHook, context: Any, result: Any) -> None:
    """The commit's rows per partition, added to the manifest task's pruning report.

    The snapshot is committed already: a report that cannot be updated is a warning, not a
    failure (retrying the task would not change it).

    :param task: the commit task.
    :param hook: the storage hook of the output.
    :param context: the task's Airflow context.
    :param result: the committed snapshot.
    """
    uri = report_of_commit(task, hook, context)
    if uri is None:
        return
    try:
        written = add_snapshot(uri, result, hook.storage_options)
        task.log.info("Rows per partition added to the pruning report %s", written)
    except (OSError, ValueError) as exc:
        task.log.warning("The pruning report %s was not updated: %s", uri, exc)


def add_failure_to_report(task: Any, hook: AcidHook, context: Any, error: Exception) -> None:
    """A commit that failed shows as failed in the pruning report, with its error (the task
    fails with the error all the same).

    :param task: the commit task.
    :param hook: the storage hook of the output.
    :param context: the task's Airflow context.
    :param error: what the commit raised.
    """
    try:
        uri = report_of_commit(task, hook, context)
        if uri is not None:
            add_failure(uri, f"{type(error).__name__}: {error}", hook.storage_options)
    except (OSError, ValueError) as exc:
        task.log.warning("The pruning report was not marked failed: %s", exc)


def _publish_asset_events(context: Any, outlets: Sequence[Any], summary: Mapping[str, Any]) -> None:
    events = context.get("outlet_events") if hasattr(context, "get") else None
    if not outlets or events is None:
        return
    extra = {
        "snapshot_id": summary["snapshot_id"],
        "rows": summary["rows_written"],
        "files": summary["files"],
        "manifest_path": summary["manifest_path"],
        "max_write_id": summary["max_write_id"],
    }
    for key in ("output_format", "asset_uri", "table_version"):
        if key in summary:
            extra[key] = summary[key]
    for outlet in outlets:
        events[outlet].extra = dict(extra)


def emit_stats(record: Mapping[str, Any], table: str) -> None:
    """Send a run's pruning and compaction figures to Airflow's metrics backend.

    :param record: the metrics record.
    :param table: the table, as the metrics' tag.
    """
    tags = {"table": table, "partition": "all"}
    pruning = record.get("pruning")
    if pruning:
        for name in (
            "partitions_total",
            "partitions_kept",
            "slices_total",
            "slices_kept",
            "files_total",
            "files_candidate",
            "files_not_indexed",
            "bytes_total",
            "bytes_kept",
            "skipping_ratio",
        ):
            Stats.gauge(f"{METRIC_PREFIX}.pruning.{name}", pruning[name], tags=tags)
        # absent from records of manifests written before bucket pruning
        Stats.gauge(
            f"{METRIC_PREFIX}.pruning.slices_pruned_by_bucket",
            pruning.get("slices_pruned_by_bucket", 0),
            tags=tags,
        )
        for name in ("index_read_seconds", "evaluate_seconds", "manifest_seconds"):
            Stats.timing(
                f"{METRIC_PREFIX}.pruning.{name.removesuffix('_seconds')}",
                pruning[name] * 1000.0,
                tags=tags,
            )
    compaction = record.get("compaction")
    if compaction:
        for name in ("rows_read", "rows_deleted", "rows_filtered", "rows_written", "files"):
            Stats.incr(f"{METRIC_PREFIX}.compaction.{name}", compaction.get(name, 0), tags=tags)
        for partition, rows in compaction.get("partitions", {}).items():
            Stats.gauge(
                f"{METRIC_PREFIX}.compaction.partition_rows_written",
                rows,
                tags={"table": table, "partition": partition or "unpartitioned"},
            )
