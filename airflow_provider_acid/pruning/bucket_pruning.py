"""Bucket pruning: the buckets Hive can have written rows matching a predicate to.

For a table ``CLUSTERED BY (c1, ..., ck) INTO n BUCKETS``, a row lives in the bucket of its
values' Hive bucketing hash (:mod:`..acid.bucketing`). A predicate that pins *every*
bucketing column to finitely many values (``=``, ``IN``, ``IS NULL``, combined with AND/OR)
can only match rows in the buckets of those value combinations; this is the pruning Trino's
``HiveBucketing.getHiveBucketFilter`` does.

:func:`possible_buckets` returns that set of bucket ids, or None for "every bucket". It is
inclusive: anything it cannot judge exactly (a type or version Hive's hash is not reproduced
for, a NaN, an inexact float, a predicate that leaves a bucketing column free, too many value
combinations) keeps every bucket.

Where the facts come from (:func:`bucket_spec`): the metastore's definition of the table
(``bucketCols``, ``numBuckets``, the ``bucketing_version`` table parameter), else a
``bucketing={"columns": [...], "buckets": n, "version": v}`` option; the column types from the
option's ``types``, the metastore, or the Hive type the schema's field carries.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..acid.bucketing import (
    BUCKETING_VERSIONS,
    UnsupportedBucketingType,
    bucket_number,
    field_hash,
)
from ..acid.hive_types import HIVE_TYPE_KEY, HiveType, HiveTypeError
from ..acid.source import TableDefinition
from . import expressions as ex
from .expressions import Expr

__all__ = ["MAX_COMBINATIONS", "BucketSpec", "bucket_spec", "possible_buckets"]

#: at most this many combinations of bucketing-column hashes are enumerated
MAX_COMBINATIONS = 4096
_MASK32 = 0xFFFFFFFF


@dataclass(frozen=True)
class BucketSpec:
    """A bucketed table's bucketing: columns (lower case), their candidate Hive types, the
    number of buckets and the bucketing version.

    ``types[i]`` holds more than one type when the exact one is unknown (an Arrow string
    without its Hive type may be ``string``, ``varchar`` or ``char``): a value then may hash
    as any of them, and each of those buckets is kept.
    """

    columns: tuple[str, ...]
    types: tuple[tuple[HiveType, ...], ...]
    num_buckets: int
    version: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": list(self.columns),
            "types": [[str(t) for t in ts] for ts in self.types],
            "buckets": self.num_buckets,
            "version": self.version,
        }


def _columns_of(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    return tuple(str(c).strip().lower() for c in value if str(c).strip())


def _schema_types(schema: pa.Schema | None, column: str) -> tuple[HiveType, ...] | None:
    if schema is None:
        return None
    for f in schema:
        if f.name.lower() == column:
            if f.metadata and HIVE_TYPE_KEY in f.metadata:
                return (HiveType.parse(f.metadata[HIVE_TYPE_KEY].decode()),)
            try:
                t = HiveType.from_arrow(f.type)
            except HiveTypeError:
                return None
            if t.name == "string":  # the Arrow type cannot tell these apart
                return (t, HiveType("varchar", (65535,)), HiveType("char", (255,)))
            return (t,)
    return None


def bucket_spec(
    definition: TableDefinition | None,
    option: Mapping[str, Any] | None = None,
    schema: pa.Schema | None = None,
) -> BucketSpec | None:
    """The table's bucketing from the metastore's ``definition``, else from ``option``.

    ``option`` is ``{"columns": ["id"] or "a,b", "buckets": n, "version": 1 | 2 (default 2),
    "types": ["bigint", ...] (optional)}``. With both, they must agree. None when the table
    is not bucketed (or the facts are missing).
    """
    from_metastore = None
    if definition is not None and definition.bucket_columns and definition.num_buckets > 0:
        from_metastore = (
            _columns_of(definition.bucket_columns),
            definition.num_buckets,
            definition.bucketing_version,
        )
    from_option = None
    if option:
        unknown = set(option) - {"columns", "buckets", "version", "types"}
        if unknown:
            raise ValueError(f"unknown bucketing option(s) {sorted(unknown)}")
        columns = _columns_of(option.get("columns") or ())
        buckets = int(option.get("buckets") or 0)
        version = int(option.get("version") or 2)
        if not columns or buckets <= 0:
            raise ValueError("the bucketing option needs columns and a number of buckets > 0")
        if version not in BUCKETING_VERSIONS:
            raise ValueError(f"bucketing version must be one of {BUCKETING_VERSIONS}")
        from_option = (columns, buckets, version)
    if from_metastore and from_option and from_metastore != from_option:
        raise ValueError(
            f"the bucketing option {from_option} contradicts the metastore's {from_metastore}"
        )
    facts = from_metastore or from_option
    if facts is None:
        return None
    columns, buckets, version = facts
    declared = [HiveType.parse(t) for t in (option or {}).get("types") or ()]
    if declared and len(declared) != len(columns):
        raise ValueError("the bucketing option needs one type per bucketing column")
    metastore_types = {n.lower(): t for n, t in definition.columns} if definition else {}
    types: list[tuple[HiveType, ...]] = []
    for i, column in enumerate(columns):
        if declared:
            types.append((declared[i],))
        elif column in metastore_types:
            types.append((HiveType.parse(metastore_types[column]),))
        else:
            found = _schema_types(schema, column)
            if found is None:
                if from_option and schema is not None:
                    raise ValueError(f"bucketing column {column!r} is not a table column")
                return None
            types.append(found)
    return BucketSpec(columns, tuple(types), buckets, version)


# -- the buckets of a predicate ----------------------------------------------------------------


_FREE = None  # a result meaning "every bucket"


def possible_buckets(
    expr: Expr, spec: BucketSpec, max_combinations: int = MAX_COMBINATIONS
) -> frozenset[int] | None:
    """The bucket ids rows matching the bound ``expr`` can be in; None for every bucket."""
    result = _buckets(expr, spec, max_combinations)
    if result is not None and len(result) >= spec.num_buckets:
        return None
    return result


def _buckets(expr: Expr, spec: BucketSpec, limit: int) -> frozenset[int] | None:
    if isinstance(expr, ex.AlwaysFalse):
        return frozenset()
    if isinstance(expr, ex.Or):
        out: set[int] = set()
        for child in expr.children:
            part = _buckets(child, spec, limit)
            if part is None:
                return _FREE
            out |= part
        return frozenset(out)
    if isinstance(expr, ex.And):
        domains: dict[str, frozenset] = {}
        sets: list[frozenset[int]] = []
        for child in expr.children:
            domain = _domain(child, spec)
            if domain is not None:
                column, values = domain
                domains[column] = domains[column] & values if column in domains else values
                continue
            part = _buckets(child, spec, limit)
            if part is not None:
                sets.append(part)
        enumerated = _enumerate(domains, spec, limit)
        if enumerated is not None:
            sets.append(enumerated)
        if not sets:
            return _FREE
        return frozenset.intersection(*sets)
    domain = _domain(expr, spec)
    if domain is None:
        return _FREE
    return _enumerate(dict([domain]), spec, limit)


def _domain(expr: Expr, spec: BucketSpec) -> tuple[str, frozenset] | None:
    """``(column, values)`` when ``expr`` says a bucketing column is one of finitely many
    values (None meaning NULL); otherwise None."""
    if isinstance(expr, ex.Compare) and expr.op == "=":
        column, values = expr.ref.name.lower(), frozenset([expr.value])
    elif isinstance(expr, ex.In):
        column, values = expr.ref.name.lower(), frozenset(expr.values)
    elif isinstance(expr, ex.IsNull):
        column, values = expr.ref.name.lower(), frozenset([None])
    elif isinstance(expr, ex.Or):
        parts = [_domain(c, spec) for c in expr.children]
        if not parts or any(p is None for p in parts):
            return None
        names = {p[0] for p in parts if p is not None}
        if len(names) != 1:
            return None
        return names.pop(), frozenset().union(*(p[1] for p in parts if p is not None))
    else:
        return None
    if column not in spec.columns:
        return None
    return column, values


def _value_hashes(values: frozenset, types: Sequence[HiveType], version: int) -> set[int] | None:
    """Every hash a row holding one of ``values`` can have; None if one cannot be computed."""
    hashes: set[int] = set()
    for value in values:
        if isinstance(value, float):
            if math.isnan(value):
                return None  # NaN's equality is the evaluator's business: keep everything
            # -0.0 = 0.0 but their bits, and so their hashes, differ
            variants: tuple[Any, ...] = (0.0, -0.0) if value == 0.0 else (value,)
        else:
            variants = (value,)
        for t in types:
            for v in variants:
                try:
                    hashes.add(field_hash(v, t, version) & _MASK32)
                except UnsupportedBucketingType:
                    return None
    return hashes


def _enumerate(
    domains: Mapping[str, frozenset], spec: BucketSpec, limit: int
) -> frozenset[int] | None:
    """The buckets of every combination of the bucketing columns' values, when each
    bucketing column is pinned (else None: a free column can hash to any bucket)."""
    if any(c not in domains for c in spec.columns):
        return _FREE
    per_column: list[set[int]] = []
    combinations = 1
    for column, types in zip(spec.columns, spec.types, strict=True):
        hashes = _value_hashes(domains[column], types, spec.version)
        if hashes is None:
            return _FREE
        if not hashes:
            return frozenset()  # contradictory: no value at all
        per_column.append(hashes)
        combinations *= len(hashes)
        if combinations > limit:
            return _FREE
    buckets: set[int] = set()
    for combo in itertools.product(*per_column):
        h = 0
        for x in combo:
            h = (h * 31 + x) & _MASK32
        buckets.add(bucket_number(h - (1 << 32) if h >= 1 << 31 else h, spec.num_buckets))
    return frozenset(buckets)
