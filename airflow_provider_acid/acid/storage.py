"""Writing a small object so that readers see all of it or nothing, on any filesystem.

A file written through ``fs.open(path, "wb")`` is not that: fsspec closes it when the ``with``
block ends, also when it ends with an error, which on S3 completes the upload of whatever was
buffered. What readers open by name (a snapshot manifest, a slice manifest, an index pointer,
a metrics record) is therefore serialised in memory first and stored in one piece.
"""

from __future__ import annotations

import os
import posixpath
import uuid

from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem


def write_whole(fs: AbstractFileSystem, path: str, data: bytes) -> None:
    """Store ``data`` at ``path``, creating its folder: locally a hidden temporary file renamed
    over ``path``; on object stores one PUT, so an object appears whole or not at all."""
    parent = posixpath.dirname(path)
    if parent:
        try:
            fs.makedirs(parent, exist_ok=True)
        except OSError:  # some object stores refuse folders; objects need none
            pass
    if isinstance(fs, LocalFileSystem):
        temporary = posixpath.join(parent, f".{posixpath.basename(path)}.{uuid.uuid4().hex}.tmp")
        try:
            with open(temporary, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    else:
        fs.pipe_file(path, data)
