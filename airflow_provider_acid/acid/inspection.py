"""A resolved read view as plain data (the stable ``--json`` form) and as readable text.

Paths are given relative to the table root, folders and files named as they are on storage.

JSON form, version 1::

    {"format": "airflow-acid/inspect", "version": 1,
     "table": "<root as given>",
     "write_ids": "<Hive string>"|null (null: none given, all committed),
     "txns": "<Hive string>"|null,
     "insert_only": false,
     "partitions": [{"path": "dt=2024-01-01", "values": {"dt": "2024-01-01"},
                     "base": "base_0000005"|null,
                     "deltas": [{"folder": "delta_...", "kind": "delta"|"delete_delta",
                                 "min_write_id": 6, "max_write_id": 6, "statement_id": 0|null,
                                 "validity": "all"|"some", "invalid_write_ids": []}],
                     "slices": [{"key": "dt=2024-01-01#0", "bucket": 0,
                                 "original_files": [...], "base_files": [...],
                                 "delta_files": [...], "delete_delta_files": [...]}],
                     "excluded": [{"path": "...", "reason": "obsolete", "detail": "..."}]}],
     "unrecognised": [{"path": "...", "detail": "..."}],
     "totals": {"partitions": 1, "slices": 4, "files": 12, "bytes": 12345}}

Each file entry is ``{"path": "<relative>", "size": 123}``.
"""

from __future__ import annotations

from typing import Any

from .read_view import DataFile, PartitionReadView, TableReadView

FORMAT = "airflow-acid/inspect"
VERSION = 1


def _relative(snapshot: TableReadView, path: str) -> str:
    prefix = snapshot.root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def _files(snapshot: TableReadView, files: tuple[DataFile, ...]) -> list[dict[str, Any]]:
    return [{"path": _relative(snapshot, f.path), "size": f.file.size} for f in files]


def _partition(snapshot: TableReadView, part: PartitionReadView) -> dict[str, Any]:
    return {
        "path": part.partition.path,
        "values": part.partition.as_dict(),
        "base": part.base.name if part.base else None,
        "deltas": [
            {
                "folder": d.folder.name,
                "kind": d.folder.kind.value,
                "min_write_id": d.folder.min_write_id,
                "max_write_id": d.folder.max_write_id,
                "statement_id": d.folder.statement_id,
                "validity": d.validity.value,
                "invalid_write_ids": list(d.invalid_write_ids),
            }
            for d in part.deltas
        ],
        "slices": [
            {
                "key": s.key,
                "bucket": s.bucket_id,
                "original_files": _files(snapshot, s.original_files),
                "base_files": _files(snapshot, s.base_files),
                "delta_files": _files(snapshot, s.delta_files),
                "delete_delta_files": _files(snapshot, s.delete_delta_files),
            }
            for s in part.slices
        ],
        "excluded": [
            {"path": _relative(snapshot, e.path), "reason": e.reason.value, "detail": e.detail}
            for e in part.excluded
        ],
    }


def read_view_to_dict(snapshot: TableReadView) -> dict[str, Any]:
    """The documented, stable JSON form of a snapshot (see the module docstring)."""
    files = snapshot.files
    return {
        "format": FORMAT,
        "version": VERSION,
        "table": snapshot.root,
        "write_ids": None if snapshot.write_ids.is_all_committed else str(snapshot.write_ids),
        "txns": str(snapshot.txns) if snapshot.txns else None,
        "insert_only": snapshot.insert_only,
        "definition": snapshot.definition.to_dict() if snapshot.definition else None,
        "partitions": [_partition(snapshot, p) for p in snapshot.partitions],
        "unrecognised": [
            {"path": _relative(snapshot, u.path), "detail": u.detail} for u in snapshot.unrecognised
        ],
        "totals": {
            "partitions": len(snapshot.partitions),
            "slices": len(snapshot.slices),
            "files": len(files),
            "bytes": sum(f.file.size for f in files),
        },
    }


def format_read_view(snapshot: TableReadView) -> str:
    """A human-readable report: partitions, slices, chosen and left-out folders with reasons."""
    data = read_view_to_dict(snapshot)
    totals = data["totals"]
    definition = snapshot.definition
    lines = [f"table      {data['table']}"]
    if definition is not None:
        buckets = (
            f", {definition.num_buckets} bucket(s) by {', '.join(definition.bucket_columns)}"
            if definition.bucket_columns
            else ""
        )
        columns = ", ".join(f"{n} {t}" for n, t in definition.columns)
        keys = ", ".join(f"{n} {t}" for n, t in definition.partition_columns)
        read = (
            f"{len(definition.partitions)} of {definition.partitions_total} partition(s) listed"
            if definition.partitions is not None
            else "unpartitioned"
        )
        lines += [
            f"name       {definition.name} in {definition.metastore} "
            f"({definition.transactional_properties}{buckets})",
            f"columns    {columns}" + (f"; partitioned by {keys}" if keys else ""),
            f"listed     {read}",
        ]
    lines += [
        f"write ids  {data['write_ids'] or 'none given: every write present is committed'}"
        + (f"   txns {data['txns']}" if data["txns"] else ""),
        f"totals     {totals['partitions']} partition(s), {totals['slices']} slice(s), "
        f"{totals['files']} file(s), {totals['bytes']:,} bytes",
    ]
    for part in data["partitions"]:
        lines.append("")
        lines.append(f"partition {part['path'] or '<unpartitioned>'}")
        lines.append(f"  base     {part['base'] or '-'}")
        for delta in part["deltas"]:
            flag = (
                ""
                if delta["validity"] == "all"
                else (f"  (partly valid: drop writes {delta['invalid_write_ids']})")
            )
            lines.append(f"  {delta['kind']:<13}{delta['folder']}{flag}")
        for s in part["slices"]:
            counts = ", ".join(
                f"{len(s[k])} {k.removesuffix('_files').replace('_', ' ')}"
                for k in ("original_files", "base_files", "delta_files", "delete_delta_files")
                if s[k]
            )
            lines.append(f"  slice    bucket {s['bucket']:<5} {counts}")
        for e in part["excluded"]:
            lines.append(f"  skipped  {e['path']}  [{e['reason']}] {e['detail']}")
    for u in data["unrecognised"]:
        lines.append(f"unrecognised {u['path']}: {u['detail']}")
    if data["unrecognised"]:
        lines.append(
            "(compact and manifest refuse a table with unrecognised files; "
            "--ignore-unrecognised leaves them out, recorded)"
        )
    return "\n".join(lines)
