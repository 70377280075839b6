"""Deprecated: compaction moved to :mod:`airflow_provider_acid.engine` (the plan to
:mod:`~airflow_provider_acid.engine.plan`, the options to
:mod:`~airflow_provider_acid.engine.options`, the per-bucket compaction to
:mod:`~airflow_provider_acid.engine.compaction`).

It uses all three sides (the Hive side, pruning and output), so it left ``acid/`` for the
``engine/`` package above them. This module keeps the old import path working for one release;
it warns on import. See ``docs/layout.md``.
"""

from __future__ import annotations

import warnings

from ..engine.compaction import (
    REPLAN,
    SourceChangedError,
    compact_bucket,
    compact_slice,
    compact_table,
)
from ..engine.delete_keys import DeleteKeySet
from ..engine.options import CompactionOptions, ProgressCallback, RowFilter, options_from_dict
from ..engine.plan import (
    name_files,
    plan_for,
    plan_snapshot,
    relative_path,
    select_slices,
    slice_fingerprint,
)
from ..output.parquet_files import IDENTITY_COLUMNS, dictionary_columns, output_schema

warnings.warn(
    "airflow_provider_acid.acid.compaction is deprecated: import from "
    "airflow_provider_acid.engine.compaction (compact_table), .engine.options "
    "(CompactionOptions) and .engine.plan (plan_snapshot)",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "IDENTITY_COLUMNS",
    "REPLAN",
    "CompactionOptions",
    "DeleteKeySet",
    "ProgressCallback",
    "RowFilter",
    "SourceChangedError",
    "compact_bucket",
    "compact_slice",
    "compact_table",
    "dictionary_columns",
    "name_files",
    "options_from_dict",
    "output_schema",
    "plan_for",
    "plan_snapshot",
    "relative_path",
    "select_slices",
    "slice_fingerprint",
]
