"""Updates whose delete and insert fall into different slices (a row moved to another
partition by one write) are paired before the feed commits (``engine/change_pairs.py``); the
same in the mapped run (plan, one task per slice, commit), on a retried commit, and in the
Delta table the feed is delivered to."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_acid.engine import change_pairs
from airflow_provider_acid.engine.change_pairs import pair_across_slices
from airflow_provider_acid.engine.change_runs import (
    commit_feed,
    compute_changes,
    compute_feed_slice,
    plan_feed,
)
from airflow_provider_acid.engine.compaction import CompactionOptions, compact_table
from airflow_provider_acid.output.delta_changes import deliver_to_delta
from airflow_provider_acid.output.protocol import read_plan
from airflow_provider_acid.output.records import SnapshotResult
from airflow_provider_acid.testing.table_writer import AcidTableWriter


@pytest.fixture
def made(tmp_path: Path) -> tuple[AcidTableWriter, SnapshotResult]:
    """The table, and the provider's snapshot at write 2 with identity columns."""
    t = AcidTableWriter(
        str(tmp_path / "t"),
        [("id", "bigint"), ("v", "string")],
        partition_columns=[("p", "string")],
        buckets=2,
        bucket_by="id",
    )
    t.insert([{"id": i, "v": f"a{i}"} for i in range(10)], partition="a")  # write 1
    t.insert([{"id": i, "v": f"b{i}"} for i in range(10, 20)], partition="b")
    at_2 = compact_table(
        t.root,
        str(tmp_path / "snapshot"),
        write_ids=t.valid_write_ids(),
        options=CompactionOptions(include_identity=True),
    )
    with t.begin() as w:  # write 3: 3 moves from a to b, 12 updated in place, 5 moved twice
        w.delete(lambda r: r["id"] in (3, 5), partition="a")
        w.insert([{"id": 3, "v": "moved"}, {"id": 5, "v": "x"}, {"id": 5, "v": "y"}], "b")
        w.update(lambda r: r["id"] == 12, {"v": "b12 updated"}, partition="b")
    t.delete(lambda r: r["id"] == 15, partition="b")  # write 4
    t.insert([{"id": 15, "v": "back"}], partition="a")  # write 5: another write, no pair
    return t, at_2


@pytest.fixture
def table(made) -> AcidTableWriter:
    return made[0]


def _changes(feed) -> dict[str, list[tuple]]:
    got = collections.defaultdict(list)
    for path in feed.result.file_paths():
        for r in pq.read_table(path).to_pylist():
            got[r["_change_type"]].append((r["id"], r["v"], r["p"], r["_commit_write_id"]))
    return {k: sorted(v) for k, v in got.items()}


def test_a_row_moved_to_another_partition_is_a_pair(table, tmp_path):
    ids = table.valid_write_ids()
    feed = compute_changes(
        table.root, str(tmp_path / "f"), from_write_id=2, write_ids=ids, key=("id",)
    )
    assert _changes(feed) == {
        "update_preimage": [(3, "a3", "a", 3), (12, "b12", "b", 3)],
        "update_postimage": [(3, "moved", "b", 3), (12, "b12 updated", "b", 3)],
        "delete": [(5, "a5", "a", 3), (15, "b15", "b", 4)],  # 5: one delete, two inserts
        "insert": [(5, "x", "b", 3), (5, "y", "b", 3), (15, "back", "a", 5)],
    }
    assert feed.to_dict()["counts"] == {
        "insert": 3, "delete": 2, "update_preimage": 2, "update_postimage": 2,
    }  # fmt: skip
    # a key naming the partition column: a moved row is another key
    keyed = compute_changes(
        table.root, str(tmp_path / "g"), from_write_id=2, write_ids=ids, key=("id", "p")
    )
    assert [c[0] for c in _changes(keyed)["update_preimage"]] == [12]
    unkeyed = compute_changes(table.root, str(tmp_path / "h"), from_write_id=2, write_ids=ids)
    assert set(_changes(unkeyed)) == {"insert", "delete"}


def test_the_mapped_run_and_a_retried_commit_pair_alike(table, tmp_path):
    ids = table.valid_write_ids()
    out = str(tmp_path / "mapped")
    plan = plan_feed(table.root, out, from_write_id=2, write_ids=ids, key=("id",))
    results = [compute_feed_slice(out, plan.snapshot_id, k) for k in plan.keys_to_compute]
    # a commit that wrote the relabelled files and died before its manifest
    fs = LocalFileSystem()
    stored = read_plan(fs, out, plan.snapshot_id)
    first = pair_across_slices(fs, out, ("id",), results, stored.settings)
    assert first != results
    feed = commit_feed(out, plan.snapshot_id, results)  # the retry, with the tasks' results
    assert _changes(feed)["update_postimage"] == [(3, "moved", "b", 3), (12, "b12 updated", "b", 3)]
    assert [b.files for b in feed.result.buckets] == [b.files for b in first]
    on_disk = {str(p.relative_to(out)) for p in Path(out).rglob("part-*.parquet")}
    assert on_disk == {f.path for f in feed.result.files}  # the unpaired originals removed
    again = commit_feed(out, plan.snapshot_id, results)
    assert again.result.snapshot_id == feed.result.snapshot_id
    assert not again.result.newly_committed


def test_delta_delivery_shows_the_move_as_an_update(made, tmp_path):
    t, at_2 = made
    feed = compute_changes(
        t.root, str(tmp_path / "f"), from_write_id=2, write_ids=t.valid_write_ids(), key=("id",)
    )
    uri = str(tmp_path / "delta")
    deliver_to_delta(feed.result, uri, initial_snapshot=at_2)
    cdf = pa.table(DeltaTable(uri).load_cdf(starting_version=1).read_all()).to_pylist()
    moved = sorted((r["_change_type"], r["v"], r["p"]) for r in cdf if r["id"] == 3)
    assert moved == [("update_postimage", "moved", "b"), ("update_preimage", "a3", "a")]
    final = pa.table(DeltaTable(uri).to_pyarrow_table()).to_pylist()
    assert collections.Counter((r["id"], r["v"], r["p"]) for r in final) == collections.Counter(
        (r["id"], r["v"], r["p"]) for r in t.expected_rows().to_pylist()
    )


def test_slices_whose_footers_show_nothing_to_pair_are_not_read(tmp_path, monkeypatch):
    t = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("v", "string")],
        partition_columns=[("p", "string")], buckets=2, bucket_by="id",
    )  # fmt: skip
    t.insert([{"id": i, "v": f"a{i}"} for i in range(10)], partition="a")  # write 1
    t.insert([{"id": i, "v": f"b{i}"} for i in range(10, 20)], partition="b")  # write 2
    t.delete(lambda r: r["id"] in (3, 4), partition="a")  # write 3
    t.insert([{"id": 3, "v": "again"}], partition="b")  # write 4: another write, no pair
    reads = []
    real = change_pairs._read
    monkeypatch.setattr(change_pairs, "_read", lambda *a: reads.append(a[2].path) or real(*a))
    feed = compute_changes(
        t.root, str(tmp_path / "f"), from_write_id=2, write_ids=t.valid_write_ids(), key=("id",)
    )
    assert feed.to_dict()["counts"] == {
        "insert": 1, "delete": 2, "update_preimage": 0, "update_postimage": 0,
    }  # fmt: skip
    assert reads == []  # the footers say: write 3 deletes (in 2 buckets), write 4 inserts
    footers = [pq.read_metadata(p).metadata[change_pairs.CHANGE_WRITES_KEY] for p in
               feed.result.file_paths()]  # fmt: skip
    assert sorted(json.loads(f)["delete"] + json.loads(f)["insert"] for f in footers) == [
        [3],
        [3],
        [4],
    ]
    # the same write deleting in one slice and inserting in another: read and paired
    t.delete(lambda r: r["id"] == 12, partition="b")  # write 5 ...
    with t.begin() as w:  # write 6: 13 moves from b to a
        w.delete(lambda r: r["id"] == 13, partition="b")
        w.insert([{"id": 13, "v": "moved"}], partition="a")
    moved = compute_changes(
        t.root, str(tmp_path / "g"), from_write_id=4, write_ids=t.valid_write_ids(), key=("id",)
    )
    assert reads != []
    assert moved.to_dict()["counts"] == {
        "insert": 0, "delete": 1, "update_preimage": 1, "update_postimage": 1,
    }  # fmt: skip


def test_the_counts_come_from_the_footers_and_a_footer_without_them_is_read(
    table, tmp_path, monkeypatch
):
    """Each feed file's footer counts its change types, the files pairing rewrote too, and the
    feed's counts are read from them; a file without (a feed written before) is counted from
    its ``_change_type`` column."""
    from airflow_provider_acid.engine.change_feed import change_counts
    from airflow_provider_acid.output.parquet_files import VALUE_COUNTS_KEY, footer_value_counts

    feed = compute_changes(
        table.root, str(tmp_path / "f"), from_write_id=2, write_ids=table.valid_write_ids(),
        key=("id",),
    )  # fmt: skip
    expected = {"insert": 3, "delete": 2, "update_preimage": 2, "update_postimage": 2}
    paths = feed.result.file_paths()
    assert len(paths) >= 2  # the pairs' files rewritten, and at least one other
    for path in paths:
        in_file = collections.Counter(pq.read_table(path)["_change_type"].to_pylist())
        assert footer_value_counts(pq.read_metadata(path), "_change_type") == dict(in_file)
        assert footer_value_counts(pq.read_metadata(path), "id") is None  # another column
    reads = []
    original_read = pq.ParquetFile.read
    monkeypatch.setattr(
        pq.ParquetFile,
        "read",
        lambda self, *a, **k: reads.append(a) or original_read(self, *a, **k),
    )
    fs = LocalFileSystem()
    assert change_counts(feed.result, fs) == expected
    assert reads == []  # the footers alone
    # a file written before the footers counted: its column is read
    older = pq.read_table(paths[0])
    metadata = {k: v for k, v in (older.schema.metadata or {}).items() if k != VALUE_COUNTS_KEY}
    pq.write_table(older.replace_schema_metadata(metadata), paths[0])
    assert VALUE_COUNTS_KEY not in pq.read_metadata(paths[0]).metadata
    assert change_counts(feed.result, fs) == expected
    assert len(reads) == 1
