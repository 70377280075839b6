"""A local data file is written by pyarrow's own file while a Python handle holds the
temporary's lock, and the kernel is asked to start writing each finished row group out
(``start_writeback``) before the one ``fsync`` at the end; object stores keep their upload."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_acid.acid.storage import TEMPORARY_NAME, remove_temporaries
from airflow_provider_acid.output import parquet_files
from airflow_provider_acid.output.parquet_files import BucketFileWriter

#: 1,000-row row groups, one file per bucket
SETTINGS = dict(row_group_rows=1_000, target_file_size=1 << 30, compression="snappy")
SETTINGS["compression_level"] = None


def rows(first: int, count: int) -> pa.Table:
    ids = pa.array(range(first, first + count), pa.int64())
    return pa.Table.from_arrays([ids, pc.cast(ids, pa.string())], names=["id", "name"])


@pytest.fixture
def writebacks(monkeypatch):
    """The files (device, inode, size) each writeback hint was given, in order."""
    seen: list[tuple[int, int, int]] = []

    def record(fd: int, offset: int, length: int, flags: int) -> int:
        assert (offset, length, flags) == (0, 0, 2)  # the whole file; start, do not wait
        status = os.fstat(fd)
        seen.append((status.st_dev, status.st_ino, status.st_size))
        return 0

    monkeypatch.setattr(parquet_files, "_SYNC_FILE_RANGE", record)
    return seen


def temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if TEMPORARY_NAME.match(p.name)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")
def test_the_c_library_s_sync_file_range_is_found_on_linux(tmp_path):
    assert parquet_files._SYNC_FILE_RANGE is not None
    path = tmp_path / "file"
    with open(path, "wb") as handle:
        handle.write(b"x" * 4096)
        handle.flush()
        parquet_files.start_writeback(handle.fileno())  # a real call: no error, no change
        os.fsync(handle.fileno())
    assert path.read_bytes() == b"x" * 4096


def test_each_row_group_but_the_last_is_handed_to_the_disk_early(tmp_path, writebacks):
    out = tmp_path / "out"
    w = BucketFileWriter(
        LocalFileSystem(), str(out), "p=a", "0123456789abcdef", 3, rows(0, 0).schema, SETTINGS
    )
    for first in range(0, 3_500, 500):  # 7 writes of 500 rows: 3 full row groups, then 500
        w.write(rows(first, 500))
    folder = out / "p=a"
    [temporary] = temporaries(folder)
    status = temporary.stat()
    # one hint per row group written so far, each for the temporary itself, as it grew
    assert [(d, i) for d, i, _ in writebacks] == [(status.st_dev, status.st_ino)] * 3
    sizes = [s for _, _, s in writebacks]
    assert sizes == sorted(sizes) and sizes[0] > 0 and len(set(sizes)) == 3
    # the temporary is locked by its live writer: a cleaner leaves it
    assert remove_temporaries(LocalFileSystem(), str(folder)) == []
    assert temporary.exists()

    [written] = w.close()

    assert len(writebacks) == 3  # the last row group goes straight to the fsync
    assert temporaries(folder) == []
    path = folder / written.path.split("/")[-1]
    assert written.size == path.stat().st_size
    assert path.stat().st_ino == status.st_ino  # the temporary renamed, not copied
    parquet = pq.ParquetFile(path)
    assert [parquet.metadata.row_group(i).num_rows for i in range(4)] == [1_000] * 3 + [500]
    assert parquet.read().equals(rows(0, 3_500))


def test_an_aborted_local_file_releases_its_lock_and_leaves_nothing(tmp_path, writebacks):
    out = tmp_path / "out"
    w = BucketFileWriter(
        LocalFileSystem(), str(out), "", "0123456789abcdef", 0, rows(0, 0).schema, SETTINGS
    )
    w.write(rows(0, 1_500))
    [temporary] = temporaries(out)
    w.abort()
    assert list(out.iterdir()) == []
    # a new attempt at the same bucket writes again from scratch
    w = BucketFileWriter(
        LocalFileSystem(), str(out), "", "0123456789abcdef", 0, rows(0, 0).schema, SETTINGS
    )
    w.write(rows(0, 1_500))
    [written] = w.close()
    assert pq.read_table(out / written.path).equals(rows(0, 1_500))
    assert temporary.name not in {p.name for p in out.iterdir()}


def test_a_filesystem_without_renames_gets_no_writeback_hint(writebacks):
    memory = fsspec.filesystem("memory")
    root = f"/writeback-{os.getpid()}"
    w = BucketFileWriter(memory, root, "", "0123456789abcdef", 0, rows(0, 0).schema, SETTINGS)
    w.write(rows(0, 2_500))
    [written] = w.close()
    assert writebacks == []
    with memory.open(f"{root}/{written.path}", "rb") as handle:
        assert pq.read_table(handle).equals(rows(0, 2_500))
    memory.rm(root, recursive=True)


def test_a_writer_that_cannot_be_made_leaves_no_temporary(tmp_path):
    out = tmp_path / "out"
    settings = {**SETTINGS, "compression": "no-such-codec"}
    w = BucketFileWriter(
        LocalFileSystem(), str(out), "", "0123456789abcdef", 0, rows(0, 0).schema, settings
    )
    with pytest.raises((ValueError, pa.ArrowException)):
        w.write(rows(0, 1_500))  # the first row group opens the file, then the writer fails
    assert len(temporaries(out)) == 1  # until the caller aborts, as compact_bucket does
    w.abort()
    assert list(out.iterdir()) == []
