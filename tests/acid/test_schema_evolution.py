"""Schema evolution: files read under the table's current columns as Hive reads them.

ORC files by position (renames keep old values, missing trailing columns are null), Parquet
files of insert-only tables by name, Hive's type conversions, and a clear error for a change
Hive does not convert. Real Hive-written files where the fixtures have them; otherwise tables
written by the simulator (real ORC, Hive 3 layout) with ``alter_columns``.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_acid.acid.evolution import EvolutionError, check_conversion, convert
from airflow_provider_acid.acid.hive_types import HiveType
from airflow_provider_acid.acid.rows import AcidFormatError
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.options import CompactionOptions
from airflow_provider_acid.testing.table_writer import AcidTableWriter


def snapshot_rows(table: Path | str, out: Path, schema=None, **kwargs) -> pa.Table:
    """The rows of the table's snapshot, read back from the Parquet it was compacted into."""
    result = compact_table(
        str(table), str(out), options=CompactionOptions(schema=schema, max_workers=1), **kwargs
    )
    parts = [pq.read_table(p) for p in result.file_paths()]
    return pa.concat_tables(parts) if parts else pa.table({})


def sorted_rows(table: pa.Table, key: str) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r[key])


# -- by position: renames and added columns, on real Hive files ---------------------------


def test_renamed_column_of_a_real_hive_file_keeps_its_values(hive_table, tmp_path):
    """``ALTER TABLE tbl1 CHANGE fld renamed int``: Hive still shows the values written under
    ``fld`` (ORC ACID is read by position). Reference: trinodb/trino#6316 (Hive shows old data
    after a rename) and trinodb/trino#6479 (Trino changed to read ORC ACID by column index).
    Reading by name would give ``renamed`` null (or refuse the file)."""
    rows = snapshot_rows(hive_table("hcube_tbl1"), tmp_path / "out", [("renamed", "int")])
    assert rows.column_names == ["renamed"]
    assert rows["renamed"].to_pylist() == [1, 1, 1]


def test_nation_renamed_and_with_an_added_column(hive_table, tmp_path):
    """Every column of the real Trino/Hive nation file renamed, one added at the end: values by
    position, the added column null (Hive's ``ADD COLUMNS``; trinodb/trino#6479: "if column
    names in old data files differ from column names from the metastore ... Trino like Hive
    will still see the old column values"). Deletes still apply: 23,000 rows."""
    schema = [
        ("key", "int"),
        ("label", "string"),
        ("region", "int"),
        ("remark", "string"),
        ("added", "string"),
    ]
    rows = snapshot_rows(hive_table("nation"), tmp_path / "out", schema)
    assert rows.num_rows == 23_000
    assert rows.column_names == ["key", "label", "region", "remark", "added"]
    assert rows["added"].null_count == 23_000
    by_key = {r["key"]: r for r in rows.select(["key", "label", "region"]).to_pylist()}
    assert sorted(by_key) == [k for k in range(25) if k not in (5, 19)]
    assert by_key[0]["label"] == "ALGERIA" and by_key[0]["region"] == 0
    assert by_key[24]["label"] == "UNITED STATES" and by_key[24]["region"] == 1


def test_original_file_columns_are_matched_by_position(hive_table, tmp_path):
    """An original (pre-ACID) ORC file with real column names, under a table whose columns were
    renamed: read by position too (trinodb/trino#6479: ORC non-transactional files were already
    read by index, ORC transactional changed to match; Hive reads ACID tables' originals through
    the same ACID reader)."""
    schema = [("k", "int"), ("n", "string"), ("r", "int"), ("c", "string")]
    rows = snapshot_rows(hive_table("nation_originals"), tmp_path / "out", schema)
    assert rows.num_rows == 24
    names = {r["k"]: r["n"] for r in rows.to_pylist()}
    assert names[0] == "ALGERIA" and 24 not in names  # row 24 deleted by its identity


def test_int_to_bigint_on_a_real_hive_file(hive_table, tmp_path):
    """``ALTER TABLE tbl2 CHANGE fld fld bigint``: the int values read as bigint (ORC's
    ``ConvertTreeReaderFactory`` integer widening; Hive's ``ColumnType.areColTypesCompatible``
    allows int to bigint)."""
    rows = snapshot_rows(hive_table("hcube_tbl2"), tmp_path / "out", [("fld", "bigint")])
    assert rows.schema.field("fld").type == pa.int64()
    assert rows["fld"].to_pylist() == [1, 1]


def test_int_to_string_on_a_real_hive_file_gives_its_digits(hive_table, tmp_path):
    """``ALTER TABLE nation CHANGE n_nationkey n_nationkey string``: Hive allows numbers to the
    string group (``FunctionRegistry.implicitConvertible``: "Allow implicit Numeric to String
    conversion"), and ORC's ``StringGroupFromAnyIntegerTreeReader`` writes the decimal digits."""
    schema = [("n_nationkey", "string"), ("n_name", "string"), ("n_regionkey", "bigint"),
              ("n_comment", "string")]  # fmt: skip
    rows = snapshot_rows(hive_table("nation"), tmp_path / "out", schema)
    assert rows.schema.field("n_nationkey").type == pa.string() and rows.num_rows == 23_000
    keys = set(rows["n_nationkey"].to_pylist())
    assert keys == {str(k) for k in range(25)} - {"5", "19"}


def test_a_change_hive_refuses_names_the_file_and_the_column(hive_table, tmp_path):
    """``n_name string`` read as ``int``: Hive's metastore refuses the change
    (``ColumnType.areColTypesCompatible``: string to int is not allowed), so the reader refuses
    the file, naming it and the column, instead of guessing."""
    table = hive_table("nation")
    schema = [("n_nationkey", "int"), ("n_name", "int")]
    with pytest.raises(AcidFormatError) as info:
        snapshot_rows(table, tmp_path / "out", schema)
    message = str(info.value)
    assert "delta_0000002_0000002_0000/bucket_00000" in message
    assert "'n_name'" in message and "string" in message and "int" in message


def test_narrowing_bigint_to_int_is_refused(hive_table, tmp_path):
    """``a bigint`` (real Hive file) read as ``int``: a narrowing Hive's
    ``ColumnType.areColTypesCompatible`` refuses (the new numeric type must be larger)."""
    with pytest.raises(AcidFormatError, match=r"'a'.*bigint.*int"):
        snapshot_rows(hive_table("acid_version_hive_3"), tmp_path / "out", [("a", "int")])


# -- Hive's conversions, on simulated tables --------------------------------------------------


def test_simulated_rename_add_and_widen_between_writes(tmp_path):
    """Rename, added column and int to bigint between two writes (old files keep their schema):
    the old rows show their values under the new names, widened, with the added column null
    (trinodb/trino#6479; ORC ``ConvertTreeReaderFactory``)."""
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint"), ("b", "string"), ("q", "int")])
    table.insert([{"id": 1, "b": "old", "q": 7}])
    table.rename_column("b", "c")
    table.add_columns([("extra", "string")])
    table.change_column_type("q", "bigint")
    table.insert([{"id": 2, "c": "new", "q": 2**40, "extra": "e"}])
    rows = snapshot_rows(table.root, tmp_path / "out")  # columns from the newest file
    assert rows.schema.field("q").type == pa.int64()
    assert sorted_rows(rows, "id") == [
        {"id": 1, "c": "old", "q": 7, "extra": None},
        {"id": 2, "c": "new", "q": 2**40, "extra": "e"},
    ]
    assert sorted_rows(rows, "id") == sorted_rows(table.expected_rows(), "id")


def test_float_to_double_gives_the_floats_exact_double(tmp_path):
    """``float`` to ``double``: Hive's ORC reader widens the stored float, so 0.1f reads as
    0.10000000149011612, not 0.1 (ORC ``TreeReaderFactory.FloatTreeReader`` fills a double
    vector with the float value)."""
    table = AcidTableWriter(str(tmp_path / "t"), [("x", "float")])
    table.insert([{"x": 0.1}])
    table.change_column_type("x", "double")
    rows = snapshot_rows(table.root, tmp_path / "out", [("x", "double")])
    assert rows["x"].to_pylist() == [0.10000000149011612]


def test_decimal_widening_keeps_the_value_at_the_new_scale(tmp_path):
    """``decimal(5,2)`` to ``decimal(10,4)``: 123.45 reads as 123.4500 (ORC
    ``ConvertTreeReaderFactory`` decimal to decimal; Hive allows decimal changes)."""
    table = AcidTableWriter(str(tmp_path / "t"), [("d", "decimal(5,2)")])
    table.insert([{"d": decimal.Decimal("123.45")}, {"d": decimal.Decimal("-0.01")}])
    table.change_column_type("d", "decimal(10,4)")
    rows = snapshot_rows(table.root, tmp_path / "out", [("d", "decimal(10,4)")])
    assert rows.schema.field("d").type == pa.decimal128(10, 4)
    assert sorted(rows["d"].to_pylist()) == [
        decimal.Decimal("-0.0100"),
        decimal.Decimal("123.4500"),
    ]


def test_string_varchar_and_char_conversions(tmp_path):
    """Among string, varchar and char (Hive allows any change in the string group): to
    ``varchar(n)`` values are cut to n, to ``char(n)`` cut and padded to n, and a char's own
    padding is trimmed first (ORC ``ConvertTreeReaderFactory.StringGroupFromStringGroupTreeReader``
    and ``CharTreeReader``'s right trim)."""
    columns = [("id", "int"), ("s", "string"), ("v", "varchar(6)"), ("c", "char(5)")]
    table = AcidTableWriter(str(tmp_path / "t"), columns, orc_writer="pyorc")
    table.insert([{"id": 1, "s": "abcdef", "v": "xyz", "c": "ab"}])
    table.alter_columns([("id", "int"), ("s", "varchar(3)"), ("v", "char(4)"), ("c", "string")])
    rows = snapshot_rows(
        table.root, tmp_path / "out", [(c.name, str(c.type)) for c in table.columns]
    )
    assert rows.to_pylist() == [{"id": 1, "s": "abc", "v": "xyz ", "c": "ab"}]
    assert rows.to_pylist() == table.expected_rows().to_pylist()


def test_conversion_rules_directly():
    """The rule table itself: what ``ColumnType.areColTypesCompatible`` allows and ORC
    converts exactly passes; narrowing and cross-group changes raise."""
    for ok in [
        ("tinyint", "bigint"),
        ("int", "double"),
        ("float", "double"),
        ("int", "decimal(12,2)"),
        ("decimal(5,2)", "decimal(7,3)"),
        ("char(3)", "varchar(10)"),
        ("string", "char(2)"),
        ("date", "varchar(20)"),
        ("int", "string"),
        ("bigint", "varchar(5)"),
    ]:
        check_conversion(HiveType.parse(ok[0]), HiveType.parse(ok[1]))
    for refused in [
        ("bigint", "int"),
        ("double", "float"),
        ("string", "int"),
        ("double", "string"),  # allowed by Hive; Java's float text is not reproduced
        ("decimal(5,2)", "decimal(5,3)"),
        ("int", "decimal(5,0)"),
        ("date", "timestamp"),
    ]:
        with pytest.raises(EvolutionError):
            check_conversion(HiveType.parse(refused[0]), HiveType.parse(refused[1]))
    padded = convert(
        pa.array(["ab   ", None]), HiveType.parse("char(5)"), HiveType.parse("char(3)"), pa.string()
    )
    assert padded.to_pylist() == ["ab ", None]


def test_date_to_string_gives_the_iso_text(tmp_path):
    """``date`` to ``string`` (the metastore's ``areColTypesCompatible`` allows date to the
    string group): ORC's ``ConvertTreeReaderFactory.StringGroupFromDateTreeReader`` gives the
    ISO date text."""
    table = AcidTableWriter(str(tmp_path / "t"), [("d", "date")])
    table.insert([{"d": dt.date(2024, 1, 31)}, {"d": None}])
    table.change_column_type("d", "string")
    rows = snapshot_rows(table.root, tmp_path / "out", [("d", "string")])
    assert sorted(rows["d"].to_pylist(), key=str) == ["2024-01-31", None]
    assert sorted(table.expected_rows()["d"].to_pylist(), key=str) == ["2024-01-31", None]


# -- Parquet in insert-only tables: by name ---------------------------------------------------


def test_insert_only_parquet_is_matched_by_name(tmp_path):
    """Parquet files of an insert-only table are matched by name, case-insensitively, as
    Hive's Parquet reader does (trinodb/trino#6479: "Parquet was changed to by default find
    columns by name"): columns in another order and a missing column (null)."""
    root = tmp_path / "t"
    (root / "delta_0000001_0000001_0000").mkdir(parents=True)
    (root / "delta_0000002_0000002_0000").mkdir(parents=True)
    pq.write_table(
        pa.table({"B": ["x"], "a": pa.array([1], pa.int32())}),
        root / "delta_0000001_0000001_0000" / "000000_0",
    )
    pq.write_table(
        pa.table({"a": pa.array([2], pa.int32()), "b": ["y"], "c": [True]}),
        root / "delta_0000002_0000002_0000" / "000000_0",
    )
    schema = [("a", "bigint"), ("b", "string"), ("c", "boolean")]
    rows = snapshot_rows(root, tmp_path / "out", schema, insert_only=True)
    assert sorted_rows(rows, "a") == [
        {"a": 1, "b": "x", "c": None},
        {"a": 2, "b": "y", "c": True},
    ]
