"""An ORC file's stripe statistics read from its tail (``acid/orc_stripe_stats.py``) are
pyorc's (liborc's) statistics of each stripe, on files Hive wrote and files written here."""

from __future__ import annotations

import glob
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as pa_orc
import pyorc
import pytest

from airflow_provider_acid.acid.orc_stripe_stats import integer_bounds, read_stripe_statistics
from airflow_provider_acid.testing.table_writer import AcidTableWriter

HIVE_FILES = sorted(glob.glob("/work/shared/fixtures/hive-acid/hive3/**/bucket_*", recursive=True))


def _read(path: str):
    with open(path, "rb") as handle:
        return read_stripe_statistics(handle, pa_orc.ORCFile(path))


def _same_as_pyorc(path: str) -> int:
    """Compare with pyorc; the number of integer statistics compared."""
    stripes = _read(path)
    assert stripes is not None, path
    compared = 0
    with open(path, "rb") as handle:
        reader = pyorc.Reader(handle)
        assert len(stripes) == reader.num_of_stripes
        for index, stripe in enumerate(stripes):
            theirs = reader.read_stripe(index)
            assert stripe.rows == len(theirs)
            for column, bounds in enumerate(stripe.columns):
                stats = theirs[column].statistics
                assert bounds.values == stats["number_of_values"], (path, index, column)
                assert bounds.has_null == stats["has_null"]
                if stats["kind"] in (pyorc.TypeKind.INT, pyorc.TypeKind.LONG,
                                     pyorc.TypeKind.SHORT, pyorc.TypeKind.BYTE):  # fmt: skip
                    assert (bounds.minimum, bounds.maximum) == (
                        stats.get("minimum"), stats.get("maximum"),
                    )  # fmt: skip
                    compared += 1
    return compared


def test_hive_written_files_give_pyorcs_statistics():
    assert len(HIVE_FILES) >= 20  # the fixtures are there
    assert sum(_same_as_pyorc(p) for p in HIVE_FILES) > 100


@pytest.mark.parametrize("compression", ["zlib", "none"])
def test_files_written_here_give_pyorcs_statistics_stripe_by_stripe(tmp_path, compression):
    table = AcidTableWriter(
        str(tmp_path / "t"), [("id", "bigint"), ("s", "string")], stripe_rows=7,
        compression=compression,
    )  # fmt: skip
    table.insert([{"id": i, "s": f"s{i}"} for i in range(30)])
    (path,) = glob.glob(str(tmp_path / "t" / "delta_*" / "bucket_*"))
    assert _same_as_pyorc(path) > 0
    stripes = _read(path)
    assert [s.rows for s in stripes] == [7, 7, 7, 7, 2]
    # operation, originalTransaction, bucket, rowId of the fourth stripe
    assert integer_bounds(stripes[3], (1, 2, 3, 4)) == [(0, 0), (1, 1), (536870912, 536870912),
                                                        (21, 27)]  # fmt: skip


def test_nulls_or_missing_bounds_give_no_bounds(tmp_path):
    path = str(tmp_path / "f.orc")
    pa_orc.write_table(
        pa.table({"a": pa.array([1, None, 3], pa.int64()), "s": ["x", "y", "z"]}), path
    )
    (stripe,) = _read(path)
    assert integer_bounds(stripe, (1,)) is None  # a null
    assert integer_bounds(stripe, (2,)) is None  # a string column: no integer bounds
    assert integer_bounds(stripe, (9,)) is None  # no such column


def test_a_codec_not_read_here_gives_none(tmp_path):
    path = str(tmp_path / "f.orc")
    pa_orc.write_table(pa.table({"a": list(range(100))}), path, compression="zstd")
    assert _read(path) is None


def test_a_damaged_tail_gives_none(tmp_path):
    path = Path(tmp_path / "f.orc")
    pa_orc.write_table(pa.table({"a": list(range(100))}), str(path), compression="zlib")
    good = _read(str(path))
    assert good is not None and good[0].rows == 100
    orc = pa_orc.ORCFile(str(path))
    data = bytearray(path.read_bytes())
    start = orc.file_length - 1 - orc.file_postscript_length - orc.file_footer_length
    start -= orc.stripe_statistics_length
    data[start + 3 : start + 3 + 4] = b"\xff\xff\xff\xff"  # inside the first chunk
    path.write_bytes(bytes(data))
    with open(path, "rb") as handle:
        damaged = read_stripe_statistics(handle, orc)  # the lengths from before
    assert damaged is None


def test_the_first_columns_only_are_the_same_as_those_of_a_full_read():
    for path in HIVE_FILES:
        full = _read(path)
        with open(path, "rb") as handle:
            first = read_stripe_statistics(handle, pa_orc.ORCFile(path), 6)
        assert full is not None and first is not None, path
        assert [(s.rows, s.columns[:6]) for s in full] == [(s.rows, s.columns) for s in first]
