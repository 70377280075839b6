"""One record of what a run pruned and compacted: for XCom, a JSON file, and metric backends."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from typing import Any

from ..acid.listing import location_uri, resolve_filesystem
from ..acid.storage import write_whole

RECORD_FORMAT = "airflow-acid/metrics"
RECORD_FILE = "metrics.json"


def metrics_record(
    table_uri: str,
    pruning: Mapping[str, Any] | None = None,
    snapshot: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge a manifest's metrics and a committed snapshot's summary into one record.

    ``pruning`` is :meth:`PruningMetrics.to_dict` (or a manifest summary holding it under
    ``metrics``); ``snapshot`` a compaction summary with ``snapshot_id``, ``totals`` and
    ``partitions`` (rows written per partition).
    """
    if pruning is not None and "metrics" in pruning:
        pruning = pruning["metrics"]
    record: dict[str, Any] = {"format": RECORD_FORMAT, "version": 1, "table": table_uri}
    record["pruning"] = dict(pruning) if pruning else None
    if snapshot:
        record["compaction"] = {
            "snapshot_id": snapshot.get("snapshot_id"),
            "manifest_path": snapshot.get("manifest_path"),
            **dict(snapshot.get("totals", {})),
            "partitions": dict(snapshot.get("partitions", {})),
        }
        if snapshot.get("output_format"):  # published as a table: its snapshot id or version
            record["compaction"]["output_format"] = snapshot["output_format"]
            record["compaction"]["table_version"] = snapshot.get("table_version")
    else:
        record["compaction"] = None
    return record


def write_metrics_record(
    record: Mapping[str, Any],
    out_uri: str,
    snapshot_id: str,
    storage_options: dict[str, Any] | None = None,
) -> str:
    """Write the record beside the snapshot's manifest: ``OUT/_snapshots/<id>/metrics.json``."""
    fs, root = resolve_filesystem(out_uri, storage_options=storage_options)
    path = posixpath.join(root, "_snapshots", snapshot_id, RECORD_FILE)
    write_whole(fs, path, json.dumps(record, indent=1, sort_keys=True).encode())
    return location_uri(fs, path)


def format_record(record: Mapping[str, Any]) -> str:
    """A short human-readable table of the record."""
    lines = [f"table           {record['table']}"]
    pruning = record.get("pruning")
    if pruning:
        lines += [
            f"slices          {pruning['slices_kept']:,} of {pruning['slices_total']:,} kept "
            f"({pruning.get('slices_pruned_by_bucket', 0):,} ruled out by bucket)",
            f"data files      {pruning['files_candidate']:,} of {pruning['files_total']:,} "
            f"candidates ({pruning['files_not_indexed']:,} not indexed)",
            f"bytes           {pruning['bytes_kept']:,} of {pruning['bytes_total']:,} kept",
            f"skipping ratio  {pruning['skipping_ratio']:.1%}",
        ]
    compaction = record.get("compaction")
    if compaction:
        lines += [
            f"snapshot        {compaction['snapshot_id']}",
            f"rows            {compaction.get('rows_read', 0):,} read, "
            f"{compaction.get('rows_deleted', 0):,} deleted, "
            f"{compaction.get('rows_filtered', 0):,} filtered, "
            f"{compaction.get('rows_written', 0):,} written",
            f"files           {compaction.get('files', 0):,} "
            f"({compaction.get('bytes', 0):,} bytes)",
        ]
        for partition, rows in sorted(compaction.get("partitions", {}).items()):
            lines.append(f"  {partition or '<unpartitioned>':<30} {rows:>12,} rows")
    return "\n".join(lines)


def snapshot_summary(result: Any) -> dict[str, Any]:
    """A committed snapshot (``output.SnapshotResult``) as a small JSON-able summary."""
    partitions: dict[str, int] = {}
    for bucket in result.buckets:
        partition = bucket.slice_key.rsplit("#", 1)[0]
        partitions[partition] = partitions.get(partition, 0) + bucket.rows_written
    return {
        "snapshot_id": result.snapshot_id,
        "output_uri": result.out,
        "manifest_path": result.manifest_path,
        "newly_committed": result.newly_committed,
        "sequence": result.sequence,
        "max_write_id": result.max_write_id,
        "rows_written": result.rows_written,
        "files": len(result.files),
        "totals": result.totals(),
        "partitions": partitions,
        # how the source was read: by name (with its pinned lists), or storage-only (warned)
        "table_name": result.table_name,
        "write_ids": result.write_ids,
        "txns": result.txns,
        "warnings": list(result.warnings),
    }
