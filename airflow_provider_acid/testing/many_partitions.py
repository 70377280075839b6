"""A table of many small partitions, made cheaply: one tiny ACID ORC file written by the
simulator (:class:`.table_writer.AcidTableWriter`), stored under many names in a real Hive ACID
layout (``p=N/delta_0000001_0000001_0000/bucket_0000B``).

For listing and manifest measurements only: every copy holds the same rows (partition ``p=0``'s
row, ids ``0..rows-1``), and a bucket file past ``bucket_00000`` holds rows of bucket 0, so its
contents are not what Hive would write there. Listing, resolution, footers and the index read
them as they read any table.
"""

from __future__ import annotations

import posixpath
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..acid.listing import resolve_filesystem
from .table_writer import AcidTableWriter

DELTA = "delta_0000001_0000001_0000"


def tiny_acid_file(rows: int = 1) -> bytes:
    """The bytes of one simulator-written ACID bucket file with ``rows`` rows
    (``id bigint, amount bigint``)."""
    with tempfile.TemporaryDirectory() as tmp:
        table = AcidTableWriter(
            f"{tmp}/t",
            [("id", "bigint"), ("amount", "bigint")],
            partition_columns=[("p", "bigint")],
        )
        table.insert(pa.table({"id": list(range(rows)), "amount": [7] * rows}), {"p": 0})
        (written,) = [p for p in Path(tmp, "t").rglob("bucket_*")]
        return written.read_bytes()


def partition_file_paths(root: str, partitions: int, files_per_partition: int = 1) -> list[str]:
    """The data file paths of the layout, relative to nothing (``root`` prefixed)."""
    return [
        posixpath.join(root, f"p={p}", DELTA, f"bucket_{b:05d}")
        for p in range(partitions)
        for b in range(files_per_partition)
    ]


def write_many_partitions(
    uri: str,
    partitions: int,
    files_per_partition: int = 1,
    *,
    rows: int = 1,
    storage_options: dict[str, Any] | None = None,
    batch: int = 2_000,
) -> int:
    """Write ``partitions`` partitions ``p=0 .. p=N-1`` of ``files_per_partition`` bucket files
    each below ``uri`` (a path or any fsspec URL); returns the number of files written."""
    fs, root = resolve_filesystem(uri, storage_options=storage_options)
    data = tiny_acid_file(rows)
    paths = partition_file_paths(root, partitions, files_per_partition)
    if fs.protocol in ("file", "local") or "file" in fs.protocol:
        for path in paths:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(data)
    else:
        for start in range(0, len(paths), batch):
            fs.pipe({p: data for p in paths[start : start + batch]})
        fs.invalidate_cache()
    return len(paths)
