"""The row changes of one bucket slice between two write ids, from its ACID events.

Between write ids A and B (the range ``(A, B]``) the changes of a bucket are:

* inserts: the insert events of writes in the range (``currentTransaction`` in ``(A, B]``,
  committed in the reader's write-id list), read from the deltas whose range reaches above A
  only (a minor-compacted or streaming delta straddling A is filtered event by event);
* deletes: the delete events of writes in the range, each with the deleted row's values,
  found in the data files that can hold its identity (its ``originalTransaction`` says which:
  originals for 0, a base for ids at or below its write id, a delta for ids in its range);
  without the deleted rows' values (``ChangeRange.delete_values`` false), only in the deltas
  of the range, the other deletes holding their identity alone.

An update (Hive writes a delete event and an insert event) is paired into
``update_preimage``/``update_postimage`` when a key is given and one write deletes and inserts
the same key. ``_change_ordinal`` orders the changes: by write, then statement, deletes of
older rows before inserts, deletes of a row the same write inserted after its insert.

A slice whose partition has a base written inside the range (a major compaction, or an INSERT
OVERWRITE) no longer holds the events: :mod:`.change_diff` diffs identities instead, or the
feed refuses it (:class:`CompactedRangeError`).

Memory per bucket: the delete keys of the range (as compaction's), one batch being read, and
the bucket's changes in the range (never the bucket's rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
from fsspec import AbstractFileSystem

from ..acid.names import BaseDir, DeltaDir
from ..acid.read_view import BucketSlice, DataFile
from ..acid.rows import DeleteBatch, RowBatch, SliceReader, StripeIdentity
from ..acid.table_columns import TableColumns
from ..acid.writeids import ValidWriteIdList
from .delete_keys import DeleteKeySet
from .row_order import arange, in_order, matched_in_order

INSERT = "insert"
DELETE = "delete"
UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"
CHANGE_TYPES = (INSERT, DELETE, UPDATE_PREIMAGE, UPDATE_POSTIMAGE)
#: The column holding a change row's type (one of :data:`CHANGE_TYPES`).
CHANGE_TYPE = "_change_type"

#: The columns every change row has after the table's (and partition) columns.
CHANGE_COLUMNS = (
    (CHANGE_TYPE, pa.string()),
    ("_commit_write_id", pa.int64()),
    ("_change_ordinal", pa.int64()),
    ("_acid_original_write_id", pa.int64()),
    ("_acid_bucket", pa.int32()),
    ("_acid_row_id", pa.int64()),
)
IDENTITY = ("_acid_original_write_id", "_acid_bucket", "_acid_row_id")

# Bookkeeping columns of change rows before they are finished.
_KIND = "__kind"  # 0 insert, 1 delete
_COMMIT = "__commit"
_STATEMENT = "__statement"
_PHASE = "__phase"
#: The write that inserted the row (its ``currentTransaction``).
ROW_WRITE = "__row_write"
_POSITION = "__position"
_STATEMENT_BITS = 0xFFF  # BucketCodec V1: the statement id in the bucket field's low bits


class CompactedRangeError(RuntimeError):
    """Hive compacted inside the range: the events of its writes are gone from the table."""


class ChangeRowsError(RuntimeError):
    """The table's events do not add up (a delete of a row the slice does not hold)."""


@dataclass(frozen=True)
class ChangeRange:
    """What a feed covers: writes above ``from_write_id`` up to ``to_write_id``.

    :param from_write_id: A, the write the feed starts after.
    :param to_write_id: B, the last write the feed covers.
    :param key: the table's key columns: updates of a key are paired.
    :param net: leave out rows both inserted and deleted inside the range.
    :param delete_values: give each delete the deleted row's values, read from the file that
        holds the row (for most, the base). False: a delete holds the row's identity (and
        the partition's values) only, and its other columns are null unless the range
        inserted the row; only the range's deltas are read. Such a feed applies by identity,
        to a snapshot written with identity columns; no key pairs its updates.
    """

    from_write_id: int
    to_write_id: int
    key: tuple[str, ...] = ()
    net: bool = False
    delete_values: bool = True

    def __post_init__(self) -> None:
        if self.from_write_id < 0:
            raise ValueError(f"--from-write-id must be 0 or more, not {self.from_write_id}")
        if self.to_write_id < self.from_write_id:
            raise ValueError(
                f"--to-write-id {self.to_write_id} is below --from-write-id {self.from_write_id}"
            )
        if self.key and not self.delete_values:
            raise ValueError(
                f"--key {','.join(self.key)} pairs updates on the deleted rows' values, which "
                "--no-delete-values leaves out: give one or the other"
            )

    def reaches(self, low: int, high: int) -> bool:
        """Whether a folder of writes ``low..high`` can hold events of the range."""
        return high > self.from_write_id and low <= self.to_write_id


def ordinal(commit: pa.Array, statement: pa.Array, phase: pa.Array) -> pa.Array:
    """``_change_ordinal``: ``commit * 2**20 + statement * 4 + phase`` (int64)."""
    value = pc.multiply(pc.cast(commit, pa.int64()), pa.scalar(1 << 20, pa.int64()))
    value = pc.add(value, pc.multiply(pc.cast(statement, pa.int64()), pa.scalar(4, pa.int64())))
    return pc.add(value, pc.cast(phase, pa.int64()))


def compacted_base(base: BaseDir | None, change_range: ChangeRange) -> BaseDir | None:
    """A partition's base when it was written inside the range (its writes' events are gone:
    a major compaction, or an INSERT OVERWRITE)."""
    if base is not None and base.write_id > change_range.from_write_id:
        return base
    return None


def slice_has_changes(bucket_slice: BucketSlice, change_range: ChangeRange) -> bool:
    """Whether a slice holds a folder reaching into the range (else it has no changes)."""
    for data_file in bucket_slice.files:
        folder = data_file.folder
        if folder is not None and change_range.reaches(folder.min_write_id, folder.max_write_id):
            return True
    return False


def _in_range(data_file: DataFile, change_range: ChangeRange) -> bool:
    folder = data_file.folder
    return isinstance(folder, DeltaDir) and change_range.reaches(
        folder.min_write_id, folder.max_write_id
    )


def _holds_any(data_file: DataFile, writes: Sequence[int]) -> bool:
    """Whether a data file can hold rows first written by one of ``writes``."""
    folder = data_file.folder
    if folder is None:
        return 0 in writes
    if isinstance(folder, BaseDir):
        return any(w <= folder.write_id for w in writes)
    return any(folder.min_write_id <= w <= folder.max_write_id for w in writes)


def _inside(current: pa.Array, change_range: ChangeRange) -> bool:
    """Whether every write of ``current`` lies inside the range (no filtering needed)."""
    if not len(current) or current.null_count:
        return False
    bounds = pc.min_max(current)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return low > change_range.from_write_id and high <= change_range.to_write_id


def _range_mask(current: pa.Array, change_range: ChangeRange) -> pa.Array:
    return pc.and_(
        pc.greater(current, pa.scalar(change_range.from_write_id, pa.int64())),
        pc.less_equal(current, pa.scalar(change_range.to_write_id, pa.int64())),
    )


def _deletes_in_range(
    reader: SliceReader, change_range: ChangeRange
) -> tuple[pa.Table, list[DeleteBatch]]:
    """The range's delete events: identity, deleting write and statement (-1: unknown)."""
    columns: list[list[pa.Array]] = [[], [], [], [], []]  # identity, write, statement
    batches = []
    for batch in reader.delete_batches(with_current=True):
        current = batch.current_transaction
        assert current is not None
        keys = [batch.original_transaction, batch.bucket, batch.row_id]
        committed = current
        if not _inside(current, change_range):  # some events of writes outside the range
            mask = _range_mask(current, change_range)
            if not pc.any(mask).as_py():
                continue
            keys = [pc.filter(a, mask) for a in keys]
            committed = pc.filter(current, mask)
        folder = batch.data_file.folder
        statement = folder.statement_id if isinstance(folder, DeltaDir) else None
        statements = pa.repeat(
            pa.scalar(-1 if statement is None else statement, pa.int64()), len(committed)
        )
        for found, values in zip(columns, [*keys, committed, statements], strict=True):
            found.append(values)
        batches.append(DeleteBatch(batch.data_file, *keys))
    schema = pa.schema(
        [(IDENTITY[0], pa.int64()), (IDENTITY[1], pa.int32()), (IDENTITY[2], pa.int64())]
        + [(_COMMIT, pa.int64()), (_STATEMENT, pa.int64())]
    )
    if not batches:
        return schema.empty_table(), batches
    table = pa.Table.from_arrays([pa.concat_arrays(found) for found in columns], schema=schema)
    return table, batches


@dataclass
class SliceChanges:
    """The changes of one slice (bookkeeping columns still on) and their accounting."""

    rows: pa.Table
    rows_read: int
    rows_unchanged: int
    delete_events: int


def event_changes(
    bucket_slice: BucketSlice,
    fs: AbstractFileSystem,
    columns: TableColumns,
    write_ids: ValidWriteIdList,
    change_range: ChangeRange,
    *,
    batch_rows: int = 131_072,
    timestamp_unit: str = "us",
) -> SliceChanges:
    """The slice's inserts and deletes of the range, from its ACID events."""
    in_range_deletes = tuple(
        f for f in bucket_slice.delete_delta_files if _in_range(f, change_range)
    )
    narrowed = replace(
        bucket_slice,
        original_files=(),
        base_files=(),
        delta_files=(),
        delete_delta_files=in_range_deletes,
    )
    deletes, delete_batches = _deletes_in_range(
        SliceReader(narrowed, fs, columns, write_ids, batch_rows=batch_rows), change_range
    )
    keys = DeleteKeySet.from_batches(delete_batches) if deletes.num_rows else None
    deleted_writes = sorted(set(pc.unique(deletes[IDENTITY[0]]).to_pylist()))
    # the files that can hold a deleted row (without values: only those the range inserted)
    outside = deleted_writes if change_range.delete_values else []
    scanned = [
        f
        for f in bucket_slice.data_files
        if _in_range(f, change_range) or (outside and _holds_any(f, outside))
    ]
    # keep whole folders: synthetic row ids of plain files count the folder's earlier files
    folders = {f.folder.name if f.folder is not None else "" for f in scanned}

    def kept(files: Iterable[DataFile]) -> tuple[DataFile, ...]:
        return tuple(f for f in files if (f.folder.name if f.folder is not None else "") in folders)

    reader = SliceReader(
        replace(
            bucket_slice,
            original_files=kept(bucket_slice.original_files),
            base_files=kept(bucket_slice.base_files),
            delta_files=kept(bucket_slice.delta_files),
            delete_delta_files=(),
        ),
        fs,
        columns,
        write_ids,
        batch_rows=batch_rows,
        timestamp_unit=timestamp_unit,
    )

    def inserted(batch: RowBatch) -> pa.Array | None:
        if not _in_range(batch.data_file, change_range):
            return None
        return _visible(_range_mask(batch.current_transaction, change_range), batch)

    def deleted(batch: RowBatch) -> pa.Array | None:
        if keys is None:
            return None
        hits = keys.match(batch.original_transaction, batch.bucket, batch.row_id)
        return None if hits is None else _visible(hits, batch)

    # the masks of the last batch ``changed`` saw: the reader yields it again with its
    # columns, whole when every row was picked (the same identity arrays)
    seen: tuple[pa.Array | None, pa.Array | None, pa.Array | None] = (None, None, None)

    def masks(batch: RowBatch) -> tuple[pa.Array | None, pa.Array | None]:
        nonlocal seen
        if seen[0] is batch.row_id:
            return seen[1], seen[2]
        found = inserted(batch), deleted(batch)
        seen = (batch.row_id, *found)
        return found

    def changed(batch: RowBatch) -> pa.Array | None:
        insert, delete = masks(batch)
        if insert is None or delete is None:
            return delete if insert is None else insert
        return pc.or_(insert, delete)

    def holds_deleted(stripe: StripeIdentity) -> bool:
        return keys is not None and keys.may_hold(
            stripe.original_transaction, stripe.bucket, stripe.row_id
        )

    def may_change(data_file: DataFile) -> Callable[[StripeIdentity], bool] | None:
        # a delta of the range holds inserts; any other file only the rows deletes hit
        return None if _in_range(data_file, change_range) else holds_deleted

    inserts, preimages = [], []
    # the values of a row are read only for the changed rows (identities read first): a
    # delete's values are in the base, read only in the stripes holding a deleted row, and
    # the base's stripes whose identity bounds hold no delete key are not read at all
    for batch in reader.data_batches(select=changed, may_pick=may_change):
        insert, delete = masks(batch)
        for mask, found in ((insert, inserts), (delete, preimages)):
            if mask is not None and pc.any(mask).as_py():
                identity = [batch.original_transaction, batch.bucket, batch.row_id]
                found.append(_rows(batch.columns, identity, batch.current_transaction, mask))
    names = list(columns.names)
    fields = columns.arrow_fields(timestamp_unit)
    insert_rows = _finish_inserts(_concat(inserts, fields), names)
    found = _concat(preimages, fields)
    if change_range.delete_values:
        delete_rows = _finish_deletes(found, deletes, names, bucket_slice)
    else:  # each event with the row the range inserted, or its identity alone
        delete_rows = _delete_rows(_aligned_preimages(found, deletes), deletes, names)
    rows = pa.concat_tables([insert_rows, delete_rows])
    return SliceChanges(
        rows,
        rows_read=reader.rows_in_files,
        rows_unchanged=reader.rows_in_files - rows.num_rows,
        delete_events=deletes.num_rows,
    )


def _visible(mask: pa.Array, batch: RowBatch) -> pa.Array:
    return mask if batch.visible is None else pc.and_(mask, batch.visible)


def _rows(
    values: Sequence[pa.Array], identity: Sequence[pa.Array], current: pa.Array, mask: pa.Array
) -> list[pa.Array]:
    arrays = [*values, *identity, current]
    if not mask.null_count and pc.all(mask).as_py():
        return arrays  # every row (a delta of the range, a span of deleted rows)
    return [pc.filter(a, mask) for a in arrays]


def _concat(parts: list[list[pa.Array]], fields: Sequence[pa.Field]) -> pa.Table:
    schema = pa.schema(
        list(fields)
        + [
            pa.field(IDENTITY[0], pa.int64()),
            pa.field(IDENTITY[1], pa.int32()),
            pa.field(IDENTITY[2], pa.int64()),
            pa.field(ROW_WRITE, pa.int64()),
        ]
    )
    if not parts:
        return schema.empty_table()
    return pa.Table.from_batches(
        [pa.RecordBatch.from_arrays(p, schema=schema) for p in parts], schema=schema
    )


def _aligned_preimages(found: pa.Table, deletes: pa.Table) -> pa.Table:
    """A row for each delete event, in the events' order (``delete_values`` false): the row
    found (one the range inserted), else the event's identity, the table's columns null. Such
    a row's write is its ``originalTransaction``, at or below A (the range's rows are read)."""
    n = deletes.num_rows
    if found.num_rows:
        events = deletes.select(list(IDENTITY)).append_column("__event", arange(n))
        keyed = found.select(list(IDENTITY)).append_column(_POSITION, arange(found.num_rows))
        joined = events.join(keyed, keys=list(IDENTITY), join_type="left outer")
        joined = joined.take(pc.sort_indices(joined["__event"]))
        rows = found.take(joined[_POSITION])  # a null position: a row of nulls
    else:
        rows = pa.Table.from_arrays(
            [pa.nulls(n, f.type) for f in found.schema], schema=found.schema
        )
    known = {**{c: deletes[c] for c in IDENTITY}, ROW_WRITE: deletes[IDENTITY[0]]}
    for name, values in known.items():
        i = rows.schema.get_field_index(name)
        field = rows.schema.field(i)
        rows = rows.set_column(i, field, pc.coalesce(rows[name], pc.cast(values, field.type)))
    return rows


def _statement_of(bucket: pa.Array | pa.ChunkedArray) -> pa.Array:
    return pc.cast(pc.bit_wise_and(bucket, pa.scalar(_STATEMENT_BITS, pa.int32())), pa.int64())


def _finish_inserts(rows: pa.Table, names: Sequence[str]) -> pa.Table:
    n = rows.num_rows
    commit = rows[ROW_WRITE]
    return bookkeeping_rows(
        rows,
        names,
        kind=0,
        commit=commit,
        statement=_statement_of(rows[IDENTITY[1]]),
        phase=pa.repeat(pa.scalar(1, pa.int64()), n),
    )


def _finish_deletes(
    preimages: pa.Table, deletes: pa.Table, names: Sequence[str], bucket_slice: BucketSlice
) -> pa.Table:
    """Pre-images joined to their delete events: the deleting write and its ordinal."""
    if not deletes.num_rows and not preimages.num_rows:  # nothing to join
        none = pa.array([], pa.int64())
        return bookkeeping_rows(preimages, names, kind=1, commit=none, statement=none, phase=none)
    matched = matched_in_order(preimages, deletes, IDENTITY, _POSITION)
    joined, same_order = matched if matched is not None else (None, False)
    if joined is None:
        keyed = preimages.select(list(IDENTITY))
        keyed = keyed.append_column(_POSITION, arange(preimages.num_rows))
        # only the identity and positions go through the join (it refuses some payload types)
        joined = keyed.join(deletes, keys=list(IDENTITY), join_type="inner")
    if joined.num_rows != deletes.num_rows:
        raise ChangeRowsError(
            f"slice {bucket_slice.key}: {deletes.num_rows} delete events in the range but "
            f"{joined.num_rows} of the rows they delete found in its files"
        )
    rows = preimages if same_order else preimages.take(joined[_POSITION])
    return _delete_rows(rows, joined, names)


def _delete_rows(rows: pa.Table, events: pa.Table, names: Sequence[str]) -> pa.Table:
    """Deleted ``rows`` with their delete ``events`` (one each, in the same order): the
    deleting write and its ordinal."""
    statement = events[_STATEMENT]
    unknown = pc.equal(statement, pa.scalar(-1, pa.int64()))
    own = pc.equal(rows[ROW_WRITE], events[_COMMIT])  # a row the deleting write inserted
    # a minor-compacted delete delta keeps no statement: a delete of the write's own row
    # comes after that row's insert, any other first
    late = pc.and_(unknown, own)
    zero = pa.scalar(0, pa.int64())
    statement = pc.if_else(
        unknown, pc.if_else(own, _statement_of(rows[IDENTITY[1]]), zero), statement
    )
    phase = pc.if_else(late, pa.scalar(2, pa.int64()), zero)
    return bookkeeping_rows(
        rows, names, kind=1, commit=events[_COMMIT], statement=statement, phase=phase
    )


def bookkeeping_rows(
    rows: pa.Table,
    names: Sequence[str],
    *,
    kind: int,
    commit: pa.Array | pa.ChunkedArray,
    statement: pa.Array | pa.ChunkedArray,
    phase: pa.Array | pa.ChunkedArray,
) -> pa.Table:
    """Change rows in the form :func:`finish` takes: ``rows`` holds the table's columns
    ``names``, the identity and the inserting write (:data:`ROW_WRITE`); ``kind`` 0 for
    inserts, 1 for deletes."""
    n = rows.num_rows
    columns = [rows[name] for name in names] + [rows[c] for c in IDENTITY]
    extra = {
        _KIND: pa.repeat(pa.scalar(kind, pa.int8()), n),
        _COMMIT: pc.cast(commit, pa.int64()),
        _STATEMENT: pc.cast(statement, pa.int64()),
        _PHASE: pc.cast(phase, pa.int64()),
        ROW_WRITE: rows[ROW_WRITE],
    }
    return pa.Table.from_arrays(
        columns + list(extra.values()), names=list(names) + list(IDENTITY) + list(extra)
    )


@dataclass
class FinishedChanges:
    """A slice's change rows ready to write, with how many ``--net`` left out."""

    rows: pa.Table
    netted: int


def finish(
    rows: pa.Table,
    change_range: ChangeRange,
    partition_values: Sequence[tuple[str, pa.Scalar]],
    *,
    pair_any_write: bool = False,
) -> FinishedChanges:
    """Net, pair and order a slice's changes, as the feed's output columns.

    :param rows: changes in the form :func:`event_changes` gives them.
    :param change_range: the range, its key and ``net``.
    :param partition_values: the slice's partition columns and their values.
    :param pair_any_write: pair a delete with an insert of the key whatever the delete's write
        (the identity diff, whose deletes have none).
    """
    netted = 0
    if change_range.net and rows.num_rows:
        kinds = rows[_KIND]
        inserted_in_range = _range_mask(rows[ROW_WRITE], change_range)
        deleted = _identities(rows, pc.equal(kinds, 1))
        inserted = _identities(rows, pc.equal(kinds, 0))
        drop_insert = pc.and_(pc.equal(kinds, 0), _member(rows, deleted))
        drop_delete = pc.and_(
            pc.and_(pc.equal(kinds, 1), inserted_in_range), _member(rows, inserted)
        )
        keep = pc.invert(pc.or_(drop_insert, drop_delete))
        before = rows.num_rows
        rows = rows.filter(keep)
        netted = before - rows.num_rows
    change_type = pc.if_else(pc.equal(rows[_KIND], 0), INSERT, DELETE)
    commit = rows[_COMMIT]
    if change_range.key and rows.num_rows:
        change_type, commit = _pair(rows, change_range.key, pair_any_write)
    n = rows.num_rows
    # an identity diff's unpaired delete has no write: it comes first
    first = pa.scalar(change_range.from_write_id + 1, pa.int64())
    order = ordinal(pc.fill_null(commit, first), rows[_STATEMENT], rows[_PHASE])
    names = [c for c in rows.column_names if not c.startswith("__") and c not in IDENTITY]
    columns = [rows[c] for c in names]
    columns += [pa.repeat(value, n) for _, value in partition_values]
    out = pa.Table.from_arrays(
        columns
        + [change_type, commit, order]
        + [pc.cast(rows[IDENTITY[0]], pa.int64()), rows[IDENTITY[1]], rows[IDENTITY[2]]],
        names=names + [k for k, _ in partition_values] + [c for c, _ in CHANGE_COLUMNS],
    )
    order_by = ["_change_ordinal", *IDENTITY]
    if n > 1 and not in_order(out, order_by):  # (in order: the stable sort's order)
        out = out.take(pc.sort_indices(out, sort_keys=[(c, "ascending") for c in order_by]))
    return FinishedChanges(out, netted)


def _identities(rows: pa.Table, mask: pa.Array | pa.ChunkedArray) -> pa.Table:
    return rows.filter(mask).select(list(IDENTITY))


def _member(rows: pa.Table, identities: pa.Table) -> pa.Array:
    """Which rows carry one of ``identities``."""
    keyed = rows.select(list(IDENTITY)).append_column(_POSITION, arange(rows.num_rows))
    hit = keyed.join(identities, keys=list(IDENTITY), join_type="left semi")[_POSITION]
    return pc.is_in(arange(rows.num_rows), value_set=hit.combine_chunks())


def _pair(rows: pa.Table, key: Sequence[str], any_write: bool) -> tuple[pa.Array, pa.Array]:
    """Change types with updates paired: one delete and one insert of the same key by the
    same write (or, ``any_write``, by any); and the commits (a paired delete takes its
    insert's write when it had none)."""
    missing = [k for k in key if k not in rows.column_names]
    if missing:
        raise ValueError(f"--key: {missing} are not columns of the table ({rows.column_names})")
    n = rows.num_rows
    kinds = rows[_KIND]
    if pc.min(kinds).as_py() == pc.max(kinds).as_py() or (
        not any_write and not _some_write_deletes_and_inserts(rows)
    ):  # only inserts, or only deletes, or no write doing both: nothing to pair
        return pc.if_else(pc.equal(kinds, 0), INSERT, DELETE), rows[_COMMIT]
    group = list(key) if any_write else [_COMMIT, *key]
    keyed = rows.select([*group, _KIND]).append_column(_POSITION, arange(n))
    keyed = keyed.filter(pc.invert(_any_null(keyed, key)))
    counts = keyed.group_by(group).aggregate([(_KIND, "sum"), (_KIND, "count")])
    # exactly one delete (kind 1) and one insert (kind 0): sum 1 over count 2
    pairs = counts.filter(
        pc.and_(pc.equal(counts[f"{_KIND}_count"], 2), pc.equal(counts[f"{_KIND}_sum"], 1))
    ).select(group)
    paired = keyed.join(pairs, keys=group, join_type="inner")
    is_paired = pc.is_in(arange(n), value_set=paired[_POSITION].combine_chunks())
    change_type = pc.if_else(
        is_paired,
        pc.if_else(pc.equal(kinds, 0), UPDATE_POSTIMAGE, UPDATE_PREIMAGE),
        pc.if_else(pc.equal(kinds, 0), INSERT, DELETE),
    )
    commit = rows[_COMMIT]
    if any_write and paired.num_rows:
        # the insert's write, for its paired delete
        inserts = (
            paired.filter(pc.equal(paired[_KIND], 0))
            .select(list(key))
            .append_column(
                "__insert_position", paired.filter(pc.equal(paired[_KIND], 0))[_POSITION]
            )
        )
        deletes = paired.filter(pc.equal(paired[_KIND], 1)).select([*key, _POSITION])
        matched = deletes.join(inserts, keys=list(key), join_type="inner")
        written = pc.take(commit, matched["__insert_position"])
        values = commit.combine_chunks() if isinstance(commit, pa.ChunkedArray) else commit
        positions = matched[_POSITION].combine_chunks()
        replacement = dict(zip(positions.to_pylist(), written.to_pylist(), strict=True))
        commit = pa.array(
            [replacement.get(i, v) for i, v in enumerate(values.to_pylist())], pa.int64()
        )
    return change_type, commit


def _some_write_deletes_and_inserts(rows: pa.Table) -> bool:
    kinds = rows[_KIND]
    deleting = pc.unique(pc.filter(rows[_COMMIT], pc.equal(kinds, 1)))
    inserting = pc.filter(rows[_COMMIT], pc.equal(kinds, 0))
    return bool(pc.any(pc.is_in(inserting, value_set=deleting)).as_py())


def _any_null(table: pa.Table, key: Sequence[str]) -> pa.Array:
    mask = pc.is_null(table[key[0]])
    for name in key[1:]:
        mask = pc.or_(mask, pc.is_null(table[name]))
    return mask


__all__ = [
    "CHANGE_COLUMNS",
    "CHANGE_TYPE",
    "CHANGE_TYPES",
    "ChangeRange",
    "ChangeRowsError",
    "CompactedRangeError",
    "FinishedChanges",
    "ROW_WRITE",
    "SliceChanges",
    "bookkeeping_rows",
    "compacted_base",
    "event_changes",
    "finish",
    "ordinal",
    "slice_has_changes",
]
