"""Partition-scoped listing on a real S3-compatible server: what is asked of the server.

A manifest for one partition makes one delimited listing of the table root, one of a partition
folder (to find the leaf level) and one recursive listing of the kept partition, whatever the
number of partitions; the trigger and ``find_new_delta_folders`` list only the partitions
they watch; ``compact --partition`` and each slice's worker list only their partition.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from airflow_provider_acid.acid.changes import find_new_delta_folders
from airflow_provider_acid.acid.inspection import read_view_to_dict
from airflow_provider_acid.acid.partition_listing import resolve_partition_specs
from airflow_provider_acid.acid.resolution import resolve_read_view
from airflow_provider_acid.pruning.manifest import compute_manifest
from airflow_provider_acid.testing.many_partitions import write_many_partitions
from airflow_provider_acid.triggers.acid import AcidDeltaTrigger

CONN_ID = "acid_s3_partitions"


def listings(seen, s3):
    """(prefix relative to the bucket, delimiter) of each listing request, first pages only."""
    return [
        (r.query["prefix"][0], r.query.get("delimiter", [""])[0])
        for r in seen
        if r.operation == "ListObjectsV2" and not r.is_continuation and r.bucket == s3.bucket
    ]


@pytest.fixture
def table(s3):
    url = s3.url("parts")
    write_many_partitions(url, 40, 2, storage_options=s3.storage_options)
    return url, url.removeprefix(f"s3://{s3.bucket}/")


def test_a_one_partition_manifest_lists_the_root_and_that_partition(s3, table):
    url, key = table
    with s3.requests.recording() as seen:
        manifest = compute_manifest(url, "p = 17", storage_options=s3.storage_options)
    assert manifest.metrics.partitions_total == 40 and manifest.metrics.partitions_kept == 1
    assert {s.partition for s in manifest.slices} == {"p=17"}
    assert listings(seen, s3) == [
        (f"{key}/", "/"),  # the partition folders
        (f"{key}/p=17/", ""),  # the kept partition, recursively: a leaf (no k=v folder in it)
    ]


def test_a_one_partition_manifest_with_an_index_makes_seven_requests(s3, table):
    url, key = table
    index = s3.url("parts-index")
    options = {"storage_options": s3.storage_options, "index_storage_options": s3.storage_options}
    where = "p = 17 AND amount = 7"
    whole = compute_manifest(url, where, index_uri=index, refresh=True, **options)
    with s3.requests.recording() as seen:
        manifest = compute_manifest(url, where, index_uri=index, **options)
    assert [s.to_dict() for s in manifest.slices] == [s.to_dict() for s in whole.slices]
    assert {s.partition for s in manifest.slices} == {"p=17"}
    index_key = index.removeprefix(f"s3://{s3.bucket}/")
    asked = sorted(
        (r.operation, r.key or r.prefix)
        for r in seen
        if r.bucket == s3.bucket and not r.is_continuation
    )
    newest = f"{key}/" + max(f.path for s in manifest.slices for f in s.files)
    # the partition folders, the kept partition, the newest file's footer (the schema), the
    # index's pointers, the newest pointer and the two index files the predicate needs
    # (its files, and the records of amount), each in one request: no HEAD
    assert [(op, k) for op, k in asked if op == "ListObjectsV2"] == [
        ("ListObjectsV2", f"{key}/"),
        ("ListObjectsV2", f"{key}/p=17/"),
        ("ListObjectsV2", f"{index_key}/_pointers/"),
    ]
    gets = [k for op, k in asked if op == "GetObject"]
    assert len(gets) == 4 and newest in gets
    assert sum(k.startswith(f"{index_key}/_pointers/v") for k in gets) == 1
    assert sum(k.endswith("/files.parquet") for k in gets) == 1
    assert sum(k.endswith("/column=amount/stats.parquet") for k in gets) == 1
    assert len(asked) == 7  # no page more: 40 partition folders fit in one


def _same_partitions(scoped, url, s3, expected):
    whole = resolve_read_view(url, storage_options=s3.storage_options)
    mine = {p["path"]: p for p in read_view_to_dict(scoped.snapshot)["partitions"]}
    theirs = {p["path"]: p for p in read_view_to_dict(whole)["partitions"]}
    assert sorted(mine) == expected
    assert all(mine[path] == theirs[path] for path in mine)


def test_two_partitions_are_listed_each_and_resolve_like_the_whole_table(s3, table):
    url, key = table
    with s3.requests.recording() as seen:
        scoped = resolve_partition_specs(url, ["p=0", "p=1"], storage_options=s3.storage_options)
    recursive = sorted(prefix for prefix, delimiter in listings(seen, s3) if not delimiter)
    assert recursive == [f"{key}/p=0/", f"{key}/p=1/"]
    _same_partitions(scoped, url, s3, ["p=0", "p=1"])


def test_a_tenth_of_a_small_table_is_listed_in_one_request_and_resolves_the_same(s3, table):
    # 40 partitions of 2 files: one recursive listing of all 80 files is one page, fewer
    # requests than listing the 3 kept partitions left after the first one by one
    url, key = table
    with s3.requests.recording() as seen:
        scoped = resolve_partition_specs(
            url, [f"p={i}" for i in range(4)], storage_options=s3.storage_options
        )
    assert listings(seen, s3) == [(f"{key}/", "/"), (f"{key}/p=0/", ""), (f"{key}/", "")]
    assert [str(p) for p in scoped.listing.kept] == [f"p={i}" for i in range(4)]
    root = scoped.listing.root
    assert scoped.scoped and scoped.listing.covers(f"{root}/p=2/x")
    assert not scoped.listing.covers(f"{root}/p=5/x")
    _same_partitions(scoped, url, s3, [f"p={i}" for i in range(4)])


def test_find_new_delta_folders_lists_only_the_watched_partitions(s3, table):
    url, key = table
    with s3.requests.recording() as seen:
        folders = find_new_delta_folders(
            url, 0, partitions=["p=3", "p=9"], storage_options=s3.storage_options
        )
    assert sorted((f.partition, f.folder) for f in folders) == [
        ("p=3", "delta_0000001_0000001_0000"),
        ("p=9", "delta_0000001_0000001_0000"),
    ]
    assert sorted(listings(seen, s3)) == [(f"{key}/p=3/", ""), (f"{key}/p=9/", "")]


def test_the_trigger_lists_only_the_partitions_it_watches(s3, table, monkeypatch):
    url, key = table
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}",
        json.dumps({"conn_type": "acid", "extra": s3.connection_extra}),
    )
    trigger = AcidDeltaTrigger(url, 0, partitions=["p=5", "p=7"], acid_conn_id=CONN_ID)

    async def first_event():
        run = trigger.run()
        try:
            return await run.__anext__()
        finally:
            await run.aclose()

    with s3.requests.recording() as seen:
        event = asyncio.run(first_event())
    assert event.payload["status"] == "success", event.payload
    assert sorted(f["partition"] for f in event.payload["folders"]) == ["p=5", "p=7"]
    assert sorted(listings(seen, s3)) == [(f"{key}/p=5/", ""), (f"{key}/p=7/", "")]


def test_a_watched_partition_path_must_be_a_partition_path(s3, table):
    url, _ = table
    with pytest.raises(ValueError, match=r"'\.\./other'"):
        find_new_delta_folders(url, 0, partitions=["../other"], storage_options=s3.storage_options)


def test_watching_a_missing_table_is_still_a_location_error(s3):
    from airflow_provider_acid.acid.listing import TableLocationError

    with pytest.raises(TableLocationError, match="does not exist"):
        find_new_delta_folders(
            s3.url("nothing"), 0, partitions=["p=1"], storage_options=s3.storage_options
        )


def test_a_partition_added_since_the_last_listing_is_seen(s3, table):
    """fsspec shares one S3FileSystem per option set in a process, with its listing cache:
    the partition folders are listed anew each time."""
    url, _ = table
    first = compute_manifest(url, "p = 40", storage_options=s3.storage_options)
    assert first.slices == () and first.metrics.partitions_total == 40
    s3.new_filesystem().pipe(
        {
            f"{url}/p=40/delta_0000002_0000002_0000/bucket_00000": s3.fs.cat(
                f"{url}/p=1/delta_0000001_0000001_0000/bucket_00000"
            )
        }
    )
    again = compute_manifest(url, "p = 40", storage_options=s3.storage_options)
    assert again.metrics.partitions_total == 41
    assert [s.partition for s in again.slices] == ["p=40"]
