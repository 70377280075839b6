"""Scheduled snapshot materialisation of a Hive ACID table (see doc_md below)."""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Asset, Param

from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks
from airflow_provider_acid.sensors.acid import AcidDeltaSensor
from airflow_provider_acid.sensors.metastore import AcidMetastoreWriteSensor

TABLE_URI = os.environ.get("ACID_TABLE_URI", "/tmp/acid-demo/table")
OUTPUT_URI = os.environ.get("ACID_OUTPUT_URI", "/tmp/acid-demo/snapshots")
CONN_ID = os.environ.get("ACID_CONN_ID") or None
# By name (DB.TABLE) through a Hive Metastore: only committed writes are read. Unset: the
# table at ACID_TABLE_URI is read storage-only (aborted and open writes read as data).
TABLE = os.environ.get("ACID_TABLE") or None
METASTORE_CONN_ID = os.environ.get("ACID_METASTORE_CONN_ID") or "metastore_default"
TABLE_NAME = r"^([A-Za-z0-9_]+\.)?[A-Za-z0-9_]+$"

if TABLE:
    TABLE_PARAMS = {
        "table": Param(
            TABLE,
            type="string",
            pattern=TABLE_NAME,
            description="The Hive ACID table's name, DB.TABLE, in the metastore.",
        ),
        "metastore_conn_id": Param(
            METASTORE_CONN_ID,
            type="string",
            minLength=1,
            description="The 'hive_metastore' connection of the table's metastore.",
        ),
    }
else:
    TABLE_PARAMS = {
        "table_uri": Param(
            TABLE_URI, type="string", minLength=1, description="The Hive ACID table's location."
        ),
    }

# The asset's name and URI are fixed, never read from the environment: every process that
# parses this file (dag-processor, worker, a test) must declare the same asset, or Airflow
# marks the one it saw first inactive and the commit's asset event fails. Where the snapshot
# went is in each event's extra (manifest_path).
SNAPSHOTS = Asset(
    name="acid_demo_snapshot", uri="acid-snapshot://acid_snapshot_materialisation/snapshots"
)

# A run triggered with no logical date (the REST API's "logical_date": null, or the UI's
# trigger form) has no data interval: the watermark is then the snapshot before the run.
INTERVAL_END = (
    "{{ data_interval_end if data_interval_end is defined and data_interval_end "
    "else dag_run.run_after }}"
)

with DAG(
    dag_id="acid_snapshot_materialisation",
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["acid", "example"],
    params={
        **TABLE_PARAMS,
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

Every day, once the table has new writes since the last committed snapshot (a deferrable
sensor, waiting in the triggerer: by name, writes the metastore shows committed; storage-only,
new `delta_*` or `delete_delta_*` folders above the snapshot's write ids):

1. **manifest**: refresh the column-stats index and write the pruned slice manifest; by name,
   it pins the metastore's transaction and write-id lists, and every later task reads with
   them (a write committed meanwhile reaches no bucket);
2. **plan**: fix the snapshot id and the slices to compute (unchanged slices are reused);
3. **compact**: one mapped task per slice (a bucket of a partition), spread over workers;
4. **commit**: verify and reconcile every part, then write the snapshot manifest (the commit
   point), emit an asset event for `acid_demo_snapshot` (its extra names the manifest) and
   expire all but the newest `keep_snapshots` snapshots (1: the output folder holds exactly
   the latest one);
5. **publish_metrics**: pruning and compaction metrics to Airflow metrics, XCom and
   `_snapshots/<id>/metrics.json`.

Re-running a date is idempotent: the snapshot id is a hash of the source and the settings, so
a re-run commits nothing new (and with no new deltas the sensor skips the run).
Settings, in the environment: `ACID_TABLE` (`DB.TABLE`: read by name through the metastore
of the `hive_metastore` connection `ACID_METASTORE_CONN_ID`, default `metastore_default`) or
else `ACID_TABLE_URI` (the table's location, read storage-only: without a metastore every
write on storage, aborted and in-flight ones included, is read as committed, and the tasks
warn so); `ACID_OUTPUT_URI`; `ACID_CONN_ID` (the storage credentials' `acid` connection);
`ACID_SENSOR_POLL_INTERVAL` and `ACID_SENSOR_TIMEOUT` (the sensor's, in seconds: 30 and 6 h).
Unset, the table is `/tmp/acid-demo/table` and the output `/tmp/acid-demo/snapshots`: the
trigger form's `table_uri` and `output_uri` override them per run.
A run triggered without a logical date (REST `"logical_date": null`) waits for writes since
the snapshot committed before the run was triggered.
""",
) as dag:
    waiting = {
        "snapshot_uri": "{{ params.output_uri }}",
        # the watermark of the snapshot before this interval: a re-run waits for the same writes
        "snapshot_committed_before": INTERVAL_END,
        "acid_conn_id": CONN_ID,
        "deferrable": True,
        "poll_interval": int(os.environ.get("ACID_SENSOR_POLL_INTERVAL", 30)),
        "timeout": int(os.environ.get("ACID_SENSOR_TIMEOUT", 6 * 3600)),
        "soft_fail": True,
    }
    if TABLE:
        table = {
            "table": "{{ params.table }}",
            "metastore_conn_id": "{{ params.metastore_conn_id }}",
        }
        wait = AcidMetastoreWriteSensor(task_id="wait_for_commits", **table, **waiting)
    else:
        table = {"table_uri": "{{ params.table_uri }}"}
        wait = AcidDeltaSensor(task_id="wait_for_deltas", **table, **waiting)
    snapshot = acid_snapshot_tasks(
        **table,
        output_uri="{{ params.output_uri }}",
        where="{{ params.predicate }}",
        acid_conn_id=CONN_ID,
        outlets=[SNAPSHOTS],
        keep_snapshots="{{ params.keep_snapshots }}",
    )
    wait >> snapshot.first
