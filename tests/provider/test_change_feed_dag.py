"""The example change-feed DAG under dag.test(): the metastore sensor, the feed mapped per
bucket slice, its commit, and the Iceberg table published at N caught up to the metastore's
high watermark; a re-run delivers nothing new, a later run the later writes once."""

from __future__ import annotations

import collections
import datetime as dt
import json

import pyarrow as pa
from test_example_dags import load_dag, states, xcom

from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.sources import open_source
from airflow_provider_acid.output.iceberg import IcebergSink
from airflow_provider_acid.output.iceberg_changes import iceberg_watermark
from airflow_provider_acid.output.sinks import publish_snapshot

CONN = "metastore_feed"


def _iceberg_rows(snapshot_uri: str) -> collections.Counter:
    table = IcebergSink(snapshot_uri).load_table()
    return collections.Counter(
        (r["id"], r["name"]) for r in pa.table(table.scan().to_arrow()).to_pylist()
    )


def _expected(writer) -> collections.Counter:
    return collections.Counter((r["id"], r["name"]) for r in writer.expected_rows().to_pylist())


def _asset_events() -> list[dict]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (
            session.query(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .filter(AssetModel.name == "acid_demo_changes")
            .order_by(AssetEvent.id)
            .all()
        )
        return [dict(r.extra or {}) for r in rows]


def test_the_feed_dag_catches_the_iceberg_table_up(
    airflow_db, metastore_db, metastore_uri, tmp_path, monkeypatch
):
    host, port = metastore_uri.removeprefix("thrift://").rsplit(":", 1)
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN.upper()}",
        json.dumps({"conn_type": "hive_metastore", "host": host, "port": int(port)}),
    )
    writer = metastore_db.writer(
        "orders", [("id", "bigint"), ("name", "string")], buckets=2, bucket_by="id"
    )
    registered = metastore_db.register(writer)
    writer.insert([{"id": i, "name": f"n{i}"} for i in range(20)])  # write 1
    snapshots = str(tmp_path / "snapshots")
    at_n = compact_table(open_source(table=registered.name, metastore=metastore_uri), snapshots)
    publish_snapshot(at_n, "iceberg", out_uri=snapshots)  # the table published at N = 1
    writer.update(lambda r: r["id"] == 3, {"name": "changed"})  # write 2
    writer.delete(lambda r: r["id"] in (4, 5))  # write 3
    aborted = writer.begin()
    aborted.insert([{"id": 90, "name": "aborted"}])
    aborted.abort()  # write 4
    writer.insert([{"id": 30, "name": "new"}])  # write 5

    dag = load_dag("acid_change_feed")
    feeds = str(tmp_path / "feeds")
    conf = {"table": registered.name, "metastore_conn_id": CONN, "snapshot_uri": snapshots,
            "feed_uri": feeds, "key": "id"}  # fmt: skip
    logical_date = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
    run = dag.test(run_conf=conf, logical_date=logical_date)
    assert run.state == "success", states(run)
    assert all(s == "success" for s in states(run).values()), states(run)
    assert len([t for t in states(run) if t.startswith("changes[")]) == 2  # both buckets
    summary = xcom(run, "commit")
    assert (summary["from_write_id"], summary["to_write_id"]) == (1, 5)
    assert summary["counts"] == {"insert": 1, "delete": 2, "update_preimage": 1,
                                 "update_postimage": 1}  # fmt: skip
    assert _iceberg_rows(snapshots) == _expected(writer)
    assert iceberg_watermark(IcebergSink(snapshots).load_table()) == 5
    event = _asset_events()[-1]  # one event for the range delivered, saying which
    assert (event["from_write_id"], event["to_write_id"]) == (1, 5)
    assert event["feed_id"] == summary["feed_id"] and event["counts"] == summary["counts"]

    rerun = dag.test(run_conf=conf, logical_date=logical_date)  # nothing new
    assert rerun.state == "success", states(rerun)
    assert sum(xcom(rerun, "commit")["counts"].values()) == 0
    assert xcom(rerun, "apply_to_iceberg")["snapshot_id"] is None
    assert _iceberg_rows(snapshots) == _expected(writer)

    writer.delete(lambda r: r["id"] == 30)  # write 6
    later = dag.test(run_conf=conf, logical_date=logical_date + dt.timedelta(hours=1))
    assert later.state == "success", states(later)
    assert (xcom(later, "commit")["from_write_id"], xcom(later, "commit")["to_write_id"]) == (5, 6)
    assert xcom(later, "commit")["counts"]["delete"] == 1
    assert _iceberg_rows(snapshots) == _expected(writer)
