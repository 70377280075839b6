"""Snapshot data files written to a real HDFS appear whole: WebHDFS writes a file in place as
it goes, so the writer uses a hidden temporary beside the name and renames it over the name
once closed; a killed writer's temporary is removed by the next attempt."""

from __future__ import annotations

import posixpath

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_acid.acid.hdfs import HdfsFileSystem
from airflow_provider_acid.acid.listing import resolve_filesystem
from airflow_provider_acid.acid.storage import TEMPORARY_NAME, temporary_path
from airflow_provider_acid.output import parquet_files
from airflow_provider_acid.output.parquet_files import BucketFileWriter

SETTINGS = {
    "row_group_rows": 1000,
    "target_file_size": 1 << 30,
    "compression": "zstd",
    "compression_level": None,
}
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _rows(first: int, count: int) -> pa.Table:
    ids = list(range(first, first + count))
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


@pytest.fixture
def out(hdfs_plain, monkeypatch) -> tuple[HdfsFileSystem, str]:
    monkeypatch.setenv("ACID_HDFS_NAMENODES", hdfs_plain.namenodes)
    monkeypatch.setattr(parquet_files, "PART_BYTES", 1024)  # sent to HDFS as it is written
    fs, root = resolve_filesystem(hdfs_plain.folder() + "/out")
    assert isinstance(fs, HdfsFileSystem)
    return fs, root


def _names(fs: HdfsFileSystem, folder: str) -> list[str]:
    return sorted(posixpath.basename(p) for p in fs.ls(folder, detail=False))


def test_an_hdfs_data_file_is_hidden_until_it_is_whole(out):
    fs, root = out
    writer = BucketFileWriter(fs, root, "p=a", "0123456789abcdef", 3, SCHEMA, SETTINGS)
    writer.write(_rows(0, 2500))  # two row groups flushed to HDFS, the file still open
    folder = f"{root}/p=a"
    during = _names(fs, folder)
    assert len(during) == 1 and TEMPORARY_NAME.match(during[0]), during  # hidden while written
    assert fs.info(f"{folder}/{during[0]}")["size"] > 0  # the bytes are on HDFS already

    (written,) = writer.close()

    assert _names(fs, folder) == [posixpath.basename(written.path)]
    with fs.open(f"{root}/{written.path}", "rb") as handle:
        table = pq.read_table(handle)
    assert table.num_rows == written.rows == 2500
    assert table.column("id").to_pylist() == list(range(2500))
    assert written.size == fs.info(f"{root}/{written.path}")["size"]


def test_a_rerun_replaces_the_file_and_removes_a_killed_attempts_temporary(out):
    fs, root = out
    name = f"{root}/p=a/part-0123456789abcdef-00000-0000.parquet"
    fs.pipe_file(temporary_path(name), b"PAR1 half of a file")  # what a killed attempt left
    first = BucketFileWriter(fs, root, "p=a", "0123456789abcdef", 0, SCHEMA, SETTINGS)
    assert len(first.remove_leftovers()) == 1
    first.write(_rows(0, 10))
    (one,) = first.close()
    again = BucketFileWriter(fs, root, "p=a", "0123456789abcdef", 0, SCHEMA, SETTINGS)
    again.write(_rows(100, 20))
    (two,) = again.close()  # same name: HDFS renames never replace, the old file goes first

    assert one.path == two.path and _names(fs, f"{root}/p=a") == [posixpath.basename(two.path)]
    with fs.open(f"{root}/{two.path}", "rb") as handle:
        assert pq.read_table(handle).column("id").to_pylist() == list(range(100, 120))


def test_an_aborted_hdfs_file_leaves_nothing(out):
    fs, root = out
    writer = BucketFileWriter(fs, root, "p=a", "0123456789abcdef", 1, SCHEMA, SETTINGS)
    writer.write(_rows(0, 1500))
    writer.abort()
    assert _names(fs, f"{root}/p=a") == []


def _count_liststatus(hdfs_plain, monkeypatch) -> list[str]:  # noqa: ANN001
    """The folders WebHDFS lists (one ``LISTSTATUS`` each) from now on, appended as listed."""
    monkeypatch.setenv("ACID_HDFS_NAMENODES", hdfs_plain.namenodes)
    listed: list[str] = []
    call = HdfsFileSystem._call

    def counted(self, op, *args, **kwargs):  # noqa: ANN001, ANN202
        if op == "LISTSTATUS":
            listed.append(kwargs.get("path") or (args[2] if len(args) > 2 else ""))
        return call(self, op, *args, **kwargs)

    monkeypatch.setattr(HdfsFileSystem, "_call", counted)
    return listed


def test_a_commit_lists_as_many_hdfs_folders_however_many_feeds_are_kept(
    hdfs_plain, monkeypatch, tmp_path
):
    """Each WebHDFS ``LISTSTATUS`` lists one folder; the commit does not list the folders of
    the snapshots its log holds, so a scheduled feed's runs stay as cheap as its first."""
    from airflow_provider_acid.engine.change_runs import compute_changes
    from airflow_provider_acid.testing.table_writer import AcidTableWriter

    listed = _count_liststatus(hdfs_plain, monkeypatch)
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint"), ("v", "string")], buckets=1)
    out = hdfs_plain.folder() + "/feed"
    per_run = []
    for i in range(6):
        table.insert([{"id": i, "v": "x"}])
        listed.clear()
        feed = compute_changes(
            table.root, out, from_write_id=None if i else 0, write_ids=table.valid_write_ids()
        )
        assert feed.result is not None and feed.counts["insert"] == 1
        per_run.append(len(listed))
    assert per_run[1] == per_run[-1], per_run  # not one more folder per delivery kept
    fs, root = resolve_filesystem(out)
    assert len(fs.ls(f"{root}/_snapshots", detail=False)) >= 6  # the folders it did not list


def test_an_incremental_snapshot_lists_as_many_hdfs_folders_however_many_are_kept(
    hdfs_plain, monkeypatch, tmp_path
):
    """Planning a snapshot that reuses the latest one's unchanged buckets looks up the files
    it would reuse: only in the folders holding them, not in every kept snapshot's folder."""
    from airflow_provider_acid.engine.compaction import compact_table
    from airflow_provider_acid.testing.table_writer import AcidTableWriter

    listed = _count_liststatus(hdfs_plain, monkeypatch)
    table = AcidTableWriter(
        str(tmp_path / "t"),
        [("id", "bigint"), ("v", "string")],
        partition_columns=[("p", "string")],
        buckets=2,
        bucket_by="id",
    )
    table.insert([{"id": i, "v": "x", "p": p} for i in range(4) for p in ("a", "b")])
    out = hdfs_plain.folder() + "/snapshots"
    per_run, reused = [], []
    for i in range(6):
        table.insert([{"id": 10 + i, "v": "y", "p": "a"}])
        listed.clear()
        result = compact_table(table.root, out, write_ids=table.valid_write_ids())
        per_run.append(len(listed))
        reused.append(sum(1 for b in result.buckets if b.reused_from))
    assert reused[1:] == [3] * 5, reused  # p=b's two buckets and p=a's bucket 1, every run
    assert per_run[1] == per_run[-1], per_run  # not one more folder per snapshot kept
    fs, root = resolve_filesystem(out)
    assert len(fs.ls(f"{root}/_snapshots", detail=False)) >= 6
