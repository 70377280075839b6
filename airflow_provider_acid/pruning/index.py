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
"""

from __future__ import annotations

import datetime as dt
import decimal
import errno
import json
import logging
import re
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..acid.storage import naming, remove_temporaries, write_whole
from .column_types import type_family
from .stats import ColumnStats, FileStats, StatsError, read_file_stats

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

FORMAT_NAME = "airflow-provider-acid/column-stats-index"
FORMAT_VERSION = 2  # 2: records carry file_ordinal (version 1 is still read)
MAX_SEGMENTS = 8
_POINTER_RE = re.compile(r"^v(\d{20})\.json$")
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
_SUFFIX = {
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
        (f"{side}_{_SUFFIX[fam]}", _FAMILY_TYPES[fam])
        for fam in _FAMILIES
        for side in ("min", "max")
    ]
)


#: In stored records (not part of ``RECORD_SCHEMA``): the row of the record's file in its
#: segment's files table. Trusted only in segments whose pointer entry has ``file_ordinals``.
ORDINAL = "file_ordinal"
#: What :func:`read` needs of the files table, and of the records besides min/max.
_FILE_COLUMNS = ("path", "size", "version", "row_count")
_COUNT_COLUMNS = ("null_count", "value_count", "nan_count")
_READ_WORKERS = 4

_EMPTY = {"size": FILES_SCHEMA.empty_table(), "column": RECORD_SCHEMA.empty_table()}


def _array(col: Any) -> pa.Array:
    if not isinstance(col, pa.ChunkedArray):
        return col
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()  # no copy of one


def _arange(n: int) -> pa.Array:
    """0 .. n-1 as int64, built in Arrow (``pa.array(range(n))`` makes n Python ints)."""
    return pc.indices_nonzero(pa.repeat(pa.scalar(True), n)).cast(pa.int64())


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


# --------------------------------------------------------------------------- storage


def _fs(index_uri: str, storage_options: dict | None) -> tuple[Any, str]:
    from fsspec.core import url_to_fs

    fs, root = url_to_fs(index_uri, **(storage_options or {}))
    return fs, root.rstrip("/")


def _pointer_path(root: str, version: int) -> str:
    return f"{root}/_pointers/v{version:020d}.json"


def _list_pointers(fs: Any, root: str) -> list[tuple[int, str]]:
    # Object-store filesystems cache listings for the instance's life (fsspec shares it in a
    # process): a version published since, by another process, must not be missed.
    fs.invalidate_cache(f"{root}/_pointers")
    try:
        names = fs.ls(f"{root}/_pointers", detail=False)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        m = _POINTER_RE.match(str(name).rstrip("/").rsplit("/", 1)[-1])
        if m:
            out.append((int(m.group(1)), str(name)))
    return sorted(out)


def _load_pointer(fs: Any, root: str) -> tuple[int, list[dict]]:
    """The newest complete version: (version, segments); (0, []) for a new index."""
    pointers = _list_pointers(fs, root)
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
_DAMAGED = (pa.ArrowException, OSError, ValueError, KeyError, IndexError, TypeError)


def _damaged(path: str, exc: BaseException) -> IndexFormatError:
    if isinstance(exc, FileNotFoundError):
        return IndexFormatError(f"{path}: missing, though the index pointer lists it")
    return IndexFormatError(f"{path}: damaged index file ({type(exc).__name__}: {exc})")


def _fetch(fs: Any, path: str) -> bytes:
    """An index file's bytes, fetched whole in one request: a range from 0 (s3fs asks for the
    object's size first when no range is given, a round trip more per file)."""
    try:
        with naming(path):
            try:
                return fs.cat_file(path, start=0)
            except OSError as exc:
                if exc.errno != errno.EINVAL:  # not "range not satisfiable" (an empty object)
                    raise
                return fs.cat_file(path)
    except FileNotFoundError as exc:
        raise _damaged(path, exc) from None


def _read_table(fs: Any, path: str, columns: Sequence[str] | None = None) -> pa.Table:
    """Some columns (all when None) of an index file, fetched whole in one request (a reader
    needs most of its bytes anyway) and decoded from memory."""
    raw = _fetch(fs, path)
    try:
        return pq.read_table(pa.BufferReader(raw), columns=list(columns) if columns else None)
    except _DAMAGED as exc:
        raise _damaged(path, exc) from None


def _segment_id() -> str:
    now = dt.datetime.now(dt.timezone.utc)
    return f"seg-{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}"


def _segment_time(seg_id: str) -> dt.datetime | None:
    m = re.match(r"^seg-(\d{8}T\d{6})-", seg_id)
    if not m:
        return None
    return dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=dt.timezone.utc)


# --------------------------------------------------------------------------- records


def _records(stats: FileStats) -> dict[str, list[dict]]:
    """Per lower-cased column name, the record dicts of one file."""
    out: dict[str, list[dict]] = {}
    for name, cs in stats.columns.items():
        key = name.lower()
        if key in out:
            continue
        out[key] = [_record(stats, name, cs)]
    return out


def _record(stats: FileStats, name: str, cs: ColumnStats) -> dict:
    family = type_family(cs.type) if cs.type is not None else None
    rec: dict[str, Any] = {
        "path": stats.path,
        "column": name,
        "type": str(cs.type) if cs.type is not None else None,
        "family": family,
        "row_count": stats.row_count,
        "null_count": cs.null_count,
        "value_count": cs.value_count,
        "nan_count": cs.nan_count,
        "bounds_known": False,
    }
    lo, hi = cs.min, cs.max
    if family in _SUFFIX and lo is not None and hi is not None:
        if family == "int" and not (-(2**63) <= lo and hi <= 2**63 - 1):
            lo = hi = None
        elif family == "decimal":
            lo, hi = _dec_text(lo), _dec_text(hi)
        if lo is not None and hi is not None:
            rec[f"min_{_SUFFIX[family]}"] = lo
            rec[f"max_{_SUFFIX[family]}"] = hi
            rec["bounds_known"] = True
    return rec


def _dec_text(value: decimal.Decimal) -> str:
    return format(value, "f")


def stats_tables(all_stats: Sequence[FileStats], sizes: dict[str, FileKey]) -> tuple:
    files_rows = {name: [] for name in FILES_SCHEMA.names}
    by_column: dict[str, list[dict]] = {}
    for st in all_stats:
        key = sizes[st.path]
        files_rows["path"].append(st.path)
        files_rows["size"].append(key.size)
        files_rows["version"].append(key.version)
        files_rows["format"].append(st.format)
        files_rows["row_count"].append(st.row_count)
        for col, recs in _records(st).items():
            by_column.setdefault(col, []).extend(recs)
    files = _from_lists(files_rows, FILES_SCHEMA)
    columns = {
        col: _from_lists({f: [r.get(f) for r in recs] for f in RECORD_SCHEMA.names}, RECORD_SCHEMA)
        for col, recs in by_column.items()
    }
    return files, columns


def _from_lists(data: dict[str, list], schema: pa.Schema) -> pa.Table:
    # typed arrays first: pa.table() on plain lists takes a much slower path
    arrays = [
        pa.array(values, f.type)
        if any(v is not None for v in values)
        else pa.nulls(len(values), f.type)
        for f, values in ((f, data[f.name]) for f in schema)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _empty(schema: pa.Schema) -> pa.Table:
    return _EMPTY[schema.names[1]]


def _write_segment(fs: Any, root: str, files: pa.Table, columns: dict[str, pa.Table]) -> dict:
    seg_id = _segment_id()
    base = f"{root}/segments/{seg_id}"
    paths = _array(files.column("path"))
    column_dirs = {}
    for col, table in sorted(columns.items()):
        if table.num_rows == 0:
            continue
        d = _column_dir(col)
        table = table.select(RECORD_SCHEMA.names)  # a stale ordinal of a rewritten segment goes
        ordinals = _positions_in(_array(table.column("path")), paths).cast(pa.int32())
        _write_table(fs, f"{base}/{d}/stats.parquet", table.append_column(ORDINAL, ordinals))
        column_dirs[col] = d
    _write_table(fs, f"{base}/files.parquet", files)
    return {"id": seg_id, "files": files.num_rows, "columns": column_dirs, "file_ordinals": True}


def _read_segment_files(fs: Any, root: str, seg: dict) -> pa.Table:
    return _read_table(fs, f"{root}/segments/{seg['id']}/files.parquet")


def _read_segment_column(fs: Any, root: str, seg: dict, col: str) -> pa.Table | None:
    d = seg.get("columns", {}).get(col.lower())
    if d is None:
        return None
    return _read_table(fs, f"{root}/segments/{seg['id']}/{d}/stats.parquet")


def _tokens(table: pa.Table) -> pa.Array:
    sizes = pc.cast(table.column("size"), pa.string())
    joined = pc.binary_join_element_wise(
        table.column("path"), sizes, pc.fill_null(table.column("version"), ""), "\x00"
    )
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _filter_segment(fs: Any, root: str, seg: dict, files: pa.Table, keep: pa.Array) -> dict | None:
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
    return _write_segment(fs, root, kept_files, columns)


def _merge_segments(fs: Any, root: str, segments: list[dict]) -> dict | None:
    files = []
    columns: dict[str, list[pa.Table]] = {}
    for seg in segments:
        files.append(_read_segment_files(fs, root, seg))
        for col in seg.get("columns", {}):
            table = _read_segment_column(fs, root, seg, col)
            if table is not None:  # ordinals (version 2 segments only) are renumbered
                columns.setdefault(col, []).append(table.select(RECORD_SCHEMA.names))
    if not files:
        return None
    merged_files = pa.concat_tables(files)
    if merged_files.num_rows == 0:
        return None
    merged = {col: pa.concat_tables(ts) for col, ts in columns.items()}
    return _write_segment(fs, root, merged_files, merged)


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
    fs, root = _fs(index_uri, storage_options)
    wanted: dict[str, FileKey] = {}
    for key in files:
        if not isinstance(key, FileKey):
            raise TypeError(f"refresh needs FileKey objects, got {key!r}")
        other = wanted.get(key.path)
        if other is not None and other != key:
            raise ValueError(f"file {key.path} is listed twice with different keys")
        wanted[key.path] = key
    wanted_tokens = {k.token for k in wanted.values()}

    version, segments = _load_pointer(fs, root)
    seg_files = [_read_segment_files(fs, root, seg) for seg in segments]
    indexed_tokens: set[str] = set()
    new_segments: list[dict] = []
    removed = 0
    changed = False
    for seg, table in zip(segments, seg_files, strict=True):
        tokens = _tokens(table)
        keep = pc.is_in(tokens, value_set=pa.array(sorted(wanted_tokens), pa.string()))
        if scope is not None:  # what the listing did not cover stays indexed
            outside = [not scope(p) for p in table.column("path").to_pylist()]
            keep = pc.or_(keep, pa.array(outside, pa.bool_()))
        n_keep = pc.sum(keep.cast(pa.int64())).as_py() or 0
        indexed_tokens.update(
            t for t, k in zip(tokens.to_pylist(), keep.to_pylist(), strict=True) if k
        )
        removed += table.num_rows - n_keep
        if n_keep == table.num_rows:
            new_segments.append(seg)
            continue
        changed = True
        rewritten = _filter_segment(fs, root, seg, table, keep)
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
        new_segments.append(_write_segment(fs, root, files_table, columns))
        changed = True
    if len(new_segments) > MAX_SEGMENTS:
        merged = _merge_segments(fs, root, new_segments)
        new_segments = [merged] if merged is not None else []
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
    write_whole(fs, _pointer_path(root, new_version), pointer)  # the version becomes visible
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
    fs, root = _fs(index_uri, storage_options)
    version, _ = _load_pointer(fs, root)
    segment = _write_segment(
        fs, root, files.cast(FILES_SCHEMA), {c: t.cast(RECORD_SCHEMA) for c, t in columns.items()}
    )
    return _publish(fs, root, version + 1, [segment])


def _collect_garbage(fs: Any, root: str, current: int, grace_seconds: float) -> None:
    """Delete pointers older than the previous version and segments no kept pointer uses."""
    try:
        pointers = _list_pointers(fs, root)
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
            born = _segment_time(seg_id)
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


# --------------------------------------------------------------------------- read


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
    fs, root = _fs(index_uri, storage_options)
    wanted_cols = [columns] if isinstance(columns, str) else list(columns)
    lowered = list(dict.fromkeys(c.lower() for c in wanted_cols))
    _, segments = _load_pointer(fs, root)
    bases = [f"{root}/segments/{seg['id']}" for seg in segments]
    # Files are fetched and decoded in parallel (Parquet decoding releases the GIL). A
    # column's family is chosen over all its segments before any min/max is decoded.
    with ThreadPoolExecutor(max_workers=_READ_WORKERS) as pool:
        file_jobs = [
            pool.submit(_read_table, fs, f"{base}/files.parquet", _FILE_COLUMNS) for base in bases
        ]
        open_jobs = {
            col: [
                pool.submit(_RecordFile.open, fs, base, seg, col)
                for base, seg in zip(bases, segments, strict=True)
            ]
            for col in lowered
        }
        opened = {col: [job.result() for job in jobs] for col, jobs in open_jobs.items()}
        families = {
            col: _most_common(r.families for r in rs if r is not None) for col, rs in opened.items()
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
        indexed = _empty(FILES_SCHEMA).select(list(_FILE_COLUMNS))
    joined = {col: _join_records(families[col], record_tables[col], file_tables) for col in lowered}
    return _pivot(indexed, joined, wanted_cols, files)


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
        recs = by_column.get(col, _empty(RECORD_SCHEMA))
        counts = _family_counts(recs.column("family"))
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
        self.families = _family_counts(self.family)

    @classmethod
    def open(cls, fs: Any, base: str, seg: dict, col: str) -> _RecordFile | None:
        d = seg.get("columns", {}).get(col)
        if d is None:
            return None
        path = f"{base}/{d}/stats.parquet"
        data = _fetch(fs, path)
        try:
            file = pq.ParquetFile(pa.BufferReader(data), read_dictionary=["family"])
            return cls(file, bool(seg.get("file_ordinals")), path)
        except _DAMAGED as exc:
            raise _damaged(path, exc) from None

    def read(self, family: str | None) -> pa.Table:
        """The key (``file_ordinal``, else ``path``), the counts and ``family``'s min/max."""
        names = [ORDINAL if self.ordinals else "path", *_COUNT_COLUMNS]
        if family is not None:
            names += [f"min_{_SUFFIX[family]}", f"max_{_SUFFIX[family]}"]
        try:
            table = self.file.read(columns=names).append_column("family", self.family)
            return _family_values(table, family, self.families)
        except _DAMAGED as exc:
            raise _damaged(self.path, exc) from None


def _family_counts(family: pa.ChunkedArray | pa.Array) -> Counter:
    """How many records have each value family."""
    counts: Counter = Counter()
    chunks = family.chunks if isinstance(family, pa.ChunkedArray) else [family]
    for chunk in chunks:
        for item in pc.value_counts(chunk).to_pylist():
            if item["values"] is not None:
                counts[item["values"]] += item["counts"]
    return counts


def _most_common(counts: Iterable[Counter]) -> str | None:
    """The most common value family over all ``counts`` (ties: alphabetical), or None."""
    total: Counter = Counter()
    for c in counts:
        total.update({k: v for k, v in c.items() if k in _SUFFIX})
    if not total:
        return None
    return max(sorted(total), key=lambda f: total[f])


def _family_values(table: pa.Table, family: str | None, counts: Counter) -> pa.Table:
    """The records' key and counts, and ``family``'s min/max as ``min``/``max``: null where
    a record has another family (or none)."""
    keep = [n for n in table.column_names if n in (ORDINAL, "path", *_COUNT_COLUMNS)]
    values = table.select(keep)
    if family is None:
        return values
    lo, hi = table.column(f"min_{_SUFFIX[family]}"), table.column(f"max_{_SUFFIX[family]}")
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
    names = [*_COUNT_COLUMNS, *(("min", "max") if family is not None else ())]
    seg_rows: list[pa.Array | None] = []
    values: list[pa.Table] = []
    offset = 0
    for table, files in zip(tables, file_tables, strict=True):
        n = files.num_rows
        if table is None:
            seg_rows.append(pa.nulls(n, pa.int64()))
            continue
        if ORDINAL in table.column_names:
            keys, targets = _array(table.column(ORDINAL)).cast(pa.int64()), _arange(n)
        else:
            keys, targets = _array(table.column("path")), _array(files.column("path"))
        rows = None if _aligned(targets, keys) else pc.index_in(targets, value_set=keys)
        if offset:
            rows = pc.add(_arange(n) if rows is None else rows.cast(pa.int64()), offset)
        seg_rows.append(rows)
        values.append(table.select(names))
        offset += table.num_rows
    if not values:
        empty = pa.table({name: pa.array([], pa.int64()) for name in _COUNT_COLUMNS})
        return _Joined(None, empty, pa.nulls(sum(t.num_rows for t in file_tables), pa.int64()))
    combined = pa.concat_tables(values).combine_chunks() if len(values) > 1 else values[0]
    if len(seg_rows) == 1:
        return _Joined(family, combined, seg_rows[0])
    rows = pa.concat_arrays(
        [
            _arange(t.num_rows) if r is None else r.cast(pa.int64())
            for r, t in zip(seg_rows, file_tables, strict=True)
        ]
    )
    return _Joined(family, combined, rows)


def _aligned(values: Any, paths: Any) -> bool:
    """Whether ``values`` and ``paths`` are the same, row by row (one comparison per row)."""
    return (
        len(paths) == len(values)
        and paths.null_count == 0
        and values.null_count == 0
        and pc.all(pc.equal(paths, values)).as_py() is not False
    )


def _positions_in(values: pa.Array, paths: pa.Array) -> pa.Array:
    """For each of ``values``, a position in ``paths`` holding the same value (null where
    none does).

    Records are written in the order of their segment's files, and a snapshot often lists its
    files in the order they were indexed, so the common case is a plain alignment, checked
    cheaply instead of hashing every path.
    """
    return _arange(len(values)) if _aligned(values, paths) else pc.index_in(values, value_set=paths)


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
            paths = _array(files.column("path"))
            sizes = _array(files.column("size")).cast(pa.int64())
            versions = _array(files.column("version"))
        else:
            keys = list(files)
            paths = pa.array([k.path for k in keys], pa.string())
            sizes = pa.array([k.size for k in keys], pa.int64())
            versions = pa.array([k.version for k in keys], pa.string())
        if indexed.num_rows:
            if not _aligned(paths, indexed_paths):
                pos = pc.index_in(paths, value_set=_array(indexed_paths))
            same = pc.fill_null(
                pc.and_(
                    pc.equal(_take(indexed.column("size"), pos), sizes),
                    pc.equal(pc.fill_null(_take(indexed.column("version"), pos), ""), versions),
                ),
                False,
            )
            # a file indexed with another size or version is not indexed (unknown: kept)
            if pos is not None or pc.all(same).as_py() is False:
                found = _arange(len(paths)) if pos is None else pos
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
    return pa.Table.from_arrays([_array(v) for v in out.values()], names=list(out))


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
