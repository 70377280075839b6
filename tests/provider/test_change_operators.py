"""The change-feed operators under dag.test(), storage-only: the plan, the slices mapped, the
commit, with ``delete_values=False`` (a feed whose deletes hold their identity only)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from test_example_dags import states, xcom
from test_snapshot_tasks import register

from airflow_provider_acid.engine.change_feed import NO_DELETE_VALUES_WARNING
from airflow_provider_acid.testing.table_writer import AcidTableWriter


def test_a_feed_without_delete_values_runs_as_tasks(airflow_db, tmp_path: Path):
    from airflow.sdk import DAG

    from airflow_provider_acid.operators.change_feed import (
        AcidChangesOperator,
        AcidCommitChangesOperator,
        AcidPlanChangesOperator,
    )

    t = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("v", "string")], buckets=2, bucket_by="id"
    )
    t.insert([{"id": i, "v": f"a{i}"} for i in range(10)])  # write 1
    t.delete(lambda r: r["id"] in (2, 7))  # write 2
    t.insert([{"id": 20, "v": "new"}])  # write 3
    out = str(tmp_path / "feed")
    with DAG(dag_id="lean_feed", schedule=None) as dag:
        plan = AcidPlanChangesOperator(
            task_id="plan",
            table_uri=t.root,
            valid_write_ids=t.valid_write_ids(),
            output_uri=out,
            from_write_id=1,
            delete_values=False,
        )
        changes = AcidChangesOperator.partial(
            task_id="changes", output_uri=out, feed_id=plan.output["feed_id"]
        ).expand(slice_key=plan.output)
        AcidCommitChangesOperator(
            task_id="commit",
            output_uri=out,
            feed_id=plan.output["feed_id"],
            bucket_results=changes.output,
        )
    run = register(dag, tmp_path).test()
    assert run.state == "success", states(run)
    summary = xcom(run, "commit")
    assert summary["counts"] == {"insert": 1, "delete": 2, "update_preimage": 0,
                                 "update_postimage": 0}  # fmt: skip
    assert NO_DELETE_VALUES_WARNING in summary["warnings"]
    rows = [r for f in summary["files"] for r in pq.read_table(f"{out}/{f}").to_pylist()]
    deletes = [r for r in rows if r["_change_type"] == "delete"]
    assert len(deletes) == 2 and all(r["id"] is None and r["v"] is None for r in deletes)
    # the base rows' identities (write 1), deleted by write 2
    assert [(r["_acid_original_write_id"], r["_commit_write_id"]) for r in deletes] == [(1, 2)] * 2
