"""Tables read by name through a real Hive Metastore: views, schema, partitions, listing, errors.

Every table here is created through the metastore's API and written by the simulator under the
metastore's transactions and write ids (``metastore_db`` in conftest.py).
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from fsspec.implementations.local import LocalFileSystem
from thrift.Thrift import TApplicationException

from airflow_provider_acid import cli
from airflow_provider_acid.acid.resolution import resolve_read_view
from airflow_provider_acid.acid.source import STORAGE_ONLY_WARNING
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.sources import open_source
from airflow_provider_acid.metastore import (
    MetastoreClient,
    MetastoreConnectionError,
    NotTransactionalError,
    ReadTransaction,
    TableLocationMissingError,
    TableNotFoundError,
    WriteIdListMismatchError,
    open_table,
)
from airflow_provider_acid.pruning.manifest import compute_manifest
from airflow_provider_acid.testing.metastore_tables import create_table, thrift_table


def _rows(out: Path) -> pa.Table:
    return ds.dataset(str(out), format="parquet").to_table()


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.fixture
def sales(metastore_db):
    """``sales(id bigint, name string) PARTITIONED BY (dt string)``, 2 buckets by id: two
    committed inserts, a delete, one aborted insert and one left open (files on storage)."""
    writer = metastore_db.writer(
        "sales", [("id", "bigint"), ("name", "string")], [("dt", "string")], buckets=2,
        bucket_by="id",
    )  # fmt: skip
    registered = metastore_db.register(writer)
    days = ("2024-01-01", "2024-01-02")
    writer.insert([{"id": i, "name": f"n{i}", "dt": days[i % 2]} for i in range(40)])
    writer.insert([{"id": i, "name": f"n{i}", "dt": days[i % 2]} for i in range(40, 60)])
    writer.delete(lambda r: r["id"] % 5 == 0)
    aborted = writer.begin()
    aborted.insert([{"id": 1000 + i, "name": "aborted", "dt": days[i % 2]} for i in range(6)])
    aborted.abort()
    in_flight = writer.begin()  # stays open: its files are on storage, half a write
    in_flight.insert([{"id": 2000 + i, "name": "open", "dt": days[i % 2]} for i in range(4)])
    return registered


def test_by_name_reads_the_committed_rows_and_storage_only_reads_everything(sales, tmp_path):
    writer = sales.writer
    committed = _ids(writer.expected_rows(str(sales.read_view().write_ids)))
    assert len(committed) == 48  # 60 inserted, 12 deleted; aborted and open rows not counted

    by_name = compact_table(open_table(sales.client, sales.name), str(tmp_path / "by_name"))
    assert _ids(_rows(tmp_path / "by_name")) == committed
    assert by_name.write_ids == str(sales.read_view().write_ids)  # recorded in the manifest
    assert by_name.definition["name"] == sales.name and by_name.warnings == ()

    storage_only = compact_table(writer.path, str(tmp_path / "storage_only"))
    assert len(_ids(_rows(tmp_path / "storage_only"))) == 48 + 6 + 4  # aborted and open too
    assert storage_only.warnings == (STORAGE_ONLY_WARNING,) and "write-id" in STORAGE_ONLY_WARNING
    manifest = json.loads(Path(storage_only.manifest_path).read_text())
    assert manifest["source"]["warnings"] == [STORAGE_ONLY_WARNING]


def test_the_read_view_pins_what_later_commits_do_not_change(sales, tmp_path):
    source = open_table(sales.client, sales.name)
    sales.writer.insert([{"id": 5000, "name": "late", "dt": "2024-01-01"}])  # after the view
    compact_table(source, str(tmp_path / "out"))
    ids = _ids(_rows(tmp_path / "out"))
    assert 5000 not in ids and len(ids) == 48


def test_schema_and_partition_types_come_from_the_metastore(metastore_db, tmp_path):
    writer = metastore_db.writer(
        "events", [("id", "int"), ("amount", "decimal(10,2)"), ("code", "varchar(8)")],
        [("dt", "string")],
    )  # fmt: skip
    registered = metastore_db.register(writer)
    writer.insert([{"id": 1, "amount": "1.50", "code": "a", "dt": "2024-01-02"}])
    source = open_table(metastore_db.client, registered.name)
    assert source.definition.columns == (
        ("id", "int"), ("amount", "decimal(10,2)"), ("code", "varchar(8)")
    )  # fmt: skip

    compact_table(source, str(tmp_path / "by_name"))
    schema = _rows(tmp_path / "by_name").schema
    assert schema.field("dt").type == pa.string()  # looks like a date, is a string in Hive
    assert schema.field("code").metadata[b"hive_type"] == b"varchar(8)"
    assert schema.field("amount").type == pa.decimal128(10, 2)

    compact_table(writer.path, str(tmp_path / "guessed"))  # storage-only guesses from names
    assert _rows(tmp_path / "guessed").schema.field("dt").type == pa.date32()

    manifest = compute_manifest(source, "dt = '2024-01-02'")  # binds to the string column
    assert manifest.metrics.partitions_kept == 1


@pytest.fixture
def many_partitions(metastore_db):
    writer = metastore_db.writer("wide", [("id", "bigint")], [("p", "int")])
    registered = metastore_db.register(writer)
    writer.insert([{"id": i, "p": i} for i in range(500)])
    return registered


def test_only_the_kept_partitions_are_listed(many_partitions, monkeypatch):
    listed: list[tuple[str, str]] = []  # (call, path): every listing call fsspec makes
    for name in ("find", "ls", "walk"):
        original = getattr(LocalFileSystem, name)

        def spy(self, path, *args, _original=original, _name=name, **kwargs):
            listed.append((_name, self._strip_protocol(path)))
            return _original(self, path, *args, **kwargs)

        monkeypatch.setattr(LocalFileSystem, name, spy)
    source = open_source(
        table=many_partitions.name, metastore=many_partitions.client, where="p = 7 AND id >= 0"
    )
    manifest = compute_manifest(source, "p = 7 AND id >= 0")

    kept = many_partitions.partition_locations[7].removeprefix("file:")
    paths = [path for _, path in listed]
    assert paths and all(p == kept or p.startswith(kept + "/") for p in paths), listed
    assert [path for call, path in listed if call == "find"] == [kept]  # one recursive listing
    assert manifest.metrics.partitions_total == 500 and manifest.metrics.partitions_kept == 1
    assert [s.partition for s in manifest.slices] == ["p=7"]
    assert many_partitions.client.calls.count("get_partitions_by_names_req") == 1


def test_a_partition_outside_the_table_folder_is_read(metastore_db, tmp_path):
    writer = metastore_db.writer("split", [("id", "bigint")], [("dt", "string")])
    registered = metastore_db.register(writer)
    outside = tmp_path / "elsewhere" / "dt=2023-12-31"
    registered.add_external_partition({"dt": "2023-12-31"}, str(outside))
    writer.insert([{"id": i, "dt": "2023-12-31" if i < 3 else "2024-01-01"} for i in range(10)])
    assert any(outside.rglob("bucket_*"))  # its files really are outside the table's folder

    compact_table(open_table(metastore_db.client, registered.name), str(tmp_path / "out"))
    rows = _rows(tmp_path / "out")
    assert _ids(rows) == list(range(10))
    assert sorted(set(rows.column("dt").to_pylist())) == ["2023-12-31", "2024-01-01"]
    # storage-only, from the table's folder, those rows are simply not there
    assert len(resolve_read_view(writer.path).partitions) == 1


def test_both_api_forms_read_the_same_definition(sales):
    definitions = {}
    for api in ("hive3", "hive4", "auto"):
        with MetastoreClient(sales.client.address, api=api) as client:
            definitions[api] = open_table(client, sales.name).definition
            calls = set(client.calls)
        if api == "hive3":
            assert "get_partitions_by_names" in calls and "get_partitions_by_names_req" not in calls
        else:
            assert "get_partitions_by_names_req" in calls
    assert definitions["hive3"] == definitions["hive4"] == definitions["auto"]
    assert [p.name for p in definitions["auto"].partitions] == ["dt=2024-01-01", "dt=2024-01-02"]


def test_a_method_the_metastore_lacks_falls_back_to_the_other_form(metastore_uri):
    # Hive 4 removed get_table: it answers UNKNOWN_METHOD, the answer "auto" falls back on.
    with MetastoreClient(metastore_uri) as client:
        with pytest.raises(TApplicationException) as raised:
            client._call("get_table", "default", "nothing")
        assert raised.value.type == TApplicationException.UNKNOWN_METHOD
        answer = client._either(
            "get_table", lambda: client._call("get_table", "default", "x"),
            "get_all_databases", lambda: client._call("get_all_databases"),
        )  # fmt: skip
        assert "default" in answer and "get_table" in client._legacy


def test_unknown_tables_and_databases_are_named(metastore_db):
    with pytest.raises(TableNotFoundError, match=rf"{metastore_db.name}\.nothing"):
        open_table(metastore_db.client, f"{metastore_db.name}.nothing")
    with pytest.raises(TableNotFoundError, match=r"no_such_db\.t"):
        open_table(metastore_db.client, "no_such_db.t")


def test_a_table_that_is_not_transactional_is_refused(metastore_db, tmp_path):
    writer = metastore_db.writer("plain", [("id", "bigint")])
    create_table(metastore_db.client, thrift_table(writer, transactional=False))
    with pytest.raises(NotTransactionalError, match=rf"{metastore_db.name}\.plain is not trans"):
        compact_table(
            open_table(metastore_db.client, f"{metastore_db.name}.plain"), str(tmp_path / "o")
        )
    assert not (tmp_path / "o").exists()  # nothing written


def test_a_refused_connection_names_host_and_port(tmp_path):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(MetastoreConnectionError, match=rf"127\.0\.0\.1:{port}") as raised:
        open_source(table="db.t", metastore=f"thrift://127.0.0.1:{port}")
    assert isinstance(raised.value, ConnectionError)  # transient: Airflow's retries apply


def test_a_missing_table_location_is_named(sales):
    shutil.rmtree(sales.writer.path)
    with pytest.raises(TableLocationMissingError, match=f"{sales.name}.*does not exist"):
        open_table(sales.client, sales.name)


def test_a_write_id_list_of_another_table_is_refused(sales):
    with pytest.raises(WriteIdListMismatchError, match="other.table"):
        open_source(
            table=sales.name,
            metastore=sales.client,
            write_ids="other.table:5:9223372036854775807::",
        )


def test_a_read_transaction_is_held_with_heartbeats_then_committed(metastore_uri):
    import time

    from hive_metastore.ttypes import TxnState

    with MetastoreClient(metastore_uri) as observer:
        with ReadTransaction(metastore_uri, interval=0.2) as txn:
            time.sleep(0.7)
            held = observer.open_transactions()[txn.txn_id]
            assert held.state == TxnState.OPEN
            assert held.lastHeartbeatTime > held.startedTime  # the heartbeats reached it
            # read-only: not an exception in anybody's read view (it writes nothing)
            assert txn.txn_id not in (observer.get_open_txns().open_txns or [])
        assert txn.heartbeats >= 2
        assert txn.txn_id not in observer.open_transactions()  # committed
        with pytest.raises(RuntimeError, match="the read failed"):
            with ReadTransaction(metastore_uri) as failed:
                raise RuntimeError("the read failed")
        assert failed.txn_id not in observer.open_transactions() or (
            observer.open_transactions()[failed.txn_id].state == TxnState.ABORTED
        )


def test_the_cli_reads_by_name_and_warns_storage_only(sales, tmp_path, capsys):
    uri = sales.client.address.uri
    args = ["compact", "--metastore", uri, "--table", sales.name, "--json", "-q"]
    assert cli.main([*args, "--out", str(tmp_path / "by_name")]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err
    summary = json.loads(captured.out)
    assert summary["manifest"]["source"]["definition"]["name"] == sales.name
    assert len(_rows(tmp_path / "by_name")) == 48

    assert cli.main(["compact", sales.writer.path, "--out", str(tmp_path / "s"), "-q"]) == 0
    assert f"warning: {STORAGE_ONLY_WARNING}" in capsys.readouterr().err
    assert len(_rows(tmp_path / "s")) == 58

    assert cli.main(["inspect", "--metastore", uri, "--table", sales.name]) == 0
    report = capsys.readouterr().out
    assert f"name       {sales.name} in {uri} (default, 2 bucket(s) by id)" in report
    assert "2 of 2 partition(s) listed" in report


def test_sasl_plain_when_the_metastore_asks_for_it(sasl_metastore_uri, tmp_path):
    from metastore_fixtures import SASL_PASSWORD, SASL_USER

    from airflow_provider_acid.metastore import MetastoreAddress, MetastoreAuthenticationError

    host_port = sasl_metastore_uri.removeprefix("thrift://")
    address = MetastoreAddress.parse(
        f"thrift://{SASL_USER}@{host_port}?auth=PLAIN", password=SASL_PASSWORD
    )
    with MetastoreClient(address) as client:
        assert "default" in client.databases()
        txn = client.open_txns(1, read_only=True)[0]
        client.commit_txn(txn)
    assert SASL_PASSWORD not in repr(address) and SASL_PASSWORD not in address.uri

    wrong = MetastoreAddress.parse(sasl_metastore_uri, auth="PLAIN", user=SASL_USER, password="x")
    with pytest.raises(MetastoreAuthenticationError, match=f"{host_port}.*{SASL_USER}"):
        MetastoreClient(wrong).open()
    with pytest.raises(MetastoreConnectionError, match=host_port):  # plain Thrift: refused
        with MetastoreClient(sasl_metastore_uri) as client:
            client.databases()


def test_a_missing_partition_folder_is_named_not_skipped(sales, tmp_path):
    from airflow_provider_acid.acid.listing import TableLocationError

    shutil.rmtree(Path(sales.writer.path) / "dt=2024-01-02")
    with pytest.raises(TableLocationError, match=r"partition dt=2024-01-02 of table .*sales"):
        compact_table(open_table(sales.client, sales.name), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
