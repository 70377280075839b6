"""An ORC file's declared types and file statistics read from its footer
(``acid/orc_declared_types.py``) are pyorc's (liborc's), on the files Hive and Trino wrote and
on files of every Hive type written here; what the module does not read gives None, and an
opened file then pyorc's answer."""

from __future__ import annotations

import io
from pathlib import Path

import pyorc
import pytest
from fsspec.implementations.local import LocalFileSystem
from hive_fixtures import FIXTURES

from airflow_provider_acid.acid.data_file_open import open_file
from airflow_provider_acid.acid.hive_types import HiveType
from airflow_provider_acid.acid.listing import StoredFile
from airflow_provider_acid.acid.orc_declared_types import TAIL_BYTES, OrcFooter, read_footer
from airflow_provider_acid.acid.orc_stripe_stats import Unreadable
from airflow_provider_acid.acid.read_view import DataFile, FileRole

BUCKET_COLUMN = 3  # an ACID file's ORC column id of ``bucket``

FIXTURE_FILES = sorted(str(p) for p in FIXTURES.rglob("bucket_*") if p.is_file())

EVERY_TYPE = (
    "struct<b:boolean,t:tinyint,s:smallint,i:int,l:bigint,f:float,d:double,str:string,"
    "bin:binary,ts:timestamp,tz:timestamp with local time zone,dt:date,dec:decimal(12,2),"
    "big:decimal(38,10),v:varchar(20),c:char(3),a:array<int>,m:map<string,array<decimal(5,1)>>,"
    "nested:struct<x:bigint,y:struct<Z:varchar(5)>>>"
)


def _pyorc(data: bytes) -> tuple[HiveType, tuple[int, int] | None]:
    """The file's type and its column 3's bounds as pyorc reads them."""
    reader = pyorc.Reader(io.BytesIO(data))
    stats = reader[BUCKET_COLUMN].statistics if len(reader.schema.fields) > 2 else {}
    low, high = stats.get("minimum"), stats.get("maximum")
    bounds = (int(low), int(high)) if low is not None and high is not None else None
    return HiveType.parse(str(reader.schema)), bounds


def _ours(data: bytes):
    footer = read_footer(io.BytesIO(data))
    assert footer is not None
    return footer.file_type, footer.integer_range(BUCKET_COLUMN)


def _written(schema: str, rows: list[tuple], **options) -> bytes:
    out = io.BytesIO()
    with pyorc.Writer(out, schema, **options) as writer:
        writer.writerows(rows)
    return out.getvalue()


def test_hive_and_trino_written_files_give_pyorcs_types_and_bucket_bounds():
    assert len(FIXTURE_FILES) >= 25  # the fixtures are there
    kinds = set()
    for path in FIXTURE_FILES:
        data = Path(path).read_bytes()
        ours, theirs = _ours(data), _pyorc(data)
        assert ours == theirs, path
        kinds.add(ours[1] is not None)
    assert kinds == {True}  # every ACID file has its bucket's bounds


@pytest.mark.parametrize("compression", [pyorc.CompressionKind.ZLIB, pyorc.CompressionKind.NONE])
def test_every_hive_type_is_read_as_pyorc_reads_it(compression):
    data = _written(EVERY_TYPE, [], compression=compression)
    assert _ours(data)[0] == _pyorc(data)[0] == HiveType.parse(EVERY_TYPE)


def test_the_integer_bounds_over_the_file_are_the_statistics():
    data = _written("struct<a:int,b:bigint,c:bigint>", [(1, -5, 7), (2, 9, None), (3, 0, 4)])
    footer = read_footer(io.BytesIO(data))
    assert footer is not None
    assert footer.integer_range(2) == (-5, 9)
    assert footer.integer_range(3) == (4, 7)  # nulls are not values
    assert footer.integer_range(9) is None  # no such column
    empty = read_footer(io.BytesIO(_written("struct<a:int>", [])))
    assert empty is not None and empty.integer_range(1) is None  # no values: no bounds


def test_a_footer_longer_than_the_tail_read_first_is_read_whole():
    names = (f"column_with_a_long_name_{i:05d}" for i in range(900))
    schema = "struct<" + ",".join(f"{name}:bigint" for name in names) + ">"
    data = _written(schema, [tuple(range(900))], compression=pyorc.CompressionKind.NONE)
    assert len(data) > TAIL_BYTES
    assert _ours(data)[0] == _pyorc(data)[0]
    assert read_footer(io.BytesIO(data)).integer_range(900) == (899, 899)  # type: ignore[union-attr]


def test_a_field_name_pyorc_prints_unquoted_keeps_its_name():
    data = _written("struct<`c d`:varchar(3),x:int>", [])
    assert _ours(data)[0].field_names == ("c d", "x")


@pytest.mark.parametrize(
    "schema, options",
    [
        ("struct<a:int>", {"compression": pyorc.CompressionKind.ZSTD}),
        ("struct<a:int>", {"compression": pyorc.CompressionKind.SNAPPY}),
        ("struct<u:uniontype<int,string>>", {}),
    ],
)
def test_what_the_module_does_not_read_is_left_to_pyorc(schema, options):
    data = _written(schema, [], **options)
    assert read_footer(io.BytesIO(data)) is None
    assert str(pyorc.Reader(io.BytesIO(data)).schema) == schema  # pyorc reads it


ACID_SCHEMA = (
    "struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,"
    "currentTransaction:bigint,row:struct<a:varchar(4),b:char(2)>>"
)


@pytest.mark.parametrize(
    "compression",
    [pyorc.CompressionKind.ZLIB, pyorc.CompressionKind.ZSTD, pyorc.CompressionKind.LZ4],
)
def test_an_opened_file_declares_the_same_types_and_bucket_bounds_whoever_reads_its_footer(
    tmp_path, compression
):
    """ZLIB is read here, ZSTD and LZ4 by pyorc: an opened file's answers are the same."""
    path = tmp_path / "bucket_00001"
    rows = [(0, 3, 536936448, i, 3, ("x", "y")) for i in range(3)] + [
        (0, 3, 536870912, 3, 3, ("z", "w"))
    ]
    path.write_bytes(_written(ACID_SCHEMA, rows, compression=compression))
    assert (read_footer(io.BytesIO(path.read_bytes())) is None) == (
        compression != pyorc.CompressionKind.ZLIB
    )
    data_file = DataFile(StoredFile(str(path), path.stat().st_size, "v"), FileRole.DELTA, 1)
    opened = open_file(LocalFileSystem(), data_file)
    try:
        assert opened.row_hive_types == (HiveType("varchar", (4,)), HiveType("char", (2,)))
        assert opened.bucket_range == (536870912, 536936448)
    finally:
        opened.handle.close()


@pytest.mark.parametrize("cut", [1, 20, 200])
def test_a_truncated_or_damaged_tail_gives_none(cut):
    data = _written("struct<a:int,b:string>", [(1, "x")])
    assert read_footer(io.BytesIO(data[:-cut])) is None
    damaged = bytearray(data)
    damaged[-2 - cut % 10] ^= 0xFF  # inside the postscript
    assert read_footer(io.BytesIO(bytes(damaged))) is None
    assert read_footer(io.BytesIO(b"")) is None
    assert read_footer(io.BytesIO(b"not an orc file at all")) is None


def test_statistics_that_do_not_parse_are_unreadable_not_unbounded():
    footer = OrcFooter(HiveType.parse("struct<a:int>"), (b"", b"\x0a\xff"))
    assert footer.integer_range(0) is None  # an empty message: no bounds
    with pytest.raises(Unreadable):
        footer.integer_range(1)  # truncated: the caller asks pyorc instead
