"""Writing one bucket's rows of a snapshot as Parquet data files, rolling over at a size.

Files are named after their snapshot and bucket (``records.data_file_name``) in the bucket's
partition folder; the commit protocol (:mod:`.protocol`) lists them in the manifest.

No file is ever visible half-written. On a local filesystem each file is written under a hidden
temporary name in its folder (``.part-....parquet.<hex>.tmp``, see :mod:`..acid.storage`),
synced and renamed into place once its footer is written; pyarrow writes it through its own
file (a Python handle holds the temporary's lock) and the disk starts writing each row group
at once (:func:`start_writeback`). On HDFS the file is written under the same hidden name
and renamed over its name once closed (WebHDFS writes a file in place as it goes, so a reader
or a killed writer would otherwise leave half of it at its name). On object stores the file is one
upload (a PUT, or a multipart upload for files past the block size) that completes only when
the file is closed; after an error :meth:`BucketFileWriter.abort` discards it instead. A
killed process never completes an upload: the object does not appear.

A re-run of the same snapshot writes the same bytes under the same names (the output is
deterministic), so it replaces a file of an earlier attempt atomically instead of deleting it
first: a file a committed manifest lists is never missing, even while a late duplicate of the
run writes it again.
"""

from __future__ import annotations

import ctypes
import json
import os
import posixpath
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem
from fsspec.spec import AbstractBufferedFile

from ..acid.hive_types import hive_field
from ..acid.storage import (
    is_object_store,
    open_temporary,
    place_whole,
    remove_temporaries,
    renames_atomically,
    renames_whole,
    temporary_path,
)
from ..acid.table_columns import TableColumns
from .background_uploads import BackgroundUpload
from .records import OutputFile, data_file_name

#: Names of the identity columns written with ``include_identity``.
#: The part size of an output file written to HDFS (or another filesystem of blocks): a file
#: larger than this is sent in parts of this size while it is written, so no more than one part
#: of it is held in memory.
PART_BYTES = 16 * 1024 * 1024
#: The part size of an output file written to an object store: S3's smallest. Its parts are
#: sent by the file's upload thread while the next rows are encoded (:mod:`.background_uploads`),
#: holding at most about three parts in memory (the part filling, the one being sent, and what
#: waits to be handed on), where one 16 MiB part and its copy held 14 MB files whole until
#: their one PUT at close.
UPLOAD_PART_BYTES = 5 * 1024 * 1024
#: The footer key under which a file counts the values of one column
#: (``BucketFileWriter.counted``): ``{"column": name, "counts": {value: rows}}``.
VALUE_COUNTS_KEY = b"airflow_acid.value_counts"


IDENTITY_COLUMNS = (
    ("_acid_original_transaction", pa.int64()),
    ("_acid_bucket", pa.int32()),
    ("_acid_row_id", pa.int64()),
    ("_acid_current_transaction", pa.int64()),
)


def output_schema(settings: Mapping[str, Any]) -> pa.Schema:
    """The Arrow schema of a snapshot's Parquet files: table columns, partition columns, then
    (with ``include_identity``) the ``_acid_*`` identity columns."""
    unit = settings["timestamp_unit"]
    fields = TableColumns.from_dict(settings["columns"]).arrow_fields(unit)
    fields += [hive_field(c["name"], c["hive_type"], unit) for c in settings["partition_columns"]]
    if settings["include_identity"]:
        fields += [pa.field(name, t, nullable=False) for name, t in IDENTITY_COLUMNS]
    return pa.schema(fields)


@dataclass
class BucketFileWriter:
    """Writes one bucket's rows to ``<stem>-NNNN.parquet`` files, rolling over at a size."""

    fs: AbstractFileSystem
    out_root: str
    folder: str  # relative to out_root
    snapshot_id: str
    bucket: int
    schema: pa.Schema
    settings: Mapping[str, Any]
    files: list[OutputFile] = field(default_factory=list)
    _buffer: list[pa.Table] = field(default_factory=list)
    _buffered: int = 0
    _handle: Any = None
    _lock: Any = None  # a local temporary's Python file, holding its flock until closed
    _writer: pq.ParquetWriter | None = None
    _path: str = ""
    _temporary: str | None = None  # where the open file is written, when renamed at the end
    _rows: int = 0
    #: A text column whose values each file counts in its footer (:data:`VALUE_COUNTS_KEY`,
    #: :func:`footer_value_counts`), or None.
    counted: str | None = None
    #: Columns dictionary-encoded whatever their type: few distinct values by construction
    #: (besides the text columns :func:`dictionary_columns` picks).
    dictionary: tuple[str, ...] = ()
    _counts: dict[str, int] = field(default_factory=dict)

    def _absolute(self, relative: str) -> str:
        return posixpath.join(self.out_root, relative) if relative else self.out_root

    @classmethod
    def for_slice(
        cls,
        fs: AbstractFileSystem,
        out_root: str,
        partition_path: str,
        snapshot_id: str,
        bucket: int,
        schema: pa.Schema,
        settings: Mapping[str, Any],
        counted: str | None = None,
        dictionary: tuple[str, ...] = (),
    ) -> BucketFileWriter:
        """The writer of one slice's files, after removing what a killed earlier attempt at
        the same slice left (:meth:`remove_leftovers`).

        :param fs: the output filesystem.
        :param out_root: the output folder.
        :param partition_path: the slice's partition folder, relative to ``out_root``.
        :param snapshot_id: the snapshot the files are part of.
        :param bucket: the slice's bucket.
        :param schema: the files' Arrow schema.
        :param settings: the plan's settings (row groups, file size, compression).
        :param counted: a text column (not null) whose values each file counts in its footer
            (:func:`footer_value_counts` reads them), or None.
        :param dictionary: columns to dictionary-encode whatever their type, for few distinct
            values by construction (a feed's write ids: plain-encoded and compressed, 10,000
            of them cost twice the time to write).
        """
        writer = cls(
            fs, out_root, partition_path, snapshot_id, bucket, schema, settings,
            counted=counted, dictionary=dictionary,
        )  # fmt: skip
        writer.remove_leftovers()
        return writer

    def remove_leftovers(self) -> list[str]:
        """Delete the temporaries of this bucket's files that an earlier, killed attempt at the
        same snapshot left (complete files of it are replaced by the same bytes, or removed by
        the commit when no result lists them); returns their paths."""
        if not renames_whole(self.fs):  # written in place (object stores): no temporaries
            return []
        prefix = f"part-{self.snapshot_id}-{self.bucket:05d}-"
        return remove_temporaries(
            self.fs, self._absolute(self.folder), lambda name: name.startswith(prefix)
        )

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self._buffer.append(table)
        self._buffered += table.num_rows
        if self._buffered >= self.settings["row_group_rows"]:
            self._flush()

    def _flush(self, last: bool = False) -> None:
        if not self._buffered:
            return
        table = pa.concat_tables(self._buffer)
        self._buffer, self._buffered = [], 0
        if self._writer is None:
            self._open(table)
        assert self._writer is not None
        self._writer.write_table(table, row_group_size=self.settings["row_group_rows"])
        self._rows += table.num_rows
        if self.counted is not None:
            for value, rows in count_values(table[self.counted]).items():
                self._counts[value] = self._counts.get(value, 0) + rows
        if self._handle.tell() >= self.settings["target_file_size"]:
            self._close_file()
        elif self._lock is not None and not last:  # the last goes with the fsync
            start_writeback(self._handle.fileno())

    def _open(self, first: pa.Table) -> None:
        name = data_file_name(self.snapshot_id, self.bucket, len(self.files))
        self._path = posixpath.join(self.folder, name) if self.folder else name
        absolute = self._absolute(self._path)
        if renames_atomically(self.fs):
            self.fs.makedirs(posixpath.dirname(absolute), exist_ok=True)
            self._temporary = temporary_path(absolute)
            self._lock = open_temporary(self._temporary)  # closed in _close_file
            try:
                # written by pyarrow's own file: no Python call (nor the GIL) per write
                self._handle = pa.OSFile(self._temporary, "wb")
            except BaseException:
                self._lock.close()
                os.unlink(self._temporary)
                self._lock = self._temporary = None
                raise
        else:
            # HDFS: under a hidden temporary name, renamed over the name once closed
            self._temporary = temporary_path(absolute) if renames_whole(self.fs) else None
            uploaded = is_object_store(self.fs)
            if not uploaded:
                self.fs.makedirs(posixpath.dirname(absolute), exist_ok=True)
            # buffered in parts (or the filesystem's smaller block size): a larger file is a
            # multipart upload, its parts sent as it is written, completed (visible) only when
            # it is closed
            most = UPLOAD_PART_BYTES if uploaded else PART_BYTES
            part = min(most, getattr(self.fs, "default_block_size", None) or most)
            self._handle = self.fs.open(self._temporary or absolute, "wb", block_size=part)
            if uploaded:  # its parts sent while the next rows are encoded
                self._handle = BackgroundUpload(self._handle)
        compression = self.settings["compression"]
        self._writer = pq.ParquetWriter(
            self._handle,
            self.schema,
            compression=None if compression == "none" else compression,
            compression_level=self.settings["compression_level"],
            use_dictionary=dictionary_columns(first) + list(self.dictionary),
            version="2.6",
            write_statistics=True,
        )
        self._rows = 0

    def _close_file(self) -> None:
        assert self._writer is not None
        if self.counted is not None:
            self._writer.add_key_value_metadata(value_counts_metadata(self.counted, self._counts))
            self._counts = {}
        self._writer.close()
        size = self._handle.tell()  # what was written (the commit checks it is on storage)
        absolute = self._absolute(self._path)
        if self._lock is not None:  # a local temporary
            os.fsync(self._handle.fileno())
            os.replace(self._temporary, absolute)  # the complete file appears at once
            self._handle.close()
            self._lock.close()  # (drops its lock)
            self._temporary = self._lock = None
        elif self._temporary is not None:  # HDFS
            self._handle.close()
            place_whole(self.fs, self._temporary, absolute)
            self._temporary = None
        else:  # completes the upload (in the background inside uploads_in_background)
            self._handle.close()
        self.files.append(OutputFile(self._path, self._rows, size))
        self._writer, self._handle = None, None

    def close(self) -> tuple[OutputFile, ...]:
        self._flush(last=True)
        if self._writer is not None:
            self._close_file()
        return tuple(self.files)

    def abort(self) -> None:
        """Drop the file being written, after another error: none of it is completed on
        storage. An upload in parts (s3fs and other buffered filesystems) is discarded, which
        aborts an S3 multipart upload instead of completing it; a local file's temporary is
        closed and removed (its name never held it); an in-memory file is closed and removed.
        Files already closed stay: the commit lists or removes them."""
        writer, handle, self._writer, self._handle = self._writer, self._handle, None, None
        temporary, self._temporary = self._temporary, None
        lock, self._lock = self._lock, None
        if handle is None:
            return
        try:
            if writer is not None:  # (None: the Parquet writer itself could not be made)
                writer.close()  # only into the handle's buffer, or a part the discard drops
        except Exception:  # noqa: BLE001 - cleaning up after another error
            pass
        try:
            if lock is not None:
                os.unlink(temporary)
                handle.close()
                lock.close()
            elif isinstance(handle, BackgroundUpload):
                handle.discard()
            elif isinstance(handle, AbstractBufferedFile):
                handle.discard()
                handle.closed = True  # never flushed: closing would complete the upload
            else:
                handle.close()
                self.fs.rm_file(self._absolute(self._path))
        except Exception:  # noqa: BLE001 - cleaning up after another error
            pass


def _sync_file_range() -> Any:
    """Linux's ``sync_file_range`` from the C library (None elsewhere, or if it is missing)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_SYNC_FILE_RANGE = _sync_file_range()
_SYNC_FILE_RANGE_WRITE = 2  # start writing the dirty pages out; do not wait for them


def start_writeback(fd: int) -> None:
    """Have the kernel start writing a local file's written pages to disk now, without waiting
    (``sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)`` on Linux; nothing elsewhere).

    Called after each row group of a file that is fsynced once complete: the disk writes the
    earlier row groups while the next ones are computed, so the ``fsync`` before the rename
    waits for the last one only (about 14 ms less per 20 MiB file here). Only a hint: the
    ``fsync`` alone is what makes the file durable, and a failure here is ignored.
    """
    if _SYNC_FILE_RANGE is not None:
        _SYNC_FILE_RANGE(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)


def count_values(column: pa.Array | pa.ChunkedArray) -> dict[Any, int]:
    """The rows of each value of ``column``.

    :param column: the values counted.
    """
    return {found["values"]: found["counts"] for found in pc.value_counts(column).to_pylist()}


def value_counts_metadata(column: str, counts: Mapping[str, int]) -> dict[bytes, bytes]:
    """The footer metadata of a file counting the values of ``column``: the file's rows of each
    value (:data:`VALUE_COUNTS_KEY`).

    :param column: the column counted.
    :param counts: the rows of each of its values in the file.
    """
    return {VALUE_COUNTS_KEY: json.dumps({"column": column, "counts": dict(counts)}).encode()}


def footer_value_counts(metadata: pq.FileMetaData, column: str) -> dict[str, int] | None:
    """The rows of each value of ``column`` a file's footer counts (None: it does not count
    that column).

    :param metadata: the file's footer.
    :param column: the column.
    """
    stored = (metadata.metadata or {}).get(VALUE_COUNTS_KEY)
    if stored is None:
        return None
    found = json.loads(stored)
    return dict(found["counts"]) if found.get("column") == column else None


#: Rows a column's first look counts (:func:`dictionary_columns`).
PROBE_ROWS = 1_024


def dictionary_columns(table: pa.Table, max_ratio: float = 0.5, sample: int = 16_384) -> list[str]:
    """Top-level text and binary columns worth dictionary encoding: those whose distinct values
    are at most ``max_ratio`` of the first ``sample`` rows of ``table`` (the first row group of
    a file).

    Dictionary-encoding a column of mostly distinct values costs more time than anything else in
    writing Parquet and makes the file bigger; for repetitive text it is the best encoding.

    Counting a sample's distinct values costs about a millisecond for 10,000 texts, which a
    small file (a change feed's) notices. So a larger sample's column is first looked at in its
    first :data:`PROBE_ROWS` rows: nearly all of them distinct (99%) tells a column that more
    rows would not make repetitive (even 10,000 values drawn evenly, about the most a column
    under ``max_ratio`` of 16,384 rows can hold, show 95% distinct in 1,024 rows); a sixteenth
    or fewer distinct, one that stays under ``max_ratio`` unless its later rows differ in kind
    from its first ones. Only columns between the two are counted over the whole sample.

    :param table: the rows (their first ``sample`` are looked at).
    :param max_ratio: the most distinct values, over the rows looked at, of a column chosen.
    :param sample: the most rows looked at.
    """
    chosen = []
    table = table.slice(0, sample)
    probe = PROBE_ROWS if table.num_rows >= 4 * PROBE_ROWS else 0
    for column_field, column in zip(table.schema, table.columns, strict=True):
        kind = column_field.type
        if not (
            pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
        ):
            continue
        if probe:
            seen = pc.count_distinct(column.slice(0, probe), mode="all").as_py()
            if seen >= 0.99 * probe:
                continue
            if seen <= probe / 16:
                chosen.append(column_field.name)
                continue
        if pc.count_distinct(column, mode="all").as_py() <= max_ratio * table.num_rows:
            chosen.append(column_field.name)
    return chosen
