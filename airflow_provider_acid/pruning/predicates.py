"""Row predicates as small immutable value objects.

An expression is a tree of frozen dataclasses. It can come from SQL text
(:func:`parse_sql_where`), from pyarrow-style DNF filters (:func:`parse_dnf_filters`)
or be built directly. :func:`bind` resolves column names against a pyarrow schema,
pushes every ``NOT`` down to the leaves and coerces literals to the column types; the
bound tree is what :func:`evaluate_rows` and the stats evaluator work on.

Semantics (used by :func:`evaluate_rows`, and which pruning must never contradict):

* SQL three-valued logic; a row matches only where the predicate is TRUE (NULL never
  matches).
* Floating point comparisons follow IEEE 754: NaN is neither smaller, greater nor equal
  to anything, and ``NaN != 5`` is true. A NaN *literal* is the exception:
  ``x = NaN`` means ``isnan(x)`` and ``x != NaN`` means ``NOT isnan(x)`` (as in Iceberg);
  ordering comparisons with a NaN literal are rejected.
* A NULL literal is rejected (``x = NULL`` is never true; write ``x IS NULL``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "Compare",
    "Expr",
    "In",
    "IsNaN",
    "IsNull",
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
    "bind",
    "evaluate_rows",
    "is_bound",
    "or_",
    "parse_dnf_filters",
    "parse_sql_where",
    "referenced_columns",
    "rewrite_not",
    "to_sql",
    "type_family",
]


class PredicateError(ValueError):
    """A predicate cannot be parsed, bound to a schema or evaluated."""


# --------------------------------------------------------------------------- value objects

COMPARISON_OPS = ("=", "!=", "<", "<=", ">", ">=")
_NEGATED_OP = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_FLIPPED_OP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


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
_LEAVES = (Compare, In, NotIn, IsNull, NotNull, IsNaN, NotNaN, StartsWith, NotStartsWith, Like)
_LEAVES = _LEAVES + (NotLike,)


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


def _negate(expr: Expr) -> Expr:
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


def _like_escape(text: str) -> str:
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
        return f"{expr.ref} LIKE {_sql_literal(_like_escape(expr.prefix) + '%')}"
    if isinstance(expr, NotStartsWith):
        return f"{expr.ref} NOT LIKE {_sql_literal(_like_escape(expr.prefix) + '%')}"
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
    elif isinstance(expr, _LEAVES):
        names.add(expr.ref.name)


def is_bound(expr: Expr) -> bool:
    """True when every column reference carries a type and no Not is left."""
    if isinstance(expr, Not):
        return False
    if isinstance(expr, (And, Or)):
        return all(is_bound(c) for c in expr.children)
    if isinstance(expr, _LEAVES):
        return expr.ref.type is not None
    return True


# --------------------------------------------------------------------------- SQL parsing


def parse_sql_where(text: str, dialect: str = "hive") -> Expr:
    """Parse a SQL WHERE fragment (without the ``WHERE`` keyword, which is tolerated).

    Supports comparisons with literals, ``[NOT] IN``, ``[NOT] BETWEEN``, ``[NOT] LIKE``,
    ``IS [NOT] NULL``, ``isnan(col)``, ``AND``/``OR``/``NOT``, typed literals
    (``DATE '..'``, ``TIMESTAMP '..'``, ``CAST('..' AS DECIMAL(p,s))``) and negative
    numbers. Anything else raises :class:`PredicateError` quoting the fragment.
    """
    import sqlglot
    from sqlglot.errors import SqlglotError

    if not isinstance(text, str) or not text.strip():
        raise PredicateError("empty WHERE text")
    body = text.strip().rstrip(";").strip()
    if re.match(r"(?is)^where\s", body):
        body = body[5:].strip()
    try:
        tree = sqlglot.parse_one(body, read=dialect)
    except SqlglotError as exc:
        raise PredicateError(f"cannot parse WHERE text {text!r}: {exc}") from exc
    return _SqlConverter(dialect).convert(tree)


class _SqlConverter:
    def __init__(self, dialect: str) -> None:
        self.dialect = dialect

    def fragment(self, node: Any) -> str:
        try:
            return node.sql(dialect=self.dialect)
        except Exception:  # pragma: no cover - defensive
            return repr(node)

    def fail(self, node: Any, why: str) -> PredicateError:
        return PredicateError(f"unsupported SQL in filter: {why}: {self.fragment(node)!r}")

    def convert(self, node: Any) -> Expr:
        from sqlglot import exp

        if isinstance(node, (exp.Paren, exp.And, exp.Or, exp.Not)):
            return self.convert_node(node)
        try:
            return self.convert_node(node)
        except PredicateError as exc:
            whole = self.fragment(node)
            if repr(whole) in str(exc):
                raise
            raise PredicateError(f"{exc} (in {whole!r})") from None

    def convert_node(self, node: Any) -> Expr:
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.convert(node.this)
        if isinstance(node, exp.And):
            return and_(self.convert(node.this), self.convert(node.expression))
        if isinstance(node, exp.Or):
            return or_(self.convert(node.this), self.convert(node.expression))
        if isinstance(node, exp.Not):
            return _negate(self.convert(node.this))
        if isinstance(node, exp.Boolean):
            return AlwaysTrue() if node.this else AlwaysFalse()
        if isinstance(node, (exp.Column, exp.Dot)):
            return Compare("=", self.ref(node), True)
        ops = {
            exp.EQ: "=",
            exp.NEQ: "!=",
            exp.LT: "<",
            exp.LTE: "<=",
            exp.GT: ">",
            exp.GTE: ">=",
        }
        for cls, op in ops.items():
            if type(node) is cls:
                return self.comparison(node, op)
        if isinstance(node, exp.Between):
            ref = self.ref(node.this)
            return between(ref, self.literal(node.args["low"]), self.literal(node.args["high"]))
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise self.fail(node, "subqueries are not supported")
            ref = self.ref(node.this)
            values = [self.literal(v) for v in node.expressions]
            if not values:
                raise self.fail(node, "empty IN list")
            return In(ref, tuple(values))
        if isinstance(node, exp.Is):
            if isinstance(node.expression, exp.Null):
                return IsNull(self.ref(node.this))
            raise self.fail(node, "only IS NULL / IS NOT NULL are supported")
        if isinstance(node, exp.IsNan):
            return IsNaN(self.ref(node.this))
        if isinstance(node, exp.Escape):
            like = node.this
            if not isinstance(like, exp.Like):
                raise self.fail(node, "ESCAPE only applies to LIKE")
            escape = self.literal(node.expression)
            if not isinstance(escape, str) or len(escape) != 1:
                raise self.fail(node, "ESCAPE needs a one-character string")
            return self.like(like, escape)
        if isinstance(node, exp.Like):
            return self.like(node, "\\")
        raise self.fail(node, f"{type(node).__name__} is not a supported predicate")

    def like(self, node: Any, escape: str) -> Expr:
        ref = self.ref(node.this)
        pattern = self.literal(node.expression)
        if not isinstance(pattern, str):
            raise self.fail(node, "LIKE needs a string pattern")
        result = like_to_expr(ref, pattern, escape)
        return _negate(result) if node.args.get("negate") else result

    def comparison(self, node: Any, op: str) -> Expr:
        from sqlglot import exp

        left, right = node.this, node.expression
        left_col = isinstance(left, (exp.Column, exp.Dot))
        right_col = isinstance(right, (exp.Column, exp.Dot))
        if left_col and right_col:
            raise self.fail(node, "comparing two columns is not supported")
        if right_col:
            left, right, op = right, left, _FLIPPED_OP[op]
        elif not left_col:
            if isinstance(left, exp.Func) or isinstance(right, exp.Func):
                raise self.fail(node, "functions on columns are not supported")
            raise self.fail(node, "a comparison needs a column on one side")
        return Compare(op, self.ref(left), self.literal(right))

    def ref(self, node: Any) -> Ref:
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.ref(node.this)
        if isinstance(node, (exp.Column, exp.Dot)):
            parts = []
            for p in node.parts:
                if not isinstance(p, exp.Identifier):
                    raise self.fail(node, "unsupported column reference")
                parts.append(p.this)
            if any(p == "*" for p in parts):
                raise self.fail(node, "star is not a column")
            return Ref(".".join(parts))
        if isinstance(node, exp.Func):
            raise self.fail(node, "functions on columns are not supported")
        raise self.fail(node, "expected a column")

    def literal(self, node: Any) -> Any:
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.literal(node.this)
        if isinstance(node, exp.Neg):
            value = self.literal(node.this)
            if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
                raise self.fail(node, "only numbers can be negated")
            return -value
        if isinstance(node, exp.Literal):
            if node.is_string:
                return node.this
            return _parse_number(node.this, lambda: self.fail(node, "bad number"))
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Null):
            raise self.fail(
                node.parent or node, "NULL literals never compare true; use IS [NOT] NULL"
            )
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self.cast(node)
        if isinstance(node, (exp.Column, exp.Dot)):
            raise self.fail(node, "expected a literal, found a column")
        if isinstance(node, (exp.Subquery, exp.Select)):
            raise self.fail(node, "subqueries are not supported")
        if isinstance(node, exp.Func):
            raise self.fail(node, "functions are not supported")
        raise self.fail(node, f"expected a literal, found {type(node).__name__}")

    def cast(self, node: Any) -> Any:
        from sqlglot import exp

        inner = node.this
        if not isinstance(inner, (exp.Literal, exp.Neg, exp.Paren)):
            raise self.fail(node, "only literals can be cast")
        value = self.literal(inner)
        to = node.args["to"]
        kind = to.this
        t = exp.DataType.Type
        try:
            if kind == t.DATE:
                return _parse_date(value)
            if kind in (t.TIMESTAMP, t.DATETIME, t.TIMESTAMPTZ, t.TIMESTAMPLTZ, t.TIMESTAMPNTZ):
                return _parse_timestamp(value)
            if kind == t.DECIMAL or kind == t.BIGDECIMAL:
                return decimal.Decimal(str(value).strip())
            if kind in (t.DOUBLE, t.FLOAT):
                return _parse_float(value)
            if kind in (t.INT, t.BIGINT, t.SMALLINT, t.TINYINT):
                return int(str(value).strip())
            if kind in (t.VARCHAR, t.CHAR, t.TEXT, t.NVARCHAR, t.NCHAR):
                return str(value)
            if kind == t.BOOLEAN:
                return _parse_bool(value)
        except (ValueError, decimal.InvalidOperation) as exc:
            raise self.fail(node, f"cannot read the literal ({exc})") from exc
        raise self.fail(node, f"casts to {kind.name} are not supported")


def _parse_number(text: str, fail: Any) -> int | decimal.Decimal:
    text = str(text)
    try:
        if re.fullmatch(r"[+-]?\d+", text):
            return int(text)
        return decimal.Decimal(text)
    except (ValueError, decimal.InvalidOperation) as exc:
        raise fail() from exc


def _parse_float(value: Any) -> float:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("nan", "+nan", "-nan"):
            return math.nan
        if text in ("infinity", "+infinity", "inf", "+inf"):
            return math.inf
        if text in ("-infinity", "-inf"):
            return -math.inf
    return float(value)


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"not a boolean: {value!r}")


_DATE_RE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$")
_TS_RE = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?$"
)


def _parse_date(value: Any) -> dt.date:
    if isinstance(value, dt.datetime):
        raise ValueError(f"not a date: {value!r}")
    if isinstance(value, dt.date):
        return value
    m = _DATE_RE.match(str(value).strip())
    if not m:
        raise ValueError(f"not a date (YYYY-MM-DD): {value!r}")
    return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))


def _parse_timestamp(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    m = _TS_RE.match(str(value).strip())
    if not m:
        raise ValueError(f"not a timestamp (YYYY-MM-DD HH:MM:SS[.ffffff]): {value!r}")
    year, month, day, hh, mm, ss, frac, zone = m.groups()
    micro = 0
    if frac:
        digits = frac.ljust(9, "0")
        if int(digits[6:]) != 0:
            raise ValueError(f"sub-microsecond timestamp literals are not supported: {value!r}")
        micro = int(digits[:6])
    tz = None
    if zone:
        if zone == "Z":
            tz = dt.timezone.utc
        else:
            sign = -1 if zone[0] == "-" else 1
            z = zone[1:].replace(":", "")
            tz = dt.timezone(sign * dt.timedelta(hours=int(z[:2]), minutes=int(z[2:])))
    return dt.datetime(
        int(year), int(month), int(day), int(hh or 0), int(mm or 0), int(ss or 0), micro, tz
    )


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


# --------------------------------------------------------------------------- DNF filters

_DNF_OPS = {"=": "=", "==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def parse_dnf_filters(filters: Sequence[Any]) -> Expr:
    """Read pyarrow-style DNF filters.

    ``[("a", ">", 1), ("b", "in", [1, 2])]`` is a conjunction; ``[[...], [...]]`` is an OR
    of conjunctions. Operators: ``= == != < <= > >= in not in``.
    """
    if not isinstance(filters, (list, tuple)) or not filters:
        raise PredicateError(f"filters must be a non-empty list, got {filters!r}")
    if all(isinstance(f, tuple) and f and isinstance(f[0], str) for f in filters):
        return and_(*(_dnf_term(f) for f in filters))
    groups = []
    for group in filters:
        if not isinstance(group, (list, tuple)) or not group:
            raise PredicateError(
                f"filters must be a list of (column, op, value) tuples or a list of such lists; "
                f"bad element {group!r}"
            )
        groups.append(and_(*(_dnf_term(f) for f in group)))
    return or_(*groups)


def _dnf_term(term: Any) -> Expr:
    if not isinstance(term, (list, tuple)) or len(term) != 3 or not isinstance(term[0], str):
        raise PredicateError(f"a filter must be a (column, op, value) tuple, got {term!r}")
    name, op, value = term
    if not isinstance(op, str):
        raise PredicateError(f"filter operator must be a string, got {op!r} in {term!r}")
    op_norm = " ".join(op.strip().lower().split())
    ref = Ref(name)
    if op_norm in ("in", "not in"):
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise PredicateError(f"'{op}' needs a list of values in {term!r}")
        values = tuple(value)
        if not values:
            raise PredicateError(f"'{op}' needs at least one value in {term!r}")
        if any(v is None for v in values):
            raise PredicateError(f"None in an '{op}' list never matches; use IS NULL: {term!r}")
        return In(ref, values) if op_norm == "in" else NotIn(ref, values)
    if op_norm not in _DNF_OPS:
        raise PredicateError(f"unknown filter operator {op!r} in {term!r}")
    if value is None:
        raise PredicateError(f"comparison with None never matches; use IS NULL: {term!r}")
    return Compare(_DNF_OPS[op_norm], ref, value)


# --------------------------------------------------------------------------- binding


def type_family(t: pa.DataType) -> str | None:
    """Group a pyarrow type: int, float, decimal, string, date, timestamp, bool or None."""
    if pa.types.is_dictionary(t):
        return type_family(t.value_type)
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or _is_string_view(t):
        return "string"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    return None


def _is_string_view(t: pa.DataType) -> bool:
    check = getattr(pa.types, "is_string_view", None)
    return bool(check and check(t))


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
    if isinstance(expr, _LEAVES):
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
                return _parse_bool(value)
            except ValueError:
                raise bad() from None
        raise bad()
    if family in ("int", "float", "decimal"):
        if isinstance(value, bool) or isinstance(value, (dt.date, dt.datetime)):
            raise bad()
        num: Any = value
        if isinstance(value, str):
            try:
                num = _parse_number(value.strip(), lambda: ValueError(value))
            except ValueError:
                try:
                    num = _parse_float(value)
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
                return _parse_date(value)
            except ValueError:
                try:
                    return _coerce(_parse_timestamp(value), ref)
                except ValueError:
                    raise bad("not a date") from None
        raise bad()
    if family == "timestamp":
        if isinstance(value, str):
            try:
                value = _parse_timestamp(value)
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


# --------------------------------------------------------------------------- row evaluation


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
