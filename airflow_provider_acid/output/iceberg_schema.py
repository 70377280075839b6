"""A snapshot's Iceberg table schema and partition spec, from the Hive types it was written with.

The snapshot's Parquet files carry no Iceberg field ids (pyarrow writes plain Parquet), so the
table gets a name mapping (``schema.name-mapping.default``) that gives each Parquet column,
by name, its Iceberg field id; every reader of Iceberg tables honours it.

Types, from the Hive type recorded in the snapshot's settings:

* ``tinyint``, ``smallint``, ``int`` -> ``int``; ``bigint`` -> ``long``; ``float``, ``double``,
  ``boolean``, ``binary``, ``date`` as named; ``decimal(p,s)`` -> ``decimal(p,s)``;
* ``string``, ``varchar(n)``, ``char(n)`` -> ``string``;
* ``timestamp`` -> ``timestamp`` (no time zone: Hive's wall-clock time, as written);
  ``timestamp with local time zone`` -> ``timestamptz``. Iceberg's format v2 keeps microseconds,
  so the snapshot must be written with ``timestamp_unit="us"`` (the default);
* ``array``, ``map``, ``struct`` recursively, every element, key, value and field optional.

The Hive partition columns become columns of the schema too (the Parquet files hold them) and
the partition spec is the identity of each.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

from ..acid.hive_types import HiveType
from .parquet_files import IDENTITY_COLUMNS

_PRIMITIVES: dict[str, IcebergType] = {
    "boolean": BooleanType(),
    "tinyint": IntegerType(),
    "smallint": IntegerType(),
    "int": IntegerType(),
    "bigint": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "string": StringType(),
    "varchar": StringType(),
    "char": StringType(),
    "binary": BinaryType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "timestamp with local time zone": TimestamptzType(),
}
_IDENTITY_TYPES: dict[str, IcebergType] = {"int32": IntegerType(), "int64": LongType()}
#: Partition field ids start here, as Iceberg's own writers number them.
PARTITION_FIELD_ID_START = 1000


class IcebergSchemaError(ValueError):
    """A snapshot whose columns or settings have no Iceberg equivalent."""


def iceberg_type(hive_type: HiveType | str, ids: Iterator[int]) -> IcebergType:
    """The Iceberg type of a Hive type; nested ids are drawn from ``ids``."""
    parsed = HiveType.parse(hive_type)
    if parsed.name in _PRIMITIVES:
        return _PRIMITIVES[parsed.name]
    if parsed.name == "decimal":
        precision, scale = parsed.params
        return DecimalType(precision, scale)
    if parsed.name == "array":
        element_id = next(ids)
        return ListType(element_id, iceberg_type(parsed.children[0], ids), element_required=False)
    if parsed.name == "map":
        key_id, value_id = next(ids), next(ids)
        key, value = parsed.children
        return MapType(
            key_id, iceberg_type(key, ids), value_id, iceberg_type(value, ids), value_required=False
        )
    if parsed.name == "struct":
        field_ids = [next(ids) for _ in parsed.fields]
        return StructType(
            *(
                NestedField(field_id, name, iceberg_type(child, ids), required=False)
                for field_id, (name, child) in zip(field_ids, parsed.fields, strict=True)
            )
        )
    raise IcebergSchemaError(f"Hive type {parsed} has no Iceberg equivalent")


def check_settings(settings: Mapping[str, Any]) -> None:
    """Refuse settings an Iceberg v2 table cannot hold (a clear error naming the fix)."""
    unit = settings.get("timestamp_unit", "us")
    if unit != "us":
        raise IcebergSchemaError(
            f"the snapshot was written with timestamp_unit={unit!r}: Iceberg's format v2 stores "
            "timestamps in microseconds, compact with timestamp_unit 'us' (--timestamp-unit us) "
            "for --format iceberg"
        )


def iceberg_schema(settings: Mapping[str, Any]) -> Schema:
    """The table schema of a snapshot's settings: table columns, partition columns, then the
    ``_acid_*`` identity columns when written; field ids 1..n in that order, then nested ids."""
    check_settings(settings)
    top: list[tuple[str, HiveType | None, IcebergType | None]] = []
    for column in settings["columns"]:
        top.append((column["name"], HiveType.parse(column["hive_type"]), None))
    for column in settings["partition_columns"]:
        top.append((column["name"], HiveType.parse(column["hive_type"]), None))
    if settings.get("include_identity"):
        for name, arrow_type in IDENTITY_COLUMNS:
            top.append((name, None, _IDENTITY_TYPES[str(arrow_type)]))
    ids = itertools.count(len(top) + 1)
    fields = []
    for field_id, (name, hive_type, fixed) in enumerate(top, start=1):
        try:
            kind = fixed if hive_type is None else iceberg_type(hive_type, ids)
        except IcebergSchemaError as exc:
            raise IcebergSchemaError(f"column {name}: {exc}") from None
        fields.append(NestedField(field_id, name, kind, required=False))
    return Schema(*fields)


def partition_spec(settings: Mapping[str, Any], schema: Schema) -> PartitionSpec:
    """The identity partition spec of the Hive partition columns (unpartitioned without)."""
    fields = []
    for number, column in enumerate(settings["partition_columns"]):
        source = schema.find_field(column["name"])
        fields.append(
            PartitionField(
                source_id=source.field_id,
                field_id=PARTITION_FIELD_ID_START + number,
                transform=IdentityTransform(),
                name=column["name"],
            )
        )
    return PartitionSpec(*fields)


def describe_schema(schema: Schema) -> dict[str, str]:
    """Top-level column name -> Iceberg type text (to compare a table with a snapshot)."""
    return {f.name: str(f.field_type) for f in schema.fields}


__all__ = [
    "IcebergSchemaError",
    "check_settings",
    "describe_schema",
    "iceberg_schema",
    "iceberg_type",
    "partition_spec",
]
