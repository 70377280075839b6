"""Which rows of an ORC stripe to decode for the rows a reader picked, and how.

Three ways read rows ``low`` to ``high`` of a stripe: decoding the whole stripe (pyarrow), its
first ``high + 1`` rows (pyarrow, :mod:`.orc_prefix`), or just the span by seeking (pyorc, a
Python value a value). Each reads the first compression blocks of the streams; beyond that
they cost what they decode, a sought row about :data:`_SEEK_COST` decoded ones.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from .data_file_open import AcidFormatError, OpenFile

#: What a row read by seeking costs (:meth:`.OpenFile.rows_of`: a Python value a value), in
#: rows pyarrow decodes: measured, 5,000 rows of a 100,000-row stripe by pyorc cost about what
#: decoding the stripe does. Beyond the rows decoded, each way reads the first compression
#: blocks of the streams (:func:`_cheapest`). Stripes under :data:`SEEK_MIN_ROWS` rows are
#: decoded whole.
_SEEK_COST = 16
SEEK_MIN_ROWS = 10_000


def narrowed(low: int, high: int, may_hold: Callable[[int, int], bool]) -> tuple[int, int]:
    """The lowest and highest values ``v`` in ``low..high`` (``may_hold(low, high)`` being
    true) with ``may_hold(low, v)`` and ``may_hold(v, high)`` true, by bisection: what a
    test of bounds that holds for any bounds around a value it holds for can narrow.

    :param low: the lowest value.
    :param high: the highest value.
    :param may_hold: whether bounds (inclusive) may hold a wanted value.
    """
    a, b = low, high
    while a < b:
        middle = (a + b) // 2
        if may_hold(low, middle):
            b = middle
        else:
            a = middle + 1
    first = a
    a, b = first, high
    while a < b:
        middle = (a + b + 1) // 2
        if may_hold(middle, high):
            a = middle
        else:
            b = middle - 1
    return first, a


def _cheapest(low: int, high: int, stripe_rows: int) -> str:
    """How to read rows ``low`` to ``high`` of a stripe: ``"stripe"`` (decode it whole),
    ``"prefix"`` (its first ``high + 1`` rows) or ``"seek"`` (the span, by pyorc), by their
    cost in rows pyarrow decodes (a span sought: :data:`_SEEK_COST` a row); ties go to the
    whole stripe, and a stripe under :data:`SEEK_MIN_ROWS` rows is decoded whole."""
    if stripe_rows < SEEK_MIN_ROWS:
        return "stripe"
    costs = {"stripe": stripe_rows, "prefix": high + 1, "seek": (high - low + 1) * _SEEK_COST}
    return min(costs, key=lambda way: costs[way])


def read_span(
    opened: OpenFile,
    index: int,
    first_row: int,
    rows: tuple[int, int],
    stripe_rows: int,
    columns: list[str],
    timestamp_unit: str,
) -> tuple[list[pa.Array], int] | None:
    """``columns`` of stripe ``index`` (whose first row is the file's ``first_row``) covering
    its rows ``rows`` (the first and the last), and the stripe position of their first value,
    read the cheapest way (:func:`_cheapest`): the stripe's first rows up to the last
    (:meth:`.OpenFile.stripe_prefix`), or the span by seeking (:meth:`.OpenFile.rows_of`);
    None when decoding the whole stripe costs less, or neither reads (what pyarrow's stripe
    read then gives is the reference).

    :param opened: the opened ORC file.
    :param index: the stripe's number.
    :param first_row: the file's number of the stripe's first row.
    :param rows: the stripe positions of the first and the last row wanted.
    :param stripe_rows: the stripe's row count.
    :param columns: the top-level columns to read, in the file's order.
    :param timestamp_unit: the unit of the timestamps read outside pyarrow's ``ns``.
    """
    low, high = rows
    way = _cheapest(low, high, stripe_rows)
    if way == "prefix":
        try:
            batch = opened.stripe_prefix(index, columns, high + 1, timestamp_unit)
        except AcidFormatError:
            batch = None
        if batch is not None:
            return list(batch.columns), 0
        way = "seek" if (high - low + 1) * _SEEK_COST < stripe_rows else "stripe"
    if way == "seek":
        try:
            found = opened.rows_of(columns, first_row + low, high - low + 1, timestamp_unit)
        except AcidFormatError:
            return None
        return found, low
    return None


__all__ = ["SEEK_MIN_ROWS", "narrowed", "read_span"]
