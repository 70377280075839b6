"""SQL WHERE fragments (parsed with sqlglot) read into predicate expressions."""

from __future__ import annotations

import decimal
import re
from typing import Any

from .expressions import (
    AlwaysFalse,
    AlwaysTrue,
    Compare,
    Expr,
    In,
    IsNaN,
    IsNull,
    PredicateError,
    Ref,
    and_,
    between,
    like_to_expr,
    negate,
    or_,
)
from .literals import parse_bool, parse_date, parse_float, parse_number, parse_timestamp

__all__ = ["parse_sql_where"]

_FLIPPED_OP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


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
        raise PredicateError(f"cannot parse WHERE text {text!r}: {_parse_problem(exc)}") from exc
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
            return negate(self.convert(node.this))
        if isinstance(node, exp.Boolean):
            return AlwaysTrue() if node.this else AlwaysFalse()
        if isinstance(node, (exp.Column, exp.Dot)):
            return Compare("=", self.ref(node), True)
        op = {
            exp.EQ: "=",
            exp.NEQ: "!=",
            exp.LT: "<",
            exp.LTE: "<=",
            exp.GT: ">",
            exp.GTE: ">=",
        }.get(type(node))
        if op is not None:
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
        return negate(result) if node.args.get("negate") else result

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
            return parse_number(node.this, lambda: self.fail(node, "bad number"))
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
                return parse_date(value)
            if kind in (t.TIMESTAMP, t.DATETIME, t.TIMESTAMPTZ, t.TIMESTAMPLTZ, t.TIMESTAMPNTZ):
                return parse_timestamp(value)
            if kind == t.DECIMAL or kind == t.BIGDECIMAL:
                return decimal.Decimal(str(value).strip())
            if kind in (t.DOUBLE, t.FLOAT):
                return parse_float(value)
            if kind in (t.INT, t.BIGINT, t.SMALLINT, t.TINYINT):
                return int(str(value).strip())
            if kind in (t.VARCHAR, t.CHAR, t.TEXT, t.NVARCHAR, t.NCHAR):
                return str(value)
            if kind == t.BOOLEAN:
                return parse_bool(value)
        except (ValueError, decimal.InvalidOperation) as exc:
            raise self.fail(node, f"cannot read the literal ({exc})") from exc
        raise self.fail(node, f"casts to {kind.name} are not supported")


def _parse_problem(exc: Exception) -> str:
    """What the SQL parser found wrong, in words, without its internals (class names, the
    echoed text): e.g. ``an operand is missing near column 15``."""
    errors = getattr(exc, "errors", None) or []
    first = errors[0] if errors else {}
    description = str(first.get("description") or exc)
    where = f" near column {first['col']}" if first.get("col") else ""
    if "Required keyword" in description or "missing for" in description:
        return f"an operand is missing{where}"
    if "Invalid expression / Unexpected token" in description:
        return f"unexpected token {first.get('highlight') or ''!r}{where}".replace(" ''", "")
    description = re.sub(r"<class '[^']+'>", "an expression", description.split(". Line")[0])
    return f"{description}{where}"
