"""Two writers of one output folder at once: one commits, the other commits after it (or
fails cleanly); never a mixed snapshot. The commit lock that serialises them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_acid.engine.compaction import compact_slice
from airflow_provider_acid.engine.plan import plan_snapshot
from airflow_provider_acid.output import commit_snapshot, committed_snapshots
from airflow_provider_acid.output.commit_lock import (
    CommitLockError,
    LockHolder,
    commit_lock,
    lock_path,
)
from airflow_provider_acid.testing import generate_demo_table

CLI = str(Path(sys.executable).with_name("airflow-acid"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("concurrency") / "table"
    writer = generate_demo_table(str(root), partitions=1, buckets=4, rows_per_bucket=40_000)
    return root, writer.expected_rows().num_rows


def complete(out: Path, expected_rows: int) -> list:
    """Every committed snapshot of ``out``, each checked complete: its files exist with the
    recorded sizes and footer row counts, and it holds the expected rows."""
    snapshots = committed_snapshots(LocalFileSystem(), str(out))
    for snapshot in snapshots:
        for file in snapshot.files:
            path = out / file.path
            assert path.stat().st_size == file.size, file.path
            assert pq.read_metadata(path).num_rows == file.rows, file.path
        assert snapshot.rows_written == expected_rows
    return snapshots


def run_both(*commands: list[str]) -> list[subprocess.CompletedProcess]:
    processes = [
        subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for c in commands
    ]
    done = []
    for process, command in zip(processes, commands, strict=True):
        out, err = process.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(command, process.returncode, out, err))
    return done


def test_two_cli_runs_of_one_snapshot_at_once_commit_it_once(demo, tmp_path):
    table, expected = demo
    out = tmp_path / "out"
    command = [CLI, "compact", str(table), "--out", str(out), "--json", "--workers", "2"]

    first, second = run_both(command, command)

    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    reports = [json.loads(r.stdout) for r in (first, second)]
    assert sorted(r["newly_committed"] for r in reports) == [False, True]
    [snapshot] = complete(out, expected)
    assert {r["manifest"]["snapshot_id"] for r in reports} == {snapshot.snapshot_id}
    read = ds.dataset(str(out), format="parquet")
    assert read.count_rows() == expected
    assert sorted(read.files) == sorted(snapshot.file_paths())
    assert not (out / "_snapshots" / "_commit.lock").exists()


def test_two_cli_runs_of_different_snapshots_at_once_never_mix(demo, tmp_path):
    """Each commits after the other, or the one planned first fails cleanly: the other's
    commit took its files for leftovers of an abandoned plan, and its verification says so."""
    table, expected = demo
    out = tmp_path / "out"
    base = [CLI, "compact", str(table), "--out", str(out), "--json", "--workers", "2"]

    done = run_both(base + ["--compression", "zstd"], base + ["--compression", "lz4"])

    committed = [d for d in done if d.returncode == 0]
    assert committed, done[0].stderr + done[1].stderr
    for failed in (d for d in done if d.returncode != 0):
        assert "do not verify" in failed.stderr and "Traceback" not in failed.stderr
    snapshots = complete(out, expected)
    assert len(snapshots) == len(committed)
    assert [s.sequence for s in snapshots] == list(range(1, len(snapshots) + 1))
    # each manifest lists only files of its own settings
    for snapshot in snapshots:
        codec = snapshot.settings["compression"]
        for file in snapshot.files:
            meta = pq.read_metadata(out / file.path)
            assert meta.row_group(0).column(0).compression.lower() == codec
    if len(snapshots) == 2:
        assert snapshots[1].previous_snapshot_id == snapshots[0].snapshot_id
        own = [{f.path for f in s.files} for s in snapshots]
        assert not own[0] & own[1]


def test_a_commit_waits_for_the_lock_then_fails_naming_its_holder(demo, tmp_path):
    table, _ = demo
    out = tmp_path / "out"
    plan = plan_snapshot(str(table), str(out))
    results = [compact_slice(str(table), k, str(out), plan.snapshot_id) for k in plan.slice_keys]
    fs = LocalFileSystem()

    with commit_lock(fs, str(out), "a commit by someone else"):
        with pytest.raises(CommitLockError) as caught:
            commit_snapshot(str(out), plan.snapshot_id, results, lock_wait=0.3)

    message = str(caught.value)
    assert str(out) in message and "a commit by someone else" in message
    assert f"pid {os.getpid()}" in message and lock_path(str(out)) in message
    assert committed_snapshots(fs, str(out)) == []  # nothing committed while it waited
    assert commit_snapshot(str(out), plan.snapshot_id, results).newly_committed


def test_a_lock_left_by_a_killed_commit_is_broken(demo, tmp_path):
    table, expected = demo
    out = tmp_path / "out"
    plan = plan_snapshot(str(table), str(out))
    results = [compact_slice(str(table), k, str(out), plan.snapshot_id) for k in plan.slice_keys]
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    now = time.time()
    stale = LockHolder("x" * 32, socket.gethostname(), int(dead.stdout), "commit", now, now + 900)
    lock = Path(lock_path(str(out)))
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_bytes(stale.to_json())

    result = commit_snapshot(str(out), plan.snapshot_id, results, lock_wait=5)

    assert result.newly_committed and result.rows_written == expected
    assert not lock.exists()


def test_a_lock_held_by_another_host_is_broken_only_once_its_lease_ran_out(tmp_path):
    fs = LocalFileSystem()
    now = time.time()
    lock = Path(lock_path(str(tmp_path)))
    lock.parent.mkdir(parents=True)
    alive = LockHolder("a" * 32, "elsewhere", 1, "commit", now, now + 900)
    lock.write_bytes(alive.to_json())
    with pytest.raises(CommitLockError, match="on elsewhere"):
        with commit_lock(fs, str(tmp_path), "expiry", wait=0.2):
            pass
    expired = LockHolder("b" * 32, "elsewhere", 1, "commit", now - 1000, now - 100)
    lock.write_bytes(expired.to_json())
    with commit_lock(fs, str(tmp_path), "expiry", wait=0.2) as holder:
        assert LockHolder.from_json(lock.read_bytes()) == holder
    assert not lock.exists()


REFRESHER = """
import sys
import fsspec
from airflow_provider_acid.pruning import index
fs = fsspec.filesystem("file")
idx, rounds, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for n in range(rounds):
    chosen = paths if n % 2 else paths[: max(1, len(paths) // 2)]
    index.refresh(idx, index.file_keys(fs, chosen), fs, max_workers=2)
"""


def test_two_index_refreshes_at_once_leave_a_readable_index(demo, tmp_path):
    from airflow_provider_acid.pruning import index

    table, _ = demo
    fs = LocalFileSystem()
    paths = sorted(str(p) for p in table.rglob("bucket_*") if p.is_file())
    idx = str(tmp_path / "index")
    first = [sys.executable, "-c", REFRESHER, idx, "4", *paths]
    second = [sys.executable, "-c", REFRESHER, idx, "4", *reversed(paths)]

    done = run_both(first, second)

    assert [d.returncode for d in done] == [0, 0], done[0].stderr + done[1].stderr
    keys = index.file_keys(fs, paths)
    stats = index.read(idx, ["id"], keys)
    assert stats.num_rows == len(paths)
    after = index.refresh(idx, keys, fs)  # and it refreshes on from there
    assert after.version >= 1
    assert index.read(idx, ["id"], keys)["row_count"].null_count == 0
