"""An ORC file's declared column types and file statistics, read from its tail without pyorc.

pyarrow's schema of an ORC file loses what Hive declared (``varchar(20)`` and ``char(3)`` read
as ``string``), so the declared types come from the file's footer. pyorc reads them, but opening
a file with pyorc parses the whole tail into C++ objects, and a change feed opens a few dozen
small files: about 5% of its time went there. This module reads the postscript and the
footer itself, with :mod:`.protobuf_fields`, for the two things asked of it: the type tree, as
a :class:`.hive_types.HiveType`, and one integer column's minimum and maximum over the file.

Only the codecs :mod:`.orc_stripe_stats` decompresses are read (no compression, and ZLIB,
Hive's default), and only types :class:`.hive_types.HiveType` holds. For anything else
(another codec, a union, a decimal without precision as Hive 0.11 wrote it, a message this
module does not expect) :func:`read_footer` gives None and the caller asks pyorc, which names
what is wrong with a damaged file.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import IO

from .hive_types import HiveType
from .orc_stripe_stats import Unreadable, decompressed, integer_statistics
from .protobuf_fields import ProtobufError, message_fields, repeated_ints

#: The most bytes read from the end of a file at once: postscript, footer and what precedes
#: them (a small delta's footer is a few hundred bytes, a base's a few KiB).
TAIL_BYTES = 16 * 1024

_POSTSCRIPT_FOOTER_LENGTH, _POSTSCRIPT_COMPRESSION = 1, 2
_POSTSCRIPT_MAGIC = 8000
_CODECS = {0: "UNCOMPRESSED", 1: "ZLIB"}  # CompressionKind: NONE, ZLIB
_FOOTER_TYPES, _FOOTER_STATISTICS = 4, 7
_TYPE_KIND, _TYPE_SUBTYPES, _TYPE_NAMES = 1, 2, 3
_TYPE_LENGTH, _TYPE_PRECISION, _TYPE_SCALE = 4, 5, 6
#: ORC's Type.Kind to Hive's name, for the types without parameters nor children.
_SIMPLE = {
    0: "boolean",
    1: "tinyint",
    2: "smallint",
    3: "int",
    4: "bigint",
    5: "float",
    6: "double",
    7: "string",
    8: "binary",
    9: "timestamp",
    15: "date",
    18: "timestamp with local time zone",
}
_ARRAY, _MAP, _STRUCT, _DECIMAL, _VARCHAR, _CHAR = 10, 11, 12, 14, 16, 17


@dataclass(frozen=True)
class OrcFooter:
    """What :func:`read_footer` reads: the file's type (the root struct) and each column's
    statistics over the whole file, by ORC column id (``ColumnStatistics`` messages, parsed
    when asked: a file has a dozen columns, and one is asked for)."""

    file_type: HiveType
    statistics: tuple[bytes, ...]

    def integer_range(self, column: int) -> tuple[int, int] | None:
        """Column ``column``'s minimum and maximum over the file; None when either is absent.
        Statistics that do not parse are :class:`.orc_stripe_stats.Unreadable`.

        :param column: the ORC column id (0 is the root struct).
        """
        if column >= len(self.statistics):
            return None
        try:
            bounds = integer_statistics(self.statistics[column])
        except ProtobufError as exc:
            raise Unreadable(f"column {column}'s statistics: {exc}") from None
        if bounds.minimum is None or bounds.maximum is None:
            return None
        return bounds.minimum, bounds.maximum


def _hive_type(types: list[list[tuple[int, int | bytes]]], column: int, depth: int = 0) -> HiveType:
    """Column ``column``'s type, its children's built from theirs."""
    if depth > 100 or column >= len(types):
        raise Unreadable("a type tree that does not close")
    fields = types[column]
    kind = next((v for n, v in fields if n == _TYPE_KIND and isinstance(v, int)), 0)
    ints = {n: v for n, v in fields if isinstance(v, int)}
    if kind in _SIMPLE:
        return HiveType(_SIMPLE[kind])
    if kind in (_VARCHAR, _CHAR):
        return HiveType("varchar" if kind == _VARCHAR else "char", (ints.get(_TYPE_LENGTH, 0),))
    if kind == _DECIMAL:
        precision, scale = ints.get(_TYPE_PRECISION, 0), ints.get(_TYPE_SCALE, 0)
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise Unreadable(f"decimal({precision},{scale})")  # pyorc says what it reads it as
        return HiveType("decimal", (precision, scale))
    children = [c for n, v in fields if n == _TYPE_SUBTYPES for c in repeated_ints(v)]
    if any(c <= column for c in children):
        raise Unreadable("a child type before its parent")
    built = tuple(_hive_type(types, c, depth + 1) for c in children)
    if kind == _ARRAY and len(built) == 1:
        return HiveType("array", (), built)
    if kind == _MAP and len(built) == 2:
        return HiveType("map", (), built)
    if kind == _STRUCT:
        names = tuple(v.decode() for n, v in fields if n == _TYPE_NAMES and isinstance(v, bytes))
        if len(names) != len(built):
            raise Unreadable("a struct whose fields and names differ")
        return HiveType("struct", (), built, names)
    raise Unreadable(f"type kind {kind}")  # a union, or a kind this module does not know


@functools.lru_cache(maxsize=64)
def _file_type(types: tuple[bytes, ...]) -> HiveType:
    """The type tree of a footer's ``Type`` messages, built once for a table's files (they
    share a handful of schemas: building one is half of reading a small file's footer)."""
    return _hive_type([message_fields(t) for t in types], 0)


def read_footer(handle: IO[bytes], size: int | None = None) -> OrcFooter | None:
    """The file's type and file statistics from its footer; None when this module does not
    read them (see the module docstring: the caller then asks pyorc).

    :param handle: the ORC file, open for reading (seekable).
    :param size: the file's length in bytes, when known (else found by seeking to its end).
    """
    if size is None:
        size = handle.seek(0, 2)
    try:
        start = max(0, size - TAIL_BYTES)
        handle.seek(start)
        tail = handle.read(size - start)
        if len(tail) != size - start or not tail:
            return None
        postscript_length = tail[-1]
        postscript = dict(message_fields(tail[-1 - postscript_length : -1]))
        if postscript.get(_POSTSCRIPT_MAGIC) != b"ORC":
            return None
        codec = _CODECS.get(int(postscript.get(_POSTSCRIPT_COMPRESSION, 0)))
        footer_length = int(postscript.get(_POSTSCRIPT_FOOTER_LENGTH, 0))
        footer_end = size - 1 - postscript_length
        footer_start = footer_end - footer_length
        if codec is None or footer_start < 3:
            return None
        if footer_start < start:  # a footer longer than the tail read
            handle.seek(footer_start)
            raw = handle.read(footer_length)
        else:
            raw = tail[footer_start - start : footer_end - start]
        if len(raw) != footer_length:
            return None
        footer = message_fields(decompressed(raw, codec))
        types = tuple(v for n, v in footer if n == _FOOTER_TYPES and isinstance(v, bytes))
        if not types:
            return None
        file_type = _file_type(types)
        statistics = tuple(v for n, v in footer if n == _FOOTER_STATISTICS and isinstance(v, bytes))
    except (Unreadable, ProtobufError, UnicodeDecodeError, ValueError):
        return None
    if file_type.name != "struct":
        return None
    return OrcFooter(file_type, statistics)


__all__ = ["OrcFooter", "TAIL_BYTES", "read_footer"]
