"""A large output file goes to S3 as a multipart upload, its parts sent while it is written and
the object visible only once complete (output/parquet_files.py), on both test servers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_acid.output import parquet_files
from airflow_provider_acid.output.parquet_files import BucketFileWriter

MIB = 1024 * 1024
SCHEMA = pa.schema([("id", pa.int64()), ("noise", pa.binary())])
SETTINGS = {
    "row_group_rows": 20_000,
    "target_file_size": 1 << 30,
    "compression": "none",
    "compression_level": None,
}


def noise(first: int, count: int) -> pa.Table:
    """Incompressible rows: 20,000 rows are about 5 MiB."""
    rng = np.random.default_rng(first)
    blobs = [rng.bytes(256) for _ in range(count)]
    return pa.table({"id": np.arange(first, first + count), "noise": blobs}, schema=SCHEMA)


def test_a_large_output_is_a_multipart_upload_visible_only_when_complete(s3, monkeypatch):
    monkeypatch.setattr(parquet_files, "UPLOAD_PART_BYTES", 5 * MIB)  # S3's least part size
    out = s3.url("multipart").removeprefix("s3://")
    fs = s3.new_filesystem()
    writer = BucketFileWriter(fs, out, "", "0123456789abcdef", 0, SCHEMA, SETTINGS)
    written, parts_before_close = [], 0
    with s3.requests.recording() as seen:
        for first in range(0, 80_000, 20_000):
            written.append(noise(first, 20_000))
            writer.write(written[-1])
            fs.invalidate_cache()
            assert not fs.find(out), "a part of the file is visible before it is complete"
        parts_before_close = sum(r.operation == "UploadPart" for r in s3.requests.all())
        (result,) = writer.close()
    operations = [r.operation for r in seen]
    assert operations.count("CreateMultipartUpload") == 1
    assert operations.count("UploadPart") >= 3  # about 20 MiB in parts of 5 MiB
    assert operations.count("CompleteMultipartUpload") == 1
    assert "PutObject" not in operations
    assert parts_before_close >= 2  # sent while the file was written, not all at its close
    fs.invalidate_cache()
    read = pq.read_table(fs.open(f"{out}/{result.path}", "rb"))
    assert read.equals(pa.concat_tables(written))
    assert result.rows == 80_000 and result.size == fs.info(f"{out}/{result.path}")["size"]


def test_a_refused_part_fails_the_file_and_aborts_its_upload(s3):
    """A part is sent by the file's upload thread: its error is raised by a later write or by
    the close, and the writer's abort drops the multipart upload."""
    out = s3.url("refused-part").removeprefix("s3://")
    fs = s3.new_filesystem()
    writer = BucketFileWriter(fs, out, "", "0123456789abcdef", 0, SCHEMA, SETTINGS)
    key = f"{out}/part-0123456789abcdef-00000-0000.parquet".partition("/")[2]
    with (
        s3.requests.recording() as seen,
        s3.fail("UploadPart", key, times=None) as failed,
        pytest.raises(PermissionError),
    ):
        try:
            for first in range(0, 80_000, 20_000):
                writer.write(noise(first, 20_000))
            writer.close()
        except BaseException:
            writer.abort()
            raise
    assert failed
    operations = [r.operation for r in seen if r.key.endswith(key)]
    assert "CompleteMultipartUpload" not in operations
    assert "AbortMultipartUpload" in operations, operations
    fs.invalidate_cache()
    assert not fs.find(out)
