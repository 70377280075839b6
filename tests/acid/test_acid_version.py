"""ACID files without ``hive.acid.version``: Hive 3 files told from Hive 2 files by content.

Hive 3.1's query-based compaction writes the full ACID schema but no ``hive.acid.version`` in
the footer (IMPALA-10115). Hive 3 always writes ``bucket`` in ``BucketCodec`` V1 (bits 31-29 =
001, Hive's ``BucketCodec.determineVersion``; Trino's ``AcidBucketCodec``); Hive 2 wrote plain
bucket ids. The footer's minimum and maximum of the ``bucket`` column tell them apart.

The files here are real Hive-written files from the fixtures, rewritten without their footer
metadata (same schema, same rows), which is what query-based compaction leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyorc
import pytest
from hive_fixtures import FIXTURES

from airflow_provider_acid.acid.rows import AcidFormatError, is_bucket_codec_v1
from airflow_provider_acid.engine.compaction import compact_table
from airflow_provider_acid.engine.options import CompactionOptions

V1_BUCKET_2 = 537001984  # 0x20020000: BucketCodec V1, bucket 2, statement 0


def rewrite_without_version(
    source: Path, target: Path, bucket: Callable[[int], int] = lambda b: b
) -> None:
    """Copy an ACID file's rows into ``target`` without any user metadata (no
    ``hive.acid.*`` keys), the ``bucket`` field passed through ``bucket``."""
    with source.open("rb") as handle:
        reader = pyorc.Reader(handle)
        schema = reader.schema
        rows = [(op, otx, bucket(b), rid, ctx, row) for op, otx, b, rid, ctx, row in reader]
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as handle:
        writer = pyorc.Writer(handle, schema)
        writer.writerows(rows)
        writer.close()
    with target.open("rb") as handle:
        assert pyorc.Reader(handle).user_metadata == {}


def snapshot_rows(table: Path, out: Path) -> pa.Table:
    result = compact_table(str(table), str(out), options=CompactionOptions(max_workers=1))
    return pa.concat_tables([pq.read_table(p) for p in result.file_paths()])


HIVE3_FILE = FIXTURES / "trino" / "acid_version_validation" / "acid_version_hive_3" / "00000_0"


def test_v1_bucket_values_mark_a_hive3_file_without_the_footer_version(tmp_path):
    """The real Hive 3 file (bucket 537001984, V1) without ``hive.acid.version`` and without
    ``_orc_acid_version`` beside it, as Hive 3.1's query-based compaction writes it
    (IMPALA-10115): read, its one row a=10. Before, it was refused as a Hive 2 file."""
    table = tmp_path / "t"
    rewrite_without_version(HIVE3_FILE, table / "base_0000001_v0000002" / "bucket_00002")
    rows = snapshot_rows(table, tmp_path / "out")
    assert rows["a"].to_pylist() == [10]


def test_plain_bucket_ids_are_refused_as_hive2(tmp_path):
    """The same file with the ``bucket`` field a plain bucket id (2), as Hive 2 wrote it
    (``BucketCodec.determineVersion`` gives V0): refused with the Hive 2 message, naming the
    file."""
    table = tmp_path / "t"
    path = table / "base_0000001_v0000002" / "bucket_00002"
    rewrite_without_version(HIVE3_FILE, path, bucket=lambda b: 2)
    with pytest.raises(AcidFormatError, match="Hive 2") as info:
        snapshot_rows(table, tmp_path / "out")
    assert str(path) in str(info.value)


def test_both_footer_bounds_must_be_v1(tmp_path):
    """One V1 row and one plain bucket id in the same file: the footer's minimum is not V1, so
    the file is not taken for a Hive 3 file (both bounds are checked)."""
    table = tmp_path / "t"
    path = table / "delta_0000001_0000001_0000" / "bucket_00000"
    path.parent.mkdir(parents=True)
    schema = pyorc.TypeDescription.from_string(
        "struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,"
        "currentTransaction:bigint,row:struct<a:bigint>>"
    )
    with path.open("wb") as handle:
        writer = pyorc.Writer(handle, schema)
        writer.writerows([(0, 1, 0, 0, 1, (1,)), (0, 1, 536870912, 1, 1, (2,))])
        writer.close()
    with pytest.raises(AcidFormatError, match="Hive 2"):
        snapshot_rows(table, tmp_path / "out")


def test_delete_deltas_without_the_footer_version_still_apply(tmp_path):
    """The real nation data file and both its real delete deltas, all rewritten without footer
    metadata and without ``_orc_acid_version``: the V1 buckets (536870912) mark them as Hive 3
    files, and the README's 23,000 rows come back (nation keys 5 and 19 deleted)."""
    table = tmp_path / "t"
    trino = FIXTURES / "trino"
    rewrite_without_version(
        trino / "nationFile25kRowsSortedOnNationKey" / "bucket_00000",
        table / "delta_0000002_0000002_0000" / "bucket_00000",
    )
    for write in (3, 4):
        folder = f"delete_delta_000000{write}_000000{write}_0000"
        rewrite_without_version(
            trino / "nation_delete_deltas" / folder / "bucket_00000",
            table / folder / "bucket_00000",
        )
    rows = snapshot_rows(table, tmp_path / "out")
    assert rows.num_rows == 23_000
    keys = set(rows["n_nationkey"].to_pylist())
    assert keys == set(range(25)) - {5, 19}


def test_bucket_codec_version_bits():
    """``BucketCodec.determineVersion``: ``(bucket & 0xE0000000) >>> 29``; 1 is V1."""
    assert is_bucket_codec_v1(536870912) and is_bucket_codec_v1(V1_BUCKET_2)
    assert is_bucket_codec_v1(0x3FFFFFFF)
    assert not is_bucket_codec_v1(0) and not is_bucket_codec_v1(2)
    assert not is_bucket_codec_v1(0x40000000)  # version 2: unknown
    assert not is_bucket_codec_v1(-1)  # Java's signed view of 0xFFFFFFFF: version 7
