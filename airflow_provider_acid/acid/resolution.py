"""Read-view resolution: which files make up a table as one reader sees it.

The rules are Hive 3's ``AcidUtils.getAcidState``, per partition (:mod:`.acid_state`): folders
the transaction list does not show are skipped, the newest valid base wins, original files are
obsolete under a base, deltas with no valid write are dropped and the rest walked once in Hive's
order; the kept files are grouped into bucket slices per (partition, bucket id). The listing is
first grouped per partition and folder (:mod:`.listing_groups`).

Files outside base and delta folders are Hive's *original files*, whatever their name
(``AcidUtils.getChildState``: every non-hidden file of a partition folder; ``findOriginals``:
every non-hidden file below a folder that is neither a base nor a delta). Their bucket comes from
the name (``N_M``, ``N_M_copy_K``, ``bucket_N``), else it is 0; how their rows are read is decided
by their schema (:mod:`.rows`). What cannot be placed so is listed in ``unrecognised`` and
:func:`check_placed` refuses the read view unless the caller chose to leave it out.

Partitions laid out alike (the same relative paths) resolve alike: each after the first of its
layout is made from that one's template (:mod:`.alike_partitions`); so do partitions shaped
alike, whose folders are named after write ids of their own (:mod:`.shaped_partitions`).
What resolution makes, the read view (bucket slices, data files, and the errors), is
:mod:`.read_view`'s.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from itertools import repeat
from typing import Any

from fsspec import AbstractFileSystem

from .acid_state import resolve_partition
from .alike_partitions import Resolver, resolve_listing
from .bulk import PATH_OF
from .listing import StoredFile, TableLocationError, list_table_files, resolve_filesystem
from .listing_groups import group_listing
from .read_view import (
    PartitionReadView,
    TableReadView,
    UnplacedFilesError,
    UnrecognisedEntry,
)
from .source import PartitionLocation, ReadArguments, TableDefinition, TableSource
from .writeids import ValidTxnList, ValidWriteIdList

# -- the guarantee: nothing silently left out ------------------------------------------------

#: How a plan or manifest records a file the caller chose to leave out.
IGNORED_PREFIX = "left out by choice (ignore_unrecognised): "
_NAMED_AT_MOST = 10


def check_placed(snapshot: TableReadView, *, ignore_unrecognised: bool = False) -> tuple[str, ...]:
    """Refuse a snapshot that would silently lack files of the table.

    Every non-hidden, non-empty file below the table is either placed in a bucket slice or
    excluded for a reason of Hive's (obsolete, aborted, not visible), or else it is listed in
    ``snapshot.unrecognised``. Those raise :class:`UnplacedFilesError` naming them, unless
    ``ignore_unrecognised``: then the snapshot goes ahead without them, and the returned
    warnings (one per file, starting with :data:`IGNORED_PREFIX`) are what a plan or manifest
    records so that its reader sees what was left out. Nothing unrecognised: ``()``.
    """
    entries = snapshot.unrecognised
    if not entries:
        return ()
    if ignore_unrecognised:
        return tuple(f"{IGNORED_PREFIX}{_shown(snapshot, e.path)}: {e.detail}" for e in entries)
    named = "; ".join(f"{_shown(snapshot, e.path)} ({e.detail})" for e in entries[:_NAMED_AT_MOST])
    more = f"; and {len(entries) - _NAMED_AT_MOST} more" if len(entries) > _NAMED_AT_MOST else ""
    raise UnplacedFilesError(
        f"{len(entries)} file(s) in {snapshot.root} cannot be placed in any bucket slice, so a "
        f"snapshot would silently lack them: {named}{more}. Move or remove them, or leave them "
        "out explicitly with --ignore-unrecognised (ignore_unrecognised=True); 'inspect' lists "
        "them",
        entries,
    )


def _shown(snapshot: TableReadView, path: str) -> str:
    prefix = snapshot.root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


# -- entry points ----------------------------------------------------------------------------


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a snapshot is resolved.

    Resolution makes a few objects per listed file and no reference cycles, so the collector
    finds nothing to free meanwhile; yet the number of objects made sets it off, and each of
    its full passes walks every object of the process, the listing included: at a million
    files they took 11 s of 25. Reference counting frees memory as usual meanwhile.

    Afterwards the objects made (a snapshot's are long-lived) go straight to the oldest
    generation, as if they had survived the young collections: ``gc.freeze()`` moves every
    tracked object to the permanent generation and ``gc.unfreeze()`` moves them all to the
    oldest one, both without looking at any. The young collection right after, and the middle
    one some time later, would each have walked the 2.4 million objects of a million files'
    snapshot (0.4 to 0.6 s each) to free nothing; the full collections still see them, as
    before. Not done when the process keeps objects frozen itself (that would thaw them).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def resolve_files(
    root: str,
    files: Iterable[StoredFile],
    write_ids: ValidWriteIdList | None = None,
    txns: ValidTxnList | None = None,
    *,
    insert_only: bool = False,
) -> TableReadView:
    """Resolve a snapshot from an already listed set of files below ``root``."""

    write_ids = write_ids or ValidWriteIdList.all_committed()
    listed = files if isinstance(files, list) else list(files)
    with _cyclic_gc_paused():
        resolver = Resolver(write_ids, txns, insert_only)
        partitions, unrecognised = resolve_listing(root, listed, resolver)
        del resolver  # freed before the collector is back, which then looks at fewer objects
    return TableReadView(
        root=root,
        write_ids=write_ids,
        txns=txns,
        insert_only=insert_only,
        partitions=tuple(partitions),
        unrecognised=tuple(unrecognised),
    )


def resolve_partition_locations(
    root: str,
    locations: Sequence[PartitionLocation],
    fs: AbstractFileSystem,
    write_ids: ValidWriteIdList | None = None,
    txns: ValidTxnList | None = None,
    *,
    insert_only: bool = False,
    definition: TableDefinition | None = None,
    max_workers: int = 8,
) -> TableReadView:
    """Resolve a snapshot from the given partitions only, each listed at its own location
    (a metastore's partitions, which may lie outside ``root``), ``max_workers`` at a time."""

    write_ids = write_ids or ValidWriteIdList.all_committed()
    paths = [resolve_filesystem(p.location, fs)[1] for p in locations]

    def listing(located: tuple[PartitionLocation, str]) -> list[StoredFile]:
        try:
            return list_table_files(fs, located[1])
        except TableLocationError:
            name = f"{definition.name} " if definition is not None else ""
            raise TableLocationError(
                f"partition {located[0].name} of table {name}at {located[0].location} does not "
                "exist or is not a folder (its location as the metastore records it)"
            ) from None

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(paths) or 1))) as pool:
        listed = list(pool.map(listing, zip(locations, paths, strict=True)))
    partitions: list[PartitionReadView] = []
    unrecognised: list[UnrecognisedEntry] = []
    with _cyclic_gc_paused():
        resolver = Resolver(write_ids, txns, insert_only)
        plans = resolver.plans
        for location, path, files in zip(locations, paths, listed, strict=True):
            prefix = path.rstrip("/") + "/"
            if all(map(str.startswith, map(PATH_OF, files), repeat(prefix))) and resolver.add(
                location.partition, files, prefix
            ):
                continue  # resolved on its own, or to be made from a template
            listings, odd = group_listing(path, files, insert_only)
            unrecognised += odd
            for listing in listings:
                if listing.partition.path:
                    unrecognised.append(
                        UnrecognisedEntry(
                            f"{path}/{listing.partition.path}",
                            f"partition folder inside the location of partition {location.name}"
                            " (the metastore's partitions are read at their own locations)",
                        )
                    )
                    continue
                listing.partition = location.partition
                partitions.append(resolve_partition(listing, write_ids, txns, plans))
        partitions += resolver.snapshots()
        del listed, resolver
    return TableReadView(
        root=root,
        write_ids=write_ids,
        txns=txns,
        insert_only=insert_only,
        partitions=tuple(sorted(partitions, key=lambda p: p.partition.path)),
        unrecognised=tuple(unrecognised),
        definition=definition,
    )


def resolve_read_view(
    table_uri: str | TableSource,
    write_ids: ValidWriteIdList | str | None = None,
    txns: ValidTxnList | str | None = None,
    *,
    insert_only: bool = False,
    filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> TableReadView:
    """List ``table_uri`` once and resolve the snapshot that ``write_ids`` and ``txns`` see.

    Write-id and transaction lists may be given as Hive's serialized strings. ``table_uri``
    may be a :class:`TableSource` instead: its read view is used (unless lists are given),
    and when it comes from a metastore, only its partitions' locations are listed.
    """
    read = ReadArguments.of(table_uri, write_ids, txns, insert_only)
    fs, root = resolve_filesystem(read.location, filesystem, storage_options)
    definition = read.definition
    if definition is not None and definition.partitions is not None:
        return resolve_partition_locations(
            root,
            definition.partitions,
            fs,
            read.write_ids,
            read.txns,
            insert_only=read.insert_only,
            definition=definition,
        )
    snapshot = resolve_files(
        root, list_table_files(fs, root), read.write_ids, read.txns, insert_only=read.insert_only
    )
    return replace(snapshot, definition=definition) if definition is not None else snapshot
