"""Binding an expression to a table schema: names resolved, literals coerced, NOT pushed down.

Names match case-insensitively (an exact match wins) and ``a.b`` walks into struct ``a``.
Each literal is coerced to its column's type; a literal that falls between two values the
column can hold turns the comparison into an exact one on the neighbouring values (or into
TRUE / FALSE / IS NOT NULL).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from .column_types import type_family
from .expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Compare,
    Expr,
    In,
    IsNaN,
    IsNull,
    Leaf,
    Like,
    NotIn,
    NotLike,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    PredicateError,
    Ref,
    StartsWith,
    and_,
    or_,
    rewrite_not,
)
from .literals import parse_bool, parse_date, parse_float, parse_number, parse_timestamp

__all__ = ["bind"]


def bind(expr: Expr, schema: pa.Schema) -> Expr:
    """Resolve column names against ``schema`` and coerce literals to the column types.

    Names match case-insensitively (an exact match wins); ``a.b`` walks into struct ``a``.
    NOT is pushed down first (:func:`rewrite_not`), so the result has no Not nodes.
    Raises :class:`PredicateError` for unknown columns or impossible comparisons.
    """
    if not isinstance(schema, pa.Schema):
        raise PredicateError(f"bind needs a pyarrow.Schema, got {type(schema).__name__}")
    return _bind(rewrite_not(expr), schema)


def _bind(expr: Expr, schema: pa.Schema) -> Expr:
    if isinstance(expr, (AlwaysTrue, AlwaysFalse)):
        return expr
    if isinstance(expr, And):
        return and_(*(_bind(c, schema) for c in expr.children))
    if isinstance(expr, Or):
        return or_(*(_bind(c, schema) for c in expr.children))
    if isinstance(expr, Leaf):
        return _bind_leaf(expr, _resolve(expr.ref, schema))
    raise PredicateError(f"not a predicate expression: {expr!r}")


def _field_names(fields: Iterable[pa.Field], prefix: str = "") -> list[str]:
    out = []
    for f in fields:
        out.append(prefix + f.name)
        if pa.types.is_struct(f.type):
            out.extend(_field_names(list(f.type), prefix + f.name + "."))
    return out


def _find(fields: Sequence[pa.Field], name: str) -> pa.Field | None:
    for f in fields:
        if f.name == name:
            return f
    matches = [f for f in fields if f.name.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None


def _resolve(ref: Ref, schema: pa.Schema) -> Ref:
    fields = list(schema)
    whole = _find(fields, ref.name)
    if whole is not None:
        return Ref(whole.name, whole.type)
    parts = ref.name.split(".")
    resolved: list[str] = []
    current: Sequence[pa.Field] = fields
    found: pa.Field | None = None
    for i, part in enumerate(parts):
        found = _find(current, part)
        if found is None:
            break
        resolved.append(found.name)
        if i < len(parts) - 1:
            if not pa.types.is_struct(found.type):
                found = None
                break
            current = list(found.type)
    if found is None:
        available = ", ".join(_field_names(fields)) or "(none)"
        raise PredicateError(f"unknown column {ref.name!r}; available columns: {available}")
    return Ref(".".join(resolved), found.type)


class _Inexact:
    """A literal that falls strictly between two representable column values."""

    def __init__(self, floor: Any, ceil: Any) -> None:
        self.floor = floor  # None: below the type's range
        self.ceil = ceil  # None: above the type's range


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

_NAN = object()  # marker: the literal is a NaN


def _coerce(value: Any, ref: Ref) -> Any:
    """Literal -> exact column value, an _Inexact, or _NAN. Raises PredicateError."""
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
        return _NAN
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
                return _NAN
        if isinstance(num, decimal.Decimal) and num.is_nan():
            return _NAN
        if not isinstance(num, (int, float, decimal.Decimal)):
            raise bad()
        if family == "float":
            return float(num)
        if family == "int":
            lo, hi = _INT_RANGES.get(t, (-(2**63), 2**63 - 1))
            if isinstance(num, float) and math.isinf(num):
                return _Inexact(hi, None) if num > 0 else _Inexact(None, lo)
            d = decimal.Decimal(repr(num)) if isinstance(num, float) else decimal.Decimal(num)
            if d == d.to_integral_value():
                iv = int(d)
                if iv > hi:
                    return _Inexact(hi, None)
                if iv < lo:
                    return _Inexact(None, lo)
                return iv
            f = int(d.to_integral_value(rounding=decimal.ROUND_FLOOR))
            if f >= hi:
                return _Inexact(hi, None)
            if f + 1 <= lo:
                return _Inexact(None, lo)
            return _Inexact(f, f + 1)
        # decimal
        if isinstance(num, float) and math.isinf(num):
            limit = decimal.Decimal(10) ** (t.precision - t.scale) - decimal.Decimal(10) ** (
                -t.scale
            )
            return _Inexact(limit, None) if num > 0 else _Inexact(None, -limit)
        d = decimal.Decimal(repr(num)) if isinstance(num, float) else decimal.Decimal(num)
        return _coerce_decimal(d, t.precision, t.scale)
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
            return _Inexact(day, day + dt.timedelta(days=1))
        if isinstance(value, dt.date):
            return value
        if isinstance(value, str):
            try:
                return parse_date(value)
            except ValueError:
                try:
                    return _coerce(parse_timestamp(value), ref)
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
        unit = t.unit
        if unit == "s" and value.microsecond:
            f = value.replace(microsecond=0)
            return _Inexact(f, f + dt.timedelta(seconds=1))
        if unit == "ms" and value.microsecond % 1000:
            f = value.replace(microsecond=value.microsecond - value.microsecond % 1000)
            return _Inexact(f, f + dt.timedelta(milliseconds=1))
        return value
    raise bad()  # pragma: no cover


def _coerce_decimal(d: decimal.Decimal, precision: int, scale: int) -> Any:
    quantum = decimal.Decimal(1).scaleb(-scale)
    limit = decimal.Decimal(10) ** (precision - scale) - quantum
    ctx = decimal.Context(prec=max(100, precision + 10))
    if d > limit:
        return _Inexact(limit, None)
    if d < -limit:
        return _Inexact(None, -limit)
    q = d.quantize(quantum, context=ctx)
    if q == d:
        return q
    f = d.quantize(quantum, rounding=decimal.ROUND_FLOOR, context=ctx)
    c = d.quantize(quantum, rounding=decimal.ROUND_CEILING, context=ctx)
    return _Inexact(f, c)


def _bind_leaf(leaf: Expr, ref: Ref) -> Expr:
    family = type_family(ref.type)
    if isinstance(leaf, IsNull):
        return IsNull(ref)
    if isinstance(leaf, NotNull):
        return NotNull(ref)
    if isinstance(leaf, IsNaN):
        return IsNaN(ref) if family == "float" else AlwaysFalse()
    if isinstance(leaf, NotNaN):
        return NotNaN(ref) if family == "float" else NotNull(ref)
    if isinstance(leaf, (StartsWith, NotStartsWith, Like, NotLike)):
        if family != "string":
            raise PredicateError(
                f"LIKE needs a string column; column {ref.name!r} is of type {ref.type}"
            )
        if isinstance(leaf, StartsWith):
            return StartsWith(ref, leaf.prefix)
        if isinstance(leaf, NotStartsWith):
            return NotStartsWith(ref, leaf.prefix)
        if isinstance(leaf, Like):
            prefix = _like_prefix(leaf.pattern)
            like = Like(ref, leaf.pattern)
            return and_(StartsWith(ref, prefix), like) if prefix else like
        return NotLike(ref, leaf.pattern)
    if isinstance(leaf, Compare):
        v = _coerce(leaf.value, ref)
        op = leaf.op
        if v is _NAN:
            if op == "=":
                return IsNaN(ref) if family == "float" else AlwaysFalse()
            if op == "!=":
                return NotNaN(ref) if family == "float" else NotNull(ref)
            raise PredicateError(
                f"'{ref.name} {op} NaN' is never true; use isnan({ref.name}) instead"
            )
        if isinstance(v, _Inexact):
            if op == "=":
                return AlwaysFalse()
            if op == "!=":
                return NotNull(ref)
            if op in ("<", "<="):
                return AlwaysFalse() if v.floor is None else Compare("<=", ref, v.floor)
            return AlwaysFalse() if v.ceil is None else Compare(">=", ref, v.ceil)
        return Compare(op, ref, v)
    if isinstance(leaf, (In, NotIn)):
        exact = []
        has_nan = False
        for value in leaf.values:
            v = _coerce(value, ref)
            if v is _NAN:
                has_nan = True
            elif not isinstance(v, _Inexact):
                exact.append(v)
        if isinstance(leaf, In):
            nan_part: Expr = (
                (IsNaN(ref) if family == "float" else AlwaysFalse()) if has_nan else AlwaysFalse()
            )
            in_part: Expr = In(ref, tuple(exact)) if exact else AlwaysFalse()
            if isinstance(in_part, In) and len(in_part.values) == 1:
                in_part = Compare("=", ref, in_part.values[0])
            return or_(in_part, nan_part)
        nan_part = (NotNaN(ref) if family == "float" else NotNull(ref)) if has_nan else AlwaysTrue()
        not_in: Expr = NotIn(ref, tuple(exact)) if exact else NotNull(ref)
        if isinstance(not_in, NotIn) and len(not_in.values) == 1:
            not_in = Compare("!=", ref, not_in.values[0])
        return and_(not_in, nan_part)
    raise PredicateError(f"not a predicate expression: {leaf!r}")  # pragma: no cover


def _like_prefix(pattern: str) -> str:
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i + 1])
            i += 2
            continue
        if ch in "%_":
            break
        out.append(ch)
        i += 1
    return "".join(out)
