"""pyarrow-style DNF filter lists read into predicate expressions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .expressions import Compare, Expr, In, NotIn, PredicateError, Ref, and_, or_

__all__ = ["parse_dnf_filters"]

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
