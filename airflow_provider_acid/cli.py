"""``airflow-acid``: the provider's library calls from a terminal."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from .acid.inspection import format_snapshot, snapshot_to_dict
from .acid.snapshot import resolve_snapshot


def _inspect(args: argparse.Namespace) -> int:
    snapshot = resolve_snapshot(
        args.table_uri,
        args.valid_write_ids,
        args.valid_txns,
        insert_only=args.insert_only,
    )
    if args.json:
        print(json.dumps(snapshot_to_dict(snapshot), indent=2))
    else:
        print(format_snapshot(snapshot))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow-acid",
        description="Hive ACID tables to clean Parquet snapshots, straight from storage.",
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback on errors")
    commands = parser.add_subparsers(dest="command", required=True)

    inspect = commands.add_parser(
        "inspect", help="show the snapshot: partitions, bucket slices, chosen and skipped folders"
    )
    inspect.add_argument("table_uri", help="table or partition location (path or fsspec URL)")
    inspect.add_argument(
        "--valid-write-ids",
        metavar="S",
        help="Hive write-id list, e.g. 'db.t:5:9223372036854775807::3' (default: all committed)",
    )
    inspect.add_argument(
        "--valid-txns", metavar="S", help="Hive transaction list, e.g. '20:9223372036854775807::'"
    )
    inspect.add_argument(
        "--insert-only", action="store_true", help="the table is insert-only (no ACID columns)"
    )
    inspect.add_argument("--json", action="store_true", help="stable JSON output for scripts")
    inspect.set_defaults(run=_inspect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except (OSError, ValueError, RuntimeError) as exc:
        if args.debug:
            raise
        print(f"airflow-acid {args.command}: error: {exc}", file=sys.stderr)
        print("hint: run with --debug for the traceback", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
