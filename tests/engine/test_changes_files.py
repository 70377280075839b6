"""What a feed's files hold and how often its commit reads them: the write-id columns
dictionary-encoded, and each file's footer read once for the pairing and the counts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

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


class _CountingFileSystem(LocalFileSystem):
    """The local filesystem counting the opens for reading of each path."""

    cachable = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.reads: Counter = Counter()

    def _open(self, path, mode="rb", *args, **kwargs):
        if "r" in mode:
            self.reads[self._strip_protocol(path)] += 1
        return super()._open(path, mode, *args, **kwargs)


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


def test_commit_reads_each_feed_file_footer_once(tmp_path):
    # no write both deletes and inserts: the pairing across slices reads only the footers
    table = _table(tmp_path / "t", update=False)
    out_fs = _CountingFileSystem()
    feed = compute_changes(
        table.root,
        str(tmp_path / "feed"),
        from_write_id=1,
        write_ids=table.valid_write_ids(),
        key=["id"],
        out_filesystem=out_fs,
    )
    assert feed.counts["delete"] > 0 and feed.counts["insert"] > 0
    files = feed.result.file_paths()
    assert len(files) == 2
    # two reads of each file: the commit's check of what is stored (under its lock), and one
    # that the pairing across slices and the counts share (each read it before)
    assert {p: out_fs.reads[p] for p in files} == dict.fromkeys(files, 2)
