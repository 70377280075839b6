"""Hive types as the simulator writes them to ORC.

A type is the library's :class:`~airflow_provider_acid.acid.hive_types.HiveType`, parsed by the
library's parser (``decimal(12,2)``, ``array<int>``, ``map<string,array<int>>``, ...). This module
adds what writing ORC needs: the pyorc ``TypeDescription`` of a type (:func:`orc_type`), the Arrow
type ``pyarrow.orc`` reads it as (:func:`orc_arrow_type`: timestamps in nanoseconds), and Hive's
rules for the columns a table can be created with (char/varchar lengths, unique struct field
names), which a reader does not check but a writer of Hive-valid tables must.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import pyarrow as pa
import pyorc

from ..acid.hive_types import HiveType

#: Timestamps are written with nanoseconds, which ``pyarrow.orc`` reads them with.
ORC_TIMESTAMP_UNIT = "ns"

_ORC_PRIMITIVES = {
    "boolean": pyorc.Boolean,
    "tinyint": pyorc.TinyInt,
    "smallint": pyorc.SmallInt,
    "int": pyorc.Int,
    "bigint": pyorc.BigInt,
    "float": pyorc.Float,
    "double": pyorc.Double,
    "string": pyorc.String,
    "binary": pyorc.Binary,
    "date": pyorc.Date,
    "timestamp": pyorc.Timestamp,
}
_WRITABLE = set(_ORC_PRIMITIVES) | {"decimal", "varchar", "char", "array", "map", "struct"}
_MAX_LENGTH = {"varchar": 65535, "char": 255}


def parse_hive_type(text: str | HiveType) -> HiveType:
    """Parse a Hive type string (case-insensitive; field names keep their case) and check that
    the simulator can write a column of it (see :func:`check_writable`)."""
    return check_writable(HiveType.parse(text))


def struct_type(fields: Iterable[tuple[str, HiveType | str]]) -> HiveType:
    """A struct type from ``(name, type)`` pairs."""
    pairs = [(name, parse_hive_type(t)) for name, t in fields]
    names = tuple(name for name, _ in pairs)
    return check_writable(HiveType("struct", (), tuple(t for _, t in pairs), names))


def hive_type_of_arrow(arrow_type: pa.DataType) -> HiveType:
    """The Hive type an Arrow type is written as (large strings -> ``string``, ...).

    A timestamp with a time zone is written as a plain ``timestamp``, like one without.
    """
    return check_writable(_without_time_zones(HiveType.from_arrow(arrow_type)))


def _without_time_zones(hive_type: HiveType) -> HiveType:
    if hive_type.name == "timestamp with local time zone":
        return HiveType("timestamp")
    if not hive_type.children:
        return hive_type
    children = tuple(_without_time_zones(t) for t in hive_type.children)
    return dataclasses.replace(hive_type, children=children)


def check_writable(hive_type: HiveType) -> HiveType:
    """``hive_type`` if Hive can create a column of it and the simulator write it, else
    ValueError: char length 1..255, varchar 1..65535, struct field names unique (ignoring case),
    no ``timestamp with local time zone``."""
    name = hive_type.name
    if name not in _WRITABLE:
        raise ValueError(f"the simulator cannot write Hive type {hive_type}")
    if name in _MAX_LENGTH and not 1 <= hive_type.params[0] <= _MAX_LENGTH[name]:
        raise ValueError(f"{name} length must be in 1..{_MAX_LENGTH[name]}, got {hive_type}")
    names = hive_type.field_names
    if len({n.lower() for n in names}) != len(names):
        raise ValueError(f"duplicate field names in struct: {names}")
    for child in hive_type.children:
        check_writable(child)
    return hive_type


def orc_type(hive_type: HiveType) -> pyorc.TypeDescription:
    """The pyorc ``TypeDescription`` of a Hive type."""
    t = hive_type
    if t.name in _ORC_PRIMITIVES:
        return _ORC_PRIMITIVES[t.name]()
    if t.name == "decimal":
        return pyorc.Decimal(precision=t.params[0], scale=t.params[1])
    if t.name == "varchar":
        return pyorc.VarChar(t.params[0])
    if t.name == "char":
        return pyorc.Char(t.params[0])
    if t.name == "array":
        return pyorc.Array(orc_type(t.children[0]))
    if t.name == "map":
        return pyorc.Map(orc_type(t.children[0]), orc_type(t.children[1]))
    if t.name == "struct":
        return pyorc.Struct(**{n: orc_type(c) for n, c in t.fields})
    raise ValueError(f"the simulator cannot write Hive type {t}")


def orc_arrow_type(hive_type: HiveType) -> pa.DataType:
    """The Arrow type ``pyarrow.orc`` reads a column of ``hive_type`` as (and the simulator
    takes its values in): ``varchar``/``char`` as ``string``, ``timestamp`` as
    ``timestamp[ns]``."""
    return hive_type.to_arrow(ORC_TIMESTAMP_UNIT)


def has_char_types(hive_type: HiveType) -> bool:
    """Whether ``hive_type`` is or holds a ``char`` or ``varchar`` (which Arrow does not have)."""
    return hive_type.name in ("char", "varchar") or any(map(has_char_types, hive_type.children))
