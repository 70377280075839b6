"""The first rows of one stripe decoded without the rest (``acid/orc_prefix.py``), checked
against pyarrow's read of the whole stripe."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from airflow_provider_acid.acid.data_file_open import open_file
from airflow_provider_acid.acid.orc_prefix import prefix_view
from airflow_provider_acid.acid.resolution import resolve_read_view
from airflow_provider_acid.testing.table_writer import AcidTableWriter

LOCAL = fsspec.filesystem("file")
TYPES = [
    ("id", "bigint"), ("s", "string"), ("c", "char(4)"), ("d", "decimal(20,3)"),
    ("db", "double"), ("dt", "date"), ("ts", "timestamp"), ("tags", "array<string>"),
    ("m", "map<string,int>"), ("st", "struct<a:int,b:string>"),
]  # fmt: skip


def _row(i: int) -> dict:
    if i % 11 == 5:
        return {"id": i} | {name: None for name, _ in TYPES[1:]}
    return {
        "id": i, "s": f"s{i}", "c": "ab", "d": f"{i}.125", "db": i / 3,
        "dt": dt.date(1500 + i % 900, 1, 2), "ts": dt.datetime(1970, 1, 1, 0, 0, 0, i),
        "tags": [f"t{i}", None], "m": {"k": i}, "st": {"a": i, "b": None},
    }  # fmt: skip


def _opened(root: Path):
    (bucket_slice,) = resolve_read_view(str(root)).slices
    (data_file,) = bucket_slice.data_files
    return open_file(LOCAL, data_file)


@pytest.mark.parametrize("compression", ["zlib", "none"])
def test_the_first_rows_of_a_stripe_are_those_of_the_whole_stripe(tmp_path, compression):
    table = AcidTableWriter(str(tmp_path / "t"), TYPES, stripe_rows=3000, compression=compression)
    table.insert([_row(i) for i in range(7000)])  # stripes of 3000, 3000, 1000 rows
    opened = _opened(tmp_path / "t")
    try:
        assert opened.nstripes == 3
        for index, rows in ((0, 1), (1, 2017), (2, 1000)):
            whole = opened.stripe(index, None)
            first = opened.stripe_prefix(index, list(whole.schema.names), rows)
            assert first is not None and first.equals(whole.slice(0, rows)), (index, rows)
    finally:
        opened.handle.close()


def test_a_codec_whose_footer_is_not_read_gives_no_view(tmp_path):
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint")], compression="zstd")
    table.insert([{"id": i} for i in range(10)])
    (path,) = [p for p in (tmp_path / "t").rglob("bucket_*") if p.is_file()]
    orc = pa_orc.ORCFile(str(path))
    assert orc.compression == "ZSTD"
    assert prefix_view(lambda: open(path, "rb"), orc, 0, 5) is None
    assert prefix_view(lambda: open(path, "rb"), pa_orc.ORCFile(str(path)), 3, 5) is None


def test_an_acid_files_identity_reads_from_the_view(tmp_path):
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint")])
    table.insert([{"id": i} for i in range(10)])
    opened = _opened(tmp_path / "t")
    try:
        batch = opened.stripe_prefix(0, ["rowId"], 4)
        assert batch is not None and batch.column(0).to_pylist() == [0, 1, 2, 3]
        assert pa.types.is_int64(batch.schema.field(0).type)
    finally:
        opened.handle.close()
