"""``python -m airflow_provider_acid.testing OUT``: write the demo Hive ACID table to OUT.

OUT is a local path or any fsspec URL. Prints the table's write-id list and its expected row
count as one JSON line, so scripts (``make demo``, docker-compose's init job) can use them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ..acid.listing import resolve_filesystem
from .demo_table import generate_demo_table


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
    args = parser.parse_args(argv)
    fs, root = resolve_filesystem(args.out, storage_options=json.loads(args.storage_options))
    table = generate_demo_table(
        root,
        filesystem=fs,
        partitions=args.partitions,
        buckets=args.buckets,
        rows_per_bucket=args.rows_per_bucket,
        insert_deltas=args.insert_deltas,
        delete_fraction=args.delete_fraction,
        originals=args.originals,
        seed=args.seed,
    )
    rows = table.expected_rows()
    by_partition: dict[str, int] = {}
    if "dt" in rows.column_names:
        for day in rows.column("dt").to_pylist():
            by_partition[f"dt={day}"] = by_partition.get(f"dt={day}", 0) + 1
    summary = {
        "table": args.out,
        "valid_write_ids": table.valid_write_ids(),
        "expected_rows": rows.num_rows,
        "expected_rows_by_partition": by_partition,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
