"""Evaluating a bound predicate on the rows of a pyarrow table (SQL three-valued logic)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from . import expressions as ex
from .binding import bind
from .column_types import type_family
from .expressions import Expr, PredicateError, Ref

__all__ = ["evaluate_rows"]


def _column(table: pa.Table, ref: Ref) -> pa.ChunkedArray:
    parts = ref.name.split(".")
    if ref.name in table.column_names:
        arr = table.column(ref.name)
    else:
        arr = table.column(parts[0])
        t = arr.type
        for part in parts[1:]:  # check the path first: the error names the whole column
            idx = t.get_field_index(part)
            if idx < 0:
                raise PredicateError(f"column {ref.name!r} not found in the table")
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
    bound = expr if ex.is_bound(expr) else bind(expr, table.schema)
    result = evaluate_tree(bound, table.num_rows, lambda leaf: _eval_leaf(leaf, table))
    if isinstance(result, pa.ChunkedArray):
        result = result.combine_chunks() if result.num_chunks else pa.array([], pa.bool_())
    return result


def evaluate_tree(expr: Expr, n: int, leaf: Callable[[Expr], Any]) -> Any:
    """Booleans for ``n`` rows (or files) under a bound ``expr``: TRUE / FALSE and AND / OR
    are combined here, every other node is answered by ``leaf``."""
    if isinstance(expr, (ex.AlwaysTrue, ex.AlwaysFalse)):
        return pa.array([isinstance(expr, ex.AlwaysTrue)] * n, pa.bool_())
    if isinstance(expr, (ex.And, ex.Or)):
        combine = pc.and_ if isinstance(expr, ex.And) else pc.or_
        out = evaluate_tree(expr.children[0], n, leaf)
        for c in expr.children[1:]:
            out = combine(out, evaluate_tree(c, n, leaf))
        return out
    return leaf(expr)


_COMPARISONS = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _compare(arr: Any, expr: ex.Compare) -> Any:
    return _COMPARISONS[expr.op](arr, _scalar(expr.value, expr.ref.type))


def _is_in(arr: Any, expr: ex.In | ex.NotIn) -> Any:
    t = expr.ref.type
    values = pa.array([_scalar(v, t).as_py() for v in expr.values], _scalar(expr.values[0], t).type)
    if pa.types.is_floating(values.type):
        # IEEE equality, as ``=`` tests it: -0.0 IN (0.0). is_in matches a float's bits (a
        # file whose statistics say min = max = -0.0 may hold 0.0 too: its writer saw them as
        # equal), so both sides get one zero: x + 0.0 is 0.0 for either zero, x otherwise
        arr, values = _one_zero(arr), _one_zero(values)
    return pc.is_in(arr, value_set=values)


def _one_zero(arr: Any) -> Any:
    return pc.add(arr, pa.scalar(0.0, arr.type))


# What each leaf kind tests on its column; a kind that negates another (NOT isnan, NOT LIKE,
# IS NOT NULL) is the inverse of that test. A NULL result never matches.
_TESTS: dict[type, Callable[[Any, Any], Any]] = {
    ex.Compare: _compare,
    ex.In: _is_in,
    ex.IsNull: lambda arr, expr: pc.is_null(arr),
    ex.IsNaN: lambda arr, expr: pc.is_nan(arr),
    ex.StartsWith: lambda arr, expr: pc.starts_with(arr, pattern=expr.prefix),
    ex.Like: lambda arr, expr: pc.match_like(arr, pattern=expr.pattern),
}


def _eval_leaf(expr: Expr, table: pa.Table) -> Any:
    if isinstance(expr, ex.Not):
        raise PredicateError("evaluate_rows needs a bound expression (NOT pushed down)")
    arr = _column(table, expr.ref)
    if isinstance(expr, ex.NotIn):
        # NULL NOT IN (...) is NULL, whatever the list holds
        return pc.and_(pc.is_valid(arr), pc.invert(pc.fill_null(_is_in(arr, expr), False)))
    kind = ex.NEGATED_KINDS.get(type(expr), type(expr))
    test = _TESTS.get(kind)
    if test is None:  # pragma: no cover
        raise PredicateError(f"not a predicate expression: {expr!r}")
    hit = test(arr, expr)
    return pc.fill_null(hit if kind is type(expr) else pc.invert(hit), False)
