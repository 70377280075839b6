"""A change feed applied to the Iceberg table the provider published: the table then holds the
source table at B, only the data files holding a changed key are rewritten, and each feed is
applied once, in order."""

from __future__ import annotations

import collections
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_provider_acid.engine.change_runs import compute_changes
from airflow_provider_acid.engine.compaction import CompactionOptions, compact_table
from airflow_provider_acid.output.iceberg import IcebergSink
from airflow_provider_acid.output.iceberg_changes import apply_to_iceberg, iceberg_watermark
from airflow_provider_acid.output.sinks import publish_snapshot
from airflow_provider_acid.testing.table_writer import AcidTableWriter


def _rows(table) -> collections.Counter:
    rows = pa.table(table.scan().to_arrow()).to_pylist()
    return collections.Counter((r["id"], r["v"]) for r in rows)


def _expected(t: AcidTableWriter) -> collections.Counter:
    return collections.Counter((r["id"], r["v"]) for r in t.expected_rows().to_pylist())


@pytest.fixture
def published(tmp_path: Path):
    t = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("v", "string")], buckets=4, bucket_by="id"
    )
    t.insert([{"id": i, "v": f"a{i}"} for i in range(40)])  # write 1
    snapshot = compact_table(t.root, str(tmp_path / "snap"))
    publish_snapshot(snapshot, "iceberg", out_uri=str(tmp_path / "snap"))
    return t, IcebergSink(str(tmp_path / "snap")).load_table(), tmp_path


def test_a_feed_applied_gives_the_table_at_b_rewriting_only_changed_buckets(published):
    t, table, tmp_path = published
    assert iceberg_watermark(table) == 1
    before = {task.file.file_path for task in table.scan().plan_files()}
    assert len(before) == 4  # one file a bucket
    # changes in one bucket only: the rows of bucket 0's file
    bucket0 = next(p for p in before if "-00000-" in p)
    ids = sorted(r["id"] for r in pa.table(table.scan(row_filter="id >= 0").to_arrow()).to_pylist())
    in_bucket0 = [i for i in ids if i in _ids_of(bucket0)]
    t.update(lambda r: r["id"] == in_bucket0[0], {"v": "changed"})  # write 2
    t.delete(lambda r: r["id"] == in_bucket0[1])  # write 3
    feed = compute_changes(t.root, str(tmp_path / "feed"), from_write_id=1, key=["id"])
    applied = apply_to_iceberg(feed.result, table)
    table = table.refresh()
    assert _rows(table) == _expected(t)
    assert applied.files_removed == (bucket0,)  # the other buckets' files stay
    after = {task.file.file_path for task in table.scan().plan_files()}
    assert before - {bucket0} <= after
    assert iceberg_watermark(table) == 3
    # applied once: again, nothing; a feed that does not follow on is refused
    assert apply_to_iceberg(feed.result, table).snapshot_id is None
    t.insert([{"id": 100, "v": "new"}])  # write 4
    later = compute_changes(t.root, str(tmp_path / "feed"), key=["id"])  # from the watermark
    assert (later.from_write_id, later.to_write_id) == (3, 4)
    apply_to_iceberg(later.result, table)
    assert _rows(table.refresh()) == _expected(t)


def _ids_of(path: str) -> set[int]:
    import pyarrow.parquet as pq

    return set(pq.read_table(path.removeprefix("file://"), columns=["id"])["id"].to_pylist())


def test_a_feed_without_key_is_refused(published):
    t, table, tmp_path = published
    t.delete(lambda r: r["id"] == 1)
    feed = compute_changes(t.root, str(tmp_path / "feed"), from_write_id=1)
    with pytest.raises(ValueError, match="needs the table's key"):
        apply_to_iceberg(feed.result, table)


@pytest.fixture
def published_with_identity(tmp_path: Path):
    t = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("v", "string")], buckets=4, bucket_by="id"
    )
    t.insert([{"id": i, "v": f"a{i}"} for i in range(40)])  # write 1
    snapshot = compact_table(
        t.root, str(tmp_path / "snap"), options=CompactionOptions(include_identity=True)
    )
    publish_snapshot(snapshot, "iceberg", out_uri=str(tmp_path / "snap"))
    return t, IcebergSink(str(tmp_path / "snap")).load_table(), tmp_path


SNAPSHOT_IDENTITY = ("_acid_original_transaction", "_acid_bucket", "_acid_row_id")


def _identity_rows(table) -> collections.Counter:
    rows = pa.table(table.scan().to_arrow()).to_pylist()
    for r in rows:  # the write that inserted the row, as compaction writes it
        assert r["_acid_current_transaction"] == r["_acid_original_transaction"], r
    return collections.Counter(tuple(r[c] for c in ("id", "v", *SNAPSHOT_IDENTITY)) for r in rows)


def _expected_identity_rows(t: AcidTableWriter) -> collections.Counter:
    return collections.Counter(
        (r["id"], r["v"], r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"])
        for r in t.expected_rows(with_row_id=True).to_pylist()
    )


def test_a_keyed_feed_applies_to_a_table_published_with_identity(published_with_identity):
    # the migration recipe: the snapshot at A published with --include-identity, the feed
    # applied on its key; the rows it adds carry their identity too
    t, table, tmp_path = published_with_identity
    t.update(lambda r: r["id"] == 3, {"v": "changed"})  # write 2
    t.insert([{"id": 100, "v": "new"}])  # write 3
    t.delete(lambda r: r["id"] == 7)  # write 4
    feed = compute_changes(t.root, str(tmp_path / "feed"), from_write_id=1, key=["id"])
    apply_to_iceberg(feed.result, table)
    assert _identity_rows(table.refresh()) == _expected_identity_rows(t)


def test_a_feed_without_delete_values_applies_on_the_row_identity(published_with_identity):
    t, table, tmp_path = published_with_identity
    before = {task.file.file_path for task in table.scan().plan_files()}
    bucket0 = next(p for p in before if "-00000-" in p)
    ids = sorted(_ids_of(bucket0))
    t.delete(lambda r: r["id"] in ids[:3])  # write 2: rows of bucket 0 only
    t.update(lambda r: r["id"] == ids[3], {"v": "changed"})  # write 3: delete and insert
    t.insert([{"id": 100, "v": "new"}])  # write 4
    t.delete(lambda r: r["id"] == 100)  # write 5: a row the range inserted
    feed = compute_changes(t.root, str(tmp_path / "feed"), from_write_id=1, delete_values=False)
    assert feed.counts["delete"] == 5 and feed.counts["insert"] == 2
    with pytest.raises(ValueError, match=r"applies on the row identity, not on \['id'\]"):
        apply_to_iceberg(feed.result, table, key=["id"])
    applied = apply_to_iceberg(feed.result, table)
    table = table.refresh()
    assert _identity_rows(table) == _expected_identity_rows(t)
    assert bucket0 in applied.files_removed
    assert before - set(applied.files_removed) == before - {bucket0}  # other buckets stay
    assert iceberg_watermark(table) == 5


def test_a_feed_without_delete_values_needs_the_identity_columns(published):
    t, table, tmp_path = published  # published without identity
    t.delete(lambda r: r["id"] == 1)
    feed = compute_changes(t.root, str(tmp_path / "feed"), from_write_id=1, delete_values=False)
    wanted = r"has no \['_acid_original_transaction'.*--include-identity"
    with pytest.raises(ValueError, match=wanted):
        apply_to_iceberg(feed.result, table)
    assert iceberg_watermark(table.refresh()) == 1
