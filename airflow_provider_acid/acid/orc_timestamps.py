"""ORC stripes whose timestamps lie outside Arrow's nanosecond range (1677-09-21 .. 2262-04-11).

pyarrow's ORC reader turns every ``timestamp`` into nanoseconds since 1970 in an int64 and
refuses a stripe holding any value outside that range ("ORC timestamp ... is out of range for
nanosecond resolution"). Hive allows years 0001 to 9999, and ``9999-12-31`` is the usual
"open-ended" value of slowly changing dimensions. :func:`read_stripe` reads a stripe with pyarrow
as before (the fast path: nothing changes for in-range files), and only when pyarrow refuses it,
reads it again in two parts:

* every column without a timestamp in it, by pyarrow (nested fields selected by their dotted
  names, ``row.id``);
* each column holding a timestamp (``row.ts``, or ``row.events`` of type
  ``array<struct<at:timestamp>>``), by pyorc, which hands each timestamp over as ORC's own
  ``(seconds, nanoseconds)`` pair (the same ORC C++ decoder pyarrow uses, read in UTC as
  pyarrow reads), turned into an integer of the caller's unit exactly: no float, no Python
  ``datetime`` (whose range is the same, but whose conversions are not exact).

Files written by Trino (the footer's writer ``TRINO``) get one more correction, in both paths:
Trino's ORC writer stores a timestamp before 1970 whose fraction is below a millisecond
(``1900-01-01 00:00:00.000001``) with its seconds one higher than Apache ORC's writers do, and
its own reader takes that second back (``seconds < 0 and nanos != 0``), where Apache ORC's
readers (Java and C++, Hive's and pyarrow's) take it back only for ``nanos > 999999``
(trinodb/trino#22511, "intentional", prestodb/presto#10642). :func:`trino_seconds` applies
Trino's rule to such files, so the provider reads a Trino-written table as Trino does. (Values
between -1 s and 0 exclusive are not representable in ORC at all; every reader returns them a
second late.)

ORC's seconds count the proleptic Gregorian calendar (what Hive 3.1+ and Trino write; Java's
``java.time``), so ``1582-10-04`` is followed by ``1582-10-05``, as Hive 3.1+ reads it. A value
that the unit would cut (``.0000001`` in ``us``) is refused naming the column, as the fast path
refuses it. Dates need nothing of this: ORC's days fit Arrow's ``date32`` over the whole range.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as pa_orc
import pyorc

#: The footer's writer id of Trino's ORC writer (``ORCFile.writer``).
TRINO_WRITER = "TRINO"
_OUT_OF_RANGE = "out of range for nanosecond resolution"
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def is_out_of_range(exc: BaseException) -> bool:
    """Whether pyarrow refused a stripe for a timestamp outside the nanosecond range."""
    return isinstance(exc, pa.ArrowInvalid) and _OUT_OF_RANGE in str(exc)


def _has_timestamp(arrow_type: pa.DataType) -> bool:
    if pa.types.is_timestamp(arrow_type):
        return True
    if pa.types.is_struct(arrow_type):
        return any(_has_timestamp(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if pa.types.is_map(arrow_type):
        return _has_timestamp(arrow_type.key_type) or _has_timestamp(arrow_type.item_type)
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return _has_timestamp(arrow_type.value_type)
    return False


def _with_unit(arrow_type: pa.DataType, unit: str) -> pa.DataType:
    """``arrow_type`` with every timestamp in ``unit`` (time zone kept)."""
    if pa.types.is_timestamp(arrow_type):
        return pa.timestamp(unit, tz=arrow_type.tz)
    if pa.types.is_struct(arrow_type):
        fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
        return pa.struct([f.with_type(_with_unit(f.type, unit)) for f in fields])
    if pa.types.is_map(arrow_type):
        return pa.map_(
            _with_unit(arrow_type.key_type, unit), _with_unit(arrow_type.item_type, unit)
        )
    if pa.types.is_list(arrow_type):
        return pa.list_(_with_unit(arrow_type.value_type, unit))
    return arrow_type


_NS = 1_000_000_000
_INT64 = (-(2**63), 2**63 - 1)


def trino_seconds(array: pa.Array) -> pa.Array:
    """A timestamp column of a Trino-written file as Trino reads it: a second earlier where the
    value is before 1970 and its fraction of a second is below one millisecond (nonzero).

    :param array: a timestamp array (any unit) decoded by Apache ORC's reader.
    """
    per_second = _PER_SECOND[array.type.unit]
    if per_second <= 1_000:  # no sub-millisecond fraction to correct
        return array
    raw = pc.fill_null(array.view(pa.int64()), 0).to_numpy()
    fraction = raw % per_second  # numpy's modulo: the floor's remainder, never negative
    late = (raw < 0) & (fraction > 0) & (fraction < per_second // 1_000)
    if not late.any():
        return array
    mask = pc.is_null(array).to_numpy(zero_copy_only=False) if array.null_count else None
    return pa.array(raw - late * per_second, pa.int64(), mask=mask).view(array.type)


def _each_timestamp(array: pa.Array, fix: Callable[[pa.Array], pa.Array]) -> pa.Array:
    """``array`` with ``fix`` applied to every timestamp in it (in structs and lists too)."""
    kind = array.type
    if pa.types.is_timestamp(kind):
        return fix(array)
    if not _has_timestamp(kind):
        return array
    mask = pc.is_null(array) if array.null_count else None
    if pa.types.is_struct(kind):
        children = [_each_timestamp(array.field(i), fix) for i in range(kind.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)
    if pa.types.is_list(kind):
        values = _each_timestamp(array.values, fix)
        return pa.ListArray.from_arrays(array.offsets, values, mask=mask)
    return array  # a map holding timestamps: as read


def trino_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch of a Trino-written file with :func:`trino_seconds` applied to its timestamps.

    :param batch: a stripe (or part of one) read by pyarrow.
    """
    columns = [_each_timestamp(c, trino_seconds) for c in batch.columns]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _converter(unit: str, column: str, trino_written: bool) -> type:
    """A pyorc converter of ORC's ``(seconds, nanoseconds)`` to an integer count of ``unit``."""
    per_second = _PER_SECOND[unit]
    step = 1_000_000_000 // per_second

    class _Exact:
        @staticmethod
        def from_orc(seconds: int, nanoseconds: int, timezone: Any = None) -> int:
            if trino_written and seconds < 0 and 0 < nanoseconds <= 999_999:
                seconds -= 1
            whole, cut = divmod(nanoseconds, step)
            if cut:
                raise pa.ArrowInvalid(
                    f"column {column!r}: timestamp {seconds}s + {nanoseconds}ns would lose data "
                    f"in unit {unit!r}"
                )
            value = seconds * per_second + whole
            if not _INT64[0] <= value <= _INT64[1]:
                raise pa.ArrowInvalid(
                    f"column {column!r}: timestamp {seconds}s is outside the range of unit "
                    f"{unit!r} (read with timestamp_unit='us' for years 0001 to 9999)"
                )
            return value

        @staticmethod
        def to_orc(*args: Any) -> Any:  # read only
            raise NotImplementedError

    return _Exact


def _python_value(value: Any, arrow_type: pa.DataType) -> Any:
    """pyorc's value (structs as tuples, maps as pairs or dicts) as ``pa.array`` takes it."""
    if value is None:
        return None
    if pa.types.is_struct(arrow_type):
        return {
            arrow_type.field(i).name: _python_value(v, arrow_type.field(i).type)
            for i, v in enumerate(value)
        }
    if pa.types.is_map(arrow_type):
        pairs = value.items() if isinstance(value, dict) else value
        return [
            (_python_value(k, arrow_type.key_type), _python_value(v, arrow_type.item_type))
            for k, v in pairs
        ]
    if pa.types.is_list(arrow_type):
        return [_python_value(v, arrow_type.value_type) for v in value]
    if pa.types.is_decimal(arrow_type) and isinstance(value, str):
        return Decimal(value)
    return value


def _exact_column(
    open_file: Callable[[], IO[bytes]],
    index: int,
    path: Sequence[str],
    arrow_type: pa.DataType,
    unit: str,
    trino_written: bool,
) -> pa.Array:
    """One column (``path`` of names from the top) of stripe ``index`` read by pyorc."""
    return _pyorc_column(
        open_file, path, arrow_type, unit, trino_written, lambda reader: reader.read_stripe(index)
    )


class _DecimalText:
    """pyorc's decimals kept as the text it makes of them: a column of them becomes an Arrow
    decimal by one cast (:func:`_arrow_values`), not by a Python ``Decimal`` a value."""

    from_orc = staticmethod(str)

    @staticmethod
    def to_orc(*args: Any) -> Any:  # read only
        raise NotImplementedError


def _arrow_values(values: list[Any], arrow_type: pa.DataType) -> pa.Array:
    """One column of the rows pyorc read (structs as tuples, decimals as text, timestamps as
    integers of the unit) as an Arrow array of ``arrow_type``: column by column, each child
    of a struct or list built from one Python list (no Python value made per row beyond
    pyorc's own)."""
    if pa.types.is_struct(arrow_type):
        fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
        mask = None
        if None in values:
            mask = pa.array([v is None for v in values], pa.bool_())
            filler = (None,) * len(fields)
            values = [filler if v is None else v for v in values]
        columns = list(zip(*values, strict=True)) if values else [()] * len(fields)
        children = [_arrow_values(list(c), f.type) for c, f in zip(columns, fields, strict=True)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    if pa.types.is_list(arrow_type):
        offsets, flat = [0], []
        for value in values:
            if value is not None:
                flat.extend(value)
            offsets.append(len(flat))
        mask = pa.array([v is None for v in values], pa.bool_()) if None in values else None
        child = _arrow_values(flat, arrow_type.value_type)
        return pa.ListArray.from_arrays(
            pa.array(offsets, pa.int32()), child, type=arrow_type, mask=mask
        )
    if pa.types.is_decimal(arrow_type):
        return pc.cast(pa.array(values, pa.string()), arrow_type)
    if pa.types.is_map(arrow_type) or _has_decimal(arrow_type):
        return pa.array([_python_value(v, arrow_type) for v in values], type=arrow_type)
    return pa.array(values, type=arrow_type)


def _has_decimal(arrow_type: pa.DataType) -> bool:
    if pa.types.is_decimal(arrow_type):
        return True
    return any(_has_decimal(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


def read_rows(
    open_file: Callable[[], IO[bytes]],
    columns: Sequence[pa.Field],
    first: int,
    count: int,
    unit: str,
    trino_written: bool = False,
) -> list[pa.Array]:
    """Rows ``first`` to ``first + count - 1`` (of the whole file) of top-level ``columns`` (in
    the file's order), read by pyorc, which seeks by the ORC row index: the row groups before
    ``first`` are skipped, not decoded. Timestamps come exact in ``unit`` (as
    :func:`read_stripe` gives those it cannot read in ``ns``). Each value becomes a Python
    value on its way to Arrow (about 2 us a row of five columns, and a few ms a column to
    start: what is read is the compression blocks holding the rows), so this pays over a
    stripe read for a short span of a big stripe only.

    :param open_file: opens the file as a Python file object.
    :param columns: the top-level columns, as pyarrow's schema of the file has them.
    :param first: the first row's number in the file.
    :param count: how many rows.
    :param unit: the unit of the timestamps read.
    :param trino_written: whether Trino wrote the file (see the module docstring).
    """
    names = [c.name for c in columns]
    timed = [c.name for c in columns if _has_timestamp(c.type)]
    converter = _converter(unit, ", ".join(timed or names), trino_written)
    converters = {
        pyorc.TypeKind.TIMESTAMP: converter,
        pyorc.TypeKind.TIMESTAMP_INSTANT: converter,
        pyorc.TypeKind.DECIMAL: _DecimalText,
    }
    with open_file() as handle:
        reader = pyorc.Reader(handle, column_names=names, converters=converters)
        reader.seek(first)
        rows = reader.read(count)
    if len(rows) != count:
        raise ValueError(f"read {len(rows)} rows from row {first}, not {count}")
    targets = [_with_unit(c.type, unit) for c in columns]
    if not rows:
        return [pa.array([], t) for t in targets]
    read = zip(*rows, strict=True)
    return [_arrow_values(list(v), t) for v, t in zip(read, targets, strict=True)]


def _pyorc_column(
    open_file: Callable[[], IO[bytes]],
    path: Sequence[str],
    arrow_type: pa.DataType,
    unit: str,
    trino_written: bool,
    rows: Callable[[pyorc.Reader], Any],
) -> pa.Array:
    """One column (``path`` of names from the top) of the ``rows`` pyorc reads."""
    dotted = ".".join(path)
    converter = _converter(unit, dotted, trino_written)
    converters = {pyorc.TypeKind.TIMESTAMP: converter, pyorc.TypeKind.TIMESTAMP_INSTANT: converter}
    with open_file() as handle:
        reader = pyorc.Reader(handle, column_names=[dotted], converters=converters)
        values = []
        for row in rows(reader):
            value = row[0]
            for _ in path[1:]:  # the selected field inside each enclosing struct
                value = None if value is None else value[0]
            values.append(_python_value(value, arrow_type))
    return pa.array(values, type=arrow_type)


def _plain_children(arrow_type: pa.DataType) -> list[str]:
    """The names of a struct's fields without a timestamp (none for any other type)."""
    if not pa.types.is_struct(arrow_type):
        return []
    fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
    return [f.name for f in fields if not _has_timestamp(f.type)]


def read_stripe(
    orc: pa_orc.ORCFile,
    open_file: Callable[[], IO[bytes]],
    index: int,
    columns: list[str] | None,
    unit: str,
    trino_written: bool = False,
) -> pa.RecordBatch:
    """Stripe ``index`` of ``orc`` (top-level ``columns``, or all), timestamps exact over Hive's
    whole range: pyarrow's own read when it can, else as the module docstring says.

    :param orc: the file opened by pyarrow.
    :param open_file: opens the same file again as a Python file object (for pyorc).
    :param index: the stripe's number.
    :param columns: top-level column names to read, or None for all.
    :param unit: the timestamp unit of the columns pyorc reads (pyarrow's are ``ns``).
    :param trino_written: whether Trino wrote the file (its timestamps then read as Trino
        reads them, see the module docstring).
    """
    try:
        batch = orc.read_stripe(index, columns=columns)
    except pa.ArrowInvalid as exc:
        if not is_out_of_range(exc):
            raise
    else:
        return trino_batch(batch) if trino_written else batch
    schema = orc.schema
    top = [schema.field(n) for n in columns] if columns is not None else list(schema)
    # one pyarrow read of everything without a timestamp: whole top-level columns, and the
    # timestamp-free fields of a top-level struct (an ACID file's ``row``) by dotted name
    fast_names = []
    for f in top:
        if not _has_timestamp(f.type):
            fast_names.append(f.name)
        else:
            fast_names.extend(f"{f.name}.{child}" for child in _plain_children(f.type))
    fast = orc.read_stripe(index, columns=fast_names) if fast_names else None
    arrays: list[pa.Array] = []
    for f in top:
        if not _has_timestamp(f.type):
            arrays.append(fast.column(f.name))
            continue
        plain = _plain_children(f.type)
        if not plain:  # a timestamp, or a struct or list of them: pyorc reads it whole
            target = _with_unit(f.type, unit)
            arrays.append(_exact_column(open_file, index, (f.name,), target, unit, trino_written))
            continue
        read = fast.column(f.name)
        by_name = {read.type.field(i).name: read.field(i) for i in range(read.type.num_fields)}
        children = [f.type.field(i) for i in range(f.type.num_fields)]
        values = [
            by_name[c.name]
            if c.name in by_name
            else _exact_column(
                open_file, index, (f.name, c.name), _with_unit(c.type, unit), unit, trino_written
            )
            for c in children
        ]
        fields = [c.with_type(v.type) for c, v in zip(children, values, strict=True)]
        mask = pc.invert(read.is_valid()) if read.null_count else None
        arrays.append(pa.StructArray.from_arrays(values, fields=fields, mask=mask))
    return pa.RecordBatch.from_arrays(arrays, names=[f.name for f in top])
