"""Writing files so that readers see all of one or nothing, on any filesystem.

A file written through ``fs.open(path, "wb")`` is not that: fsspec closes it when the ``with``
block ends, also when it ends with an error, which on S3 completes the upload of whatever was
buffered; on a local disk a killed writer leaves the bytes written so far at the file's name.

* Where renames are atomic (a local filesystem, :func:`renames_atomically`), a file is written
  under a hidden temporary name in its own folder (:func:`temporary_path`:
  ``.<name>.<32 hex>.tmp``, ignored by ``pyarrow.dataset``, Spark and Hive, which skip ``.``
  and ``_`` names) and renamed over its name once complete.
* On object stores an object appears when its upload completes: one PUT, or the completion of
  a multipart upload. What readers open by name (a snapshot manifest, a slice manifest, an
  index pointer or index file, a metrics record) is serialised in memory first and stored in
  one piece (:func:`write_whole`).

Temporaries a killed writer left behind are removed by :func:`remove_temporaries`, called by
the next writer of the same files, by later commits and by expiry. A writer holds an exclusive
``flock`` on its temporary while it writes (:func:`open_temporary`), which the kernel drops
when the process dies, kill -9 included: a cleaner removes only temporaries it can lock
(:func:`remove_temporary`), never one another process is still writing. The file is created
without a name (``O_TMPFILE``), locked, then linked to its ``.tmp`` name, so that it never has
a name while unlocked: a writer killed at any instant leaves nothing, or a temporary the next
cleaner removes. Where the filesystem has no unnamed files, it is created as
``.<name>.<hex>.new``, locked, then renamed to its ``.tmp`` name; an unlocked ``.new`` is
removed once older than a minute (its writer may be between creating and locking it).

:func:`create_exclusive` creates a file only if it does not exist yet (the commit lock): an
``O_EXCL`` hard link locally, ``If-None-Match: *`` on S3 (s3fs ``mode="create"``), on HDFS a
complete temporary renamed to the name (HDFS renames refuse an existing target; see
:mod:`.hdfs`, whose ``pipe_file`` also makes :func:`write_whole` all-or-nothing there).
"""

from __future__ import annotations

import errno
import fcntl
import os
import posixpath
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from . import hdfs as _hdfs  # also makes hdfs:// fsspec's WebHDFS-backed protocol

#: ``.<name>.<uuid hex>.tmp``: a file being written, renamed to ``<name>`` when complete
#: (``.new`` for the instant between its creation and its writer's lock, see open_temporary).
TEMPORARY_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<token>[0-9a-f]{32})\.(?P<kind>tmp|new)$")
#: Seconds after which an unlocked ``.new`` file is a dead writer's (a live one holds it for
#: the time of one ``flock`` and one ``rename``).
PENDING_GRACE = 60.0


def renames_atomically(fs: AbstractFileSystem) -> bool:
    """True where a complete file can be renamed over its name in one step (local disks)."""
    return isinstance(fs, LocalFileSystem)


def is_object_store(fs: AbstractFileSystem) -> bool:
    """Whether ``fs`` keeps objects without folders (S3, GCS, Azure), where a folder needs no
    creating (s3fs's ``makedirs`` costs a ``HEAD`` of the bucket)."""
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return bool({"s3", "s3a", "gs", "gcs", "abfs", "az"} & set(protocols))


def renames_whole(fs: AbstractFileSystem) -> bool:
    """True where a complete file can be renamed to its name: local disks, and HDFS (through
    WebHDFS, whose renames are atomic but never replace). A data file is written under a
    hidden temporary name there (:func:`temporary_path`), then :func:`place_whole`."""
    return renames_atomically(fs) or isinstance(fs, _hdfs.HdfsFileSystem)


def place_whole(fs: AbstractFileSystem, temporary: str, path: str) -> None:
    """Rename the complete ``temporary`` to ``path``, replacing a file there (see
    :func:`renames_whole`)."""
    if renames_atomically(fs):
        os.replace(temporary, path)
    else:
        fs.replace(temporary, path)


def temporary_path(path: str) -> str:
    """A hidden, unique name beside ``path`` to write it under before the rename."""
    parent, name = posixpath.split(path)
    return posixpath.join(parent, f".{name}.{uuid.uuid4().hex}.tmp")


def open_temporary(path: str) -> BinaryIO:
    """Create the local temporary ``path`` for writing, holding an exclusive lock on it until
    it is closed (or its process dies), so that no cleaner removes it meanwhile. The file has
    its name only once locked (see the module docstring)."""
    folder, name = os.path.split(path)
    handle = _open_unnamed(folder or ".")
    if handle is None:
        return _open_pending(path)
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        directory = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY)
        try:  # linkat(AT_SYMLINK_FOLLOW) of the open file: the name appears already locked
            os.link(f"/proc/self/fd/{handle.fileno()}", name, dst_dir_fd=directory)
        finally:
            os.close(directory)
    except BaseException:
        handle.close()
        raise
    return handle


def _open_unnamed(folder: str) -> BinaryIO | None:
    """A new file in ``folder`` with no name yet, open for writing; None where the filesystem
    (or the platform) has no ``O_TMPFILE``."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        descriptor = os.open(folder, flag | os.O_WRONLY, 0o666)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            return None
        raise
    return os.fdopen(descriptor, "wb")


def _open_pending(path: str) -> BinaryIO:
    """``open_temporary`` where files cannot be created unnamed: created as ``.new``, locked,
    then renamed to ``path``."""
    pending = path[: -len(".tmp")] + ".new" if path.endswith(".tmp") else path + ".new"
    handle = open(pending, "xb")  # noqa: SIM115 - the caller closes it
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        os.rename(pending, path)  # under its temporary name only once locked
    except BaseException:
        handle.close()
        os.unlink(pending)
        raise
    return handle


def remove_temporary(fs: AbstractFileSystem, path: str) -> bool:
    """Delete a temporary a killed writer left: True if removed; False if gone already or,
    locally, still locked by a live writer."""
    if not renames_atomically(fs):
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            return False
        return True
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its writer is alive
        if path.endswith(".new") and time.time() - os.fstat(handle.fileno()).st_mtime < (
            PENDING_GRACE
        ):
            return False  # maybe created an instant ago, its writer about to lock it
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
    return True


def temporary_target(name: str) -> str | None:
    """The file name a temporary (base name) is written for; None for other names."""
    match = TEMPORARY_NAME.match(name)
    return match["name"] if match else None


def _make_parent(fs: AbstractFileSystem, path: str) -> str:
    parent = posixpath.dirname(path)
    if parent and not is_object_store(fs):  # objects need no folder
        try:
            fs.makedirs(parent, exist_ok=True)
        except OSError:  # some object stores refuse folders; objects need none
            pass
    return parent


@contextmanager
def naming(path: str) -> Iterator[None]:
    """A storage error raised inside names ``path`` if it does not already (s3fs's, once its
    retries are spent, carry only the server's words): the same class and errno, with
    ``filename`` set, so that what callers check of it still holds."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or path in str(exc):
            raise
        try:
            if exc.errno is not None:
                named = type(exc)(exc.errno, exc.strerror or str(exc), path)
            else:
                named = type(exc)(f"{path}: {exc}")
        except Exception:  # a subclass made otherwise: keep it as it is
            raise exc from None
        raise named from exc


def write_whole(fs: AbstractFileSystem, path: str, data: bytes) -> None:
    """Store ``data`` at ``path``, creating its folder: locally a hidden temporary file renamed
    over ``path``; on object stores one PUT, so an object appears whole or not at all."""
    with naming(path):
        _write_whole(fs, path, data)


def _write_whole(fs: AbstractFileSystem, path: str, data: bytes) -> None:
    _make_parent(fs, path)
    if renames_atomically(fs):
        _place_complete(path, data, os.replace)
    else:
        fs.pipe_file(path, data)


def _place_complete(path: str, data: bytes, place: Callable[[str, str], None]) -> None:
    """Write ``data`` to a locked hidden temporary beside ``path``, sync it, then ``place``
    (temporary, path) it: ``os.replace`` over the name, or ``os.link`` to a new one. The
    temporary is gone afterwards, whatever happened."""
    temporary = temporary_path(path)
    try:
        with open_temporary(temporary) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            place(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def read_whole(fs: AbstractFileSystem, path: str) -> bytes:
    """The whole of the small file or object at ``path`` in one request (FileNotFoundError
    if there is none). s3fs's ``cat_file`` otherwise asks for the object's size first, to read
    a large one in concurrent parts: a ``HEAD``, and a listing too when the object is missing,
    each a round trip paid in turn. The documents read whole (plans, manifests, the commit
    lock) are small.

    :param fs: the filesystem holding ``path``.
    :param path: the file's path on ``fs``.
    """
    if getattr(fs, "max_concurrency", 1) > 1:  # s3fs: one GET, not HEAD then GET
        return fs.cat_file(path, max_concurrency=1)
    return fs.cat_file(path)


def create_exclusive(fs: AbstractFileSystem, path: str, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists: True if this call created it.

    Locally the complete file is hard-linked to ``path`` (``link`` fails on an existing name,
    so no reader sees it half-written); on S3 one PUT with ``If-None-Match: *``. Other
    filesystems get fsspec's ``mode="create"``, which is a check then a write on some of them.
    """
    if renames_atomically(fs):
        _make_parent(fs, path)
        try:
            _place_complete(path, data, os.link)
        except FileExistsError:
            return False
        return True
    try:  # objects need no folder
        with naming(path):
            fs.pipe_file(path, data, mode="create")
    except FileExistsError:
        return False
    except OSError as exc:
        if _precondition_failed(exc):  # 412 without <Condition> (S3Proxy), which s3fs misses
            return False
        raise
    return True


def _precondition_failed(exc: BaseException | None) -> bool:
    """Whether an error (or one it was raised from) is S3's ``412 PreconditionFailed``."""
    while exc is not None:
        error = (getattr(exc, "response", None) or {}).get("Error", {})
        if error.get("Code") == "PreconditionFailed":
            return True
        exc = exc.__cause__
    return False


def remove_temporaries(
    fs: AbstractFileSystem, folder: str, target: Callable[[str], bool] | None = None
) -> list[str]:
    """Delete the temporaries directly in ``folder`` (whose target name ``target`` accepts,
    all without one) that killed writers left (not those of live writers); returns their
    paths."""
    try:
        entries = fs.ls(folder, detail=False)
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    for path in entries:
        name = temporary_target(posixpath.basename(path.rstrip("/")))
        if name is None or (target is not None and not target(name)):
            continue
        if remove_temporary(fs, path):
            removed.append(path)
    return removed
