"""acid_e2e_probe: the small DAG that `scripts/e2e.py --probe` runs to check its own machinery.

Not a test module (pytest collects only ``test_*.py``) and not an example: the e2e scripts point
Airflow's dags folder here to prove, before the real ``acid_snapshot_on_demand`` exists, that

* a deferrable ``AcidDeltaSensor`` really waits in the triggerer: the table it watches has no
  folder above ``above_write_id`` when the run starts, and the script writes a delete delta only
  once the REST API shows the task ``deferred`` on a triggerer;
* a task reads the sensor's XCom (``check_sensor_result``);
* a mapped task (``work``, one instance per item) is spread over the executor's workers: each
  instance returns the hostname Airflow recorded for it;
* a last task writes a result that depends only on the items (``result.json`` under
  ``output_uri``), so two runs can be compared whatever worker ran what.
"""

from __future__ import annotations

import json
import time
from datetime import datetime

from airflow.sdk import DAG, Param, get_current_context, task

from airflow_provider_acid.sensors.acid import AcidDeltaSensor

with DAG(
    dag_id="acid_e2e_probe",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["acid", "e2e"],
    params={
        "table_uri": Param("", type="string", description="Hive ACID table to watch"),
        "above_write_id": Param(0, type="integer", description="wait for writes above this"),
        "output_uri": Param("", type="string", description="folder for result.json"),
        "items": Param(8, type="integer", minimum=1, maximum=64),
        "item_seconds": Param(1.0, type="number", minimum=0),
    },
) as dag:
    wait_for_delete_delta = AcidDeltaSensor(
        task_id="wait_for_delete_delta",
        table_uri="{{ params.table_uri }}",
        above_write_id="{{ params.above_write_id }}",
        kinds=["delete_delta"],
        deferrable=True,
        poll_interval=2,
        timeout=600,
    )

    @task
    def check_sensor_result(found: dict) -> list[int]:
        """Reads the sensor's XCom: at least one delete delta above the watermark."""
        params = get_current_context()["params"]
        above = int(params["above_write_id"])
        folders = [f for f in found["folders"] if f["kind"] == "delete_delta"]
        if not folders or min(f["min_write_id"] for f in folders) <= above:
            raise ValueError(f"expected delete deltas above write {above}, got {found!r}")
        print(f"sensor found {[f['folder'] for f in folders]} (max write {found['max_write_id']})")
        return list(range(int(params["items"])))

    @task
    def work(item: int) -> dict:
        """One mapped instance: some work, then where Airflow says it ran."""
        context = get_current_context()
        time.sleep(float(context["params"]["item_seconds"]))
        return {"item": item, "square": item * item, "hostname": context["ti"].hostname}

    @task
    def write_result(results: list[dict]) -> str:
        import fsspec

        params = get_current_context()["params"]
        squares = sorted(r["square"] for r in results)
        fs, root = fsspec.core.url_to_fs(params["output_uri"])
        fs.makedirs(root, exist_ok=True)
        path = f"{root.rstrip('/')}/result.json"
        with fs.open(path, "w") as out:
            json.dump({"items": len(squares), "squares": squares}, out)
        print(f"wrote {path}; workers: {sorted({r['hostname'] for r in results})}")
        return path

    write_result(work.expand(item=check_sensor_result(wait_for_delete_delta.output)))
