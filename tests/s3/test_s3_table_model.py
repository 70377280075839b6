"""The table model on a real S3-compatible server: same snapshots as on disk, one listing each."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from airflow_provider_acid.acid.changes import find_new_delta_folders
from airflow_provider_acid.acid.inspection import read_view_to_dict
from airflow_provider_acid.acid.resolution import resolve_read_view

REPO = Path(__file__).resolve().parents[2]


def comparable(snapshot) -> dict:
    """The stable JSON form without the root, which differs between a copy and the other."""
    document = read_view_to_dict(snapshot)
    del document["table"]
    return document


@pytest.mark.parametrize(
    ("table", "write_ids"),
    [
        ("nation", None),
        # An older reader: the second delete delta is above its high-water mark.
        ("nation", "default.nation:3:9223372036854775807::"),
        ("dummy_id_data", None),
        ("hcube_tbl6_partitioned", None),
        ("delete_deltas_only", None),
    ],
)
def test_a_fixture_table_on_s3_resolves_like_its_local_copy(s3, hive_table, table, write_ids):
    local = hive_table(table)
    url = s3.upload_table(local, s3.url(table))

    on_disk = resolve_read_view(str(local), write_ids)
    on_s3 = resolve_read_view(url, write_ids, storage_options=s3.storage_options)

    assert on_disk.slices, "the comparison must be about a table with data"
    assert comparable(on_s3) == comparable(on_disk)
    assert on_s3.root == url.removeprefix("s3://")
    # Sizes come from the listing: the objects are the very bytes of the local files.
    for data_file in on_s3.files:
        relative = data_file.path.removeprefix(on_s3.root + "/")
        assert data_file.file.size == (local / relative).stat().st_size
        assert data_file.file.version  # the ETag


def test_a_table_uri_with_a_trailing_slash_resolves_the_same(s3, hive_table):
    local = hive_table("hcube_tbl6_partitioned")
    url = s3.upload_table(local, s3.url("slash"))
    plain = resolve_read_view(url, storage_options=s3.storage_options)
    slashed = resolve_read_view(url + "/", storage_options=s3.storage_options)
    assert comparable(slashed) == comparable(plain)


def write_layout(root: Path) -> int:
    """Several partitions, each with a base, deltas, delete deltas, two buckets and side files.

    Listing never reads file contents, so the files hold filler bytes. Returns the file count.
    """
    count = 0
    for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
        for region in ("eu", "us"):
            partition = root / f"dt={day}" / f"region={region}"
            folders = [
                "base_0000004",
                "delta_0000005_0000005_0000",
                "delta_0000006_0000006_0000",
                "delete_delta_0000006_0000006_0000",
                "delta_0000007_0000007_0000",
            ]
            for folder in folders:
                (partition / folder).mkdir(parents=True, exist_ok=True)
                (partition / folder / "_orc_acid_version").write_text("2")
                count += 1
                for bucket in (0, 1):
                    (partition / folder / f"bucket_{bucket:05d}").write_bytes(b"orc" * 50)
                    count += 1
    return count


@pytest.fixture(scope="module")
def wide_table(s3_server, tmp_path_factory) -> tuple[str, str, int]:
    """The layout above on the server once for this module's read-only tests: (url, key, files)."""
    local = tmp_path_factory.mktemp("wide")
    files = write_layout(local)
    url = s3_server.upload_table(local, s3_server.url("wide"))
    return url, url.removeprefix(f"s3://{s3_server.bucket}/"), files


def assert_one_recursive_listing(requests, bucket: str, key: str) -> None:
    """Exactly one ListObjectsV2 of the whole table (later pages of it aside), nothing else."""
    operations = Counter(r.operation for r in requests)
    assert set(operations) == {"ListObjectsV2"}, operations
    first, *pages = requests
    assert not first.is_continuation
    assert first.bucket == bucket
    assert first.query["prefix"] == [key + "/"]
    assert first.query["delimiter"] == [""]  # recursive: no per-folder listing needed
    for page in pages:
        assert page.is_continuation
        assert (page.bucket, page.query["prefix"]) == (bucket, [key + "/"])


def test_a_snapshot_of_a_partitioned_table_costs_one_listing_request(s3, wide_table):
    url, key, files = wide_table

    with s3.requests.recording() as seen:
        snapshot = resolve_read_view(url, storage_options=s3.storage_options)

    assert len(seen) == 1, [r.operation for r in seen]
    assert_one_recursive_listing(seen, s3.bucket, key)
    # That one answer held every partition's folders: 6 partitions x 5 folders x 2 buckets.
    assert files == 6 * 5 * 3
    assert len(snapshot.partitions) == 6 and len(snapshot.slices) == 12
    assert len(snapshot.files) == 6 * 5 * 2


def test_a_paginated_listing_is_still_one_listing(s3, wide_table):
    """With 7 keys a page, the 90 objects take 13 pages of the same single listing."""
    url, key, files = wide_table
    fs = s3.new_filesystem()
    fs.s3.meta.events.register(
        "provide-client-params.s3.ListObjectsV2",
        lambda params, **_: params.update(MaxKeys=7),
    )

    with s3.requests.recording() as seen:
        paged = resolve_read_view(url, filesystem=fs)

    assert len(seen) == -(-files // 7)
    assert_one_recursive_listing(seen, s3.bucket, key)
    unpaged = resolve_read_view(url, storage_options=s3.storage_options)
    assert comparable(paged) == comparable(unpaged)


def test_looking_for_new_deltas_costs_one_listing_request(s3, wide_table):
    url, key, _ = wide_table

    with s3.requests.recording() as seen:
        found = find_new_delta_folders(
            url, 6, ["delta"], ["dt=2024-01-02/region=us"], storage_options=s3.storage_options
        )

    assert [(f.partition, f.folder) for f in found] == [
        ("dt=2024-01-02/region=us", "delta_0000007_0000007_0000")
    ]
    assert len(seen) == 1
    # only the watched partition's folder is listed (issue #14), recursively, in one request
    assert_one_recursive_listing(seen, s3.bucket, f"{key}/dt=2024-01-02/region=us")


def test_a_missing_table_is_an_error_naming_it(s3):
    from airflow_provider_acid.acid.listing import TableLocationError

    url = s3.url("nowhere")
    with pytest.raises(TableLocationError, match="nowhere"):
        resolve_read_view(url, storage_options=s3.storage_options)


def test_folder_marker_objects_are_not_files(s3, hive_table):
    local = hive_table("hcube_tbl6_partitioned")
    url = s3.upload_table(local, s3.url("markers"))
    key = url.removeprefix("s3://")
    s3.fs.pipe(
        {
            f"{key}/": b"",
            f"{key}/fld1=1/": b"",
            f"{key}/fld1=1/delta_0000001_0000001_0000/": b"",
        }
    )
    with_markers = resolve_read_view(url, storage_options=s3.storage_options)
    assert comparable(with_markers) == comparable(resolve_read_view(str(local)))


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_compose_demo_job_writes_the_table_once(s3):
    """docker/create-demo-table.sh as the compose job runs it: S3 settings only from the
    standard AWS variables, the plain s3:// URL on the command line. A second run (a second
    `docker compose up`) keeps the table."""
    url = s3.url("demo")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "AWS_ENDPOINT_URL_S3": s3.endpoint_url,
        "AWS_ACCESS_KEY_ID": s3.key,
        "AWS_SECRET_ACCESS_KEY": s3.secret,
        "AWS_DEFAULT_REGION": s3.region,
    }

    def run_job() -> tuple[subprocess.CompletedProcess, list]:
        with s3.requests.recording() as seen:
            done = subprocess.run(
                ["bash", str(REPO / "docker" / "create-demo-table.sh"), url],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
        assert done.returncode == 0, done.stdout + done.stderr
        return done, seen

    first, writes = run_job()
    assert f"Writing the demo table to {url}" in first.stdout
    assert "PutObject" in {r.operation for r in writes}
    summary = json.loads(next(x for x in first.stdout.splitlines() if x.startswith("{")))
    assert summary["expected_rows"] > 0
    snapshot = resolve_read_view(
        url, summary["valid_write_ids"], storage_options=s3.storage_options
    )
    assert len(snapshot.partitions) >= 2 and snapshot.slices
    assert "partition dt=" in first.stdout  # airflow-acid inspect's report of it

    again, seen = run_job()
    assert f"already at {url}" in again.stdout
    assert "PutObject" not in {r.operation for r in seen}  # nothing written the second time
