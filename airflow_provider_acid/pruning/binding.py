"""Binding an expression to a table schema: names resolved, literals coerced, NOT pushed down.

Names match case-insensitively (an exact match wins) and ``a.b`` walks into struct ``a``.
Each literal is coerced to its column's type (:mod:`.coercion`); a literal that falls between
two values the column can hold turns the comparison into an exact one on the neighbouring
values (or into TRUE / FALSE / IS NOT NULL).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import pyarrow as pa

from . import expressions as ex
from .coercion import NAN, Inexact, coerce_literal
from .column_types import type_family
from .expressions import Expr, PredicateError, Ref

__all__ = ["bind"]


def bind(expr: Expr, schema: pa.Schema) -> Expr:
    """Resolve column names against ``schema`` and coerce literals to the column types.

    Names match case-insensitively (an exact match wins); ``a.b`` walks into struct ``a``.
    NOT is pushed down first (:func:`rewrite_not`), so the result has no Not nodes.
    Raises :class:`PredicateError` for unknown columns or impossible comparisons.
    """
    if not isinstance(schema, pa.Schema):
        raise PredicateError(f"bind needs a pyarrow.Schema, got {type(schema).__name__}")
    return _bind(ex.rewrite_not(expr), schema)


def _bind(expr: Expr, schema: pa.Schema) -> Expr:
    if isinstance(expr, (ex.AlwaysTrue, ex.AlwaysFalse)):
        return expr
    if isinstance(expr, (ex.And, ex.Or)):
        combine = ex.and_ if isinstance(expr, ex.And) else ex.or_
        return combine(*(_bind(c, schema) for c in expr.children))
    if isinstance(expr, ex.Leaf):
        return _bind_leaf(expr, _resolve(expr.ref, schema))
    raise PredicateError(f"not a predicate expression: {expr!r}")


# --------------------------------------------------------------------------- names


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


# --------------------------------------------------------------------------- leaves


def _is_nan(ref: Ref, family: str | None) -> Expr:
    """``isnan(ref)``: only a floating point column holds NaN."""
    return ex.IsNaN(ref) if family == "float" else ex.AlwaysFalse()


def _not_nan(ref: Ref, family: str | None) -> Expr:
    """``NOT isnan(ref)``: every non-null value of a column that holds no NaN."""
    return ex.NotNaN(ref) if family == "float" else ex.NotNull(ref)


_LIKE_KINDS = (ex.StartsWith, ex.NotStartsWith, ex.Like, ex.NotLike)


def _bind_leaf(leaf: ex.Leaf, ref: Ref) -> Expr:
    family = type_family(ref.type)
    if isinstance(leaf, ex.IsNaN):
        return _is_nan(ref, family)
    if isinstance(leaf, ex.NotNaN):
        return _not_nan(ref, family)
    if isinstance(leaf, _LIKE_KINDS) and family != "string":
        raise PredicateError(
            f"LIKE needs a string column; column {ref.name!r} is of type {ref.type}"
        )
    if isinstance(leaf, ex.Like):
        prefix = _like_prefix(leaf.pattern)
        like = ex.Like(ref, leaf.pattern)
        return ex.and_(ex.StartsWith(ref, prefix), like) if prefix else like
    if isinstance(leaf, ex.Compare):
        return _bind_comparison(leaf, ref, family)
    if isinstance(leaf, (ex.In, ex.NotIn)):
        return _bind_value_list(leaf, ref, family)
    # IS [NOT] NULL, [NOT] LIKE 'prefix%', NOT LIKE pattern: the same test on the bound column
    return replace(leaf, ref=ref)


def _bind_comparison(leaf: ex.Compare, ref: Ref, family: str | None) -> Expr:
    v = coerce_literal(leaf.value, ref)
    op = leaf.op
    if v is NAN:
        if op == "=":
            return _is_nan(ref, family)
        if op == "!=":
            return _not_nan(ref, family)
        raise PredicateError(f"'{ref.name} {op} NaN' is never true; use isnan({ref.name}) instead")
    if isinstance(v, Inexact):
        if op == "=":
            return ex.AlwaysFalse()
        if op == "!=":
            return ex.NotNull(ref)
        if op in ("<", "<="):
            return ex.AlwaysFalse() if v.floor is None else ex.Compare("<=", ref, v.floor)
        return ex.AlwaysFalse() if v.ceil is None else ex.Compare(">=", ref, v.ceil)
    return ex.Compare(op, ref, v)


def _bind_value_list(leaf: ex.In | ex.NotIn, ref: Ref, family: str | None) -> Expr:
    """[NOT] IN: the values the column can hold stay listed (a single one becomes = or !=),
    a NaN becomes [NOT] isnan and the other values drop out."""
    exact = []
    has_nan = False
    for value in leaf.values:
        v = coerce_literal(value, ref)
        if v is NAN:
            has_nan = True
        elif not isinstance(v, Inexact):
            exact.append(v)
    positive = isinstance(leaf, ex.In)
    listed: Expr = type(leaf)(ref, tuple(exact))
    if len(listed.values) == 1:
        listed = ex.Compare("=" if positive else "!=", ref, listed.values[0])
    if positive:
        return ex.or_(
            listed if exact else ex.AlwaysFalse(),
            _is_nan(ref, family) if has_nan else ex.AlwaysFalse(),
        )
    return ex.and_(
        listed if exact else ex.NotNull(ref),
        _not_nan(ref, family) if has_nan else ex.AlwaysTrue(),
    )


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
