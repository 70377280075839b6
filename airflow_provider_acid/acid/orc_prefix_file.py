"""The first rows of one stripe of an ORC file, as a small ORC file of their own bytes only.

pyarrow decodes ORC a stripe at a time, and each compressed stream a compression block at a
time: the first rows of a stripe cost the inflating of the first block of every stream read
(256 KiB each, as Hive writes them), however few rows are wanted. But a stream decodes from
its start, so the first ``n`` rows need only the first bytes of each stream. This module
writes, in memory, an ORC file whose only stripe holds those: each stream of the wanted
columns inflated only up to a budget (zlib stops there) and stored as uncompressed chunks,
the other columns' streams empty, no index streams, a stripe footer listing the new lengths
and a footer listing the one stripe with ``n`` rows (the file's own types, encodings and
metadata, no statistics). pyarrow reads that file as any other.

A decoder that needs more of a stream than the budget fails at its end: ORC's readers raise
on a stream that ends before the rows its stripe lists (they never pad one). The caller then
asks for more (:meth:`PrefixFile.grow`, which doubles every budget) and reads again, up to
the whole streams. A dictionary-encoded column's dictionary and its lengths are read whole
(the reader loads them whole).

Only files this module can read and rewrite are given a prefix file (no compression or ZLIB,
Hive's default; no encryption; messages that read back to their own bytes); for any other,
:func:`prefix_file` gives None.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable, Sequence
from typing import IO, Any

import pyarrow.orc as pa_orc

from .orc_prefix import framed, lossless_fields
from .orc_stripe_stats import CODECS, Unreadable, decompressed
from .protobuf_fields import ProtobufError, encoded, message_fields, repeated_ints

# Field numbers of ORC's protobuf messages (orc_proto.proto).
_FOOTER_STRIPES, _FOOTER_TYPES, _FOOTER_ROWS, _FOOTER_STATISTICS = 3, 4, 6, 7
_FOOTER_HEADER_LENGTH, _FOOTER_CONTENT_LENGTH, _FOOTER_ENCRYPTION = 1, 2, 10
_STRIPE_OFFSET, _STRIPE_INDEX, _STRIPE_DATA, _STRIPE_FOOTER, _STRIPE_ROWS = 1, 2, 3, 4, 5
_TYPE_KIND, _TYPE_SUBTYPES, _TYPE_NAMES = 1, 2, 3
_SFOOTER_STREAMS, _SFOOTER_COLUMNS, _SFOOTER_ENCRYPTION = 1, 2, 4
_STREAM_KIND, _STREAM_COLUMN, _STREAM_LENGTH = 1, 2, 3
_ENCODING_KIND = 1
_POSTSCRIPT_FOOTER_LENGTH, _POSTSCRIPT_METADATA_LENGTH, _POSTSCRIPT_STRIPE_STATISTICS = 1, 5, 7
_POSTSCRIPT_BLOCK_SIZE = 3
# Stream kinds: the dictionary's (read whole), and the index's (left out).
_LENGTH, _DICTIONARY_DATA, _DICTIONARY_COUNT = 2, 3, 4
_INDEX_KINDS = (6, 7, 8)  # ROW_INDEX, BLOOM_FILTER, BLOOM_FILTER_UTF8
_DICTIONARY_ENCODINGS = (1, 3)  # DICTIONARY, DICTIONARY_V2
#: The first budget of a stream (bytes inflated): its share of the stripe's rows of its
#: stored length, times this ratio, and at least :data:`_FIRST_BUDGET`. Text inflates more
#: than numbers: measured on the change benchmark's base files, the first 5,000 of 100,000 or
#: 1,000,000 rows need 1.1 to 2 times their share of the numbers' streams, 3.7 times of the
#: text's (the dictionary's indexes, 1.3).
_GUESSED_RATIO = 2.5
_TEXT_RATIO = 6
_TEXT_KINDS = (7, 8, 16, 17)  # STRING, BINARY, VARCHAR, CHAR
_DATA = 1
_FIRST_BUDGET = 4096
_Fields = list[tuple[int, int | bytes]]


class _StreamPrefix:
    """The first bytes of one stream, inflated chunk by chunk as far as asked."""

    def __init__(self, start: int, length: int, codec: str, entire: bool = False) -> None:
        self._at, self._end, self._codec = start, start + length, codec
        #: Read whole whatever the budget (a dictionary).
        self.entire = entire
        self.data = bytearray()
        self._inflating: Any = None  # zlib's inflater of the chunk being inflated
        self._pending = b""  # its input not inflated yet
        self._original = b""  # or the part of an uncompressed chunk not taken yet

    @property
    def whole(self) -> bool:
        return (
            self._at >= self._end
            and self._inflating is None
            and not self._original
            and not self._pending
        )

    def fill(self, size: int, handle: IO[bytes]) -> None:
        """Inflate until ``size`` bytes are held (or the stream ends)."""
        while len(self.data) < size and not self.whole:
            wanted = size - len(self.data)
            if self._original:
                self.data += self._original[:wanted]
                self._original = self._original[wanted:]
            elif self._inflating is not None:
                inflater = self._inflating
                piece = inflater.decompress(self._pending, wanted)
                self._pending = inflater.unconsumed_tail
                self.data += piece
                if inflater.eof or (not piece and not self._pending):
                    self.data += inflater.flush()
                    self._inflating, self._pending = None, b""
            else:
                self._next_chunk(handle, wanted)

    def _next_chunk(self, handle: IO[bytes], wanted: int) -> None:
        if self._codec == "UNCOMPRESSED":  # no chunks: the bytes as stored
            handle.seek(self._at)
            self._original = handle.read(min(self._end - self._at, max(wanted, 1 << 16)))
            if not self._original:
                raise Unreadable("a stream beyond the file")
            self._at += len(self._original)
            return
        handle.seek(self._at)
        header = handle.read(3)
        if len(header) != 3 or self._at + 3 > self._end:
            raise Unreadable("truncated chunk header")
        value = header[0] | header[1] << 8 | header[2] << 16
        size, original = value >> 1, value & 1
        if self._at + 3 + size > self._end:
            raise Unreadable("a chunk beyond its stream")
        chunk = handle.read(size)
        if len(chunk) != size:
            raise Unreadable("truncated chunk")
        self._at += 3 + size
        if original:
            self._original = chunk
        else:
            self._inflating, self._pending = zlib.decompressobj(-15), chunk


def _column_ids(types: Sequence[bytes], names: Sequence[str]) -> set[int]:
    """The ORC column ids of top-level columns ``names`` and all their nested columns."""
    root = message_fields(types[0])
    children = [n for f, v in root if f == _TYPE_SUBTYPES for n in repeated_ints(v)]
    labels = [v.decode() for f, v in root if f == _TYPE_NAMES and isinstance(v, bytes)]
    if len(children) != len(labels):
        raise Unreadable("a root type whose fields and names differ")
    ids = set()
    for name in names:
        if name not in labels:
            raise Unreadable(f"no top-level column {name}")
        at = labels.index(name)
        end = children[at + 1] if at + 1 < len(children) else len(types)
        ids.update(range(children[at], end))
    return ids


def _beyond(prefix: _StreamPrefix | None, budget: int, block: int) -> bool:
    """Whether a stream read in part would be inflated past the first compression block."""
    return prefix is not None and not prefix.whole and budget > block and not prefix.entire


class PrefixFile:
    """The first ``rows`` rows of one stripe as an ORC file of their bytes (see the module).

    :param open_file: opens the ORC file as a Python file object.
    :param parts: the file's messages' fields: its footer, postscript and stripe footer.
    :param rows: how many of the stripe's first rows.
    :param streams: the stripe's streams but its index's: kind, column, prefix (None: a
        column not read, left empty) and first budget of each.
    :param codec: the file's codec (pyarrow's name).
    :param block: the file's compression block size.
    """

    def __init__(
        self,
        open_file: Callable[[], IO[bytes]],
        parts: tuple[_Fields, _Fields, _Fields],
        rows: int,
        streams: list[tuple[int, int, _StreamPrefix | None, int]],
        codec: str,
        block: int,
    ) -> None:
        self._open, self._parts, self._rows = open_file, parts, rows
        self._streams, self._codec, self._block = streams, codec, block
        self._budgets = [budget for *_, budget in streams]

    def grow(self) -> bool:
        """Double every stream's budget; False when every stream is read whole already, or
        when a stream's budget would pass the compression block size (a view of the file's
        own stripe then inflates as little: :mod:`.orc_prefix`)."""
        if all(s is None or s.whole for _, _, s, _ in self._streams):
            return False
        budgets = [2 * b for b in self._budgets]
        streams = (s for _, _, s, _ in self._streams)
        if any(_beyond(s, b, self._block) for s, b in zip(streams, budgets, strict=True)):
            return False
        self._budgets = budgets
        return True

    def data(self) -> bytes:
        """The file's bytes, each wanted stream inflated up to its budget."""
        footer_fields, postscript_fields, stripe_footer_fields = self._parts
        streams, data = [], bytearray()
        with self._open() as handle:
            for (kind, column, prefix, _), budget in zip(self._streams, self._budgets, strict=True):
                stored = b""
                if prefix is not None:
                    prefix.fill(budget, handle)
                    stored = framed(prefix.data[:budget], self._codec, self._block)
                data += stored
                stream = [(_STREAM_KIND, kind), (_STREAM_COLUMN, column)]
                streams.append(encoded([*stream, (_STREAM_LENGTH, len(stored))]))
        kept = [(n, v) for n, v in stripe_footer_fields if n != _SFOOTER_STREAMS]
        stripe_footer = encoded([(_SFOOTER_STREAMS, s) for s in streams] + kept)
        stripe_footer = framed(stripe_footer, self._codec, 1 << 22)
        stripe = encoded(
            [(_STRIPE_OFFSET, 3), (_STRIPE_INDEX, 0), (_STRIPE_DATA, len(data))]
            + [(_STRIPE_FOOTER, len(stripe_footer)), (_STRIPE_ROWS, self._rows)]
        )
        content = 3 + len(data) + len(stripe_footer)

        def footer_field(number: int, value: int | bytes) -> int | bytes | None:
            return {
                _FOOTER_HEADER_LENGTH: 3,
                _FOOTER_CONTENT_LENGTH: content,
                _FOOTER_ROWS: self._rows,
                _FOOTER_STATISTICS: None,
            }.get(number, value)

        listed = False
        fields = []
        for number, value in footer_fields:
            if number == _FOOTER_STRIPES:
                if not listed:
                    fields.append((number, stripe))
                listed = True
                continue
            changed = footer_field(number, value)
            if changed is not None:
                fields.append((number, changed))
        footer = framed(encoded(fields), self._codec, 1 << 22)
        postscript = encoded(
            [
                (n, len(footer) if n == _POSTSCRIPT_FOOTER_LENGTH else v)
                for n, v in postscript_fields
                if n not in (_POSTSCRIPT_METADATA_LENGTH, _POSTSCRIPT_STRIPE_STATISTICS)
            ]
        )
        if len(postscript) > 255:
            raise Unreadable("a postscript too long")
        return b"ORC" + bytes(data) + stripe_footer + footer + postscript + bytes([len(postscript)])

    def opener(self) -> Callable[[], IO[bytes]]:
        """What opens the file as it is now (:meth:`data`) as a Python file object."""
        data = self.data()
        return lambda: io.BytesIO(data)


def _stream_prefixes(
    stripe_footer: _Fields,
    offset: int,
    wanted: set[int],
    codec: str,
    block: int,
    fraction: float,
    text: set[int],
) -> tuple[list[tuple[int, int, _StreamPrefix | None, int]] | None, int]:
    """The stripe's streams but its index's (kind, column, prefix and first budget: no prefix
    for the columns not ``wanted``), and where the stripe's streams end; None for the streams
    when a first budget would pass the compression block (the rows then read beyond it).
    ``text`` holds the ids of the text columns."""
    encodings = [v for n, v in stripe_footer if n == _SFOOTER_COLUMNS and isinstance(v, bytes)]
    streams: list[tuple[int, int, _StreamPrefix | None, int]] = []
    at = offset
    for number, value in stripe_footer:
        if number != _SFOOTER_STREAMS or not isinstance(value, bytes):
            continue
        described = dict(message_fields(value))
        kind, column, length = (
            int(described.get(f, 0)) for f in (_STREAM_KIND, _STREAM_COLUMN, _STREAM_LENGTH)
        )
        start, at = at, at + length
        if kind in _INDEX_KINDS:
            continue
        if column not in wanted:
            streams.append((kind, column, None, 0))
            continue
        dictionary = (
            column < len(encodings)
            and dict(message_fields(encodings[column])).get(_ENCODING_KIND, 0)
            in _DICTIONARY_ENCODINGS
        )
        entire = kind in (_DICTIONARY_DATA, _DICTIONARY_COUNT) or (dictionary and kind == _LENGTH)
        direct_text = column in text and kind == _DATA and not dictionary
        ratio = _TEXT_RATIO if direct_text else _GUESSED_RATIO
        budget = max(_FIRST_BUDGET, int(length * ratio * fraction) + 1)
        prefix = _StreamPrefix(start, length, codec, entire)
        if entire:
            budget = 1 << 62
        elif _beyond(prefix, budget, block):
            return None, at
        streams.append((kind, column, prefix, budget))
    return streams, at


def prefix_file(
    open_file: Callable[[], IO[bytes]],
    orc: pa_orc.ORCFile,
    stripe: int,
    rows: int,
    columns: Sequence[str],
) -> PrefixFile | None:
    """The first ``rows`` rows of stripe ``stripe``'s top-level ``columns`` as a small ORC
    file (see the module); None when the file is not one this module rewrites.

    :param open_file: opens the file as a Python file object.
    :param orc: the same file opened by pyarrow (its codec and the lengths of its tail).
    :param stripe: the stripe's number.
    :param rows: how many of its first rows.
    :param columns: the top-level columns to read.
    """
    codec = orc.compression
    postscript_length, footer_length = orc.file_postscript_length, orc.file_footer_length
    footer_start = orc.file_length - 1 - postscript_length - footer_length
    if codec not in CODECS or footer_start < 3 or rows <= 0:
        return None
    try:
        with open_file() as handle:
            handle.seek(footer_start)
            raw = handle.read(footer_length + postscript_length)
            if len(raw) != footer_length + postscript_length:
                return None
            footer = lossless_fields(decompressed(raw[:footer_length], codec))
            postscript = lossless_fields(raw[footer_length:])
            stripes = [v for n, v in footer if n == _FOOTER_STRIPES and isinstance(v, bytes)]
            types = [v for n, v in footer if n == _FOOTER_TYPES and isinstance(v, bytes)]
            if any(n == _FOOTER_ENCRYPTION for n, _ in footer) or not 0 <= stripe < len(stripes):
                return None
            block = int(dict(postscript).get(_POSTSCRIPT_BLOCK_SIZE, 256 * 1024))
            about = dict(message_fields(stripes[stripe]))
            offset, index, data, footer_size, stripe_rows = (
                int(about.get(f, 0))
                for f in (_STRIPE_OFFSET, _STRIPE_INDEX, _STRIPE_DATA, _STRIPE_FOOTER, _STRIPE_ROWS)
            )
            if stripe_rows <= 0 or not 0 < rows <= stripe_rows:
                return None
            fraction = rows / stripe_rows
            handle.seek(offset + index + data)
            raw_stripe_footer = handle.read(footer_size)
        stripe_footer = lossless_fields(decompressed(raw_stripe_footer, codec))
        if any(n == _SFOOTER_ENCRYPTION for n, _ in stripe_footer):
            return None
        wanted = _column_ids(types, columns)
        text = {
            i
            for i in wanted
            if i < len(types) and dict(message_fields(types[i])).get(_TYPE_KIND) in _TEXT_KINDS
        }
        streams, end = _stream_prefixes(stripe_footer, offset, wanted, codec, block, fraction, text)
        if streams is None:
            return None
        if end != offset + index + data:
            return None  # streams that do not add up to the stripe
    except (Unreadable, ProtobufError, UnicodeDecodeError):
        return None
    return PrefixFile(open_file, (footer, postscript, stripe_footer), rows, streams, codec, block)


__all__ = ["PrefixFile", "prefix_file"]
