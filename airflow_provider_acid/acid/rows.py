"""Reading a bucket slice's rows with their identity, as Hive 3 reads them.

Every row of a full-ACID table has an identity ``(originalTransaction, bucket, rowId)``; delete
events name the rows they delete by it. How a file is read is decided by its schema, as Hive
does, never by its folder:

* ACID event files: top-level ``operation, originalTransaction, bucket, rowId,
  currentTransaction, row`` (matched case-insensitively: query-based compaction writes lower
  case) with the table's columns in the ``row`` struct. They are Hive 3 files when their footer
  says ``hive.acid.version`` 2 or more, when they sit in a folder holding ``_orc_acid_version``,
  or, lacking both (Hive 3.1's query-based compaction, IMPALA-10115), when the ``bucket``
  column's minimum and maximum in the footer are ``BucketCodec`` V1 values (bits 31-29 = 001,
  Hive's ``BucketCodec.determineVersion``). Files with plain bucket ids (Hive 2) are refused.
* Plain files: original (pre-ACID) files at a partition root, and raw files that LOAD DATA put
  inside a base or delta. Their rows get synthetic identities: originalTransaction 0 for
  originals, the folder's write id for raw files; the bucket from the file name encoded as
  ``BucketCodec`` V1; rowId = position in the file plus the rows of the same bucket's earlier
  files (in Hive's order, ``_copy_N`` files included) of the same folder.

Columns are matched to the table's columns as Hive does (:mod:`.evolution`): ORC files by
position, Parquet files by name; missing columns read as nulls, and a column whose type changed
is converted with Hive's result, or refused naming the file and the column.
Rows of writes the write-id list does not show (a partly valid delta range) are marked
invisible; delete events of such writes are dropped.

``char(n)`` values are padded to *n* characters whoever wrote them (:func:`.hive_types.pad_char`);
a stripe whose timestamps pyarrow cannot hold in nanoseconds is read exactly over Hive's whole
range, and Trino-written files with Trino's pre-1970 rule (:mod:`.orc_timestamps`).

Data is read stripe by stripe (ORC) or batch by batch (Parquet, insert-only tables), through
fsspec file objects (a local ORC file's stripes through pyarrow's own file, which reads without
the GIL), so memory follows the stripe and batch size, not the file size.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as pa_orc
import pyarrow.parquet as pq
import pyorc
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from .evolution import EvolutionError, column_sources, convert
from .hive_types import HiveType, HiveTypeError, hive_field, pad_char
from .names import BaseDir, DeltaDir
from .orc_timestamps import TRINO_WRITER, read_stripe
from .ranged_reads import open_data_file
from .read_view import BucketSlice, DataFile, FileRole, TableReadView
from .writeids import RangeValidity, ValidWriteIdList

#: Top-level columns of an ACID event file, in order, as Hive 3 names them.
ACID_COLUMNS = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row")
_ACID_LOWER = tuple(c.lower() for c in ACID_COLUMNS)
_VERSION_KEY = "hive.acid.version"
_POSITIONAL = re.compile(r"^_col(\d+)$")
#: ORC column id of ``bucket`` in an ACID event file (0 is the root struct).
_BUCKET_COLUMN_ID = 3
_INSERT = 0
_DELETE = 2


class AcidFormatError(ValueError):
    """A file that cannot be read as Hive 3 table data (the message names the file)."""


#: What the ORC and Parquet readers raise on a damaged file (pyorc raises RuntimeError on a
#: bad compressed stream and IndexError on a footer with fewer columns than its type).
_FORMAT_ERRORS = (
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
    ORC = "orc"
    PARQUET = "parquet"


def encode_bucket_v1(bucket_id: int, statement_id: int = 0) -> int:
    """Hive's ``BucketCodec`` V1 value of a bucket: version 1 in bits 31-29, bucket in 27-16."""
    return (1 << 29) | (bucket_id << 16) | statement_id


# -- the table's columns ---------------------------------------------------------------------


@dataclass(frozen=True)
class TableColumn:
    """One column of the table: its name and Hive type."""

    name: str
    hive_type: HiveType


@dataclass(frozen=True)
class TableColumns:
    """The table's columns and where they were learnt (a file path or ``schema argument``)."""

    columns: tuple[TableColumn, ...]
    source: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def arrow_fields(self, timestamp_unit: str = "us") -> list[pa.Field]:
        """Arrow fields with the Hive type in each field's metadata."""
        return [hive_field(c.name, c.hive_type, timestamp_unit) for c in self.columns]

    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": [{"name": c.name, "hive_type": str(c.hive_type)} for c in self.columns],
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> TableColumns:
        """From :meth:`to_dict`, or from its ``columns`` list alone."""
        if isinstance(data, Mapping):
            columns, source = data["columns"], data["source"]
        else:
            columns, source = data, "stored settings"
        return cls(
            tuple(TableColumn(c["name"], HiveType.parse(c["hive_type"])) for c in columns), source
        )

    @classmethod
    def from_schema(cls, schema: Any) -> TableColumns:
        """From a user schema: a pyarrow Schema, ``(name, hive type)`` pairs, or a mapping."""
        if isinstance(schema, pa.Schema):
            pairs: Iterable[tuple[str, Any]] = [
                (f.name, HiveType.from_arrow(f.type)) for f in schema
            ]
        elif isinstance(schema, Mapping):
            pairs = schema.items()
        else:
            pairs = schema
        try:
            columns = tuple(TableColumn(name, HiveType.parse(t)) for name, t in pairs)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"schema argument: expected a pyarrow Schema or (name, Hive type) pairs: {exc}"
            ) from None
        lowered = [c.name.lower() for c in columns]
        if len(set(lowered)) != len(lowered):
            raise ValueError(f"schema argument: duplicate column names in {list(lowered)}")
        return cls(columns, "schema argument")


def _newest_first(files: Iterable[DataFile]) -> list[DataFile]:
    def key(f: DataFile) -> tuple[int, int, str]:
        write = f.folder.max_write_id if f.folder is not None else -1
        return (write, 0 if f.role is FileRole.DELETE_DELTA else 1, f.path)

    return sorted(files, key=key, reverse=True)


def table_columns(
    snapshot: TableReadView, fs: AbstractFileSystem, schema: Any = None
) -> TableColumns:
    """The table's columns: from ``schema`` when given, else from the metastore's definition
    when the table was read by name, else from the newest ACID file's ``row``
    struct (delete deltas count, data files first), else from the newest plain file (always
    from the newest file for an insert-only table)."""
    if schema is not None:
        return TableColumns.from_schema(schema)
    if snapshot.definition is not None:
        definition = snapshot.definition
        return TableColumns(
            tuple(TableColumn(n, HiveType.parse(t)) for n, t in definition.columns),
            f"metastore {definition.metastore}, table {definition.name}",
        )
    fallback: TableColumns | None = None
    for data_file in _newest_first(snapshot.files):
        if fallback is not None and data_file.folder is None:
            break  # only original files are left, and they are never ACID files
        with fs.open(data_file.path, "rb") as handle:
            described = _describe(handle, data_file.path)
        if described is None:
            continue
        file_type, is_acid = described
        if is_acid:
            row = file_type.children[_ACID_LOWER.index("row")]
            return TableColumns(_columns_of(row, data_file.path), data_file.path)
        plain = TableColumns(_columns_of(file_type, data_file.path), data_file.path)
        if snapshot.insert_only:
            return plain
        fallback = fallback or plain
    return fallback or TableColumns((), "no data files")


def _columns_of(struct: HiveType, path: str) -> tuple[TableColumn, ...]:
    if struct.name != "struct":
        raise AcidFormatError(f"{path}: row type {struct} is not a struct")
    return tuple(TableColumn(n, t) for n, t in struct.fields)


def _describe(handle: IO[bytes], path: str) -> tuple[HiveType, bool] | None:
    """The file's type and whether it is an ACID event file; None for an empty file."""
    magic = handle.read(4)
    handle.seek(0)
    try:
        if magic == b"PAR1":
            parquet = pq.ParquetFile(handle)
            if parquet.metadata.num_rows == 0:
                return None
            return HiveType.from_arrow(pa.struct(list(parquet.schema_arrow))), False
        reader = pyorc.Reader(handle)
        if len(reader) == 0:
            return None
        file_type = HiveType.parse(str(reader.schema))
    except (HiveTypeError, *_FORMAT_ERRORS) as exc:
        raise AcidFormatError(f"{path}: not a readable ORC or Parquet data file ({exc})") from None
    return file_type, _is_acid_names([n.lower() for n in file_type.field_names])


def _is_acid_names(lowered: Sequence[str]) -> bool:
    return tuple(lowered) == _ACID_LOWER


# -- opening one file ------------------------------------------------------------------------


@dataclass
class _OpenFile:
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
    #: The Hive types of the row's columns as the file declares them (char/varchar kept).
    row_hive_types: tuple[HiveType, ...] = ()
    #: For ACID ORC files: the ``bucket`` column's minimum and maximum from the footer.
    bucket_range: tuple[int, int] | None = None
    #: Where the file was opened from (a stripe with timestamps outside pyarrow's nanosecond
    #: range opens it again for pyorc, :mod:`.orc_timestamps`).
    fs: AbstractFileSystem | None = None

    @property
    def path(self) -> str:
        return self.data_file.path

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
        come as ``ns`` or, in a stripe holding some outside that range, ``timestamp_unit``."""
        try:
            if self.parquet is not None:
                yield from self.parquet.iter_batches(batch_size=batch_rows, columns=columns)
                return
            assert self.orc is not None
            for index in range(self.orc.nstripes):
                stripe = read_stripe(
                    self.orc, self._reopen, index, columns, timestamp_unit, self.trino_written
                )
                for start in range(0, stripe.num_rows, batch_rows):
                    yield stripe.slice(start, batch_rows)
        except _FORMAT_ERRORS as exc:
            raise AcidFormatError(f"{self.path}: unreadable data ({exc})") from None

    @property
    def trino_written(self) -> bool:
        """Whether Trino's ORC writer wrote the file (its footer's writer id)."""
        return self.orc is not None and self.orc.writer == TRINO_WRITER

    def _reopen(self) -> IO[bytes]:
        assert self.fs is not None
        return self.fs.open(self.path, "rb")


#: A file's type string parsed once: a table's files share a handful of them.
_parse_file_type = functools.lru_cache(maxsize=256)(HiveType.parse)


def _orc_footer(handle: IO[bytes], path: str) -> tuple[HiveType, tuple[int, int] | None]:
    """The file's Hive type and, for an ACID file, the ``bucket`` column's min and max."""
    reader = pyorc.Reader(handle)
    file_type = _parse_file_type(str(reader.schema))
    bucket_range = None
    if _is_acid_names([n.lower() for n in file_type.field_names]):
        stats = reader[_BUCKET_COLUMN_ID].statistics
        low, high = stats.get("minimum"), stats.get("maximum")
        if low is not None and high is not None:
            bucket_range = (int(low), int(high))
    return file_type, bucket_range


def _open(fs: AbstractFileSystem, data_file: DataFile) -> _OpenFile:
    # on object stores the ranges it reads are fetched ahead, concurrently (ranged_reads)
    handle = open_data_file(fs, data_file.path, data_file.file.size)
    try:
        magic = handle.read(4)
        handle.seek(0)
        if magic == b"PAR1":
            parquet = pq.ParquetFile(handle)
            opened = _OpenFile(
                data_file,
                handle,
                FileFormat.PARQUET,
                parquet.metadata.num_rows,
                parquet.schema_arrow,
                parquet=parquet,
            )
            opened.row_hive_types = tuple(HiveType.from_arrow(f.type) for f in opened.schema)
        else:
            file_type, bucket_range = _orc_footer(handle, data_file.path)
            if isinstance(fs, LocalFileSystem):
                # stripes read by pyarrow's own file, not through Python: the read does not
                # hold the GIL (workers of one process read at once), and is faster
                handle.close()
                handle = pa.OSFile(data_file.path)
            else:
                handle.seek(0)
            orc = pa_orc.ORCFile(handle)
            metadata = {
                k.decode(errors="replace").lower(): v.decode(errors="replace")
                for k, v in (orc.metadata or {}).items()
            }
            opened = _OpenFile(
                data_file, handle, FileFormat.ORC, orc.nrows, orc.schema, orc=orc, metadata=metadata
            )
            opened.bucket_range = bucket_range
            opened.fs = fs
            row = file_type
            if _is_acid_names([n.lower() for n in file_type.field_names]):
                row = file_type.children[5]
            opened.row_hive_types = row.children if row.name == "struct" else ()
    except FileNotFoundError:  # removed since it was opened (by pyarrow's own file above)
        handle.close()
        raise
    except _FORMAT_ERRORS as exc:
        handle.close()
        raise AcidFormatError(
            f"{data_file.path}: not a readable ORC or Parquet file ({exc})"
        ) from None
    names = opened.schema.names
    if _is_acid_names([n.lower() for n in names]):
        opened.acid_names = tuple(names)
    return opened


_HIVE2_MESSAGE = (
    "written by Hive 2, which this reader does not support (run a major compaction in Hive 3 first)"
)


def is_bucket_codec_v1(value: int) -> bool:
    """Whether a ``bucket`` field value is ``BucketCodec`` V1: bits 31-29 = 001 (Hive's
    ``BucketCodec.determineVersion``); Hive 2 wrote plain bucket ids (version bits 000)."""
    return (value & 0xFFFFFFFF) >> 29 == 1


def _check_acid_version(opened: _OpenFile) -> None:
    """Accept Hive 3 ACID files: by the footer's ``hive.acid.version``, else by the folder's
    ``_orc_acid_version``, else by content: Hive 3.1's query-based compaction writes the full
    ACID schema without the footer tag (IMPALA-10115), but Hive 3 always encodes ``bucket`` in
    ``BucketCodec`` V1, which the column's footer minimum and maximum show."""
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


# -- mapping a file's columns onto the table's -----------------------------------------------


@dataclass(frozen=True)
class _ColumnMap:
    """For each table column: the index of the file field holding it (None: all null), with
    the file's and the table's Hive types of that column."""

    sources: tuple[int | None, ...]
    targets: tuple[pa.Field, ...]
    file_types: tuple[HiveType | None, ...]
    table_types: tuple[HiveType, ...]


def _column_map(
    opened: _OpenFile, columns: TableColumns, targets: Sequence[pa.Field]
) -> _ColumnMap:
    """Table columns onto the file's: ORC by position, Parquet by name (unless its columns are
    named ``_col0, _col1, ...``); see :mod:`.evolution`."""
    path = opened.path
    row_type = opened.row_type
    if isinstance(row_type, pa.Schema):
        names = list(row_type.names)
    else:
        names = [row_type.field(i).name for i in range(row_type.num_fields)]
    positional = opened.format is FileFormat.ORC or (
        bool(names) and all(_POSITIONAL.match(n) for n in names)
    )
    sources = column_sources(names, columns.names, by_position=positional)
    if not positional and names and targets and all(s is None for s in sources):
        raise AcidFormatError(
            f"{path}: none of its columns {names} is a table column "
            f"{[t.name for t in targets]} (pass the table's schema if the names differ)"
        )
    file_types: list[HiveType | None] = []
    for source, column in zip(sources, columns.columns, strict=True):
        if source is None:
            file_types.append(None)
            continue
        file_type = (
            opened.row_hive_types[source]
            if source < len(opened.row_hive_types)
            else column.hive_type
        )
        file_types.append(file_type)
    return _ColumnMap(
        tuple(sources),
        tuple(targets),
        tuple(file_types),
        tuple(c.hive_type for c in columns.columns),
    )


def _map_columns(
    children: Sequence[pa.Array], column_map: _ColumnMap, length: int, path: str
) -> list[pa.Array]:
    out = []
    for source, target, file_type, table_type in zip(
        column_map.sources,
        column_map.targets,
        column_map.file_types,
        column_map.table_types,
        strict=True,
    ):
        if source is None or file_type is None:
            out.append(pa.nulls(length, target.type))
            continue
        array = children[source]
        try:
            array = convert(array, file_type, table_type, target.type)
        except EvolutionError as exc:
            raise AcidFormatError(
                f"{path}: column {target.name!r} (file column {source + 1}, {file_type}) "
                f"cannot be read as the table's {table_type}: {exc}"
            ) from None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            hint = ""
            if "lose data" in str(exc) and "timestamp" in str(target.type):
                hint = " (pass timestamp_unit='ns' to keep sub-microsecond timestamps)"
            raise AcidFormatError(
                f"{path}: column {target.name!r} of type {array.type} cannot be read as "
                f"{target.type}: {exc}{hint}"
            ) from None
        out.append(pad_char(array, table_type))
    return out


# -- what the reader yields ------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RowBatch:
    """Rows of one data file with their identity.

    ``columns`` follow the table's columns. ``visible`` marks rows of writes the reader may see;
    None means all of them.
    """

    data_file: DataFile
    original_transaction: pa.Array
    bucket: pa.Array
    row_id: pa.Array
    current_transaction: pa.Array
    columns: list[pa.Array]
    visible: pa.Array | None = None

    @property
    def num_rows(self) -> int:
        return len(self.row_id)


@dataclass(frozen=True, eq=False)
class DeleteBatch:
    """Delete events of valid writes: the identities of the rows they delete."""

    data_file: DataFile
    original_transaction: pa.Array
    bucket: pa.Array
    row_id: pa.Array
    #: The deleting writes (``currentTransaction``), when asked for (``with_current``).
    current_transaction: pa.Array | None = None

    @property
    def num_rows(self) -> int:
        return len(self.row_id)


def _fully_valid(data_file: DataFile, write_ids: ValidWriteIdList) -> bool:
    """Whether every write in an ACID file is visible without looking at its rows."""
    folder = data_file.folder
    if folder is None:
        # an ACID file outside base/delta folders (at a partition root): no folder name says
        # which writes it holds, so its rows are checked unless every write is committed
        # (Impala reads such files as ACID events and filters them the same way, IMPALA-9512)
        return write_ids.is_all_committed
    return write_ids.range_validity(folder.min_write_id, folder.max_write_id) is RangeValidity.ALL


def visible_writes(current: pa.Array, write_ids: ValidWriteIdList) -> pa.Array:
    """A mask of the rows whose write (``currentTransaction``) the list shows as committed."""
    mask = pc.less_equal(current, pa.scalar(write_ids.high_watermark, pa.int64()))
    exceptions = write_ids.open_ids + write_ids.aborted_ids
    if exceptions:
        hidden = pc.is_in(current, value_set=pa.array(exceptions, pa.int64()))
        mask = pc.and_(mask, pc.invert(hidden))
    return mask


def _int_column(batch: pa.RecordBatch, name: str, arrow_type: pa.DataType, path: str) -> pa.Array:
    array = batch.column(name)
    if array.null_count:
        raise AcidFormatError(f"{path}: ACID column {name!r} holds nulls")
    return array if array.type == arrow_type else pc.cast(array, arrow_type)


class SliceReader:
    """Reads one bucket slice: its data rows with identity and its delete events.

    ``rows_in_files`` counts, from the files' footers, the rows of every data file opened; the
    reader checks that it yields exactly that many rows of each file.
    """

    def __init__(
        self,
        bucket_slice: BucketSlice,
        fs: AbstractFileSystem,
        columns: TableColumns,
        write_ids: ValidWriteIdList,
        *,
        insert_only: bool = False,
        batch_rows: int = 131_072,
        timestamp_unit: str = "us",
    ) -> None:
        if batch_rows < 1:
            raise ValueError("batch_rows must be positive")
        self.slice = bucket_slice
        self.fs = fs
        self.columns = columns
        self.write_ids = write_ids
        self.insert_only = insert_only
        self.batch_rows = batch_rows
        self.targets = columns.arrow_fields(timestamp_unit)
        self.timestamp_unit = timestamp_unit
        self.rows_in_files = 0
        self._arange: pa.Array | None = None

    # -- data ---------------------------------------------------------------------------

    def data_batches(self) -> Iterator[RowBatch]:
        """Every data row of the slice (originals, base, deltas in Hive's order), batch by batch."""
        offsets: dict[str, int] = {}  # synthetic row ids continue per folder (or partition root)
        for data_file in self.slice.data_files:
            opened = _open(self.fs, data_file)
            try:
                self.rows_in_files += opened.rows
                if opened.rows == 0:
                    continue
                if opened.is_acid:
                    if self.insert_only:
                        raise AcidFormatError(
                            f"{opened.path}: an ACID event file in a table read as insert-only"
                        )
                    produced = yield from self._acid_rows(opened)
                else:
                    group = data_file.folder.name if data_file.folder is not None else ""
                    first = offsets.get(group, 0)
                    produced = yield from self._plain_rows(opened, first)
                    offsets[group] = first + opened.rows
                if produced != opened.rows:
                    raise AcidFormatError(
                        f"{opened.path}: read {produced} rows, its footer says {opened.rows}"
                    )
            finally:
                opened.handle.close()

    def _acid_rows(self, opened: _OpenFile) -> Iterator[RowBatch]:
        _check_acid_version(opened)
        names = opened.acid_names
        assert names is not None
        op, otx, bucket, row_id, ctx, row = names
        column_map = _column_map(opened, self.columns, self.targets)
        check_validity = not _fully_valid(opened.data_file, self.write_ids)
        produced = 0
        for batch in opened.stripes(None, self.batch_rows, self.timestamp_unit):
            n = batch.num_rows
            produced += n
            operations = pc.min_max(batch.column(op))
            if operations["min"].as_py() != _INSERT or operations["max"].as_py() != _INSERT:
                raise AcidFormatError(
                    f"{opened.path}: a data file holding events other than inserts "
                    f"(operation {operations['min'].as_py()}..{operations['max'].as_py()}); "
                    "Hive 3 writes deletes only to delete_delta folders"
                )
            current = _int_column(batch, ctx, pa.int64(), opened.path)
            rows = batch.column(row)
            children = [rows.field(i) for i in range(rows.type.num_fields)]
            visible = visible_writes(current, self.write_ids) if check_validity else None
            if visible is not None and pc.all(visible).as_py():
                visible = None
            yield RowBatch(
                opened.data_file,
                _int_column(batch, otx, pa.int64(), opened.path),
                _int_column(batch, bucket, pa.int32(), opened.path),
                _int_column(batch, row_id, pa.int64(), opened.path),
                current,
                _map_columns(children, column_map, n, opened.path),
                visible,
            )
        return produced

    def _plain_rows(self, opened: _OpenFile, first_row_id: int) -> Iterator[RowBatch]:
        data_file = opened.data_file
        if data_file.role is FileRole.DELETE_DELTA:
            raise AcidFormatError(f"{opened.path}: a plain (non-ACID) file in a delete delta")
        folder = data_file.folder
        if isinstance(folder, BaseDir):
            write = folder.write_id
        elif isinstance(folder, DeltaDir):
            write = folder.min_write_id
        else:
            write = 0
        visible_file = write == 0 or self.write_ids.is_valid(write)
        bucket_value = pa.scalar(encode_bucket_v1(data_file.bucket_id), pa.int32())
        write_value = pa.scalar(write, pa.int64())
        column_map = _column_map(opened, self.columns, self.targets)
        produced = 0
        for batch in opened.stripes(None, self.batch_rows, self.timestamp_unit):
            n = batch.num_rows
            row_ids = pc.add(self._positions(n), pa.scalar(first_row_id + produced, pa.int64()))
            produced += n
            writes = pa.repeat(write_value, n)
            yield RowBatch(
                data_file,
                writes,
                pa.repeat(bucket_value, n),
                row_ids,
                writes,
                _map_columns(batch.columns, column_map, n, opened.path),
                None if visible_file else pa.repeat(pa.scalar(False), n),
            )
        return produced

    def _positions(self, n: int) -> pa.Array:
        """0, 1, ..., n-1 (int64), from a cached run."""
        if self._arange is None or len(self._arange) < n:
            size = max(n, self.batch_rows)
            ones = pa.repeat(pa.scalar(1, pa.int64()), size)
            self._arange = pc.subtract(pc.cumulative_sum(ones), pa.scalar(1, pa.int64()))
        return self._arange.slice(0, n)

    # -- deletes ------------------------------------------------------------------------

    def delete_batches(self, with_current: bool = False) -> Iterator[DeleteBatch]:
        """The delete events of the slice's delete deltas, minus those of invalid writes;
        ``with_current`` keeps each event's deleting write (``currentTransaction``) too."""
        for data_file in self.slice.delete_delta_files:
            opened = _open(self.fs, data_file)
            try:
                if opened.rows == 0:
                    continue
                if not opened.is_acid:
                    raise AcidFormatError(
                        f"{opened.path}: a plain (non-ACID) file in a delete delta"
                    )
                _check_acid_version(opened)
                assert opened.acid_names is not None
                op, otx, bucket, row_id, ctx, _ = opened.acid_names
                check_validity = not _fully_valid(data_file, self.write_ids)
                read_current = check_validity or with_current
                wanted = [op, otx, bucket, row_id] + ([ctx] if read_current else [])
                for batch in opened.stripes(wanted, self.batch_rows):
                    operations = pc.min_max(batch.column(op))
                    if operations["min"].as_py() != _DELETE or operations["max"].as_py() != _DELETE:
                        raise AcidFormatError(
                            f"{opened.path}: a delete delta file holding events other than deletes"
                        )
                    keys = [
                        _int_column(batch, otx, pa.int64(), opened.path),
                        _int_column(batch, bucket, pa.int32(), opened.path),
                        _int_column(batch, row_id, pa.int64(), opened.path),
                    ]
                    if read_current:
                        keys.append(_int_column(batch, ctx, pa.int64(), opened.path))
                    if check_validity:
                        mask = visible_writes(keys[-1], self.write_ids)
                        keys = [pc.filter(k, mask) for k in keys]
                    yield DeleteBatch(data_file, *keys[:3], keys[3] if with_current else None)
            finally:
                opened.handle.close()
