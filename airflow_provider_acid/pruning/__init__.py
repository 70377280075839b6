"""File-slice pruning for Hive ACID tables: a plain library (no Airflow imports).

* :mod:`.predicates` - the predicate model's public API, gathered from:
  :mod:`.expressions` (value objects, NOT push-down, normalised text), :mod:`.sql_where`
  (SQL WHERE via sqlglot), :mod:`.dnf_filters` (pyarrow-style filter lists),
  :mod:`.binding` (names resolved against a schema) with :mod:`.coercion` (literals to
  column types), :mod:`.row_evaluation` (rows of a table), :mod:`.literals` (reading
  literal text) and :mod:`.column_types` (type families).
* :mod:`.stats` - per-file column statistics from ORC / Parquet footers, lossy ones dropped.
* :mod:`.index` - a Parquet column-stats index over many files, refreshed incrementally.
* :mod:`.evaluator` - vectorised "might this file hold a matching row?" over that index.

Typical use::

    expr = bind(parse_sql_where("amount > 100 AND ts >= '2024-01-01'"), table_schema)
    refresh(index_uri, file_keys(fs, paths), fs)
    stats = read(index_uri, referenced_columns(expr), files=keys)
    keep = might_match(expr, stats, table_schema)   # one boolean per file
"""

from __future__ import annotations

from .binding import bind
from .dnf_filters import parse_dnf_filters
from .evaluator import IN_LIST_LIMIT, might_match, prune
from .expressions import Expr, PredicateError, referenced_columns, rewrite_not, to_sql
from .index import FileKey, RefreshResult, file_keys, read, read_file_stats_table, refresh
from .row_evaluation import evaluate_rows
from .sql_where import parse_sql_where
from .stats import ColumnStats, FileStats, StatsError, read_file_stats

__all__ = [
    "IN_LIST_LIMIT",
    "ColumnStats",
    "Expr",
    "FileKey",
    "FileStats",
    "PredicateError",
    "RefreshResult",
    "StatsError",
    "bind",
    "evaluate_rows",
    "file_keys",
    "might_match",
    "parse_dnf_filters",
    "parse_sql_where",
    "prune",
    "read",
    "read_file_stats",
    "read_file_stats_table",
    "referenced_columns",
    "refresh",
    "rewrite_not",
    "to_sql",
]
