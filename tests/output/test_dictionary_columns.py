"""Which text columns the Parquet writer dictionary-encodes (``dictionary_columns``): a first
look at 1,024 rows settles the clear cases, and must choose as counting the whole sample
does for columns whose first rows are like the rest."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from airflow_provider_acid.output.parquet_files import dictionary_columns


def _counted(table: pa.Table, max_ratio: float = 0.5, sample: int = 16_384) -> list[str]:
    """The rule without the first look: every text column's distinct values counted."""
    table = table.slice(0, sample)
    return [
        f.name
        for f, column in zip(table.schema, table.columns, strict=True)
        if pa.types.is_string(f.type)
        and pc.count_distinct(column, mode="all").as_py() <= max_ratio * table.num_rows
    ]


def _drawn(rows: int, values: int, seed: int) -> pa.Array:
    """``rows`` texts drawn evenly from ``values`` distinct ones."""
    chooser = random.Random(seed)
    return pa.array([f"value-{chooser.randrange(values):06d}" for _ in range(rows)])


@pytest.mark.parametrize("rows", [100, 3_000, 20_000])
@pytest.mark.parametrize("values", [3, 60, 900, 5_000, 9_000, 12_000, 100_000])
def test_the_columns_chosen_are_those_counting_the_sample_chooses(rows: int, values: int) -> None:
    table = pa.table(
        {
            "drawn": _drawn(rows, values, seed=values + rows),
            "number": pa.array(range(rows)),
            "unique": pa.array([f"row-{i}" for i in range(rows)]),
        }
    )
    chosen = dictionary_columns(table)
    assert chosen == _counted(table)
    assert "unique" not in chosen and "number" not in chosen


def test_the_boundary_cases_of_the_first_look() -> None:
    # 5,000 values over 16,384 rows: 88% distinct in the first 1,024 rows, 31% over the
    # sample: only the whole count tells it is worth a dictionary
    moderate = _drawn(20_000, 5_000, seed=1)
    assert pc.count_distinct(moderate.slice(0, 1_024)).as_py() > 1_024 / 16
    # 12,000 values: 96% distinct at first, 60% over the sample: not chosen
    wide = _drawn(20_000, 12_000, seed=2)
    table = pa.table({"moderate": moderate, "wide": wide, "few": _drawn(20_000, 40, seed=3)})
    assert dictionary_columns(table) == ["moderate", "few"]
    # nulls count as one value, as in the whole count
    nulls = pa.table({"mostly_null": pa.array([None] * 19_000 + [f"x{i}" for i in range(1_000)])})
    assert dictionary_columns(nulls) == ["mostly_null"] == _counted(nulls)


def test_a_file_written_with_them_encodes_those_columns_by_dictionary(tmp_path) -> None:
    table = pa.table({"few": _drawn(20_000, 40, seed=4), "unique": _drawn(20_000, 10**9, seed=5)})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, use_dictionary=dictionary_columns(table))
    group = pq.ParquetFile(path).metadata.row_group(0)
    assert "RLE_DICTIONARY" in group.column(0).encodings
    assert "RLE_DICTIONARY" not in group.column(1).encodings
