"""Timestamps over Hive's whole range (``acid/orc_timestamps.py``) and char padding
(``hive_types.pad_char``), on ORC files written here with exact integer timestamps.

The Trino-written tables of ``tests/trino`` check the same against a real engine."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as pa_orc
import pyorc
import pytest

from airflow_provider_acid.acid.hive_types import HiveType, pad_char
from airflow_provider_acid.acid.orc_prefix import prefix_view
from airflow_provider_acid.acid.orc_timestamps import read_stripe, trino_seconds

SCHEMA = (
    "struct<operation:int,row:struct<id:int,ts:timestamp,day:date,"
    "tss:array<timestamp>,inner:struct<at:timestamp,n:int>>>"
)
EPOCH = dt.datetime(1970, 1, 1)


class _ExactTimestamp:
    """Writes a naive datetime as ORC's (seconds, nanoseconds) with integer arithmetic."""

    @staticmethod
    def to_orc(value: dt.datetime, timezone=None) -> tuple[int, int]:
        delta = value - EPOCH
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        seconds, micro = divmod(micros, 1_000_000)
        return seconds, micro * 1_000

    @staticmethod
    def from_orc(seconds: int, nanoseconds: int, timezone=None):  # pragma: no cover
        raise NotImplementedError


def _write(path: Path, values: list[dt.datetime | None], timezone: str = "UTC") -> None:
    import zoneinfo

    with open(path, "wb") as handle:
        writer = pyorc.Writer(
            handle,
            SCHEMA,
            converters={pyorc.TypeKind.TIMESTAMP: _ExactTimestamp},
            timezone=zoneinfo.ZoneInfo(timezone),
        )
        for i, ts in enumerate(values):
            day = ts.date() if ts else None
            inner = None if i % 3 == 2 else (ts, i)
            writer.write((0, (i, ts, day, [ts, ts] if ts else [], inner)))
        writer.close()


def _us(value: dt.datetime) -> int:
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


WHOLE_RANGE = [
    dt.datetime(1, 1, 1),
    dt.datetime(1, 1, 1, 0, 0, 0, 1),
    dt.datetime(1582, 10, 4, 23, 59, 59, 999999),
    dt.datetime(1582, 10, 15, 0, 0, 0, 1000),
    dt.datetime(1600, 2, 29, 12),
    None,
    dt.datetime(2024, 2, 29, 1, 2, 3, 456789),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
]


def _opener(path: Path):
    return lambda: open(path, "rb")


def test_a_stripe_out_of_the_nanosecond_range_reads_exactly(tmp_path):
    path = tmp_path / "bucket_00000"
    _write(path, WHOLE_RANGE)
    orc = pa_orc.ORCFile(str(path))
    with pytest.raises(pa.ArrowInvalid, match="out of range for nanosecond"):
        orc.read_stripe(0)  # what pyarrow alone does
    batch = read_stripe(orc, _opener(path), 0, None, "us")
    row = batch.column("row")
    assert row.type.field("ts").type == pa.timestamp("us")
    assert row.field("ts").to_pylist() == WHOLE_RANGE
    assert row.field("ts").cast(pa.int64()).to_pylist() == [
        None if v is None else _us(v) for v in WHOLE_RANGE
    ]
    assert row.field("day").to_pylist() == [v.date() if v else None for v in WHOLE_RANGE]
    # proleptic Gregorian: 1582-10-04 and 1582-10-15 are 11 days apart
    assert (row.field("day")[3].as_py() - row.field("day")[2].as_py()).days == 11
    assert row.field("tss").to_pylist() == [[v, v] if v else [] for v in WHOLE_RANGE]
    inner = row.field("inner").to_pylist()
    assert inner[0] == {"at": WHOLE_RANGE[0], "n": 0} and inner[2] is None
    assert row.field("id").to_pylist() == list(range(len(WHOLE_RANGE)))
    assert batch.column("operation").to_pylist() == [0] * len(WHOLE_RANGE)


def test_the_first_rows_of_a_stripe_out_of_the_nanosecond_range_read_exactly(tmp_path):
    path = tmp_path / "bucket_00000"
    _write(path, WHOLE_RANGE)
    orc = pa_orc.ORCFile(str(path))
    opener = prefix_view(_opener(path), orc, 0, 4)  # a view of the stripe's first 4 rows
    assert opener is not None
    with opener() as view:
        first = read_stripe(pa_orc.ORCFile(view), opener, 0, None, "us")
    assert first.equals(read_stripe(orc, _opener(path), 0, None, "us").slice(0, 4))
    assert first.column("row").field("ts").to_pylist() == WHOLE_RANGE[:4]


def test_nanoseconds_outside_their_range_are_refused_naming_the_column(tmp_path):
    path = tmp_path / "bucket_00000"
    _write(path, WHOLE_RANGE)
    with pytest.raises(pa.ArrowInvalid, match=r"row\.ts.*outside the range of unit 'ns'"):
        read_stripe(pa_orc.ORCFile(str(path)), _opener(path), 0, None, "ns")


class _Refusing:
    """pyarrow's file, refusing every read that includes a timestamp: the exact path then reads
    an in-range file, which must give what pyarrow gives."""

    def __init__(self, orc: pa_orc.ORCFile) -> None:
        self.orc = orc
        self.schema = orc.schema

    def read_stripe(self, index: int, columns=None):
        wanted = columns or ["operation", "row"]
        if any(c == "row" or c.endswith((".ts", ".tss", ".inner")) for c in wanted):
            raise pa.ArrowInvalid(
                "ORC timestamp (0s + 0ns) is out of range for nanosecond resolution"
            )
        return self.orc.read_stripe(index, columns=columns)


# Not Asia/Kolkata: there pyarrow's and pyorc's ORC C++ readers (two versions) disagree by a
# second on 1969-12-31 23:59:58.999 (the pre-1970 adjustment before or after the writer's
# time zone, ORC-1287); Hive 3.1 and Trino write ORC timestamps in UTC.
@pytest.mark.parametrize("timezone", ["UTC", "America/Los_Angeles"])
def test_the_exact_path_reads_in_range_files_as_pyarrow_does(tmp_path, timezone):
    values = [dt.datetime(1970, 1, 1), dt.datetime(1900, 1, 1, 0, 0, 0, 1),
              dt.datetime(1969, 12, 31, 23, 59, 58, 999000), None,
              dt.datetime(2024, 3, 10, 2, 30), dt.datetime(2262, 4, 11)]  # fmt: skip
    path = tmp_path / "bucket_00000"
    _write(path, values, timezone)
    orc = pa_orc.ORCFile(str(path))
    fast = orc.read_stripe(0).column("row")
    exact = read_stripe(_Refusing(orc), _opener(path), 0, None, "us").column("row")
    for name in ("ts", "tss", "inner"):
        assert exact.field(name).to_pylist() == fast.field(name).to_pylist(), name


def test_trinos_pre_1970_rule():
    us = pa.array(
        [_us(dt.datetime(1900, 1, 1, 0, 0, 1, 1)), _us(dt.datetime(1900, 1, 1, 0, 0, 1, 1000)),
         _us(dt.datetime(1970, 1, 1, 0, 0, 0, 1)), None, _us(dt.datetime(1900, 1, 1))],
        pa.timestamp("us"),
    )  # fmt: skip
    fixed = trino_seconds(us).to_pylist()
    assert fixed[0] == dt.datetime(1900, 1, 1, 0, 0, 0, 1)  # below a millisecond: a second back
    assert fixed[1:] == us.to_pylist()[1:]  # a millisecond or more, after 1970, null, whole


def test_char_values_are_padded_and_varchar_values_are_not():
    values = pa.array(["ab", "", None, "abcde", "ü😀"])
    assert pad_char(values, HiveType.parse("char(5)")).to_pylist() == [
        "ab   ", "     ", None, "abcde", "ü😀   "
    ]  # fmt: skip
    assert pad_char(values, HiveType.parse("varchar(5)")) is values
    nested = pa.array(
        [{"c": "a", "l": ["x", None]}, None, {"c": None, "l": None}],
        pa.struct([("c", pa.string()), ("l", pa.list_(pa.string()))]),
    )
    padded = pad_char(nested.slice(0), HiveType.parse("struct<c:char(3),l:array<char(2)>>"))
    assert padded.to_pylist() == [{"c": "a  ", "l": ["x ", None]}, None, {"c": None, "l": None}]
    sliced = pad_char(values.slice(3), HiveType.parse("char(6)"))
    assert sliced.to_pylist() == ["abcde ", "ü😀    "]
