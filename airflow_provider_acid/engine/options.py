"""How snapshots are written: :class:`CompactionOptions`, shared by the plan and the compaction."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import pyarrow as pa

from ..acid.hive_types import TIMESTAMP_UNITS
from ..output.records import BucketResult

#: A row filter: given a batch of output rows, which to keep (nulls count as False).
RowFilter = Callable[[pa.Table], "pa.Array | pa.ChunkedArray"]
#: Told after each slice :func:`compact_table` computes: its result, slices done, slices to
#: compute (reused slices are not computed). Called one at a time, from the worker threads.
ProgressCallback = Callable[[BucketResult, int, int], None]


@dataclass(frozen=True)
class CompactionOptions:
    """How snapshots are written.

    :param compression: Parquet codec (``zstd``, ``snappy``, ``gzip``, ``lz4``, ``none``).
    :param compression_level: codec level (None: the codec's default).
    :param target_file_size: bytes after which a bucket's output rolls over to a new file.
    :param row_group_rows: rows per Parquet row group (also the write buffer).
    :param batch_rows: rows processed at a time (ORC stripes are sliced to this).
    :param include_identity: also write the row identity as ``_acid_*`` columns.
    :param timestamp_unit: unit of timestamp columns (``us`` is what Spark reads; a value
        finer than it is an error, not a silent truncation; ``ns`` keeps Hive's precision).
    :param schema: the table's columns (a pyarrow Schema, ``(name, hive type)`` pairs or a
        mapping); by default those of the newest ACID file.
    :param partition_types: Hive types of partition columns, e.g. ``{"dt": "date"}``; others
        are inferred from the folder values (bigint, date, else string).
    :param reuse: reuse the files of unchanged buckets of the latest committed snapshot.
    :param max_workers: buckets compacted at once by :func:`compact_table`.
    :param ignore_unrecognised: plan the snapshot even though files of the table cannot be
        placed in any slice (see :func:`~..acid.resolution.check_placed`); the plan and the manifest
        record each file so left out. By default such files refuse the plan.
    """

    compression: str = "zstd"
    compression_level: int | None = None
    target_file_size: int = 256 * 1024 * 1024
    row_group_rows: int = 262_144
    batch_rows: int = 131_072
    include_identity: bool = False
    timestamp_unit: str = "us"
    schema: Any = None
    partition_types: Mapping[str, str] | None = None
    reuse: bool = True
    max_workers: int | None = None
    ignore_unrecognised: bool = False

    def __post_init__(self) -> None:
        if self.timestamp_unit not in TIMESTAMP_UNITS:
            raise ValueError(f"timestamp_unit must be one of {TIMESTAMP_UNITS}")
        for name in ("target_file_size", "row_group_rows", "batch_rows"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.max_workers is not None and self.max_workers < 1:
            raise ValueError("max_workers must be positive")

    def workers(self) -> int:
        return self.max_workers or max(1, min(4, os.cpu_count() or 1))


def options_from_dict(data: Mapping[str, Any]) -> CompactionOptions:
    """:class:`CompactionOptions` from plain data (e.g. an Airflow task's parameters)."""
    known = {f.name for f in fields(CompactionOptions)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown compaction options {unknown}; known: {sorted(known)}")
    return CompactionOptions(**dict(data))
