"""Real readers of the Delta tables the sink commits: delta-rs, DuckDB's delta extension (from
PyPI: duckdb-extension-delta) and Spark 4.0 with Delta's jars (tests/output/spark_session.py).

Each returns exactly the expected rows for the fixture tables and for generated tables with
inserts, deletes, updates and original files, incrementally published over two snapshots;
and time travel to the first version returns the first snapshot's rows."""

from __future__ import annotations

import datetime as dt
import glob
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hive_fixtures import FIXTURE_ROW_COUNTS, arrange_fixture_table
from spark_session import spark  # noqa: F401 - the session-wide fixture

from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.output.delta import DeltaSink
from airflow_provider_acid.testing import generate_demo_table
from airflow_provider_acid.testing.table_writer import AcidTableWriter

FIXTURES = {
    "nation": "default.nation:4:9223372036854775807::",
    "nation_originals": None,
    "dummy_id_data": None,
    "hcube_tbl6_partitioned": None,
    "load_data": None,
}


@dataclass(frozen=True)
class Published:
    """A Delta table the sink wrote, with the rows each of its snapshots must show."""

    uri: str
    columns: tuple[str, ...]
    expected: tuple[tuple, ...]  # the latest snapshot
    first_version: int
    first_expected: tuple[tuple, ...] | None = None


def normal(value: Any) -> Any:
    """Values as every reader returns them, comparable (Spark's and DuckDB's Python values)."""
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def normal_rows(rows: Any) -> tuple[tuple, ...]:
    return tuple(sorted((tuple(normal(v) for v in row) for row in rows), key=repr))


def arrow_rows(table: pa.Table, columns: tuple[str, ...]) -> tuple[tuple, ...]:
    return normal_rows(zip(*(table[c].to_pylist() for c in columns), strict=True))


def publish_fixture(name: str, work: Path) -> Published:
    root = arrange_fixture_table(name, work / "tables" / name)
    out = work / "out"
    result = compact_table(str(root), str(out), write_ids=FIXTURES[name])
    publication = DeltaSink(str(out)).publish(result)
    # the manifest's files as they are (partition columns are in the files too)
    manifest_rows = pa.concat_tables(
        pq.read_table(path, partitioning=None) for path in result.file_paths()
    )
    assert manifest_rows.num_rows == FIXTURE_ROW_COUNTS[name]
    columns = tuple(manifest_rows.column_names)
    return Published(publication.details["uri"], columns, arrow_rows(manifest_rows, columns), 0)


def publish_generated(table: AcidTableWriter, out: Path, change) -> Published:
    """Two snapshots: as written, then after ``change(table)``; both published."""
    columns = tuple(table.expected_rows().column_names)
    sink = DeltaSink(str(out))
    first = sink.publish(compact_table(table.root, str(out), write_ids=table.valid_write_ids()))
    first_expected = arrow_rows(table.expected_rows(), columns)
    change(table)
    second = sink.publish(compact_table(table.root, str(out), write_ids=table.valid_write_ids()))
    assert second.table_version == first.table_version + 1
    expected = arrow_rows(table.expected_rows(), columns)
    assert expected != first_expected
    return Published(str(out), columns, expected, first.table_version, first_expected)


def demo_with_originals(work: Path) -> Published:
    table = generate_demo_table(
        str(work / "demo"),
        partitions=2,
        buckets=2,
        rows_per_bucket=60,
        insert_deltas=2,
        originals=True,
        aborted_writes=1,
        seed=7,
    )

    def change(t: AcidTableWriter) -> None:
        t.delete(lambda r: r["id"] % 11 == 0)
        t.update(lambda r: r["id"] % 13 == 0, {"note": "updated"})

    return publish_generated(table, work / "out", change)


def special_partitions(work: Path) -> Published:
    """Partition values Hive escapes in folder names (``:`` -> ``%3A``), a space, a null."""
    table = AcidTableWriter(
        str(work / "special"),
        [("id", "int"), ("label", "string"), ("day", "date"), ("score", "double")],
        [("p", "string")],
        buckets=2,
        bucket_by="id",
    )
    values = ["a", "b c:d", None, "e%f"]
    table.insert(
        [
            {
                "id": i,
                "label": None if i % 5 == 0 else f"l{i}",
                "day": f"2024-03-{1 + i % 30:02d}",
                "score": i / 4,
                "p": values[i % 4],
            }
            for i in range(80)
        ]  # fmt: skip
    )
    table.update(lambda r: r["id"] % 3 == 0, {"label": "u"})

    def change(t: AcidTableWriter) -> None:
        t.delete(lambda r: r["p"] == "b c:d" and r["id"] % 2 == 1)
        t.insert([{"id": 100, "label": "new", "day": "2024-04-01", "score": 1.5, "p": "b c:d"}])

    return publish_generated(table, work / "out", change)


CASES = [*FIXTURES, "demo_with_originals", "special_partitions"]


@pytest.fixture(scope="module", params=CASES)
def published(request, tmp_path_factory) -> Published:
    work = tmp_path_factory.mktemp(request.param)
    if request.param == "demo_with_originals":
        return demo_with_originals(work)
    if request.param == "special_partitions":
        return special_partitions(work)
    return publish_fixture(request.param, work)


def test_delta_rs_reads_exactly_the_snapshot(published):
    table = DeltaTable(published.uri)
    assert arrow_rows(table.to_pyarrow_table(), published.columns) == published.expected
    if published.first_expected is not None:
        first = DeltaTable(published.uri, version=published.first_version).to_pyarrow_table()
        assert arrow_rows(first, published.columns) == published.first_expected


def duckdb_with_delta() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the delta extension loaded from its PyPI package (DuckDB's own
    extension download is not reachable here; nothing is downloaded)."""
    import duckdb_extension_delta

    (path,) = glob.glob(f"{duckdb_extension_delta.__path__[0]}/extensions/*/delta.duckdb_extension")
    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute(f"LOAD '{path}'")
    return con


def test_duckdb_delta_extension_reads_exactly_the_snapshot(published):
    con = duckdb_with_delta()
    select = ", ".join(f'"{c}"' for c in published.columns)
    rows = con.execute(f"SELECT {select} FROM delta_scan(?)", [published.uri]).fetchall()
    assert normal_rows(rows) == published.expected


def test_spark_reads_exactly_the_snapshot(published, spark):  # noqa: F811
    frame = spark.read.format("delta").load(published.uri)
    rows = frame.select(*published.columns).collect()
    assert normal_rows(tuple(r) for r in rows) == published.expected
    if published.first_expected is not None:
        first = (
            spark.read.format("delta")
            .option("versionAsOf", published.first_version)
            .load(published.uri)
            .select(*published.columns)
            .collect()
        )
        assert normal_rows(tuple(r) for r in first) == published.first_expected
