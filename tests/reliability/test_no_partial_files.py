"""No half-written file is ever visible: data files, manifests and markers are written under
hidden temporaries and renamed into place (locally); leftovers of killed writers are removed
by the next run of the same snapshot, by later commits and by expiry."""

from __future__ import annotations

import os
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_acid.acid.storage import (
    TEMPORARY_NAME,
    create_exclusive,
    remove_temporaries,
    temporary_path,
    write_whole,
)
from airflow_provider_acid.engine.compaction import compact_slice, compact_table
from airflow_provider_acid.engine.plan import plan_snapshot
from airflow_provider_acid.output import commit_snapshot, expire_snapshots, read_manifest
from airflow_provider_acid.output.parquet_files import BucketFileWriter
from airflow_provider_acid.testing.table_writer import AcidTableWriter

SETTINGS = {
    "row_group_rows": 100,
    "target_file_size": 1 << 30,
    "compression": "zstd",
    "compression_level": None,
}
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def rows(first: int, count: int) -> pa.Table:
    ids = list(range(first, first + count))
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


def writer(out: Path, snapshot: str = "0123456789abcdef", bucket: int = 0) -> BucketFileWriter:
    return BucketFileWriter(LocalFileSystem(), str(out), "p=a", snapshot, bucket, SCHEMA, SETTINGS)


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def temporaries(out: Path) -> list[Path]:
    return [p for p in out.rglob(".*") if p.is_file() and TEMPORARY_NAME.match(p.name)]


def make_table(root: Path) -> AcidTableWriter:
    table = AcidTableWriter(
        str(root),
        [("id", "bigint"), ("name", "string")],
        [("p", "string")],
        buckets=2,
        bucket_by="id",
    )
    table.insert([{"id": i, "name": f"n{i}", "p": "ab"[i % 2]} for i in range(400)])
    table.delete(lambda r: r["id"] % 7 == 0)
    return table


def test_a_data_file_is_hidden_until_complete_then_appears_whole(tmp_path):
    out = tmp_path / "out"
    w = writer(out)
    w.write(rows(0, 20_050))  # 200 row groups written, the footer not yet
    folder = out / "p=a"
    [name] = names(folder)
    assert name.startswith(".part-0123456789abcdef-00000-0000.parquet.")
    assert TEMPORARY_NAME.match(name)
    assert (folder / name).stat().st_size > 0
    assert ds.dataset(str(out), format="parquet").files == []  # a folder read sees nothing

    [written] = w.close()

    assert names(folder) == ["part-0123456789abcdef-00000-0000.parquet"]
    assert written.rows == 20_050
    assert pq.read_metadata(folder / names(folder)[0]).num_rows == 20_050


def test_an_aborted_file_leaves_nothing_but_the_complete_files_before_it(tmp_path):
    out = tmp_path / "out"
    settings = {**SETTINGS, "target_file_size": 1}  # a new file per row group
    w = BucketFileWriter(
        LocalFileSystem(), str(out), "p=a", "0123456789abcdef", 0, SCHEMA, settings
    )
    w.write(rows(0, 100))
    w.write(rows(100, 100))
    settings["target_file_size"] = 1 << 30
    w.write(rows(200, 150))  # the third file is open, under its temporary name
    assert any(TEMPORARY_NAME.match(n) for n in names(out / "p=a"))

    w.abort()

    assert names(out / "p=a") == [
        "part-0123456789abcdef-00000-0000.parquet",
        "part-0123456789abcdef-00000-0001.parquet",
    ]
    assert all(pq.read_metadata(p).num_rows == 100 for p in (out / "p=a").iterdir())


def test_the_next_attempt_at_a_bucket_removes_only_its_own_temporaries(tmp_path):
    out = tmp_path / "out"
    folder = out / "p=a"
    folder.mkdir(parents=True)
    mine = Path(temporary_path(str(folder / "part-0123456789abcdef-00000-0000.parquet")))
    other_bucket = Path(temporary_path(str(folder / "part-0123456789abcdef-00001-0000.parquet")))
    other_snapshot = Path(temporary_path(str(folder / "part-fedcba9876543210-00000-0000.parquet")))
    complete = folder / "part-0123456789abcdef-00000-0000.parquet"
    for path in (mine, other_bucket, other_snapshot, complete):
        path.write_bytes(b"PAR1 half")

    removed = writer(out).remove_leftovers()

    assert removed == [str(mine)]
    assert sorted(names(folder)) == sorted(p.name for p in (other_bucket, other_snapshot, complete))


def test_a_killed_run_s_temporaries_go_with_the_re_run_and_the_commit(tmp_path):
    table = make_table(tmp_path / "t")
    out = tmp_path / "out"
    plan = plan_snapshot(str(tmp_path / "t"), str(out))
    # what a run killed mid-write leaves: half files under temporary names, a half manifest
    leftovers = []
    for key in plan.keys_to_compute:
        planned = plan.planned(key)
        name = f"part-{plan.snapshot_id}-{planned.bucket:05d}-0000.parquet"
        path = Path(temporary_path(str(out / planned.partition / name)))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PAR1 half a row group")
        leftovers.append(path)
    snapdir = out / "_snapshots" / plan.snapshot_id
    half_manifest = Path(temporary_path(str(snapdir / "manifest.json")))
    half_manifest.write_bytes(b'{"format": "airflow-acid/snaps')
    half_marker = Path(temporary_path(str(out / "_SUCCESS")))
    half_marker.write_bytes(b"")
    half_lock = Path(temporary_path(str(out / "_snapshots" / "_commit.lock")))  # killed in create
    half_lock.write_bytes(b'{"owner"')

    result = compact_table(str(tmp_path / "t"), str(out))

    assert result.snapshot_id == plan.snapshot_id
    assert temporaries(out) == []
    read = ds.dataset(str(out), format="parquet").to_table()
    assert sorted(read["id"].to_pylist()) == sorted(
        r["id"] for r in table.expected_rows().to_pylist()
    )


def test_temporaries_of_a_snapshot_that_never_committed_go_with_a_later_commit_and_expiry(
    tmp_path,
):
    make_table(tmp_path / "t")
    out = tmp_path / "out"
    first = compact_table(str(tmp_path / "t"), str(out))
    # an older, abandoned snapshot id (no plan): its temporaries are no one's
    dead = Path(temporary_path(str(out / "p=a" / "part-00000000deadbeef-00000-0000.parquet")))
    dead.write_bytes(b"half")
    # a temporary of the committed snapshot's own bucket (a late duplicate that was killed)
    late = Path(temporary_path(str(out / "p=a" / f"part-{first.snapshot_id}-00001-0000.parquet")))
    late.write_bytes(b"half")

    expired = expire_snapshots(str(out), keep=1)

    assert temporaries(out) == []
    assert expired.removed_files == ()  # temporaries are not data files of any snapshot
    assert read_manifest(LocalFileSystem(), str(out), first.snapshot_id) is not None


def test_a_commit_killed_after_its_manifest_is_finished_by_the_re_run(tmp_path):
    make_table(tmp_path / "t")
    out = tmp_path / "out"
    result = compact_table(str(tmp_path / "t"), str(out))
    snapdir = out / "_snapshots" / result.snapshot_id
    # killed while writing the markers: the manifest is in place, a marker half-written
    (out / "_SUCCESS").unlink()
    (snapdir / "_SUCCESS").unlink()
    Path(temporary_path(str(snapdir / "_SUCCESS"))).write_bytes(b"")

    again = compact_table(str(tmp_path / "t"), str(out))

    assert not again.newly_committed and again.snapshot_id == result.snapshot_id
    assert (snapdir / "_SUCCESS").exists()
    assert result.snapshot_id in (out / "_SUCCESS").read_text()
    assert temporaries(out) == []
    # and the commit itself does the same when called again
    (snapdir / "_SUCCESS").unlink()
    assert not commit_snapshot(str(out), result.snapshot_id, []).newly_committed
    assert (snapdir / "_SUCCESS").exists()


def test_write_whole_and_create_exclusive(tmp_path):
    fs = LocalFileSystem()
    target = tmp_path / "a" / "b.json"
    write_whole(fs, str(target), b"one")
    write_whole(fs, str(target), b"two")
    assert target.read_bytes() == b"two"
    assert names(target.parent) == ["b.json"]  # no temporary left

    lock = tmp_path / "lock"
    assert create_exclusive(fs, str(lock), b"first")
    assert not create_exclusive(fs, str(lock), b"second")
    assert lock.read_bytes() == b"first"
    assert names(tmp_path) == ["a", "lock"]

    memory = fsspec.filesystem("memory")
    assert create_exclusive(memory, "/locks/x", b"1")
    assert not create_exclusive(memory, "/locks/x", b"2")
    assert memory.cat_file("/locks/x") == b"1"


def test_remove_temporaries_keeps_other_hidden_files(tmp_path):
    keep = tmp_path / ".hidden-but-not-ours"
    keep.write_bytes(b"x")
    ours = Path(temporary_path(str(tmp_path / "manifest.json")))
    ours.write_bytes(b"{")
    assert remove_temporaries(LocalFileSystem(), str(tmp_path)) == [str(ours)]
    assert names(tmp_path) == [keep.name]


def test_a_slice_re_run_over_a_committed_file_replaces_it_with_the_same_bytes(tmp_path):
    """A late duplicate of a bucket (a zombie task) never leaves a committed file missing:
    it renames identical bytes over it instead of deleting it first."""
    make_table(tmp_path / "t")
    out = tmp_path / "out"
    plan = plan_snapshot(str(tmp_path / "t"), str(out))
    key = plan.keys_to_compute[0]
    first = compact_slice(str(tmp_path / "t"), key, str(out), plan.snapshot_id)
    path = out / first.files[0].path
    before = (path.read_bytes(), os.stat(path).st_ino)

    second = compact_slice(str(tmp_path / "t"), key, str(out), plan.snapshot_id)

    assert second.files == first.files
    assert path.read_bytes() == before[0]
    assert os.stat(path).st_ino != before[1]  # a new file renamed over the old one


@pytest.mark.parametrize("kind", ["json", "parquet"])
def test_index_and_manifest_files_are_written_whole(tmp_path, kind):
    from airflow_provider_acid.pruning import index_storage as index_module

    fs = LocalFileSystem()
    path = tmp_path / "idx" / f"stats.{kind}"
    if kind == "parquet":
        index_module._write_table(fs, str(path), pa.table({"a": [1, 2, 3]}))
        assert pq.read_table(path)["a"].to_pylist() == [1, 2, 3]
    else:
        write_whole(fs, str(path), b"{}")
    assert names(path.parent) == [path.name]


def test_an_index_refresh_removes_a_killed_refresh_s_pointer_temporary(tmp_path):
    from airflow_provider_acid.pruning import index

    make_table(tmp_path / "t")
    fs = LocalFileSystem()
    paths = sorted(str(p) for p in (tmp_path / "t").rglob("bucket_*") if p.is_file())
    idx = tmp_path / "index"
    index.refresh(str(idx), index.file_keys(fs, paths[:1]), fs)
    dead = Path(temporary_path(str(idx / "_pointers" / "v00000000000000000002.json")))
    dead.write_bytes(b'{"format": "half')

    result = index.refresh(str(idx), index.file_keys(fs, paths), fs)

    assert result.version == 2
    assert not dead.exists()
    assert [p.name for p in (idx / "_pointers").iterdir() if p.name.startswith(".")] == []
    assert index.read(str(idx), ["id"], index.file_keys(fs, paths)).num_rows == len(paths)


def test_a_cleaner_leaves_a_locked_temporary_and_a_fresh_pending_one(tmp_path):
    from airflow_provider_acid.acid.storage import open_temporary

    fs = LocalFileSystem()
    live = temporary_path(str(tmp_path / "a.parquet"))
    handle = open_temporary(live)  # a live writer: created unnamed, locked, linked
    handle.write(b"PAR1")
    pending = Path(temporary_path(str(tmp_path / "b.parquet"))).with_suffix(".new")
    pending.write_bytes(b"")  # created an instant ago, not locked yet
    stale = Path(temporary_path(str(tmp_path / "c.parquet"))).with_suffix(".new")
    stale.write_bytes(b"")
    os.utime(stale, (0, 0))  # long ago: its writer died before locking it

    removed = remove_temporaries(fs, str(tmp_path))

    assert removed == [str(stale)]
    assert Path(live).exists() and pending.exists()
    handle.close()  # the writer is gone: its temporary can go
    assert remove_temporaries(fs, str(tmp_path), lambda n: n == "a.parquet") == [live]


def test_a_temporary_has_no_name_until_it_is_locked(tmp_path, monkeypatch):
    import fcntl

    from airflow_provider_acid.acid import storage

    names_when_locked = []
    lock = fcntl.flock

    def flock(descriptor, operation):
        names_when_locked.append(sorted(os.listdir(tmp_path)))
        return lock(descriptor, operation)

    monkeypatch.setattr(storage.fcntl, "flock", flock)
    path = temporary_path(str(tmp_path / "a.parquet"))
    with storage.open_temporary(path) as handle:
        handle.write(b"PAR1")
        assert os.listdir(tmp_path) == [os.path.basename(path)]
    assert names_when_locked == [[]]  # nothing had a name before its lock was taken
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o666 & ~_umask())


def test_without_unnamed_files_a_temporary_is_created_pending_then_renamed(tmp_path, monkeypatch):
    from airflow_provider_acid.acid import storage

    monkeypatch.delattr(os, "O_TMPFILE", raising=False)  # a platform without O_TMPFILE
    path = temporary_path(str(tmp_path / "a.parquet"))
    with storage.open_temporary(path) as handle:
        handle.write(b"PAR1")
        assert os.listdir(tmp_path) == [os.path.basename(path)]  # the .new renamed
        assert remove_temporaries(LocalFileSystem(), str(tmp_path)) == []  # locked: kept
    assert remove_temporaries(LocalFileSystem(), str(tmp_path)) == [path]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_writers_killed_at_any_instant_leave_only_temporaries_a_cleaner_removes(tmp_path):
    """kill -9 of processes creating temporaries in a loop (the chaos run's commit killed at
    0.00 s once left a ``.new`` file no cleaner would remove for a minute)."""
    import random
    import signal
    import subprocess
    import sys
    import time

    child = (
        "import sys\n"
        "from airflow_provider_acid.acid.storage import open_temporary, temporary_path\n"
        "print('ready', flush=True)\n"
        "held = []\n"
        "while True:\n"
        "    held.append(open_temporary(temporary_path(sys.argv[1] + '/part.parquet')))\n"
        "    held[-1].write(b'PAR1')\n"
        "    if len(held) > 50:\n"
        "        held.pop(0).close()\n"
    )
    rng = random.Random(7)
    for _ in range(6):
        process = subprocess.Popen(
            [sys.executable, "-c", child, str(tmp_path)], stdout=subprocess.PIPE
        )
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.05, 0.3))
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert os.listdir(tmp_path), "the writers wrote nothing before they were killed"
    remove_temporaries(LocalFileSystem(), str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_a_storage_error_names_the_object_it_was_about(tmp_path):
    import errno

    from airflow_provider_acid.acid.storage import naming

    with pytest.raises(OSError) as failed, naming("warehouse/t/manifest.json"):
        raise OSError(errno.EBUSY, "We encountered an internal error. Please try again.")
    assert type(failed.value) is OSError and failed.value.errno == errno.EBUSY
    assert failed.value.filename == "warehouse/t/manifest.json"
    assert "internal error" in str(failed.value) and "manifest.json" in str(failed.value)
    # an error that names its file already, and one whose class is kept, pass unchanged
    missing = FileNotFoundError(errno.ENOENT, "No such file", str(tmp_path / "x"))
    with pytest.raises(FileNotFoundError) as again, naming(str(tmp_path / "y")):
        raise missing
    assert again.value is missing
    with pytest.raises(TimeoutError, match="read timed out: 'warehouse/t/p=1'"):
        with naming("warehouse/t/p=1"):
            raise TimeoutError(errno.ETIMEDOUT, "read timed out")
