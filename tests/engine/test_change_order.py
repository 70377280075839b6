"""A slice's changes come out ordered by ``_change_ordinal`` then identity (``finish``), the
same rows in the same order whether they came in that order (no sort then) or not."""

from __future__ import annotations

import random

import pyarrow as pa

from airflow_provider_acid.engine.change_rows import ChangeRange, bookkeeping_rows, finish


def _changes(order: list[int]) -> pa.Table:
    """Deletes of writes 5..7, rows ``order`` (ties of ordinal and identity included)."""
    rows = pa.table(
        {
            "id": pa.array([i // 2 for i in order], pa.int64()),
            "_acid_original_write_id": pa.array([1] * len(order), pa.int64()),
            "_acid_bucket": pa.array([536870912] * len(order), pa.int32()),
            "_acid_row_id": pa.array([i // 3 for i in order], pa.int64()),
            "__row_write": pa.array([1] * len(order), pa.int64()),
        }
    )
    commit = pa.array([5 + i % 3 for i in order], pa.int64())
    zero = pa.array([0] * len(order), pa.int64())
    return bookkeeping_rows(rows, ["id"], kind=1, commit=commit, statement=zero, phase=zero)


def test_rows_in_order_and_shuffled_finish_alike():
    ordered = sorted(range(200), key=lambda i: (5 + i % 3, i // 3, i))
    shuffled = list(ordered)
    random.Random(7).shuffle(shuffled)
    change_range = ChangeRange(1, 7)
    first = finish(_changes(ordered), change_range, []).rows
    again = finish(_changes(shuffled), change_range, []).rows
    assert first.column_names == again.column_names
    key = ["_change_ordinal", "_acid_original_write_id", "_acid_bucket", "_acid_row_id"]
    assert first.select(key).equals(again.select(key))
    assert first.sort_by([(c, "ascending") for c in key]).select(key).equals(first.select(key))
    # rows whose ordinal and identity tie keep their order (the stable sort's)
    assert first["id"].to_pylist() == [i // 2 for i in ordered]
