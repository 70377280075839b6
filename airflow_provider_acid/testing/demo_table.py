"""The demo table: a realistic full-ACID table with a few writes of each kind.

What ``python -m airflow_provider_acid.testing OUT`` writes, and what the demo, the benchmarks
and the end-to-end runs read.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .bucketing import hive_bucket_ids
from .row_history import arange
from .table_writer import AcidTableWriter

DEMO_CATEGORIES = ("books", "games", "garden", "music", "outdoor", "tools", "toys", "video")
_DEMO_EPOCH_NS = 1_704_067_200 * 1_000_000_000  # 2024-01-01T00:00:00


def _demo_rows(first_id: int, count: int, partition_value: str | None, salt: int) -> pa.Table:
    """``count`` deterministic pseudo-random demo rows with ids ``first_id ..``."""
    ids = arange(count, first_id)
    mixed = pc.multiply(
        pc.cast(pc.add(ids, salt * 7919 + 1), pa.uint64()),
        pa.scalar(0x9E3779B97F4A7C15, pa.uint64()),
    )
    mixed = pc.bit_wise_xor(mixed, pc.shift_right(mixed, pa.scalar(29, pa.uint64())))

    def mod(x: pa.Array, m: int) -> pa.Array:
        return pc.subtract(
            x, pc.multiply(pc.divide(x, pa.scalar(m, pa.uint64())), pa.scalar(m, pa.uint64()))
        )

    category = pc.take(
        pa.array(DEMO_CATEGORIES), pc.cast(mod(mixed, len(DEMO_CATEGORIES)), pa.int32())
    )
    cents = pc.cast(mod(pc.shift_right(mixed, pa.scalar(8, pa.uint64())), 1_000_000), pa.int64())
    amount = pc.cast(
        pc.divide(pc.cast(cents, pa.decimal128(19, 0)), pa.scalar(100, pa.decimal128(3, 0))),
        pa.decimal128(12, 2),
    )
    millis = pc.cast(mod(pc.shift_right(mixed, pa.scalar(20, pa.uint64())), 86_400_000), pa.int64())
    ts_ns = pc.add(pc.multiply(millis, 1_000_000), _DEMO_EPOCH_NS + salt * 86_400 * 1_000_000_000)
    ts = pc.cast(ts_ns, pa.timestamp("ns"))
    note_text = pc.binary_join_element_wise("order ", pc.cast(ids, pa.string()), "")
    note = pc.if_else(
        pc.equal(mod(mixed, 10), pa.scalar(0, pa.uint64())), pa.scalar(None, pa.string()), note_text
    )
    columns = {"id": ids, "category": category, "amount": amount, "ts": ts, "note": note}
    if partition_value is not None:
        columns["dt"] = pa.repeat(pa.scalar(partition_value), count)
    return pa.table(columns)


def generate_demo_table(
    root: str,
    *,
    partitions: int = 2,
    buckets: int = 4,
    rows_per_bucket: int = 500_000,
    insert_deltas: int = 3,
    delete_fraction: float = 0.05,
    updates: bool = True,
    originals: bool = False,
    aborted_writes: int = 0,
    seed: int = 0,
    filesystem: Any = None,
    stripe_rows: int = 100_000,
    compression: str = "zlib",
    database: str = "default",
    table_name: str | None = None,
    prepare: Callable[[AcidTableWriter], Any] | None = None,
    final_aborted_writes: int = 0,
    open_writes: int = 0,
) -> AcidTableWriter:
    """Write a realistic full-ACID demo table and return its writer (for the expected rows).

    Columns ``id bigint, category string, amount decimal(12,2), ts timestamp, note string``,
    partitioned by ``dt`` (``2024-01-01``, ...), bucketed by ``id`` into ``buckets`` buckets.

    * write 1: INSERT OVERWRITE of about ``rows_per_bucket`` rows per bucket and partition into
      ``base_0000001`` (with ``originals``: pre-ACID ``00000B_0`` + ``_copy_1`` files instead);
    * ``insert_deltas`` writes each adding 2% new rows (``delta_W_W_0000``);
    * one write deleting ``delete_fraction`` of the rows (``delete_delta_W_W_0000``);
    * with ``updates``, one write updating ``delete_fraction / 2`` of the rows (delete delta plus
      insert delta of the same write);
    * ``aborted_writes`` aborted inserts whose files stay on storage;
    * then, after all of the above (which they leave as it is), ``final_aborted_writes`` aborted
      inserts and ``open_writes`` inserts left open (their transactions never committed), each of
      about a quarter of an insert delta into every partition, their files on storage.

    ``database`` and ``table_name`` name the table (its valid write-id list's name);
    ``prepare`` is called with the writer before its first write (e.g. to register the table in
    a metastore: :func:`~.metastore_tables.register_table`).
    """
    rng = random.Random(seed)
    table = AcidTableWriter(
        root,
        [
            ("id", "bigint"),
            ("category", "string"),
            ("amount", "decimal(12,2)"),
            ("ts", "timestamp"),
            ("note", "string"),
        ],
        partition_columns=[("dt", "string")],
        buckets=buckets,
        bucket_by="id",
        filesystem=filesystem,
        stripe_rows=stripe_rows,
        compression=compression,
        seed=seed,
        database=database,
        table_name=table_name,
    )
    if prepare is not None:
        prepare(table)
    days = [(dt.date(2024, 1, 1) + dt.timedelta(days=d)).isoformat() for d in range(partitions)]
    per_partition = rows_per_bucket * buckets
    next_id = 1

    def batch(count: int, salt: int) -> pa.Table:
        nonlocal next_id
        parts = []
        for day in days:
            parts.append(_demo_rows(next_id, count, day, salt + seed))
            next_id += count
        return pa.concat_tables(parts)

    if originals:
        for day in days:
            rows = _demo_rows(next_id, per_partition, None, seed)
            next_id += per_partition
            bucket_of = hive_bucket_ids([rows["id"]], ["bigint"], buckets)
            for b in range(buckets):
                table.add_original_files(
                    rows.filter(pc.equal(bucket_of, b)), b, copies=1, partition={"dt": day}
                )
    else:
        table.insert_overwrite(batch(per_partition, 0))
    delta_rows = max(1, per_partition // 50)
    for i in range(insert_deltas):
        table.insert(batch(delta_rows, i + 1))
    for i in range(aborted_writes):
        txn = table.begin()
        txn.insert(batch(max(1, delta_rows // 4), 100 + i))
        txn.abort()
    if delete_fraction > 0:
        table.delete(table.sample_identities(delete_fraction, seed=rng.randrange(1 << 30)))
    if updates and delete_fraction > 0:
        targets = table.sample_identities(delete_fraction / 2, seed=rng.randrange(1 << 30))
        table.update(
            targets,
            {
                # amount < 10000.00, so doubling it still fits decimal(12,2)
                "amount": pc.multiply(pc.field("amount"), pa.scalar(2, pa.decimal128(1, 0))),
                "note": "updated",
            },
        )
    uncommitted = max(1, delta_rows // 4)
    for i in range(final_aborted_writes):
        txn = table.begin()
        txn.insert(batch(uncommitted, 200 + i))
        txn.abort()
    for i in range(open_writes):
        table.begin().insert(batch(uncommitted, 300 + i))  # left open
    return table
