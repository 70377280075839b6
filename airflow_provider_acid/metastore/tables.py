"""A metastore's Thrift ``Table`` and ``Partition`` objects as a :class:`TableDefinition`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..acid.hive_types import HiveType, HiveTypeError
from ..acid.source import PartitionLocation, TableDefinition
from .errors import MetastoreError, NotTransactionalError

_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}


def storage_uri(location: str) -> str:
    """A metastore location as an fsspec URI: ``file:/x`` and ``file:///x`` are the local
    path ``/x``, ``s3a://`` and ``s3n://`` are ``s3://``; other schemes stay as they are."""
    text = location.rstrip("/") or location
    scheme, sep, rest = text.partition(":")
    if not sep or "/" in scheme:
        return text
    if scheme == "file":
        path = rest
        if path.startswith("//"):
            path = path[2:]
            if not path.startswith("/"):  # file://host/path: the host is not part of the path
                path = "/" + path.partition("/")[2]
        return "/" + path.lstrip("/")
    if scheme in _SCHEME_ALIASES:
        return _SCHEME_ALIASES[scheme] + ":" + rest
    return text


def _params(table: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (table.parameters or {}).items()}


def _columns(
    fields: Sequence[Any] | None, table_name: str, what: str
) -> tuple[tuple[str, str], ...]:
    columns = []
    for field in fields or ():
        try:
            HiveType.parse(field.type)
        except HiveTypeError as exc:
            raise MetastoreError(
                f"table {table_name}: {what} {field.name!r} has Hive type {field.type!r}, "
                f"which this provider cannot read: {exc}"
            ) from None
        columns.append((field.name, field.type))
    return tuple(columns)


def check_transactional(table: Any) -> str:
    """The table's ``transactional_properties`` (``default`` or ``insert_only``), or
    :class:`NotTransactionalError` naming the table when it is not a Hive ACID table."""
    name = f"{table.dbName}.{table.tableName}"
    params = _params(table)
    if params.get("transactional", "false").lower() != "true":
        raise NotTransactionalError(
            f"table {name} is not transactional (TBLPROPERTIES 'transactional' is "
            f"{params.get('transactional', 'unset')!r}, table type {table.tableType}): it has no "
            "write ids, so it is not a Hive ACID table this provider reads"
        )
    return params.get("transactional_properties", "default").lower() or "default"


def table_definition(
    table: Any,
    metastore_uri: str,
    partitions: Sequence[Any] | None = None,
    *,
    partitions_total: int | None = None,
) -> TableDefinition:
    """The definition of a transactional table, reading ``partitions`` (Thrift objects)."""
    name = f"{table.dbName}.{table.tableName}"
    properties = check_transactional(table)
    sd = table.sd
    if sd is None or not sd.location:
        raise MetastoreError(f"table {name} has no location in the metastore")
    params = _params(table)
    keys = _columns(table.partitionKeys, name, "partition column")
    located: tuple[PartitionLocation, ...] | None = None
    if keys:
        located = tuple(
            _partition_location(name, [k for k, _ in keys], p) for p in (partitions or ())
        )
    return TableDefinition(
        name=name,
        metastore=metastore_uri,
        location=storage_uri(sd.location),
        columns=_columns(sd.cols, name, "column"),
        partition_columns=keys,
        bucket_columns=tuple(sd.bucketCols or ()),
        num_buckets=int(sd.numBuckets if sd.numBuckets is not None else -1),
        bucketing_version=int(params.get("bucketing_version", "1") or 1),
        transactional_properties=properties,
        partitions=located,
        partitions_total=partitions_total,
    )


def partition_name(keys: Sequence[str], values: Sequence[str]) -> str:
    """Hive's partition name (``k=v/k2=v2``, values escaped as in folder names)."""
    from ..acid.partitions import escape_path_name

    return "/".join(f"{k}={escape_path_name(v)}" for k, v in zip(keys, values, strict=True))


def _partition_location(table_name: str, keys: list[str], partition: Any) -> PartitionLocation:
    values = list(partition.values or ())
    if len(values) != len(keys):
        raise MetastoreError(
            f"table {table_name}: a partition has values {values} for partition columns {keys}"
        )
    name = partition_name(keys, values)
    if partition.sd is None or not partition.sd.location:
        raise MetastoreError(f"table {table_name}: partition {name} has no location")
    return PartitionLocation(name, storage_uri(partition.sd.location))


__all__ = ["check_transactional", "partition_name", "storage_uri", "table_definition"]
