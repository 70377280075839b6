"""``scripts/trino.py``'s record of what it started: a failed start keeps its state file, so
``stop`` stops the metastore that start started, and only that (the restart that keeps the
record is in ``test_killed_writer.py``)."""

from __future__ import annotations

import json
import subprocess
import sys

from trino_helpers import REPO

from airflow_provider_acid.metastore import MetastoreClient

SCRIPT = REPO / "scripts" / "trino.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True,
        timeout=600, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip


def test_a_failed_start_is_recorded_and_stop_leaves_a_metastore_it_did_not_start(trino, tmp_path):
    home = str(tmp_path / "home")
    failed = _run("start", "--home", home, "--xmx", "bogus")  # the JVM refuses the heap size
    assert failed.returncode == 1 and "Trino exited" in failed.stderr, failed.stderr
    state = json.loads((tmp_path / "home" / "state.json").read_text())
    # the session's metastore, reused: not this start's to stop
    assert state["metastore"] == trino.metastore_uri and state["started_metastore"] is False
    assert state["pid"] > 0
    status = _run("status", "--home", home)
    assert status.returncode == 3 and "is not running" in status.stdout, status.stdout
    stopped = _run("stop", "--home", home)
    assert stopped.returncode == 0 and "was not running" in stopped.stdout, stopped.stdout
    assert "metastore" not in stopped.stdout
    assert not (tmp_path / "home" / "state.json").exists()
    with MetastoreClient(trino.metastore_uri) as client:
        assert client.databases()  # still answers
