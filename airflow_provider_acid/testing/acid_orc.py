"""Writing Hive 3 ACID ORC files exactly as Hive lays them out on storage.

This module knows the *file-level* format of Hive 3 transactional tables:

* the ACID event schema
  ``struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,
  currentTransaction:bigint,row:struct<...>>`` and its ORC user metadata
  (``hive.acid.version``, ``hive.acid.stats``, ``hive.acid.key.index``);
* the ``BucketCodec`` V1 encoding of the ``bucket`` field;
* folder and file names (``base_N``, ``delta_N_M_S``, ``delete_delta_N_M_S``, ``bucket_N``,
  original ``000000_0_copy_1`` files, escaped ``k=v`` partition folders);
* Hive type strings (``decimal(12,2)``, ``array<int>``, ...) and their ORC / Arrow equivalents;
* Hive's bucketing hash (``bucketing_version=2``, Murmur3), so generated bucketed tables put every
  row in the bucket Hive would.

It writes with pyorc (pyarrow cannot write ORC user metadata) and never imports Airflow.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import itertools
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyorc
from pyarrow import orc
from pyorc.converters import ORCConverter
from pyorc.enums import TypeKind

__all__ = [
    "ACID_COLUMN_NAMES",
    "ACID_VERSION",
    "ACID_VERSION_FILE",
    "COMPACTOR_MARKER_CONTENT",
    "COMPACTOR_MARKER_FILE",
    "HIVE_DEFAULT_PARTITION",
    "KEY_INDEX_KEY",
    "MAX_BUCKET_ID",
    "MAX_STATEMENT_ID",
    "NO_OPEN_WRITE_ID",
    "OPERATION_DELETE",
    "OPERATION_INSERT",
    "OPERATION_UPDATE",
    "STATS_KEY",
    "VERSION_KEY",
    "HiveType",
    "RowIdentity",
    "WrittenFile",
    "acid_event_arrow_schema",
    "acid_user_metadata",
    "append_user_metadata",
    "acid_event_type",
    "base_dir_name",
    "bucket_file_name",
    "decode_bucket",
    "delete_delta_dir_name",
    "delta_dir_name",
    "encode_bucket_v1",
    "escape_path_name",
    "format_partition_value",
    "hive_bucket_hash",
    "hive_bucket_ids",
    "murmur3_32",
    "original_file_name",
    "parse_hive_type",
    "partition_dir_name",
    "write_acid_file",
    "write_acid_version_file",
    "write_plain_file",
]

# --------------------------------------------------------------------------------------------
# Constants of the format
# --------------------------------------------------------------------------------------------

OPERATION_INSERT = 0
#: Never written by Hive 3 (split update writes a delete event plus an insert event).
OPERATION_UPDATE = 1
OPERATION_DELETE = 2

#: Top-level field names of an ACID event file, in order.
ACID_COLUMN_NAMES = (
    "operation",
    "originalTransaction",
    "bucket",
    "rowId",
    "currentTransaction",
    "row",
)

#: The ACID format version Hive 3 writes (file ``_orc_acid_version`` and ``hive.acid.version``).
ACID_VERSION = 2
#: Name of the one-byte file Hive 3 puts in every full-ACID base/delta folder.
ACID_VERSION_FILE = "_orc_acid_version"
#: Marker file Hive's compactor puts in the bases it writes, and its content.
COMPACTOR_MARKER_FILE = "_metadata_acid"
COMPACTOR_MARKER_CONTENT = b'{"thisFileVersion":"0","dataFormat":"compacted"}'

VERSION_KEY = "hive.acid.version"
STATS_KEY = "hive.acid.stats"
KEY_INDEX_KEY = "hive.acid.key.index"

#: Folder Hive uses for a null (or empty string) partition value.
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: ``minOpenWriteId`` of a valid-write-id list when no write is open (Java ``Long.MAX_VALUE``).
NO_OPEN_WRITE_ID = 9223372036854775807

MAX_BUCKET_ID = 0xFFF  # 12 bits (bits 27-16)
MAX_STATEMENT_ID = 0xFFF  # 12 bits (bits 11-0)
_CODEC_V1 = 1

# --------------------------------------------------------------------------------------------
# BucketCodec
# --------------------------------------------------------------------------------------------


def encode_bucket_v1(bucket_id: int, statement_id: int = 0) -> int:
    """Encode a bucket id and statement id as Hive's ``BucketCodec`` V1 ``bucket`` field.

    Bits 31-29 hold the codec version (1), bits 27-16 the bucket id, bits 11-0 the statement id:
    ``encode_bucket_v1(0) == 536870912`` and ``encode_bucket_v1(2) == 537001984``.
    """
    if not 0 <= bucket_id <= MAX_BUCKET_ID:
        raise ValueError(f"bucket id must be in 0..{MAX_BUCKET_ID}, got {bucket_id}")
    if not 0 <= statement_id <= MAX_STATEMENT_ID:
        raise ValueError(f"statement id must be in 0..{MAX_STATEMENT_ID}, got {statement_id}")
    return (_CODEC_V1 << 29) | (bucket_id << 16) | statement_id


def decode_bucket(value: int) -> tuple[int, int]:
    """Decode a ``bucket`` field into ``(bucket_id, statement_id)``.

    Codec V1 values are decoded bit-wise; version 0 values (pre-Hive-3 files, where the field is
    the plain bucket number) decode to ``(value, 0)``.
    """
    value &= 0xFFFFFFFF  # accept Java's signed view of the int as well
    version = value >> 29
    if version == 0:
        return value, 0
    if version != _CODEC_V1:
        raise ValueError(f"unknown BucketCodec version {version} in bucket field {value}")
    return (value >> 16) & MAX_BUCKET_ID, value & MAX_STATEMENT_ID


class RowIdentity(NamedTuple):
    """Hive's ``ROW__ID`` of a row: unique inside one partition (or unpartitioned table)."""

    original_transaction: int
    bucket: int  #: the encoded BucketCodec value, not the bucket id
    row_id: int

    @property
    def bucket_id(self) -> int:
        return decode_bucket(self.bucket)[0]

    @property
    def statement_id(self) -> int:
        return decode_bucket(self.bucket)[1]

    def key(self) -> str:
        """The ``origTxn,bucket,rowId`` text Hive uses in ``hive.acid.key.index``."""
        return f"{self.original_transaction},{self.bucket},{self.row_id}"


# --------------------------------------------------------------------------------------------
# Folder and file names
# --------------------------------------------------------------------------------------------


def _visibility_suffix(visibility_txn_id: int | None) -> str:
    return "" if visibility_txn_id is None else f"_v{visibility_txn_id:07d}"


def base_dir_name(write_id: int, visibility_txn_id: int | None = None) -> str:
    """``base_0000005`` or, for a base written by the compactor, ``base_0000005_v0000012``."""
    return f"base_{write_id:07d}{_visibility_suffix(visibility_txn_id)}"


def delta_dir_name(
    min_write_id: int,
    max_write_id: int,
    statement_id: int | None = None,
    visibility_txn_id: int | None = None,
    *,
    delete: bool = False,
) -> str:
    """``delta_0000003_0000003_0000`` (a statement) or ``delta_0000001_0000004_v0000009``.

    A statement id is written by ordinary writes; minor compaction writes no statement id but
    a visibility transaction suffix.
    """
    prefix = "delete_delta" if delete else "delta"
    name = f"{prefix}_{min_write_id:07d}_{max_write_id:07d}"
    if statement_id is not None:
        name += f"_{statement_id:04d}"
    return name + _visibility_suffix(visibility_txn_id)


def delete_delta_dir_name(
    min_write_id: int,
    max_write_id: int,
    statement_id: int | None = None,
    visibility_txn_id: int | None = None,
) -> str:
    """``delete_delta_0000003_0000003_0000`` (same rules as :func:`delta_dir_name`)."""
    return delta_dir_name(min_write_id, max_write_id, statement_id, visibility_txn_id, delete=True)


def bucket_file_name(bucket_id: int) -> str:
    """``bucket_00003``: the file of one bucket inside an ACID base/delta folder."""
    return f"bucket_{bucket_id:05d}"


def original_file_name(bucket_id: int, copy: int = 0) -> str:
    """``000002_0`` or ``000002_0_copy_1``: a pre-ACID (or insert-only) data file."""
    name = f"{bucket_id:06d}_0"
    return name if copy == 0 else f"{name}_copy_{copy}"


_ESCAPED_CHARS = frozenset(
    [chr(c) for c in range(0x01, 0x20)]
    + ['"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[", "]", "^"]
)


def escape_path_name(text: str) -> str:
    """Escape one path component like Hive's ``FileUtils.escapePathName`` (``:`` -> ``%3A``)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED_CHARS else c for c in text)


def format_partition_value(value: Any) -> str:
    """The text Hive puts in a ``k=v`` folder name for a partition value (unescaped).

    ``None`` and ``""`` become ``__HIVE_DEFAULT_PARTITION__``.
    """
    if value is None or value == "":
        return HIVE_DEFAULT_PARTITION
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def partition_dir_name(spec: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> str:
    """``dt=2024-01-01/ns=a%3Ab``: nested, escaped partition folders for ordered ``(k, v)`` pairs.

    Hive lower-cases partition column names and escapes both names and values.
    """
    items = spec.items() if isinstance(spec, Mapping) else spec
    parts = []
    for name, value in items:
        text = format_partition_value(value)
        escaped = text if text == HIVE_DEFAULT_PARTITION else escape_path_name(text)
        parts.append(f"{escape_path_name(name.lower())}={escaped}")
    return "/".join(parts)


# --------------------------------------------------------------------------------------------
# Hive types
# --------------------------------------------------------------------------------------------

_PRIMITIVE_ALIASES = {
    "boolean": "boolean",
    "tinyint": "tinyint",
    "smallint": "smallint",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "float": "float",
    "double": "double",
    "double precision": "double",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "decimal": "decimal",
    "numeric": "decimal",
    "varchar": "varchar",
    "char": "char",
}
_COMPLEX = ("struct", "array", "map")


@dataclass(frozen=True)
class HiveType:
    """A Hive column type such as ``int``, ``decimal(12,2)`` or ``map<string,array<int>>``.

    ``name`` is the canonical lower-case type name; ``params`` holds ``(precision, scale)`` for
    decimal and ``(length,)`` for varchar/char; ``children`` the element type (array), the key
    and value types (map) or the field types (struct, named by ``field_names``).
    """

    name: str
    params: tuple[int, ...] = ()
    children: tuple[HiveType, ...] = ()
    field_names: tuple[str, ...] = ()

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str | HiveType) -> HiveType:
        """Parse a Hive type string (case-insensitive; field names keep their case)."""
        if isinstance(text, HiveType):
            return text
        parser = _TypeParser(text)
        result = parser.parse_type()
        parser.expect_end()
        return result

    @classmethod
    def struct(cls, fields: Iterable[tuple[str, HiveType | str]]) -> HiveType:
        """A struct type from ``(name, type)`` pairs."""
        pairs = [(name, cls.parse(t)) for name, t in fields]
        names = tuple(name for name, _ in pairs)
        if len({n.lower() for n in names}) != len(names):
            raise ValueError(f"duplicate field names in struct: {names}")
        return cls("struct", (), tuple(t for _, t in pairs), names)

    @classmethod
    def from_arrow(cls, arrow_type: pa.DataType) -> HiveType:
        """The Hive type an Arrow type is stored as (large strings -> ``string``, ...)."""
        t = arrow_type
        simple = [
            (pa.types.is_boolean, "boolean"),
            (pa.types.is_int8, "tinyint"),
            (pa.types.is_int16, "smallint"),
            (pa.types.is_int32, "int"),
            (pa.types.is_int64, "bigint"),
            (pa.types.is_float32, "float"),
            (pa.types.is_float64, "double"),
            (pa.types.is_string, "string"),
            (pa.types.is_large_string, "string"),
            (pa.types.is_binary, "binary"),
            (pa.types.is_large_binary, "binary"),
            (pa.types.is_date, "date"),
            (pa.types.is_timestamp, "timestamp"),
        ]
        for predicate, name in simple:
            if predicate(t):
                return cls(name)
        if pa.types.is_decimal(t):
            return cls("decimal", (t.precision, t.scale))
        if pa.types.is_map(t):
            return cls("map", (), (cls.from_arrow(t.key_type), cls.from_arrow(t.item_type)))
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return cls("array", (), (cls.from_arrow(t.value_type),))
        if pa.types.is_struct(t):
            return cls.struct(
                (t.field(i).name, cls.from_arrow(t.field(i).type)) for i in range(t.num_fields)
            )
        if pa.types.is_dictionary(t):
            return cls.from_arrow(t.value_type)
        raise TypeError(f"no Hive type for Arrow type {t}")

    # -- rendering ----------------------------------------------------------------------------

    def __str__(self) -> str:
        if self.name in ("decimal", "varchar", "char"):
            return f"{self.name}({','.join(map(str, self.params))})"
        if self.name == "array":
            return f"array<{self.children[0]}>"
        if self.name == "map":
            return f"map<{self.children[0]},{self.children[1]}>"
        if self.name == "struct":
            inner = ",".join(
                f"{n}:{t}" for n, t in zip(self.field_names, self.children, strict=True)
            )
            return f"struct<{inner}>"
        return self.name

    @property
    def is_primitive(self) -> bool:
        return self.name not in _COMPLEX

    @property
    def fields(self) -> tuple[tuple[str, HiveType], ...]:
        """``(name, type)`` pairs of a struct."""
        return tuple(zip(self.field_names, self.children, strict=True))

    # -- conversions --------------------------------------------------------------------------

    def to_orc(self) -> pyorc.TypeDescription:
        """The pyorc ``TypeDescription`` of this type."""
        simple = {
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
        if self.name in simple:
            return simple[self.name]()
        if self.name == "decimal":
            return pyorc.Decimal(precision=self.params[0], scale=self.params[1])
        if self.name == "varchar":
            return pyorc.VarChar(self.params[0])
        if self.name == "char":
            return pyorc.Char(self.params[0])
        if self.name == "array":
            return pyorc.Array(self.children[0].to_orc())
        if self.name == "map":
            return pyorc.Map(self.children[0].to_orc(), self.children[1].to_orc())
        return pyorc.Struct(**{n: t.to_orc() for n, t in self.fields})

    def to_arrow(self) -> pa.DataType:
        """The Arrow type a reader produces for this type (as ``pyarrow.orc`` reads it).

        ``varchar``/``char`` become ``string``; ``timestamp`` becomes ``timestamp[ns]``.
        """
        simple = {
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
            "timestamp": pa.timestamp("ns"),
        }
        if self.name in simple:
            return simple[self.name]
        if self.name == "decimal":
            return pa.decimal128(self.params[0], self.params[1])
        if self.name == "array":
            return pa.list_(self.children[0].to_arrow())
        if self.name == "map":
            return pa.map_(self.children[0].to_arrow(), self.children[1].to_arrow())
        return pa.struct([pa.field(n, t.to_arrow()) for n, t in self.fields])


def parse_hive_type(text: str | HiveType) -> HiveType:
    """Shorthand for :meth:`HiveType.parse`."""
    return HiveType.parse(text)


class _TypeParser:
    """Recursive-descent parser for Hive type strings."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def _error(self, message: str) -> ValueError:
        return ValueError(f"{message} at position {self.pos} in Hive type {self.text!r}")

    def _peek(self) -> str:
        self._skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _take(self, char: str) -> None:
        if self._peek() != char:
            raise self._error(f"expected {char!r}")
        self.pos += 1

    def _word(self) -> str:
        self._skip_ws()
        if self.pos < len(self.text) and self.text[self.pos] == "`":
            end = self.text.find("`", self.pos + 1)
            if end < 0:
                raise self._error("unterminated `quoted` name")
            word = self.text[self.pos + 1 : end]
            self.pos = end + 1
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

    def expect_end(self) -> None:
        if self._peek():
            raise self._error("unexpected trailing text")

    def parse_type(self) -> HiveType:
        word = self._word().lower()
        if word == "double" and self.text[self.pos :].lower().lstrip().startswith("precision"):
            self._word()
        if word in ("struct", "array", "map"):
            self._take("<")
            if word == "array":
                result = HiveType("array", (), (self.parse_type(),))
            elif word == "map":
                key = self.parse_type()
                self._take(",")
                result = HiveType("map", (), (key, self.parse_type()))
            else:
                fields = []
                while True:
                    name = self._word()
                    self._take(":")
                    fields.append((name, self.parse_type()))
                    if self._peek() != ",":
                        break
                    self._take(",")
                result = HiveType.struct(fields)
            self._take(">")
            return result
        name = _PRIMITIVE_ALIASES.get(word)
        if name is None:
            raise self._error(f"unsupported Hive type {word!r}")
        if name == "decimal":
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
        if name in ("varchar", "char"):
            self._take("(")
            length = self._int()
            self._take(")")
            limit = 65535 if name == "varchar" else 255
            if not 1 <= length <= limit:
                raise self._error(f"{name} length must be in 1..{limit}")
            return HiveType(name, (length,))
        return HiveType(name)


def acid_event_type(row_type: HiveType) -> HiveType:
    """The ACID event file type wrapping ``row_type`` (a struct of the table columns)."""
    if row_type.name != "struct":
        raise ValueError("the row type of an ACID file must be a struct")
    return HiveType.struct(
        [
            ("operation", HiveType("int")),
            ("originalTransaction", HiveType("bigint")),
            ("bucket", HiveType("int")),
            ("rowId", HiveType("bigint")),
            ("currentTransaction", HiveType("bigint")),
            ("row", row_type),
        ]
    )


def acid_event_arrow_schema(row_type: HiveType) -> pa.Schema:
    """The Arrow schema ``pyarrow.orc`` reads an ACID event file with ``row_type`` as."""
    event = acid_event_type(row_type)
    return pa.schema([pa.field(n, t.to_arrow()) for n, t in event.fields])


# --------------------------------------------------------------------------------------------
# Encoding Arrow columns into the Python values pyorc writes
# --------------------------------------------------------------------------------------------

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH_DATETIME = dt.datetime(1970, 1, 1)
_NANOS = 1_000_000_000


class _PassThroughTimestamp(ORCConverter):
    """Timestamps arrive as nanoseconds since the epoch (wall clock, written as UTC)."""

    @staticmethod
    def from_orc(seconds: int, nanoseconds: int, timezone: Any) -> tuple[int, int]:
        return seconds, nanoseconds

    @staticmethod
    def to_orc(obj: int, timezone: Any) -> tuple[int, int]:
        return divmod(obj, _NANOS)


class _PassThroughDate(ORCConverter):
    """Dates arrive as days since the epoch."""

    @staticmethod
    def from_orc(days: int) -> int:
        return days

    @staticmethod
    def to_orc(obj: int) -> int:
        return obj


class _PassThroughDecimal(ORCConverter):
    """Decimals arrive as their unscaled integer."""

    @staticmethod
    def from_orc(decimal: str) -> str:
        return decimal

    @staticmethod
    def to_orc(precision: int, scale: int, obj: int) -> int:
        return obj


_CONVERTERS: dict[TypeKind, type[ORCConverter]] = {
    TypeKind.TIMESTAMP: _PassThroughTimestamp,
    TypeKind.DATE: _PassThroughDate,
    TypeKind.DECIMAL: _PassThroughDecimal,
}


def _datetime_to_nanos(value: dt.datetime | int) -> int:
    if isinstance(value, int):
        return value
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    delta = value - _EPOCH_DATETIME
    return (delta.days * 86_400 + delta.seconds) * _NANOS + delta.microseconds * 1_000


def _python_encoder(hive_type: HiveType) -> Callable[[Any], Any] | None:
    """A function turning a ``to_pylist()`` value into what pyorc writes (None = unchanged)."""
    name = hive_type.name
    if name == "decimal":
        scale = hive_type.params[1]
        context = decimal.Context(prec=80)  # the default 28 digits would round decimal(38,s)
        return lambda v: None if v is None else int(Decimal(v).scaleb(scale, context))
    if name == "date":
        return lambda v: None if v is None else (v - _EPOCH_DATE).days
    if name == "timestamp":
        return lambda v: None if v is None else _datetime_to_nanos(v)
    if name == "array":
        inner = _python_encoder(hive_type.children[0])
        if inner is None:
            return None
        return lambda v: None if v is None else [inner(x) for x in v]
    if name == "map":
        key_enc = _python_encoder(hive_type.children[0]) or (lambda x: x)
        val_enc = _python_encoder(hive_type.children[1]) or (lambda x: x)
        return lambda v: None if v is None else {key_enc(k): val_enc(x) for k, x in v}
    if name == "struct":
        encs = [(n, _python_encoder(t) or (lambda x: x)) for n, t in hive_type.fields]
        return lambda v: None if v is None else tuple(enc(v[n]) for n, enc in encs)
    return None


def _encode_column(array: pa.Array | pa.ChunkedArray, hive_type: HiveType) -> list[Any]:
    """The Python values pyorc writes for an Arrow column of ``hive_type.to_arrow()`` type."""
    name = hive_type.name
    if name == "decimal" and hive_type.params[0] <= 18:
        scale = hive_type.params[1]
        factor = pa.scalar(Decimal(10**scale), pa.decimal128(scale + 1, 0))
        return pc.cast(pc.multiply(array, factor), pa.int64()).to_pylist()
    if name == "timestamp":
        return pc.cast(pc.cast(array, pa.timestamp("ns")), pa.int64()).to_pylist()
    if name == "date":
        return pc.cast(array, pa.int32()).to_pylist()
    values = array.to_pylist()
    encoder = _python_encoder(hive_type)
    if encoder is None:
        return values
    return [encoder(v) for v in values]


def _row_tuples(rows: pa.Table | pa.StructArray, row_type: HiveType) -> Iterable[tuple]:
    """Row tuples (struct_repr=TUPLE) of a table or non-null struct array."""
    if isinstance(rows, pa.Table):
        columns = [rows.column(n) for n in row_type.field_names]
    else:
        columns = rows.flatten()
    encoded = [_encode_column(col, t) for col, t in zip(columns, row_type.children, strict=True)]
    if not encoded:
        return itertools.repeat((), len(rows))
    return zip(*encoded, strict=True)


# --------------------------------------------------------------------------------------------
# Writing ORC files
# --------------------------------------------------------------------------------------------

#: Compression names accepted, with pyorc's kind and pyarrow's name for each.
_COMPRESSION = {
    "none": (pyorc.CompressionKind.NONE, "uncompressed"),
    "zlib": (pyorc.CompressionKind.ZLIB, "zlib"),
    "snappy": (pyorc.CompressionKind.SNAPPY, "snappy"),
    "lz4": (pyorc.CompressionKind.LZ4, "lz4"),
    "zstd": (pyorc.CompressionKind.ZSTD, "zstd"),
}
_ENGINES = ("auto", "pyarrow", "pyorc")
_ROW_INDEX_STRIDE = 10_000  # Hive's default
_COMPRESSION_BLOCK_SIZE = 256 * 1024  # Hive's default
_DICTIONARY_KEY_THRESHOLD = 0.8  # Hive's default


def _compression(compression: str) -> tuple[pyorc.CompressionKind, str]:
    try:
        return _COMPRESSION[compression.lower()]
    except KeyError:
        raise ValueError(
            f"unknown compression {compression!r}; use one of {list(_COMPRESSION)}"
        ) from None


def _has_char_types(hive_type: HiveType) -> bool:
    return hive_type.name in ("char", "varchar") or any(map(_has_char_types, hive_type.children))


def _engine(engine: str, orc_type: HiveType) -> str:
    """``pyarrow`` (fast) unless the type needs pyorc: Arrow has no char/varchar."""
    if engine not in _ENGINES:
        raise ValueError(f"engine must be one of {_ENGINES}, got {engine!r}")
    if engine == "auto":
        return "pyorc" if _has_char_types(orc_type) else "pyarrow"
    if engine == "pyarrow" and _has_char_types(orc_type):
        raise ValueError("pyarrow cannot write char/varchar columns; use the pyorc engine")
    return engine


@dataclass(frozen=True)
class WrittenFile:
    """What was written to one ORC file."""

    path: str
    rows: int
    stripes: int
    #: ORC user metadata (empty for plain files).
    user_metadata: Mapping[str, bytes] = field(default_factory=dict)


def _makedirs_for(fs: Any, path: str) -> None:
    parent = path.rsplit("/", 1)[0]
    if parent:
        fs.makedirs(parent, exist_ok=True)


def _stripe_lengths(orc_bytes: bytes) -> list[int]:
    """Rows per stripe of an ORC file (read from its footer only)."""
    reader = pyorc.Reader(io.BytesIO(orc_bytes))
    return [len(reader.read_stripe(i)) for i in range(reader.num_of_stripes)]


def _write_orc(
    fs: Any,
    path: str,
    table: pa.Table,
    orc_type: HiveType,
    *,
    stripe_rows: int,
    compression: str,
    engine: str,
    user_metadata: Callable[[list[int]], Mapping[str, bytes]] | None = None,
) -> list[int]:
    """Write ``table`` (columns of the struct ``orc_type``) as one ORC file.

    ``user_metadata`` receives the rows per stripe and returns the file's user metadata.
    Returns the rows per stripe.

    Stripes: the pyorc engine cuts one after exactly every ``stripe_rows`` rows (by flushing
    an intermediate footer, as streaming writers do; readers use only the final footer). The
    pyarrow engine adds ``stripe_rows`` rows at a time with a one-byte stripe size: the ORC
    writer then cuts a stripe at the first such boundary where the stripe's compressed streams
    are non-empty, which for realistic sizes (a compression block of data per ``stripe_rows``
    rows) is every boundary. ``auto`` tries pyarrow and falls back to pyorc when the stripes
    did not come out exact. The metadata is computed from the stripes actually written.
    """
    if stripe_rows < 1:
        raise ValueError("stripe_rows must be positive")
    kind, arrow_compression = _compression(compression)
    n = table.num_rows
    exact = [min(stripe_rows, n - start) for start in range(0, n, stripe_rows)]
    chosen = _engine(engine, orc_type)
    data = b""
    if chosen == "pyarrow":
        sink = pa.BufferOutputStream()
        # One chunk: otherwise the writer also adds (and may cut a stripe after) every chunk.
        schema = pa.schema([pa.field(n, t.to_arrow()) for n, t in orc_type.fields])
        orc.write_table(
            table.cast(schema).combine_chunks(),
            sink,
            file_version="0.12",
            batch_size=stripe_rows,
            stripe_size=1,
            compression=arrow_compression,
            compression_block_size=_COMPRESSION_BLOCK_SIZE,
            row_index_stride=_ROW_INDEX_STRIDE,
            dictionary_key_size_threshold=_DICTIONARY_KEY_THRESHOLD,
        )
        data = sink.getvalue().to_pybytes()
        lengths = _stripe_lengths(data)
        if engine == "auto" and lengths != exact:
            chosen = "pyorc"  # stripes too small for pyarrow's cuts to be exact
        elif user_metadata is not None:
            data = append_user_metadata(data, user_metadata(lengths))
    if chosen == "pyorc":
        lengths = exact
        buffer = io.BytesIO()
        writer = pyorc.Writer(
            buffer,
            orc_type.to_orc(),
            batch_size=min(stripe_rows, 10_000),
            row_index_stride=_ROW_INDEX_STRIDE,
            compression=kind,
            compression_block_size=_COMPRESSION_BLOCK_SIZE,
            converters=_CONVERTERS,
            dict_key_size_threshold=_DICTIONARY_KEY_THRESHOLD,
        )
        rows = _pyorc_rows(table, orc_type)
        for length in lengths:
            writer.writerows(itertools.islice(rows, length))
            if length == stripe_rows:
                writer.write_intermediate_footer()  # cuts the stripe here
        if user_metadata is not None:
            writer.set_user_metadata(**user_metadata(lengths))
        writer.close()
        data = buffer.getvalue()
    _makedirs_for(fs, path)
    fs.pipe_file(path, data)
    return lengths


def _pyorc_rows(table: pa.Table, orc_type: HiveType) -> Iterable[tuple]:
    """Row tuples for pyorc; a top-level struct column that is null becomes None."""
    columns = []
    for name, t in orc_type.fields:
        column = table[name].combine_chunks()
        if t.name == "struct" and len(column) and column.null_count == len(column):
            columns.append(itertools.repeat(None, len(column)))  # delete events
        elif t.name == "struct" and column.null_count:
            tuples = _row_tuples(column, t)
            valid = column.is_valid().to_pylist()
            columns.append([v if ok else None for v, ok in zip(tuples, valid, strict=True)])
        elif t.name == "struct":
            columns.append(_row_tuples(column, t))
        else:
            columns.append(_encode_column(column, t))
    return zip(*columns, strict=True) if columns else iter(())


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _protobuf_fields(buf: bytes) -> list[tuple[int, int, bytes]]:
    """``(field number, value if varint else 0, raw bytes of the field)`` of a message."""
    fields, pos = [], 0
    while pos < len(buf):
        start = pos
        key, pos = _read_varint(buf, pos)
        wire_type, value = key & 7, 0
        if wire_type == 0:
            value, pos = _read_varint(buf, pos)
        elif wire_type == 2:
            length, pos = _read_varint(buf, pos)
            pos += length
        elif wire_type in (1, 5):
            pos += 8 if wire_type == 1 else 4
        else:
            raise ValueError(f"unexpected protobuf wire type {wire_type} in the ORC postscript")
        fields.append((key >> 3, value, buf[start:pos]))
    return fields


def append_user_metadata(orc_bytes: bytes, metadata: Mapping[str, bytes]) -> bytes:
    """Add user metadata to a finished ORC file (what pyarrow's ORC writer cannot do).

    ORC ends with ``footer, postscript, 1 byte postscript length``; the footer is a protobuf
    message stored as a stream of compression chunks (3-byte header ``length << 1 | original``).
    Protobuf merges concatenated messages and repeats repeated fields, so appending the
    ``metadata`` entries (Footer field 5, ``UserMetadataItem{name=1, value=2}``) as one more,
    uncompressed ("original") chunk and enlarging ``footerLength`` (PostScript field 1) yields a
    valid footer that holds them. Nothing before the footer moves.
    """
    ps_length = orc_bytes[-1]
    postscript = orc_bytes[-1 - ps_length : -1]
    fields = _protobuf_fields(postscript)
    values = {number: value for number, value, _ in fields}
    footer_length, compression = values[1], values.get(2, 0)
    extra = b""
    for name, value in metadata.items():
        key = name.encode()
        item = b"\x0a" + _varint(len(key)) + key + b"\x12" + _varint(len(value)) + bytes(value)
        extra += b"\x2a" + _varint(len(item)) + item
    if compression != 0:  # CompressionKind NONE has no chunk headers
        if len(extra) >= 1 << 23:
            raise ValueError("user metadata too large")
        extra = ((len(extra) << 1) | 1).to_bytes(3, "little") + extra
    new_postscript = b"".join(
        b"\x08" + _varint(footer_length + len(extra)) if number == 1 else raw
        for number, _, raw in fields
    )
    if len(new_postscript) > 255:
        raise ValueError("ORC postscript too long")
    footer_end = len(orc_bytes) - 1 - ps_length
    return orc_bytes[:footer_end] + extra + new_postscript + bytes([len(new_postscript)])


def write_plain_file(
    fs: Any,
    path: str,
    rows: pa.Table,
    row_type: HiveType,
    *,
    stripe_rows: int = 100_000,
    compression: str = "zlib",
    engine: str = "auto",
) -> WrittenFile:
    """Write ``rows`` as a plain-schema ORC file (pre-ACID originals, insert-only tables).

    ``rows`` must have the columns of the struct ``row_type``. ``engine`` is ``pyarrow``
    (fast), ``pyorc`` (needed for char/varchar) or ``auto`` (pyarrow when possible).
    """
    lengths = _write_orc(
        fs,
        path,
        rows,
        row_type,
        stripe_rows=stripe_rows,
        compression=compression,
        engine=engine,
    )
    return WrittenFile(path, rows.num_rows, len(lengths))


def acid_user_metadata(events: pa.Table, stripe_lengths: Sequence[int]) -> dict[str, bytes]:
    """The ``hive.acid.*`` user metadata of sorted ACID events stored in stripes of
    ``stripe_lengths`` rows.

    ``hive.acid.stats`` counts ``inserts,updates,deletes``; ``hive.acid.key.index`` holds the
    last ``originalTransaction,bucket,rowId;`` of every stripe.
    """
    n = events.num_rows
    operations = pc.value_counts(events["operation"]).to_pylist() if n else []
    counts = {entry["values"]: entry["counts"] for entry in operations}
    if set(counts) - {OPERATION_INSERT, OPERATION_UPDATE, OPERATION_DELETE}:
        raise ValueError("operation must be 0 (insert), 1 (update) or 2 (delete)")
    if sum(stripe_lengths) != n:
        raise ValueError("stripe lengths do not add up to the number of events")
    ends = list(itertools.accumulate(stripe_lengths, initial=-1))[1:]
    last = events.select(["originalTransaction", "bucket", "rowId"]).take(
        pa.array(ends, pa.int64())
    )
    keys = zip(*(last[c].to_pylist() for c in last.column_names), strict=True)
    return {
        KEY_INDEX_KEY: "".join(f"{o},{b},{r};" for o, b, r in keys).encode(),
        STATS_KEY: ",".join(
            str(counts.get(op, 0)) for op in (OPERATION_INSERT, OPERATION_UPDATE, OPERATION_DELETE)
        ).encode(),
        VERSION_KEY: str(ACID_VERSION).encode(),
    }


def _is_sorted(events: pa.Table) -> bool:
    """Cheap check for the usual case: one (originalTransaction, bucket), rowIds ascending."""
    for name in ("originalTransaction", "bucket"):
        bounds = pc.min_max(events[name])
        if bounds["min"] != bounds["max"]:
            return False
    row_ids = events["rowId"].combine_chunks()
    n = len(row_ids)
    return not pc.any(pc.less(row_ids.slice(1), row_ids.slice(0, n - 1))).as_py()


def write_acid_file(
    fs: Any,
    path: str,
    events: pa.Table,
    row_type: HiveType,
    *,
    stripe_rows: int = 100_000,
    compression: str = "zlib",
    engine: str = "auto",
    sort: bool = True,
) -> WrittenFile:
    """Write ACID events as Hive 3 does, with the ``hive.acid.*`` user metadata.

    ``events`` has the columns ``operation``, ``originalTransaction``, ``bucket``, ``rowId``,
    ``currentTransaction`` and ``row`` (a struct column of ``row_type.to_arrow()``, null for
    delete events). With ``sort`` (the default) events are sorted by
    ``(originalTransaction, bucket, rowId)`` as Hive keeps them. ``engine``: see
    :func:`write_plain_file`.
    """
    missing = [c for c in ACID_COLUMN_NAMES if c not in events.column_names]
    if missing:
        raise ValueError(f"ACID events lack columns {missing}")
    events = events.select(list(ACID_COLUMN_NAMES))
    for name in ACID_COLUMN_NAMES[:5]:
        if events[name].null_count:
            raise ValueError(f"ACID column {name} must not contain nulls")
    if sort and events.num_rows > 1 and not _is_sorted(events):
        events = events.sort_by(
            [("originalTransaction", "ascending"), ("bucket", "ascending"), ("rowId", "ascending")]
        )
    written: dict[str, bytes] = {}

    def metadata(lengths: list[int]) -> dict[str, bytes]:
        written.update(acid_user_metadata(events, lengths))
        return written

    lengths = _write_orc(
        fs,
        path,
        events,
        acid_event_type(row_type),
        stripe_rows=stripe_rows,
        compression=compression,
        engine=engine,
        user_metadata=metadata,
    )
    return WrittenFile(path, events.num_rows, len(lengths), written)


def write_acid_version_file(fs: Any, folder: str) -> str:
    """Write ``<folder>/_orc_acid_version`` holding the single byte ``2``."""
    fs.makedirs(folder, exist_ok=True)
    path = f"{folder}/{ACID_VERSION_FILE}"
    fs.pipe_file(path, str(ACID_VERSION).encode())
    return path


# --------------------------------------------------------------------------------------------
# Hive bucketing (bucketing_version=2: Murmur3 with seed 104729)
# --------------------------------------------------------------------------------------------

_MASK32 = 0xFFFFFFFF
_C1, _C2 = 0xCC9E2D51, 0x1B873593
_MURMUR_SEED = 104729


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _signed32(x: int) -> int:
    x &= _MASK32
    return x - (1 << 32) if x >= 1 << 31 else x


def murmur3_32(data: bytes, seed: int = _MURMUR_SEED) -> int:
    """Hive's ``Murmur3.hash32`` (signed result; tail bytes are sign-extended as Hive does)."""
    h = seed & _MASK32
    blocks = len(data) // 4
    for i in range(blocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = _rotl((k * _C1) & _MASK32, 15) * _C2 & _MASK32
        h = (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & _MASK32
    tail = data[4 * blocks :]
    if tail:
        k1 = 0
        for i in reversed(range(len(tail))):
            byte = tail[i] - 256 if tail[i] >= 128 else tail[i]
            k1 ^= (byte << (8 * i)) & _MASK32
        k1 = _rotl((k1 * _C1) & _MASK32, 15) * _C2 & _MASK32
        h ^= k1
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return _signed32(h)


def hive_bucket_hash(value: Any, hive_type: HiveType | str) -> int:
    """Hive's bucketing hash (``bucketing_version=2``) of one value; ``None`` hashes to 0."""
    t = HiveType.parse(hive_type)
    if value is None:
        return 0
    name = t.name
    if name == "boolean":
        return 1 if value else 0
    if name == "tinyint":
        return int(value)
    if name == "smallint":
        return murmur3_32(struct.pack(">h", value))
    if name == "int":
        return murmur3_32(struct.pack(">i", value))
    if name == "bigint":
        return murmur3_32(struct.pack(">q", value))
    if name == "date":
        days = value if isinstance(value, int) else (value - _EPOCH_DATE).days
        return murmur3_32(struct.pack(">i", days))
    if name == "float":
        # Hive: byteBuffer.putFloat(Float.floatToIntBits(v)), i.e. the bit pattern (an int)
        # converted to a float *numerically* before hashing its bytes.
        bits = 0x7FC00000 if value != value else struct.unpack(">i", struct.pack(">f", value))[0]
        return murmur3_32(struct.pack(">f", float(bits)))
    if name == "double":
        # Hive: byteBuffer.putDouble(Double.doubleToLongBits(v)), the same numeric conversion.
        if value != value:
            bits = 0x7FF8000000000000
        else:
            bits = struct.unpack(">q", struct.pack(">d", value))[0]
        return murmur3_32(struct.pack(">d", float(bits)))
    if name in ("string", "varchar", "char", "binary"):
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        if name == "char":
            data = data.rstrip(b" ")  # Hive hashes the stripped value of a char
        return murmur3_32(data)
    if name == "array":
        result = 0
        for item in value:
            result = (result * 31 + hive_bucket_hash(item, t.children[0])) & _MASK32
        return _signed32(result)
    raise TypeError(f"Hive cannot bucket by a column of type {t}")


def _u32(x: Any) -> pa.Scalar:
    return pa.scalar(x, pa.uint32())


def _vec_rotl(x: pa.Array, r: int) -> pa.Array:
    return pc.bit_wise_or(pc.shift_left(x, _u32(r)), pc.shift_right(x, _u32(32 - r)))


def _vec_bswap(x: pa.Array) -> pa.Array:
    b0 = pc.bit_wise_and(x, _u32(0xFF))
    b1 = pc.bit_wise_and(pc.shift_right(x, _u32(8)), _u32(0xFF))
    b2 = pc.bit_wise_and(pc.shift_right(x, _u32(16)), _u32(0xFF))
    b3 = pc.shift_right(x, _u32(24))
    out = pc.bit_wise_or(pc.shift_left(b0, _u32(24)), pc.shift_left(b1, _u32(16)))
    return pc.bit_wise_or(out, pc.bit_wise_or(pc.shift_left(b2, _u32(8)), b3))


def _vec_murmur_blocks(blocks: Sequence[pa.Array], length: int) -> pa.Array:
    """Vectorised Murmur3 of inputs made of whole little-endian 4-byte ``blocks`` (uint32)."""
    h: pa.Array | pa.Scalar = _u32(_MURMUR_SEED)
    for k in blocks:
        k = pc.multiply(_vec_rotl(pc.multiply(k, _u32(_C1)), 15), _u32(_C2))
        h = pc.bit_wise_xor(h, k)
        h = pc.add(pc.multiply(_vec_rotl(h, 13), _u32(5)), _u32(0xE6546B64))
    h = pc.bit_wise_xor(h, _u32(length))
    h = pc.bit_wise_xor(h, pc.shift_right(h, _u32(16)))
    h = pc.multiply(h, _u32(0x85EBCA6B))
    h = pc.bit_wise_xor(h, pc.shift_right(h, _u32(13)))
    h = pc.multiply(h, _u32(0xC2B2AE35))
    return pc.bit_wise_xor(h, pc.shift_right(h, _u32(16)))


def _vec_hash(array: pa.Array, hive_type: HiveType) -> pa.Array | None:
    """uint32 bucketing hashes of a whole column, or None when not vectorised for the type."""
    name = hive_type.name
    if name in ("int", "date"):
        x = pc.cast(pc.cast(array, pa.int32()), pa.uint32(), safe=False)
        return _vec_murmur_blocks([_vec_bswap(x)], 4)
    if name == "bigint":
        high = pc.cast(pc.shift_right(array, pa.scalar(32, pa.int64())), pa.uint32(), safe=False)
        low = pc.cast(array, pa.uint32(), safe=False)
        return _vec_murmur_blocks([_vec_bswap(high), _vec_bswap(low)], 8)
    if name == "tinyint":
        return pc.cast(pc.cast(array, pa.int32()), pa.uint32(), safe=False)
    if name == "boolean":
        return pc.cast(array, pa.uint32())
    return None


def hive_bucket_ids(
    columns: Sequence[pa.Array | pa.ChunkedArray],
    types: Sequence[HiveType | str],
    num_buckets: int,
) -> pa.Array:
    """The bucket id (int32) Hive assigns each row for bucketing columns ``columns``.

    Combines the per-column hashes as ``h = 31 * h + hash(col)`` and maps the result with
    ``(h & Integer.MAX_VALUE) % num_buckets``, as Hive's ``ObjectInspectorUtils`` does.
    Integer, date and boolean columns are hashed vectorised; other types row by row.
    """
    if not columns:
        raise ValueError("at least one bucketing column is needed")
    total: pa.Array | pa.Scalar = _u32(0)
    for column, t in zip(columns, types, strict=True):
        t = HiveType.parse(t)
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        hashed = _vec_hash(array, t)
        if hashed is None:
            hashed = pa.array(
                [hive_bucket_hash(v, t) & _MASK32 for v in array.to_pylist()], pa.uint32()
            )
        hashed = pc.fill_null(hashed, _u32(0))
        total = pc.add(pc.multiply(total, _u32(31)), hashed)
    positive = pc.bit_wise_and(total, _u32(0x7FFFFFFF))
    quotient = pc.divide(positive, _u32(num_buckets))
    return pc.cast(pc.subtract(positive, pc.multiply(quotient, _u32(num_buckets))), pa.int32())
