"""The table the compaction and sinks benchmarks read: generated once, cached under a folder.

``benchmarks/compaction.py`` and ``benchmarks/sinks.py`` both use it; it is written by the
simulator (``airflow_provider_acid.testing``) in a process of its own (:func:`generate_in_child`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DELTA_FRACTION = 0.05
INSERT_DELTAS = 3
DELETE_DELTAS = 3


def _rows(first_id: int, count: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    ones = pa.repeat(pa.scalar(1, pa.int64()), count)
    ids = pc.add(pc.cumulative_sum(ones), pa.scalar(first_id - 1, pa.int64()))
    mixed = pc.bit_wise_and(
        pc.multiply(ids, pa.scalar(2654435761, pa.int64())), pa.scalar(0xFFFFFFF, pa.int64())
    )
    categories = pa.array(["books", "games", "garden", "music", "tools", "toys", "video"])
    category = pc.take(categories, pc.cast(pc.divide(mixed, 38347923), pa.int32()))
    cents = pc.cast(pc.divide(mixed, 97), pa.decimal128(19, 0))
    amount = pc.cast(
        pc.divide(cents, pa.scalar(100, pa.decimal128(3, 0))), pa.decimal128(12, 2), safe=False
    )
    micros = pc.add(pc.multiply(mixed, 1000), 1_704_067_200_000_000)
    note = pc.binary_join_element_wise("order ", pc.cast(ids, pa.string()), "")
    return pa.table(
        {
            "id": ids,
            "category": category,
            "amount": amount,
            "ts": pc.cast(pc.cast(micros, pa.timestamp("us")), pa.timestamp("ns")),
            "note": note,
        }
    )


def generate(
    root: Path,
    buckets: int,
    base_rows: int,
    delta_rows: int,
    delete_rows: int,
    clustered: bool = False,
    stripe_rows: int = 100_000,
) -> str:
    """Write the table (unless already there); returns its valid write-id list.

    Each delete delta deletes about ``delete_rows`` rows: drawn at random from the live rows,
    or, ``clustered``, the base's next ``delete_rows`` ids (``DELETE ... WHERE id <= N``, as a
    retention job on a column that follows insertion order would). ORC stripes hold
    ``stripe_rows`` rows.
    """
    marker = root / "_generated.json"
    if marker.exists():
        return json.loads(marker.read_text())["write_ids"]
    import pyarrow.compute as pc

    from airflow_provider_acid.testing.table_writer import AcidTableWriter

    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    table = AcidTableWriter(
        str(root),
        [
            ("id", "bigint"),
            ("category", "string"),
            ("amount", "decimal(12,2)"),
            ("ts", "timestamp"),
            ("note", "string"),
        ],
        buckets=buckets,
        bucket_by="id",
        table_name="bench",
        stripe_rows=stripe_rows,
    )
    table.insert_overwrite(_rows(1, base_rows))
    next_id = base_rows + 1
    for _ in range(INSERT_DELTAS):
        table.insert(_rows(next_id, delta_rows))
        next_id += delta_rows
    for seed in range(DELETE_DELTAS):
        if clustered:
            table.delete(pc.field("id") <= (seed + 1) * delete_rows)
            continue
        live = table.expected_identities().num_rows
        table.delete(table.sample_identities(delete_rows / live, seed=seed))
    write_ids = table.valid_write_ids()
    marker.write_text(json.dumps({"write_ids": write_ids}))
    print(f"  generated {root} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return write_ids


def generate_in_child(
    root: Path, *sizes: int, clustered: bool = False, stripe_rows: int = 100_000
) -> str:
    """:func:`generate` in its own process: this one stays small, so the peak RSS the kernel
    reports for the measured processes (forked from it) is theirs alone."""
    command = [sys.executable, __file__, "_generate", str(root), *map(str, sizes)]
    command += [str(stripe_rows)] + (["clustered"] if clustered else [])
    output = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
    return output.strip().splitlines()[-1]


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_generate":
        sizes = (int(a) for a in sys.argv[3:7])
        clustered = sys.argv[8:9] == ["clustered"]
        print(generate(Path(sys.argv[2]), *sizes, clustered, int(sys.argv[7])))
    else:
        sys.exit(
            "usage: bench_table.py _generate ROOT BUCKETS BASE_ROWS DELTA_ROWS DELETE_ROWS "
            "STRIPE_ROWS [clustered]"
        )
