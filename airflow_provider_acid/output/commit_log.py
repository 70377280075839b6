"""The commit log: an output folder's commits in order, listed without reading a manifest.

A commit (under the commit lock, :mod:`.commit_lock`) writes an empty entry
``OUT/_commits/<sequence, 12 digits>-<snapshot id>`` *before* its manifest, the commit point.
The newest committed snapshot is then the newest entry whose manifest exists: one listing of
``_commits`` and, as a rule, one manifest read, however many snapshots ``OUT`` holds. Reading
every manifest instead made each run of a scheduled feed or snapshot slower than the one
before it (about 0.5 ms locally, and a request on an object store, per snapshot kept, at
each commit and each look for the latest).

An entry whose manifest is missing is a commit killed before its commit point, one still
running, or an expired snapshot's: it is passed over. A commit gives the next sequence after
every entry's, so a killed commit's number is never given twice. A commit killed while writing
its entry leaves a hidden temporary (on local disks and HDFS); the next commit removes it.
Where each folder is listed on its own (local disks, HDFS), a commit does not look into the
folders of the snapshots the log holds: it counts those below the newest entry with a manifest
as committed, and those above it as killed commits, whose files it removes.

Snapshots committed before the log existed (or by an older version of this provider, which
writes no entry) have no entry. While the log is empty, the latest snapshot is found by
reading every manifest, as before. A commit logs every committed snapshot that lacks an entry
(its manifest is read once, for its sequence), so after it the log lists them all. A commit
by a version without the log made after one with it is therefore not seen as the latest until
the next commit with the log: every writer of one folder must be upgraded together.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from fsspec import AbstractFileSystem

from ..acid.listing import find_files
from ..acid.storage import is_object_store, write_whole
from .paths import SNAPSHOTS_DIR, manifest_ids

#: The log's folder in an output folder.
LOG_DIR = "_commits"
_ENTRY = re.compile(r"^(?P<sequence>\d{12})-(?P<snapshot>[0-9A-Za-z][0-9A-Za-z_-]*)$")


class Committed(Protocol):
    """What a manifest read gives the log: the snapshot's commit sequence."""

    @property
    def sequence(self) -> int: ...


Result = TypeVar("Result", bound=Committed)


@dataclass(frozen=True, order=True)
class LogEntry:
    """One logged commit: its sequence and its snapshot (ordered by sequence)."""

    sequence: int
    snapshot_id: str

    @property
    def name(self) -> str:
        return f"{self.sequence:012d}-{self.snapshot_id}"


def log_dir(out_root: str) -> str:
    """The commit log's folder of ``out_root``.

    :param out_root: the output folder.
    """
    return posixpath.join(out_root, LOG_DIR)


def read_log(fs: AbstractFileSystem, out_root: str) -> list[LogEntry]:
    """The logged commits of ``out_root``, oldest first (one fresh listing; none when the
    folder has no log). Names that are not entries (a local writer's hidden temporary) are
    left out.

    :param fs: the output folder's filesystem.
    :param out_root: the output folder.
    """
    folder = log_dir(out_root)
    fs.invalidate_cache(folder)  # a long-lived process must see commits made since
    try:
        names = fs.ls(folder, detail=False)
    except FileNotFoundError:
        return []
    return entries_in(names, out_root)


def entries_in(paths: Iterable[str], out_root: str) -> list[LogEntry]:
    """The log entries among ``paths`` (any listing of ``out_root``'s files), oldest first.

    :param paths: paths of files as the filesystem lists them, below ``out_root`` or not.
    :param out_root: the output folder.
    """
    folder = log_dir(out_root).rstrip("/")
    entries = []
    for path in paths:
        path = path.rstrip("/")
        if posixpath.dirname(path) != folder:
            continue
        found = _ENTRY.match(posixpath.basename(path))
        if found:
            entries.append(LogEntry(int(found["sequence"]), found["snapshot"]))
    return sorted(entries)


def log_commit(fs: AbstractFileSystem, out_root: str, entry: LogEntry) -> None:
    """Write ``entry`` (an empty object; locally synced and renamed into place). The caller
    holds the commit lock and writes the snapshot's manifest only after this.

    :param fs: the output folder's filesystem.
    :param out_root: the output folder.
    :param entry: the commit's sequence and snapshot.
    """
    write_whole(fs, posixpath.join(log_dir(out_root), entry.name), b"")


def log_missing(
    fs: AbstractFileSystem,
    out_root: str,
    entries: list[LogEntry],
    committed: Iterable[str],
    read: Callable[[str], Committed | None],
) -> list[LogEntry]:
    """The log with an entry written for each committed snapshot that has none (committed
    before the log began, or by a version of this provider without it), newest first; the
    caller holds the commit lock.

    :param fs: the output folder's filesystem.
    :param out_root: the output folder.
    :param entries: the log as listed.
    :param committed: the ids of the snapshots that have a manifest.
    :param read: reads one snapshot's manifest by its id (None: it has none).
    """
    logged = {e.snapshot_id for e in entries}
    added = []
    for snapshot_id in set(committed) - logged:
        snapshot = read(snapshot_id)
        if snapshot is not None:
            added.append(LogEntry(snapshot.sequence, snapshot_id))
    # newest first: a reader listing the log meanwhile finds the newest of them at its top
    for entry in sorted(added, reverse=True):
        log_commit(fs, out_root, entry)
    return sorted([*entries, *added]) if added else entries


def drop_entries(fs: AbstractFileSystem, out_root: str, entries: Iterable[LogEntry]) -> None:
    """Remove ``entries`` (those of expired snapshots, or of commits killed before their
    manifest); the caller holds the commit lock.

    :param fs: the output folder's filesystem.
    :param out_root: the output folder.
    :param entries: the entries to remove (one already gone is passed over).
    """
    for entry in entries:
        try:
            fs.rm_file(posixpath.join(log_dir(out_root), entry.name))
        except FileNotFoundError:
            pass


def next_sequence(entries: Iterable[LogEntry]) -> int:
    """The sequence of the next commit: after every entry's, the newest committed snapshot's
    among them (a killed commit's number is not given again).

    :param entries: the log, every committed snapshot logged (:func:`log_missing`).
    """
    return max((e.sequence for e in entries), default=0) + 1


def newest(
    entries: list[LogEntry],
    read: Callable[[str], Result | None],
    accept: Callable[[Result], bool] | None = None,
) -> Result | None:
    """The newest logged snapshot that is committed (``read`` gives its manifest, None when
    it has none) and that ``accept`` takes; None when no entry gives one.

    :param entries: the log, oldest first.
    :param read: reads one snapshot's manifest by its id.
    :param accept: the test a snapshot must pass (None: any).
    """
    for entry in reversed(entries):
        result = read(entry.snapshot_id)
        if result is not None and (accept is None or accept(result)):
            return result
    return None


def commit_listing(
    fs: AbstractFileSystem,
    out_root: str,
    snapshot_id: str,
    read: Callable[[str], Result | None],
) -> tuple[list[str], list[LogEntry], set[str], Result | None]:
    """What a commit of ``snapshot_id`` lists of ``out_root`` (under the commit lock): its
    files (for what killed runs left), the log with every committed snapshot logged
    (:func:`log_missing`), the committed snapshots' ids and the newest committed snapshot.

    On an object store one listing gives every key. Where each folder is a listing of its own
    (local disks, HDFS: a ``LISTSTATUS`` each), the log is listed first and the folders of the
    snapshots it logs are not looked into: a commit lists as many folders however many
    snapshots ``out_root`` keeps, where it listed one more per snapshot. A logged snapshot
    counts as committed unless its entry lies above the newest entry with a manifest: such an
    entry is a commit killed before its commit point, whose files are leftovers (the commit
    after the kill removes them).

    :param fs: the output folder's filesystem.
    :param out_root: the output folder.
    :param snapshot_id: the snapshot being committed (its own folder is always looked into).
    :param read: reads one snapshot's manifest by its id (None: it has none).
    """
    flat = is_object_store(fs)
    if flat:  # one flat listing: every key, the log's and the manifests' too
        found = find_files(fs, out_root)
        listed = entries_in(found, out_root)
    else:
        listed = read_log(fs, out_root)
        logged = {e.snapshot_id for e in listed} - {snapshot_id}
        log, snapshots = log_dir(out_root), posixpath.join(out_root, SNAPSHOTS_DIR)

        def descend(folder: str) -> bool:
            parent, name = posixpath.split(folder)
            return folder != log and not (parent == snapshots and name in logged)

        found = find_files(fs, out_root, descend)
    with_manifest = manifest_ids(found, out_root)
    entries = log_missing(fs, out_root, listed, with_manifest, read)
    latest = newest(entries, read)
    if flat:
        return found, entries, with_manifest, latest
    committed = {e.snapshot_id for e in entries}
    for entry in reversed(entries):  # those above the newest committed one: killed commits'
        if latest is not None and entry.snapshot_id == latest.snapshot_id:
            break
        committed.discard(entry.snapshot_id)
    return found, entries, committed, latest


__all__ = [
    "LOG_DIR",
    "Committed",
    "LogEntry",
    "commit_listing",
    "drop_entries",
    "entries_in",
    "log_commit",
    "log_dir",
    "log_missing",
    "newest",
    "next_sequence",
    "read_log",
]
