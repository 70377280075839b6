"""Scheduled snapshot materialisation of a Hive ACID table (see doc_md below)."""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Asset, Param

from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks
from airflow_provider_acid.sensors.acid import AcidDeltaSensor

TABLE_URI = os.environ.get("ACID_TABLE_URI", "/tmp/acid-demo/table")
OUTPUT_URI = os.environ.get("ACID_OUTPUT_URI", "/tmp/acid-demo/snapshots")
CONN_ID = os.environ.get("ACID_CONN_ID") or None

SNAPSHOTS = Asset(
    name="acid_demo_snapshot", uri=f"file://{OUTPUT_URI}" if "://" not in OUTPUT_URI else OUTPUT_URI
)

with DAG(
    dag_id="acid_snapshot_materialisation",
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["acid", "example"],
    params={
        "table_uri": Param(
            TABLE_URI, type="string", minLength=1, description="The Hive ACID table's location."
        ),
        "output_uri": Param(
            OUTPUT_URI,
            type="string",
            minLength=1,
            description="Where snapshots, the index and manifests go.",
        ),
        "predicate": Param(
            "", type="string", description="SQL WHERE fragment; empty keeps every row."
        ),
        "keep_snapshots": Param(
            1,
            type=["integer", "null"],
            minimum=1,
            description="Snapshots kept after a commit (1: a folder read is exactly the latest "
            "one); null keeps all.",
        ),
    },
    doc_md="""
### Scheduled snapshot materialisation

Every day, once the table has new `delta_*` or `delete_delta_*` folders above the last
committed snapshot's write ids (a deferrable sensor, waiting in the triggerer):

1. **manifest**: refresh the column-stats index and write the pruned slice manifest;
2. **plan**: fix the snapshot id and the slices to compute (unchanged slices are reused);
3. **compact**: one mapped task per slice (a bucket of a partition), spread over workers;
4. **commit**: verify and reconcile every part, then write the snapshot manifest (the commit
   point), emit an asset event for `acid_demo_snapshot` and expire all but the newest
   `keep_snapshots` snapshots (1: the output folder holds exactly the latest one);
5. **publish_metrics**: pruning and compaction metrics to Airflow metrics, XCom and
   `_snapshots/<id>/metrics.json`.

Re-running a date is idempotent: the snapshot id is a hash of the source and the settings, so
a re-run commits nothing new (and with no new deltas the sensor skips the run).
Settings: `ACID_TABLE_URI`, `ACID_OUTPUT_URI`, `ACID_CONN_ID` in the environment.
""",
) as dag:
    wait = AcidDeltaSensor(
        task_id="wait_for_deltas",
        table_uri="{{ params.table_uri }}",
        snapshot_uri="{{ params.output_uri }}",
        # the watermark of the snapshot before this interval: a re-run waits for the same deltas
        snapshot_committed_before="{{ data_interval_end }}",
        acid_conn_id=CONN_ID,
        deferrable=True,
        poll_interval=30,
        timeout=int(os.environ.get("ACID_SENSOR_TIMEOUT", 6 * 3600)),
        soft_fail=True,
    )
    snapshot = acid_snapshot_tasks(
        table_uri="{{ params.table_uri }}",
        output_uri="{{ params.output_uri }}",
        where="{{ params.predicate }}",
        acid_conn_id=CONN_ID,
        outlets=[SNAPSHOTS],
        keep_snapshots="{{ params.keep_snapshots }}",
    )
    wait >> snapshot.first
