"""``airflow-acid``: the provider's library calls from a terminal."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .acid.inspection import format_read_view, read_view_to_dict
from .acid.resolution import resolve_read_view
from .cli_progress import is_terminal, progress_line

if TYPE_CHECKING:
    from .output import SnapshotResult
    from .output.sinks import Publication
from .cli_arguments import (
    IGNORE_UNRECOGNISED_HELP,
    UsageError,
    add_table_arguments,
    check_extras,
    check_out_folder,
    metastore_address,
    print_warnings,
    source_of,
)
from .cli_kerberos import apply_hdfs_settings
from .cli_pruning import add_index_and_manifest

COMPACT_FORMAT = "airflow-acid/compact"


def _inspect(args: argparse.Namespace) -> int:
    from .acid.partition_listing import resolve_partition_specs

    # storage-only, only the partition folders --partition names are listed
    source = source_of(args, partitions=args.partition)
    if args.partition:
        snapshot = resolve_partition_specs(source, args.partition).snapshot
    else:
        snapshot = resolve_read_view(source)
    if args.json:
        print(json.dumps(read_view_to_dict(snapshot), indent=2))
    else:
        print(format_read_view(snapshot))
    return 0


def _byte_size(text: str) -> int:
    """``134217728``, ``128MiB``, ``1GB`` -> bytes."""
    units = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3}
    binary = {"ki": 1024, "mi": 1024**2, "gi": 1024**3}
    value = text.strip().lower().removesuffix("b")
    number = value.rstrip("kmgi")
    unit = value[len(number) :]
    factor = binary.get(unit, units.get(unit))
    if not number.isdigit() or factor is None or int(number) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 134217728 or 128MiB")
    return int(number) * factor


def compact_summary(
    result: SnapshotResult, publication: Publication | None = None
) -> dict[str, Any]:
    """The stable ``--json`` form of ``compact``: the manifest plus where it is; with a
    table-format sink, its block (``"iceberg"`` or ``"delta"``) too."""
    summary = {
        "format": COMPACT_FORMAT,
        "version": 1,
        "out": result.out,
        "manifest_path": result.manifest_path,
        "newly_committed": result.newly_committed,
        "manifest": result.to_dict(),
    }
    if publication is not None and publication.output_format != "parquet":
        summary["output_format"] = publication.output_format
        summary["newly_published"] = publication.newly_published
        summary[publication.output_format] = dict(publication.details)
    return summary


def _at_least_one(text: str) -> int:
    """A whole number of at least 1 (``--workers``)."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def _key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (for ``--iceberg-catalog``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (e.g. type=rest)")
    return key.strip(), value.strip()


def _sink_options(args: argparse.Namespace) -> dict[str, Any]:
    """The table-format sink's options from ``--iceberg-*`` / ``--delta-*``; options of
    another format than ``--format`` are refused, named."""
    fmt = args.output_format
    iceberg: dict[str, Any] = {}
    if args.iceberg_catalog:
        iceberg["catalog"] = dict(args.iceberg_catalog)
    if args.iceberg_table:
        iceberg["table"] = args.iceberg_table
    if args.iceberg_catalog_name:
        iceberg["catalog_name"] = args.iceberg_catalog_name
    delta: dict[str, Any] = {}
    if args.delta_uri:
        delta["uri"] = args.delta_uri
    for name, given in (("iceberg", iceberg), ("delta", delta)):
        if given and fmt != name:
            keys = ("catalog", "table", "catalog_name")
            flags = ", ".join(f"--{name}-{k.replace('_', '-')}" for k in keys if k in given)
            raise UsageError(f"{flags or '--delta-uri'} belong(s) with --format {name}")
    return iceberg if fmt == "iceberg" else delta if fmt == "delta" else {}


def _add_format_arguments(parser: argparse.ArgumentParser) -> None:
    """``--format`` and the table-format sinks' options."""
    from .output.sinks import DEFAULT_OUTPUT_FORMAT, OUTPUT_FORMATS

    group = parser.add_argument_group("output format (the Parquet folder, or a table over it)")
    group.add_argument(
        "--format",
        dest="output_format",
        choices=OUTPUT_FORMATS,
        default=DEFAULT_OUTPUT_FORMAT,
        help="parquet (the folder and its manifests, the default), or also publish the "
        "snapshot as an Iceberg or a Delta Lake table over the same files",
    )
    group.add_argument(
        "--iceberg-catalog",
        action="append",
        type=_key_value,
        metavar="KEY=VALUE",
        help="a pyiceberg catalog property (repeatable), e.g. type=rest uri=http://...; "
        "default: an SQL catalog on SQLite in OUT_URI/_iceberg/catalog.db",
    )
    group.add_argument(
        "--iceberg-table",
        metavar="NS.NAME",
        help="the Iceberg table (default acid.<source table name>)",
    )
    group.add_argument(
        "--iceberg-catalog-name",
        metavar="NAME",
        help="the catalog's name for pyiceberg (default acid; an SQL catalog keeps its tables "
        "under this name, and Java's JdbcCatalog finds them under the same name)",
    )
    group.add_argument(
        "--delta-uri", metavar="URI", help="the Delta table's location (default: OUT_URI)"
    )


def format_compaction(result: SnapshotResult) -> str:
    """A readable summary of a committed snapshot."""
    totals = result.totals()
    state = "committed now" if result.newly_committed else "already committed, nothing written"
    lines = [
        f"snapshot   {result.snapshot_id}  ({state}, sequence {result.sequence})",
        f"manifest   {result.manifest_path}",
        f"table      {result.table_name + ' at ' if result.table_name else ''}{result.table}",
        f"write ids  {result.write_ids or 'none given: every write present is committed'}",
        f"rows       {totals['rows_read']:,} read, {totals['rows_invalid']:,} of invalid writes, "
        f"{totals['rows_deleted']:,} deleted, {totals['rows_filtered']:,} filtered, "
        f"{totals['rows_written']:,} written",
        f"files      {totals['files']} ({totals['bytes']:,} bytes) in {totals['slices']} "
        f"slice(s), {totals['slices_reused']} reused",
    ]
    if result.buckets:
        width = max(len("slice"), *(len(b.slice_key) for b in result.buckets))
        lines.append("")
        lines.append(
            f"{'slice':<{width}}  {'read':>12} {'deleted':>10} {'written':>12} {'files':>5}"
        )
        for b in result.buckets:
            reused = f"  (reused from {b.reused_from})" if b.reused_from else ""
            lines.append(
                f"{b.slice_key:<{width}}  {b.rows_read:>12,} {b.rows_deleted:>10,} "
                f"{b.rows_written:>12,} {len(b.files):>5}{reused}"
            )
    return "\n".join(lines)


def _compact(args: argparse.Namespace) -> int:
    from .engine.compaction import compact_table
    from .engine.options import CompactionOptions
    from .output.sinks import check_sink

    sink_options = _sink_options(args)
    check_out_folder(args.out)
    check_sink(  # bad sink options fail before any work
        args.output_format, args.out, options=sink_options, timestamp_unit=args.timestamp_unit
    )
    options = CompactionOptions(
        compression=args.compression,
        target_file_size=args.target_file_size,
        include_identity=args.include_identity,
        timestamp_unit=args.timestamp_unit,
        reuse=not args.no_reuse,
        max_workers=args.workers,
        ignore_unrecognised=args.ignore_unrecognised,
    )
    if args.manifest:
        from .engine.manifest_compaction import compact_manifest

        if args.table_uri or args.table or args.valid_write_ids or args.partition or args.bucket:
            raise UsageError(
                "--manifest names the table, write-id list and slices: drop TABLE_URI, "
                "--table, --valid-write-ids, --partition and --bucket"
            )
        result = compact_manifest(args.manifest, args.out, options=options)
    elif not args.table_uri and not args.table:
        raise UsageError("name TABLE_URI, --table with --metastore, or --manifest FILE")
    else:
        with _read_transaction(args) as txn_id, progress_line(args.quiet) as progress:
            source = source_of(args, partitions=args.partition, current_txn=txn_id)
            result = compact_table(
                source,
                args.out,
                partitions=args.partition,
                buckets=args.bucket,
                options=options,
                progress=progress,
            )
    print_warnings(args, result.warnings)
    publication = None
    if args.output_format != "parquet":
        from .output.sinks import publish_snapshot

        publication = publish_snapshot(
            result, args.output_format, out_uri=args.out, options=sink_options
        ).publication
    if args.json:
        print(json.dumps(compact_summary(result, publication), indent=2))
    else:
        print(format_compaction(result))
        if publication is not None:
            print(format_publication(publication))
    return 0


def format_publication(publication: Publication) -> str:
    """One line naming the table a snapshot was published to."""
    state = "published now" if publication.newly_published else "already published"
    version = "snapshot" if publication.output_format == "iceberg" else "version"
    return (
        f"{publication.output_format:<10} {publication.asset_uri}  "
        f"({version} {publication.table_version}, {state})"
    )


@contextmanager
def _read_transaction(args: argparse.Namespace) -> Iterator[int | None]:
    """By name, a read transaction held (with heartbeats) while the whole snapshot is read in
    this process: Hive's Cleaner then keeps every file the read view needs."""
    address = metastore_address(args) if args.table else None
    if address is None:
        yield None
        return
    from .metastore.transactions import ReadTransaction

    with ReadTransaction(address) as txn:
        yield txn.txn_id


def _expire(args: argparse.Namespace) -> int:
    from .output.sinks import open_sink

    sink = open_sink(args.output_format, args.out_uri, options=_sink_options(args))
    result = sink.expire(args.keep)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(f"kept       {', '.join(result.kept) or 'no committed snapshot'}")
        print(f"expired    {', '.join(result.removed_snapshots) or 'none'}")
        print(f"removed    {len(result.removed_files):,} data file(s)")
    return 0


def _add_expire(commands: Any, common: argparse.ArgumentParser) -> None:
    expire = commands.add_parser(
        "expire",
        parents=[common],
        help="keep the newest committed snapshots of an output folder, delete the rest",
        description="Delete older snapshots' manifests and every data file no kept snapshot "
        "references; with --keep 1 a plain folder read of OUT_URI is exactly the latest "
        "snapshot. Files of a snapshot still being written are left alone.",
    )
    expire.add_argument("out_uri", metavar="OUT_URI", help="the snapshots' output location")
    expire.add_argument(
        "--keep", type=int, default=1, metavar="N", help="snapshots to keep (default: 1)"
    )
    _add_format_arguments(expire)
    expire.add_argument("--json", action="store_true", help="stable JSON output for scripts")
    expire.set_defaults(run=_expire)


def _add_compact(commands: Any, common: argparse.ArgumentParser) -> None:
    compact = commands.add_parser(
        "compact",
        parents=[common],
        help="write and commit a clean Parquet snapshot of the table",
        description="Anti-join each bucket's rows with its delete keys and write Parquet under "
        "OUT_URI; the manifest OUT_URI/_snapshots/<id>/manifest.json is the commit point.",
    )
    add_table_arguments(compact)
    compact.add_argument(
        "--manifest",
        metavar="FILE",
        help="compact only the slices a slice manifest kept, filtering rows by its predicate",
    )
    compact.add_argument("--out", required=True, metavar="OUT_URI", help="output folder")
    compact.add_argument(
        "--insert-only", action="store_true", help="the table is insert-only (no ACID columns)"
    )
    compact.add_argument(
        "--partition",
        action="append",
        metavar="K=V[/K=V]",
        help="only this partition (repeatable; a partial spec matches every partition under it)",
    )
    compact.add_argument(
        "--bucket", action="append", type=int, metavar="N", help="only this bucket (repeatable)"
    )
    compact.add_argument(
        "--include-identity",
        action="store_true",
        help="also write each row's identity as _acid_* columns",
    )
    compact.add_argument(
        "--target-file-size",
        type=_byte_size,
        default=256 * 1024**2,
        metavar="SIZE",
        help="start a new file after this many bytes (default 256MiB)",
    )
    compact.add_argument("--compression", default="zstd", help="Parquet codec (default zstd)")
    compact.add_argument(
        "--timestamp-unit",
        choices=("ms", "us", "ns"),
        default="us",
        help="unit of timestamp columns (default us, what Spark reads)",
    )
    compact.add_argument(
        "--no-reuse",
        action="store_true",
        help="rewrite every bucket instead of reusing unchanged ones of the latest snapshot",
    )
    compact.add_argument(
        "--workers", type=_at_least_one, metavar="N", help="buckets compacted at once"
    )
    compact.add_argument(
        "--ignore-unrecognised", action="store_true", help=IGNORE_UNRECOGNISED_HELP
    )
    _add_format_arguments(compact)
    compact.add_argument("--json", action="store_true", help="stable JSON output for scripts")
    compact.set_defaults(run=_compact)


def _global_options(parser: argparse.ArgumentParser, default: Any) -> None:
    """``--debug`` and ``--quiet``, accepted before and after the subcommand.

    After it they default to "not given" (``SUPPRESS``): a subcommand's default must not
    overwrite what was given before the subcommand.
    """
    parser.add_argument(
        "--debug", action="store_true", default=default, help="show the traceback on errors"
    )
    parser.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        default=default,
        help="no progress line (it is drawn on stderr only when stderr is a terminal)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow-acid",
        description="Hive ACID tables to clean Parquet snapshots, straight from storage.",
    )
    _global_options(parser, False)
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True)

    inspect = commands.add_parser(
        "inspect",
        parents=[common],
        help="show the snapshot: partitions, bucket slices, chosen and skipped folders",
    )
    add_table_arguments(inspect)
    inspect.add_argument(
        "--insert-only", action="store_true", help="the table is insert-only (no ACID columns)"
    )
    inspect.add_argument(
        "--partition",
        action="append",
        metavar="K=V[/K=V]",
        help="only this partition, the only one listed (repeatable; a partial spec matches "
        "every partition under it)",
    )
    inspect.add_argument("--json", action="store_true", help="stable JSON output for scripts")
    inspect.set_defaults(run=_inspect)
    _add_compact(commands, common)
    add_index_and_manifest(commands, common)
    _add_expire(commands, common)
    from .cli_changes import add_changes_command

    add_changes_command(commands, common)
    return parser


#: What a user can cause and fix (bad arguments, locations, credentials, table contents): the
#: library's errors all derive from these (``TableLocationError``, ``WriteIdListError``,
#: ``PredicateError``, ``CommitError``, ...). Anything else is reported as unexpected.
USER_ERRORS = (OSError, ValueError, RuntimeError)
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())  # messages from storage clients may span lines
    if not is_terminal(sys.stderr):  # e.g. the SQL parser underlines the bad token
        text = _ANSI_ESCAPE.sub("", text)
    return text or type(exc).__name__


#: storage clients' credential errors (botocore's), which derive from none of USER_ERRORS
CREDENTIAL_ERRORS = ("NoCredentialsError", "PartialCredentialsError", "NoAuthTokenError")


def _hint(exc: BaseException, command: str = "") -> str:
    debug = "run with --debug for the traceback"
    from .pruning.expressions import PredicateError

    if isinstance(exc, (UsageError, PredicateError)):
        return f"hint: see airflow-acid {command} --help".replace("  ", " ")
    if type(exc).__name__ in CREDENTIAL_ERRORS:
        return f"hint: give the storage's credentials (environment, profile or options); {debug}"
    if not isinstance(exc, USER_ERRORS):
        return f"hint: an unexpected error; {debug} (and report it if it is a bug)"
    if isinstance(exc, PermissionError):
        return f"hint: check the credentials and permissions for that location; {debug}"
    return f"hint: {debug}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        from .engine.memory_pool import use_worker_memory_pool
        from .engine.pandas_probe import keep_pandas_unimported

        keep_pandas_unimported()  # before any conversion: pyarrow would import pandas (43 MiB)
        check_extras(args)
        apply_hdfs_settings(args)  # every location of every command: table, --manifest, --out
        use_worker_memory_pool()  # a lean pool for the rows it reads and writes
        return run(args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        done = (
            "; nothing was committed, run it again to finish" if args.command == "compact" else ""
        )
        print(f"airflow-acid {args.command}: interrupted{done}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI's last resort: one line, not a traceback
        if args.debug:
            raise
        message = _one_line(exc)
        if not isinstance(exc, USER_ERRORS):
            message = f"{type(exc).__name__}: {message}"
        print(f"airflow-acid {args.command}: error: {message}", file=sys.stderr)
        print(_hint(exc, args.command), file=sys.stderr)
        return EXIT_ERROR


def console_main() -> None:
    """The ``airflow-acid`` command: :func:`main`, then the process ends without running the
    native libraries' static destructors. Their teardown at interpreter exit (pyarrow's and
    ORC's threads) sometimes aborted a finished ``changes`` run with "terminate called
    without an active exception" (exit 134) after its output was complete; everything
    Python-side is flushed and shut down first."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    console_main()
