"""The metastore sensor's ``wait_on="notifications"`` against a real metastore whose notification
log is on (``scripts/metastore.py start --notifications``: the project's listener, which writes
the log with Hive 4.0.1's own message builder, as DbNotificationListener does).

Writes are real transactions (``open_txns``, ``allocate_table_write_ids``, ``commit_txn``,
``abort_txn``) and a real ``alter_table``; the events are what the metastore wrote.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from airflow.sdk.exceptions import AirflowException, TaskDeferred
from airflow.sdk.module_loading import import_string
from metastore_fixtures import EVENT_TTL_SECONDS
from test_example_dags import xcom
from test_metastore_sensor import Table, connection, first_event, thrift_table
from test_snapshot_tasks import register

from airflow_provider_acid.metastore import (
    MetastoreClient,
    NotificationEventsLostError,
    NotificationLogError,
)
from airflow_provider_acid.metastore.notifications import (
    TableLogReader,
    current_event_id,
    events_after,
    table_log_since,
)
from airflow_provider_acid.sensors import metastore as sensor_module
from airflow_provider_acid.sensors.metastore import AcidMetastoreWriteSensor
from airflow_provider_acid.testing.metastore_tables import drop_database
from airflow_provider_acid.triggers import metastore as trigger_module
from airflow_provider_acid.triggers.metastore import AcidMetastoreWriteTrigger


@contextmanager
def two_tables(uri: str, tmp_path: Path) -> Iterator[tuple[Table, Table]]:
    """Two ACID tables, ``ms_<8 hex>.events`` and ``.others``, in the metastore at ``uri``."""
    db = f"ms_{uuid.uuid4().hex[:8]}"
    warehouse = "file:" + str(tmp_path / "wh")
    with MetastoreClient(uri) as client:
        client.create_database(db, managed_location=warehouse)
        made = []
        for name in ("events", "others"):
            client.create_table(thrift_table(db, name, f"{warehouse}/{name}"))
            made.append(Table(client, f"{db}.{name}"))
        try:
            yield made[0], made[1]
        finally:
            with MetastoreClient(uri) as cleanup:
                still_open = set(cleanup.get_open_txns().open_txns or ())
                for table in made:
                    for txn in table.txns.values():
                        if txn in still_open:
                            cleanup.abort_txn(txn)
                drop_database(cleanup, db)


@pytest.fixture
def tables(notifications_metastore_uri: str, tmp_path: Path) -> Iterator[tuple[Table, Table]]:
    """Two ACID tables, ``ms_<8 hex>.events`` and ``.others``, in the log's metastore."""
    with two_tables(notifications_metastore_uri, tmp_path) as made:
        yield made


@pytest.fixture
def log_conn(notifications_metastore_uri: str, monkeypatch) -> str:
    endpoint = urlsplit(notifications_metastore_uri)
    return connection(monkeypatch, endpoint.hostname, endpoint.port)


def add_column(table: Table) -> None:
    from hive_metastore import ttypes as t

    db, name = table.name.split(".")
    thrift = table.client.get_table(table.name)
    thrift.sd.cols.append(t.FieldSchema("note", "string", None))
    table.client._call("alter_table", db, name, thrift)


# -- the log and the library -----------------------------------------------------------------


def test_the_log_holds_the_tables_events_as_hive_writes_them(tables):
    events, others = tables
    client = events.client
    cursor = current_event_id(client)
    one = events.committed()
    other = others.committed()
    two = events.aborted()
    add_column(events)
    db = events.name.split(".")[0]
    folder = client.get_table(events.name).sd.location.rsplit("/", 1)[0]
    client.create_table(thrift_table(db, "third", f"{folder}/third"))
    (txn_one, txn_other, txn_two) = (events.txns[one], others.txns[other], events.txns[two])

    seen = list(events_after(client, cursor, max_events=2))  # paged: two a call
    assert [e.event_id for e in seen] == list(range(cursor + 1, cursor + 1 + len(seen)))
    kinds = [(e.event_type, e.table) for e in seen]
    assert kinds == [
        ("OPEN_TXN", None),
        ("ALLOC_WRITE_ID_EVENT", "events"),
        ("COMMIT_TXN", None),
        ("OPEN_TXN", None),
        ("ALLOC_WRITE_ID_EVENT", "others"),
        ("COMMIT_TXN", None),
        ("OPEN_TXN", None),
        ("ALLOC_WRITE_ID_EVENT", "events"),
        ("ABORT_TXN", None),
        ("ALTER_TABLE", "events"),
        ("CREATE_TABLE", "third"),
    ]
    assert {e.db for e in seen if e.table} == {db}
    assert seen[10].message["tableType"] == "MANAGED_TABLE"
    alloc = seen[1].message
    assert (alloc["dbName"], alloc["tableName"]) == (db, "events")
    assert (alloc["txnIdList"], alloc["writeIdList"]) == ([txn_one], [one])
    # Hive 4.0.1's COMMIT_TXN message names its transaction only: no table, no write ids
    assert seen[2].message["txnid"] == txn_one and seen[2].message["writeIds"] is None
    assert seen[5].message["txnid"] == txn_other
    assert seen[8].message["txnid"] == txn_two
    assert seen[8].message["dbsUpdated"] == [db]
    before = json.loads(seen[9].message["tableObjBeforeJson"])
    after = json.loads(seen[9].message["tableObjAfterJson"])
    assert len(json.dumps(after)) > len(json.dumps(before))  # the new column
    assert '"note"' in seen[9].message["tableObjAfterJson"]

    log = table_log_since(client, events.name, cursor)
    assert log.committed_write_ids == (one,) == (1,)
    assert log.aborted_write_ids == (two,) == (2,)
    assert log.unmatched_commits == ()
    assert log.alter_event_ids == (seen[9].event_id,)
    assert log.last_event_id == seen[-1].event_id == current_event_id(client)
    assert table_log_since(client, others.name, cursor).committed_write_ids == (other,)
    # From a cursor after its allocation, the commit cannot be mapped from the log alone:
    late = table_log_since(client, events.name, seen[1].event_id)
    assert late.committed_write_ids == () and late.unmatched_commits == (txn_one,)


def test_a_reader_moves_its_cursor_and_keeps_allocations_between_reads(tables):
    events, _ = tables
    client = events.client
    reader = TableLogReader(events.name, current_event_id(client))
    pending = events.begin()
    first = reader.read(client)
    assert first.committed_write_ids == () and first.last_event_id == reader.after_event_id
    events.commit(pending)
    second = reader.read(client)
    assert second.after_event_id == first.last_event_id
    assert second.committed_write_ids == (pending,)  # allocated in the first read
    assert reader.read(client).committed_write_ids == ()  # nothing new


def test_a_metastore_without_the_log_is_an_error_naming_it(metastore_uri, tables, monkeypatch):
    with MetastoreClient(metastore_uri) as client:
        with pytest.raises(NotificationLogError, match=f"{metastore_uri}.* is empty"):
            current_event_id(client)
    endpoint = urlsplit(metastore_uri)
    conn_id = connection(monkeypatch, endpoint.hostname, endpoint.port)
    sensor = AcidMetastoreWriteSensor(
        task_id="s", table="default.t", metastore_conn_id=conn_id, wait_on="notifications"
    )
    with pytest.raises(NotificationLogError, match=str(endpoint.port)):
        sensor.poke({})
    with pytest.raises(ValueError, match="wait_on"):
        AcidMetastoreWriteSensor(task_id="x", table="default.t", wait_on="log")


# -- the trigger ----------------------------------------------------------------------------


def test_the_trigger_fires_on_a_commit_to_its_table_not_another_tables_nor_an_abort(
    tables, log_conn, monkeypatch
):
    events, others = tables
    watermark = events.committed()
    cursor = current_event_id(events.client)
    looks: list[str] = []
    real = trigger_module.committed_writes_since

    def counted(*args, **kwargs):  # the real look, counted
        looks.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(trigger_module, "committed_writes_since", counted)
    trigger = AcidMetastoreWriteTrigger(
        events.name, log_conn, watermark, poll_interval=0.1, wait_on="notifications",
        after_event_id=cursor,
    )  # fmt: skip

    async def scenario():
        waiting = asyncio.ensure_future(trigger.run().__anext__())
        await asyncio.to_thread(others.committed)
        await asyncio.to_thread(events.aborted)
        pending = await asyncio.to_thread(events.begin)
        await asyncio.sleep(1.0)  # several reads of the log
        assert not waiting.done()
        assert looks == [events.name]  # its look at the start; neither woke it up again
        await asyncio.to_thread(events.commit, pending)
        return pending, await asyncio.wait_for(waiting, timeout=10)

    pending, event = asyncio.run(scenario())
    payload = event.payload
    assert payload["status"] == "success", payload
    assert payload["write_ids"] == [pending] and payload["watermark"] == watermark
    assert looks == [events.name] * 2  # and one after the commit
    assert payload["last_event_id"] == current_event_id(events.client)
    assert payload["alter_event_ids"] == []


def test_the_cursor_resumes_after_a_triggerer_restart(tables, log_conn):
    events, others = tables
    cursor = current_event_id(events.client)
    trigger = AcidMetastoreWriteTrigger(
        events.name, log_conn, 0, poll_interval=0.1, wait_on="notifications",
        after_event_id=cursor,
    )  # fmt: skip
    path, kwargs = trigger.serialize()
    assert kwargs["wait_on"] == "notifications" and kwargs["after_event_id"] == cursor
    assert json.loads(json.dumps(kwargs)) == kwargs  # primitives only
    assert first_event(trigger, 0.5) is None  # nothing yet
    # The triggerer stops; meanwhile a commit, and the table's schema changes.
    written = events.committed()
    add_column(events)
    others.committed()
    again = import_string(path)(**kwargs)  # what a restarted triggerer runs
    event = first_event(again, 10)
    assert event is not None and event.payload["status"] == "success", event
    assert event.payload["write_ids"] == [written]
    assert len(event.payload["alter_event_ids"]) == 1
    # From the cursor it returned, with the watermark moved to that write, nothing fires:
    resumed = dict(kwargs, after_event_id=event.payload["last_event_id"], above_write_id=written)
    assert first_event(import_string(path)(**resumed), 0.5) is None


def test_a_write_open_before_the_cursor_is_confirmed_by_the_write_id_list(tables, log_conn):
    events, _ = tables
    open_then = events.begin()  # allocated before the cursor
    cursor = current_event_id(events.client)
    trigger = AcidMetastoreWriteTrigger(
        events.name, log_conn, 0, poll_interval=0.1, wait_on="notifications",
        after_event_id=cursor,
    )  # fmt: skip
    events.commit(open_then)
    event = first_event(trigger, 10)
    assert event is not None and event.payload["write_ids"] == [open_then]


# -- the sensor -----------------------------------------------------------------------------


def test_the_sensor_defers_with_the_logs_cursor_and_pokes_on_the_log(tables, log_conn):
    events, others = tables
    watermark = events.committed()
    sensor = AcidMetastoreWriteSensor(
        task_id="s", table=events.name, metastore_conn_id=log_conn, above_write_id=watermark,
        wait_on="notifications", deferrable=True, poll_interval=1,
    )  # fmt: skip
    newest = current_event_id(events.client)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    kwargs = deferred.value.trigger.serialize()[1]
    assert kwargs["wait_on"] == "notifications"
    assert kwargs["after_event_id"] == newest and kwargs["above_write_id"] == watermark

    poking = AcidMetastoreWriteSensor(
        task_id="p", table=events.name, metastore_conn_id=log_conn, above_write_id=watermark,
        wait_on="notifications",
    )  # fmt: skip
    assert not poking.poke({})  # the first look: the write-id list, and the cursor
    others.committed()
    events.aborted()
    assert not poking.poke({})
    written = events.committed()
    done = poking.poke({})
    assert done.is_done
    assert done.xcom_value["write_ids"] == [written]
    assert done.xcom_value["last_event_id"] == current_event_id(events.client)
    # What the trigger's event gives back to the deferred sensor keeps the cursor:
    event = dict(done.xcom_value, status="success", last_event_id=7)
    resumed = sensor.execute_complete({}, event)
    assert resumed["waited_in"] == "triggerer" and resumed["last_event_id"] == 7


def test_under_dag_test_the_deferred_sensor_fires_in_the_triggerer_on_the_log(
    airflow_db, tables, notifications_metastore_uri, log_conn, tmp_path, monkeypatch
):
    from airflow.sdk import DAG

    events, others = tables
    watermark = events.committed()
    pending = events.begin()  # committed while the trigger waits
    started_looking = threading.Event()
    real = trigger_module.committed_writes_since

    def look(*args, **kwargs):  # the trigger's real look; the first says it runs
        started_looking.set()
        return real(*args, **kwargs)

    monkeypatch.setattr(trigger_module, "committed_writes_since", look)
    with DAG(dag_id="metastore_sensor_notifications", schedule=None) as dag:
        AcidMetastoreWriteSensor(
            task_id="wait",
            table=events.name,
            metastore_conn_id=log_conn,
            above_write_id=watermark,
            wait_on="notifications",
            deferrable=True,
            poll_interval=0.2,
            timeout=60,
        )

    committed_at: list[float] = []

    def later() -> None:  # once the trigger runs: another table's commit, an abort, then ours
        if not started_looking.wait(60):
            return
        others.committed()
        events.aborted()
        time.sleep(1.0)  # several reads of the log
        committed_at.append(time.monotonic())
        events.commit(pending)

    writer = threading.Thread(target=later, daemon=True)
    writer.start()
    run = register(dag, tmp_path).test()
    finished = time.monotonic()
    started_looking.set()
    writer.join()
    (ti,) = run.get_task_instances()
    assert ti.state == "success"
    assert committed_at and finished >= committed_at[0]  # not before the commit
    result = xcom(run, "wait")
    assert result["waited_in"] == "triggerer"
    assert result["write_ids"] == [pending] and result["watermark"] == watermark
    assert result["metastore"] == notifications_metastore_uri
    assert result["last_event_id"] == current_event_id(events.client)


# -- the cursor between looks, and a cursor the log has left behind -------------------------


def test_a_reader_resumed_from_its_state_keeps_its_cursor_and_allocations(tables):
    events, others = tables
    client = events.client
    reader = TableLogReader(events.name, current_event_id(client))
    pending, other_pending = events.begin(), others.begin()
    reader.read(client)  # both allocations read; neither committed yet
    state = json.loads(json.dumps(reader.state()))  # as the task state store keeps it
    assert state["after_event_id"] == current_event_id(client)
    assert state["write_ids"] == {str(events.txns[pending]): pending}
    assert state["other_txns"] == [others.txns[other_pending]]
    events.commit(pending)
    others.commit(other_pending)
    log = TableLogReader.resume(state).read(client)
    assert log.committed_write_ids == (pending,) and log.unmatched_commits == ()
    # Without the kept allocations both commits are unmatched (a look at the write-id list).
    fresh = TableLogReader(events.name, state["after_event_id"]).read(client)
    assert fresh.committed_write_ids == ()
    assert fresh.unmatched_commits == (events.txns[pending], others.txns[other_pending])


def test_a_cursor_beyond_the_logs_newest_event_is_an_error(tables):
    events, _ = tables
    newest = current_event_id(events.client)
    reader = TableLogReader(events.name, newest + 1000)
    with pytest.raises(NotificationEventsLostError, match=f"newest event is {newest}") as lost:
        reader.read(events.client)
    assert events.name in str(lost.value) and f"cursor {newest + 1000}" in str(lost.value)


def test_a_cursor_the_logs_cleaner_has_left_behind_is_an_error_naming_table_and_cursor(
    expiring_log_metastore_uri, tmp_path, monkeypatch
):
    endpoint = urlsplit(expiring_log_metastore_uri)
    conn_id = connection(monkeypatch, endpoint.hostname, endpoint.port)
    with two_tables(expiring_log_metastore_uri, tmp_path) as (events, others):
        client = events.client
        cursor = current_event_id(client)
        reader = TableLogReader(events.name, cursor)
        written = events.committed()  # OPEN_TXN, ALLOC_WRITE_ID_EVENT, COMMIT_TXN
        newest = current_event_id(client)
        assert newest == cursor + 3
        # The listener's cleaner (Hive's RawStore.cleanNotificationEvents) removes them after
        # EVENT_TTL_SECONDS; the log's newest id stays.
        deadline = time.monotonic() + EVENT_TTL_SECONDS + 30
        while client.next_notifications(cursor, 10) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert client.next_notifications(cursor, 10) == []
        assert current_event_id(client) == newest

        with pytest.raises(NotificationEventsLostError) as lost:
            reader.read(client)  # nothing after the cursor any more, and nothing newer
        message = str(lost.value)
        assert f"cursor {cursor} (of {events.name})" in message
        assert f"events {cursor + 1} to {newest} are no longer in it" in message
        assert "after_event_id" in message and "timetolive" in message
        assert reader.after_event_id == cursor  # an error leaves the reader as it was

        others.committed()  # newer events, after the removed ones
        with pytest.raises(NotificationEventsLostError, match=f"events {cursor + 1} to "):
            reader.read(client)

        # The trigger reports it (the deferred sensor then fails the task with it), not a
        # wait that never ends; the write-id list would have shown the write.
        trigger = AcidMetastoreWriteTrigger(
            events.name, conn_id, written - 1, poll_interval=0.1, wait_on="notifications",
            after_event_id=cursor,
        )  # fmt: skip
        event = first_event(trigger, 10)
        assert event is not None and event.payload["status"] == "error", event
        assert "NotificationEventsLostError" in event.payload["message"]
        assert f"cursor {cursor} (of {events.name})" in event.payload["message"]


def test_a_rescheduled_sensor_without_the_task_state_store_refuses_the_mode(tables, log_conn):
    events, _ = tables
    sensor = AcidMetastoreWriteSensor(
        task_id="r", table=events.name, metastore_conn_id=log_conn, wait_on="notifications",
        mode="reschedule",
    )  # fmt: skip
    with pytest.raises(AirflowException, match="mode='reschedule'.*task state store") as refused:
        sensor.poke({})  # what Airflow 3.2 gives: no task_state_store in the context
    assert events.name in str(refused.value) and "deferrable=True" in str(refused.value)


@pytest.mark.parametrize("mode", ["reschedule", "poke"])
def test_under_dag_test_the_sensor_reads_the_log_from_its_cursor_between_pokes(
    mode, airflow_db, tables, notifications_metastore_uri, log_conn, tmp_path, monkeypatch
):
    """Each reschedule runs a new copy of the operator, with the task's XComs cleared: the
    cursor and the allocations read survive in Airflow's task state store (``poke`` mode keeps
    them in the running task). The write-id list is looked at twice: at the first poke and
    after the table's commit, never for another table's commit or an abort."""
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.sdk import DAG
    from airflow.utils.session import create_session

    events, others = tables
    watermark = events.committed()  # before the sensor: at the watermark, so it never counts
    looks: list[str] = []
    reads: list = []
    real_look, real_read = sensor_module.committed_writes_since, TableLogReader.read

    def look(*args, **kwargs):  # the sensor's real look at the write-id list, counted
        looks.append(args[1])
        return real_look(*args, **kwargs)

    def read(self, client):  # the sensor's real read of the log, kept
        log = real_read(self, client)
        reads.append(log)
        return log

    monkeypatch.setattr(sensor_module, "committed_writes_since", look)
    monkeypatch.setattr(TableLogReader, "read", read)
    dag_id = f"metastore_sensor_log_{mode}"
    with DAG(dag_id=dag_id, schedule=None) as dag:
        AcidMetastoreWriteSensor(
            task_id="wait", table=events.name, metastore_conn_id=log_conn,
            above_write_id=watermark, wait_on="notifications", mode=mode, poke_interval=1,
            timeout=120,
        )  # fmt: skip

    def read_past(event_id: int, reads_after: int = 1) -> bool:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if sum(log.last_event_id >= event_id for log in reads) >= reads_after:
                return True
            time.sleep(0.1)
        return False

    kept: list = []
    pending: list[int] = []

    def later() -> None:  # after the first poke: another table's commit, an abort, then ours
        if not read_past(0):
            return
        others.committed()
        events.aborted()
        pending.append(events.begin())  # allocated in one poke's read, committed in a later
        if not read_past(current_event_id(events.client), reads_after=2):
            return
        with create_session() as session:
            kept.extend(session.query(TaskStateStoreModel.value).filter_by(dag_id=dag_id))
        events.commit(pending[0])

    writer = threading.Thread(target=later, daemon=True)
    writer.start()
    run = register(dag, tmp_path).test()
    writer.join()
    (ti,) = run.get_task_instances()
    assert ti.state == "success"
    result = xcom(run, "wait")
    assert result["write_ids"] == pending and result["watermark"] == watermark
    assert result["waited_in"] == "worker"
    assert result["last_event_id"] == current_event_id(events.client)
    assert looks == [events.name] * 2  # the first poke, and after the commit: not in between
    assert len(reads) >= 3
    assert all(not log.committed_write_ids and not log.unmatched_commits for log in reads[:-1])
    assert any(log.aborted_write_ids for log in reads[:-1])
    # The commit is mapped through an allocation read at an earlier poke: kept between pokes.
    assert reads[-1].committed_write_ids == tuple(pending) and reads[-1].unmatched_commits == ()
    if mode == "reschedule":
        (value,) = (json.loads(row.value) for row in kept)
        assert value["try_number"] == ti.try_number
        assert value["reader"]["write_ids"] == {str(events.txns[pending[0]]): pending[0]}
        with create_session() as session:  # and gone once the sensor found the write
            assert session.query(TaskStateStoreModel).filter_by(dag_id=dag_id).count() == 0
    else:
        assert kept == []  # poke mode keeps it in the task, not in the store
