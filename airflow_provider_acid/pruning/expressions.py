"""Predicate expressions as small immutable value objects, and what needs no schema.

An expression is a tree of frozen dataclasses: leaves on one column (:class:`Compare`,
:class:`In`, :class:`IsNull`, :class:`StartsWith`, ...) combined by :class:`And`,
:class:`Or` and :class:`Not`. This module builds them (:func:`and_`, :func:`or_`,
:func:`between`), pushes NOT down to the leaves (:func:`rewrite_not`), writes the
normalised SQL text (:func:`to_sql`) and lists the columns referred to.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .column_types import type_family

__all__ = [
    "COMPARISON_OPS",
    "LEAVES",
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "Compare",
    "Expr",
    "In",
    "IsNaN",
    "IsNull",
    "Leaf",
    "Like",
    "Not",
    "NotIn",
    "NotLike",
    "NotNaN",
    "NotNull",
    "NotStartsWith",
    "Or",
    "PredicateError",
    "Ref",
    "StartsWith",
    "and_",
    "between",
    "is_bound",
    "like_escape",
    "negate",
    "or_",
    "referenced_columns",
    "rewrite_not",
    "to_sql",
]


class PredicateError(ValueError):
    """A predicate cannot be parsed, bound to a schema or evaluated."""


# --------------------------------------------------------------------------- value objects

COMPARISON_OPS = ("=", "!=", "<", "<=", ">", ">=")
_NEGATED_OP = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass(frozen=True)
class Ref:
    """A column reference; ``name`` is a dotted path for nested struct fields.

    ``type`` is None until :func:`bind` resolves the name (and then holds the column's
    pyarrow type and its canonical spelling).
    """

    name: str
    type: pa.DataType | None = field(default=None, compare=True)

    def __str__(self) -> str:
        return _quote_path(self.name)


@dataclass(frozen=True)
class AlwaysTrue:
    """Matches every row."""

    def __str__(self) -> str:
        return "TRUE"


@dataclass(frozen=True)
class AlwaysFalse:
    """Matches no row."""

    def __str__(self) -> str:
        return "FALSE"


@dataclass(frozen=True)
class Compare:
    """``ref <op> value`` with op one of ``= != < <= > >=``."""

    op: str
    ref: Ref
    value: Any

    def __post_init__(self) -> None:
        if self.op not in COMPARISON_OPS:
            raise PredicateError(f"unknown comparison operator {self.op!r}")

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class In:
    """``ref IN (values...)``; values are de-duplicated and sorted."""

    ref: Ref
    values: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", _normalise_values(self.values))

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class NotIn:
    """``ref NOT IN (values...)``; values are de-duplicated and sorted."""

    ref: Ref
    values: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", _normalise_values(self.values))

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class IsNull:
    """``ref IS NULL``."""

    ref: Ref

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class NotNull:
    """``ref IS NOT NULL``."""

    ref: Ref

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class IsNaN:
    """``isnan(ref)``: true for NaN values of a floating point column."""

    ref: Ref

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class NotNaN:
    """``NOT isnan(ref)``: true for non-null values that are not NaN."""

    ref: Ref

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class StartsWith:
    """``ref LIKE 'prefix%'``."""

    ref: Ref
    prefix: str

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class NotStartsWith:
    """``ref NOT LIKE 'prefix%'``."""

    ref: Ref
    prefix: str

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class Like:
    """``ref LIKE pattern`` that statistics cannot judge (``%``, ``_``, ``\\`` escapes)."""

    ref: Ref
    pattern: str

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class NotLike:
    """``ref NOT LIKE pattern``."""

    ref: Ref
    pattern: str

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class Not:
    """Negation; :func:`rewrite_not` (and :func:`bind`) push it down to the leaves."""

    child: Expr

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class And:
    """Conjunction of two or more children."""

    children: tuple

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class Or:
    """Disjunction of two or more children."""

    children: tuple

    def __str__(self) -> str:
        return to_sql(self)


Leaf = (
    Compare | In | NotIn | IsNull | NotNull | IsNaN | NotNaN | StartsWith | NotStartsWith | Like
) | NotLike
Expr = AlwaysTrue | AlwaysFalse | Leaf | Not | And | Or
LEAVES = (Compare, In, NotIn, IsNull, NotNull, IsNaN, NotNaN, StartsWith, NotStartsWith, Like)
LEAVES = LEAVES + (NotLike,)


def _sort_key(value: Any) -> tuple:
    if isinstance(value, float) and math.isnan(value):
        return (type(value).__name__, 1, 0.0)
    return (type(value).__name__, 0, value)


def _normalise_values(values: Iterable[Any]) -> tuple:
    if isinstance(values, (str, bytes)):
        raise PredicateError(f"IN needs a list of values, got the string {values!r}")
    seen: dict[tuple, Any] = {}
    for v in values:
        if isinstance(v, float) and math.isnan(v):
            key: tuple = ("nan",)
        else:
            try:
                key = (type(v).__name__, v)
                hash(key)
            except TypeError:
                raise PredicateError(f"unsupported literal {v!r} in a value list") from None
        seen.setdefault(key, v)
    out = list(seen.values())
    try:
        return tuple(sorted(out, key=_sort_key))
    except TypeError:
        return tuple(out)


def and_(*children: Expr) -> Expr:
    """AND of the children, flattened and simplified with AlwaysTrue/AlwaysFalse."""
    flat: list[Expr] = []
    for c in children:
        if isinstance(c, AlwaysFalse):
            return AlwaysFalse()
        if isinstance(c, AlwaysTrue):
            continue
        if isinstance(c, And):
            flat.extend(c.children)
        elif c not in flat:
            flat.append(c)
    if not flat:
        return AlwaysTrue()
    if len(flat) == 1:
        return flat[0]
    return And(tuple(flat))


def or_(*children: Expr) -> Expr:
    """OR of the children, flattened and simplified with AlwaysTrue/AlwaysFalse."""
    flat: list[Expr] = []
    for c in children:
        if isinstance(c, AlwaysTrue):
            return AlwaysTrue()
        if isinstance(c, AlwaysFalse):
            continue
        if isinstance(c, Or):
            flat.extend(c.children)
        elif c not in flat:
            flat.append(c)
    if not flat:
        return AlwaysFalse()
    if len(flat) == 1:
        return flat[0]
    return Or(tuple(flat))


def between(ref: Ref | str, low: Any, high: Any) -> Expr:
    """``ref BETWEEN low AND high``, normalised to ``ref >= low AND ref <= high``."""
    r = Ref(ref) if isinstance(ref, str) else ref
    return and_(Compare(">=", r, low), Compare("<=", r, high))


# --------------------------------------------------------------------------- NOT push-down


def _might_be_float(ref: Ref) -> bool:
    return ref.type is None or type_family(ref.type) == "float"


def rewrite_not(expr: Expr) -> Expr:
    """Push every NOT down to the leaves (De Morgan, negated leaves); the result has no Not.

    Exact under three-valued logic and IEEE NaN: ``NOT (x < 5)`` on a floating point (or
    not yet bound) column becomes ``x >= 5 OR isnan(x)``, since NaN < 5 is false.
    """
    return _push(expr, negate=False)


def _push(expr: Expr, negate: bool) -> Expr:
    if isinstance(expr, Not):
        return _push(expr.child, not negate)
    if isinstance(expr, And):
        parts = [_push(c, negate) for c in expr.children]
        return or_(*parts) if negate else and_(*parts)
    if isinstance(expr, Or):
        parts = [_push(c, negate) for c in expr.children]
        return and_(*parts) if negate else or_(*parts)
    if not negate:
        return expr
    if isinstance(expr, AlwaysTrue):
        return AlwaysFalse()
    if isinstance(expr, AlwaysFalse):
        return AlwaysTrue()
    if isinstance(expr, Compare):
        negated = Compare(_NEGATED_OP[expr.op], expr.ref, expr.value)
        if expr.op in ("<", "<=", ">", ">=") and _might_be_float(expr.ref):
            return or_(negated, IsNaN(expr.ref))
        return negated
    if isinstance(expr, In):
        return NotIn(expr.ref, expr.values)
    if isinstance(expr, NotIn):
        return In(expr.ref, expr.values)
    if isinstance(expr, IsNull):
        return NotNull(expr.ref)
    if isinstance(expr, NotNull):
        return IsNull(expr.ref)
    if isinstance(expr, IsNaN):
        return NotNaN(expr.ref)
    if isinstance(expr, NotNaN):
        return IsNaN(expr.ref)
    if isinstance(expr, StartsWith):
        return NotStartsWith(expr.ref, expr.prefix)
    if isinstance(expr, NotStartsWith):
        return StartsWith(expr.ref, expr.prefix)
    if isinstance(expr, Like):
        return NotLike(expr.ref, expr.pattern)
    if isinstance(expr, NotLike):
        return Like(expr.ref, expr.pattern)
    raise PredicateError(f"not a predicate expression: {expr!r}")


def negate(expr: Expr) -> Expr:
    """NOT expr, folded into the leaf where that is exact without knowing the column type."""
    if isinstance(expr, Compare) and expr.op in ("=", "!="):
        return _push(expr, negate=True)
    if isinstance(expr, (In, NotIn, IsNull, NotNull, IsNaN, NotNaN, AlwaysTrue, AlwaysFalse)):
        return _push(expr, negate=True)
    if isinstance(expr, (StartsWith, NotStartsWith, Like, NotLike, Not)):
        return _push(expr, negate=True)
    return Not(expr)


# --------------------------------------------------------------------------- text form


_SIMPLE_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _quote_path(path: str) -> str:
    parts = path.split(".")
    return ".".join(
        p if _SIMPLE_IDENT.match(p) else "`" + p.replace("`", "``") + "`" for p in parts
    )


def _sql_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "CAST('NaN' AS DOUBLE)"
        if math.isinf(value):
            return "CAST('Infinity' AS DOUBLE)" if value > 0 else "CAST('-Infinity' AS DOUBLE)"
        return repr(value)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise PredicateError(f"decimal literal {value} is not finite")
        return format(value, "f")
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{_format_ts(value)}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    raise PredicateError(f"unsupported literal {value!r} of type {type(value).__name__}")


def _format_ts(value: dt.datetime) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}"
    if value.tzinfo is not None:
        off = value.utcoffset() or dt.timedelta(0)
        minutes = int(off.total_seconds() // 60)
        sign = "+" if minutes >= 0 else "-"
        text += f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    return text


def like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def to_sql(expr: Expr) -> str:
    """A stable, normalised SQL text for ``expr`` (Hive dialect; parses back the same)."""
    if isinstance(expr, AlwaysTrue):
        return "TRUE"
    if isinstance(expr, AlwaysFalse):
        return "FALSE"
    if isinstance(expr, Compare):
        return f"{expr.ref} {expr.op} {_sql_literal(expr.value)}"
    if isinstance(expr, (In, NotIn)):
        kw = "IN" if isinstance(expr, In) else "NOT IN"
        return f"{expr.ref} {kw} ({', '.join(_sql_literal(v) for v in expr.values)})"
    if isinstance(expr, IsNull):
        return f"{expr.ref} IS NULL"
    if isinstance(expr, NotNull):
        return f"{expr.ref} IS NOT NULL"
    if isinstance(expr, IsNaN):
        return f"isnan({expr.ref})"
    if isinstance(expr, NotNaN):
        return f"NOT isnan({expr.ref})"
    if isinstance(expr, StartsWith):
        return f"{expr.ref} LIKE {_sql_literal(like_escape(expr.prefix) + '%')}"
    if isinstance(expr, NotStartsWith):
        return f"{expr.ref} NOT LIKE {_sql_literal(like_escape(expr.prefix) + '%')}"
    if isinstance(expr, Like):
        return f"{expr.ref} LIKE {_sql_literal(expr.pattern)}"
    if isinstance(expr, NotLike):
        return f"{expr.ref} NOT LIKE {_sql_literal(expr.pattern)}"
    if isinstance(expr, Not):
        return f"NOT ({to_sql(expr.child)})"
    if isinstance(expr, (And, Or)):
        kw = " AND " if isinstance(expr, And) else " OR "
        parts = []
        for c in expr.children:
            text = to_sql(c)
            parts.append(f"({text})" if isinstance(c, (And, Or)) else text)
        return kw.join(parts)
    raise PredicateError(f"not a predicate expression: {expr!r}")


def referenced_columns(expr: Expr) -> list[str]:
    """The distinct column paths ``expr`` refers to, sorted."""
    names: set[str] = set()
    _collect(expr, names)
    return sorted(names)


def _collect(expr: Expr, names: set[str]) -> None:
    if isinstance(expr, Not):
        _collect(expr.child, names)
    elif isinstance(expr, (And, Or)):
        for c in expr.children:
            _collect(c, names)
    elif isinstance(expr, LEAVES):
        names.add(expr.ref.name)


def is_bound(expr: Expr) -> bool:
    """True when every column reference carries a type and no Not is left."""
    if isinstance(expr, Not):
        return False
    if isinstance(expr, (And, Or)):
        return all(is_bound(c) for c in expr.children)
    if isinstance(expr, LEAVES):
        return expr.ref.type is not None
    return True
