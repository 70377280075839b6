"""Rules of the inclusive evaluator, on statistics of real ORC and Parquet files."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from pathlib import Path

import fsspec
import pyarrow as pa
import pyorc
import pytest
from _pruning_testfiles import truncate_orc_string_stats, write_orc, write_parquet

from airflow_provider_acid.pruning import index
from airflow_provider_acid.pruning.evaluator import IN_LIST_LIMIT, might_match, prune
from airflow_provider_acid.pruning.predicates import (
    NotStartsWith,
    PredicateError,
    Ref,
    StartsWith,
    bind,
    evaluate_rows,
    parse_sql_where,
    referenced_columns,
)
from airflow_provider_acid.pruning.stats import read_file_stats

D = decimal.Decimal
LOCAL = fsspec.filesystem("file")
T0 = dt.datetime(2024, 1, 1, 12, 0, 0)
NATION = "/work/shared/fixtures/hive-acid/trino/nationFile25kRowsSortedOnNationKey/bucket_00000"


class Files:
    """Real data files in a folder, and the stats table pruning works on."""

    def __init__(self, root: Path, schema: pa.Schema) -> None:
        self.root = root
        self.schema = schema
        self.paths: list[str] = []
        self.tables: list[pa.Table] = []

    def add(self, columns: dict, kind: str = "orc", **kw: object) -> Files:
        table = pa.table(
            {
                name: pa.array(values, self.schema.field(name).type)
                for name, values in columns.items()
            }
        )
        name = f"f{len(self.paths)}.{kind}"
        if kind == "parquet":
            path = write_parquet(self.root / name, table, **kw)
        else:
            path = write_orc(self.root / name, table, acid=kind == "acid", **kw)
        self.paths.append(path)
        self.tables.append(table)
        return self

    def keep(self, where: str) -> list[bool]:
        bound = bind(parse_sql_where(where), self.schema)
        stats = [read_file_stats(LOCAL, p) for p in self.paths]
        table = index.read_file_stats_table(stats, referenced_columns(bound))
        result = might_match(bound, table, self.schema).to_pylist()
        # the oracle: a file holding a matching row must be kept
        for data, kept in zip(self.tables, result, strict=True):
            if any(evaluate_rows(parse_sql_where(where), data).to_pylist()):
                assert kept, f"false negative for {where!r} on {data.to_pylist()}"
        return result


@pytest.fixture
def files(tmp_path: Path):
    def make(**types: pa.DataType) -> Files:
        return Files(tmp_path, pa.schema(list(types.items())))

    return make


# ------------------------------------------------------------------ the Hive fixture


def test_real_hive_file_is_pruned_by_its_statistics(tmp_path: Path) -> None:
    key = index.FileKey.from_info(LOCAL.info(NATION))
    idx = str(tmp_path / "idx")
    index.refresh(idx, [key], LOCAL)
    table = index.read(idx, ["n_nationkey"], [key])
    schema = pa.schema([("n_nationkey", pa.int32()), ("n_name", pa.string())])
    assert might_match(parse_sql_where("n_nationkey = 100"), table, schema).to_pylist() == [False]
    assert might_match(parse_sql_where("n_nationkey = 5"), table, schema).to_pylist() == [True]
    assert might_match(parse_sql_where("n_nationkey > 24"), table, schema).to_pylist() == [False]
    assert might_match(parse_sql_where("n_nationkey >= 24"), table, schema).to_pylist() == [True]
    assert prune(parse_sql_where("n_nationkey < 0"), table, schema).num_rows == 0


# ------------------------------------------------------------------ peer bugs


@pytest.mark.parametrize("kind", ["orc", "parquet", "acid"])
def test_like_prefix_against_a_longer_min(files, kind: str) -> None:
    f = files(s=pa.string()).add({"s": ["abc123", "abc200"]}, kind)
    assert f.keep("s LIKE 'abc%'") == [True]  # min 'abc123' starts with 'abc'
    assert f.keep("s LIKE 'abc1234%'") == [True]
    assert f.keep("s LIKE 'ab%'") == [True]
    assert f.keep("s LIKE 'abd%'") == [False]
    assert f.keep("s LIKE 'abb%'") == [False]
    assert f.keep("s LIKE 'abc3%'") == [False]
    assert f.keep("s LIKE '%9'") == [True]  # cannot judge: keep
    assert f.keep("s LIKE 'x_%'") == [False]  # prefix 'x' already excludes it
    assert f.keep("s NOT LIKE 'abc%'") == [False]
    assert f.keep("s NOT LIKE 'abc1%'") == [True]


def test_not_like_keeps_files_with_nulls(files) -> None:
    f = files(s=pa.string()).add({"s": ["abc1", None]})
    assert f.keep("s NOT LIKE 'abc%'") == [True]


@pytest.mark.parametrize("kind", ["orc", "parquet"])
def test_nan_in_a_double_column(files, kind: str) -> None:
    f = files(d=pa.float64()).add({"d": [1.0, math.nan]}, kind).add({"d": [1.0, 1.0]}, kind)
    assert f.keep("d != 1") == [True, kind == "parquet"]  # NaN != 1 is true
    assert f.keep("NOT (d = 1)") == [True, kind == "parquet"]
    # a NaN might sort above every number in another engine: keep unless NaN-free
    assert f.keep("d > 5") == [True, kind == "parquet"]
    assert f.keep("d >= 5") == [True, kind == "parquet"]
    assert f.keep("NOT (d <= 5)") == [True, kind == "parquet"]
    assert f.keep("d < 0") == [False, False]
    assert f.keep("d = 5") == [False, False]
    assert f.keep("isnan(d)") == [True, kind == "parquet"]
    assert f.keep("d = CAST('NaN' AS DOUBLE)") == [True, kind == "parquet"]
    assert f.keep("NOT isnan(d)") == [True, True]
    assert f.keep("d IN (2, CAST('NaN' AS DOUBLE))") == [True, kind == "parquet"]
    assert f.keep("d NOT IN (1)") == [True, kind == "parquet"]


@pytest.mark.parametrize("kind", ["orc", "parquet"])
@pytest.mark.parametrize("first", [-0.0, 0.0])
def test_both_zeros_in_a_double_column(files, kind: str, first: float) -> None:
    """-0.0 = 0.0 (IEEE), for IN and NOT IN as for =: the writer's statistics of a file
    holding both zeros name one of them for min and max (ORC: the first seen); a filter
    keeps or drops both zeros alike (found by the differential test's pool of files)."""
    f = files(d=pa.float64()).add({"d": [first, -first, first]}, kind).add({"d": [1.0]}, kind)
    zeros = pa.table({"d": pa.array([-0.0, 0.0, 1.0])})
    for where, rows in [
        ("d IN (-0.0)", [True, True, False]),
        ("d IN (0.0, 2)", [True, True, False]),
        ("d NOT IN (-2.0, -0.0)", [False, False, True]),
        ("d NOT IN (0.0)", [False, False, True]),
        ("d = -0.0", [True, True, False]),
        ("d != 0.0", [False, False, True]),
    ]:
        assert evaluate_rows(parse_sql_where(where), zeros).to_pylist() == rows, where
        kept = f.keep(where)  # (its oracle: no file holding a matching row is pruned)
        assert kept[0] or not rows[0], where


def test_nan_only_file(files) -> None:
    f = files(d=pa.float64()).add({"d": [math.nan, math.nan]})
    assert f.keep("d > 0") == [True]
    assert f.keep("d != 0") == [True]
    assert f.keep("isnan(d)") == [True]


def test_column_added_later_is_unknown(files, tmp_path: Path) -> None:
    schema = pa.schema([("a", pa.int64()), ("b", pa.int64())])
    old = write_orc(tmp_path / "old.orc", pa.table({"a": [1, 2]}))
    new = write_orc(tmp_path / "new.orc", pa.table({"a": [1], "b": [5]}))
    stats = [read_file_stats(LOCAL, p) for p in (old, new)]
    table = index.read_file_stats_table(stats, ["a", "b"])

    def keep(where: str) -> list[bool]:
        return might_match(parse_sql_where(where), table, schema).to_pylist()

    assert keep("b IS NULL") == [True, False]  # the old file's rows read b as NULL
    assert keep("b = 1") == [True, False]
    assert keep("b IS NOT NULL") == [True, True]
    assert keep("a = 1 AND b IS NULL") == [True, False]


def test_string_over_the_orc_statistics_limit(files) -> None:
    long_a, long_b = "a" * 1500 + "q", "b" * 1500
    f = files(s=pa.string()).add({"s": [long_a, long_b]}, compression=pyorc.CompressionKind.NONE)
    truncate_orc_string_stats(f.paths[0], long_a, long_b)
    assert f.keep(f"s = '{long_a}'") == [True]
    assert f.keep("s > 'c'") == [True]
    assert f.keep("s LIKE 'aaa%'") == [True]
    assert f.keep("s IS NULL") == [False]  # the counts are still known


@pytest.mark.parametrize("kind", ["orc", "parquet"])
def test_timestamp_milliseconds_against_a_microsecond_literal(files, kind: str) -> None:
    f = files(ts=pa.timestamp("us")).add(
        {"ts": [T0 - dt.timedelta(hours=1), T0.replace(microsecond=123)]}, kind
    )
    assert f.keep("ts >= '2024-01-01 12:00:00.000100'") == [True]
    assert f.keep("ts = '2024-01-01 12:00:00.000123'") == [True]
    assert f.keep("ts > '2024-01-01 12:00:00.000122'") == [True]
    assert f.keep("ts > '2024-01-01 12:00:00.002'") == [False]
    assert f.keep("ts < '2024-01-01 10:59:59.998'") == [False]


def test_not_in_and_not_equal_prune_only_a_single_known_value(files) -> None:
    f = (
        files(x=pa.int64())
        .add({"x": [5, 5]})
        .add({"x": [5, None]})
        .add({"x": [5, 6]})
        .add({"x": [None, None]}, "parquet")
    )
    assert f.keep("x != 5") == [False, True, True, False]
    assert f.keep("x NOT IN (5, 7)") == [False, True, True, False]
    assert f.keep("x NOT IN (6, 7)") == [True, True, True, False]
    assert f.keep("NOT (x = 5)") == [False, True, True, False]


def test_long_in_lists(files) -> None:
    f = files(x=pa.int64()).add({"x": [1000]}).add({"x": [151]}).add({"x": [150]})
    evens_200 = ", ".join(str(v) for v in range(0, 400, 2))
    evens_300 = ", ".join(str(v) for v in range(0, 600, 2))
    assert len(range(0, 400, 2)) == IN_LIST_LIMIT
    assert f.keep(f"x IN ({evens_200})") == [False, False, True]
    # over the limit only the list's range is used: 151 is kept, never wrongly pruned
    assert f.keep(f"x IN ({evens_300})") == [False, True, True]
    assert f.keep(f"x IN ({evens_300}, 1000)") == [True, True, True]
    assert f.keep(f"x NOT IN ({evens_300})") == [True, True, False]


def test_zero_row_files_are_pruned(files) -> None:
    f = files(x=pa.int64()).add({"x": []}).add({"x": []}, "parquet").add({"x": []}, "acid")
    f.add({"x": [1]})
    assert f.keep("x IS NULL") == [False, False, False, False]
    assert f.keep("x IS NOT NULL OR x IS NULL") == [False, False, False, True]
    assert f.keep("TRUE") == [False, False, False, True]


def test_null_rules(files) -> None:
    f = files(x=pa.int64()).add({"x": [1, 2]}).add({"x": [1, None]}).add({"x": [None, None]})
    assert f.keep("x IS NULL") == [False, True, True]
    assert f.keep("x IS NOT NULL") == [True, True, False]
    assert f.keep("x = 1") == [True, True, False]
    assert f.keep("x != 1") == [True, True, False]
    assert f.keep("x IN (1, 2)") == [True, True, False]


def test_comparisons_on_every_type(files) -> None:
    f = files(
        i=pa.int32(),
        dec=pa.decimal128(10, 2),
        dt=pa.date32(),
        b=pa.bool_(),
        s=pa.string(),
    ).add(
        {
            "i": [3, 7],
            "dec": [D("1.25"), D("2.50")],
            "dt": [dt.date(2024, 1, 1), dt.date(2024, 1, 31)],
            "b": [False, False],
            "s": ["m", "p"],
        }
    )
    cases = {
        "i < 3": False,
        "i <= 3": True,
        "i > 7": False,
        "i >= 7": True,
        "i = 5": True,
        "i > 6.5": True,
        "i > 7.5": False,
        "i BETWEEN 8 AND 10": False,
        "NOT (i < 5)": True,
        "NOT (i < 8)": False,
        "dec > 2.5": False,
        "dec >= 2.5": True,
        "dec = 1.249": False,
        "dec < 1.251": True,
        "dt > '2024-01-31'": False,
        "dt >= TIMESTAMP '2024-01-31 10:00:00'": False,
        "dt = '2024-01-15'": True,
        "b = TRUE": False,
        "b": False,
        "NOT b": True,
        "b = FALSE": True,
        "s = 'n'": True,
        "s IN ('a', 'z')": False,
        "s IN ('a', 'n')": True,
        "s < 'm'": False,
        "i < 3 OR s > 'o'": True,
        "i < 3 OR s > 'p'": False,
        "i > 2 AND s > 'p'": False,
    }
    got = {where: f.keep(where)[0] for where in cases}
    assert got == cases


def test_nested_struct_fields(files) -> None:
    st = pa.struct([("x", pa.int64()), ("y", pa.string())])
    f = files(st=st).add({"st": [{"x": 1, "y": "a"}, None]}, "acid")
    f.add({"st": [{"x": 9, "y": "q"}]}, "parquet")
    assert f.keep("st.x = 9") == [False, True]
    assert f.keep("st.x IS NULL") == [True, False]
    assert f.keep("ST.Y LIKE 'q%'") == [False, True]


def test_partition_columns_and_missing_stats_keep(files) -> None:
    schema = pa.schema([("x", pa.int64()), ("year", pa.int32())])
    table = pa.table({"path": ["a", "b"], "row_count": [3, None]})
    keep = might_match(parse_sql_where("year = 2024 AND x = 1"), table, schema)
    assert keep.to_pylist() == [True, True]


def test_stats_of_another_type_are_not_used() -> None:
    schema = pa.schema([("x", pa.int64())])
    table = pa.table(
        {
            "path": ["a"],
            "row_count": [3],
            "x__min": ["5"],
            "x__max": ["7"],
            "x__nulls": [0],
            "x__values": [3],
            "x__nans": pa.array([None], pa.int64()),
        }
    )
    assert might_match(parse_sql_where("x = 1"), table, schema).to_pylist() == [True]
    assert might_match(parse_sql_where("x IS NULL"), table, schema).to_pylist() == [False]


def test_clearly_disjoint_files_are_pruned(files) -> None:
    f = files(x=pa.int64(), s=pa.string())
    for n in range(6):
        kind = ["orc", "parquet", "acid"][n % 3]
        f.add({"x": [n * 10, n * 10 + 9], "s": [f"k{n}a", f"k{n}z"]}, kind)
    assert f.keep("x = 25") == [False, False, True, False, False, False]
    assert f.keep("x >= 40") == [False, False, False, False, True, True]
    assert f.keep("s LIKE 'k3%'") == [False, False, False, True, False, False]
    assert f.keep("x < 10 OR s = 'k5m'") == [True, False, False, False, False, True]
    assert sum(f.keep("x IN (1, 55)")) == 2


def test_vectorised_over_many_files() -> None:
    n = 20_000
    schema = pa.schema([("x", pa.int64())])
    table = pa.table(
        {
            "path": [f"f{i}" for i in range(n)],
            "row_count": pa.array([10] * n, pa.int64()),
            "x__min": pa.array(range(0, 10 * n, 10), pa.int64()),
            "x__max": pa.array(range(9, 10 * n, 10), pa.int64()),
            "x__nulls": pa.array([0] * n, pa.int64()),
            "x__values": pa.array([10] * n, pa.int64()),
            "x__nans": pa.nulls(n, pa.int64()),
        }
    )
    keep = might_match(
        parse_sql_where("x IN (5, 12345, 199999) OR x BETWEEN 500 AND 519"), table, schema
    )
    assert len(keep) == n
    assert [i for i, k in enumerate(keep.to_pylist()) if k] == [0, 50, 51, 1234, 19999]


def test_errors_name_the_column(files) -> None:
    schema = pa.schema([("x", pa.int64())])
    table = pa.table({"path": ["a"], "row_count": [1]})
    with pytest.raises(PredicateError, match="unknown column 'y'"):
        might_match(parse_sql_where("y = 1"), table, schema)


def test_direct_starts_with_objects(files) -> None:
    f = files(s=pa.string()).add({"s": ["abc", "abd"]})
    stats = [read_file_stats(LOCAL, p) for p in f.paths]
    table = index.read_file_stats_table(stats, ["s"])
    assert might_match(StartsWith(Ref("s"), ""), table, f.schema).to_pylist() == [True]
    assert might_match(NotStartsWith(Ref("s"), ""), table, f.schema).to_pylist() == [False]
    assert might_match(StartsWith(Ref("s"), "abe"), table, f.schema).to_pylist() == [False]
