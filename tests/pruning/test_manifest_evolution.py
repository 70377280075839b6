"""Pruning after schema evolution: statistics follow the table's columns by position.

Hive reads ORC files by column position (trinodb/trino#6479, #6316): after ``ALTER TABLE t
CHANGE b c bigint`` and ``ADD COLUMNS (b bigint)``, an old file's second column is ``c`` and it
has no ``b`` (null). An index that kept the old file's statistics under ``b`` would prune it for
``b IS NULL``, a false negative; the manifest must keep every slice that holds a matching row.
"""

from __future__ import annotations

import pyarrow.compute as pc

from airflow_provider_acid.pruning.manifest import compute_manifest
from airflow_provider_acid.testing import AcidTableWriter


def _matching_slices(writer: AcidTableWriter, column: str, test) -> set[str]:
    """The bucket slices (``#N``) holding a live row for which ``test(value)`` is true."""
    rows = writer.expected_rows(with_row_id=True)
    buckets = pc.struct_field(rows.column("row__id"), "bucketid").to_pylist()
    return {
        f"#{(b >> 16) & 0xFFF}"
        for b, v in zip(buckets, rows.column(column).to_pylist(), strict=True)
        if test(v)
    }


def test_a_rename_then_an_added_column_of_the_old_name_prunes_nothing_wrongly(tmp_path):
    writer = AcidTableWriter(
        str(tmp_path / "t"), [("a", "bigint"), ("b", "bigint")], buckets=2, bucket_by="a"
    )
    writer.insert([{"a": i, "b": 100 + i} for i in range(20)])  # old files: (a, b)
    index = str(tmp_path / "index")
    before = compute_manifest(writer.root, "b >= 100", index_uri=index, refresh=True)
    assert before.metrics.slices_kept == 2 and before.metrics.files_not_indexed == 0

    writer.rename_column("b", "c")
    writer.add_columns([("b", "bigint")])
    writer.insert([{"a": 50 + i, "c": 7, "b": 1000 + i} for i in range(4)])  # (a, c, b)

    for where, column, test in [
        ("b IS NULL", "b", lambda v: v is None),  # the old rows: no b
        ("c >= 100", "c", lambda v: v is not None and v >= 100),  # the old b, renamed
        ("b >= 1000", "b", lambda v: v is not None and v >= 1000),
    ]:
        manifest = compute_manifest(writer.root, where, index_uri=index, refresh=True)
        kept = {s.key for s in manifest.slices}
        assert _matching_slices(writer, column, test) <= kept, where
