"""Where an output folder keeps its snapshots' documents (see :mod:`.protocol` for the layout):
their folder and file names, and the committed snapshots a listing of the folder shows."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

SNAPSHOTS_DIR = "_snapshots"
PLAN_FILE = "plan.json"
MANIFEST_FILE = "manifest.json"
SUCCESS_FILE = "_SUCCESS"


def snapshot_dir(out_root: str, snapshot_id: str) -> str:
    """The folder of one snapshot's plan, manifest and marker.

    :param out_root: the output folder.
    :param snapshot_id: the snapshot.
    """
    return posixpath.join(out_root, SNAPSHOTS_DIR, snapshot_id)


def manifest_ids(found: Iterable[str], out_root: str) -> set[str]:
    """The snapshots with a manifest among ``found`` (paths from a listing of ``out_root``).

    :param found: the listed paths.
    :param out_root: the output folder.
    """
    prefix = posixpath.join(out_root, SNAPSHOTS_DIR).rstrip("/") + "/"
    ids = set()
    for path in found:
        if path.startswith(prefix) and posixpath.basename(path) == MANIFEST_FILE:
            ids.add(posixpath.basename(posixpath.dirname(path)))
    return ids


__all__ = [
    "MANIFEST_FILE",
    "PLAN_FILE",
    "SNAPSHOTS_DIR",
    "SUCCESS_FILE",
    "manifest_ids",
    "snapshot_dir",
]
