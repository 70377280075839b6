"""The Iceberg sink from Airflow: ``acid_snapshot_tasks(output_format="iceberg")`` under a real
``dag.test()`` (SQLite metadata database in the session's throwaway AIRFLOW_HOME).

The commit task's outlet is the table's asset (``iceberg://...``); its XCom and its asset
event carry the Iceberg snapshot id, which is the table's current snapshot.
"""

from __future__ import annotations

import pytest
from airflow_helpers import asset_events, register, task_xcom
from pyiceberg.catalog import load_catalog

from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks

NATION_4 = "default.nation:4:9223372036854775807::"


def test_the_commit_publishes_the_table_and_its_asset_is_the_table(
    airflow_db, hive_table, tmp_path
):
    from airflow.sdk import DAG, Asset

    nation, out = hive_table("nation"), tmp_path / "nation-out"
    with DAG(dag_id="nation_to_iceberg", schedule=None) as dag:
        tasks = acid_snapshot_tasks(
            table_uri=str(nation),
            output_uri=str(out),
            valid_write_ids=NATION_4,
            output_format="iceberg",
            sink_options={"table": "lake.nation"},
            compact_kwargs={"retries": 0},
        )
    expected_uri = f"iceberg://localhost{out}/_iceberg/catalog.db/lake/nation"
    assert tasks.commit.outlets == [Asset(expected_uri)]

    run = register(dag, tmp_path).test()
    assert run.state == "success"
    summary = task_xcom(run, "commit")
    assert summary["output_format"] == "iceberg" and summary["newly_published"]
    block = summary["iceberg"]
    table = load_catalog(block["catalog_name"], **block["catalog"]).load_table(block["table"])
    assert table.scan().count() == 23_000
    assert summary["table_version"] == table.current_snapshot().snapshot_id == block["snapshot_id"]
    assert summary["asset_uri"] == expected_uri
    (event,) = asset_events(Asset(expected_uri).uri)
    assert event["table_version"] == summary["table_version"]
    assert event["snapshot_id"] == summary["snapshot_id"]
    assert event["output_format"] == "iceberg"
    metrics = task_xcom(run, "publish_metrics")["compaction"]
    assert metrics["table_version"] == summary["table_version"]
    recorded = table.current_snapshot().summary.additional_properties
    assert recorded["airflow-acid.snapshot-id"] == summary["snapshot_id"]


def test_a_bad_output_format_fails_when_the_dag_is_defined(tmp_path):
    from airflow_provider_acid.operators.acid import AcidCommitSnapshotOperator

    with pytest.raises(ValueError, match="output_format 'orc' is not one of parquet, iceberg"):
        AcidCommitSnapshotOperator(
            task_id="commit", output_uri=str(tmp_path), snapshot_id="x", output_format="orc"
        )


def test_a_whole_snapshot_task_publishes_and_expires_through_iceberg(hive_table, tmp_path):
    """``AcidCompactOperator`` committing a whole snapshot in one task, with
    ``keep_snapshots``: Iceberg's expiry keeps the newest snapshot, whose rows stay whole."""
    from airflow_provider_acid.operators.acid import AcidCompactOperator

    nation, out = str(hive_table("nation")), str(tmp_path / "out")
    summaries = []
    for hwm in (3, 4):
        task = AcidCompactOperator(
            task_id=f"compact_{hwm}",
            output_uri=out,
            table_uri=nation,
            valid_write_ids=f"default.nation:{hwm}:9223372036854775807::",
            output_format="iceberg",
            keep_snapshots=1,
        )
        summaries.append(task.execute({}))
    last = summaries[-1]
    block = last["iceberg"]
    table = load_catalog(block["catalog_name"], **block["catalog"]).load_table(block["table"])
    assert [s.snapshot_id for s in table.snapshots()] == [last["table_version"]]
    assert table.scan().count() == 23_000
    assert last["expired"]["removed_snapshots"] == [summaries[0]["snapshot_id"]]
    assert summaries[0]["table_version"] != last["table_version"]
