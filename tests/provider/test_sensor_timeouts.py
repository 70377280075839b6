"""The delta sensor in reschedule mode under dag.test(): it times out, and soft_fail skips it.

(A deferred sensor's timeout is enforced by the scheduler, which dag.test() does not run; the
trigger path is covered in test_sensor_trigger.py and by `make e2e`.)
"""

from __future__ import annotations

import time

from test_sensor_trigger import write_folder
from test_snapshot_tasks import register

from airflow_provider_acid.sensors.acid import AcidDeltaSensor


def test_a_rescheduled_sensor_times_out_and_soft_fail_skips_it(airflow_db, tmp_path):
    from airflow.sdk import DAG

    table = tmp_path / "t"
    write_folder(table, "base_0000003")  # nothing above write 3 ever arrives
    with DAG(dag_id="acid_sensor_timeout", schedule=None) as dag:
        AcidDeltaSensor(
            task_id="rescheduled",
            table_uri=str(table),
            above_write_id=3,
            mode="reschedule",
            poke_interval=1,
            timeout=3,
            soft_fail=True,
        )

    started = time.monotonic()
    run = register(dag, tmp_path).test()
    (ti,) = run.get_task_instances()
    assert ti.state == "skipped"
    assert ti.try_number == 1  # rescheduled pokes are one try, not retries
    assert time.monotonic() - started >= 3  # it waited for its timeout
