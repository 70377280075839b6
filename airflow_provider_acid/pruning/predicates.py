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
  to anything, and ``NaN != 5`` is true; ``-0.0 = 0.0``, in ``IN`` lists too. A NaN
  *literal* is the exception: ``x = NaN`` means ``isnan(x)`` and ``x != NaN`` means
  ``NOT isnan(x)`` (as in Iceberg); ordering comparisons with a NaN literal are rejected.
* A NULL literal is rejected (``x = NULL`` is never true; write ``x IS NULL``).
"""

from __future__ import annotations

# ruff: noqa: F403 - this module gathers the public names of the modules below
from . import binding, column_types, dnf_filters, expressions, row_evaluation, sql_where
from .binding import *
from .column_types import *
from .dnf_filters import *
from .expressions import *
from .row_evaluation import *
from .sql_where import *

__all__ = [
    *expressions.__all__,
    *sql_where.__all__,
    *dnf_filters.__all__,
    *binding.__all__,
    *row_evaluation.__all__,
    *column_types.__all__,
]
