"""What a feed's files hold: the write-id columns dictionary-encoded."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from airflow_provider_acid.engine.change_runs import compute_changes
from airflow_provider_acid.testing.table_writer import AcidTableWriter


def _table(root: Path, update: bool = True) -> AcidTableWriter:
    table = AcidTableWriter(str(root), [("id", "bigint"), ("v", "string")], buckets=2)
    table.insert_overwrite([{"id": i, "v": f"v{i}"} for i in range(200)])  # write 1
    table.insert([{"id": 200 + i, "v": "new"} for i in range(50)])  # write 2
    table.delete(lambda r: r["id"] % 7 == 0)  # write 3
    if update:
        table.update(lambda r: r["id"] % 11 == 0, {"v": "changed"})  # write 4
    return table


def _encodings(path: str, column: str) -> set[str]:
    metadata = pq.ParquetFile(path).metadata
    names = metadata.schema.names
    found = set()
    for group in range(metadata.num_row_groups):
        found.update(metadata.row_group(group).column(names.index(column)).encodings)
    return found


def test_write_id_columns_are_dictionary_encoded(tmp_path):
    table = _table(tmp_path / "t")
    feed = compute_changes(
        table.root, str(tmp_path / "feed"), from_write_id=1, write_ids=table.valid_write_ids()
    )
    assert sum(feed.counts.values()) > 100
    for path in feed.result.file_paths():
        for column in ("_commit_write_id", "_acid_original_write_id"):
            assert "RLE_DICTIONARY" in _encodings(path, column), (path, column)
        # the other integer columns keep pyarrow's plain encoding (mostly distinct values)
        assert "RLE_DICTIONARY" not in _encodings(path, "_acid_row_id")
