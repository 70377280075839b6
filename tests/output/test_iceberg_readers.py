"""Real readers of the Iceberg tables the sink commits: pyiceberg's scan, DuckDB's iceberg
extension (the PyPI build, loaded from its package) and Spark with Iceberg's runtime jar.

Each reads the nation fixture (high watermarks 3, then 4: 23,000 rows now, 24,000 at the first
snapshot) and a generated table with inserts, deletes, updates and original files, whose rows
the simulator knows (``expected_rows``). The tables are opened from the CLI's ``--json`` block.
"""

from __future__ import annotations

import glob
import os
import uuid

import pytest
from cli_helpers import compact_json, compact_nation_iceberg
from spark_session import spark  # noqa: F401 - the session-wide Spark fixture

from airflow_provider_acid.testing import generate_demo_table

COLUMNS = ("id", "category", "amount", "ts", "note", "dt")


def as_rows(records) -> list[tuple]:
    return sorted(tuple(str(r[c]) if c == "dt" else r[c] for c in COLUMNS) for r in records)


@pytest.fixture
def nation(hive_table, tmp_path, capsys):
    """The nation fixture published twice (watermarks 3 and 4): the two ``--json`` outputs."""
    table, out = str(hive_table("nation")), str(tmp_path / "nation-out")
    name = f"c{uuid.uuid4().hex[:8]}"  # a catalog of its own: Spark caches catalogs by name
    return [
        compact_nation_iceberg(capsys, table, out, hwm, "--iceberg-catalog-name", name)
        for hwm in (3, 4)
    ]


@pytest.fixture
def generated(tmp_path, capsys):
    """A table with inserts, deletes, updates and original files: (writer, ``--json``)."""
    writer = generate_demo_table(
        str(tmp_path / "sales"), partitions=2, buckets=2, rows_per_bucket=300, originals=True,
        seed=21,
    )  # fmt: skip
    out = str(tmp_path / "sales-out")
    name = f"c{uuid.uuid4().hex[:8]}"
    published = compact_json(
        capsys, writer.root, "--out", out, "--valid-write-ids", writer.valid_write_ids(),
        "--format", "iceberg", "--iceberg-catalog-name", name,
    )  # fmt: skip
    return writer, published


# -- pyiceberg -------------------------------------------------------------------------------


def test_pyiceberg_scans_the_generated_table_exactly(generated):
    from pyiceberg.catalog import load_catalog

    writer, published = generated
    block = published["iceberg"]
    table = load_catalog(block["catalog_name"], **block["catalog"]).load_table(block["table"])
    assert as_rows(table.scan().to_arrow().to_pylist()) == as_rows(
        writer.expected_rows().to_pylist()
    )


# -- DuckDB ----------------------------------------------------------------------------------


def duckdb_with_iceberg():
    """DuckDB with its iceberg extension loaded from the PyPI packages (``readers`` extra):
    DuckDB's own extension download is not reachable here, and nothing is fetched."""
    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_iceberg

    connection = duckdb.connect(
        config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    )
    for package in (duckdb_extension_avro, duckdb_extension_iceberg):
        folder = os.path.dirname(package.__file__)
        (path,) = glob.glob(os.path.join(folder, "extensions", "*", "*.duckdb_extension"))
        connection.execute(f"LOAD '{path}'")
    return connection


def test_duckdb_reads_nation_and_travels_to_the_first_snapshot(nation):
    first, second = nation
    db = duckdb_with_iceberg()
    metadata = second["iceberg"]["metadata_location"]
    count, keys, banned = db.execute(
        "SELECT count(*), count(DISTINCT n_nationkey), count(*) FILTER (n_nationkey IN (5, 19)) "
        "FROM iceberg_scan(?)",
        [metadata],
    ).fetchone()
    assert (count, keys, banned) == (23_000, 23, 0)
    old = db.execute(
        "SELECT count(*) FROM iceberg_scan(?, snapshot_from_id = ?)",
        [metadata, first["iceberg"]["snapshot_id"]],
    ).fetchone()[0]
    assert old == 24_000
    snapshots = db.execute("SELECT snapshot_id FROM iceberg_snapshots(?)", [metadata]).fetchall()
    assert sorted(s for (s,) in snapshots) == sorted(
        r["iceberg"]["snapshot_id"] for r in (first, second)
    )


def test_duckdb_reads_the_generated_table_exactly(generated):
    writer, published = generated
    db = duckdb_with_iceberg()
    relation = db.execute(
        f"SELECT {', '.join(COLUMNS)} FROM iceberg_scan(?)",
        [published["iceberg"]["metadata_location"]],
    )
    names = [d[0] for d in relation.description]
    records = [dict(zip(names, row, strict=True)) for row in relation.fetchall()]
    assert as_rows(records) == as_rows(writer.expected_rows().to_pylist())


# -- Spark -----------------------------------------------------------------------------------


def spark_catalog(spark, block: dict) -> str:  # noqa: F811 - the fixture, passed in
    """Register the embedded SQL catalog in Spark as Iceberg's JdbcCatalog (same SQLite file,
    same catalog name, which is how both find the table's row); returns the catalog name."""
    name = block["catalog_name"]
    prefix = f"spark.sql.catalog.{name}"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog")
    spark.conf.set(f"{prefix}.uri", "jdbc:" + block["catalog"]["uri"].replace(":///", ":/", 1))
    spark.conf.set(f"{prefix}.warehouse", block["catalog"]["warehouse"])
    return name


def test_spark_reads_nation_and_travels_to_the_first_snapshot(spark, nation):  # noqa: F811
    first, second = nation
    catalog = spark_catalog(spark, second["iceberg"])
    table = f"{catalog}.{second['iceberg']['table']}"
    now = spark.table(table)
    assert now.count() == 23_000
    assert now.filter("n_nationkey IN (5, 19)").count() == 0
    old = spark.read.option("snapshot-id", first["iceberg"]["snapshot_id"]).table(table)
    assert old.count() == 24_000
    history = spark.sql(f"SELECT snapshot_id FROM {table}.snapshots").collect()
    assert sorted(r.snapshot_id for r in history) == sorted(
        r["iceberg"]["snapshot_id"] for r in (first, second)
    )


def test_spark_reads_the_generated_table_exactly(spark, generated):  # noqa: F811
    writer, published = generated
    catalog = spark_catalog(spark, published["iceberg"])
    frame = spark.table(f"{catalog}.{published['iceberg']['table']}").select(*COLUMNS)
    records = [row.asDict() for row in frame.collect()]
    assert as_rows(records) == as_rows(writer.expected_rows().to_pylist())
