"""Reading rows with their identity: file kinds, versions, synthetic ids, column mapping,
invalid writes; and the Hive type mapping."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import fsspec
import pyarrow as pa
import pyorc
import pytest

from airflow_provider_acid.acid.hive_types import (
    HIVE_TYPE_KEY,
    HiveType,
    HiveTypeError,
    hive_field,
    infer_partition_type,
    partition_scalar,
)
from airflow_provider_acid.acid.resolution import resolve_read_view
from airflow_provider_acid.acid.rows import (
    AcidFormatError,
    SliceReader,
    TableColumns,
    encode_bucket_v1,
    table_columns,
)
from airflow_provider_acid.acid.writeids import ValidWriteIdList
from airflow_provider_acid.testing.orc_writer import write_acid_file

LOCAL = fsspec.filesystem("file")
B0 = encode_bucket_v1(0)
ACID_NAMES = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row")


def write_events(
    path: Path,
    events: list[tuple],
    *,
    row_type: str = "struct<id:bigint,name:string>",
    names: tuple[str, ...] = ACID_NAMES,
    version: bytes | None = b"2",
) -> None:
    """An ACID event file written with pyorc: any top-level names, any footer version."""
    path.parent.mkdir(parents=True, exist_ok=True)
    kinds = ("int", "bigint", "int", "bigint", "bigint", row_type)
    schema = "struct<" + ",".join(f"{n}:{k}" for n, k in zip(names, kinds, strict=True)) + ">"
    with path.open("wb") as handle:
        writer = pyorc.Writer(handle, pyorc.TypeDescription.from_string(schema))
        writer.writerows(events)
        if version is not None:
            writer.set_user_metadata(**{"hive.acid.version": version})
        writer.close()


def write_plain(path: Path, rows: list[tuple], schema: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        writer = pyorc.Writer(handle, pyorc.TypeDescription.from_string(schema))
        writer.writerows(rows)
        writer.close()


def insert(write: int, row_id: int, *row: object, bucket: int = B0) -> tuple:
    return (0, write, bucket, row_id, write, tuple(row))


def delete(write: int, original: int, row_id: int, bucket: int = B0) -> tuple:
    return (2, original, bucket, row_id, write, None)


def read_slice(table: Path, write_ids: str | None = None, schema=None, **kwargs):
    snapshot = resolve_read_view(str(table), write_ids)
    (bucket_slice,) = snapshot.slices
    columns = table_columns(snapshot, LOCAL, schema)
    reader = SliceReader(bucket_slice, LOCAL, columns, snapshot.write_ids, **kwargs)
    return reader, columns


def visible_rows(reader: SliceReader) -> list[tuple]:
    """(originalTransaction, bucket, rowId, *columns) of the visible rows, in reading order."""
    out = []
    for batch in reader.data_batches():
        columns = [c.to_pylist() for c in batch.columns]
        visible = batch.visible.to_pylist() if batch.visible is not None else None
        for i in range(batch.num_rows):
            if visible is None or visible[i]:
                out.append(
                    (
                        batch.original_transaction[i].as_py(),
                        batch.bucket[i].as_py(),
                        batch.row_id[i].as_py(),
                        *(c[i] for c in columns),
                    )
                )
    return out


def delete_keys(reader: SliceReader) -> list[tuple]:
    keys = []
    for batch in reader.delete_batches():
        keys += list(
            zip(
                batch.original_transaction.to_pylist(),
                batch.bucket.to_pylist(),
                batch.row_id.to_pylist(),
                strict=True,
            )
        )
    return keys


# -- which files are ACID, which versions are accepted ---------------------------------------


def test_identity_columns_match_case_insensitively_with_the_folder_marker(tmp_path):
    delta = tmp_path / "t" / "base_0000005_v0000010"
    write_events(
        delta / "bucket_00000",
        [insert(1, 0, 1, "a"), insert(2, 0, 2, "b")],
        names=tuple(n.lower() for n in ACID_NAMES),
        version=None,  # query-based compaction may omit hive.acid.version ...
    )
    (delta / "_orc_acid_version").write_bytes(b"2")  # ... but marks the folder
    reader, columns = read_slice(tmp_path / "t")
    assert columns.names == ("id", "name")
    assert visible_rows(reader) == [(1, B0, 0, 1, "a"), (2, B0, 0, 2, "b")]
    assert reader.rows_in_files == 2


def test_acid_file_without_any_version_is_refused_naming_it(tmp_path):
    """No footer version, no folder marker and plain bucket ids (BucketCodec version bits 000,
    as Hive 2 wrote them): refused (Hive's ``BucketCodec.determineVersion``; IMPALA-10115)."""
    path = tmp_path / "t" / "delta_0000001_0000001_0000" / "bucket_00000"
    write_events(path, [insert(1, 0, 1, "a", bucket=0)], version=None)
    reader, _ = read_slice(tmp_path / "t")
    with pytest.raises(AcidFormatError, match="Hive 2") as info:
        list(reader.data_batches())
    assert str(path) in str(info.value)


def test_hive2_version_in_footer_is_refused(tmp_path):
    path = tmp_path / "t" / "delta_0000001_0000001_0000" / "bucket_00000"
    write_events(path, [insert(1, 0, 1, "a")], version=b"1")
    reader, _ = read_slice(tmp_path / "t")
    with pytest.raises(AcidFormatError, match=r"hive.acid.version=1"):
        list(reader.data_batches())


def test_plain_file_in_a_delete_delta_is_an_error(tmp_path):
    table = tmp_path / "t"
    write_events(table / "delta_0000001_0000001_0000" / "bucket_00000", [insert(1, 0, 1, "a")])
    write_plain(
        table / "delete_delta_0000002_0000002_0000" / "bucket_00000",
        [(1, "a")],
        "struct<id:bigint,name:string>",
    )
    reader, _ = read_slice(table)
    with pytest.raises(AcidFormatError, match="plain .* delete delta"):
        list(reader.delete_batches())


def test_data_file_with_delete_events_is_refused(tmp_path):
    table = tmp_path / "t"
    write_events(
        table / "delta_0000001_0000001_0000" / "bucket_00000",
        [insert(1, 0, 1, "a"), delete(1, 1, 0)],
    )
    reader, _ = read_slice(table)
    with pytest.raises(AcidFormatError, match="other than inserts"):
        list(reader.data_batches())


def test_unreadable_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "t" / "delta_0000001_0000001_0000" / "bucket_00000"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not an orc file at all")
    snapshot = resolve_read_view(str(tmp_path / "t"))
    with pytest.raises(AcidFormatError, match="bucket_00000"):
        table_columns(snapshot, LOCAL)


def test_empty_files_are_skipped(tmp_path):
    table = tmp_path / "t"
    write_events(table / "delta_0000001_0000001_0000" / "bucket_00000", [insert(1, 0, 1, "a")])
    write_events(table / "delta_0000002_0000002_0000" / "bucket_00000", [])
    reader, columns = read_slice(table)
    assert columns.names == ("id", "name")
    assert visible_rows(reader) == [(1, B0, 0, 1, "a")]


# -- synthetic identities ----------------------------------------------------------------------


def test_original_copies_continue_row_ids_in_hive_order(hive_table):
    snapshot = resolve_read_view(str(hive_table("dummy_id_data")))
    bucket2 = next(s for s in snapshot.slices if s.bucket_id == 2)
    columns = table_columns(snapshot, LOCAL)
    reader = SliceReader(bucket2, LOCAL, columns, snapshot.write_ids, batch_rows=3)
    rows = visible_rows(reader)
    assert [r[:3] for r in rows] == [(0, encode_bucket_v1(2), i) for i in range(12)]
    assert [r[3] for r in rows] == list(range(9, 21))


def test_raw_files_of_load_data_get_the_folder_write_id(hive_table):
    reader, columns = read_slice(hive_table("load_data"))
    rows = visible_rows(reader)
    assert columns.names == ("id", "name", "dept", "year")
    assert [r[:3] for r in rows] == [(1, B0, 0), (1, B0, 1), (1, B0, 2)]
    assert sorted(r[3] for r in rows) == [8, 9, 10]


def test_original_positional_columns_map_onto_the_newest_acid_names(tmp_path):
    table = tmp_path / "t"
    write_plain(table / "000000_0", [(1, "x"), (2, "y")], "struct<_col0:bigint,_col1:string>")
    write_events(
        table / "delta_0000001_0000001_0000" / "bucket_00000",
        [insert(1, 0, 3, "z", 7)],
        row_type="struct<id:bigint,name:string,added:int>",
    )
    write_events(
        table / "delete_delta_0000002_0000002_0000" / "bucket_00000",
        [delete(2, 0, 1)],
        row_type="struct<id:bigint,name:string,added:int>",
    )
    reader, columns = read_slice(table)
    assert columns.names == ("id", "name", "added")
    assert visible_rows(reader) == [
        (0, B0, 0, 1, "x", None),  # the column added later reads as null
        (0, B0, 1, 2, "y", None),
        (1, B0, 0, 3, "z", 7),
    ]
    assert delete_keys(reader) == [(0, B0, 1)]


def test_user_schema_names_and_types_win(tmp_path):
    table = tmp_path / "t"
    write_events(table / "delta_0000001_0000001_0000" / "bucket_00000", [insert(1, 0, 1, "a")])
    reader, columns = read_slice(table, schema=[("ID", "bigint"), ("NAME", "varchar(3)")])
    assert columns.source == "schema argument"
    assert [str(c.hive_type) for c in columns.columns] == ["bigint", "varchar(3)"]
    assert visible_rows(reader) == [(1, B0, 0, 1, "a")]
    with pytest.raises(ValueError, match="duplicate"):
        TableColumns.from_schema([("a", "int"), ("A", "int")])


def test_incompatible_column_type_names_file_and_column(tmp_path):
    table = tmp_path / "t"
    write_events(table / "delta_0000001_0000001_0000" / "bucket_00000", [insert(1, 0, 1, "a")])
    reader, _ = read_slice(table, schema=[("id", "bigint"), ("name", "struct<x:int>")])
    with pytest.raises(AcidFormatError, match="'name'"):
        list(reader.data_batches())


def test_sub_microsecond_timestamps_need_the_nanosecond_unit(tmp_path):
    table = tmp_path / "t"
    stamp = dt.datetime(2024, 1, 1, 12, 0, 0, 1)
    write_events(
        table / "delta_0000001_0000001_0000" / "bucket_00000",
        [insert(1, 0, 1, stamp)],
        row_type="struct<id:bigint,ts:timestamp>",
    )
    reader, _ = read_slice(table)
    assert visible_rows(reader)[0][4] == stamp  # microseconds: fine
    # a nanosecond value, written the way the simulator writes timestamps
    path = table / "delta_0000002_0000002_0000" / "bucket_00000"
    events = pa.table(
        {
            "operation": pa.array([0], pa.int32()),
            "originalTransaction": pa.array([2], pa.int64()),
            "bucket": pa.array([B0], pa.int32()),
            "rowId": pa.array([0], pa.int64()),
            "currentTransaction": pa.array([2], pa.int64()),
            "row": pa.array(
                [{"id": 2, "ts": 1_704_067_200_000_000_001}],
                pa.struct([("id", pa.int64()), ("ts", pa.timestamp("ns"))]),
            ),
        }
    )
    write_acid_file(LOCAL, str(path), events, HiveType.parse("struct<id:bigint,ts:timestamp>"))
    reader, _ = read_slice(table)
    with pytest.raises(AcidFormatError, match="timestamp_unit='ns'"):
        list(reader.data_batches())
    reader, _ = read_slice(table, timestamp_unit="ns")
    stamps = [v for b in reader.data_batches() for v in b.columns[1].cast(pa.int64()).to_pylist()]
    assert stamps[1] == 1_704_067_200_000_000_001


# -- writes the list does not show -------------------------------------------------------------


@pytest.fixture
def minor_compacted(tmp_path: Path) -> Path:
    """``delta_1_3`` and ``delete_delta_1_3``: writes 1, 2, 3 after a minor compaction."""
    table = tmp_path / "t"
    write_events(
        table / "delta_0000001_0000003" / "bucket_00000",
        [insert(1, 0, 10, "w1"), insert(2, 0, 20, "w2"), insert(3, 0, 30, "w3")],
    )
    write_events(
        table / "delete_delta_0000001_0000003" / "bucket_00000",
        [delete(2, 1, 0), delete(3, 2, 0)],  # write 2 deletes write 1's row, 3 deletes 2's
    )
    return table


def test_fully_valid_range_reads_everything(minor_compacted):
    reader, _ = read_slice(minor_compacted)
    assert [r[3] for r in visible_rows(reader)] == [10, 20, 30]
    assert delete_keys(reader) == [(1, B0, 0), (2, B0, 0)]


def test_rows_and_deletes_of_an_aborted_write_in_a_range_are_dropped(minor_compacted):
    reader, _ = read_slice(minor_compacted, "default.t:3:9223372036854775807::2")
    assert [r[3] for r in visible_rows(reader)] == [10, 30]
    assert delete_keys(reader) == [(2, B0, 0)]  # write 2's delete of write 1's row: ignored


def test_writes_above_the_high_watermark_are_dropped(minor_compacted):
    reader, _ = read_slice(minor_compacted, "default.t:2:9223372036854775807::")
    assert [r[3] for r in visible_rows(reader)] == [10, 20]
    assert delete_keys(reader) == [(1, B0, 0)]


def test_open_write_in_a_range_is_invisible(minor_compacted):
    reader, _ = read_slice(minor_compacted, "default.t:3:2:2:")
    assert [r[3] for r in visible_rows(reader)] == [10, 30]


def test_visible_writes_mask_is_independent_of_the_table_model():
    from airflow_provider_acid.acid.rows import visible_writes

    ids = ValidWriteIdList.parse("db.t:5:3:3:4")
    mask = visible_writes(pa.array([0, 1, 3, 4, 5, 6], pa.int64()), ids)
    assert mask.to_pylist() == [True, True, False, False, True, False]


# -- Hive types ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "arrow"),
    [
        ("int", pa.int32()),
        ("BIGINT", pa.int64()),
        ("decimal(12,2)", pa.decimal128(12, 2)),
        ("decimal", pa.decimal128(10, 0)),
        ("varchar(20)", pa.string()),
        ("char(3)", pa.string()),
        ("timestamp", pa.timestamp("us")),
        ("timestamp with local time zone", pa.timestamp("us", tz="UTC")),
        ("date", pa.date32()),
        ("array<map<string,struct<a:int,`b c`:double>>>", None),
    ],
)
def test_hive_types_map_to_arrow(text, arrow):
    parsed = HiveType.parse(text)
    if arrow is not None:
        assert parsed.to_arrow() == arrow
    assert HiveType.parse(str(parsed)) == parsed
    assert hive_field("c", parsed).metadata[HIVE_TYPE_KEY] == str(parsed).encode()


def test_nested_types_round_trip_through_arrow():
    nested = HiveType.parse("struct<a:array<bigint>,m:map<string,decimal(5,1)>,t:timestamp>")
    assert HiveType.from_arrow(nested.to_arrow("ns")) == nested
    assert nested.to_arrow("ns").field("t").type == pa.timestamp("ns")


def test_unsupported_hive_type_is_an_error():
    with pytest.raises(HiveTypeError, match="uniontype"):
        HiveType.parse("uniontype<int,string>")


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["1", "22", None], "bigint"),
        (["007"], "string"),
        (["2024-01-01", "2024-02-29"], "date"),
        (["2024-02-30"], "string"),
        (["a", "1"], "string"),
        ([None], "string"),
    ],
)
def test_partition_types_are_inferred_without_losing_text(values, expected):
    assert str(infer_partition_type(values)) == expected


def test_partition_values_are_typed_or_rejected():
    assert partition_scalar("d", "2024-01-02", HiveType("date")).as_py() == dt.date(2024, 1, 2)
    assert partition_scalar("d", None, HiveType("int")).as_py() is None
    with pytest.raises(HiveTypeError, match="d='x'"):
        partition_scalar("d", "x", HiveType("int"))
