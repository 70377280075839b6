from __future__ import annotations

import datetime as dt
import decimal
import math
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pyorc
import pytest
from _pruning_testfiles import truncate_orc_string_stats, write_orc, write_parquet

from airflow_provider_acid.pruning.stats import (
    StatsError,
    detect_format,
    orc_column_stats,
    read_file_stats,
)

D = decimal.Decimal
LOCAL = fsspec.filesystem("file")
NATION = Path(
    "/work/shared/fixtures/hive-acid/trino/nationFile25kRowsSortedOnNationKey/bucket_00000"
)
T0 = dt.datetime(2024, 1, 1, 12, 0, 0)

ALL_TYPES = pa.schema(
    [
        ("i", pa.int32()),
        ("b", pa.int64()),
        ("d", pa.float64()),
        ("f", pa.float32()),
        ("s", pa.string()),
        ("ts", pa.timestamp("us")),
        ("dt", pa.date32()),
        ("dec", pa.decimal128(10, 2)),
        ("bo", pa.bool_()),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
    ]
)
ALL_ROWS = [
    {
        "i": 1,
        "b": 10,
        "d": 1.5,
        "f": 2.5,
        "s": "abc123",
        "ts": T0.replace(microsecond=123),
        "dt": dt.date(2024, 1, 1),
        "dec": D("1.25"),
        "bo": True,
        "st": {"x": 1, "y": "a"},
    },
    {
        "i": None,
        "b": None,
        "d": -1.0,
        "f": None,
        "s": None,
        "ts": T0 - dt.timedelta(microseconds=1),
        "dt": None,
        "dec": None,
        "bo": None,
        "st": None,
    },
    {
        "i": 3,
        "b": -5,
        "d": 0.25,
        "f": 0.0,
        "s": "zz",
        "ts": None,
        "dt": dt.date(2023, 1, 1),
        "dec": D("-3.10"),
        "bo": False,
        "st": {"x": None, "y": "b"},
    },
]


@pytest.fixture
def all_types_table() -> pa.Table:
    return pa.Table.from_pylist(ALL_ROWS, schema=ALL_TYPES)


def test_real_hive_acid_file_stats() -> None:
    stats = read_file_stats(LOCAL, str(NATION))
    assert stats.format == "orc"
    assert stats.row_count == 25000
    assert list(stats.columns) == ["n_nationkey", "n_name", "n_regionkey", "n_comment"]
    key = stats.columns["n_nationkey"]
    assert (key.min, key.max, key.null_count, key.value_count) == (0, 24, 0, 25000)
    assert key.type == pa.int32()
    assert stats.columns["n_name"].min == "ALGERIA"
    assert stats.columns["n_name"].max == "VIETNAM"


@pytest.mark.parametrize("acid", [False, True])
def test_orc_stats_every_type(tmp_path: Path, all_types_table: pa.Table, acid: bool) -> None:
    path = write_orc(tmp_path / "f.orc", all_types_table, acid=acid)
    stats = read_file_stats(LOCAL, path)
    assert stats.row_count == 3
    cols = stats.columns
    assert list(cols) == ["i", "b", "d", "f", "s", "ts", "dt", "dec", "bo", "st", "st.x", "st.y"]
    assert (cols["i"].min, cols["i"].max, cols["i"].null_count) == (1, 3, 1)
    assert (cols["b"].min, cols["b"].max) == (-5, 10)
    assert (cols["d"].min, cols["d"].max, cols["d"].nan_count) == (-1.0, 1.5, 0)
    assert (cols["f"].min, cols["f"].max) == (0.0, 2.5)
    assert (cols["s"].min, cols["s"].max) == ("abc123", "zz")
    assert (cols["dt"].min, cols["dt"].max) == (dt.date(2023, 1, 1), dt.date(2024, 1, 1))
    assert (cols["dec"].min, cols["dec"].max) == (D("-3.10"), D("1.25"))
    assert isinstance(cols["dec"].min, decimal.Decimal)
    assert (cols["bo"].min, cols["bo"].max) == (False, True)
    # a null struct makes its fields null too
    assert cols["st"].null_count == 1
    assert (cols["st.x"].min, cols["st.x"].max, cols["st.x"].null_count) == (1, 1, 2)
    assert cols["st.y"].null_count == 1
    for c in cols.values():
        assert c.value_count == 3


def test_orc_timestamp_bounds_are_widened(tmp_path: Path) -> None:
    """ORC keeps milliseconds: 12:00:00.000123 is stored as 12:00:00.000."""
    values = [T0.replace(microsecond=123), T0.replace(microsecond=999), None]
    table = pa.table({"ts": pa.array(values, pa.timestamp("us"))})
    path = write_orc(tmp_path / "f.orc", table)
    with open(path, "rb") as f:
        raw = pyorc.Reader(f)[1].statistics
    assert raw["maximum"].replace(tzinfo=None) == T0  # the lossy value
    ts = read_file_stats(LOCAL, path).columns["ts"]
    assert ts.min <= T0.replace(microsecond=123)
    assert ts.max >= T0.replace(microsecond=999)
    assert ts.max - ts.min <= dt.timedelta(milliseconds=3)
    assert ts.min.tzinfo is None


def test_orc_timestamps_before_1970(tmp_path: Path) -> None:
    """pyorc turns -1500 ms into -0.5 s; the lower bound must still hold."""
    values = [dt.datetime(1969, 12, 31, 23, 59, 58, 500000), dt.datetime(1969, 12, 31, 23, 59, 59)]
    path = write_orc(tmp_path / "f.orc", pa.table({"ts": pa.array(values, pa.timestamp("us"))}))
    ts = read_file_stats(LOCAL, path).columns["ts"]
    assert ts.min <= values[0] and ts.max >= values[1]


def test_orc_string_stats_dropped_by_the_writer_are_unknown(tmp_path: Path) -> None:
    """A Java writer stores only truncated bounds for strings over 1024 chars (ORC-203)."""
    long_a, long_b = "a" * 1500 + "q", "b" * 1500
    table = pa.table({"s": [long_a, long_b, None], "i": [1, 2, 3]})
    path = write_orc(tmp_path / "f.orc", table, compression=pyorc.CompressionKind.NONE)
    truncate_orc_string_stats(path, long_a, long_b)
    s = read_file_stats(LOCAL, path).columns["s"]
    assert (s.min, s.max) == (None, None)
    assert s.null_count == 1  # the counts are still good


def test_orc_double_nan_count(tmp_path: Path) -> None:
    clean = write_orc(tmp_path / "clean.orc", pa.table({"d": [1.0, None, -2.0]}))
    dirty = write_orc(tmp_path / "dirty.orc", pa.table({"d": [1.0, math.nan, -2.0]}))
    first = write_orc(tmp_path / "first.orc", pa.table({"d": [math.nan, 1.0]}))
    assert read_file_stats(LOCAL, clean).columns["d"].nan_count == 0
    d = read_file_stats(LOCAL, dirty).columns["d"]
    assert d.nan_count is None  # a NaN poisons the sum: count unknown
    assert (d.min, d.max) == (-2.0, 1.0)  # bounds of the non-NaN values
    f = read_file_stats(LOCAL, first).columns["d"]
    assert f.nan_count is None
    assert f.min is None or not math.isnan(f.min)


def _orc_type(text: str) -> object:
    return pyorc.TypeDescription.from_string(f"struct<c:{text}>")["c"]


@pytest.mark.parametrize(
    ("orc_type", "raw", "expected"),
    [
        # NaN-polluted bounds (a Java writer whose first value was NaN)
        ("double", {"minimum": math.nan, "maximum": math.nan, "sum": math.nan}, (None, None)),
        ("double", {"minimum": -1.0, "maximum": math.nan}, (None, None)),
        # inverted bounds
        ("int", {"minimum": 5, "maximum": 1}, (None, None)),
        ("string", {"minimum": "b", "maximum": "a"}, (None, None)),
        # only one side present
        ("int", {"minimum": 5}, (None, None)),
        # CHAR values are padded: bounds not trusted
        ("char(5)", {"minimum": "a    ", "maximum": "b    "}, (None, None)),
        ("varchar(5)", {"minimum": "a", "maximum": "b"}, ("a", "b")),
        ("boolean", {"false_count": 0, "true_count": 3}, (True, True)),
        ("boolean", {"false_count": 2, "true_count": 0}, (False, False)),
        ("boolean", {"false_count": 0, "true_count": 0}, (None, None)),
        ("decimal(10,2)", {"minimum": D("-1.5"), "maximum": D("2")}, (D("-1.5"), D("2"))),
        ("binary", {"total_length": 4}, (None, None)),
    ],
)
def test_orc_column_stats_rules(orc_type: str, raw: dict, expected: tuple) -> None:
    stats = orc_column_stats("c", _orc_type(orc_type), {"number_of_values": 3, **raw}, 4)
    assert (stats.min, stats.max) == expected
    assert stats.null_count == 1 and stats.value_count == 4


def test_orc_column_stats_without_counts() -> None:
    stats = orc_column_stats("c", _orc_type("int"), {}, 10)
    assert stats.null_count is None and stats.min is None


def test_orc_positional_column_names(tmp_path: Path) -> None:
    table = pa.table({"_col0": [1, 2], "_col1": ["a", "b"]})
    path = write_orc(tmp_path / "old.orc", table)
    stats = read_file_stats(LOCAL, path, column_names=["id", "name"])
    assert list(stats.columns) == ["id", "name"]
    assert (stats.columns["id"].min, stats.columns["id"].max) == (1, 2)
    # By position, as Hive reads ORC (trinodb/trino#6479): a column added to the table after
    # the file was written has no statistics (unknown, so never pruned on), and file columns
    # past the table's are not the table's.
    wider = read_file_stats(LOCAL, path, column_names=["a", "b", "added"])
    assert list(wider.columns) == ["a", "b"] and wider.columns["b"].max == "b"
    narrower = read_file_stats(LOCAL, path, column_names=["only"])
    assert list(narrower.columns) == ["only"] and narrower.columns["only"].max == 2


def test_index_statistics_follow_the_table_columns_by_position(tmp_path: Path) -> None:
    """After ``b`` is renamed ``c`` and a new ``b`` added, an old file's second column is
    ``c``: its statistics must not prune on the new ``b`` (Hive reads ORC by position)."""
    from airflow_provider_acid.pruning.manifest import index_columns_tag

    table = pa.table({"a": [1, 2], "b": [10, 20]})
    path = write_orc(tmp_path / "f.orc", table)
    stats = read_file_stats(LOCAL, path, column_names=["a", "c", "b"])
    assert sorted(stats.columns) == ["a", "c"] and stats.columns["c"].min == 10
    assert index_columns_tag(["a", "b"]) != index_columns_tag(["a", "c", "b"])
    assert index_columns_tag(["a", "B"]) == index_columns_tag(["A", "b"])


def test_parquet_row_groups_are_merged(tmp_path: Path) -> None:
    table = pa.table(
        {
            "i": pa.array([5, None, -3, 7, None], pa.int64()),
            "s": ["m", None, "b", "x", None],
            "allnull_in_rg": pa.array([1, 2, None, None, 3], pa.int32()),
            "ts": pa.array(
                [T0.replace(microsecond=1), None, T0.replace(microsecond=2), T0, T0],
                pa.timestamp("us"),
            ),
        }
    )
    path = write_parquet(tmp_path / "f.parquet", table, row_group_size=2)
    assert pq.ParquetFile(path).metadata.num_row_groups == 3
    stats = read_file_stats(LOCAL, path)
    assert stats.format == "parquet" and stats.row_count == 5
    i = stats.columns["i"]
    assert (i.min, i.max, i.null_count, i.value_count) == (-3, 7, 2, 5)
    assert (stats.columns["s"].min, stats.columns["s"].max) == ("b", "x")
    a = stats.columns["allnull_in_rg"]
    assert (a.min, a.max, a.null_count) == (1, 3, 2)
    assert (stats.columns["ts"].min, stats.columns["ts"].max) == (T0, T0.replace(microsecond=2))


def test_parquet_nanosecond_timestamps_round_outwards(tmp_path: Path) -> None:
    base = pa.scalar(T0, pa.timestamp("ns")).value
    arr = pa.array([base + 500, base + 1_000_999], pa.timestamp("ns"))
    path = write_parquet(tmp_path / "f.parquet", pa.table({"ts": arr}))
    ts = read_file_stats(LOCAL, path).columns["ts"]
    assert ts.min == T0
    assert ts.max == T0 + dt.timedelta(microseconds=1001)


def test_parquet_lossy_stats_are_unknown(tmp_path: Path) -> None:
    table = pa.table(
        {
            "long": ["a" * 5000, "b"],  # over the writer's statistics size: dropped
            "nan": [math.nan, 1.0],
            "ts96": pa.array([T0, None], pa.timestamp("ns")),
            "nostats": [1, 2],
        }
    )
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, write_statistics=["long", "nan"], row_group_size=1)
    stats = read_file_stats(LOCAL, str(path))
    assert (stats.columns["long"].min, stats.columns["long"].max) == (None, None)
    assert stats.columns["nan"].min is None  # a NaN-only row group has no bounds
    assert stats.columns["nan"].nan_count is None
    assert stats.columns["nostats"].null_count is None
    assert stats.columns["nostats"].min is None
    pq.write_table(table, tmp_path / "i96.parquet", use_deprecated_int96_timestamps=True)
    ts96 = read_file_stats(LOCAL, str(tmp_path / "i96.parquet")).columns["ts96"]
    assert (ts96.min, ts96.max) == (None, None)


def test_parquet_decimals_dates_structs(tmp_path: Path, all_types_table: pa.Table) -> None:
    path = tmp_path / "f.parquet"
    pq.write_table(all_types_table, path, store_decimal_as_integer=True)
    cols = read_file_stats(LOCAL, str(path)).columns
    assert (cols["dec"].min, cols["dec"].max) == (D("-3.10"), D("1.25"))
    assert cols["dt"].min == dt.date(2023, 1, 1)
    assert (cols["st.x"].min, cols["st.x"].max, cols["st.x"].null_count) == (1, 1, 2)
    assert (cols["bo"].min, cols["bo"].max) == (False, True)
    assert "st" not in cols  # Parquet has no statistics for a struct itself


def test_a_column_added_later_is_absent_not_all_null(tmp_path: Path) -> None:
    old = write_orc(tmp_path / "old.orc", pa.table({"a": [1, 2]}))
    stats = read_file_stats(LOCAL, old)
    assert "b" not in stats.columns


def test_format_detection_and_errors(tmp_path: Path) -> None:
    orc = write_orc(tmp_path / "bucket_00000", pa.table({"a": [1]}))
    parquet = write_parquet(tmp_path / "part-0", pa.table({"a": [1]}))
    assert detect_format(LOCAL, orc) == "orc"
    assert detect_format(LOCAL, parquet) == "parquet"
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"not a data file at all")
    with pytest.raises(StatsError, match="garbage"):
        read_file_stats(LOCAL, str(garbage))
    with pytest.raises(StatsError, match="missing"):
        read_file_stats(LOCAL, str(tmp_path / "missing"))
    with pytest.raises(StatsError, match="unknown file format 'csv'"):
        read_file_stats(LOCAL, orc, file_format="csv")


def test_reads_through_any_fsspec_filesystem(tmp_path: Path) -> None:
    mem = fsspec.filesystem("memory")
    path = write_orc(tmp_path / "f.orc", pa.table({"a": [4, 9]}))
    mem.pipe("/stats-test/f.orc", Path(path).read_bytes())
    stats = read_file_stats(mem, "/stats-test/f.orc")
    assert (stats.columns["a"].min, stats.columns["a"].max) == (4, 9)
    mem.rm("/stats-test", recursive=True)
