"""Evaluating a bound predicate on the rows of a pyarrow table (SQL three-valued logic)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .binding import bind
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
    Like,
    Not,
    NotIn,
    NotLike,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    PredicateError,
    Ref,
    StartsWith,
    is_bound,
)

__all__ = ["evaluate_rows"]


def _column(table: pa.Table, ref: Ref) -> pa.ChunkedArray:
    parts = ref.name.split(".")
    if ref.name in table.column_names:
        arr = table.column(ref.name)
    else:
        arr = table.column(parts[0])
        path: list[str] = []
        t = arr.type
        for part in parts[1:]:
            idx = t.get_field_index(part)
            if idx < 0:
                raise PredicateError(f"column {ref.name!r} not found in the table")
            path.append(part)
            t = t.field(idx).type
        if parts[1:]:
            arr = pc.struct_field(arr, parts[1:])
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    if type_family(arr.type) == "float" and not pa.types.is_float64(arr.type):
        arr = arr.cast(pa.float64())
    return arr


def _scalar(value: Any, t: pa.DataType) -> pa.Scalar:
    family = type_family(t)
    if pa.types.is_dictionary(t):
        t = t.value_type
    if family == "float":
        return pa.scalar(float(value), pa.float64())
    if family == "timestamp" and t.tz is not None:
        return pa.scalar(value.replace(tzinfo=dt.timezone.utc), t)
    if family == "string":
        return pa.scalar(value, pa.string())
    return pa.scalar(value, t)


def evaluate_rows(expr: Expr, table: pa.Table) -> pa.BooleanArray:
    """Evaluate ``expr`` on every row of ``table``: one boolean per row, never null
    (SQL semantics: a NULL result does not match). ``table.filter(result)`` keeps matches.

    ``expr`` is bound against ``table.schema`` unless it is bound already.
    """
    bound = expr if is_bound(expr) else bind(expr, table.schema)
    result = _eval(bound, table)
    if isinstance(result, pa.ChunkedArray):
        result = result.combine_chunks() if result.num_chunks else pa.array([], pa.bool_())
    return result


def _full(table: pa.Table, value: bool) -> pa.Array:
    return pa.array([value] * table.num_rows, pa.bool_())


def _eval(expr: Expr, table: pa.Table) -> Any:
    if isinstance(expr, AlwaysTrue):
        return _full(table, True)
    if isinstance(expr, AlwaysFalse):
        return _full(table, False)
    if isinstance(expr, And):
        out = _eval(expr.children[0], table)
        for c in expr.children[1:]:
            out = pc.and_(out, _eval(c, table))
        return out
    if isinstance(expr, Or):
        out = _eval(expr.children[0], table)
        for c in expr.children[1:]:
            out = pc.or_(out, _eval(c, table))
        return out
    if isinstance(expr, Not):
        raise PredicateError("evaluate_rows needs a bound expression (NOT pushed down)")
    arr = _column(table, expr.ref)
    valid = pc.is_valid(arr)
    if isinstance(expr, IsNull):
        return pc.is_null(arr)
    if isinstance(expr, NotNull):
        return valid
    if isinstance(expr, IsNaN):
        return pc.fill_null(pc.is_nan(arr), False)
    if isinstance(expr, NotNaN):
        return pc.fill_null(pc.invert(pc.is_nan(arr)), False)
    if isinstance(expr, StartsWith):
        return pc.fill_null(pc.starts_with(arr, pattern=expr.prefix), False)
    if isinstance(expr, NotStartsWith):
        return pc.fill_null(pc.invert(pc.starts_with(arr, pattern=expr.prefix)), False)
    if isinstance(expr, Like):
        return pc.fill_null(pc.match_like(arr, pattern=expr.pattern), False)
    if isinstance(expr, NotLike):
        return pc.fill_null(pc.invert(pc.match_like(arr, pattern=expr.pattern)), False)
    t = expr.ref.type
    if isinstance(expr, Compare):
        fn = {
            "=": pc.equal,
            "!=": pc.not_equal,
            "<": pc.less,
            "<=": pc.less_equal,
            ">": pc.greater,
            ">=": pc.greater_equal,
        }[expr.op]
        return pc.fill_null(fn(arr, _scalar(expr.value, t)), False)
    if isinstance(expr, (In, NotIn)):
        values = pa.array(
            [_scalar(v, t).as_py() for v in expr.values], _scalar(expr.values[0], t).type
        )
        hit = pc.is_in(arr, value_set=values)
        if isinstance(expr, In):
            return pc.fill_null(hit, False)
        return pc.and_(valid, pc.invert(pc.fill_null(hit, False)))
    raise PredicateError(f"not a predicate expression: {expr!r}")  # pragma: no cover
