"""A feed without the deleted rows' values (``delete_values=False``): only the range's deltas
are read, a delete holds its identity (and the values the range itself inserted), and no key
pairs it."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_acid.engine.change_feed import NO_DELETE_VALUES_WARNING
from airflow_provider_acid.engine.change_rows import IDENTITY
from airflow_provider_acid.engine.change_runs import compute_changes
from airflow_provider_acid.testing.table_writer import AcidTableWriter


class _OpenedFileSystem(LocalFileSystem):
    """The local filesystem recording the folders of the files opened for reading."""

    cachable = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.folders: set[str] = set()

    def _open(self, path, mode="rb", *args, **kwargs):
        if "r" in mode:
            self.folders.add(Path(self._strip_protocol(path)).parent.name)
        return super()._open(path, mode, *args, **kwargs)


def _table(root: Path) -> AcidTableWriter:
    table = AcidTableWriter(str(root), [("id", "bigint"), ("v", "string")], buckets=2)
    table.insert_overwrite([{"id": i, "v": f"v{i}"} for i in range(200)])  # write 1: base
    table.insert([{"id": 200 + i, "v": "new"} for i in range(50)])  # write 2
    table.delete(lambda r: r["id"] % 7 == 0)  # write 3: base rows and write 2's
    return table


def _rows(feed) -> list[dict]:
    return [r for p in feed.result.file_paths() for r in pq.read_table(p).to_pylist()]


def _feed(table: AcidTableWriter, out: Path, fs: LocalFileSystem, **arguments):
    return compute_changes(
        table.root, str(out), from_write_id=1, write_ids=table.valid_write_ids(),
        filesystem=fs, **arguments,
    )  # fmt: skip


def test_without_delete_values_only_the_ranges_deltas_are_read(tmp_path):
    table = _table(tmp_path / "t")
    full_fs, lean_fs = _OpenedFileSystem(), _OpenedFileSystem()
    full = _feed(table, tmp_path / "full", full_fs)
    lean = _feed(table, tmp_path / "lean", lean_fs, delete_values=False)
    assert any(f.startswith("base_") for f in full_fs.folders)
    assert lean_fs.folders and not any(f.startswith("base_") for f in lean_fs.folders)
    assert all(f.startswith(("delta_", "delete_delta_")) for f in lean_fs.folders)
    assert lean.counts == full.counts and full.counts["delete"] > 10
    assert NO_DELETE_VALUES_WARNING in lean.warnings
    assert NO_DELETE_VALUES_WARNING not in full.warnings
    assert lean.result.settings["changes"]["delete_values"] is False

    def by_identity(rows: list[dict]) -> dict:
        return {tuple(r[c] for c in IDENTITY) + (r["_change_type"],): r for r in rows}

    full_rows, lean_rows = by_identity(_rows(full)), by_identity(_rows(lean))
    assert full_rows.keys() == lean_rows.keys()
    deleted_base_rows = 0
    for identity, row in lean_rows.items():
        expected = full_rows[identity]
        if row["_change_type"] == "delete" and row["_acid_original_write_id"] == 1:
            # a base row: its identity, write and order, not its values
            assert row["id"] is None and row["v"] is None, row
            assert {k: v for k, v in row.items() if k not in ("id", "v")} == {
                k: v for k, v in expected.items() if k not in ("id", "v")
            }
            deleted_base_rows += 1
        else:  # an insert, or a delete of a row the range inserted: as the full feed has it
            assert row == expected
    assert deleted_base_rows == sum(1 for i in range(200) if i % 7 == 0)


def test_a_key_needs_the_deleted_rows_values(tmp_path):
    table = _table(tmp_path / "t")
    with pytest.raises(ValueError, match=r"--key id .*--no-delete-values"):
        _feed(table, tmp_path / "out", LocalFileSystem(), key=["id"], delete_values=False)
    assert not (tmp_path / "out").exists()
