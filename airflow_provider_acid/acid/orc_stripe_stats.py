"""The stripe statistics of an ORC file, read from its tail without decoding a stripe.

An ORC file ends with its metadata section (one ``StripeStatistics`` a stripe: a
``ColumnStatistics`` a column), its footer (one ``StripeInformation`` a stripe, with its row
count) and its postscript. pyarrow reads stripes but does not give their statistics, and
pyorc's per-column statistics of a stripe cost about as much as decoding the ACID identity
columns they would spare. So the two sections are read here: decompressed (ORC's 3-byte chunk
headers; no compression and ZLIB, Hive's default, only) and parsed with just enough of the
protobuf wire format (:mod:`.protobuf_fields`) for the integer statistics. Anything else
(another codec, a message this module does not expect) gives None: the caller reads the
stripes instead.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

import pyarrow.orc as pa_orc

from .protobuf_fields import ProtobufError, message_fields

#: The codecs whose sections are read (pyarrow's names of them).
CODECS = ("UNCOMPRESSED", "ZLIB")


class Unreadable(ValueError):
    """A section this module does not read (the caller falls back to the stripes)."""


@dataclass(frozen=True)
class IntegerBounds:
    """One integer column's statistics in one stripe: values, nulls, minimum and maximum (None
    when the writer left them out)."""

    values: int | None
    has_null: bool | None
    minimum: int | None
    maximum: int | None


@dataclass(frozen=True)
class StripeStatistics:
    """One stripe: its row count (from the footer) and its columns' integer statistics, by
    ORC column id (0 is the root struct; a column without integer statistics has bounds
    without minimum and maximum)."""

    rows: int
    columns: tuple[IntegerBounds, ...]


def _zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def decompressed(data: bytes, codec: str) -> bytes:
    """A section's bytes: ORC's chunks (3-byte little-endian header, length << 1 | original);
    :class:`Unreadable` for a damaged one.

    :param data: the section as stored.
    :param codec: pyarrow's name of the file's codec (one of :data:`CODECS`).
    """
    if codec == "UNCOMPRESSED":
        return data
    out, at = [], 0
    while at < len(data):
        if at + 3 > len(data):
            raise Unreadable("truncated chunk header")
        header = data[at] | data[at + 1] << 8 | data[at + 2] << 16
        at += 3
        size, original = header >> 1, header & 1
        chunk = data[at : at + size]
        if len(chunk) != size:
            raise Unreadable("truncated chunk")
        at += size
        try:
            out.append(chunk if original else zlib.decompress(chunk, -15))
        except zlib.error as exc:
            raise Unreadable(str(exc)) from None
    return b"".join(out)


def integer_statistics(message: bytes) -> IntegerBounds:
    """A ``ColumnStatistics`` message's value count, null flag and integer bounds (None for
    what it does not hold, as in a column of another type).

    :param message: the message's bytes.
    """
    values = has_null = minimum = maximum = None
    for number, value in message_fields(message):
        if number == 1 and isinstance(value, int):
            values = value
        elif number == 10 and isinstance(value, int):
            has_null = bool(value)
        elif number == 2 and isinstance(value, bytes):
            for inner, bound in message_fields(value):
                if inner == 1 and isinstance(bound, int):
                    minimum = _zigzag(bound)
                elif inner == 2 and isinstance(bound, int):
                    maximum = _zigzag(bound)
    return IntegerBounds(values, has_null, minimum, maximum)


def _messages(data: bytes, number: int) -> list[bytes]:
    return [v for n, v in message_fields(data) if n == number and isinstance(v, bytes)]


def read_stripe_statistics(
    handle: IO[bytes], orc: pa_orc.ORCFile, columns: int | None = None
) -> list[StripeStatistics] | None:
    """Each stripe's row count and integer column statistics; None when the file's codec or
    sections are not ones this module reads (see the module).

    :param handle: the ORC file, open for reading (seekable).
    :param orc: the same file opened by pyarrow (its codec and the lengths of its sections).
    :param columns: parse the statistics of the first ``columns`` column ids only (the others
        are left out of each stripe's ``columns``); None parses all.
    """
    codec, stripes = orc.compression, orc.nstripes
    metadata_length, footer_length = orc.stripe_statistics_length, orc.file_footer_length
    start = orc.file_length - 1 - orc.file_postscript_length - footer_length - metadata_length
    if codec not in CODECS or metadata_length <= 0 or start < 3:
        return None
    handle.seek(start)
    tail = handle.read(metadata_length + footer_length)
    if len(tail) != metadata_length + footer_length:
        return None
    try:
        metadata = decompressed(tail[:metadata_length], codec)
        footer = decompressed(tail[metadata_length:], codec)
        rows = [
            next((v for n, v in message_fields(s) if n == 5 and isinstance(v, int)), None)
            for s in _messages(footer, 3)
        ]
        found = [
            tuple(integer_statistics(c) for c in _messages(s, 1)[:columns])
            for s in _messages(metadata, 1)
        ]
    except (Unreadable, ProtobufError):
        return None
    if len(rows) != stripes or len(found) != stripes or any(r is None for r in rows):
        return None
    return [StripeStatistics(int(r or 0), c) for r, c in zip(rows, found, strict=True)]


def integer_bounds(
    stripe: StripeStatistics, column_ids: Sequence[int]
) -> list[tuple[int, int]] | None:
    """The minimum and maximum of each of ``column_ids`` in a stripe, all of them without
    nulls (every row counted as a value); None when a statistic is missing or shows a null.

    :param stripe: one stripe's statistics.
    :param column_ids: ORC column ids.
    """
    found = []
    for column in column_ids:
        if column >= len(stripe.columns):
            return None
        bounds = stripe.columns[column]
        if (
            bounds.minimum is None
            or bounds.maximum is None
            or bounds.has_null is not False
            or bounds.values != stripe.rows
        ):
            return None
        found.append((bounds.minimum, bounds.maximum))
    return found


__all__ = [
    "CODECS",
    "IntegerBounds",
    "StripeStatistics",
    "Unreadable",
    "decompressed",
    "integer_statistics",
    "integer_bounds",
    "read_stripe_statistics",
]
