"""The ``airflow-acid`` command ends with main's exit code, its output complete, and never
aborts in the native libraries' teardown: ``changes --key`` ended with "terminate called
without an active exception" (exit 134) in about one run in six before ``console_main``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from airflow_provider_acid.testing import generate_demo_table

COMMAND = Path(sys.executable).parent / "airflow-acid"


def test_changes_runs_end_cleanly_with_their_whole_output(tmp_path):
    table = tmp_path / "t"
    generate_demo_table(str(table), partitions=1, buckets=2, rows_per_bucket=2000, seed=1)
    codes, counts = [], []
    for run in range(8):
        done = subprocess.run(
            [str(COMMAND), "changes", str(table), "--from-write-id", "1", "--key", "id",
             "--out", str(tmp_path / f"out-{run}"), "--json"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        codes.append(done.returncode)
        if done.returncode == 0:
            counts.append(json.loads(done.stdout)["counts"])
    assert codes == [0] * 8, codes
    assert counts[0]["update_preimage"] > 0 and all(c == counts[0] for c in counts)


def test_a_failing_command_keeps_its_exit_code_and_message(tmp_path):
    done = subprocess.run(
        [str(COMMAND), "compact", str(tmp_path / "missing"), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2
    assert "does not exist or is not a folder" in done.stderr
