"""Coercing a literal to a column's type, for binding a comparison to that column.

:func:`coerce_literal` returns the exact column value, :data:`NAN` for a NaN literal, or an
:class:`Inexact` when the literal falls strictly between two values the column can hold
(``1.5`` for an integer column, a time with milliseconds for a column in seconds) or beyond
the type's range. It raises :class:`PredicateError`, naming the column, for a literal the
column cannot be compared with.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from .column_types import type_family
from .expressions import PredicateError, Ref
from .literals import parse_bool, parse_date, parse_float, parse_number, parse_timestamp

__all__ = ["NAN", "Inexact", "coerce_literal"]


class Inexact:
    """A literal that falls strictly between two representable column values."""

    def __init__(self, floor: Any, ceil: Any) -> None:
        self.floor = floor  # None: below the type's range
        self.ceil = ceil  # None: above the type's range


NAN = object()  # marker: the literal is a NaN

_INT_RANGES = {
    pa.int8(): (-(2**7), 2**7 - 1),
    pa.int16(): (-(2**15), 2**15 - 1),
    pa.int32(): (-(2**31), 2**31 - 1),
    pa.int64(): (-(2**63), 2**63 - 1),
    pa.uint8(): (0, 2**8 - 1),
    pa.uint16(): (0, 2**16 - 1),
    pa.uint32(): (0, 2**32 - 1),
    pa.uint64(): (0, 2**64 - 1),
}

# timestamp unit -> the microseconds of one step, for units coarser than a microsecond
_TIMESTAMP_STEPS = {"s": 1_000_000, "ms": 1000}


def coerce_literal(value: Any, ref: Ref) -> Any:
    """Literal -> exact column value, an :class:`Inexact`, or :data:`NAN`."""
    t = ref.type
    assert t is not None
    if pa.types.is_dictionary(t):
        t = t.value_type
    family = type_family(t)

    def bad(why: str = "") -> PredicateError:
        extra = f" ({why})" if why else ""
        return PredicateError(
            f"cannot compare column {ref.name!r} of type {t} with {value!r}{extra}"
        )

    if value is None:
        raise PredicateError(f"NULL literal for column {ref.name!r} never matches; use IS NULL")
    if isinstance(value, float) and math.isnan(value):
        return NAN
    if family is None:
        raise bad("this column type supports only IS [NOT] NULL")
    if family == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return parse_bool(value)
            except ValueError:
                raise bad() from None
        raise bad()
    if family in ("int", "float", "decimal"):
        return _coerce_number(value, t, family, bad)
    if family == "string":
        if isinstance(value, str):
            return value
        raise bad("compare a string column with a quoted string")
    if family == "date":
        if isinstance(value, dt.datetime):
            if value.tzinfo is not None:
                raise bad("a date column cannot be compared with a zoned timestamp")
            day = value.date()
            if value.time() == dt.time(0):
                return day
            return Inexact(day, day + dt.timedelta(days=1))
        if isinstance(value, dt.date):
            return value
        if isinstance(value, str):
            try:
                return parse_date(value)
            except ValueError:
                try:
                    return coerce_literal(parse_timestamp(value), ref)
                except ValueError:
                    raise bad("not a date") from None
        raise bad()
    if family == "timestamp":
        if isinstance(value, str):
            try:
                value = parse_timestamp(value)
            except ValueError as exc:
                raise bad(str(exc)) from None
        elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            value = dt.datetime(value.year, value.month, value.day)
        if not isinstance(value, dt.datetime):
            raise bad()
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        step = _TIMESTAMP_STEPS.get(t.unit)
        if step and value.microsecond % step:
            f = value.replace(microsecond=value.microsecond - value.microsecond % step)
            return Inexact(f, f + dt.timedelta(microseconds=step))
        return value
    raise bad()  # pragma: no cover


def _coerce_number(
    value: Any, t: pa.DataType, family: str, bad: Callable[..., PredicateError]
) -> Any:
    if isinstance(value, bool) or isinstance(value, (dt.date, dt.datetime)):
        raise bad()
    num: Any = value
    if isinstance(value, str):
        try:
            num = parse_number(value.strip(), lambda: ValueError(value))
        except ValueError:
            try:
                num = parse_float(value)
            except ValueError:
                raise bad("not a number") from None
        if isinstance(num, float) and math.isnan(num):
            return NAN
    if isinstance(num, decimal.Decimal) and num.is_nan():
        return NAN
    if not isinstance(num, (int, float, decimal.Decimal)):
        raise bad()
    if family == "float":
        return float(num)
    if family == "int":
        lo, hi = _INT_RANGES.get(t, (-(2**63), 2**63 - 1))
        d = _exact_decimal(num)
        if d.is_infinite():  # a float or a decimal: beyond every integer
            return _out_of_range(d, lo, hi)
        if d == d.to_integral_value():
            iv = int(d)
            return _out_of_range(iv, lo, hi) or iv
        f = int(d.to_integral_value(rounding=decimal.ROUND_FLOOR))
        return _out_of_range(d, lo, hi) or Inexact(f, f + 1)
    return _coerce_decimal(_exact_decimal(num), t.precision, t.scale)


def _exact_decimal(num: int | float | decimal.Decimal) -> decimal.Decimal:
    """The number as a Decimal; a float as the shortest text that reads back as it."""
    return decimal.Decimal(repr(num)) if isinstance(num, float) else decimal.Decimal(num)


def _out_of_range(num: Any, lo: Any, hi: Any) -> Inexact | None:
    """An Inexact beyond the end of [lo, hi] that ``num`` lies past, else None."""
    if num > hi:
        return Inexact(hi, None)
    if num < lo:
        return Inexact(None, lo)
    return None


def _coerce_decimal(d: decimal.Decimal, precision: int, scale: int) -> Any:
    quantum = decimal.Decimal(1).scaleb(-scale)
    limit = decimal.Decimal(10) ** (precision - scale) - quantum
    ctx = decimal.Context(prec=max(100, precision + 10))
    beyond = _out_of_range(d, -limit, limit)
    if beyond is not None:
        return beyond
    q = d.quantize(quantum, context=ctx)
    if q == d:
        return q
    f = d.quantize(quantum, rounding=decimal.ROUND_FLOOR, context=ctx)
    c = d.quantize(quantum, rounding=decimal.ROUND_CEILING, context=ctx)
    return Inexact(f, c)
