"""On S3 no partial object is ever visible: a data file is one upload that completes only when
the file is complete. A single-part file (smaller than the block size, sent as one PUT on
close) aborted or killed mid-write leaves no object; the commit lock is a conditional PUT."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from airflow_provider_acid.acid.storage import create_exclusive
from airflow_provider_acid.output.commit_lock import CommitLockError, commit_lock
from airflow_provider_acid.output.parquet_files import BucketFileWriter

SETTINGS = {
    "row_group_rows": 1_000,
    "target_file_size": 1 << 30,
    "compression": "zstd",
    "compression_level": None,
}
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
SNAPSHOT = "0123456789abcdef"


def rows(count: int) -> pa.Table:
    return pa.table(
        {"id": list(range(count)), "name": [f"n{i}" for i in range(count)]}, schema=SCHEMA
    )


def objects(s3, url: str) -> list[str]:
    s3.fs.invalidate_cache()
    try:
        return sorted(s3.fs.find(url.removeprefix("s3://")))
    except FileNotFoundError:
        return []


def test_a_single_part_file_aborted_mid_write_leaves_no_object(s3):
    out = s3.url("aborted")
    fs = s3.new_filesystem()
    writer = BucketFileWriter(fs, out.removeprefix("s3://"), "p=a", SNAPSHOT, 0, SCHEMA, SETTINGS)

    with s3.requests.recording() as seen:
        writer.write(rows(5_000))  # five row groups into the buffer: well under one part
        writer.abort()

    assert objects(s3, out) == []
    assert not {"PutObject", "CompleteMultipartUpload"} & {r.operation for r in seen}

    writer = BucketFileWriter(fs, out.removeprefix("s3://"), "p=a", SNAPSHOT, 0, SCHEMA, SETTINGS)
    writer.write(rows(5_000))
    [written] = writer.close()  # the same file completed: one PUT, whole
    assert objects(s3, out) == [f"{out.removeprefix('s3://')}/{written.path}"]
    assert written.rows == 5_000


CHILD = textwrap.dedent(
    """
    import json, sys, time
    import pyarrow as pa
    import s3fs
    from airflow_provider_acid.output.parquet_files import BucketFileWriter

    options, out = json.loads(sys.argv[1]), sys.argv[2]
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    settings = {"row_group_rows": 1000, "target_file_size": 1 << 30, "compression": "zstd",
                "compression_level": None}
    writer = BucketFileWriter(fs, out, "p=a", "0123456789abcdef", 0, schema, settings)
    n = 5000
    writer.write(pa.table({"id": list(range(n)), "name": [f"n{i}" for i in range(n)]},
                          schema=schema))
    print("written", flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "SIGTERM"])
def test_a_writer_killed_mid_file_leaves_no_object(s3, sig):
    out = s3.url("killed")
    with s3.requests.recording() as seen:
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD,
                json.dumps(s3.storage_options),
                out.removeprefix("s3://"),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "written"
            child.send_signal(sig)
            child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
        time.sleep(0.2)  # any request in flight has reached the server

    assert child.returncode == -sig
    assert objects(s3, out) == []
    assert not {"PutObject", "CompleteMultipartUpload"} & {r.operation for r in seen}


def test_the_commit_lock_on_s3_is_a_conditional_put(s3):
    out = s3.url("lock").removeprefix("s3://")
    fs = s3.new_filesystem()
    with s3.requests.recording() as seen:
        assert create_exclusive(fs, f"{out}/lock", b"first")
        assert not create_exclusive(fs, f"{out}/lock", b"second")
    assert fs.cat_file(f"{out}/lock") == b"first"
    assert [r.operation for r in seen] == ["PutObject", "PutObject"]

    with commit_lock(fs, out, "a commit"):
        with pytest.raises(CommitLockError, match="a commit by pid"):
            with commit_lock(s3.new_filesystem(), out, "another commit", wait=0.3):
                pass
    fs.invalidate_cache()
    assert not fs.exists(f"{out}/_snapshots/_commit.lock")
