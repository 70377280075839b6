"""New writes on storage: delta and delete-delta folders above a write-id watermark.

What the sensors wait for. One recursive listing of the table, as for a snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fsspec import AbstractFileSystem

from .listing import StoredFile, list_table_files, resolve_filesystem
from .names import DeltaDir, DeltaKind, parse_acid_dir
from .partitions import parse_partition_component

#: The folder kinds a sensor may wait for, by the names users write in DAGs.
KINDS = {"delta": DeltaKind.INSERT, "delete_delta": DeltaKind.DELETE}


@dataclass(frozen=True)
class NewDeltaFolder:
    """A delta folder holding writes above the watermark."""

    partition: str
    folder: str
    kind: str
    min_write_id: int
    max_write_id: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "folder": self.folder,
            "kind": self.kind,
            "min_write_id": self.min_write_id,
            "max_write_id": self.max_write_id,
        }


def parse_kinds(kinds: Iterable[str]) -> frozenset[DeltaKind]:
    """``["delta", "delete_delta"]`` -> kinds; an unknown name is an error naming it."""
    parsed = set()
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"unknown delta kind {kind!r}; expected one of {sorted(KINDS)}")
        parsed.add(KINDS[kind])
    if not parsed:
        raise ValueError("kinds is empty: name 'delta', 'delete_delta' or both")
    return frozenset(parsed)


def new_delta_folders(
    files: Iterable[StoredFile],
    root: str,
    above_write_id: int,
    kinds: frozenset[DeltaKind] = frozenset(DeltaKind),
    partitions: Iterable[str] | None = None,
) -> list[NewDeltaFolder]:
    """Delta folders below ``root`` whose max write id exceeds ``above_write_id``.

    Only folders that hold a non-empty file count (a folder being written holds none yet).
    ``partitions`` limits the search to those partition paths (``k=v[/k2=v2]``).
    """
    wanted = None if partitions is None else {p.strip("/") for p in partitions}
    prefix = root.rstrip("/") + "/"
    found: dict[tuple[str, str], NewDeltaFolder] = {}
    for stored in files:
        if stored.size == 0 or not stored.path.startswith(prefix):
            continue
        parts = stored.path[len(prefix) :].split("/")
        depth = 0
        while depth < len(parts) - 1 and parse_partition_component(parts[depth]):
            depth += 1
        if depth >= len(parts) - 1:
            continue
        folder = parse_acid_dir(parts[depth])
        if not isinstance(folder, DeltaDir) or folder.kind not in kinds:
            continue
        if folder.max_write_id <= above_write_id or parts[-1].startswith(("_", ".")):
            continue
        partition = "/".join(parts[:depth])
        if wanted is not None and partition not in wanted:
            continue
        found[(partition, folder.name)] = NewDeltaFolder(
            partition, folder.name, folder.kind.value, folder.min_write_id, folder.max_write_id
        )
    return sorted(found.values(), key=lambda f: (f.max_write_id, f.partition, f.folder))


def find_new_delta_folders(
    table_uri: str,
    above_write_id: int,
    kinds: Iterable[str] = ("delta", "delete_delta"),
    partitions: Iterable[str] | None = None,
    *,
    filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> list[NewDeltaFolder]:
    """List ``table_uri`` once and return its delta folders above ``above_write_id``.

    With ``partitions``, only those partition folders are listed (one recursive listing each,
    in parallel), never the rest of the table."""
    fs, root = resolve_filesystem(table_uri, filesystem, storage_options)
    if partitions is not None:
        from .partition_listing import list_watched_partitions

        partitions = list(partitions)
        files = list_watched_partitions(fs, root, partitions) if partitions else []
    else:
        files = list_table_files(fs, root)
    return new_delta_folders(files, root, above_write_id, parse_kinds(kinds), partitions)
