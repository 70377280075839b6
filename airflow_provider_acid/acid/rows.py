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

from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
from fsspec import AbstractFileSystem

from .column_mapping import ColumnMap, file_column_map, map_columns
from .data_file_open import (
    ACID_COLUMNS,
    AcidFormatError,
    FileFormat,
    OpenFile,
    StripeIdentity,
    check_acid_version,
    encode_bucket_v1,
    is_bucket_codec_v1,
    open_files,
)
from .names import BaseDir, DeltaDir
from .read_view import BucketSlice, DataFile, FileRole
from .stripe_spans import SEEK_MIN_ROWS, narrowed, read_span
from .table_columns import TableColumn, TableColumns, table_columns
from .writeids import RangeValidity, ValidWriteIdList

#: Names other modules import from here; they now live in :mod:`.data_file_open` and
#: :mod:`.table_columns`.
__all__ = [
    "ACID_COLUMNS",
    "AcidFormatError",
    "DeleteBatch",
    "FileFormat",
    "RowBatch",
    "RowSelector",
    "SliceReader",
    "StripeFilter",
    "StripeIdentity",
    "TableColumn",
    "TableColumns",
    "encode_bucket_v1",
    "is_bucket_codec_v1",
    "table_columns",
    "visible_writes",
]

_INSERT = 0
_DELETE = 2

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

    def filter(self, mask: pa.Array) -> RowBatch:
        """The rows ``mask`` picks.

        :param mask: a boolean mask over the batch's rows.
        """
        return RowBatch(
            self.data_file,
            *(pc.filter(a, mask) for a in (self.original_transaction, self.bucket, self.row_id)),
            pc.filter(self.current_transaction, mask),
            [pc.filter(a, mask) for a in self.columns],
            None if self.visible is None else pc.filter(self.visible, mask),
        )


#: Picks the rows of a batch whose columns are wanted (a boolean mask; None: no row), seeing
#: only the batch's identity, its writes and ``visible`` (its ``columns`` are not read yet).
RowSelector = Callable[[RowBatch], "pa.Array | None"]
#: For a data file, whether each of its stripes (known only by its stripe statistics) may
#: hold a row the selector picks (False: its identity columns are not read either); None when
#: every stripe of the file may.
StripeFilter = Callable[[DataFile], "Callable[[StripeIdentity], bool] | None"]


def _selected(batches: Iterator[RowBatch], select: RowSelector | None) -> Iterator[RowBatch]:
    """``batches`` reduced to the rows ``select`` picks (all of them without it); returns how
    many rows ``batches`` held."""
    produced = 0
    for batch in batches:
        produced += batch.num_rows
        if select is None:
            yield batch
            continue
        mask = select(replace(batch, columns=[]))  # as the ORC path calls it: no columns
        if mask is not None and pc.any(mask).as_py():
            yield batch.filter(mask)
    return produced


def _sliced(batch: RowBatch, start: int, length: int) -> RowBatch:
    """Rows ``start`` to ``start + length - 1`` of a batch without columns."""
    return RowBatch(
        batch.data_file,
        batch.original_transaction.slice(start, length),
        batch.bucket.slice(start, length),
        batch.row_id.slice(start, length),
        batch.current_transaction.slice(start, length),
        [],
        None if batch.visible is None else batch.visible.slice(start, length),
    )


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
    """A mask of the rows whose write (``currentTransaction``) the list shows as committed.

    :param current: each row's write (``currentTransaction``).
    :param write_ids: the write-id list of the read.
    """
    mask = pc.less_equal(current, pa.scalar(write_ids.high_watermark, pa.int64()))
    exceptions = write_ids.open_ids + write_ids.aborted_ids
    if exceptions:
        hidden = pc.is_in(current, value_set=pa.array(exceptions, pa.int64()))
        mask = pc.and_(mask, pc.invert(hidden))
    return mask


_POSITIONS: list[pa.Array] = []  # the longest run of 0, 1, 2, ... made so far


def _positions(n: int) -> pa.Array:
    """int64 0, 1, ..., n - 1: a slice of one run shared by every reader, made again only when
    a longer one is asked (Arrow arrays are immutable: safe to share)."""
    if not _POSITIONS or len(_POSITIONS[-1]) < n:
        ones = pa.repeat(pa.scalar(1, pa.int64()), max(n, 131_072))
        _POSITIONS[:] = [pc.subtract(pc.cumulative_sum(ones), pa.scalar(1, pa.int64()))]
    return _POSITIONS[-1].slice(0, n)


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
        #: Stripes of ACID files passed over by their statistics (:meth:`data_batches`).
        self.stripes_skipped = 0

    # -- data ---------------------------------------------------------------------------

    def data_batches(
        self, select: RowSelector | None = None, may_pick: StripeFilter | None = None
    ) -> Iterator[RowBatch]:
        """Every data row of the slice (originals, base, deltas in Hive's order), batch by batch.

        :param select: read the table's columns only for the rows it picks: each batch is
            yielded with those rows only (none: not yielded), and a stripe of an ACID file
            none of whose rows it picks is read no further than its identity columns.
        :param may_pick: with ``select``: a stripe of an ORC ACID file whose statistics the
            test it gives for the file rejects is not read at all (it must reject only
            stripes ``select`` would pick nothing of); a stripe whose statistics are missing,
            show nulls or events other than inserts is read and checked as without it.
        """
        offsets: dict[str, int] = {}  # synthetic row ids continue per folder (or partition root)
        with closing(open_files(self.fs, self.slice.data_files)) as files:
            yield from self._files_rows(files, offsets, select, may_pick)

    def _files_rows(
        self,
        files: Iterator[OpenFile],
        offsets: dict[str, int],
        select: RowSelector | None,
        may_pick: StripeFilter | None,
    ) -> Iterator[RowBatch]:
        for opened in files:
            data_file = opened.data_file
            try:
                self.rows_in_files += opened.rows
                if opened.rows == 0:
                    continue
                if opened.is_acid:
                    if self.insert_only:
                        raise AcidFormatError(
                            f"{opened.path}: an ACID event file in a table read as insert-only"
                        )
                    if select is not None and opened.orc is not None:
                        produced = yield from self._selected_acid_rows(opened, select, may_pick)
                    else:
                        produced = yield from _selected(self._acid_rows(opened), select)
                else:
                    group = data_file.folder.name if data_file.folder is not None else ""
                    first = offsets.get(group, 0)
                    produced = yield from _selected(self._plain_rows(opened, first), select)
                    offsets[group] = first + opened.rows
                if produced != opened.rows:
                    raise AcidFormatError(
                        f"{opened.path}: read {produced} rows, its footer says {opened.rows}"
                    )
            finally:
                opened.handle.close()

    def _acid_file(self, opened: OpenFile) -> tuple[ColumnMap, bool]:
        """An ACID file's version checked; its column map, and whether its rows' writes need
        checking against the write-id list."""
        check_acid_version(opened)
        column_map = file_column_map(opened, self.columns, self.targets)
        return column_map, not _fully_valid(opened.data_file, self.write_ids)

    def _acid_rows(self, opened: OpenFile) -> Iterator[RowBatch]:
        column_map, check_validity = self._acid_file(opened)
        names = opened.acid_names
        assert names is not None
        produced = 0
        for batch in opened.stripes(None, self.batch_rows, self.timestamp_unit):
            produced += batch.num_rows
            identity = self._acid_identity(opened, batch, check_validity)
            rows = batch.column(names[5])
            yield replace(
                identity, columns=self._row_columns(opened, rows, batch.num_rows, column_map)
            )
        return produced

    def _selected_acid_rows(
        self, opened: OpenFile, select: RowSelector, may_pick: StripeFilter | None
    ) -> Iterator[RowBatch]:
        """An ORC ACID file's rows that ``select`` picks: each stripe's identity columns
        first (unless ``may_pick`` rejects the stripe by its statistics, or they show the
        rows numbered in order, :meth:`_numbered_span`); its ``row`` column only when some of
        its rows are picked, and then only the rows from the first picked to the last when
        they are few (:meth:`_picked_values`)."""
        column_map, check_validity = self._acid_file(opened)
        names = opened.acid_names
        assert names is not None
        test = may_pick(opened.data_file) if may_pick is not None else None
        known = opened.stripe_identities() if test is not None else None
        # a file no stripe of which is tested (a delta of the range): identity and row at once
        at_once = may_pick is not None and test is None
        produced = 0
        for index in range(opened.nstripes):
            bounds = known[index] if known is not None else None
            if test is not None and bounds is not None and bounds.operation == (_INSERT, _INSERT):
                if not test(bounds):
                    self.stripes_skipped += 1
                    produced += bounds.rows
                    continue
                done = yield from self._numbered_span(
                    opened, index, produced, bounds, test, select, column_map, check_validity
                )
                if done:
                    produced += bounds.rows
                    continue
            keys = opened.stripe(index, None if at_once else list(names[:5]), self.timestamp_unit)
            # (identity of a batch, stripe positions of its picked rows (None: all), its start)
            picks: list[tuple[RowBatch, pa.Array | None, int]] = []
            for start in range(0, keys.num_rows, self.batch_rows):
                identity = self._acid_identity(
                    opened, keys.slice(start, self.batch_rows), check_validity
                )
                mask = select(identity)
                if mask is None or not pc.any(mask).as_py():
                    continue
                if not mask.null_count and pc.all(mask).as_py():
                    picks.append((identity, None, start))
                    continue
                positions = pc.add(pc.indices_nonzero(mask), pa.scalar(start, pa.uint64()))
                picks.append((identity.filter(mask), positions, start))
            if picks:
                if at_once:
                    values, offset = keys.column(names[5]), 0
                else:
                    values, offset = self._picked_values(
                        opened, index, produced, keys.num_rows, picks
                    )
                for identity, positions, start in picks:
                    if positions is None:
                        rows = values.slice(start - offset, identity.num_rows)
                    else:
                        rows = values.take(pc.subtract(positions, pa.scalar(offset, pa.uint64())))
                    columns = self._row_columns(opened, rows, identity.num_rows, column_map)
                    yield replace(identity, columns=columns)
            produced += keys.num_rows
        return produced

    def _numbered_span(
        self,
        opened: OpenFile,
        index: int,
        first_row: int,
        bounds: StripeIdentity,
        test: Callable[[StripeIdentity], bool],
        select: RowSelector,
        column_map: ColumnMap,
        check_validity: bool,
    ) -> Iterator[RowBatch]:
        """The picked rows of stripe ``index`` (whose first row is the file's ``first_row``) read
        without its identity columns, when its statistics show one ``originalTransaction``,
        one ``bucket``, one write and as many rowIds from the lowest to the highest as rows
        (Hive numbers a write's rows of a bucket 0, 1, 2, ...: row i then carries rowId
        lowest + i, identities being unique). The rowIds ``test`` may pick are narrowed by
        bisecting its bounds; when their rows cost less to read than the stripe
        (:func:`.stripe_spans.read_span`), they are read, their rowIds with them, which must
        be lowest + i. Returns False, having yielded nothing, when any of that does not hold
        (the stripe is then read as any other)."""
        original, bucket, row_id, current = (
            bounds.original_transaction, bounds.bucket, bounds.row_id, bounds.current_transaction
        )  # fmt: skip
        lowest, highest = row_id
        numbered = highest - lowest + 1 == bounds.rows
        if not numbered or any(low != high for low, high in (original, bucket, current)):
            return False
        if bounds.rows < SEEK_MIN_ROWS:
            return False  # decoded faster than sought

        def may_hold(low: int, high: int) -> bool:
            return test(replace(bounds, row_id=(low, high)))

        first, last = narrowed(lowest, highest, may_hold)
        span = last - first + 1
        assert opened.acid_names is not None
        columns = [opened.acid_names[3], opened.acid_names[5]]
        low = first - lowest
        read = read_span(
            opened,
            index,
            first_row,
            (low, low + span - 1),
            bounds.rows,
            columns,
            self.timestamp_unit,
        )
        if read is None:
            return False
        (row_ids, values), offset = read
        row_ids, values = row_ids.slice(low - offset, span), values.slice(low - offset, span)
        expected = pc.add(_positions(span), pa.scalar(first, pa.int64()))
        if row_ids.null_count or not pc.cast(row_ids, pa.int64()).equals(expected):
            return False
        visible = None
        if check_validity:
            shown = visible_writes(pa.array([current[0]], pa.int64()), self.write_ids)
            visible = None if shown[0].as_py() else pa.repeat(pa.scalar(False), span)
        identity = RowBatch(
            opened.data_file,
            pa.repeat(pa.scalar(original[0], pa.int64()), span),
            pa.repeat(pa.scalar(bucket[0], pa.int32()), span),
            expected,
            pa.repeat(pa.scalar(current[0], pa.int64()), span),
            [],
            visible,
        )
        mask = select(identity)
        if mask is None or not pc.any(mask).as_py():
            return True
        picked, rows = identity.filter(mask), pc.filter(values, mask)
        for start in range(0, picked.num_rows, self.batch_rows):
            part = rows.slice(start, self.batch_rows)
            columns_read = self._row_columns(opened, part, len(part), column_map)
            yield replace(_sliced(picked, start, self.batch_rows), columns=columns_read)
        return True

    def _picked_values(
        self,
        opened: OpenFile,
        index: int,
        first_row: int,
        stripe_rows: int,
        picks: Sequence[tuple[RowBatch, pa.Array | None, int]],
    ) -> tuple[pa.Array, int]:
        """The ``row`` column of stripe ``index`` (whose first row is the file's
        ``first_row``) covering the picked rows, and the stripe position of its first value:
        the whole stripe, or only the rows up to the last picked, or from the first picked to
        the last, whichever costs least (:func:`.stripe_spans.read_span`)."""
        assert opened.acid_names is not None
        row = opened.acid_names[5]
        low = min(p[0].as_py() if p is not None else s for _, p, s in picks)
        high = max(p[-1].as_py() if p is not None else s + i.num_rows - 1 for i, p, s in picks)
        read = read_span(
            opened, index, first_row, (low, high), stripe_rows, [row], self.timestamp_unit
        )
        if read is not None:
            (values,), offset = read
            return values, offset
        return opened.stripe(index, [row], self.timestamp_unit).column(0), 0

    def _acid_identity(
        self, opened: OpenFile, batch: pa.RecordBatch, check_validity: bool
    ) -> RowBatch:
        """A batch's identity, writes and visibility (no ``columns``), its operations checked."""
        assert opened.acid_names is not None
        op, otx, bucket, row_id, ctx, _ = opened.acid_names
        operations = pc.min_max(batch.column(op))
        if operations["min"].as_py() != _INSERT or operations["max"].as_py() != _INSERT:
            raise AcidFormatError(
                f"{opened.path}: a data file holding events other than inserts "
                f"(operation {operations['min'].as_py()}..{operations['max'].as_py()}); "
                "Hive 3 writes deletes only to delete_delta folders"
            )
        current = _int_column(batch, ctx, pa.int64(), opened.path)
        visible = visible_writes(current, self.write_ids) if check_validity else None
        if visible is not None and pc.all(visible).as_py():
            visible = None
        return RowBatch(
            opened.data_file,
            _int_column(batch, otx, pa.int64(), opened.path),
            _int_column(batch, bucket, pa.int32(), opened.path),
            _int_column(batch, row_id, pa.int64(), opened.path),
            current,
            [],
            visible,
        )

    def _row_columns(
        self, opened: OpenFile, rows: pa.Array, n: int, column_map: ColumnMap
    ) -> list[pa.Array]:
        """The table's columns from ``n`` values of an ACID file's ``row`` struct."""
        children = [rows.field(i) for i in range(rows.type.num_fields)]
        return map_columns(children, column_map, n, opened.path)

    def _plain_rows(self, opened: OpenFile, first_row_id: int) -> Iterator[RowBatch]:
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
        column_map = file_column_map(opened, self.columns, self.targets)
        produced = 0
        for batch in opened.stripes(None, self.batch_rows, self.timestamp_unit):
            n = batch.num_rows
            row_ids = pc.add(_positions(n), pa.scalar(first_row_id + produced, pa.int64()))
            produced += n
            writes = pa.repeat(write_value, n)
            yield RowBatch(
                data_file,
                writes,
                pa.repeat(bucket_value, n),
                row_ids,
                writes,
                map_columns(batch.columns, column_map, n, opened.path),
                None if visible_file else pa.repeat(pa.scalar(False), n),
            )
        return produced

    # -- deletes ------------------------------------------------------------------------

    def delete_batches(self, with_current: bool = False) -> Iterator[DeleteBatch]:
        """The delete events of the slice's delete deltas, minus those of invalid writes;
        ``with_current`` keeps each event's deleting write (``currentTransaction``) too."""
        with closing(open_files(self.fs, self.slice.delete_delta_files)) as files:
            yield from self._delete_events(files, with_current)

    def _delete_events(
        self, files: Iterator[OpenFile], with_current: bool
    ) -> Iterator[DeleteBatch]:
        for opened in files:
            data_file = opened.data_file
            try:
                if opened.rows == 0:
                    continue
                if not opened.is_acid:
                    raise AcidFormatError(
                        f"{opened.path}: a plain (non-ACID) file in a delete delta"
                    )
                check_acid_version(opened)
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
