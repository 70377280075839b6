"""The first rows of one stripe of an ORC file, decoded by pyarrow without the rest of it.

pyarrow decodes ORC a stripe at a time, all its rows. But each stream of a stripe decodes
from its start, and a reader stops after the stripe's row count, which it takes from the
file's footer. So the first ``n`` rows of stripe ``s`` are read by handing pyarrow a view of
the file whose tail is rewritten: a footer listing stripe ``s`` alone, with ``n`` rows (its
offset and lengths unchanged: the stripe's bytes are read where they are), no file or stripe
statistics, and a postscript saying so. The view reads the file's own bytes up to its tail,
then the new tail. What is decoded is the streams' beginnings only (their first compression
blocks, and the values up to row ``n``), at pyarrow's speed, where seeking by pyorc turns
each value into a Python value.

Only files whose footer this module can read (no compression, or ZLIB: Hive's default), and
rewrite without loss (its messages read back to the same bytes), are viewed; for any other,
:func:`prefix_view` gives None.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import IO

import pyarrow.orc as pa_orc

from .orc_stripe_stats import CODECS, Unreadable, decompressed
from .protobuf_fields import ProtobufError, encoded, message_fields

# Field numbers of ORC's protobuf messages (orc_proto.proto).
_FOOTER_STRIPES, _FOOTER_ROWS, _FOOTER_STATISTICS = 3, 6, 7
_STRIPE_ROWS = 5
_POSTSCRIPT_FOOTER_LENGTH, _POSTSCRIPT_METADATA_LENGTH, _POSTSCRIPT_STRIPE_STATISTICS = 1, 5, 7


class _TailView(io.RawIOBase):
    """A file's bytes up to ``cut``, then ``tail`` (read only)."""

    def __init__(self, base: IO[bytes], cut: int, tail: bytes) -> None:
        super().__init__()
        self._base, self._cut, self._tail = base, cut, tail
        self._size = cut + len(tail)
        self._at = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence]
        self._at = base + offset
        return self._at

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        wanted = min(len(buffer), self._size - self._at)
        if wanted <= 0:
            return 0
        got = b""
        if self._at < self._cut:
            self._base.seek(self._at)
            got = self._base.read(min(wanted, self._cut - self._at))
        if len(got) < wanted and self._at + len(got) >= self._cut:
            start = self._at + len(got) - self._cut
            got += self._tail[start : start + wanted - len(got)]
        buffer[: len(got)] = got
        self._at += len(got)
        return len(got)

    def close(self) -> None:
        self._base.close()
        super().close()


#: The most bytes one chunk of a compressed ORC section holds (its 3-byte header's 23 bits).
CHUNK_LIMIT = (1 << 23) - 1


def lossless_fields(message: bytes) -> list[tuple[int, int | bytes]]:
    """``message``'s fields (:func:`.protobuf_fields.message_fields`), checked to encode back
    to its own bytes: :class:`Unreadable` when they do not (a rewrite would lose something).

    :param message: the message's bytes.
    """
    fields = message_fields(message)
    if encoded(fields) != message:
        raise Unreadable("a message this module would not rewrite without loss")
    return fields


def framed(data: bytes | bytearray, codec: str, block: int = CHUNK_LIMIT) -> bytes:
    """``data`` as a section of a file of ``codec``: as is, or uncompressed chunks of at most
    ``block`` bytes.

    :param data: the section's bytes.
    :param codec: the file's codec (pyarrow's name).
    :param block: the most bytes a chunk holds.
    """
    if codec == "UNCOMPRESSED":
        return bytes(data)
    out = bytearray()
    for at in range(0, len(data), block):
        piece = data[at : at + block]
        out += (len(piece) << 1 | 1).to_bytes(3, "little") + piece
    return bytes(out)


def _rewritten(message: bytes, change: Callable[[int, int | bytes], int | bytes | None]) -> bytes:
    """``message`` with each field's value replaced by ``change`` (None drops the field);
    :class:`Unreadable` when the message does not read back to its own bytes."""
    kept = [(n, change(n, v)) for n, v in lossless_fields(message)]
    return encoded([(n, v) for n, v in kept if v is not None])


def prefix_view(
    open_file: Callable[[], IO[bytes]], orc: pa_orc.ORCFile, stripe: int, rows: int
) -> Callable[[], IO[bytes]] | None:
    """What opens a view of the file whose only stripe is the first ``rows`` rows of stripe
    ``stripe`` (see the module); None when the file's tail is not one this module rewrites.

    :param open_file: opens the file as a Python file object.
    :param orc: the same file opened by pyarrow (its codec and the lengths of its tail).
    :param stripe: the stripe's number.
    :param rows: how many of its first rows the view holds.
    """
    codec = orc.compression
    postscript_length, footer_length = orc.file_postscript_length, orc.file_footer_length
    length = orc.file_length
    cut = length - 1 - postscript_length - footer_length - orc.stripe_statistics_length
    if codec not in CODECS or cut < 3 or not 0 < rows:
        return None
    with open_file() as handle:
        handle.seek(length - 1 - postscript_length - footer_length)
        raw = handle.read(footer_length + postscript_length)
    if len(raw) != footer_length + postscript_length:
        return None
    try:
        footer = decompressed(raw[:footer_length], codec)
        postscript = raw[footer_length:]
        stripes = [v for n, v in message_fields(footer) if n == _FOOTER_STRIPES]
        if not 0 <= stripe < len(stripes):
            return None
        one = _rewritten(stripes[stripe], lambda n, v: rows if n == _STRIPE_ROWS else v)
        listed = []  # the stripe list: stripe ``stripe`` alone, in the first one's place

        def footer_field(number: int, value: int | bytes) -> int | bytes | None:
            if number == _FOOTER_STRIPES:
                listed.append(value)
                return one if len(listed) == 1 else None
            if number == _FOOTER_ROWS:
                return rows
            return None if number == _FOOTER_STATISTICS else value

        rewritten = _rewritten(footer, footer_field)
        if len(rewritten) > CHUNK_LIMIT:
            raise Unreadable("a footer too long for one chunk")
        new_footer = framed(rewritten, codec)

        def postscript_field(number: int, value: int | bytes) -> int | bytes | None:
            if number == _POSTSCRIPT_FOOTER_LENGTH:
                return len(new_footer)
            if number in (_POSTSCRIPT_METADATA_LENGTH, _POSTSCRIPT_STRIPE_STATISTICS):
                return 0
            return value

        new_postscript = _rewritten(postscript, postscript_field)
    except (Unreadable, ProtobufError):
        return None
    if len(new_postscript) > 255:
        return None
    tail = new_footer + new_postscript + bytes([len(new_postscript)])
    return lambda: _TailView(open_file(), cut, tail)


__all__ = ["CHUNK_LIMIT", "framed", "lossless_fields", "prefix_view"]
