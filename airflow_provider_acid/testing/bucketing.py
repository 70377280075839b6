"""Hive's bucketing hash for the simulator's writers (``bucketing_version=2`` by default).

A bucketed table the simulator writes puts every row in the bucket Hive would. The hash
itself lives in the library (:mod:`airflow_provider_acid.acid.bucketing`, which the pruner
uses too); these are the names the simulator has always used:
:func:`hive_bucket_ids` (vectorised for integer, date and boolean columns),
:func:`hive_bucket_hash` for one value, :func:`murmur3_32`.
"""

from __future__ import annotations

from typing import Any

from ..acid.bucketing import field_hash, hive_bucket_ids, murmur3_32
from ..acid.hive_types import HiveType

__all__ = ["hive_bucket_hash", "hive_bucket_ids", "murmur3_32"]


def hive_bucket_hash(value: Any, hive_type: HiveType | str, version: int = 2) -> int:
    """Hive's bucketing hash of one value (``bucketing_version=2`` unless told); None is 0."""
    return field_hash(value, hive_type, version)
