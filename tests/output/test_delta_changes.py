"""A change feed delivered to a Delta table with its change data feed on, read back by
delta-rs (``load_cdf``) and by Spark (``readChangeFeed``): the same changes as the feed, one
version per write, and the table at the end is the source table at B."""

from __future__ import annotations

import collections
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from spark_session import spark  # noqa: F401 - the session-wide fixture

from airflow_provider_acid.engine.change_runs import compute_changes
from airflow_provider_acid.engine.compaction import CompactionOptions, compact_table
from airflow_provider_acid.output.delta_changes import deliver_to_delta, delta_watermark
from airflow_provider_acid.testing.table_writer import AcidTableWriter


@pytest.fixture
def delivered(tmp_path: Path):
    t = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("v", "string")], buckets=2, bucket_by="id"
    )
    t.insert([{"id": i, "v": f"a{i}"} for i in range(8)])  # write 1
    at_a = compact_table(
        t.root, str(tmp_path / "snap"), options=CompactionOptions(include_identity=True)
    )
    t.update(lambda r: r["id"] in (1, 2), {"v": "b"})  # write 2
    t.delete(lambda r: r["id"] == 5)  # write 3
    tx = t.begin()  # write 4: insert, then update its own row, in two statements
    tx.insert([{"id": 30, "v": "new"}])
    tx.update(lambda r: r["id"] == 30, {"v": "newer"})
    tx.commit()
    t.insert([{"id": 40, "v": "x"}])  # write 5
    feed = compute_changes(t.root, str(tmp_path / "feed"), from_write_id=1, key=["id"])
    uri = str(tmp_path / "delta")
    delivery = deliver_to_delta(feed.result, uri, initial_snapshot=at_a)
    return t, feed, uri, delivery


WANTED = {  # (version's write, change type, id, v), by hand
    (2, "update_preimage", 1, "a1"),
    (2, "update_postimage", 1, "b"),
    (2, "update_preimage", 2, "a2"),
    (2, "update_postimage", 2, "b"),
    (3, "delete", 5, "a5"),
    (4, "insert", 30, "newer"),
    (5, "insert", 40, "x"),
}


def _versions(uri: str) -> dict[int, int]:
    history = DeltaTable(uri).history()
    return {c["version"]: int(c["airflow_acid_write_id"]) for c in history}


def test_delta_rs_reads_the_change_data_feed(delivered):
    t, feed, uri, delivery = delivered
    assert delta_watermark(uri) == 5 and delivery.watermark == 5
    writes = _versions(uri)
    cdf = pa.table(DeltaTable(uri).load_cdf(starting_version=1).read_all()).to_pylist()
    got = {(writes[r["_commit_version"]], r["_change_type"], r["id"], r["v"]) for r in cdf}
    assert got == WANTED
    final = pa.table(DeltaTable(uri).to_pyarrow_table()).to_pylist()
    assert collections.Counter((r["id"], r["v"]) for r in final) == collections.Counter(
        (r["id"], r["v"]) for r in t.expected_rows().to_pylist()
    )
    # delivered once: again, nothing is committed
    assert deliver_to_delta(feed.result, uri).versions == ()


def test_spark_reads_the_change_data_feed(delivered, spark):  # noqa: F811
    _, _, uri, _ = delivered
    writes = _versions(uri)
    frame = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 1)
        .load(uri)
    )
    got = {
        (writes[r["_commit_version"]], r["_change_type"], r["id"], r["v"]) for r in frame.collect()
    }
    assert got == WANTED


def test_a_feed_without_delete_values_gives_the_same_change_data_feed(tmp_path):
    # Delta's MERGE deletes the row its identity matches and records that row's values in
    # the change data feed: a feed that read only its deltas gives what a full one gives
    t = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("v", "string")], buckets=2, bucket_by="id"
    )
    t.insert([{"id": i, "v": f"a{i}"} for i in range(8)])  # write 1
    at_a = compact_table(
        t.root, str(tmp_path / "snap"), options=CompactionOptions(include_identity=True)
    )
    t.delete(lambda r: r["id"] in (2, 5))  # write 2
    t.update(lambda r: r["id"] == 1, {"v": "b"})  # write 3
    t.insert([{"id": 9, "v": "x"}])  # write 4
    cdf = {}
    for values in (True, False):
        out, uri = tmp_path / f"feed-{values}", str(tmp_path / f"delta-{values}")
        feed = compute_changes(t.root, str(out), from_write_id=1, delete_values=values)
        deliver_to_delta(feed.result, uri, initial_snapshot=at_a)
        rows = pa.table(DeltaTable(uri).load_cdf(starting_version=1).read_all()).to_pylist()
        cdf[values] = collections.Counter(
            (r["_change_type"], r["id"], r["v"], r["_acid_row_id"]) for r in rows
        )
    assert cdf[False] == cdf[True]
    deleted = {(i, v) for kind, i, v, _ in cdf[False].elements() if kind == "delete"}
    assert deleted == {(2, "a2"), (5, "a5"), (1, "a1")}  # with their values (no key: no pair)
    final = collections.Counter(
        (r["id"], r["v"]) for r in DeltaTable(uri).to_pyarrow_table().to_pylist()
    )
    assert final == collections.Counter((r["id"], r["v"]) for r in t.expected_rows().to_pylist())
