"""Data files written to an object store on a background thread, so that a worker's uploads
overlap its work.

A data file written to an object store is an upload: a multipart upload whose parts are sent
as the file grows past the part size, completed (the object appears) when the file is closed;
a smaller file is one ``PUT`` at close. Written from the worker's thread, each part and the
final ``PUT`` held the worker until the store answered: about 0.1 s for a 14 MB bucket file
with 20 ms of latency, with nothing computed meanwhile.

:class:`BackgroundUpload` wraps such a file: ``write`` gathers the bytes and hands them to the
file's own upload thread a MiB at a time, and returns (waiting only while more than
``max_waiting`` bytes are not yet handed on, which bounds the memory), so parts are sent while
the worker encodes the next row groups.
``close`` hands over the completion and waits for it; inside :func:`uploads_in_background` (a
worker computing several buckets in turn) it does not wait: the file's result (path, rows,
size) is known before its upload completes, and leaving the block waits for every upload,
raising the first error, so nothing is committed before its files are stored. An error of the
upload is raised by the next ``write`` or by ``close``; :meth:`BackgroundUpload.discard` drops
the upload after another error (an S3 multipart upload is aborted).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = [
    "HAND_BYTES",
    "MAX_WAITING",
    "BackgroundUpload",
    "StoredUploads",
    "uploads_in_background",
]

#: Bytes handed to a file's upload thread and not yet written to it, at most (per file): more
#: than a row group's burst (about 4 MB) while the upload's first round trips are under way.
MAX_WAITING = 8 * 1024 * 1024

#: Bytes gathered from the writer's (many small) writes before they are handed on at once.
HAND_BYTES = 1024 * 1024

#: The uploads completing in the background: each file's path and its completion.
_pending: ContextVar[list[tuple[str, Future[None]]] | None] = ContextVar(
    "acid_uploads", default=None
)


class BackgroundUpload:
    """A file being uploaded (an fsspec buffered file of an object store), written on a thread
    of its own (see the module docstring).

    :param inner: the file opened for writing.
    :param max_waiting: bytes handed over and not yet written, at most.
    :param hand_bytes: bytes gathered before they are handed over (the Parquet writer writes
        a page at a time: a hand-over each would wake the upload thread hundreds of times a
        file, each time taking Python's lock from the worker).
    """

    def __init__(
        self, inner: Any, max_waiting: int = MAX_WAITING, hand_bytes: int = HAND_BYTES
    ) -> None:
        self._inner = inner
        self._max_waiting = max_waiting
        self._hand_bytes = hand_bytes
        self._gathered = bytearray()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="acid-upload")
        self._waiting = 0
        self._changed = threading.Condition()
        self._error: BaseException | None = None
        self._position = 0
        self.closed = False

    @property
    def name(self) -> str:
        return str(getattr(self._inner, "path", ""))

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        """Nothing: the bytes are handed on as they are written."""

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError(f"{self.name}: write to a closed file")
        self._raise_error()
        size = len(self._gathered)
        self._gathered += data
        size = len(self._gathered) - size
        self._position += size
        if len(self._gathered) >= self._hand_bytes:
            self._hand_over()
        return size

    def _hand_over(self) -> None:
        chunk, self._gathered = self._gathered, bytearray()
        if not chunk:
            return
        with self._changed:
            while self._waiting and self._waiting + len(chunk) > self._max_waiting:
                self._changed.wait()
            self._waiting += len(chunk)
        self._thread.submit(self._write, chunk)

    def _write(self, chunk: bytearray) -> None:
        try:
            if self._error is None:
                self._inner.write(chunk)  # sends a part once the inner buffer holds one
        except BaseException as exc:  # noqa: BLE001 - raised on the writer's thread
            self._error = exc
        finally:
            with self._changed:
                self._waiting -= len(chunk)
                self._changed.notify_all()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _complete(self) -> None:
        try:
            self._raise_error()
            self._inner.close()  # the last part, or the one PUT; then the object appears
        except BaseException:
            self._drop()  # raised where the caller is gone (inside uploads_in_background)
            raise

    def _drop(self) -> None:
        try:
            self._inner.discard()  # an S3 multipart upload is aborted
        except Exception:  # noqa: BLE001 - after another error, which is raised
            pass
        self._inner.closed = True  # never flushed: closing would complete it

    def close(self) -> None:
        """Complete the upload: now, or in the background inside :func:`uploads_in_background`
        (on the same thread); an error of the upload is raised."""
        if self.closed:
            return
        self._hand_over()
        self.closed = True
        completed = self._thread.submit(self._complete)
        self._thread.shutdown(wait=False)  # its thread ends once the upload completes
        pending = _pending.get()
        if pending is None:
            completed.result()
        else:
            pending.append((self.name, completed))

    def discard(self) -> None:
        """Drop the upload (after another error): nothing of it is completed on storage."""
        self.closed = True
        self._gathered = bytearray()
        self._thread.shutdown(wait=True)  # what was handed over is written first
        self._drop()


class StoredUploads:
    """The uploads of an :func:`uploads_in_background` block, as a commit inside it sees them:
    called, it waits for every upload started so far and raises the first error;
    :meth:`waiting` names those not complete yet."""

    def __init__(self, pending: list[tuple[str, Future[None]]]) -> None:
        self._pending = pending

    def waiting(self) -> frozenset[str]:
        """The paths (as the filesystem names them) of the files whose uploads are not
        complete yet."""
        return frozenset(path for path, done in list(self._pending) if not done.done())

    def __call__(self) -> None:
        error = _wait(list(self._pending))
        if error is not None:
            raise error


@contextmanager
def uploads_in_background() -> Iterator[StoredUploads]:
    """Uploads completed in the background inside the block (see the module docstring); all
    of them completed when it is left. It gives a :class:`StoredUploads`: a commit made inside
    the block calls it once it holds its lock, so the lock's round trips overlap the last
    uploads (and checks the files stored already while the others complete)."""
    pending: list[tuple[str, Future[None]]] = []
    token = _pending.set(pending)
    stored = StoredUploads(pending)
    try:
        yield stored
    except BaseException:
        _wait(pending)  # their errors, if any, follow from the one raised
        raise
    finally:
        _pending.reset(token)
    stored()


def _wait(pending: list[tuple[str, Future[None]]]) -> BaseException | None:
    """Wait for every upload; the first error."""
    first = None
    for _, future in pending:
        error = future.exception()
        if error is not None and first is None:
            first = error
    return first
