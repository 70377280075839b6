"""The commit protocol: exact folders, idempotent re-runs, fan-out, verification, a killed
run, leftovers, incremental reuse and expiry."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyarrow.fs import FSSpecHandler, PyFileSystem

from airflow_provider_acid.acid.rows import AcidFormatError
from airflow_provider_acid.engine.compaction import compact_slice, compact_table
from airflow_provider_acid.engine.options import CompactionOptions
from airflow_provider_acid.engine.plan import plan_snapshot
from airflow_provider_acid.output import (
    BucketResult,
    CommitError,
    ReconciliationError,
    commit_snapshot,
    expire_snapshots,
    latest_snapshot,
    read_plan,
)
from airflow_provider_acid.testing.table_writer import AcidTableWriter

REPO = Path(__file__).resolve().parents[2]


def make_table(root: Path, rows_per_partition: int = 40) -> AcidTableWriter:
    table = AcidTableWriter(
        str(root),
        [("id", "bigint"), ("name", "string")],
        [("p", "string")],
        buckets=2,
        bucket_by="id",
    )
    rows = [
        {"id": i, "name": f"n{i}", "p": part}
        for part in ("a", "b")
        for i in range(rows_per_partition * (part == "b"), rows_per_partition * (1 + (part == "b")))
    ]
    table.insert(rows)
    table.delete(lambda r: r["id"] % 7 == 0)
    return table


def visible_data_files(out: Path) -> set[str]:
    """Parquet files a plain folder reader would pick up."""
    return {
        p.relative_to(out).as_posix()
        for p in out.rglob("*.parquet")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(out).parts)
    }


def ids(table: pa.Table) -> collections.Counter:
    return collections.Counter(table["id"].to_pylist())


def expected_ids(table: AcidTableWriter) -> collections.Counter:
    return ids(table.expected_rows())


def test_a_fresh_out_folder_holds_exactly_the_committed_snapshot(tmp_path):
    table = make_table(tmp_path / "t")
    out = tmp_path / "out"
    result = compact_table(table.root, str(out))
    assert visible_data_files(out) == {f.path for f in result.files}
    assert ids(ds.dataset(str(out), format="parquet").to_table()) == expected_ids(table)
    snapshot_dir = out / "_snapshots" / result.snapshot_id
    assert (snapshot_dir / "_SUCCESS").exists() and (snapshot_dir / "plan.json").exists()
    manifest = json.loads((snapshot_dir / "manifest.json").read_text())
    assert manifest == result.to_dict()
    assert set(manifest) == {
        "format", "version", "snapshot_id", "sequence", "previous_snapshot_id", "committed_at",
        "source", "settings", "files", "slices", "totals",
    }  # fmt: skip
    assert manifest["source"]["table"] == table.path
    assert {f["slice"] for f in manifest["files"]} <= {s["slice_key"] for s in manifest["slices"]}
    slice_ = manifest["slices"][0]
    assert slice_["rows_written"] == (
        slice_["rows_read"] - slice_["rows_invalid"] - slice_["rows_deleted"]
        - slice_["rows_filtered"]
    )  # fmt: skip
    pointer = json.loads((out / "_SUCCESS").read_text())
    assert pointer["snapshot_id"] == result.snapshot_id
    assert latest_snapshot(str(out)).snapshot_id == result.snapshot_id


def test_re_running_the_same_snapshot_changes_nothing(tmp_path):
    table = make_table(tmp_path / "t")
    out = tmp_path / "out"
    first = compact_table(table.root, str(out), write_ids=table.valid_write_ids())
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*.parquet")}
    again = compact_table(table.root, str(out), write_ids=table.valid_write_ids())
    assert again.snapshot_id == first.snapshot_id and not again.newly_committed
    assert again.buckets == first.buckets
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.parquet")} == stamps
    # a different source or different settings are a different snapshot
    other = plan_snapshot(table.root, str(out), options=CompactionOptions(compression="snappy"))
    assert other.snapshot_id != first.snapshot_id


def test_fan_out_through_plain_data_then_commit(tmp_path):
    table = make_table(tmp_path / "t")
    out = tmp_path / "out"
    plan = plan_snapshot(table.root, str(out), write_ids=table.valid_write_ids())
    assert plan.keys_to_compute == plan.slice_keys and len(plan.slice_keys) == 4
    # each worker: only the table URI, a slice key, the folder and the id (XCom-sized)
    results = [
        json.loads(json.dumps(compact_slice(table.root, key, str(out), plan.snapshot_id).to_dict()))
        for key in plan.keys_to_compute
    ]
    assert visible_data_files(out)  # written, but ...
    assert latest_snapshot(str(out)) is None  # ... not committed
    result = commit_snapshot(str(out), plan.snapshot_id, results)
    assert ids(pa.concat_tables(pq.read_table(p) for p in result.file_paths())) == expected_ids(
        table
    )
    # a late retry of a worker returns the committed result and writes nothing
    assert (
        compact_slice(table.root, plan.slice_keys[0], str(out), plan.snapshot_id)
        == (result.buckets[0])
    )


def test_commit_refuses_missing_wrong_or_unverifiable_parts(tmp_path):
    table = make_table(tmp_path / "t")
    out = tmp_path / "out"
    plan = plan_snapshot(table.root, str(out))
    results = [compact_slice(table.root, k, str(out), plan.snapshot_id) for k in plan.slice_keys]
    manifest = out / "_snapshots" / plan.snapshot_id / "manifest.json"

    with pytest.raises(CommitError, match="lacks results for 1 slice"):
        commit_snapshot(str(out), plan.snapshot_id, results[1:])
    bad = BucketResult.from_dict({**results[0].to_dict(), "rows_deleted": 0})
    with pytest.raises(ReconciliationError, match=results[0].slice_key):
        commit_snapshot(str(out), plan.snapshot_id, [bad, *results[1:]])
    # a file replaced behind the result's back
    victim = out / results[0].files[0].path
    pq.write_table(pq.read_table(victim).slice(1), victim)
    with pytest.raises(CommitError, match="do not verify"):
        commit_snapshot(str(out), plan.snapshot_id, results)
    assert not manifest.exists()
    # re-running the slice repairs it
    results[0] = compact_slice(table.root, results[0].slice_key, str(out), plan.snapshot_id)
    assert commit_snapshot(str(out), plan.snapshot_id, results).newly_committed
    assert manifest.exists()


def test_a_table_changed_after_planning_is_caught(tmp_path):
    table = make_table(tmp_path / "t")
    out = tmp_path / "out"
    plan = plan_snapshot(table.root, str(out))
    table.delete(lambda r: r["id"] in (1, 2, 3, 41, 42, 43))
    with pytest.raises(CommitError, match="changed since"):
        for key in plan.slice_keys:
            compact_slice(table.root, key, str(out), plan.snapshot_id)
    # pinned to a write-id list, later writes do not disturb the plan
    pinned = plan_snapshot(table.root, str(out), write_ids="default.t:2:9223372036854775807::")
    table.delete(lambda r: r["id"] == 5)
    for key in pinned.slice_keys:
        compact_slice(table.root, key, str(out), pinned.snapshot_id)


def test_leftovers_of_failed_attempts_are_removed_before_the_commit(tmp_path):
    table = make_table(tmp_path / "t")
    out = tmp_path / "out"
    plan = plan_snapshot(table.root, str(out))
    stray = out / "p=a" / f"part-{plan.snapshot_id}-00000-0042.parquet"
    orphan = out / "p=b" / "part-0123456789abcdef-00001-0000.parquet"
    for path in (stray, orphan):
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": [999]}), path)
    result = compact_table(table.root, str(out))
    assert result.snapshot_id == plan.snapshot_id
    assert not stray.exists() and not orphan.exists()
    assert visible_data_files(out) == {f.path for f in result.files}


def test_an_unreadable_source_file_fails_the_bucket_and_leaves_no_partial_file(tmp_path):
    table = make_table(tmp_path / "t", rows_per_partition=400)
    table.insert([{"id": 1000 + i, "name": "late", "p": "a"} for i in range(50)])
    later = next((tmp_path / "t" / "p=a").glob("delta_0000003_*/bucket_00000"))
    data = later.read_bytes()
    later.write_bytes(data[:3] + bytes(len(data) - 3))  # the base's rows are read first
    out = tmp_path / "out"
    options = CompactionOptions(batch_rows=40, row_group_rows=40, max_workers=1)

    with pytest.raises(
        AcidFormatError, match="delta_0000003_0000003_0000/bucket_00000: not a readable"
    ):
        compact_table(table.root, str(out), options=options)

    assert latest_snapshot(str(out)) is None
    assert not list(out.rglob("*.parquet"))  # the rows written before the error went too


KILLED_RUN = textwrap.dedent(
    """
    import sys, time
    import pyarrow.parquet as pq
    from airflow_provider_acid.engine.compaction import CompactionOptions, compact_table

    write = pq.ParquetWriter.write_table

    def slow_write(self, *args, **kwargs):
        write(self, *args, **kwargs)
        time.sleep(0.05)

    pq.ParquetWriter.write_table = slow_write
    options = CompactionOptions(batch_rows=40, row_group_rows=40, target_file_size=1, max_workers=1)
    compact_table(sys.argv[1], sys.argv[2], options=options)
    print("committed")
    """
)


def test_a_killed_compaction_commits_nothing_and_a_re_run_commits(tmp_path):
    table = make_table(tmp_path / "t", rows_per_partition=600)
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, table.root, str(out)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while len(visible_data_files(out) if out.exists() else ()) < 3:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the compaction never started writing"
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        stdout, _ = process.communicate()
    assert process.returncode == -signal.SIGKILL and b"committed" not in stdout

    partial = visible_data_files(out)
    assert partial  # files were written ...
    assert not list(out.glob("_snapshots/*/manifest.json"))  # ... but nothing committed
    assert not list(out.rglob("_SUCCESS")) and latest_snapshot(str(out)) is None
    (planned,) = list(out.glob("_snapshots/*/plan.json"))

    options = CompactionOptions(batch_rows=40, row_group_rows=40, target_file_size=1)
    result = compact_table(table.root, str(out), options=options)
    assert result.snapshot_id == planned.parent.name
    assert visible_data_files(out) == {f.path for f in result.files}
    assert ids(ds.dataset(str(out), format="parquet").to_table()) == expected_ids(table)


def test_incremental_snapshots_reuse_unchanged_buckets_until_expired(tmp_path):
    table = make_table(tmp_path / "t")
    out = tmp_path / "out"
    first = compact_table(table.root, str(out))
    table.delete(lambda r: r["id"] == 1)  # one bucket of partition a changes
    second = compact_table(table.root, str(out))
    changed = [b for b in second.buckets if b.reused_from is None]
    assert len(changed) == 1 and changed[0].slice_key.startswith("p=a#")
    assert {b.reused_from for b in second.buckets if b.reused_from} == {first.snapshot_id}
    assert (second.sequence, second.previous_snapshot_id) == (2, first.snapshot_id)
    reused_paths = {f.path for b in second.buckets if b.reused_from for f in b.files}
    assert reused_paths <= {f.path for f in first.files}  # by reference, not copied
    snapshot_rows = pa.concat_tables(pq.read_table(p) for p in second.file_paths())
    assert ids(snapshot_rows) == expected_ids(table)
    # a plain folder read now sees both versions of the changed bucket ...
    assert ds.dataset(str(out), format="parquet").count_rows() > snapshot_rows.num_rows
    # ... until the first snapshot is expired
    expired = expire_snapshots(str(out), keep=1)
    assert expired.removed_snapshots == (first.snapshot_id,)
    assert len(expired.removed_files) == len(
        [b for b in first.buckets if b.slice_key == changed[0].slice_key][0].files
    )
    assert visible_data_files(out) == {f.path for f in second.files}
    assert ids(ds.dataset(str(out), format="parquet").to_table()) == expected_ids(table)
    # a third snapshot after another change still points at the files' first writer
    table.delete(lambda r: r["id"] == 41)
    third = compact_table(table.root, str(out))
    assert first.snapshot_id in {b.reused_from for b in third.buckets}


@pytest.mark.parametrize(
    "where, partitioned",
    [("local", True), ("local", False), ("memory", True)],
)
def test_a_bucket_whose_files_changed_on_storage_is_not_reused(tmp_path, where, partitioned):
    """Reuse looks each file up where it is stored: one gone or of another size than its
    manifest says makes its bucket written again, the other unchanged buckets are reused."""
    root = str(tmp_path / "out") if where == "local" else f"memory://{tmp_path.name}/out"
    fs, out = fsspec.core.url_to_fs(root)
    table = AcidTableWriter(
        str(tmp_path / "t"),
        [("id", "bigint"), ("name", "string")],
        [("p", "string")] if partitioned else [],
        buckets=4,
        bucket_by="id",
    )
    table.insert(
        [{"id": i, "name": f"n{i}", **({"p": "a"} if partitioned else {})} for i in range(40)]
    )
    first = compact_table(table.root, root)
    assert len(first.buckets) == 4
    changed, gone, resized, kept = first.buckets
    fs.rm_file(f"{out}/{gone.files[0].path}")
    fs.pipe_file(
        f"{out}/{resized.files[0].path}", fs.cat_file(f"{out}/{resized.files[0].path}") + b"x"
    )
    victim = pq.read_table(f"{out}/{changed.files[0].path}", filesystem=fs)["id"][0].as_py()
    table.delete(lambda r: r["id"] == victim)
    second = compact_table(table.root, root)

    reused = {b.slice_key for b in second.buckets if b.reused_from}
    assert reused == {kept.slice_key}, reused
    rows = pa.concat_tables(pq.read_table(f"{out}/{f.path}", filesystem=fs) for f in second.files)
    assert ids(rows) == expected_ids(table)
    if where == "memory":
        fs.rm(f"/{tmp_path.name}", recursive=True)


def test_any_fsspec_url_in_and_out(tmp_path):
    memory = fsspec.filesystem("memory")
    table = AcidTableWriter("memory://wh/t", [("id", "bigint")], buckets=2)
    table.insert([{"id": i} for i in range(10)])
    table.delete(lambda r: r["id"] < 3)
    result = compact_table("memory://wh/t", "memory://snapshots/t")
    files = [f"/snapshots/t/{f.path}" for f in result.files]
    read = ds.dataset(files, format="parquet", filesystem=PyFileSystem(FSSpecHandler(memory)))
    assert sorted(read.to_table()["id"].to_pylist()) == list(range(3, 10))
    # the plan keeps the protocol: workers open the table again from it (compact_slice)
    assert read_plan(memory, "/snapshots/t", result.snapshot_id).table == "memory:///wh/t"
    memory.rm("/wh", recursive=True)
    memory.rm("/snapshots", recursive=True)
