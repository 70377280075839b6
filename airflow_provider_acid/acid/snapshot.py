"""Deprecated: read-view resolution moved to :mod:`airflow_provider_acid.acid.resolution`.

This module keeps the old import path working for one release; it warns on import. The names:
``resolve_snapshot`` is now :func:`~airflow_provider_acid.acid.resolution.resolve_read_view`,
``TableSnapshot`` and ``PartitionSnapshot`` are ``TableReadView`` and ``PartitionReadView``
(:mod:`airflow_provider_acid.acid.read_view`). See ``docs/layout.md``.
"""

from __future__ import annotations

import warnings

from .listing_groups import bucket_id_of
from .read_view import (
    AcidLayoutError,
    BucketSlice,
    ChosenDelta,
    DataFile,
    ExcludedEntry,
    ExclusionReason,
    FileRole,
    NotEnoughHistoryError,
    PartitionReadView,
    TableReadView,
    UnplacedFilesError,
    UnrecognisedEntry,
)
from .resolution import (
    IGNORED_PREFIX,
    check_placed,
    resolve_files,
    resolve_partition_locations,
    resolve_read_view,
)

warnings.warn(
    "airflow_provider_acid.acid.snapshot is deprecated: import from "
    "airflow_provider_acid.acid.resolution (resolve_read_view) and "
    "airflow_provider_acid.acid.read_view (TableReadView, PartitionReadView)",
    DeprecationWarning,
    stacklevel=2,
)

#: Deprecated names of :func:`resolve_read_view`, :class:`TableReadView` and
#: :class:`PartitionReadView`.
resolve_snapshot = resolve_read_view
TableSnapshot = TableReadView
PartitionSnapshot = PartitionReadView

__all__ = [
    "IGNORED_PREFIX",
    "AcidLayoutError",
    "BucketSlice",
    "ChosenDelta",
    "DataFile",
    "ExcludedEntry",
    "ExclusionReason",
    "FileRole",
    "NotEnoughHistoryError",
    "PartitionReadView",
    "PartitionSnapshot",
    "TableReadView",
    "TableSnapshot",
    "UnplacedFilesError",
    "UnrecognisedEntry",
    "bucket_id_of",
    "check_placed",
    "resolve_files",
    "resolve_partition_locations",
    "resolve_read_view",
    "resolve_snapshot",
]
