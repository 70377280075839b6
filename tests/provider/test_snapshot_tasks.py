"""acid_snapshot_tasks: two tables materialised by one DAG, one TaskGroup each, under dag.test()."""

from __future__ import annotations

import pyarrow.dataset as ds
import pytest
from test_example_dags import expected, snapshot_rows, states, xcom

from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks
from airflow_provider_acid.testing import generate_demo_table


def register(dag, tmp_path):
    """dag.test() runs DAGs its bundle knows: store this one as the dags-folder bundle's."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    DagBundlesManager().sync_bundles_to_db()
    (tmp_path / "no-dags").mkdir()
    bag = DagBag(dag_folder=str(tmp_path / "no-dags"))
    bag.bag_dag(dag)
    sync_bag_to_db(bag, "dags-folder", None)
    return dag


def test_two_tables_in_task_groups_commit_their_own_snapshots(airflow_db, hive_table, tmp_path):
    from airflow.sdk import DAG, Asset, TaskGroup, task

    writer = generate_demo_table(str(tmp_path / "sales"), rows_per_bucket=300, seed=11)
    nation = hive_table("nation")
    sales_asset = Asset(name="sales_snapshot", uri=f"file://{tmp_path}/sales-out")
    with DAG(dag_id="two_acid_tables", schedule=None) as dag:

        @task
        def start() -> str:
            return "go"

        @task(trigger_rule="all_done")
        def finish(sales: dict, nation: dict) -> list[str]:
            return [sales["snapshot_id"], nation["snapshot_id"]]

        begin = start()
        with TaskGroup("sales"):
            sales = acid_snapshot_tasks(
                table_uri=str(tmp_path / "sales"),
                output_uri=str(tmp_path / "sales-out"),
                where="dt = '2024-01-02'",
                outlets=[sales_asset],
            )
        with TaskGroup("nation"):
            nation_tasks = acid_snapshot_tasks(
                table_uri=str(nation),
                output_uri=str(tmp_path / "nation-out"),
                where="n_nationkey < 10",
                valid_write_ids="default.nation:4:9223372036854775807::",
                compact_kwargs={"retries": 0},
            )
        begin >> [sales.first, nation_tasks.first]
        ids = finish(sales.commit.output, nation_tasks.commit.output)
        [sales.last, nation_tasks.last] >> ids

    assert sales.first.task_id == "sales.manifest"
    assert nation_tasks.last.task_id == "nation.publish_metrics"
    assert sales.commit.outlets == [sales_asset]

    run = register(dag, tmp_path).test()
    ran = states(run)
    assert run.state == "success", ran
    assert all(state == "success" for state in ran.values()), ran
    assert len([t for t in ran if t.startswith("sales.compact[")]) == 4  # one day x 4 buckets
    assert [t for t in ran if t.startswith("nation.compact[")]

    live_on_day_two = [row for row in expected(writer) if row[5] == "2024-01-02"]
    assert live_on_day_two and snapshot_rows(tmp_path / "sales-out") == live_on_day_two
    keys = ds.dataset(str(tmp_path / "nation-out"), format="parquet").to_table()
    keys = keys.column("n_nationkey").to_pylist()
    assert len(keys) == 9000 and sorted(set(keys)) == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    sales_id, nation_id = xcom(run, "finish")
    assert sales_id != nation_id
    assert xcom(run, "sales.commit")["snapshot_id"] == sales_id


@pytest.mark.parametrize("keep", ["abc", "0", -1])
def test_a_bad_keep_snapshots_fails_before_the_commit(hive_table, tmp_path, keep):
    from airflow_provider_acid.engine.plan import plan_snapshot
    from airflow_provider_acid.operators.acid import AcidCommitSnapshotOperator
    from airflow_provider_acid.output import latest_snapshot

    out = str(tmp_path / "out")
    plan = plan_snapshot(str(hive_table("nation")), out)
    commit = AcidCommitSnapshotOperator(
        task_id="commit", output_uri=out, snapshot_id=plan.snapshot_id, keep_snapshots=keep
    )
    with pytest.raises(ValueError, match="keep_snapshots must be a whole number"):
        commit.execute({})
    assert latest_snapshot(out) is None


def test_the_fan_out_leaves_out_unplaceable_files_only_when_told(airflow_db, tmp_path):
    """A file no slice can hold fails the manifest task, naming it; with
    ``ignore_unrecognised`` the manifest and the plan leave it out and the mapped snapshot
    commits (what was left out is in its warnings)."""
    from airflow.sdk import DAG

    writer = generate_demo_table(str(tmp_path / "sales"), rows_per_bucket=100, seed=3)
    stray = tmp_path / "sales" / "dt=2024-01-01" / "misc" / "delta_0000009_0000009_0000"
    stray.mkdir(parents=True)
    (stray / "bucket_00000").write_bytes(b"not placed")
    for ignore in (False, True):
        out = tmp_path / f"out-{ignore}"
        with DAG(dag_id=f"stray_{ignore}", schedule=None) as dag:
            acid_snapshot_tasks(
                table_uri=str(tmp_path / "sales"),
                output_uri=str(out),
                valid_write_ids=writer.valid_write_ids(),
                ignore_unrecognised=ignore,
            )
        (tmp_path / str(ignore)).mkdir()
        run = register(dag, tmp_path / str(ignore)).test()
        if not ignore:
            assert run.state == "failed" and states(run)["manifest"] == "failed"
            assert not list(out.rglob("manifest.json"))
            continue
        assert run.state == "success", states(run)
        assert snapshot_rows(out) == expected(writer)
        committed = xcom(run, "commit")
        assert any("misc/delta_0000009_0000009_0000" in w for w in committed["warnings"])
