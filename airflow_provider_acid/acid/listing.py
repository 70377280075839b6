"""One recursive listing of a table location, on any fsspec filesystem."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec import AbstractFileSystem


class TableLocationError(OSError):
    """The table location does not exist or cannot be listed."""


@dataclass(frozen=True)
class StoredFile:
    """A file as storage reports it: full path, size and a version (mtime or etag)."""

    path: str
    size: int
    version: str | None = None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def _version_of(info: dict[str, Any]) -> str | None:
    for key in ("ETag", "etag", "mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if value is not None:
            return str(value).strip('"')
    return None


def resolve_filesystem(
    uri: str,
    filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> tuple[AbstractFileSystem, str]:
    """The filesystem and the path within it for ``uri`` (a local path or any fsspec URL)."""
    if filesystem is not None:
        return filesystem, filesystem._strip_protocol(uri).rstrip("/") or "/"
    fs, path = fsspec.core.url_to_fs(uri, **(storage_options or {}))
    return fs, path.rstrip("/") or "/"


def list_table_files(fs: AbstractFileSystem, root: str) -> list[StoredFile]:
    """Every file below ``root``, found with a single recursive ``find`` call, sorted by path."""
    try:
        found = fs.find(root, detail=True)
    except FileNotFoundError:
        found = {}
    if not found and not fs.isdir(root):  # only an empty answer costs a second call
        raise TableLocationError(f"table location {root!r} does not exist or is not a folder")
    files = [
        StoredFile(
            path=info.get("name", path), size=int(info.get("size") or 0), version=_version_of(info)
        )
        for path, info in found.items()
        if info.get("type", "file") != "directory"
    ]
    return sorted(files, key=lambda f: f.path)
