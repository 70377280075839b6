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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa

from .column_types import type_family

__all__ = [
    "COMPARISON_OPS",
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
    "like_to_expr",
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


class _Node:
    """Every expression node: its text is its normalised SQL (:func:`to_sql`)."""

    def __str__(self) -> str:
        return to_sql(self)


class Leaf(_Node):
    """A predicate on one column; each kind declares ``ref`` among its fields."""

    ref: Ref


# A kind that only names its base's fields (and says what it means) needs no @dataclass of its
# own: it inherits the fields, and equality still tells the kinds apart.


@dataclass(frozen=True)
class _Constant(_Node):
    """TRUE or FALSE."""


class AlwaysTrue(_Constant):
    """Matches every row."""


class AlwaysFalse(_Constant):
    """Matches no row."""


@dataclass(frozen=True)
class Compare(Leaf):
    """``ref <op> value`` with op one of ``= != < <= > >=``."""

    op: str
    ref: Ref
    value: Any

    def __post_init__(self) -> None:
        if self.op not in COMPARISON_OPS:
            raise PredicateError(f"unknown comparison operator {self.op!r}")


@dataclass(frozen=True)
class _ValueList(Leaf):
    """``ref [NOT] IN (values...)``: the values are de-duplicated and sorted."""

    ref: Ref
    values: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", _normalise_values(self.values))


class In(_ValueList):
    """``ref IN (values...)``; values are de-duplicated and sorted."""


class NotIn(_ValueList):
    """``ref NOT IN (values...)``; values are de-duplicated and sorted."""


@dataclass(frozen=True)
class _OnColumn(Leaf):
    """A test of the column alone: IS [NOT] NULL, [NOT] isnan."""

    ref: Ref


class IsNull(_OnColumn):
    """``ref IS NULL``."""


class NotNull(_OnColumn):
    """``ref IS NOT NULL``."""


class IsNaN(_OnColumn):
    """``isnan(ref)``: true for NaN values of a floating point column."""


class NotNaN(_OnColumn):
    """``NOT isnan(ref)``: true for non-null values that are not NaN."""


@dataclass(frozen=True)
class _Prefix(Leaf):
    """``ref [NOT] LIKE 'prefix%'``."""

    ref: Ref
    prefix: str


class StartsWith(_Prefix):
    """``ref LIKE 'prefix%'``."""


class NotStartsWith(_Prefix):
    """``ref NOT LIKE 'prefix%'``."""


@dataclass(frozen=True)
class _Pattern(Leaf):
    """``ref [NOT] LIKE pattern``."""

    ref: Ref
    pattern: str


class Like(_Pattern):
    """``ref LIKE pattern`` that statistics cannot judge (``%``, ``_``, ``\\`` escapes)."""


class NotLike(_Pattern):
    """``ref NOT LIKE pattern``."""


@dataclass(frozen=True)
class Not(_Node):
    """Negation; :func:`rewrite_not` (and :func:`bind`) push it down to the leaves."""

    child: Expr


@dataclass(frozen=True)
class _Connective(_Node):
    """AND or OR of two or more children."""

    children: tuple


class And(_Connective):
    """Conjunction of two or more children."""


class Or(_Connective):
    """Disjunction of two or more children."""


Expr = AlwaysTrue | AlwaysFalse | Leaf | Not | And | Or

# Each node kind, then its negation when that is another kind with the same fields.
_OPPOSITES = (
    (AlwaysTrue, AlwaysFalse),
    (In, NotIn),
    (IsNull, NotNull),
    (IsNaN, NotNaN),
    (StartsWith, NotStartsWith),
    (Like, NotLike),
)
_OPPOSITE: dict[type, type] = {a: b for pair in _OPPOSITES for a, b in (pair, pair[::-1])}
# each negated kind -> the kind it negates
NEGATED_KINDS: dict[type, type] = {negated: kind for kind, negated in _OPPOSITES}


def _fields_of(expr: Any) -> tuple:
    return tuple(getattr(expr, f.name) for f in fields(expr))


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


def _flatten(children: tuple, node: type, absorbing: type, neutral: type) -> Expr:
    flat: list[Expr] = []
    for c in children:
        if isinstance(c, absorbing):
            return absorbing()
        if isinstance(c, neutral):
            continue
        if isinstance(c, node):
            flat.extend(c.children)
        elif c not in flat:
            flat.append(c)
    if not flat:
        return neutral()
    if len(flat) == 1:
        return flat[0]
    return node(tuple(flat))


def and_(*children: Expr) -> Expr:
    """AND of the children, flattened and simplified with AlwaysTrue/AlwaysFalse."""
    return _flatten(children, And, absorbing=AlwaysFalse, neutral=AlwaysTrue)


def or_(*children: Expr) -> Expr:
    """OR of the children, flattened and simplified with AlwaysTrue/AlwaysFalse."""
    return _flatten(children, Or, absorbing=AlwaysTrue, neutral=AlwaysFalse)


def between(ref: Ref | str, low: Any, high: Any) -> Expr:
    """``ref BETWEEN low AND high``, normalised to ``ref >= low AND ref <= high``."""
    r = Ref(ref) if isinstance(ref, str) else ref
    return and_(Compare(">=", r, low), Compare("<=", r, high))


def _like_escape(text: str) -> str:
    """``text`` as a LIKE pattern that matches it literally (``\\`` escapes)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def like_to_expr(ref: Ref | str, pattern: str, escape: str = "\\") -> Expr:
    """Turn ``ref LIKE pattern`` into StartsWith / equality when possible, else :class:`Like`.

    The returned :class:`Like` always uses ``\\`` as its escape character.
    """
    r = Ref(ref) if isinstance(ref, str) else ref
    tokens: list[tuple[str, str]] = []  # ("lit", char) | ("%", "") | ("_", "")
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape:
            if i + 1 >= len(pattern):
                raise PredicateError(f"LIKE pattern {pattern!r} ends with the escape character")
            tokens.append(("lit", pattern[i + 1]))
            i += 2
            continue
        if ch in "%_":
            tokens.append((ch, ""))
        else:
            tokens.append(("lit", ch))
        i += 1
    prefix_len = 0
    while prefix_len < len(tokens) and tokens[prefix_len][0] == "lit":
        prefix_len += 1
    prefix = "".join(c for _, c in tokens[:prefix_len])
    rest = tokens[prefix_len:]
    if not rest:
        return Compare("=", r, prefix)
    if all(kind == "%" for kind, _ in rest):
        return StartsWith(r, prefix) if prefix else NotNull(r)
    canonical = "".join(_like_escape(c) if kind == "lit" else kind for kind, c in tokens)
    return Like(r, canonical)


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
    if isinstance(expr, (And, Or)):
        parts = [_push(c, negate) for c in expr.children]
        return and_(*parts) if isinstance(expr, And) != negate else or_(*parts)
    if not negate:
        return expr
    if isinstance(expr, Compare):
        negated = Compare(_NEGATED_OP[expr.op], expr.ref, expr.value)
        if expr.op in ("<", "<=", ">", ">=") and _might_be_float(expr.ref):
            return or_(negated, IsNaN(expr.ref))
        return negated
    opposite = _OPPOSITE.get(type(expr))
    if opposite is None:
        raise PredicateError(f"not a predicate expression: {expr!r}")
    return opposite(*_fields_of(expr))


def negate(expr: Expr) -> Expr:
    """NOT expr, folded into the leaf where that is exact without knowing the column type."""
    if isinstance(expr, Compare) and expr.op in ("=", "!="):
        return _push(expr, negate=True)
    if type(expr) in _OPPOSITE or isinstance(expr, Not):
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


# How each node is written: its fields, each written as _SQL_FIELDS says, fill the form.
_SQL_FORMS: dict[type, str] = {
    AlwaysTrue: "TRUE",
    AlwaysFalse: "FALSE",
    Compare: "{ref} {op} {value}",
    In: "{ref} IN ({values})",
    NotIn: "{ref} NOT IN ({values})",
    IsNull: "{ref} IS NULL",
    NotNull: "{ref} IS NOT NULL",
    IsNaN: "isnan({ref})",
    NotNaN: "NOT isnan({ref})",
    StartsWith: "{ref} LIKE {prefix}",
    NotStartsWith: "{ref} NOT LIKE {prefix}",
    Like: "{ref} LIKE {pattern}",
    NotLike: "{ref} NOT LIKE {pattern}",
    Not: "NOT ({child})",
}
_SQL_FIELDS: dict[str, Callable[[Any], str]] = {
    "ref": str,
    "op": str,
    "value": _sql_literal,
    "values": lambda values: ", ".join(_sql_literal(v) for v in values),
    "prefix": lambda prefix: _sql_literal(_like_escape(prefix) + "%"),
    "pattern": _sql_literal,
    "child": lambda child: to_sql(child),
}


def to_sql(expr: Expr) -> str:
    """A stable, normalised SQL text for ``expr`` (Hive dialect; parses back the same)."""
    if isinstance(expr, (And, Or)):
        kw = " AND " if isinstance(expr, And) else " OR "
        parts = []
        for c in expr.children:
            text = to_sql(c)
            parts.append(f"({text})" if isinstance(c, (And, Or)) else text)
        return kw.join(parts)
    form = _SQL_FORMS.get(type(expr))
    if form is None:
        raise PredicateError(f"not a predicate expression: {expr!r}")
    return form.format(**{f.name: _SQL_FIELDS[f.name](getattr(expr, f.name)) for f in fields(expr)})


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
    elif isinstance(expr, Leaf):
        names.add(expr.ref.name)


def is_bound(expr: Expr) -> bool:
    """True when every column reference carries a type and no Not is left."""
    if isinstance(expr, Not):
        return False
    if isinstance(expr, (And, Or)):
        return all(is_bound(c) for c in expr.children)
    if isinstance(expr, Leaf):
        return expr.ref.type is not None
    return True
