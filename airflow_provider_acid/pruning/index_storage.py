"""The column-stats index on storage: version pointers, segments, and their Parquet files.

An index folder holds ``_pointers/vNNNN.json`` (each version's list of segments; the newest
complete one is current) and ``segments/ID/`` (a segment's ``files.parquet`` and one
``stats.parquet`` per column). Segments are written whole, never changed, and merged or
filtered into new ones; what a version no longer lists is collected later.

A segment's pointer entry names, besides its id, file count and column folders, the least and
the greatest path of its files (``first``, ``last``) and per column how many records have each
value family (``families``): a reader looking up some files skips the segments whose range
holds none of them, yet picks each column's family over every segment as before.
:func:`write_segments` stores many files as segments of at most ``SEGMENT_FILES`` consecutive
paths. Entries written before have no range: their segments are always read.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import urllib.parse
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..acid.storage import naming, read_whole, write_whole
from .index_format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    ORDINAL,
    POINTER_RE,
    READ_WORKERS,
    RECORD_SCHEMA,
    SEGMENT_FILES,
    IndexFormatError,
    as_array,
    family_counts,
    positions_in,
)


def index_filesystem(index_uri: str, storage_options: dict | None) -> tuple[Any, str]:
    """The filesystem and root folder of an index location.

    :param index_uri: the index location (any fsspec URL).
    :param storage_options: fsspec options for it.
    """
    from fsspec.core import url_to_fs

    fs, root = url_to_fs(index_uri, **(storage_options or {}))
    return fs, root.rstrip("/")


def pointer_path(root: str, version: int) -> str:
    """The pointer file of index version ``version``.

    :param root: the index folder.
    :param version: the version number.
    """
    return f"{root}/_pointers/v{version:020d}.json"


def list_pointers(fs: Any, root: str) -> list[tuple[int, str]]:
    # Object-store filesystems cache listings for the instance's life (fsspec shares it in a
    # process): a version published since, by another process, must not be missed.
    """The index's version pointers, oldest first: (version, path).

    :param fs: the index's filesystem.
    :param root: the index folder.
    """
    fs.invalidate_cache(f"{root}/_pointers")
    try:
        names = fs.ls(f"{root}/_pointers", detail=False)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        m = POINTER_RE.match(str(name).rstrip("/").rsplit("/", 1)[-1])
        if m:
            out.append((int(m.group(1)), str(name)))
    return sorted(out)


def load_pointer(fs: Any, root: str) -> tuple[int, list[dict]]:
    """The newest complete version: (version, segments); (0, []) for a new index.

    :param fs: the index's filesystem.
    :param root: the index folder.
    """
    pointers = list_pointers(fs, root)
    unreadable = []
    for version, path in reversed(pointers):
        try:
            with fs.open(path, "rb") as f:
                doc = json.loads(f.read().decode("utf-8"))
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
        except (ValueError, OSError) as exc:
            unreadable.append(f"{path} ({exc})")
            continue  # being written, or garbage: fall back to the previous one
        if doc.get("format") != FORMAT_NAME:
            raise IndexFormatError(f"{path} is not a column-stats index pointer")
        if int(doc.get("format_version", 0)) > FORMAT_VERSION:
            raise IndexFormatError(
                f"{path} has index format {doc.get('format_version')}; "
                f"this code reads up to {FORMAT_VERSION}"
            )
        segments = doc.get("segments", [])
        if not isinstance(segments, list) or not all(
            isinstance(s, dict) and isinstance(s.get("id"), str) and "/" not in s["id"]
            for s in segments
        ):
            raise IndexFormatError(f"{path}: damaged index pointer (its segments)")
        return version, list(segments)
    if pointers:
        raise IndexFormatError(
            f"no readable pointer under {root}/_pointers: {'; '.join(unreadable)}"
        )
    return 0, []


def _column_dir(name: str) -> str:
    return "column=" + urllib.parse.quote(name.lower(), safe="")


def _write_table(fs: Any, path: str, table: pa.Table) -> None:
    """Write an index file whole: serialised in memory, then a hidden temporary renamed into
    place (locally) or one PUT (object stores); never visible half-written."""
    options: dict[str, Any] = {}
    if ORDINAL in table.column_names:  # mostly 0, 1, 2, ...: a few bytes delta-encoded
        options["use_dictionary"] = [n for n in table.column_names if n != ORDINAL]
        options["column_encoding"] = {ORDINAL: "DELTA_BINARY_PACKED"}
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", **options)
    write_whole(fs, path, sink.getvalue().to_pybytes())


#: What pyarrow raises on a damaged Parquet file (OSError: "Couldn't deserialize thrift").
DAMAGED_ERRORS = (pa.ArrowException, OSError, ValueError, KeyError, IndexError, TypeError)


def damaged_error(path: str, exc: BaseException) -> IndexFormatError:
    """The error for an index file that cannot be read, naming it.

    :param path: the file.
    :param exc: what reading it raised.
    """
    if isinstance(exc, FileNotFoundError):
        return IndexFormatError(f"{path}: missing, though the index pointer lists it")
    return IndexFormatError(f"{path}: damaged index file ({type(exc).__name__}: {exc})")


def fetch_bytes(fs: Any, path: str) -> bytes:
    """An index file's bytes, fetched whole in one request (:func:`.acid.storage.read_whole`:
    no request for the object's size first).

    :param fs: the index's filesystem.
    :param path: the file to read.
    """
    try:
        with naming(path):
            return read_whole(fs, path)
    except FileNotFoundError as exc:
        raise damaged_error(path, exc) from None


def read_parquet_table(fs: Any, path: str, columns: Sequence[str] | None = None) -> pa.Table:
    """Some columns (all when None) of an index file, fetched whole in one request (a reader
    needs most of its bytes anyway) and decoded from memory.

    :param fs: the index's filesystem.
    :param path: the Parquet file.
    :param columns: the columns to read (None: all).
    """
    raw = fetch_bytes(fs, path)
    try:
        return pq.read_table(pa.BufferReader(raw), columns=list(columns) if columns else None)
    except DAMAGED_ERRORS as exc:
        raise damaged_error(path, exc) from None


def _segment_id() -> str:
    now = dt.datetime.now(dt.timezone.utc)
    return f"seg-{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}"


def segment_time(seg_id: str) -> dt.datetime | None:
    """When a segment was written, from its id (None if the id carries no time).

    :param seg_id: the segment id.
    """
    m = re.match(r"^seg-(\d{8}T\d{6})-", seg_id)
    if not m:
        return None
    return dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=dt.timezone.utc)


def write_segment(fs: Any, root: str, files: pa.Table, columns: dict[str, pa.Table]) -> dict:
    """Write one new segment (its files table and one records file per column) and return its
    pointer entry.

    :param fs: the index's filesystem.
    :param root: the index folder.
    :param files: the segment's files (``FILES_SCHEMA``).
    :param columns: per column, the records of those files (``RECORD_SCHEMA``).
    """
    seg_id = _segment_id()
    base = f"{root}/segments/{seg_id}"
    paths = as_array(files.column("path"))
    column_dirs, families = {}, {}
    for col, table in sorted(columns.items()):
        if table.num_rows == 0:
            continue
        d = _column_dir(col)
        table = table.select(RECORD_SCHEMA.names)  # a stale ordinal of a rewritten segment goes
        ordinals = positions_in(as_array(table.column("path")), paths).cast(pa.int32())
        _write_table(fs, f"{base}/{d}/stats.parquet", table.append_column(ORDINAL, ordinals))
        column_dirs[col] = d
        families[col] = dict(sorted(family_counts(table.column("family")).items()))
    _write_table(fs, f"{base}/files.parquet", files)
    entry = {"id": seg_id, "files": files.num_rows, "columns": column_dirs, "file_ordinals": True}
    if paths.null_count == 0 and len(paths):  # a null path has no place in a range
        bounds = pc.min_max(paths)
        entry.update(first=bounds["min"].as_py(), last=bounds["max"].as_py(), families=families)
    return entry


def write_segments(
    fs: Any,
    root: str,
    files: pa.Table,
    columns: dict[str, pa.Table],
    segment_files: int | None = None,
) -> list[dict]:
    """Write ``files`` and their records as segments of at most ``segment_files`` files each,
    sorted by path (so each holds a range of paths no other holds), and return their pointer
    entries in path order.

    Records whose path is none of ``files``' are left out (no file is joined to them).

    :param fs: the index's filesystem.
    :param root: the index folder.
    :param files: the files (``FILES_SCHEMA``).
    :param columns: per column, the records of those files (``RECORD_SCHEMA``).
    :param segment_files: the most files a segment holds (None: ``SEGMENT_FILES``).
    """
    segment_files = segment_files or SEGMENT_FILES
    if files.num_rows <= segment_files:
        return [write_segment(fs, root, files, columns)]
    order = pc.sort_indices(files, sort_keys=[("path", "ascending")])  # stable
    files = files.take(order)
    paths = as_array(files.column("path"))
    placed = {}  # per column: its records in their file's order, and each one's file row
    for col, table in columns.items():
        rows = positions_in(as_array(table.column("path")), paths)
        by_row = pc.array_sort_indices(rows, null_placement="at_end")  # stable
        table, rows = table.take(by_row), pc.take(rows, by_row)
        known = len(rows) - rows.null_count
        placed[col] = (table.slice(0, known), rows.slice(0, known))
    starts = range(0, files.num_rows, segment_files)

    def one(start: int) -> dict:
        stop = start + segment_files
        part = {}
        for col, (table, rows) in placed.items():
            lo = _search(rows, start)
            part[col] = table.slice(lo, _search(rows, stop) - lo)
        return write_segment(fs, root, files.slice(start, segment_files), part)

    with ThreadPoolExecutor(max_workers=READ_WORKERS) as pool:
        return list(pool.map(one, starts))


def _search(sorted_rows: pa.Array, value: int) -> int:
    """How many of the ascending ``sorted_rows`` are below ``value``."""
    return pc.sum(pc.less(sorted_rows, value).cast(pa.int64())).as_py() or 0


def read_segment_files(fs: Any, root: str, seg: dict) -> pa.Table:
    """The files table of a segment.

    :param fs: the index's filesystem.
    :param root: the index folder.
    :param seg: the segment's pointer entry.
    """
    return read_parquet_table(fs, f"{root}/segments/{seg['id']}/files.parquet")


def _read_segment_column(fs: Any, root: str, seg: dict, col: str) -> pa.Table | None:
    d = seg.get("columns", {}).get(col.lower())
    if d is None:
        return None
    return read_parquet_table(fs, f"{root}/segments/{seg['id']}/{d}/stats.parquet")


def file_tokens(table: pa.Table) -> pa.Array:
    """One text per file of a files table: path, size and version, to compare file keys at once.

    :param table: a files table (``FILES_SCHEMA``).
    """
    sizes = pc.cast(table.column("size"), pa.string())
    joined = pc.binary_join_element_wise(
        table.column("path"), sizes, pc.fill_null(table.column("version"), ""), "\x00"
    )
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def filter_segment(fs: Any, root: str, seg: dict, files: pa.Table, keep: pa.Array) -> dict | None:
    """A new segment with only the kept files of ``seg`` and their records (None if none is kept).

    :param fs: the index's filesystem.
    :param root: the index folder.
    :param seg: the segment's pointer entry.
    :param files: the segment's files table.
    :param keep: which of those files to keep.
    """
    kept = _kept_tables(fs, root, seg, files, keep)
    return None if kept is None else write_segment(fs, root, *kept)


def _kept_tables(
    fs: Any, root: str, seg: dict, files: pa.Table, keep: pa.Array
) -> tuple[pa.Table, dict[str, pa.Table]] | None:
    kept_files = files.filter(keep)
    if kept_files.num_rows == 0:
        return None
    paths = kept_files.column("path")
    columns = {}
    for col in seg.get("columns", {}):
        table = _read_segment_column(fs, root, seg, col)
        if table is None:
            continue
        columns[col] = table.filter(pc.is_in(table.column("path"), value_set=paths))
    return kept_files, columns


def merge_segments(fs: Any, root: str, segments: list[dict]) -> dict | None:
    """One new segment holding the files and records of ``segments`` (None if they hold none).

    :param fs: the index's filesystem.
    :param root: the index folder.
    :param segments: the pointer entries of the segments to merge.
    """
    merged = _merged_tables(fs, root, segments)
    return None if merged is None else write_segment(fs, root, *merged)


def merge_into_segments(fs: Any, root: str, segments: list[dict]) -> list[dict]:
    """The files and records of ``segments`` written anew by :func:`write_segments`: the new
    segments' entries (none if they hold no file).

    :param fs: the index's filesystem.
    :param root: the index folder.
    :param segments: the pointer entries of the segments to merge.
    """
    merged = _merged_tables(fs, root, segments)
    return [] if merged is None else write_segments(fs, root, *merged)


def _merged_tables(
    fs: Any, root: str, segments: list[dict]
) -> tuple[pa.Table, dict[str, pa.Table]] | None:
    files = []
    columns: dict[str, list[pa.Table]] = {}
    for seg in segments:
        files.append(read_segment_files(fs, root, seg))
        for col in seg.get("columns", {}):
            table = _read_segment_column(fs, root, seg, col)
            if table is not None:  # ordinals (version 2 segments only) are renumbered
                columns.setdefault(col, []).append(table.select(RECORD_SCHEMA.names))
    if not files:
        return None
    merged_files = pa.concat_tables(files)
    if merged_files.num_rows == 0:
        return None
    return merged_files, {col: pa.concat_tables(ts) for col, ts in columns.items()}
