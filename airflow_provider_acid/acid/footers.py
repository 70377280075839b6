"""A data file's footer, fetched with at most two ranged reads.

Statistics live in the tail of ORC and Parquet files. Opening such a file through fsspec and
handing it to a reader costs a ``HEAD`` for the size, then reads of whatever the reader asks
for, in the file object's block size (5 MiB on s3fs), so one file can cost several requests and
much more than its footer. Here instead:

1. one ranged read of the last :data:`TAIL_BYTES` (64 KiB) of the file, whose size the listing
   already gave (else one ``HEAD``);
2. the footer's length, from those bytes: ORC's last byte is the postscript's length, and the
   postscript (a protobuf message) holds the footer's length (and the metadata's: the stripe
   statistics before the footer, which file statistics do not need); Parquet ends with the
   footer's length and ``PAR1``;
3. only when the footer is larger than what was read, one more ranged read of the rest.

So a file costs at most two requests and its footer's bytes plus 64 KiB. The readers (pyorc,
pyarrow) are then given :class:`TailFile`, a read-only file object of the file's full size that
holds only those bytes; a read outside them (which neither reader makes for statistics) fetches
what it needs rather than failing, and is counted in :attr:`TailFile.extra_reads`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from .protobuf_fields import ProtobufError, message_fields
from .ranged_reads import ReadOnlyFile
from .storage import naming

__all__ = [
    "TAIL_BYTES",
    "FileTail",
    "FooterError",
    "SizeMismatchError",
    "TailFile",
    "footer_span",
    "read_tail",
]

#: What the first ranged read fetches from the end of a file.
TAIL_BYTES = 64 * 1024

_PARQUET_MAGIC = b"PAR1"


class FooterError(ValueError):
    """A file's tail is no ORC or Parquet footer (the message names the file)."""


@dataclass(frozen=True)
class FileTail:
    """The last bytes of a file: ``data`` starts at ``offset`` and ends at ``size``."""

    path: str
    size: int
    offset: int
    data: bytes
    #: the ranged reads made to fetch it (1 or 2; 0 for an empty file)
    reads: int

    @property
    def is_parquet(self) -> bool:
        return self.size >= 8 and self.data[-4:] == _PARQUET_MAGIC


def _orc_postscript_lengths(postscript: bytes) -> tuple[int, int]:
    """(footerLength, metadataLength) of an ORC PostScript message (fields 1 and 5)."""
    try:
        fields = message_fields(postscript)
    except ProtobufError as exc:
        raise FooterError(f"the ORC postscript: {exc}") from None
    lengths = {number: value for number, value in fields if isinstance(value, int)}
    return lengths.get(1, 0), lengths.get(5, 0)


def footer_span(tail: bytes, size: int) -> int:
    """How many bytes at the end of a file of ``size`` bytes its footer needs, from its last
    bytes ``tail`` (at least 8 of them, or the whole file)."""
    if size >= 12 and tail[-4:] == _PARQUET_MAGIC:
        return int.from_bytes(tail[-8:-4], "little") + 8
    if not tail:
        raise FooterError("empty file")
    ps_length = tail[-1]
    if ps_length + 1 > len(tail):
        raise FooterError("the ORC postscript is longer than the file")
    # the metadata section before the footer holds stripe statistics, which file statistics
    # do not need (pyorc reads it lazily, and TailFile would fetch it if it did)
    footer, _metadata = _orc_postscript_lengths(tail[-1 - ps_length : -1])
    return 1 + ps_length + footer


class SizeMismatchError(OSError):
    """A file does not hold the bytes it should (:func:`read_tail` with ``exact``)."""


def read_tail(fs: Any, path: str, size: int | None = None, *, exact: bool = False) -> FileTail:
    """The last bytes of ``path`` its footer needs, in one ranged read or two.

    ``size`` is the file's size as listed (one ``HEAD`` when None). With ``exact``, ``size`` is
    the size the file must have, checked by the same read: it asks for one byte past ``size``,
    which a larger file answers and a smaller one cannot (no ``HEAD``). Raises
    FileNotFoundError for a missing file, :class:`SizeMismatchError` for a file of another size
    (``exact``), :class:`FooterError` for a tail that is no footer."""
    with naming(path):
        return _read_tail(fs, path, size, exact)


def _read_tail(fs: Any, path: str, size: int | None, exact: bool = False) -> FileTail:
    if size is None:
        size = int(fs.size(path))
    if size <= 0 and not exact:
        return FileTail(path, 0, 0, b"", 0)
    start = max(0, size - TAIL_BYTES)
    if exact:
        data = _read_to_size(fs, path, start, size)
    else:
        data = bytes(fs.cat_file(path, start=start, end=size))
    reads = 1
    if len(data) != size - start:
        raise FooterError(f"{path}: read {len(data)} bytes of its last {size - start}")
    try:
        needed = footer_span(data, size)
    except FooterError as exc:
        raise FooterError(f"{path}: {exc}") from None
    if needed > size:
        raise FooterError(f"{path}: its footer claims {needed} bytes of a {size}-byte file")
    if needed > len(data):
        head = size - needed
        data = bytes(fs.cat_file(path, start=head, end=start)) + data
        start = head
        reads += 1
    return FileTail(path, size, start, data, reads)


def _read_to_size(fs: Any, path: str, start: int, size: int) -> bytes:
    """The bytes from ``start`` to ``size`` of a file that must hold ``size`` bytes: one byte
    more is asked for, which only a larger file answers."""
    try:
        data = bytes(fs.cat_file(path, start=start, end=size + 1))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:  # nothing at ``start`` (S3: 416): a smaller file
        raise SizeMismatchError(f"{path} holds fewer than {size} bytes ({exc})") from None
    if len(data) != size - start:
        more = "more" if len(data) > size - start else "fewer"
        raise SizeMismatchError(f"{path} holds {more} than {size} bytes")
    return data


class TailFile(ReadOnlyFile):
    """A read-only, seekable file of ``tail.size`` bytes that holds only the tail's; a read
    before them fetches the missing range from ``fs`` (counted in :attr:`extra_reads`)."""

    def __init__(self, tail: FileTail, fs: Any = None) -> None:
        super().__init__(tail.path, tail.size)
        self._tail = tail
        self._fs = fs
        self._offset = tail.offset
        self._data = tail.data
        self._lock = threading.Lock()
        self.extra_reads = 0

    def _ensure(self, start: int) -> None:
        if start >= self._offset:
            return
        if self._fs is None:
            raise OSError(f"{self._tail.path}: byte {start} is before the tail that was read")
        with self._lock:
            if start < self._offset:
                more = bytes(self._fs.cat_file(self._tail.path, start=start, end=self._offset))
                self._data = more + self._data
                self._offset = start
                self.extra_reads += 1

    def _read_span(self, start: int, end: int) -> bytes:
        self._ensure(start)
        return self._data[start - self._offset : end - self._offset]
