"""The Delta sink from Airflow: ``acid_snapshot_tasks(output_format="delta")`` under a real
``dag.test()`` (SQLite metadata database in the session's throwaway AIRFLOW_HOME).

The commit task's outlet is the Delta table's location; its XCom, its asset event and the
metrics record carry the Delta version, the table's current one."""

from __future__ import annotations

from pathlib import Path

from airflow_helpers import asset_events, register, task_xcom
from deltalake import DeltaTable

from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks
from airflow_provider_acid.output.delta import DeltaSink

NATION_3 = "default.nation:3:9223372036854775807::"
NATION_4 = "default.nation:4:9223372036854775807::"


def nation_dag(dag_id: str, nation: Path, out: Path, write_ids: str):
    from airflow.sdk import DAG

    with DAG(dag_id=dag_id, schedule=None) as dag:
        tasks = acid_snapshot_tasks(
            table_uri=str(nation),
            output_uri=str(out),
            valid_write_ids=write_ids,
            output_format="delta",
            keep_snapshots=1,
            compact_kwargs={"retries": 0},
        )
    return dag, tasks


def test_the_commit_publishes_a_delta_version_and_its_asset_is_the_table(
    airflow_db, hive_table, tmp_path
):
    from airflow.sdk import Asset

    nation, out = hive_table("nation"), tmp_path / "nation-out"
    first_dag, tasks = nation_dag("nation_to_delta_3", nation, out, NATION_3)
    assert tasks.commit.outlets == [Asset(f"file://{out}")]
    first = register(first_dag, tmp_path).test()
    assert first.state == "success"
    assert task_xcom(first, "commit")["delta"] == {"uri": str(out), "version": 0}

    second_dag, _ = nation_dag("nation_to_delta_4", nation, out, NATION_4)
    run = register(second_dag, tmp_path).test()
    assert run.state == "success"
    summary = task_xcom(run, "commit")
    assert summary["output_format"] == "delta" and summary["newly_published"]
    assert summary["delta"] == {"uri": str(out), "version": 1}
    assert summary["table_version"] == 1
    table = DeltaTable(summary["delta"]["uri"])
    assert table.count() == 23_000
    # the newest provider commit is that version (keep_snapshots' vacuum adds commits of its own)
    (version, record), *_ = reversed(DeltaSink(str(out)).provider_commits())
    assert (version, record["snapshot_id"]) == (1, summary["snapshot_id"])
    assert [h["operation"] for h in table.history()[:2]] == ["VACUUM END", "VACUUM START"]
    assert DeltaTable(str(out), version=1).count() == 23_000
    assert summary["asset_uri"] == f"file://{out}"
    events = asset_events(Asset(f"file://{out}").uri)
    assert [e["table_version"] for e in events] == [0, 1]
    assert events[-1]["snapshot_id"] == summary["snapshot_id"]
    assert task_xcom(run, "publish_metrics")["compaction"]["table_version"] == 1
    # keep_snapshots=1 expired through the sink: the first snapshot's file is gone, the
    # current version reads
    assert sorted(p.name for p in out.glob("part-*.parquet")) == [
        f"part-{summary['snapshot_id']}-00000-0000.parquet"
    ]
