"""`make e2e`'s scheduled-DAG part: ``acid_snapshot_materialisation`` triggered through the
REST API with ``"logical_date": null`` (as the UI's trigger form does), so its run has no data
interval: the sensor's watermark template must render without one, the run must succeed and
commit the table's rows, and each mapped compaction task must be named by its slice key
(``rendered_map_index``).

The DAG is scheduled (``@daily``): unpausing it makes the scheduler create the latest
interval's run too. The environment :func:`scheduled_env` gives points that run at the demo
table and an output of its own, and the triggered run must succeed whichever goes first.
"""

from __future__ import annotations

from pathlib import Path

from _e2e_common import (
    AirflowApi,
    DemoTable,
    E2EError,
    Services,
    check_snapshot_rows,
    log,
    run_dag,
    wait_for_dag,
)

SCHEDULED_DAG_ID = "acid_snapshot_materialisation"


def scheduled_env(workdir: Path, table: DemoTable) -> dict[str, str]:
    """The DAG file's settings: the demo table, an output for the scheduled run, a short
    sensor timeout (a scheduled run that waits must not hold the triggered one for hours)."""
    return {
        "ACID_TABLE_URI": table.uri,
        "ACID_OUTPUT_URI": str(workdir / "output" / "scheduled"),
        "ACID_SENSOR_TIMEOUT": "120",
    }


def run_without_logical_date(
    api: AirflowApi, services: Services, table: DemoTable, output_uri: str, timeout: float
) -> None:
    wait_for_dag(api, services, SCHEDULED_DAG_ID, timeout=180)
    api.unpause(SCHEDULED_DAG_ID)
    conf = {"table_uri": table.uri, "output_uri": output_uri, "predicate": ""}
    # the scheduled run the unpause made may go first (max_active_runs=1): twice the time
    run = run_dag(api, services, SCHEDULED_DAG_ID, conf, timeout=2 * timeout)
    answer = api.dag_run(SCHEDULED_DAG_ID, run.run_id)
    if answer.get("logical_date") is not None or answer.get("data_interval_end") is not None:
        raise E2EError(f"{run.run_id} has a logical date or data interval: {answer}")
    # storage-only: every write on the table counts, the script's later deletes included
    check_snapshot_rows(output_uri, table.writer.expected_rows(table.writer.valid_write_ids()))
    from airflow_provider_acid.output import latest_snapshot

    snapshot = latest_snapshot(output_uri)
    keys = {b.slice_key for b in snapshot.buckets} if snapshot else set()
    names = {
        ti.get("rendered_map_index")
        for ti in api.task_instances(SCHEDULED_DAG_ID, run.run_id)
        if ti["task_id"] == "compact"
    }
    if not keys or names != keys:
        raise E2EError(f"mapped compact tasks are named {sorted(names)}, not the slices {keys}")
    log(
        f"{SCHEDULED_DAG_ID} with logical_date null: success in {run.seconds:.0f} s, "
        f"{len(names)} compact tasks named by slice ({sorted(names)[0]}, ...)"
    )
