"""The delta sensor and its trigger on real tables in temp folders."""

import asyncio
import json
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowException, TaskDeferred
from airflow.sdk.module_loading import import_string

from airflow_provider_acid.sensors.acid import AcidDeltaSensor
from airflow_provider_acid.triggers.acid import AcidDeltaTrigger


def write_folder(table: Path, folder: str, bucket: int = 0, size: int = 16) -> None:
    path = table / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "_orc_acid_version").write_text("2")
    (path / f"bucket_{bucket:05d}").write_bytes(b"o" * size)


@pytest.fixture
def table(tmp_path):
    table = tmp_path / "t"
    write_folder(table, "base_0000003")
    write_folder(table, "dt=1/delta_0000002_0000002_0000")
    return table


def test_trigger_serialises_to_primitives_and_back(table):
    trigger = AcidDeltaTrigger(str(table), 3, ["delete_delta"], ["dt=1"], 0.5, "my_conn")
    path, kwargs = trigger.serialize()
    assert json.loads(json.dumps(kwargs)) == kwargs  # primitives only
    again = import_string(path)(**kwargs)
    assert again.serialize() == (path, kwargs)
    assert path == "airflow_provider_acid.triggers.acid.AcidDeltaTrigger"


def test_trigger_fires_when_a_folder_appears_later(table):
    trigger = AcidDeltaTrigger(str(table), 3, ["delta", "delete_delta"], poll_interval=0.05)

    async def scenario():
        waiting = asyncio.ensure_future(trigger.run().__anext__())
        await asyncio.sleep(0.3)
        assert not waiting.done()  # write 2 is below the watermark: nothing yet
        write_folder(table, "dt=1/delete_delta_0000004_0000004_0000")
        return await asyncio.wait_for(waiting, timeout=10)

    event = asyncio.run(scenario())
    assert event.payload == {
        "status": "success",
        "folders": [
            {
                "partition": "dt=1",
                "folder": "delete_delta_0000004_0000004_0000",
                "kind": "delete_delta",
                "min_write_id": 4,
                "max_write_id": 4,
            }
        ],
    }


def test_trigger_reports_errors_as_an_event(tmp_path):
    trigger = AcidDeltaTrigger(str(tmp_path / "missing"), 0, poll_interval=0.05)
    event = asyncio.run(trigger.run().__anext__())
    assert event.payload["status"] == "error"
    assert "missing" in event.payload["message"]


def test_sensor_pokes_and_filters_by_kind_and_partition(table):
    write_folder(table, "dt=1/delta_0000005_0000005_0000")
    write_folder(table, "dt=2/delete_delta_0000006_0000006_0000")
    sensor = AcidDeltaSensor(task_id="s", table_uri=str(table), above_write_id=3)
    result = sensor.poke({})
    assert result.is_done
    assert [f["folder"] for f in result.xcom_value["folders"]] == [
        "delta_0000005_0000005_0000",
        "delete_delta_0000006_0000006_0000",
    ]
    assert result.xcom_value["max_write_id"] == 6
    only_deletes = AcidDeltaSensor(
        task_id="d",
        table_uri=str(table),
        above_write_id="3",
        kinds=["delete_delta"],
        partitions=["dt=1"],
    )
    assert not only_deletes.poke({}).is_done


def test_deferrable_sensor_defers_to_the_trigger(table):
    sensor = AcidDeltaSensor(
        task_id="s",
        table_uri=str(table),
        above_write_id=3,
        deferrable=True,
        poll_interval=5,
        timeout=60,
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    trigger = deferred.value.trigger
    assert isinstance(trigger, AcidDeltaTrigger)
    assert trigger.above_write_id == 3 and trigger.poll_interval == 5
    assert deferred.value.method_name == "execute_complete"
    assert deferred.value.kwargs == {"watermark": 3}


def test_deferrable_sensor_returns_at_once_when_deltas_are_there(table):
    sensor = AcidDeltaSensor(task_id="s", table_uri=str(table), above_write_id=1, deferrable=True)
    assert sensor.execute({})["folders"][0]["folder"] == "delta_0000002_0000002_0000"


def test_execute_complete_on_success_and_error_events(table):
    sensor = AcidDeltaSensor(task_id="s", table_uri=str(table), deferrable=True)
    folders = [
        {
            "partition": "",
            "folder": "delta_7_7",
            "kind": "delta",
            "min_write_id": 7,
            "max_write_id": 7,
        }
    ]
    result = sensor.execute_complete({}, {"status": "success", "folders": folders}, watermark=3)
    assert result == {
        "table_uri": str(table),
        "waited_in": "triggerer",
        "watermark": 3,
        "max_write_id": 7,
        "folders": folders,
    }
    with pytest.raises(AirflowException, match="TableLocationError: gone"):
        sensor.execute_complete({}, {"status": "error", "message": "TableLocationError: gone"})


def test_bad_arguments_fail_with_their_names():
    with pytest.raises(ValueError, match="'deltas'"):
        AcidDeltaSensor(task_id="s", table_uri="/x", kinds=["deltas"])
    sensor = AcidDeltaSensor(task_id="s", table_uri="/x", above_write_id="yesterday")
    with pytest.raises(ValueError, match="above_write_id.*'yesterday'"):
        sensor.poke({})


@pytest.mark.parametrize("soft_fail", [True, False])
def test_a_deferral_that_times_out_skips_with_soft_fail_and_fails_without(table, soft_fail):
    """What the scheduler does when the trigger outlives the sensor's timeout: it resumes the
    task with Airflow's failure signal, which the task runner hands to resume_execution."""
    from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason
    from airflow.sdk.exceptions import AirflowSensorTimeout, AirflowSkipException

    sensor = AcidDeltaSensor(
        task_id="s",
        table_uri=str(table),
        above_write_id=3,
        deferrable=True,
        timeout=2,
        soft_fail=soft_fail,
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    assert deferred.value.timeout.total_seconds() == 2  # the scheduler's deadline
    expected = AirflowSkipException if soft_fail else AirflowSensorTimeout
    with pytest.raises(expected):
        sensor.resume_execution(
            TRIGGER_FAIL_REPR, {"error": TriggerFailureReason.TRIGGER_TIMEOUT}, context={}
        )
