"""The delta sensor and its trigger on a table on the Kerberos HDFS, the namenodes and the
keytab in an Airflow ``acid`` connection: the sensor defers, and the trigger wakes when a new
delta is written to HDFS."""

from __future__ import annotations

import asyncio
import json

import pytest
from airflow.sdk.exceptions import TaskDeferred

from airflow_provider_acid.acid.hdfs import HdfsFileSystem
from airflow_provider_acid.hooks.acid import AcidHook
from airflow_provider_acid.sensors.acid import AcidDeltaSensor
from airflow_provider_acid.testing import AcidTableWriter
from airflow_provider_acid.triggers.acid import AcidDeltaTrigger

CONN_ID = "acid_hdfs"


@pytest.fixture
def hdfs_conn(kdc, hdfs_kerberos, monkeypatch):
    """An ``acid`` connection naming the namenodes, SPNEGO and the keytab; no HDFS setting in
    the environment, so that only the connection can make hdfs:// work."""
    for name in ("ACID_HDFS_NAMENODES", "ACID_HDFS_KERBEROS", "ACID_KERBEROS_PRINCIPAL",
                 "ACID_KERBEROS_KEYTAB"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    HdfsFileSystem.clear_instance_cache()
    extra = {
        "hdfs_namenodes": hdfs_kerberos.namenodes,
        "hdfs_kerberos": True,
        "kerberos_principal": kdc.principal,
        "kerberos_keytab": kdc.keytab,
    }
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps({"conn_type": "acid", "extra": extra})
    )
    return CONN_ID


def test_the_delta_sensor_defers_and_wakes_on_a_new_delta_on_hdfs(hdfs_conn, hdfs_kerberos):
    hook = AcidHook(hdfs_conn)
    table_uri = hdfs_kerberos.folder() + "/events"
    fs, path = hook.get_filesystem(table_uri)
    writer = AcidTableWriter(table_uri, [("id", "bigint")], filesystem=fs)
    writer.insert([{"id": 1}])  # delta_1_1 on HDFS
    sensor = AcidDeltaSensor(
        task_id="wait", table_uri=table_uri, above_write_id=1, acid_conn_id=hdfs_conn,
        deferrable=True, poll_interval=1, timeout=120,
    )  # fmt: skip
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})  # nothing above write 1 yet: off to the triggerer
    trigger = deferred.value.trigger
    assert isinstance(trigger, AcidDeltaTrigger)
    path_, kwargs = trigger.serialize()
    assert json.loads(json.dumps(kwargs)) == kwargs and "keytab" not in json.dumps(kwargs)

    async def scenario():
        waiting = asyncio.ensure_future(trigger.run().__anext__())
        await asyncio.sleep(3)
        assert not waiting.done(), waiting.result().payload
        await asyncio.to_thread(writer.insert, [{"id": 2}])  # delta_2_2 written to HDFS
        return await asyncio.wait_for(waiting, timeout=60)

    event = asyncio.run(scenario())
    assert event.payload["status"] == "success", event.payload
    assert [f["max_write_id"] for f in event.payload["folders"]] == [2]
    result = sensor.execute_complete({}, event.payload, **deferred.value.kwargs)
    assert result["max_write_id"] == 2 and result["waited_in"] == "triggerer"
    assert fs.exists(f"{path}/{event.payload['folders'][0]['folder']}")
