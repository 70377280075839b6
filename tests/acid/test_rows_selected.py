"""Reading the columns of picked rows only (``SliceReader.data_batches(select=...)``): the
identity of every stripe, the values of the stripes holding a picked row."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as pa_orc
import pytest

from airflow_provider_acid.acid import data_file_open
from airflow_provider_acid.acid.resolution import resolve_read_view
from airflow_provider_acid.acid.rows import RowBatch, SliceReader, table_columns
from airflow_provider_acid.testing.orc_types import struct_type
from airflow_provider_acid.testing.orc_writer import write_acid_file
from airflow_provider_acid.testing.table_writer import AcidTableWriter

LOCAL = fsspec.filesystem("file")


def _reader(root: Path) -> SliceReader:
    snapshot = resolve_read_view(str(root))
    (bucket_slice,) = snapshot.slices
    columns = table_columns(snapshot, LOCAL)
    return SliceReader(bucket_slice, LOCAL, columns, snapshot.write_ids, batch_rows=4)


def _row_ids(low: int, high: int):
    def select(batch: RowBatch) -> pa.Array:
        assert batch.columns == []  # the values are not read before the rows are picked
        return pc.and_(
            pc.greater_equal(batch.row_id, pa.scalar(low, pa.int64())),
            pc.less_equal(batch.row_id, pa.scalar(high, pa.int64())),
        )

    return select


@pytest.fixture
def stripe_reads(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """How many stripes were read, by the columns asked for."""
    reads: Counter = Counter()
    real = data_file_open.OpenFile.stripe

    def counted(self, index, columns, timestamp_unit="us"):
        reads[tuple(columns or ())] += 1
        return real(self, index, columns, timestamp_unit)

    monkeypatch.setattr(data_file_open.OpenFile, "stripe", counted)
    return reads


def test_only_the_stripes_holding_a_picked_row_are_decoded(tmp_path, stripe_reads):
    table = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("ts", "timestamp"), ("name", "string")],
        stripe_rows=10,
    )  # fmt: skip
    times = [dt.datetime(2024, 1, 1, 0, 0, i, 7) for i in range(40)]
    table.insert([{"id": i, "ts": times[i], "name": f"n{i}"} for i in range(40)])
    reader = _reader(tmp_path / "t")
    batches = list(reader.data_batches(select=_row_ids(22, 25)))
    rows = pa.Table.from_batches(
        [pa.RecordBatch.from_arrays(b.columns, names=["id", "ts", "name"]) for b in batches]
    )
    assert rows["id"].to_pylist() == [22, 23, 24, 25]
    assert rows["ts"].to_pylist() == times[22:26]
    assert rows["name"].to_pylist() == ["n22", "n23", "n24", "n25"]
    assert [r for b in batches for r in b.row_id.to_pylist()] == [22, 23, 24, 25]
    assert {len(b.current_transaction) for b in batches} == {len(b.columns[0]) for b in batches}
    assert reader.rows_in_files == 40
    identity = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction")
    assert stripe_reads == {identity: 4, ("row",): 1}  # of 4 stripes, the third's values


def test_no_picked_row_reads_no_values(tmp_path, stripe_reads):
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint")], stripe_rows=10)
    table.insert([{"id": i} for i in range(30)])
    assert list(_reader(tmp_path / "t").data_batches(select=lambda batch: None)) == []
    assert ("row",) not in stripe_reads


def test_original_files_keep_their_synthetic_row_ids(tmp_path):
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint")], stripe_rows=3)
    table.add_original_files([{"id": 100 + i} for i in range(10)], copies=1)  # 5 rows each
    batches = list(_reader(tmp_path / "t").data_batches(select=_row_ids(4, 6)))
    # rowIds continue from 000000_0 into 000000_0_copy_1
    assert [v for b in batches for v in b.columns[0].to_pylist()] == [104, 105, 106]
    assert [v for b in batches for v in b.row_id.to_pylist()] == [4, 5, 6]
    assert {v for b in batches for v in b.original_transaction.to_pylist()} == {0}


TYPES = [
    ("id", "bigint"), ("s", "string"), ("c", "char(4)"), ("v", "varchar(6)"),
    ("d", "decimal(12,3)"), ("f", "float"), ("db", "double"), ("b", "boolean"),
    ("dt", "date"), ("ts", "timestamp"), ("bin", "binary"), ("ti", "tinyint"),
    ("si", "smallint"), ("tags", "array<string>"), ("m", "map<string,int>"),
    ("st", "struct<a:int,b:string>"),
]  # fmt: skip


def _typed_row(i: int) -> dict:
    if i % 7 == 3:  # a row of nulls now and then
        return {"id": i} | {name: None for name, _ in TYPES[1:]}
    return {
        "id": i, "s": f"s{i}", "c": "ab", "v": f"v{i % 1000}", "d": f"{i}.125",
        "f": i / 4, "db": i / 3, "b": i % 2 == 0, "dt": dt.date(1500 + i % 900, 1, 2),
        "ts": dt.datetime(1900, 1, 1, 0, 0, 0, i), "bin": bytes([i % 256, 0]),
        "ti": i % 100, "si": i, "tags": [f"t{i}", None], "m": {"k": i},
        "st": {"a": i, "b": None},
    }  # fmt: skip


@pytest.fixture
def seeks(monkeypatch: pytest.MonkeyPatch) -> list:
    """The reads by seeking: columns, first row, row count."""
    found: list = []
    real = data_file_open.OpenFile.rows_of

    def counted(self, columns, first, count, timestamp_unit="us"):
        found.append((tuple(columns), first, count))
        return real(self, columns, first, count, timestamp_unit)

    monkeypatch.setattr(data_file_open.OpenFile, "rows_of", counted)
    return found


@pytest.fixture
def prefixes(monkeypatch: pytest.MonkeyPatch) -> list:
    """The reads of a stripe's first rows: stripe, columns, row count."""
    found: list = []
    real = data_file_open.OpenFile.stripe_prefix

    def counted(self, index, columns, rows, timestamp_unit="us"):
        found.append((index, tuple(columns), rows))
        return real(self, index, columns, rows, timestamp_unit)

    monkeypatch.setattr(data_file_open.OpenFile, "stripe_prefix", counted)
    return found


def _typed_table(root: Path, stripe_rows: int, rows: int = 30_000) -> list[str]:
    table = AcidTableWriter(str(root), TYPES, stripe_rows=stripe_rows)
    table.insert([_typed_row(i) for i in range(rows)])
    return [name for name, _ in TYPES]


def _everything(root: Path, names: list[str]) -> pa.Table:
    return pa.Table.from_batches(
        [
            pa.RecordBatch.from_arrays([*b.columns, b.row_id], names=[*names, "rowId"])
            for b in _reader(root).data_batches()
        ]
    )


def _row_id_bounds(low: int, high: int):
    """A stripe test of the rowId bounds alone (as a delete key set's ``may_hold``)."""

    def may_pick(data_file):
        return lambda stripe: stripe.row_id[0] <= high and low <= stripe.row_id[1]

    return may_pick


IDENTITY = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction")


@pytest.mark.parametrize(
    ("stripe_rows", "low", "count"),
    [(100_000, 20_010, 20), (10_000, 25_001, 5)],  # one stripe of 30,000 rows; the third of 3
)
def test_a_few_picked_rows_of_a_big_stripe_are_read_by_seeking_as_the_stripe_read_gives_them(
    tmp_path, stripe_reads, seeks, prefixes, stripe_rows, low, count
):
    names = _typed_table(tmp_path / "t", stripe_rows)
    expected = _everything(tmp_path / "t", names).slice(low, count)  # rowIds from low
    stripe_reads.clear()
    picked = [
        pa.RecordBatch.from_arrays([*b.columns, b.row_id], names=[*names, "rowId"])
        for b in _reader(tmp_path / "t").data_batches(select=_row_ids(low, low + count - 1))
    ]
    assert seeks == [(("row",), low, count)]  # under 1/16 of the stripe's rows, far into it
    assert ("row",) not in stripe_reads and prefixes == []
    assert pa.Table.from_batches(picked).equals(expected)
    assert expected.num_rows == count and expected["c"][0].as_py() == "ab  "  # char(4): padded


@pytest.mark.parametrize(
    ("low", "count", "read"),
    [
        (12_000, 1500, "prefix"),  # the stripe's first 13,500 rows decoded
        (25_000, 1000, "seek"),  # 26,000 rows decoded would cost more than 1,000 sought
    ],
)
def test_picked_rows_of_a_stripe_numbered_in_order_are_read_without_its_identity(
    tmp_path, stripe_reads, seeks, prefixes, low, count, read
):
    names = _typed_table(tmp_path / "t", 100_000)
    expected = _everything(tmp_path / "t", names).slice(low, count)
    stripe_reads.clear()
    reader = _reader(tmp_path / "t")
    high = low + count - 1
    picked = [
        pa.RecordBatch.from_arrays([*b.columns, b.row_id], names=[*names, "rowId"])
        for b in reader.data_batches(select=_row_ids(low, high), may_pick=_row_id_bounds(low, high))
    ]
    # the stripe's statistics: one write, rowIds 0..29999; the rows read with their rowIds
    if read == "prefix":
        assert (prefixes, seeks) == ([(0, ("rowId", "row"), high + 1)], [])
    else:
        assert (prefixes, seeks) == ([], [(("rowId", "row"), low, count)])
    assert stripe_reads == {}  # neither the identity columns nor the whole stripe decoded
    assert pa.Table.from_batches(picked).equals(expected)
    assert reader.rows_in_files == 30_000


def test_rows_numbered_out_of_order_are_found_by_their_identity(
    tmp_path, stripe_reads, seeks, prefixes
):
    names = _typed_table(tmp_path / "t", 100_000)
    (path,) = [p for p in (tmp_path / "t").rglob("bucket_*") if p.is_file()]
    events = pa_orc.read_table(str(path))
    reversed_ids = pc.subtract(pa.scalar(29_999, pa.int64()), events["rowId"])
    events = events.set_column(3, "rowId", reversed_ids)  # row i now carries rowId 29999 - i
    write_acid_file(LOCAL, str(path), events, struct_type(TYPES), sort=False)
    expected = _everything(tmp_path / "t", names)
    expected = expected.filter(pc.greater_equal(expected["rowId"], 12_000))
    expected = expected.filter(pc.less(expected["rowId"], 13_500))
    stripe_reads.clear()
    picked = [
        pa.RecordBatch.from_arrays([*b.columns, b.row_id], names=[*names, "rowId"])
        for b in _reader(tmp_path / "t").data_batches(
            select=_row_ids(12_000, 13_499), may_pick=_row_id_bounds(12_000, 13_499)
        )
    ]
    # the span the numbering gave holds other rowIds: read again as any stripe
    assert prefixes == [(0, ("rowId", "row"), 13_500), (0, ("row",), 18_000)]
    assert seeks == [] and stripe_reads == {IDENTITY: 1}
    assert pa.Table.from_batches(picked).equals(expected)
    assert expected.num_rows == 1500 and expected["rowId"][0].as_py() == 13_499


def test_stripes_the_filter_rejects_by_their_statistics_are_not_read(tmp_path, stripe_reads):
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint")], stripe_rows=10)
    table.insert([{"id": i} for i in range(40)])
    seen = []

    def may_pick(data_file):
        def test(stripe):
            seen.append((stripe.rows, stripe.row_id, stripe.operation))
            return stripe.row_id[0] <= 22 <= stripe.row_id[1]

        return test

    reader = _reader(tmp_path / "t")
    batches = list(reader.data_batches(select=_row_ids(22, 22), may_pick=may_pick))
    assert [v for b in batches for v in b.columns[0].to_pylist()] == [22]
    assert seen == [(10, (0, 9), (0, 0)), (10, (10, 19), (0, 0)), (10, (20, 29), (0, 0)),
                    (10, (30, 39), (0, 0))]  # fmt: skip
    identity = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction")
    assert stripe_reads == {identity: 1, ("row",): 1}  # the third stripe only
    assert (reader.stripes_skipped, reader.rows_in_files) == (3, 40)


def test_a_file_the_filter_does_not_test_reads_every_stripe(tmp_path, stripe_reads):
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint")], stripe_rows=10)
    table.insert([{"id": i} for i in range(40)])
    reader = _reader(tmp_path / "t")
    batches = list(reader.data_batches(select=_row_ids(5, 35), may_pick=lambda data_file: None))
    assert [v for b in batches for v in b.columns[0].to_pylist()] == list(range(5, 36))
    # every stripe read, once: identity and row at once (its rows are expected picked)
    assert reader.stripes_skipped == 0 and stripe_reads == {(): 4}


def test_without_stripe_statistics_every_stripe_is_read(tmp_path, stripe_reads, monkeypatch):
    table = AcidTableWriter(str(tmp_path / "t"), [("id", "bigint")], stripe_rows=10)
    table.insert([{"id": i} for i in range(40)])
    # a codec the tail reader does not read (say): no statistics, every stripe read
    monkeypatch.setattr(
        data_file_open, "read_stripe_statistics", lambda handle, orc, columns=None: None
    )
    reader = _reader(tmp_path / "t")
    never = list(reader.data_batches(select=_row_ids(22, 22), may_pick=lambda f: lambda s: False))
    assert [v for b in never for v in b.columns[0].to_pylist()] == [22]
    assert reader.stripes_skipped == 0
