"""The simulator writing tables registered in a real Hive Metastore, under its write ids.

No fake metastore: the tables are created through the metastore's API, the transactions are
opened, committed and aborted there and the write ids allocated there; the simulator writes the
files under those ids. Then the reader's two ways in are checked against the simulator: by name
(``open_table``: the metastore's view) and storage-only (every write on storage as committed).
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.metastore import NotTransactionalError, open_table, read_view
from airflow_provider_acid.metastore.tables import partition_name, storage_uri, table_definition
from airflow_provider_acid.testing import generate_demo_table
from airflow_provider_acid.testing.metastore_tables import (
    ORC_INPUT_FORMAT,
    ORC_OUTPUT_FORMAT,
    ORC_SERDE,
    HistoryMismatchError,
    create_table,
    drop_database,
    storage_only_rows,
    thrift_table,
)
from airflow_provider_acid.testing.write_history import WriteState

REPO = Path(__file__).resolve().parents[2]

COLUMNS = [
    ("id", "bigint"),
    ("name", "varchar(20)"),
    ("price", "decimal(10,2)"),
    ("ts", "timestamp"),
    ("tags", "array<string>"),
]
PARTITION_COLUMNS = [("dt", "string"), ("hour", "int")]


def rows(first: int, count: int, dt: str | None = None, hour: int | None = None) -> list[dict]:
    out = []
    for i in range(first, first + count):
        row = {"id": i, "name": f"n{i}", "price": i * 1.25, "ts": None, "tags": [f"t{i % 3}"]}
        if dt is not None:
            row["dt"], row["hour"] = dt, hour
        out.append(row)
    return out


def read_snapshot(result) -> pa.Table:
    return ds.dataset(result.file_paths(), format="parquet").to_table()


def ids(table: pa.Table) -> collections.Counter:
    return collections.Counter(table["id"].to_pylist())


def delta_write_ids(paths: list[str]) -> set[int]:
    """The write ids named by the delta and delete-delta folders among ``paths``."""
    found = set()
    for path in paths:
        for m in re.finditer(r"(?:^|/)(?:delete_)?delta_(\d{7})_(\d{7})_\d{4}(?:/|$)", path):
            assert m.group(1) == m.group(2)
            found.add(int(m.group(1)))
    return found


# -- the table's definition ------------------------------------------------------------------


def test_registered_table_has_the_writer_s_definition(metastore_db, metastore):
    writer = metastore_db.writer("events", COLUMNS, PARTITION_COLUMNS, buckets=4, bucket_by="id")
    registered = metastore_db.register(writer)
    got = metastore.get_table(metastore_db.table_name("events"))
    assert got.tableType == "MANAGED_TABLE"
    assert got.parameters["transactional"] == "true"
    assert got.parameters["transactional_properties"] == "default"
    assert got.parameters["bucketing_version"] == "2"
    assert (got.sd.inputFormat, got.sd.outputFormat) == (ORC_INPUT_FORMAT, ORC_OUTPUT_FORMAT)
    assert got.sd.serdeInfo.serializationLib == ORC_SERDE
    assert storage_uri(got.sd.location) == writer.path
    assert registered.location == got.sd.location

    definition = table_definition(got, metastore_db.uri, [])
    assert definition.name == metastore_db.table_name("events")
    assert definition.location == writer.path
    assert definition.columns == tuple(COLUMNS)
    assert definition.partition_columns == tuple(PARTITION_COLUMNS)
    assert definition.bucket_columns == ("id",)
    assert definition.num_buckets == 4
    assert definition.bucketing_version == 2
    assert definition.transactional_properties == "default"

    # Partitions the writer creates (dynamic and static) are added with their folders.
    writer.insert(rows(1, 5, "2024-01-01", 0) + rows(6, 5, "2024-01-02", 7))
    writer.insert(rows(11, 3), partition={"dt": "2024-01-03", "hour": 23})
    assert sorted(metastore.partition_names(registered.name)) == [
        "dt=2024-01-01/hour=0",
        "dt=2024-01-02/hour=7",
        "dt=2024-01-03/hour=23",
    ]
    names = metastore.partition_names(registered.name)
    located = {
        partition_name(["dt", "hour"], p.values): storage_uri(p.sd.location)
        for p in metastore.partitions_by_names(registered.name, names)
    }
    assert located == {
        f"dt={dt}/hour={hour}": writer.partition_path({"dt": dt, "hour": hour})
        for dt, hour in [("2024-01-01", 0), ("2024-01-02", 7), ("2024-01-03", 23)]
    }


def test_unbucketed_table_records_no_buckets(metastore_db, metastore):
    writer = metastore_db.writer("plain", [("id", "bigint"), ("s", "string")], buckets=2)
    metastore_db.register(writer, bucketing_version=1, extra_params={"comment": "x"})
    got = metastore.get_table(metastore_db.table_name("plain"))
    assert (got.sd.numBuckets, got.sd.bucketCols, got.partitionKeys) == (-1, [], [])
    assert got.parameters["bucketing_version"] == "1"
    assert got.parameters["comment"] == "x"


def test_a_non_transactional_table_is_refused_by_name(metastore_db, metastore):
    writer = metastore_db.writer("not_acid", [("id", "bigint")])
    create_table(metastore, thrift_table(writer, transactional=False))
    with pytest.raises(NotTransactionalError, match="not transactional"):
        open_table(metastore, metastore_db.table_name("not_acid"))


# -- write ids and transactions ---------------------------------------------------------------


def test_file_names_carry_the_metastore_s_write_ids(metastore_db, metastore):
    writer = metastore_db.writer("ids", [("id", "bigint"), ("s", "string")], buckets=2)
    registered = metastore_db.register(writer)
    name = registered.name
    # Another writer took write ids 1 (committed, no files) and 2 (aborted) first: the
    # simulator on its own would number its first write 1.
    txn_a, txn_b = metastore.open_txns(2)
    metastore_db.txns += [txn_a, txn_b]
    assert metastore.allocate_write_ids(name, [txn_a, txn_b]) == {txn_a: 1, txn_b: 2}
    metastore.commit_txn(txn_a)
    metastore.abort_txn(txn_b)

    first = writer.insert([{"id": i, "s": "a"} for i in range(10)])
    second = writer.begin()
    second.insert([{"id": i, "s": "b"} for i in range(10, 15)])
    second.delete(lambda r: r["id"] < 3)
    second.commit()
    third = writer.begin()
    third.insert([{"id": 99, "s": "open"}])

    assert (first.write_id, second.write_id, third.write_id) == (3, 4, 5)
    assert delta_write_ids(writer.list_files()) == {3, 4, 5}
    for write_id in (3, 4, 5):
        txn = writer.history.writes[write_id].txn_id
        assert txn > txn_b
        # The metastore hands an open transaction its table's write id again: it is ours.
        if writer.write_state(write_id) is WriteState.OPEN:
            assert metastore.allocate_write_ids(name, [txn]) == {txn: write_id}
    # (registered.check_view() would fail: the simulator does not know of write ids 1 and 2.)
    view = registered.read_view()
    assert str(view.write_ids) == f"{name}:5:5:5:2"


def test_commits_an_abort_and_an_open_write_are_the_metastore_s_view(metastore_db, metastore):
    writer = metastore_db.writer(
        "view", [("id", "bigint"), ("s", "string")], buckets=2, bucket_by="id"
    )
    registered = metastore_db.register(writer)
    writer.insert([{"id": i, "s": "base"} for i in range(100)])  # 1
    writer.insert([{"id": i, "s": "more"} for i in range(100, 120)])  # 2
    writer.delete(lambda r: r["id"] % 10 == 0)  # 3
    writer.update(lambda r: r["id"] < 5, {"s": "updated"})  # 4
    aborted = writer.begin()  # 5
    aborted.insert([{"id": i, "s": "aborted"} for i in range(1000, 1030)])
    aborted.delete(lambda r: r["id"] < 50)
    aborted.abort()
    still_open = writer.begin()  # 6
    still_open.insert([{"id": i, "s": "open"} for i in range(2000, 2010)])

    view = registered.check_view()
    assert view.write_ids.high_watermark == 6
    assert view.write_ids.open_ids == (6,)
    assert view.write_ids.aborted_ids == (5,)
    assert view.write_ids.min_open_write_id == 6
    assert [w for w in range(1, 7) if view.write_ids.is_valid(w)] == [1, 2, 3, 4]
    history = writer.history
    assert history.writes[6].txn_id in view.txns.open_ids
    assert history.writes[5].txn_id in view.txns.aborted_ids
    assert all(view.txns.is_valid(history.writes[w].txn_id) for w in (1, 2, 3, 4))
    expected = writer.expected_rows(str(view.write_ids))
    assert expected.equals(writer.expected_rows())
    assert expected.num_rows == 120 - 12

    # The compactor's visibility transaction is committed in the metastore: base_4_vT is read.
    (folder,) = writer.compact_major()
    txn = history.compactor_txns[-1]
    assert folder.endswith(f"/base_0000004_v{txn:07d}")
    view = registered.check_view()
    assert view.txns.is_valid(txn)

    source = open_table(metastore, registered.name)
    assert source.write_ids == str(view.write_ids)
    by_name = compact_table(source, str(metastore_db.folder.parent / "by_name"))
    assert ids(read_snapshot(by_name)) == ids(expected)
    on_storage = compact_table(writer.path, str(metastore_db.folder.parent / "storage_only"))
    every = storage_only_rows(writer)
    assert ids(read_snapshot(on_storage)) == ids(every)
    # Storage-only, the aborted write's deletes (of the live ids below 50, in the compactor's
    # base) apply, and the aborted and the open writes' inserts are read as data.
    deleted = collections.Counter(i for i in expected["id"].to_pylist() if i < 50)
    inserted = collections.Counter(list(range(1000, 1030)) + list(range(2000, 2010)))
    assert ids(every) == ids(expected) - deleted + inserted


def test_the_check_sees_a_transaction_ended_behind_the_simulator_s_back(metastore_db, metastore):
    writer = metastore_db.writer("behind", [("id", "bigint")])
    registered = metastore_db.register(writer)
    writer.insert([{"id": 1}])
    txn = writer.begin()
    txn.insert([{"id": 2}])
    registered.check_view()
    metastore.abort_txn(writer.history.writes[txn.write_id].txn_id)
    with pytest.raises(
        HistoryMismatchError, match=r"aborted write ids: metastore \[2\], simulator \[\]"
    ):
        registered.check_view()


def test_a_partition_stored_outside_the_table_s_folder(metastore_db, metastore, tmp_path):
    writer = metastore_db.writer(
        "outside", [("id", "bigint"), ("s", "string")], [("dt", "string")], buckets=2
    )
    registered = metastore_db.register(writer)
    elsewhere = tmp_path / "elsewhere" / "day3"
    location = registered.add_external_partition({"dt": "2024-01-03"}, str(elsewhere))
    assert storage_uri(location) == str(elsewhere)
    writer.insert([{"id": i, "s": "x", "dt": f"2024-01-0{1 + i % 3}"} for i in range(30)])
    writer.delete(lambda r: r["id"] in (2, 5))  # both in dt=2024-01-03
    writer.compact_minor({"dt": "2024-01-03"})

    assert writer.partition_path({"dt": "2024-01-03"}) == str(elsewhere)
    assert not any(f.startswith("dt=2024-01-03") for f in writer.list_files())
    outside = sorted(p.relative_to(elsewhere).as_posix() for p in elsewhere.rglob("bucket_*"))
    assert outside and all(p.split("/")[0].startswith(("delta_", "delete_delta_")) for p in outside)
    (stored,) = metastore.partitions_by_names(registered.name, ["dt=2024-01-03"])
    assert storage_uri(stored.sd.location) == str(elsewhere)

    registered.check_view()
    expected = writer.expected_rows()
    assert expected.num_rows == 28
    source = open_table(metastore, registered.name)
    assert {p.name: p.location for p in source.definition.partitions} == {
        "dt=2024-01-01": writer.partition_path({"dt": "2024-01-01"}),
        "dt=2024-01-02": writer.partition_path({"dt": "2024-01-02"}),
        "dt=2024-01-03": str(elsewhere),
    }
    result = compact_table(source, str(tmp_path / "out"))
    assert ids(read_snapshot(result)) == ids(expected)


def test_an_insert_only_table(metastore_db, metastore):
    writer = metastore_db.writer(
        "inserts", [("id", "bigint"), ("s", "string")], transactional_properties="insert_only"
    )
    registered = metastore_db.register(writer)
    writer.insert([{"id": i, "s": "a"} for i in range(7)])
    aborted = writer.begin()
    aborted.insert([{"id": 100, "s": "aborted"}])
    aborted.abort()
    view = registered.check_view()
    assert view.write_ids.aborted_ids == (2,)
    source = open_table(metastore, registered.name)
    assert source.insert_only
    result = compact_table(source, str(metastore_db.folder.parent / "out"))
    assert ids(read_snapshot(result)) == ids(writer.expected_rows())


# -- the CLI ---------------------------------------------------------------------------------


def test_cli_writes_the_demo_table_into_the_metastore(metastore_db, metastore, tmp_path):
    out = metastore_db.path("demo")
    name = metastore_db.table_name("demo")
    options = ["--partitions", "2", "--buckets", "2", "--rows-per-bucket", "300"]
    done = subprocess.run(
        [sys.executable, "-m", "airflow_provider_acid.testing", out, *options]
        + ["--metastore", metastore_db.uri, "--table", name],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    metastore_db.txns += summary["open_txn_ids"]
    assert summary["table_name"] == name
    assert summary["metastore"] == metastore_db.uri
    assert storage_uri(summary["location"]) == out

    # The same demo in process without a metastore: the same committed data, and the same
    # files for the aborted and the open write.
    local = generate_demo_table(
        str(tmp_path / "local"),
        partitions=2,
        buckets=2,
        rows_per_bucket=300,
        final_aborted_writes=1,
        open_writes=1,
    )
    committed = local.expected_rows()
    every = storage_only_rows(local)
    assert summary["expected_rows"] == committed.num_rows
    assert summary["rows_on_storage"] == every.num_rows
    assert summary["expected_rows"] < summary["rows_on_storage"]

    # The process has exited; its open write is still open in the metastore.
    last = max(local.history.writes)
    assert summary["aborted_write_ids"] == [last - 1]
    assert summary["open_write_ids"] == [last]
    view = read_view(metastore, name)
    assert str(view.write_ids) == summary["valid_write_ids"]
    assert view.write_ids.open_ids == (last,) and view.write_ids.aborted_ids == (last - 1,)
    assert summary["open_txn_ids"] and set(summary["open_txn_ids"]) <= set(view.txns.open_ids)

    by_name = compact_table(open_table(metastore, name), str(tmp_path / "by_name"))
    assert by_name.rows_written == summary["expected_rows"]
    assert ids(read_snapshot(by_name)) == ids(committed)
    storage_only = compact_table(out, str(tmp_path / "storage_only"))
    assert storage_only.rows_written == summary["rows_on_storage"]
    assert ids(read_snapshot(storage_only)) == ids(every)


def test_cli_creates_a_missing_database(metastore, metastore_uri, tmp_path):
    database = f"t_{uuid.uuid4().hex[:8]}"
    out = tmp_path / "new_db" / "small"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "airflow_provider_acid.testing", str(out)]
            + ["--partitions", "1", "--buckets", "1", "--rows-per-bucket", "40"]
            + ["--metastore", metastore_uri, "--table", f"{database}.small"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        for txn in summary["open_txn_ids"]:
            metastore.abort_txn(txn)
        created = metastore.get_database(database)
        assert storage_uri(created.managedLocationUri) == str(out.parent)
        assert storage_uri(metastore.get_table(f"{database}.small").sd.location) == str(out)
    finally:
        metastore.drop_table(f"{database}.small")
        drop_database(metastore, database)


def test_cli_without_a_metastore_is_unchanged(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "airflow_provider_acid.testing", str(tmp_path / "t")]
        + ["--partitions", "1", "--buckets", "1", "--rows-per-bucket", "50"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert set(summary) == {
        "table",
        "valid_write_ids",
        "expected_rows",
        "expected_rows_by_partition",
    }
    assert summary["valid_write_ids"].startswith("default.t:")


def test_cli_needs_both_metastore_and_table(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "airflow_provider_acid.testing", str(tmp_path / "t")]
        + ["--metastore", "thrift://127.0.0.1:1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--metastore and --table go together" in done.stderr
