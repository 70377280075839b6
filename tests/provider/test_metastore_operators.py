"""The operators and acid_snapshot_tasks reading tables by name, under dag.test().

Real parts only: a real Hive Metastore (``metastore_uri``, scripts/metastore.py), tables the
simulator writes under the metastore's transactions and write ids
(``testing.metastore_tables``), a ``hive_metastore`` Airflow connection from the environment,
and real DAG runs on the session's SQLite metadata database.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from test_example_dags import states, xcom
from test_snapshot_tasks import register

from airflow_provider_acid.acid.source import STORAGE_ONLY_WARNING
from airflow_provider_acid.acid.writeids import ValidTxnList
from airflow_provider_acid.metastore import MetastoreClient, read_view
from airflow_provider_acid.output import latest_snapshot
from airflow_provider_acid.testing import AcidTableWriter
from airflow_provider_acid.testing.metastore_tables import (
    RegisteredTable,
    create_table,
    drop_database,
    register_table,
    storage_only_rows,
    thrift_table,
)
from airflow_provider_acid.testing.write_history import WriteState

CONN_ID = "metastore_test"
COLUMNS = [("id", "bigint"), ("s", "string"), ("amount", "double")]
PARTITION_COLUMNS = [("dt", "string")]
DAYS = ("2024-01-01", "2024-01-02")


def row(i: int, s: str | None = None) -> dict[str, Any]:
    return {"id": i, "s": s or f"s{i}", "amount": i * 0.5, "dt": DAYS[i % 2]}


def as_tuples(table) -> list[tuple]:
    return sorted((r["id"], r["s"], r["amount"], str(r["dt"])) for r in table.to_pylist())


def committed_rows(out: Path) -> list[tuple]:
    """The rows of the latest committed snapshot under ``out`` (its own files only)."""
    snapshot = latest_snapshot(str(out))
    assert snapshot is not None, f"no committed snapshot under {out}"
    return as_tuples(ds.dataset(snapshot.file_paths(), format="parquet").to_table())


def committed_source(out: Path) -> dict[str, Any]:
    """The ``source`` section of the latest committed snapshot's manifest.json."""
    snapshot = latest_snapshot(str(out))
    return json.loads(Path(snapshot.manifest_path).read_text())["source"]


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@dataclass
class Warehouse:
    """One test's database in the session's metastore, and the tables registered in it."""

    client: MetastoreClient
    uri: str
    name: str
    folder: Path
    registered: list[RegisteredTable] = field(default_factory=list)

    def table(self, table: str, *, fill: bool = True, open_write: bool = True) -> RegisteredTable:
        """A registered table of 2 days x 2 buckets (by ``id``), written through the
        metastore: inserts, a delete, an update, an aborted write and (``open_write``) a
        write left open. About 300 rows."""
        writer = AcidTableWriter(
            str(self.folder / table),
            COLUMNS,
            PARTITION_COLUMNS,
            buckets=2,
            bucket_by="id",
            database=self.name,
            table_name=table,
        )
        registered = register_table(self.client, writer)
        self.registered.append(registered)
        if fill:
            writer.insert([row(i) for i in range(300)])
            writer.delete(lambda r: r["id"] % 7 == 0)
            writer.update(lambda r: r["id"] % 11 == 0, {"s": "updated"})
            aborted = writer.begin()
            aborted.insert([row(i, "aborted") for i in range(1000, 1040)])
            aborted.delete(lambda r: r["id"] % 5 == 0)
            aborted.abort()
            if open_write:
                still_open = writer.begin()
                still_open.insert([row(i, "open") for i in range(2000, 2030)])
        return registered

    def cleanup(self) -> None:
        still_open = set(self.client.get_open_txns().open_txns or ())
        for registered in self.registered:
            for txn in registered.history.txn_ids(WriteState.OPEN):
                if txn in still_open:
                    self.client.abort_txn(txn)
        for table in self.client.table_names(self.name):
            self.client.drop_table(f"{self.name}.{table}")
        drop_database(self.client, self.name)


@pytest.fixture
def warehouse(metastore_uri: str, tmp_path: Path, monkeypatch) -> Iterator[Warehouse]:
    """A fresh database ``op_<8 hex>`` (dropped afterwards, open writes aborted) and the
    Airflow connection ``metastore_test`` to the session's metastore."""
    host, port = metastore_uri.removeprefix("thrift://").rsplit(":", 1)
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}",
        json.dumps({"conn_type": "hive_metastore", "host": host, "port": int(port)}),
    )
    name = f"op_{uuid.uuid4().hex[:8]}"
    with MetastoreClient(metastore_uri) as client:
        warehouse = Warehouse(client, metastore_uri, name, tmp_path / "wh" / name)
        try:
            yield warehouse
        finally:
            warehouse.cleanup()


def open_txns(uri: str) -> dict[int, str]:
    """The metastore's open and aborted transactions, from a client of its own: ``{id: state}``.

    ``get_open_txns_info`` (Hive 4's ``get_open_txns`` leaves read-only transactions out)."""
    from hive_metastore.ttypes import TxnState

    with MetastoreClient(uri) as other:
        infos = other.open_transactions().values()
    return {i.id: TxnState._VALUES_TO_NAMES[i.state].lower() for i in infos}


def try_numbers(run, task_id: str) -> dict[int, int]:
    """``{map index: try number}`` of a task's instances in ``run``."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(
            dag_id=run.dag_id, run_id=run.run_id, task_id=task_id
        )
        return {ti.map_index: ti.try_number for ti in tis}


def new_dag(prefix: str):
    from airflow.sdk import DAG

    return DAG(dag_id=f"{prefix}_{uuid.uuid4().hex[:8]}", schedule=None)


# -- a. by name vs storage-only -------------------------------------------------------------


def test_by_name_reads_committed_writes_storage_only_reads_every_write(
    airflow_db, warehouse, tmp_path
):
    from airflow.sdk import TaskGroup

    from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks

    table = warehouse.table("sales")
    writer = table.writer
    by_name_out, storage_out = tmp_path / "by-name", tmp_path / "storage-only"
    with new_dag("by_name_and_storage_only") as dag:
        with TaskGroup("by_name"):
            acid_snapshot_tasks(
                table=table.name, metastore_conn_id=CONN_ID, output_uri=str(by_name_out)
            )
        with TaskGroup("storage_only"):
            acid_snapshot_tasks(table_uri=writer.path, output_uri=str(storage_out))

    run = register(dag, tmp_path).test()
    assert run.state == "success", states(run)

    # By name, no write-id list given: the metastore's view (write 4 aborted, 5 open).
    view = read_view(warehouse.client, table.name)
    assert (view.write_ids.aborted_ids, view.write_ids.open_ids) == ((4,), (5,))
    manifest = xcom(run, "by_name.manifest")
    assert manifest["table_name"] == table.name
    assert manifest["metastore"] == warehouse.uri
    assert manifest["write_ids"] == str(view.write_ids)
    assert ValidTxnList.parse(manifest["txns"]).is_valid(writer.history.writes[3].txn_id)
    assert manifest["warnings"] == []
    committed = writer.expected_rows(manifest["write_ids"])
    assert committed_rows(by_name_out) == as_tuples(committed) == as_tuples(writer.expected_rows())
    commit = xcom(run, "by_name.commit")
    assert (commit["table_name"], commit["warnings"]) == (table.name, [])
    assert xcom(run, "by_name.publish_metrics")["table"] == table.name

    # The same folder storage-only: every write on storage, aborted and open ones included,
    # and the warning (naming the write-id list) in the manifest, the XComs and the snapshot.
    every = storage_only_rows(writer)
    assert committed_rows(storage_out) == as_tuples(every)
    assert len(every) > len(committed)
    manifest = xcom(run, "storage_only.manifest")
    assert (manifest["table_name"], manifest["metastore"], manifest["write_ids"]) == (
        None,
        None,
        None,
    )
    assert manifest["warnings"] == [STORAGE_ONLY_WARNING] and "write-id" in STORAGE_ONLY_WARNING
    written = json.loads(Path(manifest["manifest_uri"]).read_text())
    assert written["warnings"] == [STORAGE_ONLY_WARNING]
    assert xcom(run, "storage_only.plan", key="warnings") == [STORAGE_ONLY_WARNING]
    assert xcom(run, "storage_only.commit")["warnings"] == [STORAGE_ONLY_WARNING]
    assert committed_source(storage_out)["warnings"] == [STORAGE_ONLY_WARNING]
    assert committed_source(by_name_out)["warnings"] == []


# -- b. one pinned view for the whole fan-out -------------------------------------------------


def test_writes_committed_after_the_manifest_reach_no_bucket(airflow_db, warehouse, tmp_path):
    from airflow.sdk import task

    from airflow_provider_acid.operators.acid import (
        AcidCommitSnapshotOperator,
        AcidCompactOperator,
        AcidPlanSnapshotOperator,
        AcidSliceManifestOperator,
    )

    table = warehouse.table("orders")
    writer = table.writer
    out = tmp_path / "out"
    new_ids: list[int] = []

    def commit_a_write(first: int) -> int:
        """Through the metastore: new rows in every slice, and deletes of pinned rows."""
        write = writer.begin()
        write.insert([row(i, "late") for i in range(first, first + 40)])
        write.delete(lambda r: r["id"] % 13 == 0 and r["id"] < 300)
        write.commit()
        new_ids.extend(range(first, first + 40))
        return write.write_id

    with new_dag("pinned_view") as dag:
        manifest = AcidSliceManifestOperator(
            task_id="manifest", table=table.name, metastore_conn_id=CONN_ID, output_uri=str(out)
        )

        @task
        def write_before_the_plan() -> int:
            writer.commit(5)  # the write open when the view was pinned commits now
            new_ids.extend(range(2000, 2030))
            return commit_a_write(5000)

        plan = AcidPlanSnapshotOperator(
            task_id="plan", manifest=manifest.output, output_uri=str(out)
        )

        @task
        def write_during_the_fan_out() -> int:
            return commit_a_write(6000)

        compact = AcidCompactOperator.partial(
            task_id="compact", output_uri=str(out), snapshot_id=plan.output["snapshot_id"]
        ).expand(slice_key=plan.output)
        AcidCommitSnapshotOperator(
            task_id="commit",
            output_uri=str(out),
            snapshot_id=plan.output["snapshot_id"],
            bucket_results=compact.output,
        )
        manifest >> write_before_the_plan() >> plan >> write_during_the_fan_out() >> compact

    run = register(dag, tmp_path).test()
    assert run.state == "success", states(run)
    late = [xcom(run, "write_before_the_plan"), xcom(run, "write_during_the_fan_out")]
    pinned = xcom(run, "manifest")
    assert late == [6, 7] and pinned["write_ids"].split(":")[1] == "5"  # hwm 5, 5 open

    # The writes are committed in the metastore and on storage in every slice...
    now = read_view(warehouse.client, table.name).write_ids
    assert all(now.is_valid(w) for w in [5, *late])
    slices = xcom(run, "plan")
    assert len(slices) == 4  # 2 days x 2 buckets
    on_storage = writer.list_files()
    for day in DAYS:
        for bucket in range(2):
            for w in late:
                assert f"dt={day}/delta_{w:07d}_{w:07d}_0000/bucket_{bucket:05d}" in on_storage

    # ... yet the snapshot is exactly the pinned view's rows, in every bucket.
    expected = as_tuples(writer.expected_rows(pinned["write_ids"]))
    assert committed_rows(out) == expected != as_tuples(writer.expected_rows())
    snapshot = latest_snapshot(str(out))
    assert sorted(b.slice_key for b in snapshot.buckets) == sorted(slices)
    for bucket in snapshot.buckets:
        paths = [str(out / f.path) for f in bucket.files]
        ids = set(ds.dataset(paths, format="parquet").to_table().column("id").to_pylist())
        assert ids and not ids & set(new_ids), bucket.slice_key
    assert {r[0] for r in expected if r[0] % 13 == 0}  # rows the late writes deleted are there

    # The committed snapshot records the pinned view it was read with.
    source = committed_source(out)
    assert source["write_ids"] == pinned["write_ids"]
    assert source["txns"] == pinned["txns"]
    assert source["definition"]["name"] == table.name
    assert source["definition"]["metastore"] == warehouse.uri


# -- c. Hive's Cleaner during the fan-out -----------------------------------------------------


def test_a_file_the_cleaner_removed_fails_the_slice_and_the_next_run_replans(
    airflow_db, warehouse, tmp_path, capfd
):
    import datetime as dt

    from airflow.sdk import task

    from airflow_provider_acid.operators.acid import (
        AcidCommitSnapshotOperator,
        AcidCompactOperator,
        AcidPlanSnapshotOperator,
        AcidSliceManifestOperator,
    )

    table = warehouse.table("events", open_write=False)
    writer = table.writer
    out = tmp_path / "out"
    removed: list[str] = []

    with new_dag("cleaner") as dag:
        manifest = AcidSliceManifestOperator(
            task_id="manifest", table=table.name, metastore_conn_id=CONN_ID, output_uri=str(out)
        )
        plan = AcidPlanSnapshotOperator(
            task_id="plan", manifest=manifest.output, output_uri=str(out)
        )

        @task
        def compact_and_clean() -> list[str]:
            """A major compaction commits through the metastore; then Hive's Cleaner deletes
            the deltas the new base made obsolete."""
            gone = []
            for base in writer.compact_major():
                top = int(re.search(r"base_(\d+)_v", base).group(1))
                partition = Path(base).parent
                for folder in partition.iterdir():
                    found = re.fullmatch(r"(?:delete_)?delta_(\d+)_(\d+)(?:_\d+)?", folder.name)
                    if found and int(found.group(2)) <= top:
                        gone += [str(p.relative_to(writer.path)) for p in folder.iterdir()]
                        shutil.rmtree(folder)
            removed.extend(gone)
            return gone

        compact = AcidCompactOperator.partial(
            task_id="compact",
            output_uri=str(out),
            snapshot_id=plan.output["snapshot_id"],
            retries=2,  # not used: a task retry cannot bring the files back
            retry_delay=dt.timedelta(0),
        ).expand(slice_key=plan.output)
        AcidCommitSnapshotOperator(
            task_id="commit",
            output_uri=str(out),
            snapshot_id=plan.output["snapshot_id"],
            bucket_results=compact.output,
        )
        plan >> compact_and_clean() >> compact

    register(dag, tmp_path)
    first = dag.test()
    ran = states(first)
    assert first.state == "failed", ran
    mapped = {t: s for t, s in ran.items() if t.startswith("compact[")}
    assert len(mapped) == 4 and set(mapped.values()) == {"failed"}, ran
    assert ran["commit"] == "upstream_failed"
    assert set(try_numbers(first, "compact").values()) == {1}  # failed at once, no retries
    assert latest_snapshot(str(out)) is None  # nothing committed
    printed = capfd.readouterr()
    output = printed.out + printed.err
    assert "SourceChangedError" in output
    assert "must be re-planned" in output
    assert removed and any(f in output for f in removed), removed
    first_view = xcom(first, "manifest")

    # A new run re-plans: a new view, which sees the compactor's base.
    second = dag.test()
    assert second.state == "success", states(second)
    assert xcom(second, "compact_and_clean") == []  # nothing left to compact or clean
    again = xcom(second, "manifest")
    assert again["txns"] != first_view["txns"]
    assert committed_rows(out) == as_tuples(writer.expected_rows())
    assert committed_source(out)["txns"] == again["txns"]


def test_the_cleaner_between_manifest_and_plan_fails_the_plan(airflow_db, warehouse, tmp_path):
    from airflow.sdk import task

    from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks

    table = warehouse.table("late_clean", fill=False)
    writer = table.writer
    writer.insert([row(i) for i in range(200)])  # 1
    writer.delete(lambda r: r["id"] % 7 == 0)  # 2
    still_open = writer.begin()  # 3, open while the view is pinned
    still_open.insert([row(i, "open") for i in range(2000, 2010)])
    writer.insert([row(i) for i in range(3000, 3040)])  # 4, in every slice
    out = tmp_path / "out"

    with new_dag("clean_before_plan") as dag:
        tasks = acid_snapshot_tasks(
            table=table.name, metastore_conn_id=CONN_ID, output_uri=str(out)
        )

        @task
        def compact_and_clean() -> None:
            for base in writer.compact_major():  # base_2_vT: below the open write
                top = int(re.search(r"base_(\d+)_v", base).group(1))
                for folder in Path(base).parent.iterdir():
                    found = re.fullmatch(r"(?:delete_)?delta_(\d+)_(\d+)(?:_\d+)?", folder.name)
                    if found and int(found.group(2)) <= top:
                        shutil.rmtree(folder)

        tasks.manifest >> compact_and_clean() >> tasks.plan

    run = register(dag, tmp_path).test()
    # The view's files are gone: the plan refuses (re-plan) rather than plan what is left.
    assert run.state == "failed"
    assert states(run)["plan"] == "failed" and latest_snapshot(str(out)) is None
    from airflow_provider_acid.engine.compaction import SourceChangedError
    from airflow_provider_acid.engine.manifest_compaction import plan_from_manifest

    with pytest.raises(SourceChangedError, match=r"delta_0000001_0000001_0000/bucket_.*re-planned"):
        plan_from_manifest(xcom(run, "manifest")["manifest_uri"], str(tmp_path / "again"))


# -- d. one process holds a read transaction --------------------------------------------------


def test_whole_snapshot_compaction_holds_a_read_transaction(
    airflow_db, warehouse, tmp_path, monkeypatch
):
    from airflow_provider_acid.metastore import transactions
    from airflow_provider_acid.operators import acid as operators

    table = warehouse.table("visits")
    writer = table.writer
    held: list[transactions.ReadTransaction] = []
    seen_while_reading: list[dict[str, Any]] = []

    class ObservedReadTransaction(transactions.ReadTransaction):
        def open(self) -> int:
            held.append(self)
            return super().open()

    real_compact_table = operators.compact_table

    def observed_compact_table(source, out, **kwargs):
        """Look from another client, while the table is read, at the reader's transaction."""
        seen_while_reading.append(
            {
                "txn": held[-1].txn_id if held else None,
                "open": open_txns(warehouse.uri),
                "source_txns": source.txns,
            }
        )
        return real_compact_table(source, out, **kwargs)

    monkeypatch.setattr(transactions, "ReadTransaction", ObservedReadTransaction)
    monkeypatch.setattr(operators, "compact_table", observed_compact_table)
    with new_dag("read_transaction") as dag:
        by_name_task = operators.AcidCompactOperator(
            task_id="by_name",
            table=table.name,
            metastore_conn_id=CONN_ID,
            output_uri=str(tmp_path / "by-name"),
        )
        by_name_task >> operators.AcidCompactOperator(
            task_id="storage_only", table_uri=writer.path, output_uri=str(tmp_path / "storage")
        )
    run = register(dag, tmp_path).test()
    assert run.state == "success", states(run)

    # One read transaction, open (seen from another client) while the table was read ...
    (txn,) = held
    by_name, storage_only = seen_while_reading
    assert by_name["txn"] == txn.txn_id and by_name["open"].get(txn.txn_id) == "open"
    # ... left out of the reader's own transaction list (it writes nothing) ...
    txns = ValidTxnList.parse(by_name["source_txns"])
    assert txns.high_watermark >= txn.txn_id and txn.txn_id not in txns.open_ids
    # ... and committed once the snapshot was: neither open nor aborted any more.
    assert txn._client.calls == ["open_txns", "commit_txn"]
    assert txn.txn_id not in open_txns(warehouse.uri)
    assert storage_only["txn"] == txn.txn_id  # storage-only opened none

    summary = xcom(run, "by_name")
    assert (summary["table_name"], summary["warnings"]) == (table.name, [])
    assert summary["txns"] == by_name["source_txns"]
    assert committed_rows(tmp_path / "by-name") == as_tuples(writer.expected_rows())
    storage = xcom(run, "storage_only")
    assert storage["table_name"] is None and storage["warnings"] == [STORAGE_ONLY_WARNING]
    assert committed_rows(tmp_path / "storage") == as_tuples(storage_only_rows(writer))


# -- e. bad input: one clear error each, nothing written -------------------------------------


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "case",
    [
        "unknown table",
        "unknown database",
        "not transactional",
        "refused connection",
        "write-id list of another table",
        "location missing",
        "refused connection, whole snapshot",
    ],
)
def test_bad_input_fails_with_one_clear_error_and_writes_nothing(
    airflow_db, warehouse, tmp_path, monkeypatch, capfd, case
):
    import datetime as dt

    from airflow_provider_acid.operators.acid import AcidCompactOperator
    from airflow_provider_acid.operators.snapshot_tasks import acid_snapshot_tasks

    out = tmp_path / "out"
    conn_id, write_ids, retries = CONN_ID, None, 0
    if case == "unknown table":
        warehouse.table("exists", fill=False)
        name = f"{warehouse.name}.no_such_table"
        expect = [f"{warehouse.name}.no_such_table", "TableNotFoundError"]
    elif case == "unknown database":
        name = f"no_db_{uuid.uuid4().hex[:6]}.sales"
        expect = [name.split(".")[0], "TableNotFoundError"]
    elif case == "not transactional":
        writer = AcidTableWriter(
            str(warehouse.folder / "plain"),
            COLUMNS,
            database=warehouse.name,
            table_name="plain",
        )
        warehouse.table("first", fill=False)  # creates the database
        create_table(warehouse.client, thrift_table(writer, transactional=False))
        name = f"{warehouse.name}.plain"
        expect = [name, "NotTransactionalError", "not transactional"]
    elif case.startswith("refused connection"):
        port = _closed_port()
        conn_id = "metastore_closed"
        monkeypatch.setenv(
            "AIRFLOW_CONN_METASTORE_CLOSED",
            json.dumps({"conn_type": "hive_metastore", "host": "127.0.0.1", "port": port}),
        )
        name, retries = f"{warehouse.name}.sales", 1
        expect = [f"127.0.0.1:{port}", "MetastoreConnectionError"]
    elif case == "write-id list of another table":
        table = warehouse.table("mine", fill=False)
        table.writer.insert([row(i) for i in range(20)])
        name, write_ids = table.name, f"{warehouse.name}.other:1:9223372036854775807::"
        expect = [f"{warehouse.name}.other", "WriteIdListMismatchError"]
    elif case == "location missing":
        table = warehouse.table("moved", fill=False)
        table.writer.insert([row(i) for i in range(20)])
        shutil.rmtree(table.writer.path)
        name = table.name
        expect = [name, table.writer.path, "TableLocationMissingError"]
    else:
        raise AssertionError(case)

    with new_dag("bad_input") as dag:
        if case.endswith("whole snapshot"):
            first = AcidCompactOperator(
                task_id="manifest",
                table=name,
                metastore_conn_id=conn_id,
                output_uri=str(out),
                retries=retries,
                retry_delay=dt.timedelta(0),
            )
        else:
            first = acid_snapshot_tasks(
                table=name,
                metastore_conn_id=conn_id,
                output_uri=str(out),
                valid_write_ids=write_ids,
                manifest_kwargs={"retries": retries, "retry_delay": dt.timedelta(0)},
            ).manifest
    run = register(dag, tmp_path).test()
    ran = states(run)
    assert run.state == "failed", ran
    assert ran["manifest"] == "failed", ran
    assert all(s == "upstream_failed" for t, s in ran.items() if t != "manifest"), ran
    if retries:  # a ConnectionError: Airflow's retries apply (no AirflowFailException)
        assert try_numbers(run, first.task_id) == {-1: 2}
    assert files_under(out) == []  # nothing written
    printed = capfd.readouterr()
    output = printed.out + printed.err
    for text in expect:
        assert text in output, text
    assert "AirflowFailException" not in output


# -- the example DAGs by name -----------------------------------------------------------------


def test_on_demand_dag_by_name(airflow_db, warehouse, tmp_path, monkeypatch):
    from test_example_dags import load_dag

    table = warehouse.table("trips")
    writer = table.writer
    out = tmp_path / "out"
    # UI-triggered runs read and write only below the allowed prefixes, by name too
    monkeypatch.setenv("AIRFLOW__ACID__ALLOWED_URI_PREFIXES", f"{tmp_path}/")
    run = load_dag("acid_snapshot_on_demand").test(
        run_conf={
            "table": table.name,
            "metastore_conn_id": CONN_ID,
            "table_uri": "",
            "output_uri": str(out),
            "predicate": "amount >= 20 AND dt = '2024-01-02'",
            "valid_write_ids": "",
            "acid_conn_id": "",
            "wait_above_write_id": 0,
        }
    )
    ran = states(run)
    assert run.state == "success", ran
    assert (ran["wait_for_commits"], ran["wait_for_deltas"]) == ("success", "skipped")
    assert xcom(run, "wait_for_commits")["write_ids"] == [1, 2, 3]  # 4 aborted, 5 open
    manifest = xcom(run, "manifest")
    assert manifest["table_name"] == table.name and manifest["warnings"] == []
    assert manifest["metrics"]["partitions_kept"] == 1  # pruned by name, before any listing
    expected = [r for r in as_tuples(writer.expected_rows()) if r[2] >= 20 and r[3] == DAYS[1]]
    assert expected and committed_rows(out) == expected


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"table_uri": "/somewhere/else"}, "exactly one of them"),
        ({"table": "", "table_uri": ""}, "exactly one of them"),
        ({"predicate": "no_such_column = 1"}, "no_such_column"),
        ({"table": "nope.missing"}, "table nope.missing not found"),
        ({"valid_write_ids": "other.t:1:9223372036854775807::"}, "is for table other.t"),
        ({"allowed": "out"}, "refused's table location"),  # the metastore's location too
    ],
)
def test_on_demand_dag_by_name_refuses_bad_input_before_any_work(
    airflow_db, warehouse, tmp_path, monkeypatch, capfd, change, message
):
    from test_example_dags import load_dag

    table = warehouse.table("refused", fill=False)
    table.writer.insert([row(i) for i in range(10)])
    out = tmp_path / "out"
    allowed = str(out) if change.pop("allowed", None) else f"{tmp_path}/"
    monkeypatch.setenv("AIRFLOW__ACID__ALLOWED_URI_PREFIXES", allowed)
    change = dict(change)
    conf = {
        "table": table.name,
        "metastore_conn_id": CONN_ID,
        "table_uri": "",
        "output_uri": str(out),
        "predicate": "",
        "valid_write_ids": "",
        "acid_conn_id": "",
        "wait_above_write_id": 0,
        **change,
    }
    run = load_dag("acid_snapshot_on_demand").test(run_conf=conf)
    ran = states(run)
    assert run.state == "failed", ran
    assert ran["validate"] == "failed" and ran["manifest"] == "upstream_failed", ran
    assert not out.exists()  # nothing written
    printed = capfd.readouterr()
    assert message in printed.out + printed.err


def test_scheduled_dag_by_name_from_the_environment(airflow_db, warehouse, tmp_path, monkeypatch):
    """ACID_TABLE and ACID_METASTORE_CONN_ID make the scheduled DAG read by name: it waits for
    commits in the metastore, and its snapshot holds the committed rows only."""
    import datetime as dt
    import importlib.util

    table = warehouse.table("daily")
    writer = table.writer
    out = tmp_path / "snapshots"
    monkeypatch.setenv("ACID_TABLE", table.name)
    monkeypatch.setenv("ACID_METASTORE_CONN_ID", CONN_ID)
    path = Path(__file__).resolve().parents[2] / "dags" / "acid_snapshot_materialisation.py"
    spec = importlib.util.spec_from_file_location(f"by_name_{uuid.uuid4().hex[:8]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = module.dag
    assert "table_uri" not in dag.params and dag.params["table"] == table.name

    run = dag.test(
        run_conf={"output_uri": str(out)},
        logical_date=dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc),
    )
    ran = states(run)
    assert run.state == "success", ran
    assert "wait_for_deltas" not in ran and ran["wait_for_commits"] == "success"
    manifest = xcom(run, "manifest")
    assert (manifest["table_name"], manifest["metastore"]) == (table.name, warehouse.uri)
    assert manifest["warnings"] == []
    assert committed_rows(out) == as_tuples(writer.expected_rows())
    assert xcom(run, "publish_metrics")["table"] == table.name
