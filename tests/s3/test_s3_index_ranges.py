"""A large column-stats index on a real S3-compatible server: a one-partition manifest fetches
only the segment of paths that holds the partition's files.

The index of a 40-partition table is grown with 70,000 records of other files (sorting before
and after the table's), so ``write_segments`` stores it as three segments of path ranges. The
manifest of one partition then makes the same seven requests as with a small index (one
``files.parquet`` and one records file of the queried column), and keeps the same slices.
"""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_acid.pruning import index, index_format, index_storage
from airflow_provider_acid.pruning.manifest import compute_manifest
from airflow_provider_acid.testing.many_partitions import write_many_partitions

OTHERS = 70_000


def grown(table: pa.Table) -> pa.Table:
    """``table`` and OTHERS copies of its first row under other paths of the table: 40,000
    before its partitions' (``a/``) and the rest after them (``z/``)."""
    root = table.column("path")[0].as_py().split("/p=")[0]
    paths = [f"{root}/{'a' if i < 40_000 else 'z'}/f{i:06d}" for i in range(OTHERS)]
    copies = table.take(pa.array([0] * OTHERS)).set_column(
        table.schema.get_field_index("path"), "path", pa.array(paths, pa.string())
    )
    return pa.concat_tables([table, copies])


def test_a_one_partition_manifest_reads_one_segment_of_a_large_index(s3):
    url = s3.url("ranged-parts")
    write_many_partitions(url, 40, 2, storage_options=s3.storage_options)
    options = {"storage_options": s3.storage_options, "index_storage_options": s3.storage_options}
    where = "p = 17 AND amount = 7"
    small = s3.url("ranged-parts-index")
    whole = compute_manifest(url, where, index_uri=small, refresh=True, **options)

    fs, root = index_storage.index_filesystem(small, s3.storage_options)
    _, (seg,) = index_storage.load_pointer(fs, root)
    files = grown(index_storage.read_segment_files(fs, root, seg))
    records = index_format.RECORD_SCHEMA.names
    columns = {
        col: grown(
            index_storage.read_parquet_table(
                fs, f"{root}/segments/{seg['id']}/{d}/stats.parquet", records
            )
        )
        for col, d in seg["columns"].items()
    }
    large = s3.url("ranged-parts-large-index")
    index.write_tables(large, files, columns, storage_options=s3.storage_options)
    _, large_root = index_storage.index_filesystem(large, s3.storage_options)
    _, segments = index_storage.load_pointer(fs, large_root)
    assert [s["files"] for s in segments] == [32_768, 32_768, OTHERS + 80 - 65_536]
    partition = files.column("path")[0].as_py().split("/p=")[0] + "/p=17/"
    (holding,) = [s for s in segments if s["first"] <= partition <= s["last"]]
    assert holding is segments[1]

    with s3.requests.recording() as seen:
        manifest = compute_manifest(url, where, index_uri=large, **options)
    assert [s.to_dict() for s in manifest.slices] == [s.to_dict() for s in whole.slices]
    assert manifest.metrics.files_not_indexed == 0 and manifest.slices
    large_key = large.removeprefix(f"s3://{s3.bucket}/")
    gets = [r.key for r in seen if r.operation == "GetObject"]
    index_gets = sorted(k for k in gets if k.startswith(f"{large_key}/segments/"))
    base = f"{large_key}/segments/{holding['id']}"
    assert index_gets == [f"{base}/column=amount/stats.parquet", f"{base}/files.parquet"]
    assert len([r for r in seen if not r.is_continuation]) == 7
