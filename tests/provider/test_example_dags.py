"""Both example DAGs, end to end under dag.test() on a real metadata database."""

from __future__ import annotations

import datetime as dt
import importlib
import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from airflow_provider_acid.testing import generate_demo_table


def load_dag(name: str):
    import sys

    dags = str(Path(__file__).resolve().parents[2] / "dags")
    if dags not in sys.path:
        sys.path.insert(0, dags)
    module = importlib.import_module(name)
    return module.dag


def states(run) -> dict[str, str]:
    return {
        f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id: ti.state
        for ti in run.get_task_instances()
    }


def xcom(run, task_id: str, key: str = "return_value"):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id, key=key)
            .first()
        )
        return json.loads(row.value) if isinstance(row.value, str) else row.value


def snapshot_rows(out: Path) -> list[tuple]:
    table = ds.dataset(str(out), format="parquet").to_table()
    return sorted(
        (r["id"], r["category"], r["amount"], r["ts"], r["note"], str(r["dt"]))
        for r in table.to_pylist()
    )


def expected(writer) -> list[tuple]:
    return sorted(
        (r["id"], r["category"], r["amount"], r["ts"], r["note"], str(r["dt"]))
        for r in writer.expected_rows().to_pylist()
    )


def test_materialisation_dag_runs_end_to_end_and_reruns_idempotently(airflow_db, tmp_path, capfd):
    writer = generate_demo_table(str(tmp_path / "table"), rows_per_bucket=500, seed=3)
    out = tmp_path / "snapshots"
    dag = load_dag("acid_snapshot_materialisation")
    conf = {"table_uri": str(tmp_path / "table"), "output_uri": str(out), "predicate": ""}
    logical_date = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
    run = dag.test(run_conf=conf, logical_date=logical_date)
    assert run.state == "success", states(run)
    assert all(state == "success" for state in states(run).values()), states(run)
    assert len([t for t in states(run) if t.startswith("compact[")]) == 8  # 2 days x 4 buckets
    assert xcom(run, "wait_for_deltas")["waited_in"] == "worker"  # deltas were there
    assert snapshot_rows(out) == expected(writer)
    committed = xcom(run, "commit")
    record = json.loads(
        (out / "_snapshots" / committed["snapshot_id"] / "metrics.json").read_text()
    )
    assert record["pruning"]["slices_total"] == 8
    assert record["compaction"]["rows_written"] == len(expected(writer))
    # the commit fetched the 8 results as one slice, not one by one and a 404 after the last
    assert "XCom not found" not in "".join(capfd.readouterr())

    rerun = dag.test(run_conf=conf, logical_date=logical_date)
    assert rerun.state == "success", states(rerun)
    assert xcom(rerun, "commit")["snapshot_id"] == committed["snapshot_id"]
    assert len(list((out / "_snapshots").iterdir())) == 1
    assert snapshot_rows(out) == expected(writer)

    # The next day brings a delete: a new snapshot, and the older one expires (keep 1), so a
    # plain folder read is exactly the new snapshot, reused files included.
    writer.delete(lambda row: row["id"] % 5 == 0, partition={"dt": "2024-01-01"})
    later = dag.test(run_conf=conf, logical_date=logical_date + dt.timedelta(days=1))
    assert later.state == "success", states(later)
    newer = xcom(later, "commit")
    assert newer["snapshot_id"] != committed["snapshot_id"]
    assert newer["expired"]["removed_snapshots"] == [committed["snapshot_id"]]
    assert newer["expired"]["removed_files"]  # the changed day's old files
    assert [p.name for p in (out / "_snapshots").iterdir()] == [newer["snapshot_id"]]
    recomputed = [t for t in states(later) if t.startswith("compact[")]
    assert len(recomputed) == 4  # the changed day's buckets; the other day's files are reused
    assert snapshot_rows(out) == expected(writer)


def test_materialisation_dag_runs_without_a_logical_date(airflow_db, tmp_path):
    """A run triggered with ``logical_date: null`` (the REST API, the UI's trigger form) has no
    data interval: the sensor's watermark template must still render. Each mapped compaction
    task is named by its slice key."""
    writer = generate_demo_table(str(tmp_path / "table"), rows_per_bucket=200, seed=4)
    out = tmp_path / "snapshots"
    dag = load_dag("acid_snapshot_materialisation")
    conf = {"table_uri": str(tmp_path / "table"), "output_uri": str(out), "predicate": ""}
    run = dag.test(run_conf=conf, logical_date=None)
    assert run.logical_date is None
    assert run.state == "success", states(run)
    assert snapshot_rows(out) == expected(writer)
    names = {ti.rendered_map_index for ti in run.get_task_instances() if ti.task_id == "compact"}
    assert names == set(xcom(run, "manifest")["slice_keys"])
    assert len(names) == 8


def test_on_demand_dag_on_the_nation_fixture(airflow_db, hive_table, tmp_path, monkeypatch):
    table = hive_table("nation")
    out = tmp_path / "out"
    monkeypatch.setenv("AIRFLOW__ACID__ALLOWED_URI_PREFIXES", f"{table.parent},{tmp_path}/out")
    dag = load_dag("acid_snapshot_on_demand")
    run = dag.test(
        run_conf={
            "table_uri": str(table),
            "output_uri": str(out),
            "predicate": "n_nationkey < 10",
            "valid_write_ids": "default.nation:4:9223372036854775807::",
            "acid_conn_id": "",
            "wait_above_write_id": 0,
        }
    )
    assert run.state == "success", states(run)
    rows = ds.dataset(str(out), format="parquet").to_table()
    keys = rows.column("n_nationkey").to_pylist()
    assert len(keys) == 9000 and sorted(set(keys)) == [0, 1, 2, 3, 4, 6, 7, 8, 9]


def test_on_demand_dag_waits_in_the_trigger_for_a_later_delete(airflow_db, tmp_path, monkeypatch):
    """No write above the watermark yet: the sensor defers, and its trigger wakes it when a
    delete arrives (written by another thread while the run waits)."""
    import threading
    import time

    writer = generate_demo_table(str(tmp_path / "table"), rows_per_bucket=200, seed=5)
    last_write = int(writer.valid_write_ids().split(":")[1])
    monkeypatch.setenv("AIRFLOW__ACID__ALLOWED_URI_PREFIXES", str(tmp_path))
    deleted = threading.Event()

    def delete_later() -> None:
        time.sleep(3)
        writer.delete(lambda row: row["id"] % 10 == 0)
        deleted.set()

    threading.Thread(target=delete_later, daemon=True).start()
    run = load_dag("acid_snapshot_on_demand").test(
        run_conf={
            "table_uri": str(tmp_path / "table"),
            "output_uri": str(tmp_path / "out"),
            "predicate": "",
            "valid_write_ids": "",
            "acid_conn_id": "",
            "wait_above_write_id": last_write,
        }
    )
    assert run.state == "success", states(run)
    assert deleted.is_set()
    waited = xcom(run, "wait_for_deltas")
    assert waited["waited_in"] == "triggerer"
    assert [f["kind"] for f in waited["folders"]] == ["delete_delta"] * 2  # one per partition
    ids = ds.dataset(str(tmp_path / "out"), format="parquet").to_table().column("id")
    assert sorted(ids.to_pylist()) == sorted(r["id"] for r in writer.expected_rows().to_pylist())
    assert all(i % 10 for i in ids.to_pylist())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"predicate": "n_nationkey >"}, "predicate"),
        ({"predicate": "no_such_column = 1"}, "no_such_column"),
        ({"table_uri": "/etc"}, "outside the allowed prefixes"),
        ({"output_uri": "s3://elsewhere/out"}, "outside the allowed prefixes"),
    ],
)
def test_on_demand_dag_refuses_bad_input_before_any_work(
    airflow_db, hive_table, tmp_path, monkeypatch, capfd, change, message
):
    table = hive_table("nation")
    out = tmp_path / "out"
    monkeypatch.setenv("AIRFLOW__ACID__ALLOWED_URI_PREFIXES", f"{table.parent},{tmp_path}/out")
    conf = {
        "table_uri": str(table),
        "output_uri": str(out),
        "predicate": "",
        "valid_write_ids": "",
        "acid_conn_id": "",
        "wait_above_write_id": 0,
        **change,
    }
    run = load_dag("acid_snapshot_on_demand").test(run_conf=conf)
    assert run.state == "failed"
    assert states(run)["validate"] == "failed"
    assert states(run)["manifest"] == "upstream_failed"
    assert not out.exists()  # nothing written
    printed = capfd.readouterr()
    assert message in printed.out + printed.err


def test_on_demand_form_rejects_a_malformed_write_id_list(airflow_db, hive_table, tmp_path):
    from airflow.sdk.exceptions import ParamValidationError

    conf = {
        "table_uri": str(hive_table("nation")),
        "output_uri": str(tmp_path / "o"),
        "valid_write_ids": "not a list",
    }
    with pytest.raises(ParamValidationError, match="valid_write_ids"):
        load_dag("acid_snapshot_on_demand").test(run_conf=conf)
    assert not (tmp_path / "o").exists()
