"""The metastore write sensor and its trigger against a real Hive Metastore (scripts/metastore.py).

Writes are real transactions of the metastore (``open_txns``, ``allocate_table_write_ids``,
``commit_txn``, ``abort_txn``) on a real ACID table created through its API; the sensor needs
no files. The sensor runs under a real ``dag.test()``, whose in-process triggerer runs the
trigger for real; the trigger reads its ``hive_metastore`` connection from the environment.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from airflow.sdk.exceptions import TaskDeferred
from airflow.sdk.module_loading import import_string
from test_example_dags import xcom
from test_snapshot_tasks import register

from airflow_provider_acid.engine.watermark import snapshot_watermark
from airflow_provider_acid.metastore import (
    MetastoreClient,
    NotTransactionalError,
    TableNotFoundError,
    WriteIdListMismatchError,
    read_view,
)
from airflow_provider_acid.metastore.changes import committed_writes_since
from airflow_provider_acid.sensors.metastore import AcidMetastoreWriteSensor
from airflow_provider_acid.testing.metastore_tables import drop_database
from airflow_provider_acid.triggers.metastore import AcidMetastoreWriteTrigger

ORC = "org.apache.hadoop.hive.ql.io.orc."
CONN_ID = "metastore_test"


def thrift_table(db: str, name: str, location: str, *, transactional: bool = True):
    """A one-column ORC table, ACID (``transactional=true``) unless said otherwise."""
    from hive_metastore import ttypes as t

    params = {"transactional": "true", "transactional_properties": "default"}
    return t.Table(
        dbName=db,
        tableName=name,
        owner="airflow-provider-acid",
        tableType="MANAGED_TABLE" if transactional else "EXTERNAL_TABLE",
        parameters=params if transactional else {"EXTERNAL": "TRUE"},
        partitionKeys=[],
        sd=t.StorageDescriptor(
            cols=[t.FieldSchema("id", "bigint", None)],
            location=location,
            inputFormat=ORC + "OrcInputFormat",
            outputFormat=ORC + "OrcOutputFormat",
            compressed=False,
            numBuckets=-1,
            serdeInfo=t.SerDeInfo(serializationLib=ORC + "OrcSerde", parameters={}),
            bucketCols=[],
            sortCols=[],
            parameters={},
        ),
    )


@dataclass
class Table:
    """An ACID table of its own database in the real metastore, and writes to it."""

    client: MetastoreClient
    name: str
    txns: dict[int, int] = field(default_factory=dict)  # write id -> its transaction

    def begin(self) -> int:
        """Opens a transaction and allocates the table's next write id in it."""
        (txn,) = self.client.open_txns(1)
        write_id = self.client.allocate_write_ids(self.name, [txn])[txn]
        self.txns[write_id] = txn
        return write_id

    def commit(self, write_id: int) -> None:
        self.client.commit_txn(self.txns[write_id])

    def abort(self, write_id: int) -> None:
        self.client.abort_txn(self.txns[write_id])

    def committed(self) -> int:
        write_id = self.begin()
        self.commit(write_id)
        return write_id

    def aborted(self) -> int:
        write_id = self.begin()
        self.abort(write_id)
        return write_id


@pytest.fixture
def table(metastore_uri: str, tmp_path: Path) -> Iterator[Table]:
    """``ms_<8 hex>.events``; its database's managed location does not exist yet (Hive 4
    creates it, and refuses one that exists). Open transactions are aborted afterwards."""
    db = f"ms_{uuid.uuid4().hex[:8]}"
    warehouse = "file:" + str(tmp_path / "wh")
    with MetastoreClient(metastore_uri) as client:
        client.create_database(db, managed_location=warehouse)
        client.create_table(thrift_table(db, "events", f"{warehouse}/events"))
        made = Table(client, f"{db}.events")
        try:
            yield made
        finally:
            with MetastoreClient(metastore_uri) as cleanup:
                still_open = set(cleanup.get_open_txns().open_txns or ())
                for txn in made.txns.values():
                    if txn in still_open:
                        cleanup.abort_txn(txn)
                drop_database(cleanup, db)


def connection(monkeypatch, host: str, port: int, **fields) -> str:
    payload = {"conn_type": "hive_metastore", "host": host, "port": port, **fields}
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(payload))
    return CONN_ID


@pytest.fixture
def metastore_conn(metastore_uri: str, monkeypatch) -> str:
    """A ``hive_metastore`` connection to the real metastore, from the environment."""
    endpoint = urlsplit(metastore_uri)
    return connection(monkeypatch, endpoint.hostname, endpoint.port)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once closed


def first_event(trigger: AcidMetastoreWriteTrigger, within: float):
    """The trigger's one event, awaited at most ``within`` seconds (None: none came)."""

    async def scenario():
        try:
            return await asyncio.wait_for(trigger.run().__anext__(), timeout=within)
        except asyncio.TimeoutError:
            return None

    return asyncio.run(scenario())


# -- the library: which writes count ---------------------------------------------------------


def test_only_committed_writes_above_the_watermark_count(table, metastore_uri):
    one = table.committed()
    two = table.aborted()
    three = table.begin()  # left open
    now = committed_writes_since(metastore_uri, table.name, above_write_id=0)
    assert now.write_ids == (one,) == (1,)
    assert (two, three) == (2, 3)
    assert now.high_watermark == 3
    assert now.valid_write_ids == f"{table.name}:3:3:3:2"  # 3 open, 2 aborted
    assert not committed_writes_since(metastore_uri, table.name, above_write_id=1).found

    table.commit(three)
    later = committed_writes_since(table.client, table.name, above_write_id=1)
    assert later.write_ids == (3,)
    assert later.to_dict() == {
        "table": table.name,
        "watermark": 1,
        "write_ids": [3],
        "valid_write_ids": f"{table.name}:3:9223372036854775807::2",
        "high_watermark": 3,
        "snapshot_write_ids": None,
    }


def test_a_write_open_at_snapshot_time_that_commits_later_counts(table):
    table.committed()  # 1
    open_then = table.begin()  # 2
    table.aborted()  # 3
    snapshot_list = str(read_view(table.client, table.name).write_ids)
    assert snapshot_list == f"{table.name}:3:2:2:3"
    since = {"snapshot_write_ids": snapshot_list}
    assert committed_writes_since(table.client, table.name, **since).write_ids == ()

    table.commit(open_then)
    four = table.committed()
    table.begin()  # 5, open
    table.aborted()  # 6
    writes = committed_writes_since(table.client, table.name, **since)
    assert writes.write_ids == (open_then, four) == (2, 4)
    assert writes.watermark == 3 and writes.snapshot_write_ids == snapshot_list
    # A bare number (the list's high watermark) cannot tell that 2 was open then:
    assert committed_writes_since(table.client, table.name, above_write_id=3).write_ids == (4,)


def test_unknown_tables_and_lists_of_other_tables_are_errors(table, metastore_uri, tmp_path):
    db = table.name.split(".")[0]
    # The metastore answers an empty write-id list for a table that does not exist:
    assert str(read_view(table.client, f"{db}.typo").write_ids).startswith(f"{db}.typo:0:")
    with pytest.raises(TableNotFoundError, match=f"{db}.typo"):
        committed_writes_since(metastore_uri, f"{db}.typo")
    table.client.create_table(
        thrift_table(db, "plain", "file:" + str(tmp_path / "plain"), transactional=False)
    )
    with pytest.raises(NotTransactionalError, match=f"{db}.plain"):
        committed_writes_since(metastore_uri, f"{db}.plain")
    with pytest.raises(WriteIdListMismatchError, match="other.t"):
        committed_writes_since(
            metastore_uri, table.name, snapshot_write_ids="other.t:3:9223372036854775807::"
        )
    with pytest.raises(ValueError, match="not both"):
        committed_writes_since(
            metastore_uri, table.name, above_write_id=1, snapshot_write_ids=f"{table.name}:1:2::"
        )


# -- the sensor on the worker, and its watermark from the last snapshot ----------------------


def test_the_watermark_of_the_last_snapshot_is_its_write_id_list(
    table, metastore_uri, metastore_conn, tmp_path
):
    from airflow_provider_acid.engine.compaction import compact_table
    from airflow_provider_acid.metastore import open_table

    one = table.committed()
    open_then = table.begin()
    out = str(tmp_path / "out")
    snapshot = compact_table(open_table(table.client, table.name), out)  # an empty table
    assert snapshot.write_ids == f"{table.name}:2:2:2:"
    assert snapshot_watermark(out, table.name).write_ids == snapshot.write_ids
    with pytest.raises(WriteIdListMismatchError, match="not default.other"):
        snapshot_watermark(out, "default.other")

    sensor = AcidMetastoreWriteSensor(
        task_id="s", table=table.name, metastore_conn_id=metastore_conn, snapshot_uri=out
    )
    assert not sensor.poke({})  # write 2 is still open
    table.commit(open_then)
    done = sensor.poke({})
    assert done.is_done
    assert done.xcom_value == {
        "table": table.name,
        "metastore": metastore_uri,
        "watermark": 2,
        "write_ids": [open_then],
        "valid_write_ids": f"{table.name}:2:9223372036854775807::",
        "waited_in": "worker",
    }
    # Only snapshots committed before the limit count: none here, so every commit does.
    before_it = AcidMetastoreWriteSensor(
        task_id="b",
        table=table.name,
        metastore_conn_id=metastore_conn,
        snapshot_uri=out,
        snapshot_committed_before="2000-01-01T00:00:00+00:00",
    )
    assert before_it.poke({}).xcom_value["write_ids"] == [one, open_then]


def test_the_deferrable_sensor_defers_to_a_trigger_of_primitives_without_the_password(
    table, metastore_uri, monkeypatch
):
    endpoint = urlsplit(metastore_uri)
    conn_id = connection(monkeypatch, endpoint.hostname, endpoint.port, password="s3cret")
    table.committed()
    table.begin()  # open: not a reason to return
    table.aborted()
    sensor = AcidMetastoreWriteSensor(
        task_id="s",
        table=table.name,
        metastore_conn_id=conn_id,
        above_write_id="1",
        deferrable=True,
        poll_interval=5,
        timeout=60,
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})  # its look on the worker found nothing
    trigger = deferred.value.trigger
    assert isinstance(trigger, AcidMetastoreWriteTrigger)
    assert deferred.value.method_name == "execute_complete"
    assert deferred.value.timeout.total_seconds() == 60
    path, kwargs = trigger.serialize()
    assert path == "airflow_provider_acid.triggers.metastore.AcidMetastoreWriteTrigger"
    assert kwargs == {
        "table": table.name,
        "metastore_conn_id": conn_id,
        "above_write_id": 1,
        "snapshot_write_ids": None,
        "poll_interval": 5.0,
        "wait_on": "write_ids",
        "after_event_id": None,
    }
    assert json.loads(json.dumps(kwargs)) == kwargs  # primitives only
    assert "s3cret" not in json.dumps(kwargs)
    assert import_string(path)(**kwargs).serialize() == (path, kwargs)


@pytest.mark.parametrize("soft_fail", [True, False])
def test_a_deferral_that_times_out_skips_with_soft_fail_and_fails_without(
    table, metastore_conn, soft_fail
):
    """What the scheduler does when the trigger outlives the sensor's timeout (as for the
    delta sensor): the task resumes with Airflow's failure signal."""
    from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason
    from airflow.sdk.exceptions import AirflowSensorTimeout, AirflowSkipException

    table.begin()  # open, never committed
    sensor = AcidMetastoreWriteSensor(
        task_id="s",
        table=table.name,
        metastore_conn_id=metastore_conn,
        deferrable=True,
        poke_before_defer=False,
        timeout=2,
        soft_fail=soft_fail,
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    assert deferred.value.timeout.total_seconds() == 2
    assert deferred.value.trigger.above_write_id == 0
    expected = AirflowSkipException if soft_fail else AirflowSensorTimeout
    with pytest.raises(expected):
        sensor.resume_execution(
            TRIGGER_FAIL_REPR, {"error": TriggerFailureReason.TRIGGER_TIMEOUT}, context={}
        )


# -- under dag.test(): open and aborted writes never fire, a commit does, in the triggerer ---


def test_open_and_aborted_writes_do_not_fire_the_sensor_so_soft_fail_skips_it(
    airflow_db, table, metastore_conn, tmp_path
):
    from airflow.sdk import DAG

    watermark = table.committed()
    table.begin()  # open
    table.aborted()
    with DAG(dag_id="metastore_sensor_no_commit", schedule=None) as dag:
        AcidMetastoreWriteSensor(
            task_id="wait",
            table=table.name,
            metastore_conn_id=metastore_conn,
            above_write_id=watermark,
            poke_interval=0.3,
            timeout=1.5,
            soft_fail=True,
        )
    started = time.monotonic()
    run = register(dag, tmp_path).test()
    (ti,) = run.get_task_instances()
    assert ti.state == "skipped"
    assert time.monotonic() - started >= 1.5  # it looked until its timeout


def test_a_commit_fires_the_deferred_sensor_through_its_trigger(
    airflow_db, table, metastore_uri, metastore_conn, tmp_path
):
    from airflow.sdk import DAG

    watermark = table.committed()
    later = table.begin()  # open: committed while the trigger waits
    aborted = table.aborted()
    still_open = table.begin()
    with DAG(dag_id="metastore_sensor_deferred", schedule=None) as dag:
        AcidMetastoreWriteSensor(
            task_id="wait",
            table=table.name,
            metastore_conn_id=metastore_conn,
            above_write_id="{{ params.since }}",
            params={"since": watermark},
            deferrable=True,
            poll_interval=0.2,
            timeout=60,
        )
    delay = 1.5
    committer = threading.Timer(delay, table.commit, args=[later])
    started = time.monotonic()
    committer.start()
    try:
        run = register(dag, tmp_path).test()
    finally:
        committer.cancel()
        committer.join()
    elapsed = time.monotonic() - started
    (ti,) = run.get_task_instances()
    assert ti.state == "success"
    assert elapsed >= delay  # nothing fired before the commit
    result = xcom(run, "wait")
    assert result == {
        "table": table.name,
        "metastore": metastore_uri,
        "watermark": watermark,
        "write_ids": [later],
        "valid_write_ids": f"{table.name}:{still_open}:{still_open}:{still_open}:{aborted}",
        "waited_in": "triggerer",  # execute_complete, after the trigger's event
    }


# -- the trigger: keeps polling past open and aborted writes, never blocks the loop ----------


def test_the_trigger_keeps_polling_past_open_and_aborted_writes(table, metastore_conn):
    watermark = table.committed()
    pending = table.begin()
    table.aborted()
    trigger = AcidMetastoreWriteTrigger(table.name, metastore_conn, watermark, poll_interval=0.1)

    async def scenario():
        waiting = asyncio.ensure_future(trigger.run().__anext__())
        await asyncio.sleep(0.8)  # several polls
        assert not waiting.done()
        await asyncio.to_thread(table.commit, pending)
        return await asyncio.wait_for(waiting, timeout=10)

    event = asyncio.run(scenario())
    assert event.payload["status"] == "success"
    assert event.payload["write_ids"] == [pending]


class SlowProxy:
    """A TCP proxy to the metastore that holds each of its answers ``delay`` seconds: a slow
    network to a real metastore, run in threads of its own."""

    def __init__(self, target: tuple[str, int], delay: float) -> None:
        self.target, self.delay = target, delay
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.closing = False
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while True:
            client, _ = self.server.accept()
            if self.closing:
                client.close()
                return
            upstream = socket.create_connection(self.target)
            for src, dst, delay in ((client, upstream, 0.0), (upstream, client, self.delay)):
                thread = threading.Thread(target=self._pipe, args=(src, dst, delay), daemon=True)
                thread.start()
                self.threads.append(thread)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, delay: float) -> None:
        try:
            while data := src.recv(65536):
                time.sleep(delay)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.closing = True
        socket.create_connection(("127.0.0.1", self.port)).close()  # wakes accept() up
        self.server.close()
        for thread in self.threads:
            thread.join(timeout=5)


def test_a_poll_does_not_block_the_event_loop(table, metastore_uri, monkeypatch):
    endpoint = urlsplit(metastore_uri)
    proxy = SlowProxy((endpoint.hostname, endpoint.port), delay=0.25)
    conn_id = connection(monkeypatch, "127.0.0.1", proxy.port)
    new = table.committed()
    trigger = AcidMetastoreWriteTrigger(table.name, conn_id, 0, poll_interval=0.1)

    async def scenario():
        ticks: list[float] = []

        async def ticker():
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        ticking = asyncio.ensure_future(ticker())
        await asyncio.sleep(0.05)
        started = time.monotonic()
        event = await asyncio.wait_for(trigger.run().__anext__(), timeout=30)
        took = time.monotonic() - started
        ticking.cancel()
        during = [t for t in ticks if t >= started]
        gaps = [b - a for a, b in zip(during, during[1:], strict=False)]
        return event, took, len(during), max(gaps)

    try:
        event, took, ticked, longest_gap = asyncio.run(scenario())
    finally:
        proxy.close()
    assert event.payload["status"] == "success" and event.payload["write_ids"] == [new]
    assert took >= 0.75  # three Thrift calls, each answer held 0.25 s
    assert ticked >= took / 0.01 / 3  # the 10 ms ticker kept running meanwhile
    assert longest_gap < 0.2  # never blocked for a Thrift call's length


def test_a_refused_connection_is_an_error_event_naming_host_and_port(table, monkeypatch):
    port = closed_port()
    conn_id = connection(monkeypatch, "127.0.0.1", port)
    event = first_event(AcidMetastoreWriteTrigger(table.name, conn_id, 0, None, 0.1), 10)
    assert event is not None and event.payload["status"] == "error"
    assert "MetastoreConnectionError" in event.payload["message"]
    assert f"127.0.0.1:{port}" in event.payload["message"]

    sensor = AcidMetastoreWriteSensor(task_id="s", table=table.name, metastore_conn_id=conn_id)
    with pytest.raises(Exception, match=f"AcidMetastoreWriteSensor on {table.name}: .*{port}"):
        sensor.execute_complete({}, event.payload)
