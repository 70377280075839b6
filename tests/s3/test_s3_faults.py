"""Storage faults between s3fs and the S3 server: 500, 503, ``SlowDown``, connection resets
mid-body and stalled answers, injected by a proxy on 127.0.0.1
(``airflow_provider_acid.testing.fault_proxy``).

Under each fault, listing, index refresh, compaction (an upload in several multipart parts
included) and commit either succeed through retries, committing exactly the rows of a
fault-free run, or fail with an error naming what failed, committing nothing. Each test prints
the faults injected and the retries the client made (``pytest -s`` shows them) and records
them as ``record_property`` entries of the JUnit report.
"""

from __future__ import annotations

import errno
import json

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
import s3fs
from pyarrow.fs import FSSpecHandler, PyFileSystem

from airflow_provider_acid.acid.listing import list_table_files, resolve_filesystem
from airflow_provider_acid.acid.resolution import resolve_read_view
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.options import CompactionOptions
from airflow_provider_acid.hooks.acid import storage_options_from_extra
from airflow_provider_acid.output import latest_snapshot
from airflow_provider_acid.pruning.manifest import compute_manifest
from airflow_provider_acid.testing import generate_demo_table
from airflow_provider_acid.testing.fault_proxy import (
    KINDS,
    Fault,
    FaultProxy,
    SeenRequest,
    retries_of,
)

#: The client's retry and timeout settings in these tests, set as an ``acid`` connection sets
#: them: botocore's standard retry mode, 5 attempts, and short timeouts so a stall costs 1 s.
RETRY_EXTRA = {
    "retry_mode": "standard",
    "max_attempts": "5",
    "connect_timeout": "1",
    "read_timeout": "1",
}
MULTIPART_BLOCK = 5 * 2**20  # S3's (and s3fs's) smallest part size
#: How often each fault hits a request (a request is hit at most once: its retry gets through).
RATES = {"500": 0.1, "503": 0.1, "slowdown": 0.1, "reset": 0.1, "stall": 0.02}
STALL_LIMIT = 3  # each stall costs a read timeout


def key_of(url: str) -> str:
    return url.removeprefix("s3://")


def in_order(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in table.column_names])


def read_back(s3, out_url: str) -> pa.Table:
    """The output folder as ``pyarrow.dataset`` reads it, straight from the server."""
    s3.fs.invalidate_cache()
    filesystem = PyFileSystem(FSSpecHandler(s3.fs))
    return ds.dataset(key_of(out_url), format="parquet", filesystem=filesystem).to_table()


def committed_markers(s3, out_url: str) -> list[str]:
    s3.fs.invalidate_cache()
    try:
        names = s3.fs.find(key_of(out_url))
    except FileNotFoundError:
        return []
    return [n for n in names if n.endswith(("/manifest.json", "/_SUCCESS"))]


def fault_for(kind: str, **kwargs) -> Fault:
    limit = STALL_LIMIT if kind == "stall" else None
    return Fault(kind, rate=RATES[kind], limit=limit, **kwargs)


def report(record_property, what: str, kind: str, seen: list[SeenRequest]) -> dict[str, int]:
    counts = retries_of(seen)
    by_operation: dict[str, int] = {}
    for request in seen:
        if request.injected:
            by_operation[request.operation] = by_operation.get(request.operation, 0) + 1
    print(f"\n[s3 faults] {what} under {kind}: {counts}, injected into {by_operation}")
    record_property(f"{what}-{kind}", json.dumps({**counts, "injected_into": by_operation}))
    return counts


def assert_each_fault_was_retried(seen: list[SeenRequest]) -> None:
    """Every request that got a fault was made again later (botocore's or s3fs's retry)."""
    for i, request in enumerate(seen):
        if request.injected:
            assert any(r.identity == request.identity for r in seen[i + 1 :]), request


@pytest.fixture(scope="module")
def proxy(s3_server):
    running = FaultProxy(s3_server.endpoint_url, stall_seconds=10).start()
    yield running
    running.stop()


@pytest.fixture
def through_proxy(s3, proxy) -> dict:
    """Storage options for s3:// through the proxy, built from an ``acid`` connection's
    extras exactly as ``AcidHook`` builds them."""
    extra = {**s3.connection_extra, "endpoint_url": proxy.endpoint_url, **RETRY_EXTRA}
    options = storage_options_from_extra(extra)
    assert options["config_kwargs"] == {
        "retries": {"mode": "standard", "total_max_attempts": 5},
        "connect_timeout": 1.0,
        "read_timeout": 1.0,
    }
    return options


@pytest.fixture(scope="module")
def demo(s3_server, tmp_path_factory):
    """A generated table (2 partitions x 4 buckets, deletes and an update), uploaded straight
    to the server, and its expected rows."""
    local = tmp_path_factory.mktemp("fault-demo") / "demo"
    writer = generate_demo_table(str(local), rows_per_bucket=200)
    return writer, s3_server.upload_table(local, s3_server.url("fault-demo"))


@pytest.fixture(scope="module")
def big_bucket(s3_server, tmp_path_factory):
    """One bucket whose uncompressed Parquet output takes more than two 5 MiB parts."""
    local = tmp_path_factory.mktemp("fault-big") / "table"
    writer = generate_demo_table(
        str(local), rows_per_bucket=400_000, partitions=1, buckets=1, seed=5
    )
    return writer, s3_server.upload_table(local, s3_server.url("fault-big"))


# -- 1. each fault kind, through retries: listing, index refresh, compaction, commit ------------


@pytest.mark.parametrize("kind", KINDS)
def test_listing_index_refresh_compaction_and_commit_survive(
    s3, proxy, through_proxy, demo, kind, record_property
):
    writer, url = demo
    out = s3.url(f"faults-{kind}")
    index = f"{out}/_index"
    write_ids = writer.valid_write_ids()
    options = CompactionOptions(max_workers=2, target_file_size=4096, row_group_rows=100)
    expected = resolve_read_view(url, write_ids, storage_options=s3.storage_options)
    fs, root = resolve_filesystem(url, storage_options=s3.storage_options)
    expected_files = sorted((f.path, f.size) for f in list_table_files(fs, root))

    with proxy.inject(fault_for(kind)) as seen:
        fs, root = resolve_filesystem(url, storage_options=through_proxy)
        listed = sorted((f.path, f.size) for f in list_table_files(fs, root))
        snapshot = resolve_read_view(url, write_ids, storage_options=through_proxy)
        manifest = compute_manifest(
            url,
            "id >= 0",
            index_uri=index,
            write_ids=write_ids,
            refresh=True,
            storage_options=through_proxy,
            index_storage_options=through_proxy,
        )
        result = compact_table(
            url, out, write_ids=write_ids, storage_options=through_proxy, options=options
        )

    counts = report(record_property, "listing+index+compaction+commit", kind, seen)
    assert counts["injected"] > 0
    assert_each_fault_was_retried(seen)
    assert listed == expected_files
    assert [s.key for s in snapshot.slices] == [s.key for s in expected.slices]
    assert sorted(manifest.slice_keys) == sorted(s.key for s in expected.slices)
    assert manifest.metrics.files_not_indexed == 0
    assert result.newly_committed
    got = read_back(s3, out)
    rows = writer.expected_rows()
    assert got.num_rows == rows.num_rows == result.rows_written
    assert in_order(got).equals(in_order(rows.cast(got.schema)))
    latest = latest_snapshot(out, storage_options=s3.storage_options)
    assert latest is not None and latest.snapshot_id == result.snapshot_id


# -- 2. the same for an upload in several multipart parts ---------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_multipart_compaction_survives(
    s3, proxy, through_proxy, big_bucket, kind, record_property
):
    writer, url = big_bucket
    out = s3.url(f"faults-multipart-{kind}")
    storage = {**through_proxy, "default_block_size": MULTIPART_BLOCK}
    options = CompactionOptions(compression="none")
    # Faults on the upload only: the parts, their start and completion (the reads of the
    # source are covered above).
    uploads = frozenset({"CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"})
    fault = fault_for(kind, operations=uploads)
    fault.rate = 0.5  # few requests: every other one (stalls: STALL_LIMIT at most)

    with proxy.inject(fault) as seen:
        result = compact_table(url, out, storage_options=storage, options=options)

    counts = report(record_property, "multipart compaction", kind, seen)
    parts = {r.identity for r in seen if r.operation == "UploadPart"}
    assert len(parts) >= 3  # really in several parts
    assert counts["injected"] > 0
    assert_each_fault_was_retried(seen)
    (written,) = result.files
    assert written.size > 2 * MULTIPART_BLOCK
    got = read_back(s3, out)
    assert in_order(got).equals(in_order(writer.expected_rows().cast(got.schema)))
    assert not [u for u in s3.fs.list_multipart_uploads(s3.bucket) if out in f"s3://{u['Key']}"]


# -- 3. faults that outlast the retries: a clear error, nothing committed -----------------------


def with_attempts(s3, proxy, attempts: int, read_timeout: float = 1) -> dict:
    """Storage options through the proxy with ``max_attempts`` set to ``attempts`` (and
    ``read_timeout`` seconds before an answer that does not come is tried again)."""
    extra = {
        **s3.connection_extra,
        "endpoint_url": proxy.endpoint_url,
        **RETRY_EXTRA,
        "max_attempts": str(attempts),
        "read_timeout": str(read_timeout),
    }
    return storage_options_from_extra(extra)


def test_a_manifest_upload_that_never_gets_through_commits_nothing(
    s3, proxy, demo, record_property
):
    writer, url = demo
    out = s3.url("faults-refused-manifest")
    # 503 ServiceUnavailable: botocore retries it, s3fs does not (it retries SlowDown again)
    always = Fault("503", rate=1, operations=frozenset({"PutObject"}), per_request=None)
    always.key_contains = "manifest.json"

    with proxy.inject(always) as seen, pytest.raises(OSError) as failed:
        compact_table(
            url,
            out,
            write_ids=writer.valid_write_ids(),
            # no stall here: an answer slower than 1 s on a busy machine is not tried again,
            # so the retries counted are the manifest's
            storage_options=with_attempts(s3, proxy, 3, read_timeout=30),
        )

    counts = report(record_property, "refused manifest", "503", seen)
    message = str(failed.value)
    # s3fs's translation of the S3 error: errno EBUSY and the server's message, naming the
    # object it was writing
    assert failed.value.errno == errno.EBUSY and "unable to handle" in message, message
    assert failed.value.filename.endswith("/manifest.json") and "manifest.json" in message
    hit = [r for r in seen if r.injected]
    assert [r.attempt for r in hit] == [1, 2, 3]  # botocore used up its 3 attempts
    assert all(r.key.endswith("/manifest.json") for r in hit)
    assert counts["botocore_retries"] == 2, [r for r in seen if r.attempt > 1]
    assert committed_markers(s3, out) == []
    assert latest_snapshot(out, storage_options=s3.storage_options) is None

    result = compact_table(
        url, out, write_ids=writer.valid_write_ids(), storage_options=s3.storage_options
    )
    got = read_back(s3, out)
    assert result.newly_committed
    assert in_order(got).equals(in_order(writer.expected_rows().cast(got.schema)))


def test_a_part_that_always_fails_aborts_the_upload_and_commits_nothing(
    s3, proxy, big_bucket, record_property
):
    writer, url = big_bucket
    out = s3.url("faults-refused-part")
    storage = {**with_attempts(s3, proxy, 2), "default_block_size": MULTIPART_BLOCK}
    always = Fault("500", rate=1, operations=frozenset({"UploadPart"}), per_request=None)

    with proxy.inject(always) as seen, pytest.raises(OSError) as failed:
        compact_table(
            url, out, storage_options=storage, options=CompactionOptions(compression="none")
        )

    report(record_property, "refused part", "500", seen)
    message = str(failed.value)
    assert "InternalError" in message or "internal error" in message.lower(), message
    assert [r.attempt for r in seen if r.injected][:2] == [1, 2]
    assert "AbortMultipartUpload" in {r.operation for r in seen}
    assert "CompleteMultipartUpload" not in {r.operation for r in seen}
    assert committed_markers(s3, out) == []
    assert latest_snapshot(out, storage_options=s3.storage_options) is None
    assert not [u for u in s3.fs.list_multipart_uploads(s3.bucket) if key_of(out) in u["Key"]]


def test_a_listing_that_always_stalls_is_a_timeout_error(s3, proxy, demo, record_property):
    _, url = demo
    options = with_attempts(s3, proxy, 1)  # no botocore retry: s3fs still tries 5 times
    always = Fault("stall", rate=1, operations=frozenset({"ListObjectsV2"}), per_request=None)

    with proxy.inject(always) as seen, pytest.raises(Exception) as failed:
        resolve_read_view(url, storage_options=options)

    report(record_property, "stalled listing", "stall", seen)
    message = str(failed.value)
    assert "timeout" in message.lower() or "timed out" in message.lower(), repr(failed.value)
    stalled = [r for r in seen if r.injected]
    assert len(stalled) == s3fs.S3FileSystem.retries  # s3fs's own retries of a read timeout
    assert {r.attempt for r in stalled} == {1}


def test_retry_settings_reach_the_s3_client(s3, proxy, through_proxy):
    fs, _ = resolve_filesystem("s3://" + s3.bucket, storage_options=through_proxy)
    fs.ls(s3.bucket)
    config = fs.s3.meta.config
    assert config.retries == {"mode": "standard", "total_max_attempts": 5}
    assert (config.connect_timeout, config.read_timeout) == (1.0, 1.0)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"retry_mode": "sometimes"}, "retry_mode"),
        ({"max_attempts": "0"}, "max_attempts"),
        ({"max_attempts": "2.5"}, "max_attempts"),
        ({"read_timeout": "soon"}, "read_timeout"),
        ({"connect_timeout": "-1"}, "connect_timeout"),
    ],
)
def test_a_bad_retry_setting_is_refused_naming_it(extra, named):
    with pytest.raises(ValueError, match=f"connection extra '{named}'"):
        storage_options_from_extra(extra)


def test_no_retry_setting_leaves_botocore_defaults():
    assert "config_kwargs" not in storage_options_from_extra({"endpoint_url": "http://x"})


def test_the_proxy_passes_bodies_larger_than_its_pieces_whole_and_counts_them(
    s3, proxy, through_proxy
):
    # 3.5 MiB: several of the pieces a body is streamed in (1 MiB; 64 KiB under a cap)
    data = bytes(range(256)) * (14 * 2**10)
    fs = s3fs.S3FileSystem(**through_proxy, skip_instance_cache=True)
    path = f"{s3.bucket}/proxy-bodies/object.bin"
    before = proxy.traffic()
    fs.pipe_file(path, data)
    whole = fs.cat_file(path)
    part = fs.cat_file(path, start=2**20 - 7, end=3 * 2**20 + 5)  # 3 pieces, cut anywhere
    with proxy.shaped(bandwidth=8e6):  # 8 MB/s: the body is paced in 64 KiB pieces
        capped = fs.cat_file(path, start=0, end=2**20)
    after = proxy.traffic()

    assert whole == data
    assert part == data[2**20 - 7 : 3 * 2**20 + 5]
    assert capped == data[: 2**20]
    assert after["up"] - before["up"] == len(data)
    down = after["down"] - before["down"]
    assert down == len(data) + len(part) + len(capped)
    seen = [r for r in proxy.seen() if r.key == "proxy-bodies/object.bin"]
    bodies = [r.operation for r in seen if r.operation != "HeadObject"]  # s3fs asks the size
    assert bodies == ["PutObject", "GetObject", "GetObject", "GetObject"]
    assert all(r.attempt == 1 and r.injected is None for r in seen)
