"""The Iceberg sink: snapshots committed as an Iceberg table over the compaction's own files.

Every table is opened the way a script would: from the CLI's ``--json`` block (catalog
properties and table name) with pyiceberg's ``load_catalog``, never through the sink.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from cli_helpers import NATION_IDS, compact_json, compact_nation_iceberg
from pyiceberg.catalog import load_catalog
from pyiceberg.types import (
    DecimalType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
)

from airflow_provider_acid.cli import main
from airflow_provider_acid.output import latest_snapshot
from airflow_provider_acid.output.iceberg import (
    SUMMARY_SNAPSHOT_ID,
    SUMMARY_SOURCE_TABLE,
    SUMMARY_WRITE_IDS,
    IcebergSink,
    iceberg_asset_uri,
)
from airflow_provider_acid.output.sinks import SinkError, open_sink, publish_snapshot
from airflow_provider_acid.testing import AcidTableWriter


def open_table(block: dict):
    """The table as a script opens it from the ``"iceberg"`` block of ``--json``."""
    catalog = load_catalog(block["catalog_name"], **block["catalog"])
    return catalog.load_table(block["table"])


def summary(snapshot) -> dict[str, str]:
    return dict(snapshot.summary.additional_properties)


def test_nation_under_two_write_id_lists_through_the_cli_json(hive_table, tmp_path, capsys):
    table, out = hive_table("nation"), str(tmp_path / "out")
    runs = [compact_nation_iceberg(capsys, str(table), out, hwm) for hwm in (3, 4, 4)]
    first, second, third = runs
    assert all(r["output_format"] == "iceberg" for r in runs)
    assert [r["newly_published"] for r in runs] == [True, True, False]
    assert [r["newly_committed"] for r in runs] == [True, True, False]
    assert set(second["iceberg"]) == {
        "catalog",
        "catalog_name",
        "table",
        "snapshot_id",
        "metadata_location",
    }
    assert second["iceberg"]["table"] == "acid.nation"
    assert second["iceberg"]["catalog"]["type"] == "sql"  # the embedded default

    iceberg = open_table(third["iceberg"])
    current = iceberg.scan().to_arrow()
    assert current.num_rows == 23_000
    keys = set(pc.unique(current.column("n_nationkey")).to_pylist())
    assert keys.isdisjoint({5, 19}) and len(keys) == 23
    assert iceberg.current_snapshot().snapshot_id == second["iceberg"]["snapshot_id"]
    assert third["iceberg"]["snapshot_id"] == second["iceberg"]["snapshot_id"]
    assert len(iceberg.snapshots()) == 2  # the identical third run added none

    old = iceberg.scan(snapshot_id=first["iceberg"]["snapshot_id"]).to_arrow()
    assert old.num_rows == 24_000
    assert 19 in set(pc.unique(old.column("n_nationkey")).to_pylist())

    by_snapshot = {summary(s)[SUMMARY_SNAPSHOT_ID]: s for s in iceberg.snapshots()}
    for run, hwm in ((first, 3), (second, 4)):
        recorded = summary(by_snapshot[run["manifest"]["snapshot_id"]])
        assert recorded[SUMMARY_WRITE_IDS] == NATION_IDS.format(hwm=hwm)
        assert recorded[SUMMARY_SOURCE_TABLE] == run["manifest"]["source"]["table"]
    # the table's data files are the manifest's own files, not copies
    listed = {os.path.basename(f.file.file_path) for f in iceberg.scan().plan_files()}
    assert listed == {os.path.basename(f["path"]) for f in third["manifest"]["files"]}


def four_bucket_table(root: Path) -> AcidTableWriter:
    table = AcidTableWriter(
        str(root), [("id", "bigint"), ("name", "string")], buckets=4, bucket_by="id"
    )
    table.insert([{"id": i, "name": f"n{i}"} for i in range(400)])
    return table


def test_a_delete_in_one_bucket_replaces_only_that_buckets_files(tmp_path, capsys):
    table = four_bucket_table(tmp_path / "t")
    out = str(tmp_path / "out")
    args = ["--out", out, "--format", "iceberg", "--iceberg-table", "sales.orders"]
    first = compact_json(capsys, table.root, "--valid-write-ids", table.valid_write_ids(), *args)
    table.delete(lambda row: row["id"] == 7)
    second = compact_json(capsys, table.root, "--valid-write-ids", table.valid_write_ids(), *args)

    changed = [s for s in second["manifest"]["slices"] if not s["reused_from"]]
    assert len(changed) == 1 and changed[0]["rows_deleted"] == 1
    iceberg = open_table(second["iceberg"])
    snapshot = iceberg.current_snapshot()
    counts = summary(snapshot)
    assert snapshot.summary.operation.value == "overwrite"
    assert counts["added-data-files"] == str(len(changed[0]["files"]))
    assert counts["deleted-data-files"] == str(len(first["manifest"]["slices"][0]["files"]))
    assert counts["total-data-files"] == str(len(second["manifest"]["files"]))
    assert counts["deleted-records"] == str(
        next(s for s in first["manifest"]["slices"] if s["bucket"] == changed[0]["bucket"])[
            "rows_written"
        ]
    )
    assert counts[SUMMARY_SNAPSHOT_ID] == second["manifest"]["snapshot_id"]
    assert counts[SUMMARY_WRITE_IDS] == table.valid_write_ids()
    ids = sorted(iceberg.scan().to_arrow().column("id").to_pylist())
    assert ids == [i for i in range(400) if i != 7]
    # the three unchanged buckets' files are the very files the first snapshot added
    before = {
        f.file.file_path
        for f in iceberg.scan(snapshot_id=first["iceberg"]["snapshot_id"]).plan_files()
    }
    after = {f.file.file_path for f in iceberg.scan().plan_files()}
    assert len(before & after) == 3 and len(after - before) == 1


TYPED_COLUMNS = [
    ("id", "bigint"),
    ("small", "tinyint"),
    ("label", "varchar(12)"),
    ("amount", "decimal(12,2)"),
    ("seen", "timestamp"),
    ("tags", "array<string>"),
    ("attrs", "map<string,int>"),
    ("point", "struct<x:int,y:string>"),
]


def typed_rows(count: int) -> list[dict]:
    import datetime as dt
    import decimal

    return [
        {
            "id": i,
            "small": i % 100,
            "label": f"label-{i}",
            "amount": decimal.Decimal(i) / 4,
            "seen": dt.datetime(2024, 1, 1, 12, 0) + dt.timedelta(minutes=i),
            "tags": [f"t{i}", "x"],
            "attrs": {"a": i},
            "point": {"x": i, "y": str(i)},
            "dt": f"2024-01-0{1 + i % 2}",
        }
        for i in range(count)
    ]


def test_schema_from_hive_types_with_field_ids_name_mapping_and_identity_partitions(tmp_path):
    table = AcidTableWriter(str(tmp_path / "t"), TYPED_COLUMNS, [("dt", "string")], buckets=2)
    table.insert(typed_rows(40))
    out = str(tmp_path / "out")
    from airflow_provider_acid.engine.compaction import compact_table
    from airflow_provider_acid.engine.options import CompactionOptions

    options = CompactionOptions(partition_types={"dt": "string"})  # else inferred: date
    result = compact_table(table.root, out, write_ids=table.valid_write_ids(), options=options)
    published = publish_snapshot(result, "iceberg", out_uri=out)
    iceberg = open_table(published.publication.details)

    fields = {f.name: f for f in iceberg.schema().fields}
    assert [f.field_id for f in iceberg.schema().fields] == list(range(1, 10))
    assert isinstance(fields["id"].field_type, LongType)
    assert isinstance(fields["small"].field_type, IntegerType)
    assert isinstance(fields["label"].field_type, StringType)
    assert fields["amount"].field_type == DecimalType(12, 2)
    assert fields["seen"].field_type == TimestampType()  # Hive's timestamp: no time zone
    assert isinstance(fields["tags"].field_type, ListType)
    assert isinstance(fields["attrs"].field_type, MapType)
    assert isinstance(fields["point"].field_type, StructType)
    assert isinstance(fields["dt"].field_type, StringType)

    mapping = json.loads(iceberg.properties["schema.name-mapping.default"])
    by_name = {m["names"][0]: m for m in mapping}
    assert {n: by_name[n]["field-id"] for n in fields} == {n: f.field_id for n, f in fields.items()}
    nested = {m["names"][0]: m["field-id"] for m in by_name["point"]["fields"]}
    point = fields["point"].field_type
    assert nested == {f.name: f.field_id for f in point.fields}

    spec = iceberg.spec()
    assert [(f.name, str(f.transform), f.source_id) for f in spec.fields] == [
        ("dt", "identity", fields["dt"].field_id)
    ]
    # every data file: its partition value and full metrics (every leaf column has bounds)
    leaves = {
        fields["id"].field_id,
        fields["small"].field_id,
        fields["label"].field_id,
        fields["amount"].field_id,
        fields["seen"].field_id,
        fields["dt"].field_id,
    }
    for task in iceberg.scan().plan_files():
        data = task.file
        footer = pq.read_table(data.file_path.removeprefix("file://"))
        assert data.record_count == footer.num_rows
        assert {data.partition[0]} == set(footer.column("dt").to_pylist())
        assert leaves <= set(data.lower_bounds) and leaves <= set(data.upper_bounds)
        label_max = max(footer.column("label").to_pylist())
        assert data.upper_bounds[fields["label"].field_id] == label_max.encode()  # not truncated

    scanned = iceberg.scan().to_arrow().sort_by("id")
    expected = pa.Table.from_pylist(typed_rows(40))
    assert scanned.column("id").to_pylist() == expected.column("id").to_pylist()
    for name in ("label", "amount", "seen", "tags", "point", "dt"):
        assert scanned.column(name).to_pylist() == expected.column(name).to_pylist(), name
    assert [dict(m) for m in scanned.column("attrs").to_pylist()] == [{"a": i} for i in range(40)]
    filtered = iceberg.scan(row_filter="dt = '2024-01-02' and id < 10").to_arrow()
    assert sorted(filtered.column("id").to_pylist()) == [1, 3, 5, 7, 9]


def test_expiry_keeps_every_file_a_kept_iceberg_snapshot_references(tmp_path, capsys):
    table = four_bucket_table(tmp_path / "t")
    out = str(tmp_path / "out")
    args = ["--out", out, "--format", "iceberg"]
    runs = []
    for step in range(3):
        if step:
            table.delete(lambda row, step=step: row["id"] == 10 * step)
        runs.append(
            compact_json(capsys, table.root, "--valid-write-ids", table.valid_write_ids(), *args)
        )
    iceberg = open_table(runs[-1]["iceberg"])
    assert len(iceberg.snapshots()) == 3
    metadata = Path(out) / "_iceberg" / "metadata"
    first_list = Path(iceberg.snapshot_by_id(runs[0]["iceberg"]["snapshot_id"]).manifest_list)

    assert main(["expire", out, "--format", "iceberg", "--keep", "2", "--json"]) == 0
    expired = json.loads(capsys.readouterr().out)
    iceberg = open_table(runs[-1]["iceberg"])
    assert [s.snapshot_id for s in iceberg.snapshots()] == [
        r["iceberg"]["snapshot_id"] for r in runs[1:]
    ]
    assert expired["removed_snapshots"] == [runs[0]["manifest"]["snapshot_id"]]
    assert not (metadata / first_list.name).exists()
    for run, deleted in ((runs[1], {10}), (runs[2], {10, 20})):
        rows = iceberg.scan(snapshot_id=run["iceberg"]["snapshot_id"]).to_arrow()
        assert sorted(rows.column("id").to_pylist()) == [i for i in range(400) if i not in deleted]
    on_disk = {p.name for p in Path(out).rglob("part-*.parquet")}
    referenced = {
        os.path.basename(f.file.file_path)
        for s in iceberg.snapshots()
        for f in iceberg.scan(snapshot_id=s.snapshot_id).plan_files()
    }
    assert on_disk == referenced  # the expired snapshot's replaced file is gone, nothing else

    assert main(["expire", out, "--format", "iceberg", "--keep", "1"]) == 0
    capsys.readouterr()
    iceberg = open_table(runs[-1]["iceberg"])
    assert len(iceberg.snapshots()) == 1
    assert iceberg.scan().to_arrow().num_rows == 398
    assert {p.name for p in Path(out).rglob("part-*.parquet")} == {
        os.path.basename(f.file.file_path) for f in iceberg.scan().plan_files()
    }
    assert latest_snapshot(out).snapshot_id == runs[-1]["manifest"]["snapshot_id"]


def test_metadata_files_no_snapshot_references_are_removed_by_the_next_publication(tmp_path):
    """What a publication killed after writing its manifests leaves (they are referenced by
    no committed metadata) goes with the next publication."""
    table = four_bucket_table(tmp_path / "t")
    out = str(tmp_path / "out")
    from airflow_provider_acid.engine.compaction import compact_table

    sink = open_sink("iceberg", out)
    sink.publish(compact_table(table.root, out, write_ids=table.valid_write_ids()))
    metadata = Path(out) / "_iceberg" / "metadata"
    stray = [metadata / "0f0f0f0f-dead-beef-0000-000000000000-m0.avro", metadata / "snap-1-x.avro"]
    for path in stray:
        path.write_bytes(b"Obj\x01 half-written")
    kept = sorted(p.name for p in metadata.iterdir() if p not in stray)
    table.delete(lambda row: row["id"] == 3)
    publication = sink.publish(compact_table(table.root, out, write_ids=table.valid_write_ids()))
    assert publication.newly_published
    assert not any(p.exists() for p in stray)
    assert set(kept) <= {p.name for p in metadata.iterdir()}  # the committed ones all stay
    assert open_table(publication.details).scan().to_arrow().num_rows == 399


def test_bad_settings_and_arguments_get_clear_errors(hive_table, tmp_path, capsys):
    table, out = str(hive_table("nation")), str(tmp_path / "out")
    assert main(["compact", table, "--out", out, "--iceberg-table", "a.b"]) == 2
    assert "--iceberg-table belong(s) with --format iceberg" in capsys.readouterr().err
    assert (
        main(["compact", table, "--out", out, "--format", "iceberg", "--iceberg-table", "nodots"])
        == 2
    )
    assert "'nodots' is not namespace.name" in capsys.readouterr().err
    assert not (Path(out) / "_snapshots").exists()  # refused before any work
    assert (
        main(
            [
                "compact",
                table,
                "--out",
                out,
                "--format",
                "iceberg",
                "--timestamp-unit",
                "ns",
                "--valid-write-ids",
                NATION_IDS.format(hwm=4),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "timestamp_unit='ns'" in err and "--timestamp-unit us" in err
    assert not (Path(out) / "_iceberg" / "metadata").exists()
    with pytest.raises(SinkError, match="needs a local output folder"):
        IcebergSink("s3://bucket/out")
    with pytest.raises(ValueError, match="unknown iceberg options"):
        IcebergSink(out, options={"catalogue": {}})
    with pytest.raises(SinkError, match="holds no committed snapshot"):
        IcebergSink(str(tmp_path / "empty")).expire(1)


def test_asset_uris_name_the_catalog_and_the_table():
    assert (
        iceberg_asset_uri({"type": "rest", "uri": "http://127.0.0.1:8181/api"}, "acid.nation")
        == "iceberg://127.0.0.1:8181/api/acid/nation"
    )
    assert (
        iceberg_asset_uri({"type": "hive", "uri": "thrift://hms:9083"}, "db.t")
        == "iceberg://hms:9083/db/t"
    )
    assert (
        iceberg_asset_uri({"type": "sql", "uri": "sqlite:////w/out/_iceberg/catalog.db"}, "a.b")
        == "iceberg://localhost/w/out/_iceberg/catalog.db/a/b"
    )


def test_an_added_column_joins_the_schema_and_a_changed_type_is_refused(tmp_path):
    from airflow_provider_acid.engine.compaction import compact_table

    table = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint"), ("name", "string")])
    table.insert([{"id": i, "name": f"n{i}"} for i in range(10)])
    out = str(tmp_path / "out")
    sink = open_sink("iceberg", out)
    sink.publish(compact_table(table.root, out, write_ids=table.valid_write_ids()))
    table.alter_columns([("id", "bigint"), ("name", "string"), ("score", "int")])
    table.insert([{"id": 10, "name": "n10", "score": 7}])
    publication = sink.publish(compact_table(table.root, out, write_ids=table.valid_write_ids()))
    iceberg = open_table(publication.details)
    assert [f.name for f in iceberg.schema().fields] == ["id", "name", "score"]
    mapping = json.loads(iceberg.properties["schema.name-mapping.default"])
    assert [m["names"][0] for m in mapping] == ["id", "name", "score"]
    rows = sorted(iceberg.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["score"] for r in rows] == [None] * 10 + [7]

    table.alter_columns([("id", "bigint"), ("name", "string"), ("score", "bigint")])
    table.insert([{"id": 11, "name": "n11", "score": 8}])  # by path: the newest file's types
    with pytest.raises(SinkError, match=r"changes column types \(score: int -> long\)"):
        sink.publish(compact_table(table.root, out, write_ids=table.valid_write_ids()))
    assert len(open_table(publication.details).snapshots()) == 2
