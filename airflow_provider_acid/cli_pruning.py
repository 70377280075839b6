"""The CLI's pruning commands: ``airflow-acid index`` (refresh the column-stats index) and
``airflow-acid manifest`` (the slice manifest for a predicate), with their arguments.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass
from .cli_arguments import (
    IGNORE_UNRECOGNISED_HELP,
    UsageError,
    add_table_arguments,
    print_warnings,
    source_of,
)


def _index(args: argparse.Namespace) -> int:
    from .acid.listing import resolve_filesystem
    from .acid.partition_listing import resolve_partition_specs
    from .pruning.manifest import default_index_uri, refresh_index

    source = source_of(args, partitions=args.partition)
    fs, root = resolve_filesystem(source.location)
    # with --partition, only those partitions are listed and refreshed; the others stay indexed
    scoped = resolve_partition_specs(source, args.partition, filesystem=fs)
    snapshot = scoped.snapshot
    index_uri = args.index or default_index_uri(args.out or f"{root.rstrip('/')}_acid")
    from .acid.table_columns import table_columns

    result = refresh_index(
        snapshot,
        fs,
        index_uri,
        table_columns=table_columns(snapshot, fs).names,
        scope=scoped.scope(fs),
    )
    summary = {
        "format": "airflow-acid/index",
        "version": 1,
        "index": index_uri,
        "added": result.added,
        "kept": result.kept,
        "removed": result.removed,
        "index_version": result.version,
        "failed": [{"path": p, "error": e} for p, e in result.failed],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"index {index_uri} (version {result.version}): {result.added} file(s) added, "
            f"{result.kept} kept, {result.removed} removed"
        )
        for path, error in result.failed:
            print(f"  not indexed (kept as unknown): {path}: {error}")
    return 0


def format_metrics(metrics: dict[str, Any]) -> str:
    """The pruning metrics as a short table."""
    rows = [
        ("partitions", f"{metrics['partitions_kept']:,} of {metrics['partitions_total']:,} kept"),
        ("slices", f"{metrics['slices_kept']:,} of {metrics['slices_total']:,} kept"),
        (
            "data files",
            f"{metrics['files_candidate']:,} of {metrics['files_total']:,} candidates, "
            f"{metrics['files_not_indexed']:,} not indexed",
        ),
        ("bytes", f"{metrics['bytes_kept']:,} of {metrics['bytes_total']:,} kept"),
        ("skipping ratio", f"{metrics['skipping_ratio']:.1%}"),
        (
            "time",
            f"index read {metrics['index_read_seconds']:.3f} s, evaluate "
            f"{metrics['evaluate_seconds']:.3f} s, manifest {metrics['manifest_seconds']:.3f} s",
        ),
    ]
    return "\n".join(f"{name:<15}{value}" for name, value in rows)


def _manifest(args: argparse.Namespace) -> int:
    from .pruning.manifest import compute_manifest
    from .pruning.manifest_files import write_manifest

    if args.refresh and not args.index:
        raise UsageError("--refresh refreshes the index at --index: give --index URI")
    manifest = compute_manifest(
        source_of(args, where=args.where),
        args.where,
        index_uri=args.index,
        refresh=args.refresh,
        granularity=args.granularity,
        ignore_unrecognised=args.ignore_unrecognised,
        bucketing=_bucketing_option(args),
    )
    path = write_manifest(manifest, args.out) if args.out else None
    print_warnings(args, manifest.warnings)
    if args.json:
        print(
            json.dumps(
                {**manifest.header(), "manifest_path": path, "slice_keys": manifest.slice_keys},
                indent=2,
            )
        )
    else:
        print(f"predicate      {manifest.predicate}")
        print(format_metrics(manifest.metrics.to_dict()))
        if manifest.metrics.slices_pruned_by_bucket:
            print(
                f"{'by bucket':<15}{manifest.metrics.slices_pruned_by_bucket:,} slice(s) "
                "ruled out by Hive's bucketing hash"
            )
        if path:
            print(f"manifest       {path}")
    return 0


def _bucketing_option(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--bucketed-by``, ``--buckets`` and ``--bucketing-version`` as ``compute_manifest``'s
    ``bucketing`` option (None when not given)."""
    if args.bucketed_by is None and args.buckets is None:
        if args.bucketing_version is not None:
            raise UsageError("--bucketing-version needs --bucketed-by and --buckets")
        return None
    if not args.bucketed_by or not args.buckets:
        raise UsageError("--bucketed-by and --buckets go together")
    return {
        "columns": [c.strip() for c in args.bucketed_by.split(",") if c.strip()],
        "buckets": args.buckets,
        "version": args.bucketing_version or 2,
    }


def add_index_and_manifest(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``index`` and ``manifest`` commands.

    :param commands: the subparsers of ``airflow-acid``.
    :param common: the parser of the options every command takes.
    """
    index = commands.add_parser(
        "index",
        parents=[common],
        help="build or refresh the column-stats index of a table's data files",
    )
    add_table_arguments(index)
    index.add_argument(
        "--index", metavar="URI", help="index location (default: OUT_URI/_index, see --out)"
    )
    index.add_argument(
        "--out",
        metavar="OUT_URI",
        help="output root whose _index folder holds the index (default: TABLE_URI_acid)",
    )
    index.add_argument(
        "--partition",
        action="append",
        metavar="K=V[/K=V]",
        help="refresh only this partition, the only one listed; the others stay indexed "
        "(repeatable; a partial spec matches every partition under it)",
    )
    index.add_argument("--json", action="store_true", help="stable JSON output for scripts")
    index.set_defaults(run=_index)

    manifest = commands.add_parser(
        "manifest",
        parents=[common],
        help="write the pruned slice manifest of a predicate and print its metrics",
    )
    add_table_arguments(manifest)
    manifest.add_argument(
        "--where", required=True, metavar="SQL", help='SQL WHERE fragment, e.g. "amount > 100"'
    )
    manifest.add_argument("--index", metavar="URI", help="column-stats index location")
    manifest.add_argument(
        "--refresh", action="store_true", help="refresh the index first (needs --index)"
    )
    manifest.add_argument(
        "--granularity", choices=("slice", "file"), default="slice", help="what is dropped"
    )
    manifest.add_argument(
        "--out", metavar="FILE", help="write the manifest here (.json, .jsonl or .parquet)"
    )
    manifest.add_argument(
        "--ignore-unrecognised", action="store_true", help=IGNORE_UNRECOGNISED_HELP
    )
    manifest.add_argument(
        "--bucketed-by",
        metavar="COL[,COL]",
        help="the table's CLUSTERED BY columns, for bucket pruning when it is read storage-only "
        "(by name, the metastore's bucketing is used)",
    )
    manifest.add_argument(
        "--buckets", type=int, metavar="N", help="the table's number of buckets (--bucketed-by)"
    )
    manifest.add_argument(
        "--bucketing-version",
        type=int,
        choices=(1, 2),
        metavar="V",
        help="Hive's bucketing_version of the table: 2 (Murmur3, Hive 3's default) or 1",
    )
    manifest.add_argument("--json", action="store_true", help="stable JSON output for scripts")
    manifest.set_defaults(run=_manifest)
