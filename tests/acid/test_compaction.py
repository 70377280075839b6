"""Compaction: every real fixture table to the row, output types and layout, options."""

from __future__ import annotations

import collections
import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hive_fixtures import FIXTURE_ROW_COUNTS

from airflow_provider_acid.acid.hive_types import HIVE_TYPE_KEY
from airflow_provider_acid.acid.resolution import resolve_read_view
from airflow_provider_acid.acid.rows import DeleteBatch, encode_bucket_v1
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.delete_keys import DeleteKeySet
from airflow_provider_acid.engine.options import CompactionOptions, options_from_dict
from airflow_provider_acid.engine.plan import select_slices
from airflow_provider_acid.testing.table_writer import AcidTableWriter


def read_out(out: Path) -> pa.Table:
    """The snapshot as a plain folder read sees it."""
    return ds.dataset(str(out), format="parquet").to_table()


def multiset(table: pa.Table, columns: list[str] | None = None) -> collections.Counter:
    columns = columns or table.column_names
    return collections.Counter(
        tuple(row[c] for c in columns) for row in table.select(columns).to_pylist()
    )


# -- every fixture table -------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURE_ROW_COUNTS))
def test_fixture_table_compacts_to_its_row_count(hive_table, tmp_path, name):
    out = tmp_path / "out"
    result = compact_table(str(hive_table(name)), str(out))
    assert read_out(out).num_rows == FIXTURE_ROW_COUNTS[name]
    assert result.rows_written == FIXTURE_ROW_COUNTS[name]
    assert result.newly_committed


def test_nation_loses_keys_5_and_19_only(hive_table, tmp_path):
    out = tmp_path / "out"
    result = compact_table(str(hive_table("nation")), str(out))
    counts = collections.Counter(read_out(out)["n_nationkey"].to_pylist())
    assert counts == {k: 1000 for k in range(25) if k not in (5, 19)}
    (bucket,) = result.buckets
    assert (bucket.rows_read, bucket.rows_deleted, bucket.delete_keys) == (25_000, 2_000, 2_000)
    # pyarrow and DuckDB read the same rows from the folder
    duckdb = pytest.importorskip("duckdb")
    duck = duckdb.sql(f"select count(*), count(distinct n_nationkey) from '{out}/**/*.parquet'")
    assert duck.fetchall() == [(23_000, 23)]


def test_nation_with_an_older_write_id_list_keeps_key_19(hive_table, tmp_path):
    out = tmp_path / "out"
    compact_table(
        str(hive_table("nation")), str(out), write_ids="default.nation:3:9223372036854775807::"
    )
    counts = collections.Counter(read_out(out)["n_nationkey"].to_pylist())
    assert counts[19] == 1000 and 5 not in counts and sum(counts.values()) == 24_000


def test_original_file_row_deleted_by_synthetic_identity(hive_table, tmp_path):
    out = tmp_path / "out"
    compact_table(str(hive_table("nation_originals")), str(out))
    keys = read_out(out)["n_nationkey"].to_pylist()
    assert sorted(keys) == list(range(24))


def test_copies_keep_their_row_ids(hive_table, tmp_path):
    out = tmp_path / "out"
    compact_table(
        str(hive_table("dummy_id_data")), str(out), options=CompactionOptions(include_identity=True)
    )
    table = read_out(out)
    assert sorted(table["id"].to_pylist()) == [0, 1, 4, *range(5, 21)]
    by_id = {r["id"]: r for r in table.to_pylist()}
    assert by_id[17]["_acid_row_id"] == 8 and by_id[17]["_acid_bucket"] == encode_bucket_v1(2)
    assert by_id[4]["_acid_original_transaction"] == 0 and by_id[4]["_acid_row_id"] == 3


def test_partitioned_hcube_keeps_the_layout_and_types_the_partition(hive_table, tmp_path):
    out = tmp_path / "out"
    compact_table(str(hive_table("hcube_tbl6_partitioned")), str(out))
    files = sorted(p.relative_to(out).parent.as_posix() for p in out.rglob("*.parquet"))
    assert files == ["fld1=1", "fld1=2"]
    table = read_out(out)
    assert table.schema.field("fld1").type == pa.int64()
    assert sorted(table["fld1"].to_pylist()) == [1, 2]


# -- output types and layout -----------------------------------------------------------------


@pytest.fixture
def typed_table(tmp_path: Path) -> AcidTableWriter:
    columns = [
        ("id", "bigint"),
        ("c", "char(4)"),
        ("v", "varchar(8)"),
        ("d", "date"),
        ("ts", "timestamp"),
        ("amount", "decimal(20,4)"),
        ("s", "struct<a:int,b:string>"),
        ("l", "array<bigint>"),
        ("m", "map<string,int>"),
    ]
    table = AcidTableWriter(
        str(tmp_path / "typed"),
        columns,
        partition_columns=[("day", "date"), ("region", "string")],
        buckets=2,
        bucket_by="id",
    )
    rows = [
        {
            "id": i,
            "c": "ab",
            "v": f"v{i}",
            "d": dt.date(2024, 1, 1) + dt.timedelta(days=i),
            "ts": dt.datetime(2024, 1, 1, 12, 0, 0, i),
            "amount": decimal.Decimal(i) / 4,
            "s": {"a": i, "b": "x"},
            "l": [i, i + 1],
            "m": [("k", i)],
            "day": dt.date(2024, 1, 1 + i % 2),
            "region": None if i % 3 == 0 else "eu",
        }
        for i in range(12)
    ]
    table.insert(rows)
    table.delete(lambda r: r["id"] in (4, 7))
    table.update(lambda r: r["id"] == 5, {"v": "new"})
    return table


def test_hive_types_are_written_faithfully(typed_table, tmp_path):
    out = tmp_path / "out"
    compact_table(typed_table.root, str(out))
    table = read_out(out)
    schema = table.schema
    assert schema.field("c").type == pa.string()
    assert schema.field("c").metadata[HIVE_TYPE_KEY] == b"char(4)"
    assert schema.field("v").metadata[HIVE_TYPE_KEY] == b"varchar(8)"
    assert schema.field("ts").type == pa.timestamp("us")
    assert schema.field("amount").type == pa.decimal128(20, 4)
    assert schema.field("s").type == pa.struct([("a", pa.int32()), ("b", pa.string())])
    assert schema.field("l").type == pa.list_(pa.int64())
    assert pa.types.is_map(schema.field("m").type)
    assert schema.field("day").type == pa.date32()
    expected = typed_table.expected_rows()
    expected = expected.set_column(
        expected.schema.get_field_index("ts"), "ts", pc.cast(expected["ts"], pa.timestamp("us"))
    )
    assert multiset(table, ["id", "c", "v", "d", "ts", "amount", "day", "region"]) == multiset(
        expected, ["id", "c", "v", "d", "ts", "amount", "day", "region"]
    )
    assert table.num_rows == 10
    # the partition layout is kept, the null partition stays Hive's default folder
    folders = {p.relative_to(out).parent.as_posix() for p in out.rglob("*.parquet")}
    assert "day=2024-01-01/region=__HIVE_DEFAULT_PARTITION__" in folders
    assert "day=2024-01-02/region=eu" in folders
    nulls = expected.filter(pc.is_null(expected["region"])).num_rows
    assert table.filter(pc.is_null(table["region"])).num_rows == nulls > 0
    duckdb = pytest.importorskip("duckdb")
    duck = duckdb.sql(f"select count(*) from '{out}/**/*.parquet' where region is null")
    assert duck.fetchall() == [(nulls,)]


def test_declared_partition_types_and_nanosecond_timestamps(typed_table, tmp_path):
    out = tmp_path / "out"
    options = CompactionOptions(partition_types={"day": "string"}, timestamp_unit="ns")
    compact_table(typed_table.root, str(out), options=options)
    schema = read_out(out).schema
    assert schema.field("day").type == pa.string()
    assert schema.field("ts").type == pa.timestamp("ns")


def test_files_roll_over_at_the_target_size(typed_table, tmp_path):
    out = tmp_path / "out"
    options = CompactionOptions(target_file_size=1, row_group_rows=1, batch_rows=1)
    result = compact_table(typed_table.root, str(out), options=options)
    assert max(len(b.files) for b in result.buckets) > 1
    assert sum(pq.read_metadata(p).num_rows for p in result.file_paths()) == 10
    assert read_out(out).num_rows == 10


def test_row_filter_drops_rows_and_counts_them(typed_table, tmp_path):
    out = tmp_path / "out"

    def even(table: pa.Table) -> pa.Array:
        return pc.equal(pc.bit_wise_and(table["id"], 1), 0)

    with pytest.raises(ValueError, match="row_filter_key"):
        compact_table(typed_table.root, str(out), row_filter=even)
    result = compact_table(typed_table.root, str(out), row_filter=even, row_filter_key="id even")
    assert sorted(read_out(out)["id"].to_pylist()) == [0, 2, 6, 8, 10]
    totals = result.totals()
    assert totals["rows_filtered"] == 5 and totals["rows_written"] == 5
    assert result.settings["row_filter"] == "id even"


def test_choosing_partitions_buckets_and_slices(typed_table, tmp_path):
    snapshot = resolve_read_view(typed_table.root)

    def paths(slices):
        return {(s.partition.path, s.bucket_id) for s in slices}

    every = paths(snapshot.slices)
    assert paths(select_slices(snapshot, partitions=["day=2024-01-02"])) == {
        p for p in every if p[0].startswith("day=2024-01-02/")
    }
    assert paths(select_slices(snapshot, partitions=[{"region": None}])) == {
        p for p in every if p[0].endswith("region=__HIVE_DEFAULT_PARTITION__")
    }
    assert paths(select_slices(snapshot, partitions=["day=2024-01-02/region=eu"], buckets=[1])) == {
        ("day=2024-01-02/region=eu", 1)
    }
    key = snapshot.slices[0].key
    assert [s.key for s in select_slices(snapshot, slice_keys=[key])] == [key]
    with pytest.raises(ValueError, match="matches no partition"):
        select_slices(snapshot, partitions=["day=2024-01-02", "day=1999-01-01"])
    with pytest.raises(ValueError, match=r"\['hour'\] are not partition columns"):
        select_slices(snapshot, partitions=["hour=1"])
    with pytest.raises(ValueError, match="slice_keys"):
        select_slices(snapshot, slice_keys=["nope#0"])
    out = tmp_path / "out"
    result = compact_table(typed_table.root, str(out), partitions=["region=eu"], buckets=[0])
    assert {b.slice_key.rsplit("#", 1)[1] for b in result.buckets} == {"0"}
    assert set(read_out(out)["region"].to_pylist()) == {"eu"}


def test_insert_only_tables_are_copied_as_they_are(tmp_path):
    table = AcidTableWriter(
        str(tmp_path / "io"),
        [("id", "bigint"), ("s", "string")],
        transactional_properties="insert_only",
    )
    table.insert([{"id": 1, "s": "a"}, {"id": 2, "s": "b"}])
    table.insert([{"id": 3, "s": "c"}])
    # a Parquet file written by another engine into the same table
    extra = tmp_path / "io" / "delta_0000003_0000003_0000" / "000000_0"
    extra.parent.mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([4], pa.int64()), "s": ["d"]}), extra)
    out = tmp_path / "out"
    compact_table(str(tmp_path / "io"), str(out), insert_only=True)
    assert sorted(read_out(out)["id"].to_pylist()) == [1, 2, 3, 4]


def test_options_from_plain_data():
    assert options_from_dict({"compression": "snappy"}).compression == "snappy"
    with pytest.raises(ValueError, match="unknown compaction options"):
        options_from_dict({"compresion": "snappy"})
    with pytest.raises(ValueError, match="timestamp_unit"):
        CompactionOptions(timestamp_unit="h")


# -- the delete key set ----------------------------------------------------------------------


def keys_batch(keys: list[tuple[int, int, int]]) -> DeleteBatch:
    o, b, r = zip(*keys, strict=True) if keys else ((), (), ())
    return DeleteBatch(
        None, pa.array(o, pa.int64()), pa.array(b, pa.int32()), pa.array(r, pa.int64())
    )


def identity_arrays(rows: list[tuple[int, int, int]]) -> list[pa.Array]:
    columns = zip(*rows, strict=True)
    types = (pa.int64(), pa.int32(), pa.int64())
    return [pa.array(c, t) for c, t in zip(columns, types, strict=True)]


def test_delete_key_set_matches_the_full_key():
    b0, b0s1 = encode_bucket_v1(0), encode_bucket_v1(0, 1)
    keys = DeleteKeySet.from_batches(
        [keys_batch([(1, b0, 5), (1, b0, 5), (1, b0s1, 6)]), keys_batch([(2, b0, 0)])]
    )
    assert len(keys) == 3  # the repeated delete counts once
    rows = [(1, b0, 5), (1, b0, 6), (1, b0s1, 6), (2, b0, 0), (2, b0s1, 0), (3, b0, 5)]
    o, b, r = identity_arrays(rows)
    assert keys.match(o, b, r).to_pylist() == [True, False, True, True, False, False]
    assert keys.match(o.slice(5), b.slice(5), r.slice(5)) is None


def test_delete_key_set_handles_unsorted_rows_with_many_runs():
    b0 = encode_bucket_v1(0)
    deleted = [(w, b0, w * 10) for w in range(200)]
    keys = DeleteKeySet.from_batches([keys_batch(list(reversed(deleted)))])
    rows = [(w % 200, b0, (w % 200) * 10 + (w // 200)) for w in range(0, 800, 3)]
    o, b, r = identity_arrays(rows)
    expected = [row in set(deleted) for row in rows]
    assert keys.match(o, b, r).to_pylist() == expected
