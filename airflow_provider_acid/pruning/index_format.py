"""The column-stats index's format: its schemas, constants, keys and errors.

The index keeps, per data file, its key (:class:`FileKey`: path, size, version) and row
count (``FILES_SCHEMA``), and per column one record a file (``RECORD_SCHEMA``: min, max
and counts, the values in the column type's family). Everything the index's modules
(:mod:`.index`, :mod:`.index_storage`, :mod:`.index_read`) share is defined here.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

FORMAT_NAME = "airflow-provider-acid/column-stats-index"
FORMAT_VERSION = 2  # 2: records carry file_ordinal (version 1 is still read)
MAX_SEGMENTS = 8
#: The most files a segment written by :func:`~.index_storage.write_segments` holds: a large
#: index is stored as segments of consecutive path ranges, so a reader looking up a few files
#: fetches and decodes only the segments whose range holds one of them.
SEGMENT_FILES = 32_768
POINTER_RE = re.compile(r"^v(\d{20})\.json$")
_FAMILIES = ("int", "float", "decimal", "string", "date", "timestamp", "bool")
_FAMILY_TYPES = {
    "int": pa.int64(),
    "float": pa.float64(),
    "decimal": pa.string(),
    "string": pa.string(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us"),
    "bool": pa.bool_(),
}
FAMILY_SUFFIX = {
    "int": "int",
    "float": "float",
    "decimal": "dec",
    "string": "str",
    "date": "date",
    "timestamp": "ts",
    "bool": "bool",
}
FILES_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("version", pa.string()),
        ("format", pa.string()),
        ("row_count", pa.int64()),
    ]
)
RECORD_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("column", pa.string()),
        ("type", pa.string()),
        ("family", pa.string()),
        ("row_count", pa.int64()),
        ("null_count", pa.int64()),
        ("value_count", pa.int64()),
        ("nan_count", pa.int64()),
        ("bounds_known", pa.bool_()),
    ]
    + [
        (f"{side}_{FAMILY_SUFFIX[fam]}", _FAMILY_TYPES[fam])
        for fam in _FAMILIES
        for side in ("min", "max")
    ]
)
#: In stored records (not part of ``RECORD_SCHEMA``): the row of the record's file in its
#: segment's files table. Trusted only in segments whose pointer entry has ``file_ordinals``.
ORDINAL = "file_ordinal"
#: What :func:`read` needs of the files table, and of the records besides min/max.
FILE_COLUMNS = ("path", "size", "version", "row_count")
COUNT_COLUMNS = ("null_count", "value_count", "nan_count")
READ_WORKERS = 4
EMPTY_TABLES = {"size": FILES_SCHEMA.empty_table(), "column": RECORD_SCHEMA.empty_table()}


def as_array(col: Any) -> pa.Array:
    """A column as one contiguous array.

    :param col: a pyarrow Array or ChunkedArray.
    """
    if not isinstance(col, pa.ChunkedArray):
        return col
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()  # no copy of one


def arange(n: int) -> pa.Array:
    """0 .. n-1 as int64, built in Arrow (``pa.array(range(n))`` makes n Python ints).

    :param n: how many.
    """
    return pc.indices_nonzero(pa.repeat(pa.scalar(True), n)).cast(pa.int64())


def family_counts(family: pa.ChunkedArray | pa.Array) -> Counter:
    """How many records have each value family (nulls not counted).

    :param family: the records' ``family`` column.
    """
    counts: Counter = Counter()
    chunks = family.chunks if isinstance(family, pa.ChunkedArray) else [family]
    for chunk in chunks:
        for item in pc.value_counts(chunk).to_pylist():
            if item["values"] is not None:
                counts[item["values"]] += item["counts"]
    return counts


class IndexFormatError(RuntimeError):
    """The index location holds something this code cannot read."""


@dataclass(frozen=True, order=True)
class FileKey:
    """Identity of one data file version: a changed size or version means new stats."""

    path: str
    size: int
    version: str = ""

    @classmethod
    def from_info(cls, info: dict) -> FileKey:
        """Build from an fsspec ``info()`` dict (etag, generation or mtime as version)."""
        version: Any = None
        for key in ("ETag", "etag", "md5Hash", "generation", "version_id", "VersionId"):
            if info.get(key):
                version = info[key]
                break
        if version is None:
            for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
                if info.get(key) is not None:
                    version = info[key]
                    break
        if isinstance(version, dt.datetime):
            version = version.isoformat()
        return cls(
            path=str(info["name"]),
            size=int(info.get("size") or 0),
            version="" if version is None else str(version).strip('"'),
        )

    @property
    def token(self) -> str:
        return f"{self.path}\x00{self.size}\x00{self.version}"


def file_keys(filesystem: Any, paths: Iterable[str]) -> list[FileKey]:
    """FileKeys of ``paths`` from ``filesystem.info``."""
    return [FileKey.from_info(filesystem.info(p)) for p in paths]


@dataclass(frozen=True)
class RefreshResult:
    """What :func:`refresh` did; ``failed`` lists (path, error) of files left unindexed."""

    added: int
    kept: int
    removed: int
    version: int
    failed: tuple = field(default=())


def aligned(values: Any, paths: Any) -> bool:
    """Whether ``values`` and ``paths`` are the same, row by row (one comparison per row).

    :param values: the paths of one column's records.
    :param paths: the paths of the segment's files.
    """
    return (
        len(paths) == len(values)
        and paths.null_count == 0
        and values.null_count == 0
        and pc.all(pc.equal(paths, values)).as_py() is not False
    )


def positions_in(values: pa.Array, paths: pa.Array) -> pa.Array:
    """For each of ``values``, a position in ``paths`` holding the same value (null where
    none does).

    Records are written in the order of their segment's files, and a snapshot often lists its
    files in the order they were indexed, so the common case is a plain alignment, checked
    cheaply instead of hashing every path.

    :param values: the values to look up.
    :param paths: the values to find them in.
    """
    return arange(len(values)) if aligned(values, paths) else pc.index_in(values, value_set=paths)
