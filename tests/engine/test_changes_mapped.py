"""The feed in steps, as a DAG maps it (plan, one task per slice, commit), on a table read by
location with a write-id list that leaves out an aborted and an open write: each slice task
reads the table with the plan's list, and the feed equals the one computed in one call."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_acid.engine.change_runs import (
    commit_feed,
    compute_changes,
    compute_feed_slice,
    plan_feed,
)
from airflow_provider_acid.testing.table_writer import AcidTableWriter


def _rows(feed) -> list[tuple]:
    table = pa.concat_tables([pq.read_table(p) for p in feed.result.file_paths()])
    names = ["id", "v", "_change_type", "_commit_write_id", "_change_ordinal"]
    return sorted(tuple(r[n] for n in names) for r in table.to_pylist())


def test_slice_tasks_read_with_the_plans_write_id_list(tmp_path: Path) -> None:
    t = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("v", "string")], buckets=2, bucket_by="id"
    )
    t.insert([{"id": i, "v": f"a{i}"} for i in range(6)])  # write 1
    aborted = t.begin()  # write 2
    aborted.insert([{"id": 20, "v": "aborted"}])
    aborted.abort()
    t.begin().insert([{"id": 30, "v": "open"}])  # write 3, left open
    t.update(lambda r: r["id"] == 1, {"v": "b1"})  # write 4
    ids = t.valid_write_ids()
    out = str(tmp_path / "mapped")
    plan = plan_feed(t.root, out, from_write_id=0, write_ids=ids, key=("id",))
    results = [compute_feed_slice(out, plan.snapshot_id, k) for k in plan.keys_to_compute]
    mapped = commit_feed(out, plan.snapshot_id, results)
    whole = compute_changes(t.root, str(tmp_path / "whole"), from_write_id=0, write_ids=ids,
                            key=("id",))  # fmt: skip
    assert _rows(mapped) == _rows(whole)
    assert {r[1] for r in _rows(mapped)} == {f"a{i}" for i in range(6)} | {"b1"}
    assert mapped.to_dict()["counts"]["update_postimage"] == 1
