"""Updates whose delete and insert fall into different slices, paired before a feed commits.

A feed is computed bucket slice by bucket slice, and each slice pairs the delete and the insert
of one key by one write into ``update_preimage``/``update_postimage``
(:func:`.change_rows.finish`). An update that moves a row to another slice leaves the two
events apart: an ``UPDATE`` or ``MERGE`` of a partition column the key leaves out (the delete
in the old partition, the insert in the new one), or a row Hive's writers put into another
bucket file of an unbucketed table. :func:`pair_across_slices` finds them before the commit:

1. the unpaired deletes of every slice, as ``(key, write)``;
2. every change of those keys and writes, in any slice;
3. a key and write with exactly one delete and one insert in the whole feed (the rule a slice
   applies to its own changes) is an update: the two files holding them are written again with
   the two rows relabelled, whole (``acid.storage.write_whole``: a hidden temporary renamed
   into place, or one PUT), under the next free file numbers of their slices. The originals
   stay until the commit removes them as unreferenced, so a retried commit pairs the same way.

Nothing else changes: values, identities, ``_commit_write_id`` and ``_change_ordinal`` stay,
so the feed applies as before. Memory: the keys and writes of the feed's unpaired deletes, the
changes of those keys, and one file at a time. A feed none of whose slices read a delete
event (and diffed none) holds no delete: nothing is read. Each file a slice writes records in
its footer the writes of its unpaired deletes and inserts (:func:`change_writes_metadata`):
when no write has an unpaired delete in one slice and an unpaired insert in another, nothing
can pair, and the footers are all that is read. A file whose footer statistics show no delete
is not read for step 1.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from ..acid.storage import write_whole
from ..output.parquet_files import count_values, value_counts_metadata
from ..output.records import BucketResult, OutputFile, data_file_name
from .change_rows import CHANGE_TYPE, DELETE, INSERT, UPDATE_POSTIMAGE, UPDATE_PREIMAGE

_TYPE = CHANGE_TYPE
_COMMIT = "_commit_write_id"
_FILE = "__file"
_ROW = "__row"
#: The footer key of a feed file's writes of unpaired deletes and inserts.
CHANGE_WRITES_KEY = b"airflow_acid.change_writes"


def change_writes_metadata(rows: pa.Table) -> dict[bytes, bytes]:
    """The footer metadata recording the writes of a slice's unpaired deletes and inserts.

    :param rows: the slice's finished change rows (``_change_type``, ``_commit_write_id``).
    """
    writes = {}
    for name, kind in (("delete", DELETE), ("insert", INSERT)):
        commits = pc.filter(rows[_COMMIT], pc.equal(rows[_TYPE], kind))
        writes[name] = sorted(w for w in pc.unique(commits).to_pylist() if w is not None)
    return {CHANGE_WRITES_KEY: json.dumps(writes).encode()}


def file_footer(
    fs: AbstractFileSystem, path: str, footers: dict[str, pq.FileMetaData] | None = None
) -> pq.FileMetaData:
    """A feed file's Parquet footer, read once for all its readers given the same ``footers``.

    :param fs: the feed's output filesystem.
    :param path: the file's full path.
    :param footers: the footers read so far, by path (filled here); None reads it anyway.
    """
    if footers is not None and path in footers:
        return footers[path]
    with fs.open(path, "rb") as handle:
        metadata = pq.ParquetFile(handle).metadata
    if footers is not None:
        footers[path] = metadata
    return metadata


def _change_writes(metadata: pq.FileMetaData) -> tuple[set[int], set[int]] | None:
    """The writes of a file's unpaired deletes and inserts (None: its footer does not say)."""
    stored = (metadata.metadata or {}).get(CHANGE_WRITES_KEY)
    if stored is None:
        return None
    writes = json.loads(stored)
    return set(writes["delete"]), set(writes["insert"])


def _may_pair(footers: Sequence[pq.FileMetaData], owner: Sequence[tuple[int, int]]) -> bool:
    """Whether some write has an unpaired delete in one slice and an unpaired insert in
    another, by the files' footers (True when a footer does not say)."""
    deletes: dict[int, set[int]] = {}
    inserts: dict[int, set[int]] = {}
    for metadata, (result, _) in zip(footers, owner, strict=True):
        writes = _change_writes(metadata)
        if writes is None:
            return True
        deletes.setdefault(result, set()).update(writes[0])
        inserts.setdefault(result, set()).update(writes[1])
    for result, deleted in deletes.items():
        for other, inserted in inserts.items():
            if other != result and deleted & inserted:
                return True
    return False


def _read(fs: AbstractFileSystem, root: str, file: OutputFile, columns: Sequence[str]) -> pa.Table:
    with fs.open(posixpath.join(root, file.path), "rb") as handle:
        return pq.read_table(handle, columns=list(columns))


def _may_hold_deletes(metadata: pq.FileMetaData) -> bool:
    """False when the footer's statistics show no ``delete`` in the file."""
    column = metadata.schema.names.index(_TYPE)
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(column).statistics
        if stats is None or not stats.has_min_max or stats.min <= DELETE <= stats.max:
            return True
    return False


def _unpaired_deletes(
    fs: AbstractFileSystem,
    root: str,
    files: Sequence[OutputFile],
    footers: Sequence[pq.FileMetaData],
    key: Sequence[str],
) -> pa.Table:
    group = [*key, _COMMIT]
    parts = []
    for file, metadata in zip(files, footers, strict=True):
        if not _may_hold_deletes(metadata):
            continue
        table = _read(fs, root, file, [*group, _TYPE])
        keep = pc.equal(table[_TYPE], DELETE)
        for name in group:
            keep = pc.and_(keep, pc.is_valid(table[name]))
        parts.append(table.filter(keep).select(group))
    if not parts:
        return pa.table({})
    found = pa.concat_tables(parts)
    return found.group_by(group).aggregate([]) if found.num_rows else found


def _changes_of(
    fs: AbstractFileSystem,
    root: str,
    files: Sequence[OutputFile],
    key: Sequence[str],
    wanted: pa.Table,
) -> pa.Table:
    """Every change of the wanted keys and writes, with its file's index and row position."""
    group = [*key, _COMMIT]
    parts = []
    for index, file in enumerate(files):
        table = _read(fs, root, file, [*group, _TYPE])
        table = table.append_column(_ROW, pa.array(range(table.num_rows), pa.int64()))
        table = table.append_column(_FILE, pa.array([index] * table.num_rows, pa.int64()))
        parts.append(table.join(wanted, keys=group, join_type="inner"))
    return pa.concat_tables(parts)


def _pairs(changes: pa.Table, key: Sequence[str]) -> pa.Table:
    """The rows of the keys and writes changed exactly twice, by one delete and one insert."""
    group = [*key, _COMMIT]
    unpaired = pc.is_in(changes[_TYPE], value_set=pa.array([DELETE, INSERT]))
    kinds = changes.append_column("__is_delete", pc.cast(pc.equal(changes[_TYPE], DELETE), "int8"))
    kinds = kinds.append_column("__is_unpaired", pc.cast(unpaired, "int8"))
    counts = kinds.group_by(group).aggregate(
        [("__is_delete", "sum"), ("__is_unpaired", "sum"), (_TYPE, "count")]
    )
    chosen = counts.filter(
        pc.and_(
            pc.and_(pc.equal(counts[f"{_TYPE}_count"], 2), pc.equal(counts["__is_delete_sum"], 1)),
            pc.equal(counts["__is_unpaired_sum"], 2),
        )
    ).select(group)
    return changes.join(chosen, keys=group, join_type="inner").select([_FILE, _ROW, _TYPE])


def _rewrite(
    fs: AbstractFileSystem,
    root: str,
    file: OutputFile,
    rows: Sequence[int],
    number: int,
    result: BucketResult,
    settings: Mapping[str, Any],
) -> OutputFile:
    with fs.open(posixpath.join(root, file.path), "rb") as handle:
        table = pq.read_table(handle)
    positions = pa.array(range(table.num_rows), pa.int64())
    relabelled = pc.if_else(
        pc.is_in(positions, value_set=pa.array(rows, pa.int64())),
        pc.if_else(pc.equal(table[_TYPE], DELETE), UPDATE_PREIMAGE, UPDATE_POSTIMAGE),
        table[_TYPE],
    )
    index = table.schema.get_field_index(_TYPE)
    table = table.set_column(index, table.schema.field(index), relabelled)  # not null, as written
    counted = value_counts_metadata(_TYPE, count_values(relabelled))
    metadata = {**(table.schema.metadata or {}), **counted}
    table = table.replace_schema_metadata(metadata)  # the footer counts them, as written
    name = data_file_name(result.snapshot_id, result.bucket, number)
    relative = posixpath.join(posixpath.dirname(file.path), name)
    compression = settings.get("compression", "zstd")
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        compression=None if compression == "none" else compression,
        compression_level=settings.get("compression_level"),
        row_group_size=settings.get("row_group_rows", 262_144),
        version="2.6",
        write_statistics=True,
    )
    data = sink.getvalue().to_pybytes()
    write_whole(fs, posixpath.join(root, relative), data)  # never half
    return OutputFile(relative, table.num_rows, len(data))  # the commit checks it on storage


def pair_across_slices(
    fs: AbstractFileSystem,
    root: str,
    key: Sequence[str],
    results: Sequence[BucketResult],
    settings: Mapping[str, Any],
    footers: dict[str, pq.FileMetaData] | None = None,
) -> list[BucketResult]:
    """The slices' results with the updates that crossed slices paired (see the module).

    :param fs: the feed's output filesystem.
    :param root: the feed's output folder.
    :param key: the feed's key columns (none: nothing is paired).
    :param results: the computed slices of one feed, not committed yet.
    :param settings: the feed plan's settings (the Parquet codec).
    :param footers: the files' footers read so far, by path (see :func:`file_footer`).
    """
    results = list(results)
    if not key or len(results) < 2:
        return results
    if not settings["changes"]["identity_diff_slices"] and not any(r.delete_keys for r in results):
        return results  # no slice read a delete event: the feed holds no delete to pair
    files = [f for r in results for f in r.files]
    owner = [(i, j) for i, r in enumerate(results) for j in range(len(r.files))]
    if not files:
        return results
    found = [file_footer(fs, posixpath.join(root, f.path), footers) for f in files]
    if not _may_pair(found, owner):
        return results
    wanted = _unpaired_deletes(fs, root, files, found, key)
    if not wanted.num_rows:
        return results
    pairs = _pairs(_changes_of(fs, root, files, key, wanted), key)
    if not pairs.num_rows:
        return results
    by_file: dict[int, list[int]] = {}
    for index, row in zip(pairs[_FILE].to_pylist(), pairs[_ROW].to_pylist(), strict=True):
        by_file.setdefault(index, []).append(row)
    new_files = [list(r.files) for r in results]
    next_number = [len(r.files) for r in results]
    for index in sorted(by_file):
        i, j = owner[index]
        new_files[i][j] = _rewrite(
            fs, root, files[index], by_file[index], next_number[i], results[i], settings
        )
        next_number[i] += 1
    return [
        replace(r, files=tuple(f)) if tuple(f) != r.files else r
        for r, f in zip(results, new_files, strict=True)
    ]


__all__ = ["file_footer", "pair_across_slices"]
