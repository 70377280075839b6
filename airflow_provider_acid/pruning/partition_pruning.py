"""A predicate's partition conjuncts, evaluated on partition folder values before any file of
the table is listed (what :func:`..acid.partition_listing.list_partitions` keeps).

The predicate is first brought to negation normal form (every NOT pushed to the leaves); then
each leaf on a column that is not a partition column becomes TRUE. Without NOT above them,
AND and OR are monotone, so the result holds wherever the predicate can: a partition it rules
out holds no matching row. It is bound to the partition columns alone, typed as the whole
listing would type them (declared types, else inferred from the values of every partition
found, :func:`..acid.hive_types.infer_partition_type`), and evaluated with the manifest's own
partition step (:func:`.partition_stats.partitions_might_match`), so the partitions kept here are a
superset of those the manifest keeps.

A folder value that cannot be read as its column's type (``dt=someday`` for a ``date``
column) is kept, never dropped: the manifest then reports it as it does for a whole listing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from fsspec import AbstractFileSystem

from ..acid.hive_types import HiveType, hive_field, infer_partition_type
from ..acid.partition_listing import DEFAULT_WORKERS, ScopedListing, resolve_partitions
from ..acid.partitions import Partition
from ..acid.read_view import TableReadView
from ..acid.schema import table_schema
from ..acid.source import TableSource
from . import expressions as ex
from .binding import bind
from .expressions import Expr, PredicateError
from .partition_stats import partitions_might_match

__all__ = [
    "PredicateFolderFilter",
    "PredicateReadView",
    "partition_only",
    "partition_types_of",
    "resolve_for_predicate",
]


def partition_only(expr: Expr, keys: Sequence[str]) -> Expr:
    """``expr`` with every leaf on a column other than ``keys`` (case-insensitive) made TRUE,
    after NOT is pushed down; TRUE when no leaf names a partition column."""
    lowered = {k.lower() for k in keys}
    return _project(ex.rewrite_not(expr), lowered)


def _project(expr: Expr, keys: set[str]) -> Expr:
    if isinstance(expr, (ex.AlwaysTrue, ex.AlwaysFalse)):
        return expr
    if isinstance(expr, (ex.And, ex.Or)):
        combine = ex.and_ if isinstance(expr, ex.And) else ex.or_
        return combine(*(_project(c, keys) for c in expr.children))
    if isinstance(expr, ex.Leaf):
        return expr if expr.ref.name.lower() in keys else ex.AlwaysTrue()
    return ex.AlwaysTrue()  # nothing else is left after rewrite_not; unknown keeps all


def _same_keys(partitions: Sequence[Partition]) -> tuple[str, ...] | None:
    keys = partitions[0].keys if partitions else ()
    return keys if all(p.keys == keys for p in partitions) else None


def partition_types_of(
    partitions: Sequence[Partition], declared: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Each partition column's Hive type: ``declared`` (case-insensitive), else inferred from
    the values of all ``partitions``, as :func:`..acid.schema.partition_columns` types them
    from a whole listing. ``{}`` when the partitions do not share their columns."""
    keys = _same_keys(partitions)
    if not keys:
        return {}
    lowered = {k.lower(): v for k, v in (declared or {}).items()}
    types: dict[str, str] = {}
    for i, key in enumerate(keys):
        if key.lower() in lowered:
            types[key] = str(HiveType.parse(lowered[key.lower()]))
        else:
            types[key] = str(infer_partition_type(p.values[i][1] for p in partitions))
    return types


class PredicateFolderFilter:
    """A :data:`..acid.partition_listing.PartitionFilter` for a predicate: keeps the
    partitions whose folder values might match it."""

    def __init__(self, expr: Expr, declared_types: Mapping[str, str] | None = None) -> None:
        self.expr = expr
        self.declared_types = dict(declared_types or {})

    def __call__(self, partitions: Sequence[Partition]) -> list[bool]:
        keys = _same_keys(partitions)
        if not keys:  # no partition columns, or folders that disagree: keep all (the
            return [True] * len(partitions)  # snapshot's own check reports the mix)
        projected = partition_only(self.expr, keys)
        if isinstance(projected, ex.AlwaysTrue):
            return [True] * len(partitions)
        types = partition_types_of(partitions, self.declared_types)
        schema = pa.schema([hive_field(k, HiveType.parse(t)) for k, t in types.items()])
        bound = bind(projected, schema)
        values = [p.as_dict() for p in partitions]
        try:
            return _might_match(bound, schema, values)
        except (pa.ArrowInvalid, ValueError):
            # some value is no value of its column's type: judge each alone, keep the unreadable
            return [_one(bound, schema, v) for v in values]


def _might_match(bound: Expr, schema: pa.Schema, values: list[dict[str, Any]]) -> list[bool]:
    return partitions_might_match(bound, schema, values)


def _one(bound: Expr, schema: pa.Schema, value: dict[str, Any]) -> bool:
    try:
        return bool(_might_match(bound, schema, [value])[0])
    except (pa.ArrowInvalid, ValueError):
        return True


@dataclass(frozen=True)
class PredicateReadView:
    """The read view a predicate reads, its schema, the predicate bound to it, and how many
    partitions the table has (None: as many as the read view, or the metastore's count)."""

    snapshot: TableReadView
    schema: pa.Schema
    bound: Expr
    partitions_total: int | None = None
    #: the partition-scoped listing the snapshot was resolved from (None: a whole one)
    listing: ScopedListing | None = None

    @property
    def scope(self) -> Callable[[str], bool] | None:
        """``path -> bool``: what the listing covered, when it left partitions out."""
        if self.listing is None or self.listing.whole:
            return None
        return self.listing.covers


def resolve_for_predicate(
    table_uri: str | TableSource,
    expr: Expr,
    fs: AbstractFileSystem,
    write_ids: Any = None,
    txns: Any = None,
    *,
    schema: Any = None,
    partition_types: Mapping[str, str] | None = None,
    max_workers: int = DEFAULT_WORKERS,
    scoped: bool = True,
) -> PredicateReadView:
    """Resolve only the partitions ``expr`` can match (storage-only: partition folders listed
    level by level and filtered on their values; by name: the metastore's partitions), then
    bind ``expr`` to the table's schema.

    The partition columns are typed from every partition found, as a whole listing types
    them. The data columns come from the newest file of the partitions listed; when the
    predicate cannot be bound to those (a column only newer partitions have, or no data file
    in them), the table is listed whole and bound as before, so the answer never depends on
    which partitions were listed. ``scoped=False`` lists the table whole (as before)."""
    keep = None
    if scoped and not isinstance(expr, ex.AlwaysTrue):
        keep = PredicateFolderFilter(expr, partition_types)
    scoped = resolve_partitions(
        table_uri, keep, write_ids, txns, filesystem=fs, max_workers=max_workers
    )
    listing = scoped.listing
    if scoped.scoped and listing is not None:
        types = {
            **partition_types_of(listing.partitions, partition_types),
            **(partition_types or {}),
        }
        try:
            bound_schema = table_schema(scoped.snapshot, fs, schema, types)
            return PredicateReadView(
                scoped.snapshot,
                bound_schema,
                bind(expr, bound_schema),
                listing.partitions_total,
                listing,
            )
        except PredicateError:
            scoped = resolve_partitions(table_uri, None, write_ids, txns, filesystem=fs)
    snapshot = scoped.snapshot
    bound_schema = table_schema(snapshot, fs, schema, partition_types)
    return PredicateReadView(snapshot, bound_schema, bind(expr, bound_schema))
