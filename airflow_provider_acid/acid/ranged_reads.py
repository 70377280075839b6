"""Reading a data file from an object store with its byte ranges fetched ahead of decode.

A reader (pyarrow's ORC reader, pyorc, pyarrow's Parquet reader) handed an fsspec file of an
object store waits for each read in turn: the footer, then each stripe's streams, one request
after another, each paying the store's latency (10 to 100 ms), in the file object's block size.
Compaction reads every stripe of every file it opens, so what it will read is known before it
starts: the whole object, footer first. :class:`PrefetchedFile` is a read-only file object of
the object's full size that serves the reader's reads from memory, filled by ranged GETs made
ahead of them:

* a file of at most ``small_bytes`` (the listing gave its size) is fetched whole, in one GET;
* a larger one in ranges: first its last ``tail_bytes`` (the postscript, footer and stripe
  statistics the reader asks for first), from which pyorc gives the stripes' offsets and
  lengths; then the bytes before that tail, cut at stripe boundaries into ranges of at most
  ``chunk_bytes`` (consecutive stripes coalesced into a few large GETs, each byte fetched
  once), the first of them at most ``first_bytes`` and each next one at most twice the one
  before, so that decoding starts once the first stripes are in;
* the GETs run concurrently on a small shared thread pool, at most ``depth`` ranges ahead of
  the one being read (the bounded prefetch queue: the memory a reader holds is at most
  ``depth + 1`` ranges and the tail, whatever the file's size); a range is dropped once the
  reader reads a later stripe (it reads the parts of one stripe in any order, footer
  first, but stripes in order);
* a read of a range already dropped, or outside the plan, is fetched on its own and counted
  (:attr:`PrefetchedFile.extra_reads`), never failed.

:func:`open_data_file` opens a file this way on object stores and as before (``fs.open``) on a
local disk. :func:`open_data_files` opens a slice's files in turn and, on object stores, fetches
the small ones among the next few (a slice's deltas and delete deltas usually are) while the
reader decodes the current one, at most ``AHEAD_BYTES`` of them at once: a worker then waits for
a file's latency once per slice instead of once per file.
"""

from __future__ import annotations

import bisect
import io
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from .storage import naming

__all__ = [
    "AHEAD_BYTES",
    "AHEAD_FILES",
    "CHUNK_BYTES",
    "DEPTH",
    "FIRST_BYTES",
    "SMALL_BYTES",
    "PrefetchedFile",
    "ReadOnlyFile",
    "fetch_early",
    "forget_early",
    "open_data_file",
    "open_data_files",
]

#: Objects up to this size are fetched whole in one GET.
SMALL_BYTES = 8 * 1024 * 1024
#: The size of the consecutive ranges a larger object's stripes are fetched in.
CHUNK_BYTES = 16 * 1024 * 1024
#: The first of those ranges is at most this large, each next one at most twice the one before.
FIRST_BYTES = 2 * 1024 * 1024
#: Ranges fetched (or being fetched) ahead of the one being read, per open file.
DEPTH = 2
#: The last bytes of a larger object fetched first (the reader's footer reads).
TAIL_BYTES = 1024 * 1024
#: Bytes of small objects fetched ahead of the file being read, per reader.
AHEAD_BYTES = 16 * 1024 * 1024
#: How many of the files after the one being read are looked at for fetching ahead.
AHEAD_FILES = 4
#: Threads that wait for GETs, shared by all open files of the process.
FETCH_THREADS = 8

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _fetcher() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="acid-prefetch")
        return _pool


def plan_ranges(
    size: int,
    stripes: list[tuple[int, int]],
    tail_start: int,
    chunk_bytes: int = CHUNK_BYTES,
    first_bytes: int | None = None,
) -> list[tuple[int, int]]:
    """The ``(start, end)`` ranges that cover an object of ``size`` bytes, in offset order,
    the last one ``[tail_start, size)`` (fetched first): the bytes before it cut at stripe
    boundaries (``stripes``: ``(offset, length)``) into ranges of at most ``chunk_bytes``
    (consecutive stripes coalesced, a larger stripe split). With ``first_bytes``, the first
    range is at most that large and each next one at most twice the one before (up to
    ``chunk_bytes``): the reader's first stripes arrive soon, the rest in few requests.

    :param size: the object's size in bytes.
    :param stripes: ``(offset, length)`` of each stripe, from the footer.
    :param tail_start: where the tail range (fetched first) starts.
    :param chunk_bytes: the largest range before the tail.
    :param first_bytes: the largest first range (None: ``chunk_bytes``).
    """

    def most(index: int) -> int:  # the largest range ``index`` may be
        if first_bytes is None or index >= 32:
            return chunk_bytes
        return max(1, min(chunk_bytes, first_bytes << index))

    cuts = {0, tail_start}
    for offset, length in stripes:
        cuts.update(b for b in (offset, offset + length) if 0 < b < tail_start)
    bounds = sorted(cuts)
    ranges: list[tuple[int, int]] = []
    start = 0
    for end in bounds[1:]:
        if ranges and end - ranges[-1][0] <= most(len(ranges) - 1):
            ranges[-1] = (ranges[-1][0], end)  # coalesced with the stripes before
        else:
            while end - start > most(len(ranges)):  # a stripe larger than a range: split
                ranges.append((start, start + most(len(ranges))))
                start = ranges[-1][1]
            ranges.append((start, end))
        start = end
    return [*ranges, (tail_start, size)]


def _orc_stripes(handle: Any) -> list[tuple[int, int]] | None:
    """The ``(offset, length)`` of each stripe of the ORC file ``handle`` (its footer's; no
    stripe is read), or None when it is no ORC file."""
    import pyorc

    try:
        reader = pyorc.Reader(handle)
        return [
            (stripe.bytes_offset, stripe.bytes_length)
            for stripe in (reader.read_stripe(i) for i in range(reader.num_of_stripes))
        ]
    except Exception:  # noqa: BLE001 - not ORC (Parquet, or damaged: its reader says so)
        return None


class ReadOnlyFile(io.RawIOBase):
    """A read-only, seekable file of ``size`` bytes at ``path``: a subclass gives
    ``_read_span(start, end)``, the bytes from ``start`` to ``end`` (within the file).

    :param path: the file's name (in errors and as ``name``).
    :param size: the file's size in bytes.
    """

    def __init__(self, path: str, size: int) -> None:
        super().__init__()
        self._path = path
        self._size = size
        self._position = 0

    def _read_span(self, start: int, end: int) -> bytes:
        raise NotImplementedError

    @property
    def name(self) -> str:
        return self._path

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def size(self) -> int:
        return self._size

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            position = offset
        elif whence == io.SEEK_CUR:
            position = self._position + offset
        elif whence == io.SEEK_END:
            position = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if position < 0:
            raise OSError(f"{self._path}: negative seek position {position}")
        self._position = position
        return position

    def read(self, size: int | None = -1) -> bytes:
        start = self._position
        end = self._size if size is None or size < 0 else min(self._size, start + size)
        if end <= start:
            return b""
        data = self._read_span(start, end)
        self._position = end
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)


class PrefetchedFile(ReadOnlyFile):
    """A read-only, seekable file of ``size`` bytes whose ranges are fetched ahead of the reads
    (see the module docstring). ``requests`` counts the GETs made, ``extra_reads`` those made
    for reads outside what was planned or already dropped, ``peak_held_bytes`` the most bytes
    held (fetched or being fetched) at once.

    :param fs: the filesystem holding the object.
    :param path: the object's path on ``fs``.
    :param size: the object's size in bytes (as listed).
    :param small_bytes: objects up to this size are fetched whole, in one GET.
    :param chunk_bytes: the largest range of a larger object.
    :param depth: ranges fetched ahead of the one being read.
    :param tail_bytes: the last bytes fetched first (the footer).
    :param body_ahead: also start fetching the first ranges before the tail at once (False:
        at the first read of them, or :meth:`fetch_body`).
    :param first_bytes: the largest first range before the tail (each next one at most twice
        the one before; None: all ``chunk_bytes``).
    """

    def __init__(
        self,
        fs: AbstractFileSystem,
        path: str,
        size: int,
        *,
        small_bytes: int = SMALL_BYTES,
        chunk_bytes: int = CHUNK_BYTES,
        depth: int = DEPTH,
        tail_bytes: int = TAIL_BYTES,
        body_ahead: bool = True,
        first_bytes: int | None = FIRST_BYTES,
    ) -> None:
        super().__init__(path, size)
        if depth < 1:
            raise ValueError(f"depth must be at least 1, not {depth}")
        self._fs = fs
        self._depth = depth
        self._held: dict[int, Future[bytes]] = {}
        self._lock = threading.Lock()
        self.requests = 0
        self.extra_reads = 0
        self.peak_held_bytes = 0
        if size <= small_bytes:  # whole, in one GET
            self._ranges = [(0, size)] if size > 0 else []
            self._stripe_starts = [0]
            self._tail = 0
            if self._ranges:
                self._submit(0)
            return
        tail_start = size - min(tail_bytes, size)
        self._ranges = [(tail_start, size)]
        self._stripe_starts = [0]
        self._tail = 0
        self._submit(0)
        self._held[0].result()  # the footer, to plan the rest
        stripes = _orc_stripes(self)
        self._position = 0
        if stripes is None:  # read in order in ranges of chunk_bytes
            stripes = [(s, chunk_bytes) for s in range(0, tail_start, chunk_bytes)]
        tail = self._held.pop(0)
        self._ranges = plan_ranges(size, stripes, tail_start, chunk_bytes, first_bytes)
        self._stripe_starts = sorted({0, *(offset for offset, _ in stripes)})
        self._tail = len(self._ranges) - 1
        self._held[self._tail] = tail
        if body_ahead:
            self._top_up(0)

    def fetch_body(self, ranges: int | None = None) -> None:
        """Start fetching the first ranges before the tail, if not yet (a file made with
        ``body_ahead=False`` fetches them at its first read of them otherwise).

        :param ranges: how many (None: as many as the prefetch queue holds).
        """
        with self._lock:
            if ranges is None:
                if self._tail:
                    self._top_up(0)
                return
            for index in range(min(ranges, self._tail)):
                self._submit(index)

    # -- fetching -----------------------------------------------------------------------

    def _get(self, start: int, end: int) -> bytes:
        with naming(self._path):
            data = bytes(self._fs.cat_file(self._path, start=start, end=end))
        if len(data) != end - start:
            raise OSError(
                f"{self._path}: read {len(data)} bytes at {start}, expected {end - start}"
            )
        return data

    def _submit(self, index: int) -> None:
        if index not in self._held:
            start, end = self._ranges[index]
            self.requests += 1
            self._held[index] = _fetcher().submit(self._get, start, end)
            held = sum(self._ranges[i][1] - self._ranges[i][0] for i in self._held)
            self.peak_held_bytes = max(self.peak_held_bytes, held)

    def _top_up(self, index: int) -> None:
        """The reader is in range ``index``: drop the ranges that end before the start of the
        stripe it reads (the reader reads a stripe's parts in any order, stripes in order), and
        have ``depth`` ranges after it fetched."""
        start = self._ranges[index][0]
        stripe = self._stripe_starts[bisect.bisect_right(self._stripe_starts, start) - 1]
        for held in [i for i in self._held if i != self._tail and self._ranges[i][1] <= stripe]:
            self._held.pop(held).cancel()
        for ahead in range(index, min(index + self._depth + 1, self._tail)):
            self._submit(ahead)

    def _range_bytes(self, index: int) -> bytes:
        with self._lock:
            if index != self._tail:
                self._top_up(index)
            if index not in self._held:  # dropped before, or never planned
                self.extra_reads += 1
            self._submit(index)
            future = self._held[index]
        return future.result()

    def _range_of(self, offset: int) -> int:
        return bisect.bisect_right(self._ranges, (offset, float("inf"))) - 1

    def _read_span(self, start: int, end: int) -> bytes:
        pieces = []
        index = self._range_of(start)
        if index < 0:  # before every planned range (while the footer is being read)
            with self._lock:
                self.extra_reads += 1
                self.requests += 1
            stop = min(end, self._ranges[0][0])
            pieces.append(self._get(start, stop))
            start, index = stop, 0
        while start < end:
            range_start, range_end = self._ranges[index]
            data = self._range_bytes(index)
            stop = min(end, range_end)
            pieces.append(data[start - range_start : stop - range_start])
            start = stop
            index += 1
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def close(self) -> None:
        with self._lock:
            for future in self._held.values():
                future.cancel()
            self._held.clear()
        super().close()


def open_data_file(fs: AbstractFileSystem, path: str, size: int | None = None) -> Any:
    """``path`` opened for reading whole: through ``fs.open`` on a local disk; elsewhere a
    :class:`PrefetchedFile` (``size`` as listed; one ``HEAD`` when None).

    :param fs: the filesystem holding the file.
    :param path: the file's path on ``fs``.
    :param size: its size as listed, or None.
    """
    if isinstance(fs, LocalFileSystem):
        return fs.open(path, "rb")
    early = _take_early(fs, path, size)
    if early is not None:
        return early
    if size is None:
        with naming(path):
            size = int(fs.size(path))
    return PrefetchedFile(fs, path, size)


# -- files fetched early, for a read to come ------------------------------------------------

_early: dict[tuple[str, int], tuple[AbstractFileSystem, Future[PrefetchedFile]]] = {}
_early_lock = threading.Lock()
_opener: ThreadPoolExecutor | None = None


def _early_opener() -> ThreadPoolExecutor:
    global _opener
    with _pool_lock:
        if _opener is None:  # not the fetch pool: opening a larger file waits for its tail
            _opener = ThreadPoolExecutor(1, thread_name_prefix="acid-early")
        return _opener


def fetch_early(
    fs: AbstractFileSystem,
    files: Sequence[tuple[str, int | None]],
    *,
    ahead_bytes: int = AHEAD_BYTES,
    small_bytes: int = SMALL_BYTES,
) -> None:
    """Start fetching ``files`` (the next bucket's, while a worker computes the current one)
    for :func:`open_data_file` to use when it opens the same path at the same size: the small
    files whole, the larger ones' tails (their footers) and first ranges (at most
    ``FIRST_BYTES``: their first stripes; the others are fetched when they are opened), at
    most ``ahead_bytes`` in all. What is fetched early and never opened stays until
    :func:`forget_early`. A file being fetched early already is passed over. Nothing on a
    local disk.

    :param fs: the filesystem holding the files.
    :param files: (path, size as listed) of each file; those of unknown size are passed over.
    :param ahead_bytes: the most bytes fetched early.
    :param small_bytes: files up to this size are fetched whole (:class:`PrefetchedFile`).
    """
    if isinstance(fs, LocalFileSystem):
        return
    with _early_lock:  # a file fetched early already is not fetched again
        files = [f for f in files if f not in _early or _early[f][0] is not fs]
    held, started = 0, {}
    for path, size in files:
        if size is None or size <= 0:
            continue
        cost = size if size <= small_bytes else min(TAIL_BYTES, size) + FIRST_BYTES
        if held + cost > ahead_bytes:
            break
        held += cost
        opened = _early_opener().submit(_open_early, fs, path, size, small_bytes)
        started[(path, size)] = (fs, opened)
    with _early_lock:
        _early.update(started)


def _open_early(fs: AbstractFileSystem, path: str, size: int, small_bytes: int) -> PrefetchedFile:
    handle = PrefetchedFile(fs, path, size, small_bytes=small_bytes, body_ahead=False)
    handle.fetch_body(ranges=1)
    return handle


def forget_early(files: Sequence[tuple[str, int | None]] | None = None) -> None:
    """Close what :func:`fetch_early` fetched and was not opened (waiting for nothing).

    :param files: (path, size) of the files to forget; None: all.
    """
    with _early_lock:
        keys = list(_early) if files is None else [f for f in files if f in _early]
        left = [_early.pop(k) for k in keys]
    for _, opened in left:
        opened.add_done_callback(_close_opened)


def _close_opened(opened: Future[PrefetchedFile]) -> None:
    if not opened.cancelled() and opened.exception() is None:
        opened.result().close()


def _take_early(fs: AbstractFileSystem, path: str, size: int | None) -> PrefetchedFile | None:
    """The file :func:`fetch_early` started for ``path`` at ``size`` on ``fs`` (its body's
    fetch started now), or None; one that failed is opened again by the caller."""
    if size is None:
        return None
    with _early_lock:
        entry = _early.get((path, size))
        if entry is None or entry[0] is not fs:
            return None
        del _early[(path, size)]
    try:
        handle = entry[1].result()
    except Exception:  # noqa: BLE001 - opened again by the caller, which reports its error
        return None
    handle.fetch_body()
    return handle


def open_data_files(
    fs: AbstractFileSystem,
    files: Sequence[tuple[str, int | None]],
    *,
    ahead_files: int = AHEAD_FILES,
    ahead_bytes: int = AHEAD_BYTES,
) -> Iterator[Any]:
    """Each of ``files`` opened for reading in turn, as :func:`open_data_file` opens it. On an
    object store, the small files (fetched whole) among the ``ahead_files`` after the one
    given are fetched meanwhile, at most ``ahead_bytes`` of them at once. The caller closes
    each file it is given; files fetched ahead and never given are closed when the iteration
    ends (close the iterator when stopping early).

    :param fs: the filesystem holding the files.
    :param files: (path, size as listed or None) of each file, in the order they are read.
    :param ahead_files: how many of the next files may be fetched ahead.
    :param ahead_bytes: the most bytes fetched ahead at once.
    """
    if isinstance(fs, LocalFileSystem):
        for path, size in files:
            yield open_data_file(fs, path, size)
        return
    early: dict[int, PrefetchedFile] = {}
    try:
        for index, (path, size) in enumerate(files):
            handle = early.pop(index, None) or open_data_file(fs, path, size)
            held = sum(files[i][1] or 0 for i in early)
            for later in range(index + 1, min(index + 1 + ahead_files, len(files))):
                later_path, later_size = files[later]
                if later in early or later_size is None or later_size > SMALL_BYTES:
                    continue
                if held + later_size > ahead_bytes:
                    break
                early[later] = _take_early(fs, later_path, later_size) or PrefetchedFile(
                    fs, later_path, later_size
                )  # its GET starts (or started with fetch_early)
                held += later_size
            yield handle
    finally:
        for handle in early.values():
            handle.close()
