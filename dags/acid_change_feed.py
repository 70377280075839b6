"""A Hive ACID table's changes applied to its Iceberg publication (see doc_md below)."""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Asset, Param

from airflow_provider_acid.operators.change_feed import (
    AcidApplyChangesToIcebergOperator,
    AcidChangesOperator,
    AcidCommitChangesOperator,
    AcidPlanChangesOperator,
)
from airflow_provider_acid.sensors.metastore import AcidMetastoreWriteSensor

TABLE = os.environ.get("ACID_TABLE", "default.orders")
METASTORE_CONN_ID = os.environ.get("ACID_METASTORE_CONN_ID") or "metastore_default"
SNAPSHOT_URI = os.environ.get("ACID_OUTPUT_URI", "/tmp/acid-demo/snapshots")
FEED_URI = os.environ.get("ACID_FEED_URI", "/tmp/acid-demo/changes")
KEY = os.environ.get("ACID_KEY", "id")

CHANGES = Asset(
    name="acid_demo_changes", uri=f"file://{FEED_URI}" if "://" not in FEED_URI else FEED_URI
)

with DAG(
    dag_id="acid_change_feed",
    schedule="@hourly",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["acid", "example"],
    params={
        "table": Param(TABLE, type="string", description="DB.TABLE in the metastore."),
        "metastore_conn_id": Param(METASTORE_CONN_ID, type="string", minLength=1),
        "snapshot_uri": Param(
            SNAPSHOT_URI,
            type="string",
            description="The snapshot folder the Iceberg table was published from (at N).",
        ),
        "feed_uri": Param(FEED_URI, type="string", description="Where the feeds go."),
        "key": Param(KEY, type="string", description="The table's key, COL[,COL...]."),
    },
    doc_md="""
### Change feed: catch a published Iceberg table up, write by write

The migration recipe's middle step (docs/guides/change-feed.md): the table was published as
Iceberg at write N (`compact --format iceberg`); every hour, once the metastore shows writes
committed since the last feed, this DAG computes the feed from the last delivered write to
the metastore's high watermark (one mapped task per bucket slice), commits it with the
snapshot protocol (its manifest keeps the watermark), and applies it to the Iceberg table on
the key. Each change is delivered once; a re-run delivers nothing new.
""",
) as dag:
    wait = AcidMetastoreWriteSensor(
        task_id="wait_for_writes",
        table="{{ params.table }}",
        metastore_conn_id="{{ params.metastore_conn_id }}",
        snapshot_uri="{{ params.feed_uri }}",  # the last feed's B (0 before the first)
        snapshot_committed_before="{{ data_interval_end }}",  # a re-run waits as the run did
        soft_fail=True,
        poke_interval=60,
        timeout=3600,
        mode="reschedule",
    )
    plan = AcidPlanChangesOperator(
        task_id="plan",
        table="{{ params.table }}",
        metastore_conn_id="{{ params.metastore_conn_id }}",
        output_uri="{{ params.feed_uri }}",
        start_snapshot_uri="{{ params.snapshot_uri }}",
        key="{{ params.key }}",
    )
    changes = AcidChangesOperator.partial(
        task_id="changes",
        output_uri="{{ params.feed_uri }}",
        feed_id=plan.output["feed_id"],
    ).expand(slice_key=plan.output)
    commit = AcidCommitChangesOperator(
        task_id="commit",
        output_uri="{{ params.feed_uri }}",
        feed_id=plan.output["feed_id"],
        bucket_results=changes.output,
        outlets=[CHANGES],
    )
    apply = AcidApplyChangesToIcebergOperator(
        task_id="apply_to_iceberg", feed=commit.output, snapshot_uri="{{ params.snapshot_uri }}"
    )
    wait >> plan
    commit >> apply
