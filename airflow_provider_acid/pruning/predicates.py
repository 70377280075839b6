"""Row predicates: the public API of the predicate model, gathered from its modules.

An expression is a tree of frozen dataclasses (:mod:`.expressions`). It can come from SQL
text (:func:`parse_sql_where`, :mod:`.sql_where`), from pyarrow-style DNF filters
(:func:`parse_dnf_filters`, :mod:`.dnf_filters`) or be built directly. :func:`bind`
(:mod:`.binding`) resolves column names against a pyarrow schema, pushes every ``NOT`` down
to the leaves and coerces literals to the column types; the bound tree is what
:func:`evaluate_rows` (:mod:`.row_evaluation`) and the stats evaluator work on.

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

from .binding import bind
from .column_types import type_family
from .dnf_filters import parse_dnf_filters
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
    and_,
    between,
    is_bound,
    or_,
    referenced_columns,
    rewrite_not,
    to_sql,
)
from .row_evaluation import evaluate_rows
from .sql_where import parse_sql_where

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
