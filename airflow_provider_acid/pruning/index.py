"""A column-statistics index over a table's data files, stored as Parquet.

Layout under the index location (any fsspec URL)::

    <index>/_pointers/v00000000000000000007.json     # one small JSON per version
    <index>/segments/<segment-id>/files.parquet      # one row per file: path, size, version, ...
    <index>/segments/<segment-id>/column=<name>/stats.parquet   # one row per (file, column)

A version is a set of immutable segments. :func:`refresh` writes new segment files first
and the next pointer last; readers take the highest pointer that parses, so a half-written
version is never seen and nothing depends on rename. Segments whose files are all still
wanted are reused untouched; a segment that lost files is rewritten without them; many
small segments are merged into one. Old pointers and unreferenced segments are deleted
after a grace period, so readers of the previous version keep working.

Min/max values are stored typed per family: ``min_int``/``max_int`` (int64),
``min_float`` (float64), ``min_dec`` (exact decimal text), ``min_str``, ``min_date``
(date32), ``min_ts`` (timestamp[us], naive; UTC for zoned columns), ``min_bool``; so every
value round-trips exactly.

Since format version 2 each record also carries ``file_ordinal``, the row of its file in the
segment's ``files.parquet``, and the segment's pointer entry says ``"file_ordinals": true``:
a reader joins those records to their files by position, without reading or hashing the
record paths. Version 1 indexes are still read (their records are joined on ``path``); a
refresh publishes version 2, and the version 1 segments it keeps are rewritten with ordinals
as they are filtered or merged. Code that knows only version 1 refuses version 2 pointers,
so it never rewrites a segment without renumbering its ordinals.

Files are written as segments of at most ``SEGMENT_FILES`` consecutive paths
(:func:`~.index_storage.write_segments`), whose pointer entries tell their least and greatest
path and their columns' family counts: :func:`read` asked about some files reads only the
segments whose range holds one of them, and picks each column's family over all segments as
before. Segments written before are read always; a refresh rewrites a large one as ranges
(once all its files are kept; one that lost some is filtered first, and split the next time).
Code that predates the ranges reads these indexes as it reads any (every segment).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..acid.storage import remove_temporaries, write_whole
from .index_format import (
    FILES_SCHEMA,
    FORMAT_NAME,
    FORMAT_VERSION,
    MAX_SEGMENTS,
    READ_WORKERS,
    RECORD_SCHEMA,
    SEGMENT_FILES,
    FileKey,
    IndexFormatError,
    RefreshResult,
    file_keys,
)
from .index_read import read, read_file_stats_table
from .index_records import stats_tables
from .index_storage import (
    file_tokens,
    filter_segment,
    index_filesystem,
    list_pointers,
    load_pointer,
    merge_into_segments,
    pointer_path,
    read_segment_files,
    segment_time,
    write_segments,
)
from .stats import FileStats, StatsError, read_file_stats

__all__ = [
    "FileKey",
    "IndexFormatError",
    "RefreshResult",
    "file_keys",
    "read",
    "read_file_stats_table",
    "refresh",
    "write_tables",
]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- refresh


def refresh(
    index_uri: str,
    files: Iterable[FileKey],
    filesystem: Any,
    *,
    column_names: Sequence[str] | None = None,
    storage_options: dict | None = None,
    max_workers: int = 16,
    gc_grace_seconds: float = 3600.0,
    scope: Callable[[str], bool] | None = None,
) -> RefreshResult:
    """Bring the index at ``index_uri`` in line with ``files`` (read through ``filesystem``).

    Reads footers only for files not indexed yet (same path, size and version), ``max_workers``
    at a time (each footer is at most two ranged reads, :mod:`.footers`), forgets
    indexed files not in ``files``, and publishes a new version atomically. Files whose
    statistics cannot be read are left out (and listed in ``failed``): the pruning then
    treats them as unknown and keeps them.

    ``scope``: when ``files`` are those of part of the table only (a partition-scoped
    listing), True for the paths that part covers; indexed files outside it are kept as they
    are, neither forgotten nor read again.
    """
    fs, root = index_filesystem(index_uri, storage_options)
    wanted: dict[str, FileKey] = {}
    for key in files:
        if not isinstance(key, FileKey):
            raise TypeError(f"refresh needs FileKey objects, got {key!r}")
        other = wanted.get(key.path)
        if other is not None and other != key:
            raise ValueError(f"file {key.path} is listed twice with different keys")
        wanted[key.path] = key
    wanted_tokens = {k.token for k in wanted.values()}

    version, segments = load_pointer(fs, root)
    with ThreadPoolExecutor(max_workers=READ_WORKERS) as pool:  # a large index: many segments
        seg_files = list(pool.map(lambda seg: read_segment_files(fs, root, seg), segments))
    indexed_tokens: set[str] = set()
    new_segments: list[dict] = []
    removed = 0
    changed = False
    for seg, table in zip(segments, seg_files, strict=True):
        tokens = file_tokens(table)
        keep = pc.is_in(tokens, value_set=pa.array(sorted(wanted_tokens), pa.string()))
        if scope is not None:  # what the listing did not cover stays indexed
            outside = [not scope(p) for p in table.column("path").to_pylist()]
            keep = pc.or_(keep, pa.array(outside, pa.bool_()))
        n_keep = pc.sum(keep.cast(pa.int64())).as_py() or 0
        indexed_tokens.update(
            t for t, k in zip(tokens.to_pylist(), keep.to_pylist(), strict=True) if k
        )
        removed += table.num_rows - n_keep
        if n_keep == table.num_rows and table.num_rows <= SEGMENT_FILES:
            new_segments.append(seg)
            continue
        changed = True
        if n_keep == table.num_rows:  # a large segment of an older index: written as ranges
            new_segments.extend(merge_into_segments(fs, root, [seg]))
            continue
        rewritten = filter_segment(fs, root, seg, table, keep)  # still large: split next time
        if rewritten is not None:
            new_segments.append(rewritten)

    to_add = [k for k in wanted.values() if k.token not in indexed_tokens]
    kept = len(wanted) - len(to_add)
    failed: list[tuple[str, str]] = []
    added_stats: list[FileStats] = []
    if to_add:

        def one(key: FileKey) -> FileStats | tuple[str, str]:
            try:
                # the listed size saves a HEAD: at most two ranged reads of the footer
                return read_file_stats(
                    filesystem, key.path, column_names=column_names, size=key.size or None
                )
            except StatsError as exc:
                return (key.path, str(exc))

        workers = max(1, min(max_workers, len(to_add)))
        if workers == 1:
            results = [one(k) for k in to_add]
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                results = list(pool.map(one, to_add))
        for res in results:
            if isinstance(res, FileStats):
                added_stats.append(res)
            else:
                log.warning("column-stats index: %s", res[1])
                failed.append(res)
    if added_stats:
        files_table, columns = stats_tables(added_stats, wanted)
        new_segments.extend(write_segments(fs, root, files_table, columns))
        changed = True
    # beyond the full segments of path ranges, at most MAX_SEGMENTS: then all are merged anew
    indexed = sum(int(seg["files"]) for seg in new_segments)
    if len(new_segments) > MAX_SEGMENTS + indexed // SEGMENT_FILES:
        new_segments = merge_into_segments(fs, root, new_segments)
        changed = True
    if not changed:
        return RefreshResult(0, kept, 0, version, tuple(failed))

    new_version = _publish(fs, root, version + 1, new_segments)
    _collect_garbage(fs, root, new_version, gc_grace_seconds)
    return RefreshResult(len(added_stats), kept, removed, new_version, tuple(failed))


def _publish(fs: Any, root: str, new_version: int, segments: list[dict]) -> int:
    """Write the pointer of ``new_version`` (the commit point of a version) and return it."""
    doc = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "version": new_version,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "files": sum(int(s["files"]) for s in segments),
        "segments": segments,
    }
    pointer = json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")
    write_whole(fs, pointer_path(root, new_version), pointer)  # the version becomes visible
    return new_version


def write_tables(
    index_uri: str,
    files: pa.Table,
    columns: dict[str, pa.Table],
    *,
    storage_options: dict | None = None,
) -> int:
    """Publish a new index version holding exactly these tables (``FILES_SCHEMA`` rows and,
    per column, ``RECORD_SCHEMA`` rows): for statistics gathered elsewhere, and benchmarks."""
    fs, root = index_filesystem(index_uri, storage_options)
    version, _ = load_pointer(fs, root)
    segments = write_segments(
        fs, root, files.cast(FILES_SCHEMA), {c: t.cast(RECORD_SCHEMA) for c, t in columns.items()}
    )
    return _publish(fs, root, version + 1, segments)


def _collect_garbage(fs: Any, root: str, current: int, grace_seconds: float) -> None:
    """Delete pointers older than the previous version and segments no kept pointer uses."""
    try:
        pointers = list_pointers(fs, root)
        live: set[str] = set()
        for version, path in pointers:
            if version >= current - 1:
                try:
                    with fs.open(path, "rb") as f:
                        doc = json.loads(f.read().decode("utf-8"))
                    live.update(s["id"] for s in doc.get("segments", []))
                except (ValueError, OSError):
                    return  # cannot tell what is live: delete nothing
        now = dt.datetime.now(dt.timezone.utc)
        try:
            seg_dirs = fs.ls(f"{root}/segments", detail=False)
        except FileNotFoundError:
            seg_dirs = []
        for d in seg_dirs:
            seg_id = str(d).rstrip("/").rsplit("/", 1)[-1]
            born = segment_time(seg_id)
            if seg_id in live or born is None:
                continue
            if (now - born).total_seconds() < grace_seconds:
                continue
            fs.rm(f"{root}/segments/{seg_id}", recursive=True)
        for version, path in pointers:
            if version < current - 1:
                fs.rm(path)
        remove_temporaries(fs, f"{root}/_pointers")  # of killed refreshes (not live ones)
    except Exception as exc:  # garbage collection must never fail a refresh
        log.warning("column-stats index: garbage collection skipped: %s", exc)
