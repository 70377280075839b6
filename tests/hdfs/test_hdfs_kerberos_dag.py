"""The main example DAG (acid_snapshot_materialisation) run by ``airflow dags test`` in a
subprocess against the Kerberos metastore and the Kerberos HDFS: the principal and keytab only
in Airflow connections from the environment (``AIRFLOW_CONN_*``), the table read by name from
its hdfs:// location, the snapshot written to HDFS.

The second test runs a live ``airflow triggerer`` (and the api-server its task runners report
to): the DAG's metastore sensor defers, and its trigger waits in the triggerer across the end
of its first Kerberos ticket, logging in again from the keytab, until a write is committed."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import gssapi
import httpx
import pytest
from hdfs_helpers import (
    MAIN_DAG,
    METASTORE_CONN,
    PRINCIPAL_TEMPLATE,
    REPO,
    dag_environment,
    dags_test,
    make_table,
    run_logged,
    snapshot_ids,
    tail,
)

from airflow_provider_acid.kerberos import KerberosLogin
from airflow_provider_acid.metastore import MetastoreClient
from airflow_provider_acid.metastore.connection import MetastoreAddress
from airflow_provider_acid.testing.metastore_tables import drop_database

SENSOR = "wait_for_commits"
#: what the triggerer's krb5.conf asks the KDC for (the realm allows users 120 s)
TRIGGERER_TICKET = 60
POLL = 10  # the sensor's poll interval (ACID_SENSOR_POLL_INTERVAL)


@pytest.fixture
def kerberos_client(kdc, hdfs_kerberos, kerberos_metastore_uri, monkeypatch):
    """A client of the Kerberos metastore; this process writes tables on the Kerberos HDFS
    (the Airflow processes get none of these settings: see dag_environment)."""
    monkeypatch.setenv("ACID_HDFS_NAMENODES", hdfs_kerberos.namenodes)
    monkeypatch.setenv("ACID_HDFS_KERBEROS", "1")
    monkeypatch.setenv("ACID_KERBEROS_PRINCIPAL", kdc.principal)
    monkeypatch.setenv("ACID_KERBEROS_KEYTAB", kdc.keytab)
    login = KerberosLogin(kdc.principal, kdc.keytab)
    address = MetastoreAddress.parse(
        kerberos_metastore_uri, auth="GSSAPI", kerberos=login, server_principal=PRINCIPAL_TEMPLATE
    )
    made: list[str] = []
    with MetastoreClient(address) as client:
        client.made = made
        yield client
        for name in made:
            for t in client.table_names(name):
                client.drop_table(f"{name}.{t}")
            drop_database(client, name)


def test_airflow_dags_test_of_the_main_dag_against_the_kerberos_metastore_and_hdfs(
    airflow_db, kdc, hdfs_kerberos, kerberos_metastore_uri, kerberos_client, tmp_path
):
    name, table = make_table(kerberos_client, hdfs_kerberos, kerberos_metastore_uri, [])
    kerberos_client.made.append(name)
    committed = table.committed_ids()
    out = hdfs_kerberos.folder() + "/snapshots"
    env = dag_environment(kdc, hdfs_kerberos, kerberos_metastore_uri, table.name)
    log = tmp_path / "dags-test.log"
    code = run_logged(dags_test(table.name, out), env, log, timeout=600)
    assert code == 0, tail(log)
    assert snapshot_ids(kdc, hdfs_kerberos, out) == committed  # the committed rows, no others
    assert 700 not in committed and len(committed) == 22  # the aborted row is left out


# -- a live triggerer ------------------------------------------------------------------------


@functools.cache
def _e2e_common():
    """scripts/_e2e_common.py: Services starts and stops process groups, as scripts/e2e.py."""
    spec = importlib.util.spec_from_file_location("_e2e_common", REPO / "scripts/_e2e_common.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _wait(what: str, check, timeout: float, alive) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive()
        if found := check():
            return found
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}", pytrace=False)


def _ticket(ccache: str, principal: str) -> tuple[float, int] | None:
    """(when the ticket in ``ccache`` ends, the cache file's inode); None: no ticket yet."""
    try:
        inode = os.stat(ccache.removeprefix("FILE:")).st_ino
        name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
        creds = gssapi.Credentials(name=name, usage="initiate", store={b"ccache": ccache.encode()})
        return time.time() + creds.lifetime, inode
    except (OSError, gssapi.exceptions.GSSError):
        return None


@contextmanager
def _live_airflow(env: dict, triggerer_env: dict, api_port: int, logs: Path) -> Iterator:
    """An api-server (the execution API the task runners report to) and ``airflow triggerer``,
    on the session's SQLite metadata database, until the block ends."""
    e2e = _e2e_common()
    services = e2e.Services(logs)
    airflow = str(e2e.BIN / "airflow")
    api = ["api-server", "--host", "127.0.0.1", "--port", str(api_port), "--workers", "1"]
    health = f"http://127.0.0.1:{api_port}/api/v2/monitor/health"

    def healthy() -> bool:
        try:
            answer = httpx.get(health, timeout=10).json()
        except (httpx.HTTPError, ValueError):
            return False
        return (answer.get("triggerer") or {}).get("status") == "healthy"

    try:
        services.start("api-server", [airflow, *api], env)
        services.start("triggerer", [airflow, "triggerer", "--skip-serve-logs"], triggerer_env)
        _wait("the api-server and a healthy triggerer", healthy, 180, services.check_alive)
        yield services
    finally:
        services.stop_all()


class _Runs:
    """What the session's metadata database (read only) says of the main DAG's runs."""

    def __init__(self, home: Path) -> None:
        self.db = sqlite3.connect(f"file:{home / 'airflow.db'}?mode=ro", uri=True)

    def deferred(self, task_id: str) -> tuple | None:
        """(run id, classpath) of ``task_id`` deferred to a trigger a running triggerer holds."""
        return self.db.execute(
            "SELECT ti.run_id, t.classpath FROM task_instance ti JOIN trigger t "
            "ON ti.trigger_id = t.id JOIN job j ON j.id = t.triggerer_id "
            "WHERE ti.dag_id = ? AND ti.task_id = ? AND ti.state = 'deferred' "
            "AND j.job_type = 'TriggererJob' AND j.state = 'running'",
            (MAIN_DAG, task_id),
        ).fetchone()

    def states(self, run_id: str) -> dict[str, str]:
        query = "SELECT task_id || '.' || map_index, state FROM task_instance WHERE run_id = ?"
        return dict(self.db.execute(query, (run_id,)).fetchall())

    def xcom(self, run_id: str, task_id: str) -> object:
        (value,) = self.db.execute(
            "SELECT value FROM xcom WHERE run_id = ? AND task_id = ? AND key = 'return_value'",
            (run_id, task_id),
        ).fetchone()
        return json.loads(value)


def _trigger_events(home: Path, run_id: str, ccache: str) -> list[tuple[str, float]]:
    """The triggerer's log of the sensor's trigger (the task's side file), as (what, when):
    ``login`` (from the keytab into ``ccache``), ``look`` (no write yet) and ``fired``."""
    folder = home / "logs" / f"dag_id={MAIN_DAG}" / f"run_id={run_id}" / f"task_id={SENSOR}"
    (log,) = folder.glob("attempt=1.log.trigger.*.log")
    events = []
    for entry in map(json.loads, filter(None, log.read_text().splitlines())):
        text = entry["event"]
        kind = (
            "login" if "logged in from the keytab" in text and ccache in text else
            "look" if text.startswith("No write of") else
            "fired" if text == "Trigger fired event" else None
        )  # fmt: skip
        if kind:
            events.append((kind, datetime.fromisoformat(entry["timestamp"]).timestamp()))
    return events


def test_a_deferred_metastore_sensor_in_a_live_kerberos_triggerer_survives_a_renewal(
    airflow_db, kdc, hdfs_kerberos, kerberos_metastore_uri, kerberos_client, tmp_path
):
    name, table = make_table(
        kerberos_client, hdfs_kerberos, kerberos_metastore_uri, [], writes=False
    )
    kerberos_client.made.append(name)
    writer = table.registered.writer
    aborted = writer.begin()  # write 1, aborted: the sensor must not wake for it
    aborted.insert([{"id": 700, "name": "aborted", "dt": "2024-01-01"}])
    aborted.abort()
    out = hdfs_kerberos.folder() + "/snapshots"
    free_port = _e2e_common().free_port
    api_port = free_port()
    env = dag_environment(kdc, hdfs_kerberos, kerberos_metastore_uri, table.name)
    env.update(
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__PARALLELISM="2",
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{api_port}/execution/",
        AIRFLOW__API_AUTH__JWT_SECRET=os.urandom(24).hex(),  # the api-server checks the runners'
        AIRFLOW__API__SECRET_KEY=os.urandom(24).hex(),
        AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(free_port()),
        AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(free_port()),
        ACID_SENSOR_POLL_INTERVAL=str(POLL),
    )
    # The triggerer's own krb5.conf asks for 60 s tickets, and its connection keeps them in a
    # cache of its own: whatever is in that cache, only the triggerer put there.
    krb5_conf = tmp_path / "triggerer-krb5.conf"
    realm_conf = Path(kdc.krb5_conf).read_text()
    short = f"[libdefaults]\n    ticket_lifetime = {TRIGGERER_TICKET}s"
    krb5_conf.write_text(realm_conf.replace("[libdefaults]", short, 1))
    ccache = f"FILE:{tmp_path / 'triggerer-krb5cc'}"
    conn = f"AIRFLOW_CONN_{METASTORE_CONN.upper()}"
    own = dag_environment(kdc, hdfs_kerberos, kerberos_metastore_uri, table.name,
                          kerberos_ccache=ccache)  # fmt: skip
    triggerer_env = {**env, conn: own[conn], "KRB5_CONFIG": str(krb5_conf)}
    runs = _Runs(airflow_db)

    with _live_airflow(env, triggerer_env, api_port, tmp_path) as services:
        run = services.start("dags-test", dags_test(table.name, out, "--use-executor"), env)
        run.expected_exit = True  # it ends by itself: checked below

        def alive() -> None:
            services.check_alive()
            assert run.process.poll() is None, tail(run.log_path)

        run_id, classpath = _wait("the sensor to defer", lambda: runs.deferred(SENSOR), 240, alive)
        assert classpath == "airflow_provider_acid.triggers.metastore.AcidMetastoreWriteTrigger"
        # The trigger's first look logs in from the keytab into the triggerer's cache...
        first_end, first_inode = _wait(
            "the trigger's login", lambda: _ticket(ccache, kdc.principal), 60, alive
        )
        assert first_end - time.time() <= TRIGGERER_TICKET + 1
        # ...and a later look, with less than RENEW_MARGIN left, again, into a new file.
        renewed_end, renewed_inode = _wait(
            "the trigger to renew its ticket",
            lambda: (t := _ticket(ccache, kdc.principal)) and t[0] > first_end + 5 and t,
            TRIGGERER_TICKET + 3 * POLL,
            alive,
        )
        renewed_at = time.time()
        assert renewed_inode != first_inode
        assert renewed_at < first_end and renewed_end - first_end > TRIGGERER_TICKET / 2
        # A write is committed only once the first ticket has ended: the look that sees it
        # authenticates with the renewed one.
        time.sleep(max(0.0, first_end + 1 - time.time()))
        alive()
        assert runs.states(run_id)[f"{SENSOR}.-1"] == "deferred"
        days = ("2024-01-01", "2024-01-02")
        writer.insert([{"id": i, "name": f"n{i}", "dt": days[i % 2]} for i in range(20)])
        committed = table.committed_ids()
        assert run.process.wait(timeout=420) == 0, tail(run.log_path)

    states = runs.states(run_id)
    assert set(states.values()) == {"success"} and len(states) >= 5, states
    result = runs.xcom(run_id, SENSOR)
    assert result["waited_in"] == "triggerer" and result["write_ids"] == [2], result
    assert snapshot_ids(kdc, hdfs_kerberos, out) == committed == list(range(20))
    # The triggerer logged in at the trigger's first look and again before that ticket ended;
    # it looked with the renewed ticket, then fired after the first ticket's end.
    events = _trigger_events(airflow_db, run_id, ccache)
    kinds = [kind for kind, _ in events]
    assert kinds[:2] == ["login", "look"] and kinds.count("fired") == 1, kinds
    assert kinds.count("login") >= 2 and kinds.index("login", 1) < kinds.index("fired") - 1
    renewal = [at for kind, at in events if kind == "login"][1]
    fired = next(at for kind, at in events if kind == "fired")
    assert renewal < first_end < fired, (renewal - first_end, fired - first_end)
