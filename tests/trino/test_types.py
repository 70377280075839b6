"""Every Hive type Trino writes, with values at their edges, read by name and compared with
Trino's SELECT; then Trino reads back what the provider published (Iceberg through a Hive
catalog in the same metastore, Delta through ``register_table``).

One table holds every case, written in three transactions: one INSERT whose values all lie
inside Arrow's nanosecond range (pyarrow's fast read), one whose timestamps reach Hive's whole
range 0001-01-01 .. 9999-12-31 (the exact read of :mod:`airflow_provider_acid.acid.orc_timestamps`),
then an UPDATE and a DELETE.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pytest
from trino_helpers import Schema, Trino, assert_same_rows, assert_types

from airflow_provider_acid.output import SnapshotResult
from airflow_provider_acid.output.sinks import publish_snapshot

COLUMNS = """
    id integer, tiny tinyint, small smallint, big bigint, r real, d double,
    dec_small decimal(5,2), dec_big decimal(38,10), flag boolean,
    s varchar, v varchar(6), c char(6), bin varbinary, day date, ts timestamp(6),
    tss array(timestamp(6)), m map(varchar, date), rw row(x integer, c char(3), t timestamp(6))
"""

#: inside 1677-09-21 .. 2262-04-11: pyarrow reads these stripes itself
IN_RANGE = """
 (1, 127, 32767, 9223372036854775807, REAL '3.4028235e38', DOUBLE '1.7976931348623157e308',
  999.99, DECIMAL '9999999999999999999999999999.9999999999', true,
  'plain', 'ab', 'ab', X'00ff', DATE '2024-02-29', TIMESTAMP '2024-02-29 12:34:56.123456',
  ARRAY[TIMESTAMP '1970-01-01 00:00:00.000001'], MAP(ARRAY['a'], ARRAY[DATE '1970-01-01']),
  ROW(1, 'x', TIMESTAMP '2000-01-01 00:00:00')),
 (2, -128, -32768, -9223372036854775808, REAL 'NaN', DOUBLE 'NaN',
  -999.99, DECIMAL '-9999999999999999999999999999.9999999999', false,
  '', '', '', X'', DATE '1970-01-01', TIMESTAMP '1900-01-01 00:00:00.000001',
  ARRAY[], MAP(ARRAY[], ARRAY[]), ROW(NULL, NULL, NULL)),
 (3, 0, 0, 0, REAL 'Infinity', DOUBLE '-Infinity', 0.01, DECIMAL '0.0000000001', NULL,
  'ünï €😀 中文', 'ü😀 ', 'ü😀', X'deadbeef', DATE '1677-09-22',
  TIMESTAMP '1677-09-22 00:00:00.000001',
  ARRAY[TIMESTAMP '2262-04-11 23:47:16.854775', NULL],
  MAP(ARRAY['k', 'l'], ARRAY[NULL, DATE '2262-04-11']),
  NULL),
 (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  TIMESTAMP '1969-12-31 23:59:58.999', NULL, NULL, ROW(4, 'abc', TIMESTAMP '1969-12-31 23:59:59'))
"""

#: Hive's whole range, across the Julian/Gregorian switch of 1582 (proleptic Gregorian)
WHOLE_RANGE = """
 (10, 1, 1, 1, 1.5, 2.5, 1.00, 1, true, 'open-ended', 'scd ', 'scd', X'01',
  DATE '9999-12-31', TIMESTAMP '9999-12-31 23:59:59.999999',
  ARRAY[TIMESTAMP '0001-01-01 00:00:00', TIMESTAMP '9999-12-31 00:00:00'],
  MAP(ARRAY['first', 'last'], ARRAY[DATE '0001-01-01', DATE '9999-12-31']),
  ROW(10, 'a', TIMESTAMP '0001-01-01 00:00:00.000001')),
 (11, 2, 2, 2, 2.5, 3.5, 2.00, 2, false, 'first day', 'a', 'a', X'02',
  DATE '0001-01-01', TIMESTAMP '0001-01-01 00:00:00', NULL, NULL, NULL),
 (12, 3, 3, 3, 3.5, 4.5, 3.00, 3, true, 'last Julian day', 'b', 'b', X'03',
  DATE '1582-10-04', TIMESTAMP '1582-10-04 23:59:59.999999', NULL, NULL, NULL),
 (13, 4, 4, 4, 4.5, 5.5, 4.00, 4, true, 'first Gregorian day', 'c', 'c', X'04',
  DATE '1582-10-15', TIMESTAMP '1582-10-15 00:00:00.001', NULL, NULL, NULL),
 (14, 5, 5, 5, 5.5, 6.5, 5.00, 5, true, 'proleptic: a leap day Julian and Gregorian share',
  'd', 'd', X'05', DATE '1600-02-29', TIMESTAMP '1600-02-29 12:00:00', NULL, NULL, NULL),
 (15, 6, 6, 6, 6.5, 7.5, 6.00, 6, true, 'not a Gregorian leap year', 'e', 'e', X'06',
  DATE '1500-03-01', TIMESTAMP '1500-02-28 23:59:59.000001', NULL, NULL, NULL),
 (16, 7, 7, 7, 7.5, 8.5, 7.00, 7, true, 'just past the nanosecond range', 'f', 'f', X'07',
  DATE '2262-04-12', TIMESTAMP '2262-04-11 23:47:16.854776', NULL, NULL, NULL)
"""


@pytest.fixture(scope="module")
def types_table(trino: Trino, schema: Schema) -> str:
    qualified = schema.create("types", COLUMNS)
    trino.sql(f"INSERT INTO {qualified} VALUES {IN_RANGE}")
    trino.sql(f"INSERT INTO {qualified} VALUES {WHOLE_RANGE}")
    trino.sql(f"UPDATE {qualified} SET s = 'updated', c = 'up' WHERE id IN (1, 12)")
    trino.sql(f"DELETE FROM {qualified} WHERE id = 3")
    return qualified


@pytest.fixture(scope="module")
def snapshot(types_table: str, schema: Schema, tmp_path_factory) -> tuple[SnapshotResult, pa.Table]:
    out = tmp_path_factory.mktemp("types-out") / "snapshot"
    return schema.compact_by_name("types", out), schema.read_output(out)


def test_every_type_and_edge_value_reads_as_trino_selects_it(trino, types_table, snapshot):
    _, table = snapshot
    count = assert_same_rows(trino, f"SELECT * FROM {types_table}", table)
    assert count == 3 + 7  # 4 + 7 inserted, id 3 deleted
    assert_types(trino, types_table, table)
    by_id = {row["id"]: row for row in table.to_pylist()}
    # the three fixes, checked on the values themselves too (Trino stores char unpadded)
    assert by_id[1]["c"] == "up    " and by_id[1]["v"] == "ab" and by_id[2]["c"] == "      "
    assert by_id[10]["c"] == "scd   " and by_id[10]["v"] == "scd "
    assert by_id[10]["ts"] == dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    assert by_id[11]["ts"] == dt.datetime(1, 1, 1) and by_id[11]["day"] == dt.date(1, 1, 1)
    assert by_id[13]["ts"] == dt.datetime(1582, 10, 15, 0, 0, 0, 1000)
    # proleptic Gregorian: the day before 1582-10-15 is 1582-10-14, ten days after 10-04
    assert (dt.date(1582, 10, 15) - by_id[12]["day"]).days == 11
    assert by_id[2]["ts"] == dt.datetime(1900, 1, 1, 0, 0, 0, 1)  # Trino's pre-1970 rule
    assert by_id[10]["rw"]["t"] == dt.datetime(1, 1, 1, 0, 0, 0, 1)
    assert by_id[2]["dec_big"] == decimal.Decimal("-9999999999999999999999999999.9999999999")


def test_char_is_padded_and_varchar_is_not(trino, schema, types_table, snapshot):
    _, table = snapshot
    stored = set()  # Trino's files hold its char values without their padding ...
    for path in (schema.folder / "types").glob("delta_*/bucket_*"):
        stored |= set(
            orc.ORCFile(str(path)).read(["row.c"]).column(0).combine_chunks().field(0).to_pylist()
        )
    assert "ab" in stored and "ab    " not in stored
    chars = [v for v in table.column("c").to_pylist() if v is not None]
    assert chars and all(len(v) == 6 for v in chars)  # ... its values are padded on read
    varchars = table.column("v").to_pylist()
    assert "scd " in varchars and "ab" in varchars  # as written: never padded nor trimmed


def test_trino_reads_back_the_iceberg_and_delta_publications(trino, schema, snapshot):
    result, table = snapshot
    iceberg_name = f"{schema.name}.types_iceberg"
    catalog = {"type": "hive", "uri": trino.metastore_uri}
    publish_snapshot(result, "iceberg", options={"catalog": catalog, "table": iceberg_name})
    schema.tables.append(f"iceberg.{iceberg_name}")
    assert assert_same_rows(trino, f"SELECT * FROM iceberg.{iceberg_name}", table) == 10

    publish_snapshot(result, "delta")  # the output folder is the Delta table
    location = Path(result.out).as_uri()
    trino.sql(
        f"CALL delta_lake.system.register_table(schema_name => '{schema.name}', "
        f"table_name => 'types_delta', table_location => '{location}')"
    )
    schema.tables.append(f"delta_lake.{schema.name}.types_delta")
    query = f"SELECT * FROM delta_lake.{schema.name}.types_delta"
    assert assert_same_rows(trino, query, table) == 10
