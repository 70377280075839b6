"""The commit log (``output/commit_log.py``): the latest snapshot of an output folder is found
from one listing and one manifest however many snapshots it holds; a commit killed before its
manifest, a folder committed to before the log existed, and expiry all leave it right."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_acid.engine.change_feed import feed_watermark
from airflow_provider_acid.engine.change_runs import compute_changes
from airflow_provider_acid.engine.compaction import compact_slice, compact_table
from airflow_provider_acid.engine.options import CompactionOptions
from airflow_provider_acid.engine.plan import plan_snapshot
from airflow_provider_acid.output import (
    commit_log,
    committed_snapshots,
    expire_snapshots,
    latest_committed,
    latest_snapshot,
)
from airflow_provider_acid.output.commit_log import LOG_DIR, LogEntry, log_commit, read_log
from airflow_provider_acid.testing.table_writer import AcidTableWriter


class CountingFileSystem(LocalFileSystem):
    """The local filesystem, counting the manifests opened (one instance, not fsspec's)."""

    cachable = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.manifests = 0

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if "r" in mode and path.endswith("manifest.json"):
            self.manifests += 1
        return super()._open(path, mode, *args, **kwargs)


@pytest.fixture
def table(tmp_path: Path) -> AcidTableWriter:
    return AcidTableWriter(str(tmp_path / "t"), [("id", "bigint"), ("v", "string")], buckets=1)


def _snapshots(table: AcidTableWriter, out: Path, count: int, fs: Any = None) -> list[str]:
    """``count`` snapshots committed into ``out``, a write before each; their ids."""
    ids = []
    for _ in range(count):
        table.insert([{"id": len(ids), "v": "x"}])
        result = compact_table(
            table.root, str(out), write_ids=table.valid_write_ids(), out_filesystem=fs,
            options=CompactionOptions(reuse=False),
        )  # fmt: skip
        ids.append(result.snapshot_id)
    return ids


def _feeds(table: AcidTableWriter, out: Path, count: int) -> None:
    """``count`` feeds delivered into ``out``, a write before each (the first from write 0)."""
    for i in range(count):
        table.insert([{"id": i, "v": "x"}])
        compute_changes(
            table.root, str(out), from_write_id=None if i else 0,
            write_ids=table.valid_write_ids(),
        )  # fmt: skip


def test_the_latest_is_one_manifest_read_however_many_are_committed(table, tmp_path):
    out = tmp_path / "out"
    fs = CountingFileSystem()
    ids = _snapshots(table, out, 12)
    full = committed_snapshots(fs, str(out))
    assert [s.snapshot_id for s in full] == ids
    assert [s.sequence for s in full] == list(range(1, 13))
    assert [e.snapshot_id for e in read_log(fs, str(out))] == ids
    fs.manifests = 0
    assert latest_committed(fs, str(out)).snapshot_id == ids[-1]
    assert fs.manifests == 1
    # a test walks back from the newest: as many reads as snapshots passed over
    fs.manifests = 0
    third = latest_committed(fs, str(out), lambda s: s.sequence <= 3)
    assert (third.snapshot_id, fs.manifests) == (ids[2], 10)
    # a commit reads the newest manifest, not all of them
    fs.manifests = 0
    ids += _snapshots(table, out, 1, fs)
    # its own manifest looked for (not there yet) by the plan and by the commit, and the
    # newest one: whatever the number committed (12 here)
    assert fs.manifests == 3
    assert latest_snapshot(str(out)).sequence == 13


def _killed(table: AcidTableWriter, out: Path, sequence: int, files: bool = False) -> Any:
    """A run (after a write) that logged its commit as ``sequence`` and died before its
    manifest, having written its buckets' files or not; its plan."""
    table.insert([{"id": 99, "v": "killed"}])
    plan = plan_snapshot(table.root, str(out), write_ids=table.valid_write_ids())
    for key in plan.keys_to_compute if files else ():
        compact_slice(table.root, key, str(out), plan.snapshot_id, plan=plan)
    log_commit(LocalFileSystem(), str(out), LogEntry(sequence, plan.snapshot_id))
    return plan


def test_a_commit_killed_before_its_manifest_is_passed_over(table, tmp_path):
    out = tmp_path / "out"
    fs = LocalFileSystem()
    ids = _snapshots(table, out, 2)
    plan = _killed(table, out, 3)  # sequence 3, no manifest
    assert latest_committed(fs, str(out)).snapshot_id == ids[-1]
    assert feed_watermark(str(out)) is None  # no feed among them
    # the same snapshot committed later takes the next number: 3 is never given twice
    committed = compact_table(
        table.root, str(out), write_ids=table.valid_write_ids(),
        options=CompactionOptions(reuse=False),
    )  # fmt: skip
    assert committed.snapshot_id == plan.snapshot_id
    assert (committed.sequence, committed.previous_snapshot_id) == (4, ids[-1])
    assert latest_committed(fs, str(out)).snapshot_id == plan.snapshot_id
    assert [s.sequence for s in committed_snapshots(fs, str(out))] == [1, 2, 4]


def test_a_folder_committed_to_before_the_log_is_read_whole_then_logged(
    table, tmp_path, monkeypatch
):
    out = tmp_path / "out"
    fs = CountingFileSystem()
    ids = _snapshots(table, out, 4)
    shutil.rmtree(out / LOG_DIR)  # as a version without the log left it
    fs.manifests = 0
    assert latest_committed(fs, str(out)).snapshot_id == ids[-1]
    assert fs.manifests == 4  # no log: every manifest
    # an older one the log would not give: every manifest, again
    assert latest_snapshot(str(out), committed_before="2000-01-01T00:00:00Z") is None
    # the next commit logs the four, newest first (a reader listing the log meanwhile finds
    # the newest at its top), then itself, with the next sequence
    written = []
    original = commit_log.log_commit
    monkeypatch.setattr(
        commit_log, "log_commit", lambda f, r, e: written.append(e.sequence) or original(f, r, e)
    )
    ids += _snapshots(table, out, 1)
    assert written == [4, 3, 2, 1]
    assert [e.snapshot_id for e in read_log(fs, str(out))] == ids
    assert [e.sequence for e in read_log(fs, str(out))] == [1, 2, 3, 4, 5]
    fs.manifests = 0
    assert latest_committed(fs, str(out)).sequence == 5
    assert fs.manifests == 1


def test_a_logged_folder_still_finds_an_older_unlogged_snapshot(table, tmp_path):
    out = tmp_path / "out"
    fs = LocalFileSystem()
    ids = _snapshots(table, out, 3)
    # the first snapshot's entry lost: the test only it passes is answered by every manifest
    first = read_log(fs, str(out))[0]
    (out / LOG_DIR / first.name).unlink()
    assert latest_committed(fs, str(out), lambda s: s.sequence == 1).snapshot_id == ids[0]


def test_expiry_keeps_the_kept_snapshots_entries_only(table, tmp_path):
    out = tmp_path / "out"
    fs = LocalFileSystem()
    ids = _snapshots(table, out, 5)
    log_commit(fs, str(out), LogEntry(6, "0123456789abcdef"))  # a killed commit's
    result = expire_snapshots(str(out), keep=2)
    assert result.kept == tuple(ids[-2:])
    assert [e.snapshot_id for e in read_log(fs, str(out))] == ids[-2:]
    assert latest_committed(fs, str(out)).snapshot_id == ids[-1]
    # and the next commit numbers after the newest kept
    ids += _snapshots(table, out, 1)
    assert latest_committed(fs, str(out)).sequence == 6


def test_a_scheduled_feed_reads_one_manifest_for_its_watermark(table, tmp_path):
    out = tmp_path / "feed"
    _feeds(table, out, 8)
    fs = CountingFileSystem()
    assert feed_watermark(str(out), out_filesystem=fs) == 8
    assert fs.manifests == 1
    assert [e.sequence for e in read_log(fs, str(out))] == list(range(1, 9))


def test_commits_through_the_log_equal_those_read_whole(table, tmp_path):
    """Two folders, the same commits: one read through the log, one by every manifest."""
    out = tmp_path / "out"
    fs = LocalFileSystem()
    _snapshots(table, out, 6)
    expire_snapshots(str(out), keep=3)
    _snapshots(table, out, 2)
    whole = committed_snapshots(fs, str(out))
    logged = read_log(fs, str(out))
    assert [(s.sequence, s.snapshot_id) for s in whole] == [
        (e.sequence, e.snapshot_id) for e in logged
    ]
    chain = [s.previous_snapshot_id for s in whole[1:]]
    assert chain == [s.snapshot_id for s in whole[:-1]]


def test_a_feed_folder_expired_down_to_its_latest_keeps_its_watermark(table, tmp_path):
    """Deliveries already applied can be expired (``airflow-acid expire``): the latest feed
    stays, and the next run starts at its B and delivers only the writes after it."""
    out = tmp_path / "feed"
    _feeds(table, out, 4)
    expired = expire_snapshots(str(out), keep=1)
    assert len(expired.removed_snapshots) == 3 and feed_watermark(str(out)) == 4
    assert len(read_log(LocalFileSystem(), str(out))) == 1
    table.insert([{"id": 9, "v": "new"}])
    feed = compute_changes(table.root, str(out), write_ids=table.valid_write_ids())
    assert (feed.from_write_id, feed.to_write_id, feed.counts["insert"]) == (4, 5, 1)


def test_a_killed_commit_s_log_entry_temporary_is_removed_by_the_next_commit(table, tmp_path):
    """A commit killed while writing its log entry leaves a hidden temporary in ``_commits``
    (found by ``make chaos``); the next commit, of it or of another snapshot, removes it."""
    from airflow_provider_acid.acid.storage import TEMPORARY_NAME, temporary_path

    out = tmp_path / "out"
    _snapshots(table, out, 1)
    left = Path(temporary_path(str(out / LOG_DIR / "000000000002-0123456789abcdef")))
    left.write_bytes(b"")  # its writer dead: no lock held on it
    _snapshots(table, out, 1)
    assert not left.exists()
    assert not [p for p in out.rglob("*") if TEMPORARY_NAME.match(p.name)]
    assert [e.sequence for e in read_log(LocalFileSystem(), str(out))] == [1, 2]


def test_a_commit_does_not_look_into_the_folders_of_the_snapshots_its_log_holds(
    table, tmp_path, monkeypatch
):
    from airflow_provider_acid.acid import listing

    out = tmp_path / "out"
    snapshots = str(out / "_snapshots")
    looked: list[str] = []
    scandir = listing.os.scandir

    def counted(path):  # noqa: ANN001, ANN202
        looked.append(str(path))
        return scandir(path)

    monkeypatch.setattr(listing.os, "scandir", counted)
    ids = _snapshots(table, out, 4)
    looked.clear()
    last = _snapshots(table, out, 1)[0]
    inside = sorted({p.rsplit("/", 1)[1] for p in looked if p.startswith(snapshots + "/")})
    assert inside == [last]  # its own folder only, not the four logged before it
    assert [e.snapshot_id for e in read_log(LocalFileSystem(), str(out))] == [*ids, last]


def test_a_commit_killed_after_its_log_entry_leaves_files_the_next_commit_removes(table, tmp_path):
    out = tmp_path / "out"
    fs = LocalFileSystem()
    ids = _snapshots(table, out, 2)
    plan = _killed(table, out, 3, files=True)  # its buckets' files written, no manifest
    killed = sorted(p.name for p in out.rglob(f"part-{plan.snapshot_id}-*"))
    assert killed  # its files are there, no manifest lists them

    table.insert([{"id": 99, "v": "next"}])
    after = _snapshots(table, out, 1)[0]

    assert sorted(p.name for p in out.rglob(f"part-{plan.snapshot_id}-*")) == []
    latest = latest_committed(fs, str(out))
    assert (latest.snapshot_id, latest.sequence, latest.previous_snapshot_id) == (
        after, 4, ids[-1],
    )  # fmt: skip
    # committed again later, the killed entry is below the newest: it is not looked at again
    assert [e.sequence for e in read_log(fs, str(out))] == [1, 2, 3, 4]
