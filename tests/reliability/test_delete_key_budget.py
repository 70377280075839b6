"""The delete-key memory budget: a bucket whose delete keys would need more than it fails
with a clear error naming the slice and the budget, before its keys are all read, and commits
nothing; under the budget it compacts as usual."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.memory_budget import (
    BUDGET_VARIABLE,
    PEAK_BYTES_PER_KEY,
    DeleteKeyBudgetError,
    delete_key_budget,
    memory_limit,
    parse_size,
)
from airflow_provider_acid.engine.options import CompactionOptions
from airflow_provider_acid.output import committed_snapshots
from airflow_provider_acid.testing import generate_demo_table

CLI = str(Path(sys.executable).with_name("airflow-acid"))


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("budget") / "table"
    # about 10% of 200,000 rows deleted: ~20,000 delete keys in each of 2 buckets
    writer = generate_demo_table(
        str(root), partitions=1, buckets=2, rows_per_bucket=100_000, delete_fraction=0.1
    )
    return root, writer.expected_rows().num_rows


def test_over_the_budget_the_bucket_fails_naming_the_slice_and_the_budget(
    table, tmp_path, monkeypatch
):
    root, _ = table
    monkeypatch.setenv(BUDGET_VARIABLE, "256KiB")  # ~5,400 keys at the assumed peak per key
    out = tmp_path / "out"

    with pytest.raises(DeleteKeyBudgetError) as caught:
        compact_table(str(root), str(out), options=CompactionOptions(max_workers=1))

    message = str(caught.value)
    assert f"slice dt=2024-01-01#0 of {root}" in message
    assert "budget of 0 MiB per bucket" in message or "budget of 256" in message or "MiB" in message
    assert BUDGET_VARIABLE in message
    keys_read = int(message.split("at least ")[1].split(" delete keys")[0].replace(",", ""))
    assert keys_read * PEAK_BYTES_PER_KEY > 256 * 1024  # it stopped once over, ...
    assert keys_read < 20_000  # ... before the bucket's keys were all read
    assert committed_snapshots(LocalFileSystem(), str(out)) == []
    assert not out.exists() or ds.dataset(str(out), format="parquet").files == []


def test_under_the_budget_it_compacts(table, tmp_path, monkeypatch):
    root, expected = table
    monkeypatch.setenv(BUDGET_VARIABLE, "64MiB")
    result = compact_table(str(root), str(tmp_path / "out"))
    assert result.rows_written == expected
    assert all(b.delete_keys > 10_000 for b in result.buckets)


def test_the_cli_prints_the_budget_error_in_one_line(table, tmp_path):
    root, _ = table
    done = subprocess.run(
        [CLI, "compact", str(root), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, BUDGET_VARIABLE: "100KiB"},
        timeout=300,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "delete-key memory budget" in done.stderr and BUDGET_VARIABLE in done.stderr


def test_sizes_and_the_default_budget(monkeypatch):
    assert parse_size("4GiB") == 4 << 30
    assert parse_size(" 512 MiB ") == 512 << 20
    assert parse_size("1000") == 1000
    assert parse_size("1.5k") == 1536
    with pytest.raises(ValueError, match=BUDGET_VARIABLE):
        parse_size("lots")
    monkeypatch.delenv(BUDGET_VARIABLE, raising=False)
    assert delete_key_budget() == memory_limit() // 8 > 0
    monkeypatch.setenv(BUDGET_VARIABLE, "3MiB")
    assert delete_key_budget() == 3 << 20
