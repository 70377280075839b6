"""Inclusive evaluation of a predicate against per-file statistics, vectorised.

:func:`might_match` answers, for every file row of a stats table (as returned by
:func:`airflow_provider_acid.pruning.index.read`), "might some row of this file match?".
A file is only pruned when the statistics *prove* that no row can match; every unknown
(null) statistic means "might match". One small rule per predicate kind:

* ``=``: prune when max < v or min > v. ``<`` / ``<=``: prune on min. ``>`` / ``>=``: prune
  on max, and for floating point columns only when the NaN count is known to be 0 (engines
  that order NaN above every number would match NaN rows).
* ``!=`` / ``NOT IN``: prune only when min = max = a listed value, the null count is 0
  and (floating point) the NaN count is 0.
* ``IN``: prune when every value lies outside [min, max]; with more than
  :data:`IN_LIST_LIMIT` values only the list's own range is checked.
* ``IS NULL``: prune when null count = 0. ``IS NOT NULL``: prune when every value is null.
* ``isnan``: prune when the NaN count is 0; ``NOT isnan``: when all values are NaN or null.
* ``LIKE 'p%'``: compare min/max truncated to len(p) with p (min 'abc123' keeps 'abc%').
  ``NOT LIKE 'p%'``: prune when both truncated bounds equal p and there are no nulls.
  Any other LIKE pattern keeps the file.
* Every value predicate prunes a file whose column is entirely null; a file with
  row_count = 0 is always pruned. AND / OR combine; NOT is pushed down by :func:`bind`.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from . import expressions as ex
from .binding import bind
from .column_types import type_family
from .expressions import Expr, PredicateError, Ref
from .row_evaluation import evaluate_tree

__all__ = ["IN_LIST_LIMIT", "might_match", "prune"]

IN_LIST_LIMIT = 200

_DEC_CTX = decimal.Context(prec=200)
_Cond = Any  # a pyarrow boolean array (nulls = unknown) or None (unknown everywhere)


def might_match(expr: Expr, file_stats_table: pa.Table, schema: pa.Schema) -> pa.BooleanArray:
    """One boolean per row of ``file_stats_table``: False only where no row can match.

    ``expr`` is bound against ``schema`` (the table schema, partition columns included)
    unless it is bound already. Statistics columns missing from the table are unknown.
    """
    bound = expr if ex.is_bound(expr) else bind(expr, schema)
    stats = _Stats(file_stats_table)
    keep = _keep(bound, stats)
    if "row_count" in file_stats_table.column_names:
        rows = _array(file_stats_table.column("row_count"))
        keep = pc.and_(keep, pc.fill_null(pc.not_equal(rows, 0), True))
    return keep


def prune(expr: Expr, file_stats_table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The rows of ``file_stats_table`` whose files might hold a matching row."""
    return file_stats_table.filter(might_match(expr, file_stats_table, schema))


# --------------------------------------------------------------------------- helpers


def _array(col: Any) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


class _Stats:
    """Access to the ``<col>__min`` ... columns of a stats table, case-insensitively."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.n = table.num_rows
        self.names = {name.lower(): name for name in table.column_names}

    def get(self, ref: Ref, kind: str) -> pa.Array | None:
        name = self.names.get(f"{ref.name}__{kind}".lower())
        if name is None:
            return None
        arr = _array(self.table.column(name))
        if pa.types.is_null(arr.type) or arr.null_count == len(arr):
            return None
        return arr

    def bounds(self, ref: Ref) -> tuple[pa.Array | None, pa.Array | None]:
        family = type_family(ref.type)
        lo, hi = self.get(ref, "min"), self.get(ref, "max")
        lo = lo if lo is not None and type_family(lo.type) == family else None
        hi = hi if hi is not None and type_family(hi.type) == family else None
        return lo, hi


def _lit(value: Any, arr: pa.Array | None) -> pa.Scalar | None:
    """The literal as a scalar comparable with the stats array, or None if impossible."""
    if arr is None:
        return None
    t = arr.type
    try:
        if pa.types.is_decimal(t):
            d = decimal.Decimal(value)
            exact = d.quantize(decimal.Decimal(1).scaleb(-t.scale), context=_DEC_CTX)
            if exact == d:
                try:
                    return pa.scalar(exact, t)
                except (pa.ArrowInvalid, OverflowError):
                    pass
            return pa.scalar(d)
        if pa.types.is_timestamp(t):
            if isinstance(value, dt.datetime) and value.tzinfo is not None:
                value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
            return pa.scalar(value, pa.timestamp("us", tz=t.tz))
        if pa.types.is_floating(t):
            return pa.scalar(float(value), t)
        return pa.scalar(value, t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return None


def _cmp(fn: Callable, arr: pa.Array | None, lit: Any) -> _Cond:
    if arr is None or lit is None:
        return None
    try:
        return fn(arr, lit)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    if pa.types.is_decimal(arr.type) and isinstance(lit, pa.Scalar):
        # decimals of very different scales: compare at a common scale when it fits
        try:
            t = pa.decimal128(38, max(arr.type.scale, lit.type.scale))
            return fn(arr.cast(t), lit.cast(t))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
    return None


def _any(*conds: _Cond) -> _Cond:
    """Kleene OR; an unknown part is simply ignored (it can never prove more)."""
    out = None
    for c in conds:
        if c is None:
            continue
        out = c if out is None else pc.or_kleene(out, c)
    return out


def _all(*conds: _Cond) -> _Cond:
    """Kleene AND; an entirely unknown part makes the whole unknown."""
    out = None
    for c in conds:
        if c is None:
            return None
        out = c if out is None else pc.and_kleene(out, c)
    return out


def _keep_from(cannot: _Cond, n: int) -> pa.Array:
    if cannot is None:
        return pa.array([True] * n, pa.bool_())
    return pc.invert(pc.fill_null(cannot, False))


# --------------------------------------------------------------------------- rules


def _keep(expr: Expr, st: _Stats) -> pa.Array:
    return evaluate_tree(expr, st.n, lambda leaf: _keep_leaf(leaf, st))


def _keep_leaf(expr: Expr, st: _Stats) -> pa.Array:
    if not hasattr(expr, "ref"):
        raise PredicateError(f"might_match needs a bound expression, got {expr!r}")
    return _keep_from(_cannot_match(expr, st), st.n)


def _cannot_match(expr: Expr, st: _Stats) -> _Cond:
    ref = expr.ref
    nulls, values, nans = st.get(ref, "nulls"), st.get(ref, "values"), st.get(ref, "nans")
    is_float = type_family(ref.type) == "float"
    all_null = _cmp(pc.equal, nulls, values)
    no_nulls = _cmp(pc.equal, nulls, 0)
    # for floating point columns, a known-zero NaN count; otherwise NaN is impossible
    nan_free = _cmp(pc.equal, nans, 0) if is_float else True

    def with_nan_free(cond: _Cond) -> _Cond:
        return cond if nan_free is True else _all(cond, nan_free)

    if isinstance(expr, ex.IsNull):
        return no_nulls
    if isinstance(expr, ex.NotNull):
        return all_null
    if isinstance(expr, ex.IsNaN):
        return _any(all_null, _cmp(pc.equal, nans, 0))
    if isinstance(expr, ex.NotNaN):
        nan_or_null = None
        if nans is not None and nulls is not None:
            nan_or_null = _cmp(pc.equal, pc.add(nans, nulls), values)
        return _any(all_null, nan_or_null)
    if isinstance(expr, (ex.Like, ex.NotLike)):
        return all_null

    lo, hi = st.bounds(ref)
    if isinstance(expr, (ex.StartsWith, ex.NotStartsWith)):
        prefix = expr.prefix
        n = len(prefix)
        lo_p = pc.utf8_slice_codeunits(lo, 0, n) if lo is not None else None
        hi_p = pc.utf8_slice_codeunits(hi, 0, n) if hi is not None else None
        p = pa.scalar(prefix, pa.string())
        if isinstance(expr, ex.StartsWith):
            return _any(all_null, _cmp(pc.greater, lo_p, p), _cmp(pc.less, hi_p, p))
        return _any(all_null, _all(_cmp(pc.equal, lo_p, p), _cmp(pc.equal, hi_p, p), no_nulls))

    if isinstance(expr, ex.Compare):
        v_lo, v_hi = _lit(expr.value, lo), _lit(expr.value, hi)
        op = expr.op
        if op == "=":
            return _any(all_null, _cmp(pc.greater, lo, v_lo), _cmp(pc.less, hi, v_hi))
        if op == "!=":
            single = _all(_cmp(pc.equal, lo, v_lo), _cmp(pc.equal, hi, v_hi), no_nulls)
            return _any(all_null, with_nan_free(single))
        if op == "<":
            return _any(all_null, _cmp(pc.greater_equal, lo, v_lo))
        if op == "<=":
            return _any(all_null, _cmp(pc.greater, lo, v_lo))
        if op == ">":
            return _any(all_null, with_nan_free(_cmp(pc.less_equal, hi, v_hi)))
        if op == ">=":
            return _any(all_null, with_nan_free(_cmp(pc.less, hi, v_hi)))
        raise PredicateError(f"unknown operator {op!r}")  # pragma: no cover

    if isinstance(expr, ex.In):
        vals = list(expr.values)
        try:
            low, high = min(vals), max(vals)
        except TypeError:
            return all_null
        outside_range = _any(_cmp(pc.greater, lo, _lit(high, lo)), _cmp(pc.less, hi, _lit(low, hi)))
        if len(vals) > IN_LIST_LIMIT:
            return _any(all_null, outside_range)
        per_value = []
        for v in vals:
            per_value.append(
                _any(_cmp(pc.greater, lo, _lit(v, lo)), _cmp(pc.less, hi, _lit(v, hi)))
            )
        return _any(all_null, outside_range, _all(*per_value))

    if isinstance(expr, ex.NotIn):
        if lo is None or hi is None:
            return all_null
        try:
            value_set = pa.array([_lit(v, lo).as_py() for v in expr.values], lo.type)
            listed = pc.is_in(lo, value_set=value_set)
        except (AttributeError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return all_null
        single = _all(pc.equal(lo, hi), listed, no_nulls)
        return _any(all_null, with_nan_free(single))

    raise PredicateError(f"unsupported predicate {expr!r}")  # pragma: no cover
