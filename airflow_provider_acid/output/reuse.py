"""Which buckets of the latest committed snapshot a new snapshot of the same table can reuse
by reference (incremental snapshots, see :mod:`.protocol`): those whose files are all still
stored as its manifest records them."""

from __future__ import annotations

import posixpath
from dataclasses import replace

from fsspec import AbstractFileSystem

from ..acid.storage import is_object_store
from .protocol import latest_committed
from .records import BucketResult


def reuse_candidates(
    fs: AbstractFileSystem, out_root: str, table: str
) -> tuple[str | None, dict[str, BucketResult]]:
    """From the latest committed snapshot of the same table: slice key -> its bucket result,
    for buckets whose files are all still on storage as recorded.

    The files are looked up in one flat listing of ``out_root`` on an object store, and in
    a listing of each folder holding one of them elsewhere (HDFS: a ``LISTSTATUS`` each):
    never in the folders of the snapshots kept, which grow with every run.
    """
    latest = latest_committed(fs, out_root, lambda s: s.table == table)
    if latest is None:
        return None, {}
    present = _stored_sizes(
        fs, out_root, {posixpath.dirname(f.path) for b in latest.buckets for f in b.files}
    )
    usable = {}
    for bucket in latest.buckets:
        if all(present.get(f.path) == f.size for f in bucket.files):
            usable[bucket.slice_key] = replace(
                bucket, reused_from=bucket.reused_from or latest.snapshot_id
            )
    return latest.snapshot_id, usable


def _stored_sizes(fs: AbstractFileSystem, out_root: str, folders: set[str]) -> dict[str, int]:
    """Path below ``out_root`` -> size of the files stored in ``folders`` (relative to it),
    missing folders holding none."""
    prefix = out_root.rstrip("/") + "/"
    if is_object_store(fs):
        listed = fs.find(out_root, detail=True)
    else:
        listed = {}
        for folder in sorted(folders):
            try:
                found = fs.ls(posixpath.join(out_root, folder) if folder else out_root, True)
            except FileNotFoundError:
                continue  # its files are gone
            listed.update((info["name"], info) for info in found)
    sizes = {}
    for path, info in listed.items():
        name = info.get("name", path)
        sizes[name[len(prefix) :] if name.startswith(prefix) else name] = int(info.get("size") or 0)
    return sizes


__all__ = ["reuse_candidates"]
