"""Compaction on a real S3-compatible server: read back row for row, pruning with an index on
S3, a failed upload that commits nothing, and what planning costs in listings."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hive_fixtures import arrange_fixture_table
from pyarrow.fs import FSSpecHandler, PyFileSystem

from airflow_provider_acid.engine.compaction import compact_slice, compact_table
from airflow_provider_acid.engine.manifest_compaction import (
    compact_manifest,
    compact_planned_slice,
    plan_from_manifest,
)
from airflow_provider_acid.engine.options import CompactionOptions
from airflow_provider_acid.engine.plan import plan_snapshot
from airflow_provider_acid.output import commit_snapshot, latest_snapshot
from airflow_provider_acid.output.records import CommitError
from airflow_provider_acid.pruning.manifest import compute_manifest
from airflow_provider_acid.pruning.manifest_files import write_manifest
from airflow_provider_acid.testing import generate_demo_table

#: Requests that change objects: a re-run of a committed snapshot makes none of them.
WRITES = {
    "PutObject",
    "CreateMultipartUpload",
    "UploadPart",
    "CompleteMultipartUpload",
    "DeleteObject",
    "DeleteObjects",
}


def key_of(url: str) -> str:
    """The s3fs path of a URL: ``bucket/key``."""
    return url.removeprefix("s3://")


def object_key(url: str) -> str:
    """The object key of a URL within its bucket (what the server's request log shows)."""
    return key_of(url).partition("/")[2]


def read_back(s3, out_url: str) -> pa.Table:
    """The output folder as a plain ``pyarrow.dataset`` read over s3fs sees it (paths starting
    with ``_`` or ``.`` are left out, as pyarrow does by default)."""
    s3.fs.invalidate_cache()
    filesystem = PyFileSystem(FSSpecHandler(s3.fs))
    return ds.dataset(key_of(out_url), format="parquet", filesystem=filesystem).to_table()


def read_local(out: Path) -> pa.Table:
    return ds.dataset(str(out), format="parquet").to_table()


def in_order(table: pa.Table) -> pa.Table:
    """Rows sorted on every column, so two tables compare row for row."""
    return table.sort_by([(name, "ascending") for name in table.column_names])


def objects(s3, url: str) -> dict[str, str]:
    """Every object under ``url``: key -> ETag (a fresh listing, no cache)."""
    s3.fs.invalidate_cache()
    found = s3.fs.find(key_of(url), detail=True)
    return {name: info["ETag"] for name, info in found.items()}


def visible_data_files(s3, out_url: str) -> set[str]:
    prefix = key_of(out_url) + "/"
    return {
        name.removeprefix(prefix)
        for name in objects(s3, out_url)
        if name.endswith(".parquet")
        and not any(p.startswith(("_", ".")) for p in name.removeprefix(prefix).split("/"))
    }


def assert_a_rerun_writes_nothing(s3, table_url: str, out_url: str, first, **kwargs) -> None:
    before = objects(s3, out_url)
    with s3.requests.recording() as seen:
        again = compact_table(table_url, out_url, storage_options=s3.storage_options, **kwargs)
    assert (again.snapshot_id, again.newly_committed) == (first.snapshot_id, False)
    assert again.buckets == first.buckets
    assert not WRITES & {r.operation for r in seen}, Counter(r.operation for r in seen)
    assert objects(s3, out_url) == before


@pytest.fixture(scope="module")
def nation(s3_server, tmp_path_factory) -> tuple[Path, str]:
    """The nation fixture table on disk and on the server (read-only): (local, url)."""
    local = arrange_fixture_table("nation", tmp_path_factory.mktemp("nation") / "nation")
    return local, s3_server.upload_table(local, s3_server.url("nation"))


@pytest.fixture(scope="module")
def demo(s3_server, tmp_path_factory):
    """A generated partitioned table (2 partitions x 4 buckets: base, insert deltas, deletes,
    an update) on disk and on the server (read-only): (writer, url)."""
    local = tmp_path_factory.mktemp("demo") / "demo"
    writer = generate_demo_table(str(local), rows_per_bucket=300)
    return writer, s3_server.upload_table(local, s3_server.url("demo"))


# -- 1. a full compaction, read back from S3 ---------------------------------------------------


def test_nation_compacted_on_s3_reads_back_like_the_local_compaction(s3, nation, tmp_path):
    local, url = nation
    out = s3.url("nation-snap")

    result = compact_table(url, out, storage_options=s3.storage_options)
    reference = compact_table(str(local), str(tmp_path / "out"))

    got = read_back(s3, out)
    assert got.num_rows == 23_000
    assert in_order(got).equals(in_order(read_local(tmp_path / "out")))
    assert result.totals() == reference.totals()
    assert result.newly_committed and result.table == url  # with its protocol: re-openable
    # The commit point and the markers are objects beside the data files ...
    snapshot_dir = f"{key_of(out)}/_snapshots/{result.snapshot_id}"
    assert json.loads(s3.fs.cat_file(f"{snapshot_dir}/manifest.json")) == result.to_dict()
    assert s3.fs.exists(f"{snapshot_dir}/_SUCCESS") and s3.fs.exists(f"{snapshot_dir}/plan.json")
    pointer = json.loads(s3.fs.cat_file(f"{key_of(out)}/_SUCCESS"))
    assert pointer["snapshot_id"] == result.snapshot_id
    # ... and the data files outside hidden paths are exactly the snapshot's.
    assert visible_data_files(s3, out) == {f.path for f in result.files}
    latest = latest_snapshot(out, storage_options=s3.storage_options)
    assert latest is not None and latest.snapshot_id == result.snapshot_id

    assert_a_rerun_writes_nothing(s3, url, out, result)


def test_a_generated_table_compacted_on_s3_holds_exactly_the_expected_rows(s3, demo):
    writer, url = demo
    out = s3.url("demo-snap")
    write_ids = writer.valid_write_ids()
    options = CompactionOptions(max_workers=2, target_file_size=4096, row_group_rows=100)

    result = compact_table(
        url, out, write_ids=write_ids, storage_options=s3.storage_options, options=options
    )

    got = read_back(s3, out)
    expected = writer.expected_rows()
    assert got.num_rows == expected.num_rows == result.rows_written
    # timestamps are written in microseconds and dt is typed as a date: compare in those types
    assert in_order(got).equals(in_order(expected.cast(got.schema)))
    assert len(result.buckets) == 8 and len(result.files) > len(result.buckets)  # rolled over
    assert visible_data_files(s3, out) == {f.path for f in result.files}

    assert_a_rerun_writes_nothing(s3, url, out, result, write_ids=write_ids, options=options)


# -- 2. the column-stats index and a slice manifest on S3 --------------------------------------


def test_the_index_and_a_manifest_on_s3_prune_and_compact(s3, nation, tmp_path):
    local, url = nation
    out = s3.url("pruned")
    index = f"{out}/_index"
    options = {"storage_options": s3.storage_options, "index_storage_options": s3.storage_options}

    kept = compute_manifest(url, "n_nationkey = 5", index_uri=index, refresh=True, **options)
    pruned = compute_manifest(url, "n_nationkey = 100", index_uri=index, **options)

    assert kept.slice_keys == ["#0"] and kept.metrics.files_not_indexed == 0
    assert pruned.slice_keys == [] and pruned.metrics.skipping_ratio == 1.0
    assert any(name.endswith(".parquet") for name in objects(s3, index))

    # A manifest written to S3 and compacted from there: only its rows, filtered.
    where = "n_nationkey <= 7"
    manifest = compute_manifest(url, where, index_uri=index, **options)
    assert manifest.table == url  # what the compaction opens again, protocol and all
    manifest_uri = f"{out}/manifests/run.json"
    written = write_manifest(manifest, manifest_uri, s3.storage_options)
    assert written == manifest_uri  # s3://bucket/..., openable by another process
    snapshot = s3.url("pruned-snap")
    result = compact_manifest(written, snapshot, storage_options=s3.storage_options)

    reference = compact_manifest(
        compute_manifest(str(local), where), str(tmp_path / "out"), options=CompactionOptions()
    )
    got = read_back(s3, snapshot)
    assert sorted(set(got["n_nationkey"].to_pylist())) == [0, 1, 2, 3, 4, 6, 7]
    assert in_order(got).equals(in_order(read_local(tmp_path / "out")))
    assert result.totals() == reference.totals()


def test_the_fan_out_steps_on_s3_commit_what_one_process_commits(s3, nation):
    """What the mapped Airflow tasks do: plan once, each slice from the plan alone (a worker
    opens the table again from ``plan.table``), then commit the plain-data results."""
    _, url = nation
    out = s3.url("fan-out")
    manifest_uri = f"{s3.url('manifests')}/run.json"
    options = {"storage_options": s3.storage_options}
    write_manifest(compute_manifest(url, "n_nationkey > 20", **options), manifest_uri, **options)

    plan = plan_from_manifest(manifest_uri, out, **options)
    assert plan.table == url and plan.keys_to_compute == ("#0",)
    results = [
        compact_planned_slice(out, plan.snapshot_id, key, **options).to_dict()
        for key in plan.keys_to_compute
    ]
    committed = commit_snapshot(out, plan.snapshot_id, results, **options)

    assert sorted(set(read_back(s3, out)["n_nationkey"].to_pylist())) == [21, 22, 23, 24]
    in_one_process = compact_manifest(manifest_uri, out, **options)
    assert (in_one_process.snapshot_id, in_one_process.newly_committed) == (
        committed.snapshot_id,
        False,
    )


# -- 3. a failed upload commits nothing --------------------------------------------------------


@pytest.mark.parametrize("refused", ["a data file", "the manifest"])
def test_a_refused_upload_commits_nothing_and_a_re_run_commits(s3, demo, refused):
    writer, url = demo
    out = s3.url("refused")
    options = CompactionOptions(max_workers=2)
    plan = plan_snapshot(url, out, storage_options=s3.storage_options, options=options)
    sid = plan.snapshot_id
    target = f"{out}/" + (
        f"dt=2024-01-02/part-{sid}-00001-0000.parquet"
        if refused == "a data file"
        else f"_snapshots/{sid}/manifest.json"
    )
    key = object_key(target)

    with s3.requests.recording() as seen, s3.fail("PutObject", key) as failed:
        with pytest.raises(PermissionError):
            compact_table(url, out, storage_options=s3.storage_options, options=options)

    assert [r.key for r in failed] == [key]
    assert [r.key for r in seen if r.operation == "PutObject" and r.key == key] == [key]
    left = objects(s3, out)
    assert key_of(target) not in left
    assert not [name for name in left if name.endswith(("/manifest.json", "/_SUCCESS"))]
    assert latest_snapshot(out, storage_options=s3.storage_options) is None
    if refused == "the manifest":  # every part was written and verified, then not committed
        assert len(visible_data_files(s3, out)) == 8

    result = compact_table(url, out, storage_options=s3.storage_options, options=options)

    assert (result.snapshot_id, result.newly_committed) == (sid, True)
    assert key_of(target) in objects(s3, out)
    assert visible_data_files(s3, out) == {f.path for f in result.files}  # no leftover
    got = read_back(s3, out)
    assert in_order(got).equals(in_order(writer.expected_rows().cast(got.schema)))


# -- 4. what planning costs in listings ----------------------------------------------------------


def test_a_compaction_lists_the_table_once(s3, demo):
    """Planning resolves the table with one recursive listing; the workers get the resolved
    snapshot, so the only other requests on the table are the reads of its files."""
    _, url = demo
    table = object_key(url)

    with s3.requests.recording() as seen:
        result = compact_table(url, s3.url("listed"), storage_options=s3.storage_options)

    assert {r.bucket for r in seen} == {s3.bucket}
    on_table = [r for r in seen if (r.key or r.prefix or "").startswith(table + "/")]
    listings = [r for r in on_table if r.operation.startswith("List")]
    assert len(listings) == 1, [(r.operation, r.prefix) for r in listings]
    (listing,) = listings
    assert listing.operation == "ListObjectsV2" and not listing.is_continuation
    assert (listing.prefix, listing.query["delimiter"]) == (table + "/", [""])  # recursive
    assert {r.operation for r in on_table} == {"ListObjectsV2", "GetObject"}
    assert len(result.buckets) == 8


def test_the_snapshot_s_documents_and_footers_cost_one_request_each(s3, demo):
    """The plan, the manifest (missing, then written) and the commit lock are read whole in
    one GET each (no HEAD for their size, no listing when one is missing), and the commit
    checks each output file with one GET of its footer, which checks its size too (no HEAD).
    The manifest is looked for once by the plan and once by the commit; a run of a committed
    snapshot reads it once, and not its plan."""
    _, url = demo
    out = s3.url("documents")

    with s3.requests.recording() as seen:
        result = compact_table(url, out, storage_options=s3.storage_options)

    out_key = object_key(out)
    documents = ("plan.json", "manifest.json", "_commit.lock")
    on_documents = [r for r in seen if r.key.startswith(out_key) and r.key.endswith(documents)]
    assert {r.operation for r in on_documents} == {"GetObject", "PutObject", "DeleteObject"}
    assert (
        not [  # s3fs's check whether a missing object is a folder
            r.prefix
            for r in seen
            if r.operation == "ListObjectsV2" and (r.prefix or "").rstrip("/").endswith(documents)
        ]
    )
    for file in result.files:
        key = f"{out_key}/{file.path}"
        on_file = Counter(r.operation for r in seen if r.key == key)
        assert on_file["PutObject"] == 1 and on_file["HeadObject"] == 0, (key, on_file)
        assert on_file["GetObject"] == 1, (key, on_file)  # its footer, and its size
    read = Counter(r.key.rpartition("/")[2] for r in on_documents if r.operation == "GetObject")
    # the manifest: checked once by the plan, once by the commit under its lock
    assert read["manifest.json"] == 2 and read["plan.json"] == 0, read

    with s3.requests.recording() as again:  # committed: its manifest read once, not its plan
        assert not compact_table(url, out, storage_options=s3.storage_options).newly_committed
    read = Counter(r.key.rpartition("/")[2] for r in again if r.operation == "GetObject")
    assert read["manifest.json"] == 1 and read["plan.json"] == 0, read


def _computed(s3, demo, name: str):  # noqa: ANN001, ANN202
    """``demo`` planned into a fresh output and each slice computed, not committed: (the
    output's URL, the plan, the slices' results)."""
    _, url = demo
    out = s3.url(name)
    plan = plan_snapshot(url, out, storage_options=s3.storage_options)
    results = [
        compact_slice(url, key, out, plan.snapshot_id, storage_options=s3.storage_options)
        for key in plan.slice_keys
    ]
    return out, plan, results


def test_the_commit_refuses_objects_missing_or_of_another_size(s3, demo):
    """The footer's read checks an object's size: one larger, one smaller (even than the
    footer's read), one missing and one of the right size without a footer are each named,
    and nothing is committed."""
    out, plan, results = _computed(s3, demo, "verified")
    storage = s3.storage_options
    larger, smaller, missing, garbled = (f"{key_of(out)}/{r.files[0].path}" for r in results[:4])
    s3.fs.pipe_file(larger, s3.fs.cat_file(larger) + b"more")
    s3.fs.pipe_file(smaller, b"PAR1")
    s3.fs.rm_file(missing)
    s3.fs.pipe_file(garbled, b"x" * results[3].files[0].size)  # its size, but no footer
    sizes = [r.files[0].size for r in results[:3]]

    with s3.requests.recording() as seen, pytest.raises(CommitError) as refused:
        commit_snapshot(out, plan.snapshot_id, results, storage_options=storage)

    message = str(refused.value)
    assert "4 file(s) do not verify" in message, message
    assert f"{results[3].files[0].path} has no readable Parquet footer" in message
    assert f"{results[0].files[0].path} holds {sizes[0] + 4} bytes, {sizes[0]} recorded" in message
    assert f"{results[1].files[0].path} holds 4 bytes, {sizes[1]} recorded" in message
    assert f"{results[2].files[0].path} is missing" in message
    assert not [r for r in seen if r.key.endswith("manifest.json") and r.operation == "PutObject"]
    assert latest_snapshot(out, storage_options=storage) is None
    # a file that verifies costs one GET; one that does not, a HEAD more to say its size
    heads = Counter(r.key for r in seen if r.operation == "HeadObject")
    assert set(heads) <= {object_key("s3://" + p) for p in (larger, smaller, missing)}, heads


SLOW_GET = 0.5  # seconds the server takes to answer each GET in the test below


def test_the_commit_looks_up_the_manifest_the_listing_and_the_footers_at_once(s3, demo):
    """The commit's look-ups are one round trip, not three in turn: with every GET slowed, the
    check that the snapshot is not committed yet, the listing of the output and the footer
    read of each file all start before the first of them is answered (given the plan, as
    compact_table gives it; without, the plan is read first)."""
    out, plan, results = _computed(s3, demo, "looked-up")
    storage = s3.storage_options
    footers = {f"{key_of(out)}/{f.path}".partition("/")[2] for r in results for f in r.files}
    with s3.slow("GetObject", SLOW_GET), s3.requests.recording() as seen:
        commit_snapshot(out, plan.snapshot_id, results, plan=plan, storage_options=storage)
    gets = [r for r in seen if r.operation == "GetObject"]
    manifest = [r for r in gets if r.key.endswith(f"{plan.snapshot_id}/manifest.json")]
    listing = [r for r in seen if r.operation == "ListObjectsV2"]
    looked_up = manifest[:1] + listing[:1] + [r for r in gets if r.key in footers]
    assert len(looked_up) == 2 + len(footers), [(r.operation, r.key) for r in seen]
    first = min(r.at for r in looked_up)
    assert max(r.at for r in looked_up) < first + SLOW_GET / 2, sorted(
        (round(r.at - first, 2), r.operation, r.key) for r in looked_up
    )
    assert latest_snapshot(out, storage_options=storage).snapshot_id == plan.snapshot_id


# -- 3b. a data file big enough for a multipart upload -------------------------------------------

MULTIPART_BLOCK = 5 * 2**20  # S3's smallest part: s3fs switches to multipart past one block


@pytest.fixture
def big_bucket(s3, tmp_path_factory):
    """One bucket whose uncompressed Parquet file takes more than one 5 MiB part."""
    local = tmp_path_factory.mktemp("big") / "table"
    writer = generate_demo_table(
        str(local), rows_per_bucket=250_000, partitions=1, buckets=1, seed=21
    )
    return writer, s3.upload_table(local, s3.url("big-table"))


def test_a_refused_part_of_a_multipart_upload_commits_nothing(s3, big_bucket):
    writer, url = big_bucket
    out = s3.url("multipart")
    storage = {**s3.storage_options, "default_block_size": MULTIPART_BLOCK}
    options = CompactionOptions(compression="none")
    sid = plan_snapshot(url, out, storage_options=storage, options=options).snapshot_id
    key = object_key(f"{out}/dt=2024-01-01/part-{sid}-00000-0000.parquet")

    with s3.requests.recording() as seen, s3.fail("UploadPart", key, times=None) as failed:
        with pytest.raises(PermissionError):
            compact_table(url, out, storage_options=storage, options=options)

    assert failed and {r.key for r in failed} == {key}
    assert [r.operation for r in seen if r.key == key][0] == "CreateMultipartUpload"
    assert "CompleteMultipartUpload" not in {r.operation for r in seen if r.key == key}
    assert key_of(f"{out}/{key.partition('/')[2]}") not in objects(s3, out)
    assert not [name for name in objects(s3, out) if name.endswith(("manifest.json", "_SUCCESS"))]
    assert latest_snapshot(out, storage_options=storage) is None
    assert "AbortMultipartUpload" in {r.operation for r in seen if r.key == key}
    assert not [u for u in s3.fs.list_multipart_uploads(s3.bucket) if u["Key"] == key]

    with s3.requests.recording() as seen:
        result = compact_table(url, out, storage_options=storage, options=options)

    assert (result.snapshot_id, result.newly_committed) == (sid, True)
    parts = [r for r in seen if r.key == key and r.operation == "UploadPart"]
    assert len(parts) >= 2  # it really went up in parts
    (written,) = result.files
    assert written.size > MULTIPART_BLOCK
    got = read_back(s3, out)
    assert in_order(got).equals(in_order(writer.expected_rows().cast(got.schema)))


# -- 5. expiring older snapshots on S3 ----------------------------------------------------------


def test_expiring_on_s3_leaves_exactly_the_latest_snapshot(s3, demo):
    from airflow_provider_acid.output import expire_snapshots

    writer, url = demo
    out = s3.url("expire")
    first = compact_table(url, out, storage_options=s3.storage_options)
    second = compact_table(  # other settings: another snapshot, no file shared with the first
        url, out, storage_options=s3.storage_options, options=CompactionOptions(compression="lz4")
    )
    assert first.snapshot_id != second.snapshot_id
    assert len(visible_data_files(s3, out)) == len(first.files) + len(second.files)

    with s3.requests.recording() as seen:
        expired = expire_snapshots(out, keep=1, storage_options=s3.storage_options)

    assert (expired.kept, expired.removed_snapshots) == (
        (second.snapshot_id,),
        (first.snapshot_id,),
    )
    assert sorted(expired.removed_files) == sorted(f.path for f in first.files)
    assert visible_data_files(s3, out) == {f.path for f in second.files}
    assert not [k for k in objects(s3, out) if f"/_snapshots/{first.snapshot_id}/" in k]
    assert (
        latest_snapshot(out, storage_options=s3.storage_options).snapshot_id == second.snapshot_id
    )
    assert {r.operation for r in seen} <= {"ListObjectsV2", "GetObject", "HeadObject"} | WRITES
    got = read_back(s3, out)
    assert in_order(got).equals(in_order(writer.expected_rows().cast(got.schema)))


def test_the_latest_of_many_snapshots_costs_one_listing_and_one_manifest(s3, demo):
    """Through the commit log (``output/commit_log.py``): one listing of ``_commits`` and one
    GET of the newest manifest, however many snapshots the folder holds; the log on the
    server lists every commit in order."""
    from airflow_provider_acid.output.commit_log import read_log

    _, url = demo
    out = s3.url("many-snapshots")
    committed = [
        compact_table(
            url,
            out,
            storage_options=s3.storage_options,
            options=CompactionOptions(compression=codec, reuse=False),
        )  # fmt: skip
        for codec in ("zstd", "lz4", "snappy", "gzip")
    ]
    with s3.requests.recording() as seen:
        latest = latest_snapshot(out, storage_options=s3.storage_options)
    assert latest.snapshot_id == committed[-1].snapshot_id
    assert Counter(r.operation for r in seen) == {"ListObjectsV2": 1, "GetObject": 1}, seen
    with s3.requests.recording() as seen:
        older = latest_snapshot(
            out, committed_before=committed[1].committed_at, storage_options=s3.storage_options
        )
    assert older.snapshot_id == committed[0].snapshot_id  # walked back, one GET a snapshot
    assert Counter(r.operation for r in seen) == {"ListObjectsV2": 1, "GetObject": 4}, seen
    logged = read_log(s3.new_filesystem(), key_of(out))
    assert [(e.sequence, e.snapshot_id) for e in logged] == [
        (c.sequence, c.snapshot_id) for c in committed
    ]


SLOW_PUT = 0.6  # seconds the server takes to answer each PUT in the test below
SLOW_SLICE = 0.3  # seconds a row filter takes per batch in the test below


def _overlap_run(s3, demo, **run):  # noqa: ANN001, ANN003, ANN202
    """compact_table of ``demo`` by one worker, recorded: (plan, result, requests, the GETs
    of each source file made by planning alone, the output's key)."""
    _, url = demo
    out = s3.url("overlap")
    storage, options = s3.storage_options, CompactionOptions(max_workers=1)
    key = run.get("row_filter_key")
    with s3.requests.recording() as planning:
        plan = plan_snapshot(url, out, storage_options=storage, options=options, row_filter_key=key)
    with s3.requests.recording() as seen:
        result = compact_table(url, out, storage_options=storage, options=options, **run)
    assert result.snapshot_id == plan.snapshot_id and len(plan.slices) == 8
    assert read_back(s3, out).num_rows == result.rows_written
    planned_gets = Counter(r.key for r in planning if r.operation == "GetObject")
    return plan, result, seen, planned_gets, object_key(out)


def _uploaded(seen, result, out_key: str, planned) -> float:  # noqa: ANN001
    """When the first upload request of a slice's data file reached the server."""
    (bucket,) = [b for b in result.buckets if b.slice_key == planned.key]
    keys = {f"{out_key}/{f.path}" for f in bucket.files}
    return min(
        r.at
        for r in seen
        if r.key in keys and r.operation in ("PutObject", "CreateMultipartUpload")
    )


def test_one_worker_fetches_the_next_bucket_while_it_computes_one(s3, demo):
    """With one worker, a bucket's files are fetched while the bucket before it is computed
    (each slice here takes at least SLOW_SLICE: a slow row filter), each once."""

    def slowly(table: pa.Table) -> pa.Array:
        time.sleep(SLOW_SLICE)
        return pa.array([True] * table.num_rows)

    plan, result, seen, planned_gets, out_key = _overlap_run(
        s3, demo, row_filter=slowly, row_filter_key="every row, slowly"
    )
    source = object_key(demo[1]) + "/"
    for earlier, later in zip(plan.slices, plan.slices[1:], strict=False):
        keys = {source + f for f in later.files}
        gets = [r for r in seen if r.operation == "GetObject" and r.key in keys]
        assert Counter(r.key for r in gets) == Counter({k: 1 + planned_gets[k] for k in keys}), (
            later.key
        )  # once each (and as planning reads them)
        assert max(r.at for r in gets) < _uploaded(seen, result, out_key, earlier), later.key


def test_one_worker_takes_the_commit_lock_while_its_last_upload_completes(s3, demo):
    """The commit takes its lock (and looks up the output) while the last data file's upload
    completes; it checks the files and writes the manifest only once they are stored, and
    lists the output once."""
    with s3.slow("PutObject", SLOW_PUT):
        plan, result, seen, _, out_key = _overlap_run(s3, demo)
    last = max(_uploaded(seen, result, out_key, p) for p in plan.slices)
    lock = [r.at for r in seen if r.key.endswith("_commit.lock") and r.operation == "PutObject"]
    manifest = [
        r.at for r in seen if r.key.endswith("manifest.json") and r.operation == "PutObject"
    ]
    assert lock and lock[0] < last + SLOW_PUT / 2, (lock, last)
    assert manifest and manifest[0] >= last + SLOW_PUT, (manifest, last)
    # one listing of the output under the lock (none of it again for temporaries: an object
    # store has none, and the uploads completed since dropped s3fs's cached listing)
    listed = [r.prefix for r in seen if r.operation == "ListObjectsV2" and r.at >= lock[0]]
    assert len(listed) == 1, listed


def test_one_worker_checks_its_stored_files_while_the_last_upload_completes(s3, demo):
    """Under its lock the commit reads back the data files stored already while the last
    uploads complete, and not those whose uploads complete under the lock: this process wrote
    them whole, and no other writer can remove them while the lock is held. Each slice takes
    SLOW_SLICE (a slow row filter), each data file's PUT SLOW_PUT; other PUTs are not slowed."""

    def slowly(table: pa.Table) -> pa.Array:
        time.sleep(SLOW_SLICE)
        return pa.array([True] * table.num_rows)

    with s3.slow("PutObject", SLOW_PUT, key_contains=".parquet"):
        plan, result, seen, _, out_key = _overlap_run(
            s3, demo, row_filter=slowly, row_filter_key="every row, slowly"
        )
    lock = min(r.at for r in seen if r.key.endswith("_commit.lock") and r.operation == "PutObject")
    put = {r.key: r.at for r in seen if r.key.endswith(".parquet") and r.operation == "PutObject"}
    gets = [r for r in seen if r.key in put and r.operation == "GetObject"]
    read = Counter(r.key for r in gets)
    first_read = {r.key: r.at for r in reversed(gets)}
    assert len(put) == len(plan.slices) and put.keys() == {
        f"{out_key}/{f.path}" for b in result.buckets for f in b.files
    }
    last = max(put, key=put.__getitem__)
    answered = put[last] + SLOW_PUT  # the last upload is complete
    manifest = min(
        r.at for r in seen if r.key.endswith("manifest.json") and r.operation == "PutObject"
    )
    assert read[last] == 0, read  # completed under the lock: not read back
    stored = [k for k, at in put.items() if at + SLOW_PUT < lock]  # complete before the lock
    assert stored and all(read[k] == 1 for k in stored), (read, stored)
    assert all(first_read[k] < answered for k in stored), (first_read, answered)
    assert manifest >= answered, (manifest, answered)


def test_one_worker_fetches_its_first_bucket_at_once(s3, demo):
    """With one worker, the first bucket's files (7 here) are all requested as it starts, not
    each as its reader comes to it (which asked for 5 at once, the others as the first ones
    were read): with every GET slowed, their reads start before the first is answered."""
    with s3.slow("GetObject", SLOW_SLICE):
        plan, _, seen, _, _ = _overlap_run(s3, demo)
    source = object_key(demo[1]) + "/"
    keys = {source + f for f in plan.slices[0].files}
    read = {k: max(r.at for r in seen if r.key == k and r.operation == "GetObject") for k in keys}
    first = min(read.values())
    assert len(keys) == 7 and max(read.values()) < first + SLOW_SLICE / 2, sorted(
        (round(at - first, 2), key) for key, at in read.items()
    )


def test_one_worker_uploads_a_bucket_while_it_computes_the_next(s3, demo):
    """With one worker, a bucket's data file is uploaded while the next one is computed: the
    worker does not wait for a slow PUT (each takes SLOW_PUT) before going on."""
    with s3.slow("PutObject", SLOW_PUT):
        plan, result, seen, _, out_key = _overlap_run(s3, demo)
    for earlier, later in zip(plan.slices, plan.slices[1:], strict=False):
        gap = _uploaded(seen, result, out_key, later) - _uploaded(seen, result, out_key, earlier)
        assert gap < SLOW_PUT, later.key
