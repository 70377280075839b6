"""``python -m airflow_provider_acid.testing OUT``: write the demo Hive ACID table to OUT.

OUT is a local path or any fsspec URL. Prints the table's write-id list and its expected row
count as one JSON line, so scripts (``make demo``, docker-compose's init job) can use them.

With ``--metastore thrift://HOST:PORT --table DB.NAME`` the table is also registered in that
Hive Metastore and written under its transactions and write ids (see
:mod:`.metastore_tables`): the demo's writes are committed there, then one more write (an
insert into every partition) is aborted and one is left open, both with their files on
storage. The JSON then also gives ``table_name``, ``metastore``, ``valid_write_ids`` (the
metastore's), ``expected_rows`` (what a reader with the metastore's view sees) and
``rows_on_storage`` (what a storage-only read returns: aborted and open writes as data).
The open write's transaction stays open after the process exits (until the metastore's
transaction timeout).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ..acid.listing import resolve_filesystem
from .demo_table import generate_demo_table


def _by_partition(rows: pa.Table) -> dict[str, int]:
    by_partition: dict[str, int] = {}
    if "dt" in rows.column_names:
        for day in rows.column("dt").to_pylist():
            by_partition[f"dt={day}"] = by_partition.get(f"dt={day}", 0) + 1
    return by_partition


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_acid.testing")
    parser.add_argument("out", help="where to write the table (path or fsspec URL)")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--rows-per-bucket", type=int, default=5_000)
    parser.add_argument("--insert-deltas", type=int, default=3)
    parser.add_argument("--delete-fraction", type=float, default=0.05)
    parser.add_argument("--originals", action="store_true", help="start from pre-ACID files")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--storage-options", default="{}", help="fsspec storage options as a JSON object"
    )
    parser.add_argument(
        "--metastore",
        metavar="URI",
        help="register the table in this Hive Metastore (thrift://HOST:PORT) and write it "
        "under its transactions; needs --table",
    )
    parser.add_argument(
        "--table", metavar="DB.NAME", help="the table's name in the metastore (with --metastore)"
    )
    args = parser.parse_args(argv)
    if (args.metastore is None) != (args.table is None):
        parser.error("--metastore and --table go together")
    fs, root = resolve_filesystem(args.out, storage_options=json.loads(args.storage_options))
    options: dict[str, Any] = {
        "filesystem": fs,
        "partitions": args.partitions,
        "buckets": args.buckets,
        "rows_per_bucket": args.rows_per_bucket,
        "insert_deltas": args.insert_deltas,
        "delete_fraction": args.delete_fraction,
        "originals": args.originals,
        "seed": args.seed,
    }
    if args.metastore is not None:
        summary = _write_registered(args, root, options)
    else:
        table = generate_demo_table(root, **options)
        rows = table.expected_rows()
        summary = {
            "table": args.out,
            "valid_write_ids": table.valid_write_ids(),
            "expected_rows": rows.num_rows,
            "expected_rows_by_partition": _by_partition(rows),
        }
    print(json.dumps(summary))
    return 0


def _write_registered(args: argparse.Namespace, root: str, options: dict[str, Any]) -> dict:
    """The demo table registered in the metastore, plus one aborted and one open write."""
    from ..metastore.client import MetastoreClient, split_table_name
    from .metastore_tables import RegisteredTable, register_table, storage_only_rows
    from .write_history import WriteState

    db, name = split_table_name(args.table)
    registered: list[RegisteredTable] = []
    with MetastoreClient(args.metastore) as client:
        table = generate_demo_table(
            root,
            **options,
            database=db,
            table_name=name,
            prepare=lambda writer: registered.append(register_table(client, writer)),
            final_aborted_writes=1,
            open_writes=1,
        )
        view = registered[0].check_view()  # the metastore and the simulator agree
        rows = table.expected_rows(str(view.write_ids))
        on_storage = storage_only_rows(table)
        history = registered[0].history
        return {
            "table": args.out,
            "table_name": table.full_name,
            "metastore": client.address.uri,
            "location": registered[0].location,
            "valid_write_ids": str(view.write_ids),
            "valid_txns": str(view.txns),
            "expected_rows": rows.num_rows,
            "expected_rows_by_partition": _by_partition(rows),
            "rows_on_storage": on_storage.num_rows,
            "rows_on_storage_by_partition": _by_partition(on_storage),
            "aborted_write_ids": list(view.write_ids.aborted_ids),
            "open_write_ids": list(view.write_ids.open_ids),
            "open_txn_ids": history.txn_ids(WriteState.OPEN),
        }


if __name__ == "__main__":
    sys.exit(main())
