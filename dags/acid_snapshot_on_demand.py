"""A snapshot of a Hive ACID table on demand, from the Airflow UI's trigger form."""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Param, conf, task

from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks
from airflow_provider_acid.sensors.acid import AcidDeltaSensor
from airflow_provider_acid.sensors.metastore import AcidMetastoreWriteSensor

DEFAULT_TABLE_NAME = os.environ.get("ACID_TABLE", "")
DEFAULT_TABLE = (
    ""
    if DEFAULT_TABLE_NAME
    else os.environ.get("ACID_DEMO_TABLE_URI", os.environ.get("ACID_TABLE_URI", ""))
)
DEFAULT_METASTORE_CONN = os.environ.get("ACID_METASTORE_CONN_ID", "metastore_default")
DEFAULT_OUTPUT = os.environ.get("ACID_OUTPUT_URI", "")
WRITE_ID_LIST = (
    r"^$|^[^:$]+:\d+:\d+:[0-9,\-]*:[0-9,\-]*$|^\d+(\$[^:$]+:\d+:\d+:[0-9,\-]*:[0-9,\-]*)+$"
)
TABLE_NAME = r"^$|^([A-Za-z0-9_]+\.)?[A-Za-z0-9_]+$"


with DAG(
    dag_id="acid_snapshot_on_demand",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    tags=["acid", "example"],
    params={
        "table": Param(
            DEFAULT_TABLE_NAME,
            type="string",
            pattern=TABLE_NAME,
            title="Table name",
            description="The Hive ACID table by name, DB.TABLE, read through the metastore "
            "connection below: only its committed writes are read. Leave the table location "
            "empty then. Empty: give the table location.",
        ),
        "metastore_conn_id": Param(
            DEFAULT_METASTORE_CONN,
            type="string",
            title="Metastore connection",
            description="A 'hive_metastore' connection (host, port); used with a table name.",
        ),
        "table_uri": Param(
            DEFAULT_TABLE,
            type="string",
            title="Table location",
            description="Or the Hive ACID table by location: a path or URL below an allowed "
            "prefix ([acid] allowed_uri_prefixes), e.g. s3://warehouse/sales. Without a "
            "metastore it is read storage-only: unless a write-id list is given, aborted and "
            "in-flight writes are read as committed. Leave empty when naming the table.",
        ),
        "predicate": Param(
            "",
            type="string",
            title="Predicate",
            description="SQL WHERE fragment, e.g. amount > 100 AND dt >= '2024-01-01'. "
            "Empty: every row.",
        ),
        "valid_write_ids": Param(
            "",
            type="string",
            pattern=WRITE_ID_LIST,
            title="Write-id list",
            description="Hive's list, e.g. default.sales:42:9223372036854775807::17. "
            "Empty: by name, the metastore's (committed writes only); by location, every "
            "write on storage counts as committed.",
        ),
        "output_uri": Param(
            DEFAULT_OUTPUT,
            type="string",
            minLength=1,
            title="Output location",
            description="Where the Parquet snapshot goes (below an allowed prefix).",
        ),
        "acid_conn_id": Param(
            "",
            type="string",
            title="Connection",
            description="An 'acid' connection with the storage credentials; empty for none.",
        ),
        "wait_above_write_id": Param(
            0,
            type="integer",
            minimum=0,
            title="Wait for writes above",
            description="Wait until a write above this write id exists (0: any): by name, "
            "committed in the metastore; by location, a delta on storage.",
        ),
    },
    render_template_as_native_obj=False,
    doc_md="""
### A snapshot on demand

Trigger it from the UI with the table's name (`DB.TABLE` and a `hive_metastore` connection:
only committed writes are read) or its location (storage-only: without a write-id list,
aborted and in-flight writes are read as committed). The form's fields are checked against
their JSON schema when you submit, then the **validate** task checks, before any work and
writing nothing, that exactly one of name and location is given, that the locations lie below
`[acid] allowed_uri_prefixes` (no `..`, no other scheme, no symlink out), that the write-id
list parses (and, by name, is the table's), that a named table exists and is transactional,
and that the predicate's columns exist in the table. Then: wait for a write above the given
write id (deferrable: by name committed in the metastore, else a delta on storage), write the
slice manifest (by name it pins the metastore's view for every later task), compact the kept
slices in mapped tasks, commit, and publish the metrics.
""",
) as dag:

    @task
    def validate(params: dict | None = None) -> dict:
        """Refuse bad input before any work: the table, locations, write-id list, predicate."""
        from airflow_provider_acid.engine.request import (
            SnapshotRequestError,
            validate_named_snapshot_request,
            validate_snapshot_request,
        )
        from airflow_provider_acid.hooks.acid import AcidHook

        assert params is not None
        hook = AcidHook(params["acid_conn_id"] or None)
        table, table_uri = params.get("table", "").strip(), params["table_uri"].strip()
        if bool(table) == bool(table_uri):
            raise SnapshotRequestError(
                "give the table by name (table, DB.TABLE, with metastore_conn_id) or by "
                f"location (table_uri), exactly one of them: got table={table!r} and "
                f"table_uri={table_uri!r}"
            )
        allowed = conf.get("acid", "allowed_uri_prefixes", fallback="")
        if table:
            from airflow_provider_acid.hooks.metastore import AcidMetastoreHook

            metastore_conn_id = params["metastore_conn_id"] or AcidMetastoreHook.default_conn_name
            return validate_named_snapshot_request(
                table=table,
                metastore=AcidMetastoreHook(metastore_conn_id).address,
                output_uri=hook.resolve_uri(params["output_uri"]),
                predicate=params["predicate"],
                valid_write_ids=params["valid_write_ids"],
                allowed_prefixes=allowed,
                storage_options=hook.storage_options,
            )
        return {
            **validate_snapshot_request(
                table_uri=hook.resolve_uri(table_uri),
                output_uri=hook.resolve_uri(params["output_uri"]),
                predicate=params["predicate"],
                valid_write_ids=params["valid_write_ids"],
                allowed_prefixes=allowed,
                storage_options=hook.storage_options,
            ),
            "table": None,
        }

    @task.branch
    def choose_sensor(request: dict) -> str:
        """By name the metastore says which writes are committed; by location, storage."""
        return "wait_for_commits" if request["table"] else "wait_for_deltas"

    request = validate()
    conn_id = "{{ params.acid_conn_id or '' }}"
    waiting = {
        "above_write_id": "{{ params.wait_above_write_id }}",
        "acid_conn_id": conn_id,
        "deferrable": True,
        "poll_interval": 5,
        "timeout": 3600,
    }
    wait_for_deltas = AcidDeltaSensor(
        task_id="wait_for_deltas", table_uri="{{ params.table_uri }}", **waiting
    )
    wait_for_commits = AcidMetastoreWriteSensor(
        task_id="wait_for_commits",
        table="{{ params.table }}",
        metastore_conn_id="{{ params.metastore_conn_id or 'metastore_default' }}",
        **waiting,
    )
    snapshot = acid_snapshot_tasks(
        table_uri="{{ params.table_uri }}",
        table="{{ params.table }}",
        metastore_conn_id="{{ params.metastore_conn_id if params.table else '' }}",
        output_uri="{{ params.output_uri }}",
        where=request["predicate"],
        valid_write_ids="{{ params.valid_write_ids }}",
        acid_conn_id=conn_id,
        # one of the two sensors runs, the branch skips the other
        manifest_kwargs={"trigger_rule": "none_failed_min_one_success"},
    )
    choose_sensor(request) >> [wait_for_deltas, wait_for_commits] >> snapshot.first
