"""Index refresh reads footers only: at most two ranged GETs a file, and the footer's bytes
plus 64 KiB, on the S3 test server.

What is counted, exactly: every HTTP request the server receives whose object key is the data
file's (the conftest's request log: GET, HEAD, ...), and the bytes of the bodies the server
sends back for them (the server's front layer sums each response body it passes on: a WSGI
layer around moto's application, the proxy in front of S3Proxy). "The footer's bytes" is
measured without this code's parser: the
shortest tail of the file from which the reader (pyorc, pyarrow) reads the statistics; on top
of that a file may cost at most 64 KiB (the first ranged read's size).
"""

from __future__ import annotations

import dataclasses
import io
import random
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyorc
import pytest
from hive_fixtures import FIXTURES

from airflow_provider_acid.acid.footers import TAIL_BYTES, FileTail, TailFile
from airflow_provider_acid.pruning.index import FileKey, refresh
from airflow_provider_acid.pruning.stats import (
    read_file_stats,
    read_orc_stats,
    read_parquet_stats,
)
from airflow_provider_acid.testing.many_partitions import tiny_acid_file

HIVE_FILES = [
    "trino/nationFile25kRowsSortedOnNationKey/bucket_00000",
    "hive3/repl_dump/hive/test_hcube_2/tbl6/fld1=1/data/delta_0000001_0000001_0000/bucket_00000",
    "hive3/repl_dump/hive/test_hcube_2/tbl1/data/delta_0000002_0000002_0000/bucket_00000",
]


class BodyBytes:
    """The bytes of the answer bodies the server sent for each object key since this was made
    or cleared (the server's front layer counts them: moto's WSGI layer, S3Proxy's proxy)."""

    def __init__(self, s3):
        self.s3 = s3
        self.clear()

    def clear(self) -> None:
        self._start = self.s3.sent_bytes()

    @property
    def sent(self) -> dict[str, int]:
        now = self.s3.sent_bytes()
        return defaultdict(int, {k: v - self._start.get(k, 0) for k, v in now.items()})


@pytest.fixture
def counted(s3):
    """The server, with the response bytes of each object counted."""
    return s3, BodyBytes(s3)


def big_footer_orc() -> bytes:
    """An ORC file whose footer (and stripe statistics) is far above 64 KiB: 400 string
    columns of 150-character values, so each column's min and max are long."""
    rng = random.Random(0)
    columns = [f"c{i}" for i in range(400)]
    schema = "struct<" + ",".join(f"{c}:string" for c in columns) + ">"
    buffer = io.BytesIO()
    with pyorc.Writer(buffer, schema) as writer:
        for _ in range(3):
            writer.write(tuple(rng.randbytes(75).hex() for _ in columns))
    return buffer.getvalue()


def parquet_file(columns: int) -> bytes:
    table = pa.table({f"c{i}": pa.array([i, i + 1, None], pa.int64()) for i in range(columns)})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def files_under_test() -> dict[str, bytes]:
    files = {name.replace("/", "_"): (FIXTURES / name).read_bytes() for name in HIVE_FILES}
    files["simulator_acid"] = tiny_acid_file(rows=50)
    files["big_footer_orc"] = big_footer_orc()
    files["small_parquet"] = parquet_file(3)
    files["big_footer_parquet"] = parquet_file(2500)
    return files


def _stats_from(data: bytes, tail_length: int, fs=None):
    tail = FileTail("x", len(data), len(data) - tail_length, data[-tail_length:], 0)
    reader = read_parquet_stats if data[-4:] == b"PAR1" else read_orc_stats
    return reader(fs, "x", tail=tail)


def footer_bytes(data: bytes) -> int:
    """The shortest tail the reader needs for the statistics (binary search)."""
    low, high = 1, len(data)
    while low < high:
        middle = (low + high) // 2
        try:
            _stats_from(data, middle)  # fs None: a read before the tail raises
            high = middle
        except Exception:
            low = middle + 1
    return low


def upload(s3, files: dict[str, bytes]) -> dict[str, str]:
    base = s3.url("footers").removeprefix("s3://")
    paths = {name: f"{base}/{name}" for name in files}
    s3.fs.pipe({paths[n]: data for n, data in files.items()})
    s3.fs.invalidate_cache()
    return paths


def test_each_footer_costs_at_most_two_ranged_gets_and_its_bytes_plus_64_kib(counted):
    s3, bodies = counted
    files = files_under_test()
    paths = upload(s3, files)
    fs = s3.new_filesystem()
    assert len(files["big_footer_orc"]) > 2 * TAIL_BYTES

    for name, data in files.items():
        path = paths[name]
        key = path.partition("/")[2]
        with s3.requests.recording() as seen:
            stats = read_file_stats(fs, path, size=len(data))
        mine = [r for r in seen if r.key == key]
        assert mine and all(r.operation == "GetObject" for r in mine), (name, mine)
        assert len(mine) <= 2, (name, len(mine))
        needed = footer_bytes(data)
        assert bodies.sent[key] <= needed + TAIL_BYTES, (name, bodies.sent[key], needed)
        if len(data) > TAIL_BYTES:
            assert bodies.sent[key] < len(data), name  # never the whole file
        if needed > TAIL_BYTES:
            assert len(mine) == 2, name  # the footer did not fit: one more read
        else:
            assert len(mine) == 1, name
        # the statistics are those read with the whole file at hand
        assert dataclasses.replace(stats, path="x") == _stats_from(data, len(data)), name
        assert stats.columns, name
        bodies.clear()


def test_a_refresh_reads_every_footer_within_the_bounds_in_parallel(counted, tmp_path):
    s3, bodies = counted
    data = tiny_acid_file(rows=20)
    big = big_footer_orc()
    files = {f"f{i:03d}": (big if i % 10 == 0 else data) for i in range(60)}
    paths = upload(s3, files)
    fs = s3.new_filesystem()
    keys = [FileKey(paths[n], len(d), "v1") for n, d in files.items()]
    needed = {len(data): footer_bytes(data), len(big): footer_bytes(big)}

    with s3.requests.recording() as seen:
        result = refresh(f"{tmp_path}/index", keys, fs, max_workers=8)
    assert result.added == 60 and not result.failed

    per_key: dict[str, list] = defaultdict(list)
    for request in seen:
        per_key[request.key].append(request)
    for name, payload in files.items():
        key = paths[name].partition("/")[2]
        assert [r.operation for r in per_key[key]] in (["GetObject"], ["GetObject"] * 2), name
        assert len(per_key[key]) == (2 if payload is big else 1), name
        assert bodies.sent[key] <= needed[len(payload)] + TAIL_BYTES, name
    # nothing else was asked of the server: the index itself is on the local disk
    assert {r.key for r in seen} <= {paths[n].partition("/")[2] for n in files}


def test_a_missing_file_is_a_stats_error_naming_it(s3):
    from airflow_provider_acid.pruning.stats import StatsError

    path = s3.url("gone").removeprefix("s3://") + "/bucket_00000"
    with pytest.raises(StatsError, match="bucket_00000.*not found"):
        read_file_stats(s3.new_filesystem(), path, size=100)


def test_a_truncated_file_is_a_stats_error_naming_it(s3, tmp_path):
    from airflow_provider_acid.pruning.stats import StatsError

    data = tiny_acid_file()
    path = s3.url("cut").removeprefix("s3://") + "/bucket_00000"
    s3.fs.pipe({path: data[: len(data) // 2]})
    with pytest.raises(StatsError, match="bucket_00000"):
        read_file_stats(s3.new_filesystem(), path)


def test_tail_file_reads_like_the_file(tmp_path):
    data = bytes(range(256)) * 1000
    path = Path(tmp_path, "f")
    path.write_bytes(data)
    from fsspec.implementations.local import LocalFileSystem

    tail = FileTail(str(path), len(data), len(data) - 5000, data[-5000:], 1)
    handle = TailFile(tail, LocalFileSystem())
    handle.seek(-10, io.SEEK_END)
    assert handle.read() == data[-10:]
    handle.seek(100)  # before the tail: fetched, and counted
    assert handle.read(50) == data[100:150] and handle.extra_reads == 1
