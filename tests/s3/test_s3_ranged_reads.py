"""ORC files read from S3 with their ranges fetched ahead (acid/ranged_reads.py), on both test
servers: every byte fetched once in a few large ranged GETs, never more held than the bounded
queue allows, the rows those of a local read; a compaction costs at most 4 requests a file."""

from __future__ import annotations

import io
import time
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from airflow_provider_acid.acid.ranged_reads import (
    FIRST_BYTES,
    TAIL_BYTES,
    PrefetchedFile,
    fetch_early,
    forget_early,
    open_data_file,
    open_data_files,
    plan_ranges,
)
from airflow_provider_acid.acid.resolution import resolve_read_view
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.options import CompactionOptions
from airflow_provider_acid.testing import generate_demo_table

MIB = 1024 * 1024


def multi_stripe_orc(rows: int = 600_000) -> bytes:
    """An ORC file of several stripes (about 1 MiB each) with three columns."""
    rng = np.random.default_rng(0)
    table = pa.table(
        {
            "id": np.arange(rows),
            "note": pa.array([f"order {i}" for i in range(rows)]),
            "x": rng.random(rows),
        }
    )
    buffer = io.BytesIO()
    pa_orc.write_table(table, buffer, stripe_size=MIB, compression="zlib")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def orc_bytes() -> bytes:
    return multi_stripe_orc()


def _gets(seen, key: str) -> list:
    return [r for r in seen if r.key == key]


def test_ranges_cut_at_stripes_and_cover_the_file_once():
    stripes = [(3, 100), (103, 100), (203, 250), (453, 40)]
    ranges = plan_ranges(600, stripes, tail_start=500, chunk_bytes=210)
    assert ranges[0][0] == 0 and ranges[-1] == (500, 600)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))  # no gap, no overlap
    assert all(end - start <= 210 for start, end in ranges[:-1])
    # cuts fall on stripe boundaries unless a stripe is larger than a range
    assert {end for _, end in ranges[:-1]} <= {103, 203, 413, 453, 493, 500}


def test_the_first_ranges_grow_from_first_bytes_to_chunk_bytes():
    stripes = [(3 + 100 * i, 100) for i in range(40)] + [(4003, 900)]
    ranges = plan_ranges(5000, stripes, tail_start=4903, chunk_bytes=800, first_bytes=203)
    sizes = [end - start for start, end in ranges[:-1]]
    # at most 203 (the header and 2 stripes), 406 (4 stripes), then at most 800 each (the
    # last stripe, larger than a range, split)
    assert sizes[:3] == [203, 400, 800] and max(sizes) == 800, sizes
    assert ranges[0][0] == 0 and ranges[-1] == (4903, 5000)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert {end for _, end in ranges[:-1]} <= {s + n for s, n in stripes} | {4803, 4903}
    assert plan_ranges(5000, stripes, 4903, 800, first_bytes=None) == plan_ranges(
        5000, stripes, 4903, 800
    )


def test_a_large_file_is_read_in_few_gets_each_byte_once(s3, orc_bytes):
    url = s3.url("ranged") + "/bucket_00000"
    s3.fs.pipe_file(url, orc_bytes)
    path = url.removeprefix("s3://")
    key = path.partition("/")[2]
    expected = pa_orc.ORCFile(io.BytesIO(orc_bytes)).read()
    fs = s3.new_filesystem()
    before = s3.sent_bytes().get(key, 0)
    with s3.requests.recording() as seen:
        handle = PrefetchedFile(
            fs, path, len(orc_bytes), small_bytes=MIB, chunk_bytes=2 * MIB, depth=1
        )
        reader = pa_orc.ORCFile(handle)
        read = pa.Table.from_batches([reader.read_stripe(i) for i in range(reader.nstripes)])
        handle.close()
    assert read.equals(expected)
    gets = _gets(seen, key)
    assert {r.operation for r in gets} == {"GetObject"}  # no HEAD: the size was given
    planned = len(plan_ranges(len(orc_bytes), [], len(orc_bytes) - 1, 2 * MIB))
    assert len(gets) == handle.requests and handle.extra_reads == 0
    assert len(gets) <= planned + 1, (len(gets), planned)
    assert s3.sent_bytes()[key] - before == len(orc_bytes)  # every byte once
    # the bounded queue: the range being read, one ahead, and the 1 MiB tail
    assert handle.peak_held_bytes <= 2 * 2 * MIB + MIB + 1, handle.peak_held_bytes


def test_a_small_file_is_one_get(s3, orc_bytes):
    small = multi_stripe_orc(rows=20_000)
    url = s3.url("small") + "/bucket_00000"
    s3.fs.pipe_file(url, small)
    path = url.removeprefix("s3://")
    with s3.requests.recording() as seen:
        handle = open_data_file(s3.new_filesystem(), path, len(small))
        assert pa_orc.ORCFile(handle).read().num_rows == 20_000
    assert [r.operation for r in _gets(seen, path.partition("/")[2])] == ["GetObject"]


def _gets_made(log, keys: list[str], timeout: float = 20.0) -> set[str]:
    """The keys of ``keys`` fetched so far, once all of them have been or ``timeout`` passed
    (the fetches run on the pool's threads)."""
    deadline = time.monotonic() + timeout
    while True:
        got = {r.key for r in log.all() if r.operation == "GetObject"} & set(keys)
        if time.monotonic() > deadline or len(got) >= len(keys):
            return got
        time.sleep(0.02)


@pytest.mark.parametrize(("ahead_files", "ahead_bytes", "fetched_ahead"), [(2, 10, 2), (3, 1.5, 1)])
def test_the_small_files_after_the_one_read_are_fetched_ahead(
    s3, ahead_files, ahead_bytes, fetched_ahead
):
    small = multi_stripe_orc(rows=20_000)
    folder = s3.url("ahead")
    paths = [f"{folder}/delta_{n}/bucket_00000".removeprefix("s3://") for n in range(5)]
    for path in paths:
        s3.fs.pipe_file("s3://" + path, small)
    keys = [p.partition("/")[2] for p in paths]
    fs = s3.new_filesystem()
    with s3.requests.recording() as seen:
        files = open_data_files(
            fs,
            [(p, len(small)) for p in paths],
            ahead_files=ahead_files,
            ahead_bytes=int(ahead_bytes * len(small)),
        )
        first = next(files)
        # given the first file (not read yet), the next ones are being fetched already
        expected = set(keys[: 1 + fetched_ahead])
        assert _gets_made(s3.requests, keys[: 1 + fetched_ahead]) == expected
        assert _gets_made(s3.requests, keys, timeout=0.5) == expected  # no further than bounds
        handles = [first, *files]
        for handle in handles:
            assert pa_orc.ORCFile(handle).read().num_rows == 20_000
            handle.close()
    assert Counter(r.key for r in seen if r.key in keys) == dict.fromkeys(keys, 1)  # once each


def test_files_fetched_early_are_opened_without_a_request_of_their_own(s3, orc_bytes):
    """fetch_early: the small files whole and a larger one's tail and first range, within the
    byte bound; a later open of the same path at the same size uses them (the larger file's
    other stripes then fetched), one at another size does not; those never opened are closed
    by forget_early."""
    small = multi_stripe_orc(rows=20_000)
    folder = s3.url("early")
    names = {"base": orc_bytes, "delta": small, "delete": small, "beyond": small}
    paths = {n: f"{folder}/{n}/bucket_00000".removeprefix("s3://") for n in names}
    for name, data in names.items():
        s3.fs.pipe_file("s3://" + paths[name], data)
    keys = {n: p.partition("/")[2] for n, p in paths.items()}
    fs = s3.new_filesystem()
    budget = 2 * len(small) + TAIL_BYTES + FIRST_BYTES  # two small files, the larger's start
    with s3.requests.recording() as seen:
        fetch_early(
            fs,
            [(paths[n], len(names[n])) for n in ("delete", "base", "delta", "beyond")],
            ahead_bytes=budget + 1,
            small_bytes=MIB,  # the base is a larger file: its tail only
        )
        early = set(keys.values()) - {keys["beyond"]}
        assert _gets_made(s3.requests, sorted(early)) == early
        assert _gets_made(s3.requests, list(keys.values()), timeout=0.5) == early  # bounded

        def base_gets() -> int:
            return sum(r.operation == "GetObject" for r in _gets(s3.requests.all(), keys["base"]))

        deadline = time.monotonic() + 20
        while base_gets() < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # (nothing more comes)
        assert base_gets() == 2  # its tail, its first range
        # (the first range: the first stripes, at most FIRST_BYTES)
        assert TAIL_BYTES < s3.sent_bytes()[keys["base"]] <= TAIL_BYTES + FIRST_BYTES
        before = len(s3.requests.all())
        delete = open_data_file(fs, paths["delete"], len(small))
        assert len(s3.requests.all()) == before  # served from what was fetched
        other = open_data_file(fs, paths["delta"], len(small) + 1)  # not the size listed
        base = open_data_file(fs, paths["base"], len(orc_bytes))
        assert pa_orc.ORCFile(base).read().equals(pa_orc.ORCFile(io.BytesIO(orc_bytes)).read())
        assert pa_orc.ORCFile(delete).read().num_rows == 20_000
        for handle in (delete, other, base):
            handle.close()
        forget_early()  # the delta fetched early and never opened at its size
    gets = Counter(r.key for r in seen if r.operation == "GetObject")
    assert gets[keys["delete"]] == 1 and gets[keys["delta"]] == 2  # its own open: a GET more
    assert gets[keys["base"]] > 1  # the tail early, its stripes once opened
    assert keys["beyond"] not in gets


def test_nothing_is_fetched_early_from_a_local_disk(tmp_path):
    path = tmp_path / "bucket_00000"
    path.write_bytes(multi_stripe_orc(rows=1_000))
    from fsspec.implementations.local import LocalFileSystem

    fs = LocalFileSystem()
    fetch_early(fs, [(str(path), path.stat().st_size)])
    with open_data_file(fs, str(path), path.stat().st_size) as handle:
        assert not isinstance(handle, PrefetchedFile)  # the local file itself
    forget_early()


def test_a_compaction_makes_at_most_four_requests_a_data_file(s3, tmp_path):
    local = tmp_path / "demo"
    generate_demo_table(str(local), rows_per_bucket=300)
    url = s3.upload_table(local, s3.url("prefetch-demo"))
    files = [f for s in resolve_read_view(url, storage_options=s3.storage_options).slices
             for f in (*s.data_files, *s.delete_delta_files)]  # fmt: skip
    out = s3.url("prefetch-out")
    with s3.requests.recording() as seen:
        compact_table(url, out, storage_options=s3.storage_options,
                      options=CompactionOptions(max_workers=2))  # fmt: skip
    per_file = Counter(r.key for r in seen)
    for f in files:
        key = f.path.partition("/")[2]
        assert 1 <= per_file[key] <= 4, (key, per_file[key])


def test_one_worker_fetches_its_first_slice_while_the_plan_is_written(s3, tmp_path):
    """The first slice's files are fetched before the plan's round trips end: their GETs come
    before the plan's PUT, however slow it is. A re-run finds the snapshot committed: what it
    fetched early is of the first slice only, and it commits nothing."""
    local = tmp_path / "demo"
    generate_demo_table(str(local), rows_per_bucket=300)
    url = s3.upload_table(local, s3.url("first-early"))
    view = resolve_read_view(url, storage_options=s3.storage_options)
    first = {f.path.partition("/")[2] for f in view.slices[0].files}
    others = {f.path.partition("/")[2] for s in view.slices[1:] for f in s.files}
    out = s3.url("first-early-out")
    one = CompactionOptions(max_workers=1)
    with s3.slow("PutObject", 0.3, key_contains="plan.json"), s3.requests.recording() as seen:
        result = compact_table(url, out, storage_options=s3.storage_options, options=one)
    assert result.newly_committed
    order = [(r.operation, r.key) for r in seen]
    plan_put = next(i for i, (op, key) in enumerate(order) if op == "PutObject" and
                    key.endswith("plan.json"))  # fmt: skip
    early = {key for op, key in order[:plan_put] if op == "GetObject"}
    assert first <= early  # every file of the first slice, before the plan's write
    assert len(early & others) <= 1  # of the others, only the file the schema is read from

    with s3.requests.recording() as seen:
        again = compact_table(url, out, storage_options=s3.storage_options, options=one)
    assert again.snapshot_id == result.snapshot_id and not again.newly_committed
    data_gets = {r.key for r in seen if r.operation == "GetObject"} & (first | others)
    assert len(data_gets - first) <= 1  # what it fetched early, the schema's file, no more
    assert not any(r.operation == "PutObject" and "part-" in r.key for r in seen)
