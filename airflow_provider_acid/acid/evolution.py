"""Schema evolution: which file column holds each table column, and Hive's type conversions.

Hive keeps only the table's current columns in its metastore; files keep the columns they were
written with. Reading a file under the table's columns follows Hive's rules:

* ORC files (ACID event files' ``row`` struct, original and raw files, insert-only ORC) are
  matched **by position**: table column *i* is file column *i*, whatever its name, so a column
  renamed by ``ALTER TABLE ... CHANGE b c string`` still shows the values written under ``b``.
  A file with fewer columns than the table (written before ``ADD COLUMNS``) reads the missing
  trailing columns as null; a file with more ignores the extra ones. (ORC's
  ``SchemaEvolution`` with ``isAcid`` reads the row struct positionally; Trino matched Hive in
  trinodb/trino#6479, characterised in #6316.)
* Parquet files (insert-only tables) are matched **by name**, case-insensitively, as Hive's
  Parquet reader does (trinodb/trino#6479 made Trino's Parquet default by-name to match).
* A column whose file type differs from the table type is converted as Hive converts it
  (ORC's ``ConvertTreeReaderFactory``), for the changes the metastore allows
  (``ColumnType.areColTypesCompatible``): integer widening (``tinyint`` < ``smallint`` <
  ``int`` < ``bigint``), integers to ``float``/``double``, ``float`` to ``double`` (the exact
  double of the stored float), integers and decimals to a ``decimal`` wide enough to hold every
  value (widening: scale and integer digits do not shrink), and any of ``string``,
  ``varchar(n)``, ``char(n)`` to another (to ``varchar(n)``: cut to *n* characters; to
  ``char(n)``: cut and padded to *n*; from ``char``: its padding trimmed first, as ORC's char
  reader does), and ``date`` and the integer types to any of them (the ISO text ``2024-01-31``,
  the decimal digits; Hive's ``implicitConvertible`` allows date and numbers to the string
  group). Any other change is an :class:`EvolutionError` (floats, doubles and decimals to text,
  which Hive allows, are among them: Java's formatting of them is not reproduced); the reader
  adds the file and column to its message.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .hive_types import HiveType

#: Hive's numeric widening order (``ColumnType.NumericCastOrder``), decimals handled apart.
_INTEGER_ORDER = {"tinyint": 0, "smallint": 1, "int": 2, "bigint": 3}
#: Decimal digits an integer type needs (``HiveDecimal``'s precision of its maximum).
_INTEGER_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}
_FLOATS = {"float": 0, "double": 1}
_STRING_GROUP = {"string", "varchar", "char"}


class EvolutionError(ValueError):
    """A file column whose type Hive cannot read as the table column's type."""


def column_sources(
    file_names: Sequence[str], table_names: Sequence[str], *, by_position: bool
) -> list[int | None]:
    """For each table column, the index of the file column holding it (None: reads as null)."""
    if by_position:
        return [i if i < len(file_names) else None for i in range(len(table_names))]
    by_name: dict[str, int] = {}
    for index, name in enumerate(file_names):
        by_name.setdefault(name.lower(), index)
    return [by_name.get(name.lower()) for name in table_names]


def _same(file_type: HiveType, table_type: HiveType) -> bool:
    return str(file_type).lower() == str(table_type).lower()


def check_conversion(file_type: HiveType, table_type: HiveType) -> None:
    """Raise :class:`EvolutionError` unless Hive reads ``file_type`` as ``table_type``."""
    if _same(file_type, table_type) or _primitive_rule(file_type, table_type) is not None:
        return
    if file_type.name == table_type.name and file_type.name in ("struct", "array", "map"):
        if len(file_type.children) != len(table_type.children) and file_type.name != "struct":
            raise EvolutionError(f"type {file_type} cannot be read as {table_type}")
        for f, t in zip(file_type.children, table_type.children, strict=False):
            check_conversion(f, t)
        return
    raise EvolutionError(
        f"type {file_type} cannot be read as {table_type}: the reader converts integer and "
        "float widening, widening to decimal, changes among string, varchar and char, date to "
        "string, "
        "the changes Hive allows and converts exactly (not narrowing or cross-type changes)"
    )


def _primitive_rule(file_type: HiveType, table_type: HiveType) -> str | None:
    """The name of the conversion Hive applies, or None when there is none."""
    src, dst = file_type.name, table_type.name
    if src in _INTEGER_ORDER and dst in _INTEGER_ORDER:
        return "widen" if _INTEGER_ORDER[src] < _INTEGER_ORDER[dst] else None
    if src in _INTEGER_ORDER and dst in _FLOATS:
        return "widen"
    if src in _FLOATS and dst in _FLOATS:
        return "widen" if _FLOATS[src] < _FLOATS[dst] else None
    if dst == "decimal":
        precision, scale = table_type.params
        if src in _INTEGER_ORDER:
            return "widen" if precision - scale >= _INTEGER_DIGITS[src] else None
        if src == "decimal":
            p, s = file_type.params
            return "widen" if scale >= s and precision - scale >= p - s else None
        return None
    if (src in _STRING_GROUP or src == "date" or src in _INTEGER_ORDER) and dst in _STRING_GROUP:
        # integers: their decimal text, as Java's Long.toString writes it (ORC's
        # StringGroupFromAnyIntegerTreeReader); floats and decimals to text are not taken:
        # Java's formatting of them (1.0E10, trailing zeros) is not reproduced here
        return "string"
    return None


def convert(
    array: pa.Array, file_type: HiveType, table_type: HiveType, target: pa.DataType
) -> pa.Array:
    """``array`` (a file column of ``file_type``) as the table's ``table_type`` (Arrow type
    ``target``), with Hive's result; :class:`EvolutionError` if Hive refuses the change."""
    if _same(file_type, table_type):
        return array if array.type == target else pc.cast(array, target)
    rule = _primitive_rule(file_type, table_type)
    if rule == "widen":
        return pc.cast(array, target)
    if rule == "string":
        return _string_group(array, file_type, table_type, target)
    check_conversion(file_type, table_type)  # raises for anything else not nested
    return pc.cast(array, target)  # nested types whose children convert by Arrow's cast


def _string_group(
    array: pa.Array, file_type: HiveType, table_type: HiveType, target: pa.DataType
) -> pa.Array:
    if array.type != pa.string():
        array = pc.cast(array, pa.string())
    if file_type.name == "char":
        array = pc.utf8_rtrim(array, characters=" ")
    if table_type.name == "varchar":
        array = pc.utf8_slice_codeunits(array, 0, table_type.params[0])
    elif table_type.name == "char":
        length = table_type.params[0]
        array = pc.utf8_rpad(pc.utf8_slice_codeunits(array, 0, length), length)
    return array if array.type == target else pc.cast(array, target)
