"""Hive column types as Arrow types, for the Parquet a snapshot is written as.

A :class:`HiveType` is parsed from Hive's type strings, which are also ORC's
(``decimal(12,2)``, ``varchar(20)``, ``map<string,array<int>>``, ...). Mapping to Arrow:

* ``tinyint``..``bigint``, ``float``, ``double``, ``boolean``, ``binary``, ``date`` as expected;
* ``decimal(p,s)`` -> ``decimal128(p,s)``;
* ``string``, ``varchar(n)``, ``char(n)`` -> ``string``; the exact Hive type stays in the
  Arrow field's metadata under ``hive_type``. ``char(n)`` values are padded with spaces to *n*
  characters (:func:`pad_char`), as Hive and Trino return them: Hive's writer stores them
  padded, Trino's without their trailing spaces (trinodb/trino#29869), and the output must not
  depend on which engine wrote a file. ``varchar(n)`` is never padded;
* ``timestamp`` -> ``timestamp[<unit>]`` without a time zone (Hive's wall-clock time),
  ``timestamp with local time zone`` -> ``timestamp[<unit>, tz=UTC]``; the unit is a choice
  of the caller (``us`` is what Spark reads, ``ns`` keeps Hive's full precision);
* ``struct``, ``array``, ``map`` recursively.

Partition values, which Hive keeps only in folder names, are typed here too
(:func:`partition_array`, :func:`infer_partition_type`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

#: Arrow field metadata key holding the Hive type of a column.
HIVE_TYPE_KEY = b"hive_type"

TIMESTAMP_UNITS = ("s", "ms", "us", "ns")

_SIMPLE_ARROW = {
    "boolean": pa.bool_(),
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "varchar": pa.string(),
    "char": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
}
_ALIASES = {"integer": "int", "numeric": "decimal", "double precision": "double"}
_PRIMITIVES = set(_SIMPLE_ARROW) | {"decimal", "timestamp", "timestamp with local time zone"}
_COMPLEX = ("struct", "array", "map")


class HiveTypeError(ValueError):
    """A Hive type string that cannot be parsed, or a type with no Arrow equivalent."""


@dataclass(frozen=True)
class HiveType:
    """A Hive column type: ``name`` plus ``params`` (decimal precision/scale, char length),
    ``children`` (element, key/value or field types) and ``field_names`` of a struct."""

    name: str
    params: tuple[int, ...] = ()
    children: tuple[HiveType, ...] = ()
    field_names: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str | HiveType) -> HiveType:
        """Parse a Hive/ORC type string (names case-insensitive, field names keep their case)."""
        if isinstance(text, HiveType):
            return text
        parser = _Parser(text)
        result = parser.parse_type()
        parser.expect_end()
        return result

    @classmethod
    def from_arrow(cls, arrow_type: pa.DataType) -> HiveType:
        """The Hive type an Arrow type stores as (for Parquet inputs and user schemas)."""
        t = arrow_type
        if pa.types.is_dictionary(t):
            return cls.from_arrow(t.value_type)
        for name, simple in _SIMPLE_ARROW.items():
            if name not in ("varchar", "char") and t == simple:
                return cls(name)
        if pa.types.is_large_string(t) or pa.types.is_string_view(t):
            return cls("string")
        if pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            return cls("binary")
        if pa.types.is_date(t):
            return cls("date")
        if pa.types.is_timestamp(t):
            return cls("timestamp with local time zone" if t.tz else "timestamp")
        if pa.types.is_decimal(t):
            return cls("decimal", (t.precision, t.scale))
        if pa.types.is_map(t):
            return cls("map", (), (cls.from_arrow(t.key_type), cls.from_arrow(t.item_type)))
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return cls("array", (), (cls.from_arrow(t.value_type),))
        if pa.types.is_struct(t):
            fields = [t.field(i) for i in range(t.num_fields)]
            return cls(
                "struct",
                (),
                tuple(cls.from_arrow(f.type) for f in fields),
                tuple(f.name for f in fields),
            )
        raise HiveTypeError(f"no Hive type for Arrow type {t}")

    def __str__(self) -> str:
        if self.params:
            return f"{self.name}({','.join(map(str, self.params))})"
        if self.name == "array":
            return f"array<{self.children[0]}>"
        if self.name == "map":
            return f"map<{self.children[0]},{self.children[1]}>"
        if self.name == "struct":
            return "struct<" + ",".join(f"{_quote(n)}:{t}" for n, t in self.fields) + ">"
        return self.name

    @property
    def fields(self) -> tuple[tuple[str, HiveType], ...]:
        """``(name, type)`` pairs of a struct."""
        return tuple(zip(self.field_names, self.children, strict=True))

    def to_arrow(self, timestamp_unit: str = "us") -> pa.DataType:
        """The Arrow type of this Hive type (see the module docstring)."""
        if timestamp_unit not in TIMESTAMP_UNITS:
            raise HiveTypeError(f"timestamp unit must be one of {TIMESTAMP_UNITS}")
        if self.name in _SIMPLE_ARROW:
            return _SIMPLE_ARROW[self.name]
        if self.name == "timestamp":
            return pa.timestamp(timestamp_unit)
        if self.name == "timestamp with local time zone":
            return pa.timestamp(timestamp_unit, tz="UTC")
        if self.name == "decimal":
            precision, scale = self.params
            return pa.decimal128(precision, scale)
        if self.name == "array":
            return pa.list_(self.children[0].to_arrow(timestamp_unit))
        if self.name == "map":
            key, value = self.children
            return pa.map_(key.to_arrow(timestamp_unit), value.to_arrow(timestamp_unit))
        if self.name == "struct":
            return pa.struct([pa.field(n, t.to_arrow(timestamp_unit)) for n, t in self.fields])
        raise HiveTypeError(f"Hive type {self} has no Arrow equivalent")


def hive_field(name: str, hive_type: HiveType | str, timestamp_unit: str = "us") -> pa.Field:
    """An Arrow field for a Hive column, its Hive type kept in the field metadata."""
    parsed = HiveType.parse(hive_type)
    return pa.field(
        name, parsed.to_arrow(timestamp_unit), metadata={HIVE_TYPE_KEY: str(parsed).encode()}
    )


def pad_char(array: pa.Array, hive_type: HiveType) -> pa.Array:
    """``array`` of ``hive_type`` with every ``char(n)`` value in it (nested in structs and
    arrays too) padded with spaces to *n* characters; anything else unchanged.

    :param array: a column read as ``hive_type``'s Arrow type.
    :param hive_type: the table's type of the column.
    """
    if hive_type.name == "char":
        return pc.utf8_rpad(array, hive_type.params[0])
    if hive_type.name == "struct" and _holds_char(hive_type):
        children = [pad_char(array.field(i), t) for i, (_, t) in enumerate(hive_type.fields)]
        mask = pc.invert(array.is_valid()) if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(array.type), mask=mask)
    if hive_type.name == "array" and _holds_char(hive_type):
        values = pad_char(array.values, hive_type.children[0])
        mask = pc.invert(array.is_valid()) if array.null_count else None
        offsets = array.offsets
        return pa.ListArray.from_arrays(offsets, values, type=array.type, mask=mask)
    return array


def _holds_char(hive_type: HiveType) -> bool:
    return hive_type.name == "char" or any(_holds_char(c) for c in hive_type.children)


def _quote(name: str) -> str:
    return name if _PLAIN_NAME.match(name) else f"`{name}`"


_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_$]+$")


# -- partition values ------------------------------------------------------------------------

_CANONICAL_INT = re.compile(r"^-?(0|[1-9][0-9]*)$")
_ISO_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_INT64 = (-(2**63), 2**63 - 1)


def _is_canonical_bigint(text: str) -> bool:
    return bool(_CANONICAL_INT.match(text)) and _INT64[0] <= int(text) <= _INT64[1]


def _is_canonical_date(text: str) -> bool:
    if not _ISO_DATE.match(text):
        return False
    try:
        return dt.date.fromisoformat(text).isoformat() == text
    except ValueError:
        return False


def infer_partition_type(values: Iterable[str | None]) -> HiveType:
    """A partition column's type from its folder values, when none is given.

    ``bigint`` when every value is an integer written canonically (``7``, not ``007``),
    ``date`` when every value is an ISO date, else ``string``; nulls do not count. Values that
    would not print back the same stay strings, so nothing is lost.
    """
    present = [v for v in values if v is not None]
    if present and all(_is_canonical_bigint(v) for v in present):
        return HiveType("bigint")
    if present and all(_is_canonical_date(v) for v in present):
        return HiveType("date")
    return HiveType("string")


def partition_scalar(
    column: str, value: str | None, hive_type: HiveType, timestamp_unit: str = "us"
) -> pa.Scalar:
    """A partition value from its folder name as a typed Arrow scalar (None -> null)."""
    arrow_type = hive_type.to_arrow(timestamp_unit)
    if value is None:
        return pa.scalar(None, arrow_type)
    if not (hive_type.name in _PRIMITIVES and hive_type.name != "binary"):
        raise HiveTypeError(f"partition column {column!r} cannot have type {hive_type}")
    try:
        return pc.cast(pa.scalar(value), arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise HiveTypeError(
            f"partition value {column}={value!r} is not a valid {hive_type}: {exc}"
        ) from None


def partition_array(scalar: pa.Scalar, length: int) -> pa.Array:
    """``length`` copies of a partition value."""
    return pa.repeat(scalar, length)


# -- the parser ------------------------------------------------------------------------------


class _Parser:
    """Recursive descent over Hive's type grammar."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _error(self, message: str) -> HiveTypeError:
        return HiveTypeError(f"{message} at position {self.pos} in Hive type {self.text!r}")

    def _peek(self) -> str:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _take(self, char: str) -> None:
        if self._peek() != char:
            raise self._error(f"expected {char!r}")
        self.pos += 1

    def _word(self) -> str:
        self._peek()
        if self.pos < len(self.text) and self.text[self.pos] == "`":
            end = self.text.find("`", self.pos + 1)
            if end < 0:
                raise self._error("unterminated `quoted` name")
            word, self.pos = self.text[self.pos + 1 : end], end + 1
            return word
        start = self.pos
        while self.pos < len(self.text) and (
            self.text[self.pos].isalnum() or self.text[self.pos] in "_$"
        ):
            self.pos += 1
        if start == self.pos:
            raise self._error("expected a name")
        return self.text[start : self.pos]

    def _int(self) -> int:
        word = self._word()
        if not word.isdigit():
            raise self._error(f"expected a number, got {word!r}")
        return int(word)

    def _try_words(self, *words: str) -> bool:
        """Consume the words (case-insensitive) if they come next."""
        saved = self.pos
        for expected in words:
            self._peek()
            try:
                word = self._word()
            except HiveTypeError:
                word = ""
            if word.lower() != expected:
                self.pos = saved
                return False
        return True

    def expect_end(self) -> None:
        if self._peek():
            raise self._error("unexpected text")

    def parse_type(self) -> HiveType:
        word = self._word().lower()
        if word == "double":
            self._try_words("precision")
        if word == "timestamp" and self._try_words("with", "local", "time", "zone"):
            word = "timestamp with local time zone"
        word = _ALIASES.get(word, word)
        if word in _COMPLEX:
            return self._complex(word)
        if word not in _PRIMITIVES:
            raise self._error(f"unsupported Hive type {word!r}")
        if word == "decimal":
            precision, scale = 10, 0
            if self._peek() == "(":
                self._take("(")
                precision = self._int()
                if self._peek() == ",":
                    self._take(",")
                    scale = self._int()
                self._take(")")
            if not (1 <= precision <= 38 and 0 <= scale <= precision):
                raise self._error(f"invalid decimal({precision},{scale})")
            return HiveType("decimal", (precision, scale))
        if word in ("varchar", "char"):
            self._take("(")
            length = self._int()
            self._take(")")
            return HiveType(word, (length,))
        return HiveType(word)

    def _complex(self, word: str) -> HiveType:
        self._take("<")
        if word == "array":
            result = HiveType("array", (), (self.parse_type(),))
        elif word == "map":
            key = self.parse_type()
            self._take(",")
            result = HiveType("map", (), (key, self.parse_type()))
        else:
            names: list[str] = []
            types: list[HiveType] = []
            while self._peek() != ">":
                names.append(self._word())
                self._take(":")
                types.append(self.parse_type())
                if self._peek() != ",":
                    break
                self._take(",")
            result = HiveType("struct", (), tuple(types), tuple(names))
        self._take(">")
        return result
