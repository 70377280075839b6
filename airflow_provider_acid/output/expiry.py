"""Expiry: keep an output folder's newest snapshots, remove what no kept manifest lists.

Held under the commit lock (:mod:`.commit_lock`), as commits are; what it may remove and what
it leaves follows the commit protocol (:mod:`.protocol`): files of snapshots planned after the
newest kept commit may belong to a run still at work, and stay. The commit log
(:mod:`.commit_log`) keeps the kept snapshots' entries only.
"""

from __future__ import annotations

import posixpath
from typing import Any

from fsspec import AbstractFileSystem

from ..acid.listing import resolve_filesystem
from ..acid.storage import remove_temporary
from .commit_lock import DEFAULT_WAIT, commit_lock
from .commit_log import drop_entries, read_log
from .paths import snapshot_dir
from .protocol import (
    cached_verdicts,
    committed_snapshots,
    data_files_below,
    read_plan,
    remove_commit_temporaries,
    remove_file,
)
from .records import CommitError, ExpireResult


def expire_snapshots(
    out_uri: str,
    *,
    keep: int = 1,
    out_filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
    lock_wait: float = DEFAULT_WAIT,
) -> ExpireResult:
    """Keep the newest ``keep`` committed snapshots; remove older manifests and every data file
    no kept manifest references (files of snapshots planned after the newest kept commit, which
    may still be in progress, are left alone), and the temporaries killed writers left of the
    same files and of the kept manifests. Holds the commit lock (:mod:`.commit_lock`)."""
    if keep < 1:
        raise ValueError("keep must be at least 1: the latest snapshot is never expired")
    fs, root = resolve_filesystem(out_uri, out_filesystem, storage_options)
    with commit_lock(fs, root, f"expiry keeping {keep} snapshot(s)", wait=lock_wait):
        return expire_locked(fs, root, keep)


def expire_locked(fs: AbstractFileSystem, root: str, keep: int) -> ExpireResult:
    """Keep the newest ``keep`` committed snapshots of ``root`` and remove what no kept manifest
    lists; the caller holds the commit lock.

    :param fs: the output folder's filesystem.
    :param root: the output folder.
    :param keep: how many snapshots to keep (at least 1).
    """
    snapshots = committed_snapshots(fs, root)
    kept, expired = snapshots[-keep:], snapshots[:-keep]
    referenced = {f.path for s in kept for f in s.files}
    kept_ids = {s.snapshot_id for s in kept}
    newest_commit = kept[-1].committed_at if kept else ""
    expired_ids = {s.snapshot_id for s in expired}

    def planned_later(sid: str) -> bool:
        if sid in expired_ids:
            return False
        try:
            return read_plan(fs, root, sid).created_at > newest_commit
        except CommitError:
            return False

    in_progress = cached_verdicts(planned_later)
    removed_files = []
    for relative, sid in data_files_below(fs, root).items():
        if relative in referenced or sid in kept_ids or in_progress(sid):
            continue
        remove_file(fs, posixpath.join(root, relative))
        removed_files.append(relative)
    for relative, sid in data_files_below(fs, root, temporaries=True).items():
        if sid in kept_ids or not in_progress(sid):  # a kept snapshot is written already
            remove_temporary(fs, posixpath.join(root, relative))
    for snapshot in expired:
        fs.rm(snapshot_dir(root, snapshot.snapshot_id), recursive=True)
    # the log keeps the kept snapshots' entries (no commit runs: an entry without a manifest
    # is a killed commit's)
    drop_entries(fs, root, [e for e in read_log(fs, root) if e.snapshot_id not in kept_ids])
    for snapshot in kept:
        remove_commit_temporaries(fs, root, snapshot.snapshot_id)
    return ExpireResult(
        tuple(s.snapshot_id for s in kept),
        tuple(s.snapshot_id for s in expired),
        tuple(sorted(removed_files)),
    )


__all__ = ["expire_locked", "expire_snapshots"]
