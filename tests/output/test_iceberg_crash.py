"""Crash safety of the Iceberg sink: kill -9 at random points of the Iceberg commit, 20 times.

Each round deletes a row of the source table, and a child process compacts and commits the
Parquet manifest, says so, and publishes the snapshot to the Iceberg table; the test kills it
(SIGKILL) after a random delay within what a publication takes (measured on an unkilled
incremental round first). After every kill a fresh reader of the table sees a complete
snapshot: exactly the rows of the previous round or of this one, never a mixture or an
error. The re-run (the same compaction, in this process) finds the manifest committed and
publishes it: the table then holds this round's rows as one new snapshot recording the
manifest's id, and its metadata folder holds only files the table references (what the
killed run left is removed).
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from pyiceberg.catalog import load_catalog

from airflow_provider_acid.acid.listing import resolve_filesystem
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.output import committed_snapshots
from airflow_provider_acid.output.iceberg import SUMMARY_SNAPSHOT_ID, default_catalog_properties
from airflow_provider_acid.output.sinks import open_sink
from airflow_provider_acid.testing import AcidTableWriter

ROUNDS = 20
SEED = 20261201

CHILD = """
import sys
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.output.sinks import open_sink

root, out, write_ids = sys.argv[1:4]
result = compact_table(root, out, write_ids=write_ids)  # the manifest's commit
sink = open_sink("iceberg", out)
sink.catalog()  # opened before the signal: the kill window is the publication itself
print("committed", flush=True)
sink.publish(result)
print("published", flush=True)
"""


def run_child(root: str, out: str, write_ids: str, kill_after: float | None) -> tuple[str, float]:
    """Run one publication in a child; kill -9 it ``kill_after`` seconds after the manifest's
    commit (None: let it finish). Returns how it ended and the publication's duration."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, root, out, write_ids],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    if line != "committed":
        child.wait(timeout=120)
        raise AssertionError(f"the child failed before publishing: {child.stderr.read()[-3000:]}")
    started = time.monotonic()
    if kill_after is not None:
        time.sleep(kill_after)
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
    child.wait(timeout=120)
    elapsed = time.monotonic() - started
    if child.returncode == -signal.SIGKILL:
        return "killed", elapsed
    assert child.returncode == 0, child.stderr.read()[-3000:]
    return "finished", elapsed


def table_rows(out: str) -> list[int] | None:
    """What a fresh reader sees now (None: no table yet)."""
    from pyiceberg.exceptions import NoSuchTableError

    catalog = load_catalog("acid", **default_catalog_properties(out))
    try:
        table = catalog.load_table("acid.t")
    except NoSuchTableError:
        return None
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def referenced_metadata(out: str) -> tuple[set[str], set[str]]:
    """(files in the metadata folder, files the table's metadata references)."""
    catalog = load_catalog("acid", **default_catalog_properties(out))
    table = catalog.load_table("acid.t")
    folder = Path(out) / "_iceberg" / "metadata"
    present = {p.name for p in folder.iterdir()}
    wanted = {Path(table.metadata_location).name}
    wanted |= {Path(e.metadata_file).name for e in table.metadata.metadata_log}
    for snapshot in table.snapshots():
        wanted.add(Path(snapshot.manifest_list).name)
        wanted |= {Path(m.manifest_path).name for m in snapshot.manifests(table.io)}
    return present, wanted


def test_kill_nine_during_the_iceberg_commit_never_shows_part_of_a_snapshot(tmp_path):
    rng = random.Random(SEED)
    table = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("name", "string")], buckets=4, bucket_by="id"
    )
    table.insert([{"id": i, "name": f"n{i}"} for i in range(200)])
    out = str(tmp_path / "out")
    fs, root = resolve_filesystem(out)
    alive = list(range(200))

    how, _ = run_child(table.root, out, table.valid_write_ids(), None)  # creates the table
    assert how == "finished" and table_rows(out) == alive
    table.delete(lambda row: row["id"] == alive[0])  # an incremental publication, timed
    alive.remove(alive[0])
    how, duration = run_child(table.root, out, table.valid_write_ids(), None)
    assert how == "finished" and table_rows(out) == alive
    endings = []
    for round_number in range(ROUNDS):
        before = list(alive)
        victim = rng.choice(alive)
        table.delete(lambda row, victim=victim: row["id"] == victim)
        alive.remove(victim)
        write_ids = table.valid_write_ids()

        how, _ = run_child(table.root, out, write_ids, rng.uniform(0, duration * 1.1))
        endings.append(how)
        seen = table_rows(out)
        assert seen in (before, alive), f"round {round_number}: a reader saw part of a snapshot"

        result = compact_table(table.root, out, write_ids=write_ids)  # the re-run
        assert not result.newly_committed  # the killed run had committed the manifest
        publication = open_sink("iceberg", out).publish(result)
        assert publication.newly_published == (seen == before)
        assert table_rows(out) == alive
        catalog = load_catalog("acid", **default_catalog_properties(out))
        iceberg = catalog.load_table("acid.t")
        history = [
            s.summary.additional_properties[SUMMARY_SNAPSHOT_ID] for s in iceberg.snapshots()
        ]
        assert history == [s.snapshot_id for s in committed_snapshots(fs, root)]
        present, wanted = referenced_metadata(out)
        assert present <= wanted, f"round {round_number}: left behind {sorted(present - wanted)}"
        assert wanted <= present
    print(f"kill -9 rounds: {endings.count('killed')} killed, {endings.count('finished')} done")
