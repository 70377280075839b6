"""The first rows of one stripe read from a small ORC file of their streams' first bytes
(``acid/orc_prefix_file.py``), checked against pyarrow's read of the whole stripe: whatever
the budgets, a read either fails (and the caller asks for more) or gives the stripe's rows."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from airflow_provider_acid.acid import orc_prefix_file
from airflow_provider_acid.acid.orc_prefix_file import prefix_file
from airflow_provider_acid.acid.resolution import resolve_read_view
from airflow_provider_acid.testing.table_writer import AcidTableWriter

LOCAL = fsspec.filesystem("file")
TYPES = [
    ("id", "bigint"), ("s", "string"), ("c", "char(4)"), ("d", "decimal(20,3)"),
    ("dd", "decimal(12,2)"), ("db", "double"), ("f", "float"), ("b", "boolean"),
    ("ti", "tinyint"), ("dt", "date"), ("ts", "timestamp"), ("bin", "binary"),
    ("tags", "array<string>"), ("m", "map<string,int>"), ("st", "struct<a:int,b:string>"),
]  # fmt: skip


def _row(i: int) -> dict:
    if i % 11 == 5:
        return {"id": i} | {name: None for name, _ in TYPES[1:]}
    return {
        "id": i * 7919 % 100_003, "s": f"s{i * 31 % 977}" * (i % 4), "c": "ab",
        "d": f"{i * 104729 % 1_000_003}.125", "dd": f"{i % 1000}.25", "db": i / 3,
        "f": i / 7, "b": i % 3 == 0, "ti": i % 100, "dt": dt.date(1500 + i % 900, 1, 2),
        "ts": dt.datetime(1970, 1, 1, 0, 0, 0, i), "bin": bytes([i % 256]) * (i % 5),
        "tags": [f"t{i}", None], "m": {"k": i}, "st": {"a": i, "b": None},
    }  # fmt: skip


def _path(root: Path) -> str:
    (bucket_slice,) = resolve_read_view(str(root)).slices
    (data_file,) = bucket_slice.data_files
    return data_file.path


@pytest.mark.parametrize("compression", ["zlib", "none"])
def test_every_budget_gives_the_stripes_rows_or_fails(tmp_path, compression, monkeypatch):
    monkeypatch.setattr(orc_prefix_file, "_FIRST_BUDGET", 1)
    monkeypatch.setattr(orc_prefix_file, "_GUESSED_RATIO", 0)
    table = AcidTableWriter(str(tmp_path / "t"), TYPES, stripe_rows=3000, compression=compression)
    table.insert([_row(i) for i in range(7000)])  # stripes of 3000, 3000, 1000 rows
    path = _path(tmp_path / "t")
    orc = pa_orc.ORCFile(path)
    columns = ["rowId", "row"]
    for index, rows in ((0, 1), (0, 37), (1, 2017), (1, 3000), (2, 999)):
        whole = orc.read_stripe(index, columns=columns)
        prefix = prefix_file(lambda: open(path, "rb"), orc, index, rows, columns)
        assert prefix is not None
        failed = 0
        while True:
            data = prefix.data()
            try:
                batch = pa_orc.ORCFile(pa.BufferReader(data)).read_stripe(0, columns=columns)
            except (pa.ArrowException, OSError):
                failed += 1
                assert prefix.grow(), (index, rows)
                continue
            assert batch.equals(whole.slice(0, rows)), (index, rows, failed)
            break
        assert failed > 0  # budgets of one byte: some reads fell short, and said so


def test_a_codec_it_does_not_read_gives_none(tmp_path):
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint")], compression="zstd")
    table.insert([{"id": i} for i in range(10)])
    path = _path(tmp_path / "t")
    orc = pa_orc.ORCFile(path)
    assert prefix_file(lambda: open(path, "rb"), orc, 0, 5, ["row"]) is None
    zlib_table = AcidTableWriter(str(tmp_path / "z"), [("id", "bigint")])
    zlib_table.insert([{"id": i} for i in range(10)])
    path = _path(tmp_path / "z")
    orc = pa_orc.ORCFile(path)
    assert prefix_file(lambda: open(path, "rb"), orc, 1, 5, ["row"]) is None  # no stripe 1
    assert prefix_file(lambda: open(path, "rb"), orc, 0, 11, ["row"]) is None  # 10 rows
