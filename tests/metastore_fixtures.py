"""A real Hive Metastore (HMS 4.0.1, ``scripts/metastore.py``) for the tests (via conftest.py).

``metastore_uri`` starts it once per session (or reuses the one already running from the same
home) and stops it at the end only if this session started it. Nothing is skipped: if the
metastore cannot start, the fixture fails with the script's output. ``ACID_TEST_METASTORE_HOME``
picks another home than the script's default (``.cache/hive-metastore/run``).

``metastore`` is an open client per test; ``metastore_db`` a database of its own per test
(``t_<8 hex digits>``, its managed location a fresh folder of the test's ``tmp_path``), whose
tables are dropped and whose transactions left open are aborted afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import pytest

from airflow_provider_acid.metastore import MetastoreClient
from airflow_provider_acid.testing import AcidTableWriter
from airflow_provider_acid.testing.metastore_tables import (
    RegisteredTable,
    drop_database,
    ensure_database,
    metastore_location,
    register_table,
)
from airflow_provider_acid.testing.write_history import WriteState

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "metastore.py"
HOME_ENV = "ACID_TEST_METASTORE_HOME"
START_TIMEOUT = 1200  # the first start fetches the metastore through Maven


def _script(
    command: str, timeout: float, home: str | None = None, *extra: str
) -> subprocess.CompletedProcess:
    home = home or os.environ.get(HOME_ENV)
    args = [sys.executable, str(SCRIPT), command] + (["--home", home] if home else [])
    return subprocess.run(
        [*args, *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="session")
def metastore_uri() -> Iterator[str]:
    """``thrift://127.0.0.1:PORT`` of a running metastore (started here if none was)."""
    yield from _running_metastore(None)


#: The SASL PLAIN metastore's login (Hive's metastore.authentication=CONFIG).
SASL_USER, SASL_PASSWORD = "acid", "acid-test-password"


@pytest.fixture(scope="session")
def sasl_metastore_uri() -> Iterator[str]:
    """A second metastore, in its own home, that checks a SASL PLAIN user and password."""
    home = str(REPO / ".cache" / "hive-metastore" / "sasl")
    auth = ("--auth", "config", "--user", SASL_USER, "--password", SASL_PASSWORD)
    yield from _running_metastore(home, *auth)


@pytest.fixture(scope="session")
def notifications_metastore_uri() -> Iterator[str]:
    """A metastore of its own home with the notification log on (``--notifications``: the
    project's listener, scripts/metastore/NotificationLogListener.java); the shared one
    above stays without it."""
    home = str(REPO / ".cache" / "hive-metastore" / "notifications")
    yield from _running_metastore(home, "--notifications")


#: The expiring log's time-to-live: its cleaner removes events older than this, every second.
EVENT_TTL_SECONDS = 2


@pytest.fixture(scope="session")
def expiring_log_metastore_uri() -> Iterator[str]:
    """A notification-log metastore of its own home whose listener's cleaner (as Hive's
    DbNotificationListener's) removes events after ``EVENT_TTL_SECONDS``: for readers whose
    cursor the log has left behind. Only the test of that starts it; the log of
    ``notifications_metastore_uri`` keeps its events a day."""
    home = str(REPO / ".cache" / "hive-metastore" / "notifications-ttl")
    yield from _running_metastore(home, "--notifications", "--event-ttl", str(EVENT_TTL_SECONDS))


def _running_metastore(home: str | None, *extra: str) -> Iterator[str]:
    t0 = time.monotonic()
    started = _script("start", START_TIMEOUT, home, *extra)
    lines = started.stdout.strip().splitlines()
    if started.returncode != 0 or not lines or not lines[-1].startswith("thrift://"):
        pytest.fail(
            f"scripts/metastore.py start failed (exit {started.returncode}) after "
            f"{time.monotonic() - t0:.0f}s\n--- stdout ---\n{started.stdout}\n"
            f"--- stderr ---\n{started.stderr}",
            pytrace=False,
        )
    # The script says "metastore already running (pid N), reused" when it reuses one.
    reused = any("already running" in line for line in lines[:-1])
    yield lines[-1]
    if not reused:
        stopped = _script("stop", 120, home)
        if stopped.returncode != 0:
            print(f"scripts/metastore.py stop failed: {stopped.stdout}{stopped.stderr}")


@pytest.fixture
def metastore(metastore_uri: str) -> Iterator[MetastoreClient]:
    """An open client of the session's metastore."""
    with MetastoreClient(metastore_uri) as client:
        yield client


@dataclass
class MetastoreDatabase:
    """A database of one test: its name, its folder, the tables registered in it."""

    client: MetastoreClient
    uri: str
    name: str
    folder: Path
    registered: list[RegisteredTable] = field(default_factory=list)
    #: transactions opened outside a registered table's writer, aborted at the end if open
    txns: list[int] = field(default_factory=list)

    def table_name(self, table: str) -> str:
        return f"{self.name}.{table}"

    def path(self, table: str) -> str:
        return str(self.folder / table)

    def writer(self, table: str, columns: Any, partition_columns: Any = (), **kw: Any):
        """A simulated table ``table`` of this database, in its folder (not registered yet)."""
        return AcidTableWriter(
            self.path(table),
            columns,
            partition_columns,
            database=self.name,
            table_name=table,
            **kw,
        )

    def register(self, writer: AcidTableWriter, **kw: Any) -> RegisteredTable:
        registered = register_table(self.client, writer, **kw)
        self.registered.append(registered)
        return registered

    def cleanup(self) -> None:
        open_txns = {t for r in self.registered for t in r.history.txn_ids(WriteState.OPEN)}
        still_open = set(self.client.get_open_txns().open_txns or ())
        for txn in sorted(open_txns | set(self.txns)):
            if txn in still_open:
                self.client.abort_txn(txn)
        for table in self.client.table_names(self.name):
            self.client.drop_table(self.table_name(table))
        drop_database(self.client, self.name)


@pytest.fixture
def metastore_db(
    metastore: MetastoreClient, metastore_uri: str, tmp_path: Path
) -> Iterator[MetastoreDatabase]:
    """A fresh database ``t_<uuid8>``; its tables are dropped afterwards (files stay in
    ``tmp_path``) and the transactions its tests left open are aborted."""
    name = f"t_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "warehouse"
    folder.mkdir()
    ensure_database(metastore, name, metastore_location(fsspec.filesystem("file"), str(folder)))
    db = MetastoreDatabase(metastore, metastore_uri, name, folder)
    try:
        yield db
    finally:
        db.cleanup()


@pytest.fixture
def sales(metastore_db):
    """``sales(id bigint, name string) PARTITIONED BY (dt string)``, 2 buckets by id: two
    committed inserts, a delete, one aborted insert and one left open (files on storage)."""
    writer = metastore_db.writer(
        "sales", [("id", "bigint"), ("name", "string")], [("dt", "string")], buckets=2,
        bucket_by="id",
    )  # fmt: skip
    registered = metastore_db.register(writer)
    days = ("2024-01-01", "2024-01-02")
    writer.insert([{"id": i, "name": f"n{i}", "dt": days[i % 2]} for i in range(40)])
    writer.insert([{"id": i, "name": f"n{i}", "dt": days[i % 2]} for i in range(40, 60)])
    writer.delete(lambda r: r["id"] % 5 == 0)
    aborted = writer.begin()
    aborted.insert([{"id": 1000 + i, "name": "aborted", "dt": days[i % 2]} for i in range(6)])
    aborted.abort()
    in_flight = writer.begin()  # stays open: its files are on storage, half a write
    in_flight.insert([{"id": 2000 + i, "name": "open", "dt": days[i % 2]} for i in range(4)])
    return registered
