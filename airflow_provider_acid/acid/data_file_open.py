"""Opening one data file of a Hive 3 table: its format, reader, row count and column layout.

A file is an ACID event file when its top-level columns are ``operation, originalTransaction,
bucket, rowId, currentTransaction, row`` (matched case-insensitively: query-based compaction
writes lower case), else a plain file. An ACID file is accepted as Hive 3's when its footer says
``hive.acid.version`` 2 or more, when it sits in a folder holding ``_orc_acid_version``, or,
lacking both (Hive 3.1's query-based compaction, IMPALA-10115), when the ``bucket`` column's
minimum and maximum in the footer are ``BucketCodec`` V1 values (bits 31-29 = 001, Hive's
``BucketCodec.determineVersion``). Files with plain bucket ids (Hive 2) are refused.

Stripes are read through fsspec file objects (a local ORC file's through pyarrow's own file,
which reads without the GIL); see :mod:`.rows` for reading the rows of a bucket slice.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import IO, Any

import pyarrow as pa
import pyarrow.orc as pa_orc
import pyarrow.parquet as pq
import pyorc
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from .hive_types import HiveType
from .orc_declared_types import read_footer
from .orc_prefix import prefix_view
from .orc_prefix_file import prefix_file
from .orc_stripe_stats import (
    StripeStatistics,
    Unreadable,
    integer_bounds,
    read_stripe_statistics,
)
from .orc_timestamps import TRINO_WRITER, read_rows, read_stripe
from .ranged_reads import open_data_file, open_data_files
from .read_view import DataFile

#: Top-level columns of an ACID event file, in order, as Hive 3 names them.
ACID_COLUMNS = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row")
_ACID_LOWER = tuple(c.lower() for c in ACID_COLUMNS)
_VERSION_KEY = "hive.acid.version"
#: ORC column id of ``bucket`` in an ACID event file (0 is the root struct).
_BUCKET_COLUMN_ID = 3
#: ORC column ids of ``operation`` .. ``currentTransaction`` in an ACID event file.
_IDENTITY_COLUMN_IDS = (1, 2, 3, 4, 5)


class AcidFormatError(ValueError):
    """A file that cannot be read as Hive 3 table data (the message names the file)."""


#: What the ORC and Parquet readers raise on a damaged file (pyorc raises RuntimeError on a
#: bad compressed stream and IndexError on a footer with fewer columns than its type).
FORMAT_ERRORS = (
    pa.ArrowException,
    OSError,
    ValueError,
    RuntimeError,
    IndexError,
    KeyError,
    EOFError,
    pyorc.ParseError,
    pyorc.ORCError,
)


class FileFormat(str, Enum):
    """A data file's format, told by its first bytes."""

    ORC = "orc"
    PARQUET = "parquet"


def encode_bucket_v1(bucket_id: int, statement_id: int = 0) -> int:
    """Hive's ``BucketCodec`` V1 value of a bucket: version 1 in bits 31-29, bucket in 27-16.

    :param bucket_id: the bucket number (from the file name).
    :param statement_id: the statement id within the write (bits 11-0).
    """
    return (1 << 29) | (bucket_id << 16) | statement_id


def is_acid_names(lowered: Sequence[str]) -> bool:
    """Whether a file's top-level column names are an ACID event file's.

    :param lowered: the file's top-level column names, in lower case.
    """
    return tuple(lowered) == _ACID_LOWER


@dataclass(frozen=True)
class StripeIdentity:
    """What one stripe of an ACID ORC file holds by its stripe statistics: its row count and
    the minimum and maximum of ``operation``, ``originalTransaction``, ``bucket``, ``rowId``
    and ``currentTransaction`` (none of them null)."""

    rows: int
    operation: tuple[int, int]
    original_transaction: tuple[int, int]
    bucket: tuple[int, int]
    row_id: tuple[int, int]
    current_transaction: tuple[int, int]


def _stripe_identity(stripe: StripeStatistics) -> StripeIdentity | None:
    """A stripe's :class:`StripeIdentity`; None when a statistic is missing or shows a null
    (the stripe is then read, and checked, as any other)."""
    bounds = integer_bounds(stripe, _IDENTITY_COLUMN_IDS)
    return None if bounds is None else StripeIdentity(stripe.rows, *bounds)


@dataclass
class OpenFile:
    """One opened data file: its reader, row count and the layout of its columns."""

    data_file: DataFile
    handle: IO[bytes]
    format: FileFormat
    rows: int
    schema: pa.Schema
    orc: pa_orc.ORCFile | None = None
    parquet: pq.ParquetFile | None = None
    #: For ACID files: the file's own names of the six top-level columns.
    acid_names: tuple[str, ...] | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    #: The Hive types of the row's columns as the file declares them (char/varchar kept); for
    #: an ORC file, read from its footer when first asked (:attr:`row_hive_types`).
    declared_types: tuple[HiveType, ...] | None = None
    #: For ACID ORC files: the ``bucket`` column's minimum and maximum from the footer (read
    #: with :attr:`declared_types`).
    footer_bucket_range: tuple[int, int] | None = None
    #: Where the file was opened from (a stripe with timestamps outside pyarrow's nanosecond
    #: range opens it again for pyorc, :mod:`.orc_timestamps`).
    fs: AbstractFileSystem | None = None
    _stripe_identities: list[StripeIdentity | None] | None = field(default=None, repr=False)

    @property
    def path(self) -> str:
        return self.data_file.path

    @property
    def row_hive_types(self) -> tuple[HiveType, ...]:
        """The Hive types of the row's columns as the file declares them (char/varchar kept):
        an ORC file's footer is read for them (:mod:`.orc_declared_types`) when first asked,
        so a file whose columns are not mapped (a delete delta's) is not read twice."""
        if self.declared_types is None:
            self._read_declared_types()
        assert self.declared_types is not None
        return self.declared_types

    @property
    def bucket_range(self) -> tuple[int, int] | None:
        """For an ACID ORC file: the ``bucket`` column's minimum and maximum in its footer."""
        if self.declared_types is None:
            self._read_declared_types()
        return self.footer_bucket_range

    def _read_declared_types(self) -> None:
        try:
            with self._reopen() as handle:
                self.declared_types, self.footer_bucket_range = _declared(handle)
        except FORMAT_ERRORS as exc:
            raise AcidFormatError(
                f"{self.path}: not a readable ORC or Parquet file ({exc})"
            ) from None

    @property
    def is_acid(self) -> bool:
        return self.acid_names is not None

    @property
    def row_type(self) -> pa.StructType | pa.Schema:
        if self.acid_names is not None:
            row = self.schema.field(self.acid_names[5]).type
            if not pa.types.is_struct(row):
                raise AcidFormatError(f"{self.path}: the ACID 'row' column is {row}, not a struct")
            return row
        return self.schema

    def stripes(
        self, columns: list[str] | None, batch_rows: int, timestamp_unit: str = "us"
    ) -> Iterator[pa.RecordBatch]:
        """The file's rows in record batches of at most ``batch_rows`` (one stripe at a time);
        a damaged stripe or page is an :class:`AcidFormatError` naming the file. Timestamps
        come as ``ns`` or, in a stripe holding some outside that range, ``timestamp_unit``.

        :param columns: the top-level columns to read; None reads all.
        :param batch_rows: the most rows in one batch.
        :param timestamp_unit: the unit of a stripe's timestamps outside the ``ns`` range.
        """
        try:
            if self.parquet is not None:
                yield from self.parquet.iter_batches(batch_size=batch_rows, columns=columns)
                return
        except FORMAT_ERRORS as exc:
            raise AcidFormatError(f"{self.path}: unreadable data ({exc})") from None
        for index in range(self.nstripes):
            stripe = self.stripe(index, columns, timestamp_unit)
            for start in range(0, stripe.num_rows, batch_rows):
                yield stripe.slice(start, batch_rows)

    @property
    def nstripes(self) -> int:
        """The number of stripes of an ORC file."""
        assert self.orc is not None
        return self.orc.nstripes

    def stripe(
        self, index: int, columns: list[str] | None, timestamp_unit: str = "us"
    ) -> pa.RecordBatch:
        """Stripe ``index`` of an ORC file, whole, as :meth:`stripes` reads it (a damaged
        stripe is an :class:`AcidFormatError` naming the file).

        :param index: the stripe's number.
        :param columns: the top-level columns to read; None reads all.
        :param timestamp_unit: the unit of the stripe's timestamps outside the ``ns`` range.
        """
        assert self.orc is not None
        try:
            return read_stripe(
                self.orc, self._reopen, index, columns, timestamp_unit, self.trino_written
            )
        except FORMAT_ERRORS as exc:
            raise AcidFormatError(f"{self.path}: unreadable data ({exc})") from None

    def stripe_prefix(
        self, index: int, columns: list[str], rows: int, timestamp_unit: str = "us"
    ) -> pa.RecordBatch | None:
        """The first ``rows`` rows of stripe ``index`` of an ORC file, decoded by pyarrow
        without the rest of the stripe (:mod:`.orc_prefix`), as :meth:`stripe` reads them;
        None when the file's tail is not one that module rewrites.

        :param index: the stripe's number.
        :param columns: the top-level columns to read.
        :param rows: how many of the stripe's first rows.
        :param timestamp_unit: the unit of the timestamps outside the ``ns`` range.
        """
        assert self.orc is not None
        batch = self._prefix_file_rows(index, columns, rows, timestamp_unit)
        if batch is None:
            try:
                opener = prefix_view(self._reopen, self.orc, index, rows)
                if opener is None:
                    return None
                with opener() as view:
                    batch = read_stripe(
                        pa_orc.ORCFile(view), opener, 0, columns, timestamp_unit, self.trino_written
                    )
            except FORMAT_ERRORS as exc:
                raise AcidFormatError(f"{self.path}: unreadable data ({exc})") from None
        if batch.num_rows != rows:
            raise AcidFormatError(
                f"{self.path}: stripe {index} gave {batch.num_rows} of {rows} rows"
            )
        return batch

    def _prefix_file_rows(
        self, index: int, columns: list[str], rows: int, timestamp_unit: str
    ) -> pa.RecordBatch | None:
        """The first ``rows`` rows of stripe ``index`` read from a file of their streams'
        first bytes only (:mod:`.orc_prefix_file`), the bytes read growing until they hold the
        rows; None when that file is not made, or would inflate past the first compression
        blocks (the caller then reads a view of the file's own stripe)."""
        assert self.orc is not None
        try:
            prefix = prefix_file(self._reopen, self.orc, index, rows, columns)
        except FORMAT_ERRORS:
            return None
        while prefix is not None:
            try:
                opener = prefix.opener()
                with opener() as view:
                    batch = read_stripe(
                        pa_orc.ORCFile(view), opener, 0, columns, timestamp_unit, self.trino_written
                    )
            except FORMAT_ERRORS:
                if not prefix.grow():
                    return None
                continue
            return batch if batch.num_rows == rows else None
        return None

    def rows_of(
        self, columns: Sequence[str], first: int, count: int, timestamp_unit: str = "us"
    ) -> list[pa.Array]:
        """Rows ``first`` to ``first + count - 1`` (of the whole file) of top-level ``columns``
        (in the file's order) of an ORC file, by seeking (:func:`.orc_timestamps.read_rows`:
        for a short span of a big stripe); timestamps in ``timestamp_unit``.

        :param columns: the top-level columns.
        :param first: the first row's number in the file.
        :param count: how many rows.
        :param timestamp_unit: the unit of the timestamps read.
        """
        try:
            return read_rows(
                self._reopen, [self.schema.field(c) for c in columns], first, count,
                timestamp_unit, self.trino_written,
            )  # fmt: skip
        except FORMAT_ERRORS as exc:
            raise AcidFormatError(f"{self.path}: unreadable data ({exc})") from None

    def stripe_identities(self) -> list[StripeIdentity | None]:
        """Each stripe's :class:`StripeIdentity` (None for a stripe without usable
        statistics, and for every stripe of a file whose statistics cannot be read), from the
        ORC file's stripe statistics (:mod:`.orc_stripe_stats`): no stripe is decoded. Read
        once per opened file.
        """
        assert self.orc is not None
        if self._stripe_identities is None:
            orc = self.orc
            found: list[StripeIdentity | None] = [None] * orc.nstripes
            try:
                with self._reopen() as handle:
                    stripes = read_stripe_statistics(handle, orc, max(_IDENTITY_COLUMN_IDS) + 1)
                if stripes is not None:
                    found = [_stripe_identity(s) for s in stripes]
            except FORMAT_ERRORS:
                pass  # the stripes are read whole, which names what is wrong with the file
            self._stripe_identities = found
        return self._stripe_identities

    @property
    def trino_written(self) -> bool:
        """Whether Trino's ORC writer wrote the file (its footer's writer id)."""
        return self.orc is not None and self.orc.writer == TRINO_WRITER

    def _reopen(self) -> IO[bytes]:
        assert self.fs is not None
        return self.fs.open(self.path, "rb")


#: A file's type string parsed once: a table's files share a handful of them.
_parse_file_type = functools.lru_cache(maxsize=256)(HiveType.parse)


def _orc_footer(handle: IO[bytes]) -> tuple[HiveType, tuple[int, int] | None]:
    """The file's Hive type and, for an ACID file, the ``bucket`` column's min and max: read
    from its footer (:mod:`.orc_declared_types`), or by pyorc when that module does not read it."""
    footer = read_footer(handle)
    if footer is not None:
        file_type = footer.file_type
        if not is_acid_names([n.lower() for n in file_type.field_names]):
            return file_type, None
        try:
            return file_type, footer.integer_range(_BUCKET_COLUMN_ID)
        except Unreadable:
            pass  # pyorc's answer, or its error naming what is wrong
    handle.seek(0)
    reader = pyorc.Reader(handle)
    file_type = _parse_file_type(str(reader.schema))
    bucket_range = None
    if is_acid_names([n.lower() for n in file_type.field_names]):
        stats = reader[_BUCKET_COLUMN_ID].statistics
        low, high = stats.get("minimum"), stats.get("maximum")
        if low is not None and high is not None:
            bucket_range = (int(low), int(high))
    return file_type, bucket_range


def _declared(handle: IO[bytes]) -> tuple[tuple[HiveType, ...], tuple[int, int] | None]:
    """An ORC file's row column types as declared, and its ``bucket`` column's bounds."""
    file_type, bucket_range = _orc_footer(handle)
    row = file_type
    if is_acid_names([n.lower() for n in file_type.field_names]):
        row = file_type.children[5]
    return (row.children if row.name == "struct" else ()), bucket_range


def open_files(fs: AbstractFileSystem, data_files: Sequence[DataFile]) -> Iterator[OpenFile]:
    """Each of ``data_files`` opened in turn (:func:`open_file`), the small ones after it
    fetched ahead on object stores (:func:`.ranged_reads.open_data_files`). The caller closes
    each file's ``handle``; close the iterator when stopping early.

    :param fs: the filesystem the files are on.
    :param data_files: the files, in the order they are read.
    """
    handles = open_data_files(fs, [(f.path, f.file.size) for f in data_files])
    try:
        for data_file, handle in zip(data_files, handles, strict=True):
            yield open_file(fs, data_file, handle)
    finally:
        handles.close()


def open_file(fs: AbstractFileSystem, data_file: DataFile, handle: Any = None) -> OpenFile:
    """Open one data file (ORC or Parquet) and read its footer; a damaged file is an
    :class:`AcidFormatError` naming it. The caller closes the returned file's ``handle``.

    :param fs: the filesystem the file is on.
    :param data_file: the file to open.
    :param handle: the file already opened for reading (:mod:`.ranged_reads`), or None.
    """
    # on object stores the ranges it reads are fetched ahead, concurrently (ranged_reads)
    if handle is None:
        handle = open_data_file(fs, data_file.path, data_file.file.size)
    try:
        magic = handle.read(4)
        handle.seek(0)
        if magic == b"PAR1":
            parquet = pq.ParquetFile(handle)
            opened = OpenFile(
                data_file,
                handle,
                FileFormat.PARQUET,
                parquet.metadata.num_rows,
                parquet.schema_arrow,
                parquet=parquet,
            )
            opened.declared_types = tuple(HiveType.from_arrow(f.type) for f in opened.schema)
        else:
            declared = None  # a local file's: read when first asked (row_hive_types)
            if isinstance(fs, LocalFileSystem):
                # stripes read by pyarrow's own file, not through Python: the read does not
                # hold the GIL (workers of one process read at once), and is faster
                handle.close()
                handle = pa.OSFile(data_file.path)
            else:  # from the ranges fetched ahead (ranged_reads): no request of its own later
                declared = _declared(handle)
                handle.seek(0)
            orc = pa_orc.ORCFile(handle)
            metadata = {
                k.decode(errors="replace").lower(): v.decode(errors="replace")
                for k, v in (orc.metadata or {}).items()
            }
            opened = OpenFile(
                data_file, handle, FileFormat.ORC, orc.nrows, orc.schema, orc=orc, metadata=metadata
            )
            opened.fs = fs
            if declared is not None:
                opened.declared_types, opened.footer_bucket_range = declared
    except FileNotFoundError:  # removed since it was opened (by pyarrow's own file above)
        handle.close()
        raise
    except FORMAT_ERRORS as exc:
        handle.close()
        raise AcidFormatError(
            f"{data_file.path}: not a readable ORC or Parquet file ({exc})"
        ) from None
    names = opened.schema.names
    if is_acid_names([n.lower() for n in names]):
        opened.acid_names = tuple(names)
    return opened


_HIVE2_MESSAGE = (
    "written by Hive 2, which this reader does not support (run a major compaction in Hive 3 first)"
)


def is_bucket_codec_v1(value: int) -> bool:
    """Whether a ``bucket`` field value is ``BucketCodec`` V1: bits 31-29 = 001 (Hive's
    ``BucketCodec.determineVersion``); Hive 2 wrote plain bucket ids (version bits 000).

    :param value: a ``bucket`` field value.
    """
    return (value & 0xFFFFFFFF) >> 29 == 1


def check_acid_version(opened: OpenFile) -> None:
    """Accept Hive 3 ACID files: by the footer's ``hive.acid.version``, else by the folder's
    ``_orc_acid_version``, else by content: Hive 3.1's query-based compaction writes the full
    ACID schema without the footer tag (IMPALA-10115), but Hive 3 always encodes ``bucket`` in
    ``BucketCodec`` V1, which the column's footer minimum and maximum show.

    :param opened: an opened ACID event file.
    """
    version = opened.metadata.get(_VERSION_KEY)
    if version is None:
        if opened.data_file.acid_version_marked:
            return
        bounds = opened.bucket_range
        if bounds is not None and all(is_bucket_codec_v1(v) for v in bounds):
            return
        raise AcidFormatError(
            f"{opened.path}: an ACID file without '{_VERSION_KEY}' in its footer, in a folder "
            "without '_orc_acid_version', whose 'bucket' values are not BucketCodec V1: "
            + _HIVE2_MESSAGE
        )
    try:
        number = int(version.strip())
    except ValueError:
        raise AcidFormatError(
            f"{opened.path}: '{_VERSION_KEY}' is {version!r}, not a number"
        ) from None
    if number < 2:
        raise AcidFormatError(
            f"{opened.path}: '{_VERSION_KEY}={number}': a Hive 2 ACID file, which this reader "
            "does not support (run a major compaction in Hive 3 first)"
        )
