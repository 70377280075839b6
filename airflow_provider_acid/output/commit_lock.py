"""The commit lock of an output folder: one commit (or expiry) of ``OUT`` at a time.

The lock is the object ``OUT/_snapshots/_commit.lock``, created only if it does not exist
(:func:`..acid.storage.create_exclusive`: an ``O_EXCL`` hard link on a local disk, a PUT with
``If-None-Match: *`` on S3), holding who took it and until when its lease runs. Whoever
created it commits; another writer waits for it to go (polling), up to ``wait`` seconds, then
fails with :class:`CommitLockError` naming the holder. It is deleted when the commit ends.

A lock whose holder is gone is broken: the holder ran on this host and its process no longer
exists (a killed commit), or its lease expired (``lease`` seconds after it was taken; a commit
takes seconds, the default lease is 15 minutes). Breaking reads the lock, then deletes it if
it still names the same holder; two writers breaking one stale lock at the same instant is the
one race this leaves.
"""

from __future__ import annotations

import json
import os
import posixpath
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fsspec import AbstractFileSystem

from ..acid.storage import create_exclusive, read_whole, remove_temporaries, renames_atomically
from .records import CommitError

LOCK_NAME = "_commit.lock"
LOCK_PATH = f"_snapshots/{LOCK_NAME}"
#: Seconds a second writer waits for the lock before it fails.
DEFAULT_WAIT = 120.0
#: Seconds after which a lock is broken whatever its holder (a commit takes seconds).
DEFAULT_LEASE = 900.0


class CommitLockError(CommitError):
    """Another writer holds the commit lock of the output folder for longer than we wait."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds a commit lock: a random owner token, host, process, what for, and when."""

    owner: str
    host: str
    pid: int
    purpose: str
    acquired_at: float
    expires_at: float

    def to_json(self) -> bytes:
        return json.dumps(self.__dict__, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> LockHolder | None:
        try:
            data: dict[str, Any] = json.loads(raw)
            return cls(
                str(data["owner"]),
                str(data["host"]),
                int(data["pid"]),
                str(data["purpose"]),
                float(data["acquired_at"]),
                float(data["expires_at"]),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        taken = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.acquired_at))
        return f"{self.purpose} by pid {self.pid} on {self.host} since {taken}"

    def is_stale(self, now: float) -> bool:
        """The holder is gone: its lease ran out, or it ran here and its process is dead."""
        if now >= self.expires_at:
            return True
        if self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's
            return False
        return False


def lock_path(out_root: str) -> str:
    return posixpath.join(out_root, LOCK_PATH)


def _read_holder(fs: AbstractFileSystem, path: str) -> tuple[bool, LockHolder | None]:
    """(exists, holder); holder None when the lock exists but cannot be read (yet)."""
    try:
        return True, LockHolder.from_json(read_whole(fs, path))
    except FileNotFoundError:
        return False, None


@contextmanager
def commit_lock(
    fs: AbstractFileSystem,
    out_root: str,
    purpose: str,
    *,
    wait: float = DEFAULT_WAIT,
    lease: float = DEFAULT_LEASE,
) -> Iterator[LockHolder]:
    """Hold the commit lock of ``out_root`` for the ``with`` block (see the module docstring).

    Raises :class:`CommitLockError` naming the lock and its holder after ``wait`` seconds."""
    path = lock_path(out_root)
    deadline = time.monotonic() + wait
    pause = 0.05
    while True:
        now = time.time()
        me = LockHolder(
            uuid.uuid4().hex, socket.gethostname(), os.getpid(), purpose, now, now + lease
        )
        if create_exclusive(fs, path, me.to_json()):
            break
        exists, holder = _read_holder(fs, path)
        if exists and holder is not None and holder.is_stale(time.time()):
            _break(fs, path, holder)
            continue
        if not exists:
            continue
        if time.monotonic() >= deadline:
            who = holder.describe() if holder is not None else "a writer (unreadable lock)"
            raise CommitLockError(
                f"{purpose}: the output folder {out_root} is being committed by another "
                f"writer ({who}); waited {wait:g} s for its lock {path}. One writer per output "
                "folder at a time: retry once it is done, or delete the lock if that writer "
                "is gone"
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
    try:
        if renames_atomically(fs):  # the only lock written through a temporary: a local one
            # temporaries of a lock whose writer was killed while creating it (locked ones stay)
            remove_temporaries(fs, posixpath.dirname(path), lambda name: name == LOCK_NAME)
        yield me
    finally:
        _release(fs, path, me)


def _break(fs: AbstractFileSystem, path: str, stale: LockHolder) -> None:
    exists, holder = _read_holder(fs, path)
    if exists and holder == stale:
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            pass


def _release(fs: AbstractFileSystem, path: str, me: LockHolder) -> None:
    exists, holder = _read_holder(fs, path)
    if exists and holder is not None and holder.owner == me.owner:
        fs.rm_file(path)
