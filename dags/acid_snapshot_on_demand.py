"""A snapshot of a Hive ACID table on demand, from the Airflow UI's trigger form."""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Param, conf, task

from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks
from airflow_provider_acid.sensors.acid import AcidDeltaSensor

DEFAULT_TABLE = os.environ.get("ACID_DEMO_TABLE_URI", os.environ.get("ACID_TABLE_URI", ""))
DEFAULT_OUTPUT = os.environ.get("ACID_OUTPUT_URI", "")
WRITE_ID_LIST = (
    r"^$|^[^:$]+:\d+:\d+:[0-9,\-]*:[0-9,\-]*$|^\d+(\$[^:$]+:\d+:\d+:[0-9,\-]*:[0-9,\-]*)+$"
)

with DAG(
    dag_id="acid_snapshot_on_demand",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    tags=["acid", "example"],
    params={
        "table_uri": Param(
            DEFAULT_TABLE,
            type="string",
            minLength=1,
            title="Table location",
            description="The Hive ACID table: a path or URL below an allowed prefix "
            "([acid] allowed_uri_prefixes), e.g. s3://warehouse/sales.",
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
            "Empty: every write on storage counts as committed.",
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
            description="Wait until a delta with a write id above this exists (0: any).",
        ),
    },
    render_template_as_native_obj=False,
    doc_md="""
### A snapshot on demand

Trigger it from the UI: the form's fields are checked against their JSON schema when you
submit, then the **validate** task checks, before any work and writing nothing, that both
locations lie below `[acid] allowed_uri_prefixes` (no `..`, no other scheme, no symlink out),
that the write-id list parses and that the predicate's columns exist in the table. Then: wait
for a delta above the given write id (deferrable), write the slice manifest, compact the kept
slices in mapped tasks, commit, and publish the metrics.
""",
) as dag:

    @task
    def validate(params: dict | None = None) -> dict:
        """Refuse bad input before any work: locations, write-id list, predicate."""
        from airflow_provider_acid.hooks.acid import AcidHook
        from airflow_provider_acid.pruning.request import validate_snapshot_request

        assert params is not None
        hook = AcidHook(params["acid_conn_id"] or None)
        return validate_snapshot_request(
            table_uri=hook.resolve_uri(params["table_uri"]),
            output_uri=hook.resolve_uri(params["output_uri"]),
            predicate=params["predicate"],
            valid_write_ids=params["valid_write_ids"],
            allowed_prefixes=conf.get("acid", "allowed_uri_prefixes", fallback=""),
            storage_options=hook.storage_options,
        )

    request = validate()
    conn_id = "{{ params.acid_conn_id or '' }}"
    wait = AcidDeltaSensor(
        task_id="wait_for_deltas",
        table_uri="{{ params.table_uri }}",
        above_write_id="{{ params.wait_above_write_id }}",
        acid_conn_id=conn_id,
        deferrable=True,
        poll_interval=5,
        timeout=3600,
    )
    snapshot = acid_snapshot_tasks(
        table_uri="{{ params.table_uri }}",
        output_uri="{{ params.output_uri }}",
        where=request["predicate"],
        valid_write_ids="{{ params.valid_write_ids }}",
        acid_conn_id=conn_id,
    )
    request >> wait >> snapshot.first
