"""``airflow-acid changes``: the change feed between two write ids, from a terminal."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .cli_arguments import add_table_arguments, source_of


def format_feed(feed: Any) -> str:
    """The human form: the range, the counts, where the files are, the warnings."""
    counts = ", ".join(f"{n} {t}" for t, n in feed.to_dict()["counts"].items())
    lines = [
        f"changes ({feed.from_write_id}, {feed.to_write_id}] of {feed.result.table}: {counts}",
        f"out {feed.out}: {len(feed.files)} file(s), manifest {feed.result.manifest_path}",
    ]
    lines += [f"warning: {w}" for w in feed.warnings]
    return "\n".join(lines)


def _key_columns(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names no column (COL[,COL...])")
    return names


def _deliver(feed: Any, args: argparse.Namespace) -> Any:
    from .engine.change_diff import find_identity_snapshot
    from .output.delta_changes import deliver_to_delta, delta_watermark

    initial = None
    if args.identity_snapshot and delta_watermark(args.delta_uri) is None:
        initial = find_identity_snapshot(
            args.identity_snapshot, feed.result.table, feed.from_write_id
        ).result
    return deliver_to_delta(feed.result, args.delta_uri, initial_snapshot=initial)


def add_changes_command(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register ``changes``.

    :param commands: the CLI's subparsers.
    :param common: the options every command takes.
    """
    parser = commands.add_parser(
        "changes",
        parents=[common],
        help="the rows inserted, deleted and updated between two write ids (a change feed)",
    )
    add_table_arguments(parser)
    parser.add_argument(
        "--from-write-id",
        type=int,
        metavar="A",
        help="the write the feed starts after (the snapshot it applies to); default: the "
        "last write a feed already delivered into --out",
    )
    parser.add_argument(
        "--to-write-id",
        type=int,
        metavar="B",
        help="the last write the feed covers (default: the high watermark; above it is an error)",
    )
    parser.add_argument("--out", required=True, metavar="OUT", help="the feed's output folder")
    parser.add_argument(
        "--key",
        type=_key_columns,
        metavar="COL[,COL...]",
        help="the table's key: a delete and an insert of one key by one write are an update",
    )
    parser.add_argument(
        "--net",
        action="store_true",
        help="leave out rows both inserted and deleted inside the range",
    )
    parser.add_argument(
        "--no-delete-values",
        dest="delete_values",
        action="store_false",
        help="give a delete the deleted row's identity only (not its values, read from the "
        "base): only the range's deltas are read; apply such a feed by identity",
    )
    parser.add_argument(
        "--identity-snapshot",
        metavar="FOLDER",
        help="a snapshot folder holding the provider's snapshot at A written with "
        "--include-identity: used where Hive compacted inside the range",
    )
    parser.add_argument(
        "--delta-uri",
        metavar="URI",
        help="also deliver the feed to this Delta table (change data feed on; created from "
        "--identity-snapshot's snapshot at A, or empty), one version per write",
    )
    parser.add_argument("--json", action="store_true", help="stable JSON output for scripts")

    def run(args: argparse.Namespace) -> int:
        from .engine.change_runs import compute_changes

        feed = compute_changes(
            source_of(args),
            args.out,
            from_write_id=args.from_write_id,
            to_write_id=args.to_write_id,
            key=args.key or (),
            net=args.net,
            delete_values=args.delete_values,
            identity_snapshot=args.identity_snapshot,
        )
        summary = feed.to_dict()
        if args.delta_uri:
            summary["delta"] = _deliver(feed, args).to_dict()
        if args.json:
            print(json.dumps(summary, indent=2))
        else:
            print(format_feed(feed))
            if args.delta_uri:
                print(f"delta {args.delta_uri}: versions {summary['delta']['versions']}")
        return 0

    parser.set_defaults(run=run)
