"""A real Trino 476 (``scripts/trino.py``) writing Hive ACID tables for the provider to read.

``trino`` starts the server once per session (or reuses the one already running from the
script's home, e.g. after ``make trino``) and stops it at the end only if this session started
it; it fetches the server on a fresh machine, and fails (never skips) if it cannot start. The
server brings its own metastore (``.cache/hive-metastore/trino``, metadata transformer off: see
the script's docstring), so ``trino.metastore_uri`` is the one the provider reads names from.

``trino_process`` kills the server's JVM (SIGKILL) and starts it again on the same port, so the
session's ``trino`` serves the later tests as before (``test_killed_writer.py``).

``schema`` is a Hive schema of one test module, located in a temporary folder; its tables are
dropped at the end. Helpers to compare the provider's rows with Trino's are in
``trino_helpers.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from trino_helpers import REPO, Schema, Trino

SCRIPT = REPO / "scripts" / "trino.py"
HOME = REPO / ".cache" / "trino" / "run"
START_TIMEOUT = 1800  # the first start fetches about 800 MB through Maven


def _script(command: str, timeout: float, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), command, "--home", str(HOME), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _start(*args: str) -> list[str]:
    """``scripts/trino.py start``'s lines (the URL last); a failed start is stopped again (the
    metastore it started with it) and fails the test."""
    t0 = time.monotonic()
    started = _script("start", START_TIMEOUT, *args)
    lines = started.stdout.strip().splitlines()
    if started.returncode != 0 or not lines or not lines[-1].startswith("http://"):
        stopped = _script("stop", 300)
        pytest.fail(
            f"scripts/trino.py start failed (exit {started.returncode}) after "
            f"{time.monotonic() - t0:.0f}s\n--- stdout ---\n{started.stdout}\n"
            f"--- stderr ---\n{started.stderr[-6000:]}\n--- stop ---\n{stopped.stdout}",
            pytrace=False,
        )
    return lines


@pytest.fixture(scope="session")
def trino() -> Iterator[Trino]:
    """A running Trino (started here if none was) and its metastore's URI."""
    lines = _start()
    state = json.loads((HOME / "state.json").read_text())
    yield Trino(lines[-1], state["metastore"])
    if not any("already running" in line for line in lines[:-1]):
        stopped = _script("stop", 300)
        if stopped.returncode != 0:
            print(f"scripts/trino.py stop failed: {stopped.stdout}{stopped.stderr}")


class TrinoProcess:
    """The session's Trino server process, for a test that kills it: :meth:`kill` sends
    SIGKILL to the JVM, :meth:`restart` starts the server again on the same port (the URL
    every other test holds) and returns the seconds it took."""

    def __init__(self, trino: Trino) -> None:
        self.trino = trino

    @staticmethod
    def state() -> dict:
        return json.loads((HOME / "state.json").read_text())

    def kill(self) -> int:
        """SIGKILL to the server's JVM; returns once the process is gone (or a zombie)."""
        pid = int(self.state()["pid"])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                status = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return pid
            if status.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return pid
            time.sleep(0.1)
        pytest.fail(f"Trino's pid {pid} still runs 60 s after SIGKILL", pytrace=False)

    def restart(self) -> float:
        t0 = time.monotonic()
        port = urlsplit(self.trino.url).port
        lines = _start("--port", str(port))
        assert not any("already running" in line for line in lines[:-1]), lines
        self.trino.url = lines[-1]
        return time.monotonic() - t0


@pytest.fixture
def trino_process(trino: Trino) -> TrinoProcess:
    """The session's Trino, to kill and restart (see :class:`TrinoProcess`)."""
    return TrinoProcess(trino)


@pytest.fixture(scope="module")
def schema(trino: Trino, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Schema]:
    """A Hive schema ``trino_<8 hex>`` in a temporary folder, dropped with its tables after."""
    folder: Path = tmp_path_factory.mktemp("trino-warehouse")
    name = f"trino_{uuid.uuid4().hex[:8]}"
    trino.sql(f"CREATE SCHEMA hive.{name} WITH (location = '{folder.as_uri()}')")
    made = Schema(trino, name, folder)
    try:
        yield made
    finally:
        made.drop()
