"""Kill -9 at random points of runs that compact and publish the nation fixture as a Delta table
(watermark 3, then 4, into one output folder): after every kill a Delta reader sees a complete
snapshot, the one its latest provider commit names, and the runs converge."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import fsspec
from deltalake import DeltaTable

from airflow_provider_acid.output import read_manifest
from airflow_provider_acid.output.delta import DeltaSink

TRIALS = 6

RUN = textwrap.dedent(
    """
    import sys
    from airflow_provider_acid.engine.compaction import compact_table
    from airflow_provider_acid.output.sinks import open_sink

    table, out = sys.argv[1], sys.argv[2]
    sink = open_sink("delta", out)
    print("ready", flush=True)
    for watermark in (3, 4):
        ids = f"default.nation:{watermark}:9223372036854775807::"
        sink.publish(compact_table(table, out, write_ids=ids))
    print("done")
    """
)


def run(table: Path, out: Path) -> subprocess.Popen:
    """A run, once it has imported everything (the kills land in its work, not its start)."""
    child = subprocess.Popen(
        [sys.executable, "-c", RUN, str(table), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    line = child.stdout.readline()
    assert line == b"ready\n", (line, child.stderr.read().decode() if child.poll() else "")
    return child


def check_complete(out: Path) -> int | None:
    """The rows a Delta reader sees, checked against the snapshot the latest commit names."""
    if not any((out / "_delta_log").glob("*.json")):
        return None
    sink = DeltaSink(str(out))
    table = DeltaTable(str(out))
    rows = table.to_pyarrow_table()
    (_, record), *_ = reversed(sink.provider_commits(table))
    manifest = read_manifest(fsspec.filesystem("file"), str(out), record["snapshot_id"])
    assert manifest is not None, f"version {table.version()} names an uncommitted snapshot"
    assert rows.num_rows == manifest.rows_written == record["rows"]
    return rows.num_rows


def test_kill_9_during_compaction_and_publication_never_shows_a_partial_table(hive_table, tmp_path):
    table = hive_table("nation")
    whole = run(table, tmp_path / "reference")
    started = time.monotonic()
    assert whole.wait(timeout=300) == 0, whole.stderr.read().decode()
    duration = time.monotonic() - started  # both snapshots' work, compaction and publication

    rng = random.Random(11)
    seen = []
    for trial in range(TRIALS):
        out = tmp_path / f"out{trial}"
        child = run(table, out)
        # kill points spread over the whole run: trial k lands in the k-th of TRIALS slices
        time.sleep(duration * (trial + rng.random()) / TRIALS)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        seen.append(check_complete(out))

        final = run(table, out)  # the re-run converges
        assert final.wait(timeout=300) == 0, final.stderr.read().decode()
        assert check_complete(out) == 23_000
        commits = DeltaSink(str(out)).provider_commits()
        assert [record["write_ids"] for _, record in commits] == [
            "default.nation:3:9223372036854775807::",
            "default.nation:4:9223372036854775807::",
        ]
        assert [v for v, _ in commits] == [0, 1]
        assert DeltaTable(str(out), version=0).to_pyarrow_table().num_rows == 24_000
        # a killed commit's temporaries are never taken for commits
        assert sorted(p.name for p in (out / "_delta_log").glob("*.json")) == [
            f"{0:020d}.json",
            f"{1:020d}.json",
        ]
    assert set(seen) <= {None, 24_000, 23_000}
