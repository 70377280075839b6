"""The column-stats index read back: one row per data file, with its columns' statistics.

:func:`read` loads the current version's segments for the files asked about (by
:class:`~.index_format.FileKey`: a file rewritten since is not found) and pivots the per-column
records into one table: ``path``, ``row_count`` and, per column, ``NAME__min``,
``NAME__max``, ``NAME__nulls``, ``NAME__values``, ``NAME__nans`` in the column type's
family.
"""

from __future__ import annotations

import bisect
import decimal
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .index_format import (
    COUNT_COLUMNS,
    FAMILY_SUFFIX,
    FILE_COLUMNS,
    FILES_SCHEMA,
    ORDINAL,
    READ_WORKERS,
    RECORD_SCHEMA,
    FileKey,
    aligned,
    arange,
    as_array,
    family_counts,
)
from .index_records import empty_table, stats_tables
from .index_storage import (
    DAMAGED_ERRORS,
    damaged_error,
    fetch_bytes,
    index_filesystem,
    load_pointer,
    read_parquet_table,
)
from .stats import FileStats


def read(
    index_uri: str,
    columns: Iterable[str] | str,
    files: Iterable[FileKey] | pa.Table | None = None,
    *,
    storage_options: dict | None = None,
) -> pa.Table:
    """One row per file: path, size, version, row_count and per column ``<col>__min``,
    ``<col>__max``, ``<col>__nulls``, ``<col>__values``, ``<col>__nans`` (null = unknown).

    Only the queried columns' records are read, and of those only the counts and the
    min/max of the column's most common value family (and the paths, in segments whose
    records have no ordinals). With ``files`` (FileKeys, or a table with columns path, size,
    version), the result has exactly one row per given key, in that order; a key not indexed
    with the same size and version gets nulls everywhere (unknown, so pruning keeps it).
    """
    fs, root = index_filesystem(index_uri, storage_options)
    wanted_cols = [columns] if isinstance(columns, str) else list(columns)
    lowered = list(dict.fromkeys(c.lower() for c in wanted_cols))
    _, segments = load_pointer(fs, root)
    if files is not None and not isinstance(files, pa.Table):
        files = list(files)  # read twice: for the segments to read, and for the rows
    segments, skipped = _segments_to_read(segments, _wanted_paths(files), lowered)
    bases = [f"{root}/segments/{seg['id']}" for seg in segments]
    # Files are fetched and decoded in parallel (Parquet decoding releases the GIL). A
    # column's family is chosen over all its segments before any min/max is decoded.
    with ThreadPoolExecutor(max_workers=READ_WORKERS) as pool:
        file_jobs = [
            pool.submit(read_parquet_table, fs, f"{base}/files.parquet", FILE_COLUMNS)
            for base in bases
        ]
        open_jobs = {
            col: [
                pool.submit(_RecordFile.open, fs, base, seg, col)
                for base, seg in zip(bases, segments, strict=True)
            ]
            for col in lowered
        }
        opened = {col: [job.result() for job in jobs] for col, jobs in open_jobs.items()}
        # over every segment, as if all were read: the skipped ones' counts are in the pointer
        families = {
            col: _most_common(
                [
                    *(r.families for r in rs if r is not None),
                    *(Counter(seg["families"].get(col, {})) for seg in skipped),
                ]
            )
            for col, rs in opened.items()
        }
        read_jobs = {
            col: [None if r is None else pool.submit(r.read, families[col]) for r in rs]
            for col, rs in opened.items()
        }
        file_tables = [job.result() for job in file_jobs]
        record_tables = {
            col: [None if job is None else job.result() for job in jobs]
            for col, jobs in read_jobs.items()
        }
    if file_tables:
        indexed = pa.concat_tables(file_tables)
    else:
        indexed = empty_table(FILES_SCHEMA).select(list(FILE_COLUMNS))
    joined = {col: _join_records(families[col], record_tables[col], file_tables) for col in lowered}
    return _pivot(indexed, joined, wanted_cols, files)


#: Up to this many files asked about, each segment's range is checked against every path;
#: beyond it, against their least and greatest only (nearly every segment is read anyway).
_EXACT_LOOKUP = 50_000


def _wanted_paths(files: list[FileKey] | pa.Table | None) -> pa.Array | None:
    if files is None:
        return None
    if isinstance(files, pa.Table):
        return as_array(files.column("path"))
    return pa.array([k.path for k in files], pa.string())


def _ranged(seg: dict, columns: Sequence[str]) -> bool:
    """Whether a segment's entry tells its range of paths and the families of the queried
    columns it holds (entries written before these were recorded tell neither)."""
    families = seg.get("families")
    return (
        isinstance(seg.get("first"), str)
        and isinstance(seg.get("last"), str)
        and isinstance(families, dict)
        and all(
            isinstance(counts := families.get(col), dict)
            and all(isinstance(n, int) for n in counts.values())
            for col in columns
            if col in seg.get("columns", {})
        )
    )


def _segments_to_read(
    segments: list[dict], paths: pa.Array | None, columns: Sequence[str]
) -> tuple[list[dict], list[dict]]:
    """(the segments that may hold one of ``paths`` (None: any path), in pointer order; the
    others). A segment that tells no range of paths is read."""
    if paths is None:
        return segments, []
    if len(paths) <= _EXACT_LOOKUP:
        ordered = sorted(p for p in set(paths.to_pylist()) if p is not None)

        def holds(first: str, last: str) -> bool:
            i = bisect.bisect_left(ordered, first)
            return i < len(ordered) and ordered[i] <= last
    else:
        bounds = pc.min_max(paths)
        least, greatest = bounds["min"].as_py(), bounds["max"].as_py()

        def holds(first: str, last: str) -> bool:
            return least is not None and first <= greatest and least <= last

    read, skipped = [], []
    for seg in segments:
        if not _ranged(seg, columns) or holds(seg["first"], seg["last"]):
            read.append(seg)
        else:
            skipped.append(seg)
    return read, skipped


def read_file_stats_table(
    stats: Iterable[FileStats], columns: Iterable[str] | str, keys: Iterable[FileKey] | None = None
) -> pa.Table:
    """The same table :func:`read` returns, built in memory from :class:`FileStats`."""
    stats = list(stats)
    by_path = {k.path: k for k in keys} if keys is not None else {}
    for st in stats:
        by_path.setdefault(st.path, FileKey(st.path, 0, ""))
    files, by_column = stats_tables(stats, by_path)
    wanted_cols = [columns] if isinstance(columns, str) else list(columns)
    joined = {}
    for col in dict.fromkeys(c.lower() for c in wanted_cols):
        recs = by_column.get(col, empty_table(RECORD_SCHEMA))
        counts = family_counts(recs.column("family"))
        family = _most_common([counts])
        joined[col] = _join_records(family, [_family_values(recs, family, counts)], [files])
    return _pivot(files, joined, wanted_cols, None)


class _RecordFile:
    """One segment's stored records of one column: fetched, footer parsed, families counted."""

    def __init__(self, file: pq.ParquetFile, ordinals: bool, path: str = "") -> None:
        self.file = file
        self.path = path
        self.ordinals = ordinals and ORDINAL in file.schema_arrow.names
        self.family = file.read(columns=["family"]).column("family")  # dictionary-encoded
        self.families = family_counts(self.family)

    @classmethod
    def open(cls, fs: Any, base: str, seg: dict, col: str) -> _RecordFile | None:
        d = seg.get("columns", {}).get(col)
        if d is None:
            return None
        path = f"{base}/{d}/stats.parquet"
        data = fetch_bytes(fs, path)
        try:
            file = pq.ParquetFile(pa.BufferReader(data), read_dictionary=["family"])
            return cls(file, bool(seg.get("file_ordinals")), path)
        except DAMAGED_ERRORS as exc:
            raise damaged_error(path, exc) from None

    def read(self, family: str | None) -> pa.Table:
        """The key (``file_ordinal``, else ``path``), the counts and ``family``'s min/max."""
        names = [ORDINAL if self.ordinals else "path", *COUNT_COLUMNS]
        if family is not None:
            names += [f"min_{FAMILY_SUFFIX[family]}", f"max_{FAMILY_SUFFIX[family]}"]
        try:
            table = self.file.read(columns=names).append_column("family", self.family)
            return _family_values(table, family, self.families)
        except DAMAGED_ERRORS as exc:
            raise damaged_error(self.path, exc) from None


def _most_common(counts: Iterable[Counter]) -> str | None:
    """The most common value family over all ``counts`` (ties: alphabetical), or None."""
    total: Counter = Counter()
    for c in counts:
        total.update({k: v for k, v in c.items() if k in FAMILY_SUFFIX})
    if not total:
        return None
    return max(sorted(total), key=lambda f: total[f])


def _family_values(table: pa.Table, family: str | None, counts: Counter) -> pa.Table:
    """The records' key and counts, and ``family``'s min/max as ``min``/``max``: null where
    a record has another family (or none)."""
    keep = [n for n in table.column_names if n in (ORDINAL, "path", *COUNT_COLUMNS)]
    values = table.select(keep)
    if family is None:
        return values
    lo, hi = (
        table.column(f"min_{FAMILY_SUFFIX[family]}"),
        table.column(f"max_{FAMILY_SUFFIX[family]}"),
    )
    if counts.get(family, 0) != table.num_rows:  # not every record is of this family
        same = pc.fill_null(pc.equal(table.column("family"), family), False)
        lo = pc.if_else(same, lo, pa.scalar(None, lo.type))
        hi = pc.if_else(same, hi, pa.scalar(None, hi.type))
    return values.append_column("min", lo).append_column("max", hi)


@dataclass(frozen=True)
class _Joined:
    """A queried column's records joined to the indexed files: ``rows`` holds, per indexed
    file, the row of its record in ``values`` (null: no record); None when row i is record i."""

    family: str | None
    values: pa.Table
    rows: pa.Array | None


def _join_records(
    family: str | None, tables: Sequence[pa.Table | None], file_tables: Sequence[pa.Table]
) -> _Joined:
    """Join each segment's records (``tables``; None where the segment lacks the column) to
    that segment's files: by ``file_ordinal`` when the records have it, else by path."""
    names = [*COUNT_COLUMNS, *(("min", "max") if family is not None else ())]
    seg_rows: list[pa.Array | None] = []
    values: list[pa.Table] = []
    offset = 0
    identity = True  # every segment's record i is its file i: so are the concatenated ones
    for table, files in zip(tables, file_tables, strict=True):
        n = files.num_rows
        if table is None:
            seg_rows.append(pa.nulls(n, pa.int64()))
            identity = False
            continue
        if ORDINAL in table.column_names:
            keys, targets = as_array(table.column(ORDINAL)).cast(pa.int64()), arange(n)
        else:
            keys, targets = as_array(table.column("path")), as_array(files.column("path"))
        rows = None if aligned(targets, keys) else pc.index_in(targets, value_set=keys)
        identity = identity and rows is None
        if offset:
            rows = pc.add(arange(n) if rows is None else rows.cast(pa.int64()), offset)
        seg_rows.append(rows)
        values.append(table.select(names))
        offset += table.num_rows
    if not values:
        empty = pa.table({name: pa.array([], pa.int64()) for name in COUNT_COLUMNS})
        return _Joined(None, empty, pa.nulls(sum(t.num_rows for t in file_tables), pa.int64()))
    combined = pa.concat_tables(values).combine_chunks() if len(values) > 1 else values[0]
    if len(seg_rows) == 1 or identity:
        return _Joined(family, combined, None if identity else seg_rows[0])
    rows = pa.concat_arrays(
        [
            arange(t.num_rows) if r is None else r.cast(pa.int64())
            for r, t in zip(seg_rows, file_tables, strict=True)
        ]
    )
    return _Joined(family, combined, rows)


def _take(values: Any, rows: pa.Array | None) -> Any:
    return values if rows is None else pc.take(values, rows)


def _pivot(
    indexed: pa.Table,
    joined: dict[str, _Joined],
    wanted_cols: list[str],
    files: Iterable[FileKey] | pa.Table | None,
) -> pa.Table:
    indexed_paths = indexed.column("path")
    pos: pa.Array | None = None  # per output row its indexed file; None: row i is file i
    if files is not None:
        if isinstance(files, pa.Table):  # columns path, size, version: no objects per file
            paths = as_array(files.column("path"))
            sizes = as_array(files.column("size")).cast(pa.int64())
            versions = as_array(files.column("version"))
        else:
            keys = list(files)
            paths = pa.array([k.path for k in keys], pa.string())
            sizes = pa.array([k.size for k in keys], pa.int64())
            versions = pa.array([k.version for k in keys], pa.string())
        if indexed.num_rows:
            if not aligned(paths, indexed_paths):
                pos = pc.index_in(paths, value_set=as_array(indexed_paths))
            same = pc.fill_null(
                pc.and_(
                    pc.equal(_take(indexed.column("size"), pos), sizes),
                    pc.equal(pc.fill_null(_take(indexed.column("version"), pos), ""), versions),
                ),
                False,
            )
            # a file indexed with another size or version is not indexed (unknown: kept)
            if pos is not None or pc.all(same).as_py() is False:
                found = arange(len(paths)) if pos is None else pos
                pos = pc.if_else(same, found, pa.scalar(None, found.type))
        else:
            pos = pa.nulls(len(paths), pa.int64())
        out = {
            "path": paths,
            "size": sizes,
            "version": versions,
            "row_count": _take(indexed.column("row_count"), pos),
        }
        n = len(paths)
    else:
        out = {name: indexed.column(name) for name in ("path", "size", "version", "row_count")}
        n = indexed.num_rows
    for name in wanted_cols:
        col = joined[name.lower()]
        if pos is None or col.rows is None:
            rows = pos if col.rows is None else col.rows
        else:
            rows = pc.take(col.rows, pos)
        if col.family is None:
            lo = hi = pa.nulls(n, pa.null())
        else:
            lo, hi = _take(col.values.column("min"), rows), _take(col.values.column("max"), rows)
            if col.family == "decimal":
                lo, hi = _decimal_arrays(lo, hi)
        out[f"{name}__min"] = lo
        out[f"{name}__max"] = hi
        out[f"{name}__nulls"] = _take(col.values.column("null_count"), rows)
        out[f"{name}__values"] = _take(col.values.column("value_count"), rows)
        out[f"{name}__nans"] = _take(col.values.column("nan_count"), rows)
    return pa.Table.from_arrays([as_array(v) for v in out.values()], names=list(out))


def _decimal_arrays(lo: Any, hi: Any) -> tuple[pa.Array, pa.Array]:
    """Decimal text -> decimal128 with the largest scale needed; unrepresentable -> null."""
    lo = lo.combine_chunks() if isinstance(lo, pa.ChunkedArray) else lo
    hi = hi.combine_chunks() if isinstance(hi, pa.ChunkedArray) else hi
    values = [decimal.Decimal(v) for v in lo.to_pylist() + hi.to_pylist() if v is not None]
    scale = min(38, max((max(0, -v.as_tuple().exponent) for v in values), default=0))
    int_digits = max((max(0, v.adjusted() + 1) for v in values if v != 0), default=1)
    t = pa.decimal128(min(38, max(1, int_digits + scale)), scale)

    def conv(arr: pa.Array) -> pa.Array:
        try:
            return pc.cast(arr, t)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            out = []
            for v in arr.to_pylist():
                try:
                    out.append(None if v is None else pa.scalar(decimal.Decimal(v), t).as_py())
                except (pa.ArrowInvalid, decimal.InvalidOperation):
                    out.append(None)
            return pa.array(out, t)

    return conv(lo), conv(hi)
