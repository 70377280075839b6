"""Listing only the partitions a reader asks for: partition folders level by level, then the
files of the kept ones, in parallel.

A recursive listing of the whole table (:func:`.listing.list_table_files`) costs what the table
holds: on S3 one page per 1,000 objects, on a local disk one directory read per folder. When a
predicate or a partition spec names a few partitions of a storage-only table, this lists
instead:

1. the table root, with one delimited listing (``fs.ls(path, detail=True)``; on S3 one
   ``ListObjectsV2`` with ``delimiter=/``, a page per 1,000 folders);
2. level by level, the partition folders (``k=v``): the first folder of a level that the
   filter keeps is listed recursively (the first folder, delimited, when it keeps none), and
   only when it holds partition folders itself is the whole level listed the same way (so
   every partition's values are known before any is dropped, and an undeclared partition
   column's type is inferred from all of its values, as a whole listing does);
3. the filter (a callable over the partitions found) keeps some, and only those are listed
   recursively, ``max_workers`` at a time, with whatever else the levels above held (files
   and folders that are no partition folders are always listed whole, so they are placed or
   refused exactly as today). On an object store, when that would take more requests than
   one recursive listing of the whole table, the table is listed whole instead, and what
   lies in the partitions left out is dropped.

The files found are a subset of the whole listing: those below the kept partition folders and
those outside any partition folder, with the same paths, sizes and versions, so resolution
(:func:`.snapshot.resolve_files`) gives for the kept partitions exactly what it gives from a
whole listing. A filter that keeps no partition makes it fall back to the whole listing, so
that what follows (the table's columns from its newest file, the errors naming partition
columns) sees the table as before.
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from fsspec import AbstractFileSystem

from .listing import StoredFile, TableLocationError, list_table_files, stored_files
from .names import is_hidden, is_side_file
from .partitions import Partition, parse_partition_component
from .storage import naming

#: What decides which partitions are listed: one flag per partition found, in order.
PartitionFilter = Callable[[Sequence[Partition]], Sequence[bool]]

#: Folders listed at once (threads; each listing is one round trip on an object store).
DEFAULT_WORKERS = 16


@dataclass(frozen=True)
class ScopedListing:
    """What a partition-scoped listing found.

    ``files`` (sorted by path) are what resolution reads; ``partitions`` every leaf partition
    folder found, ``kept`` those whose files were listed. ``whole`` is True when the table was
    listed whole instead: it has no partition folders, or the filter kept none."""

    root: str
    files: tuple[StoredFile, ...]
    partitions: tuple[Partition, ...]
    kept: tuple[Partition, ...]
    whole: bool = False

    @property
    def partitions_total(self) -> int:
        return len(self.partitions)

    @cached_property
    def _left_out(self) -> dict[int, frozenset[str]]:
        kept = set(self.kept)
        by_depth: dict[int, set[str]] = {}
        if not self.whole:
            for p in self.partitions:
                if p not in kept:
                    by_depth.setdefault(len(p.values), set()).add(p.path)
        return {depth: frozenset(paths) for depth, paths in by_depth.items()}

    def covers(self, path: str) -> bool:
        """Whether ``path`` lies where this listing looked: not below a partition folder it
        left out (whatever it finds there, or does not, the listing cannot tell)."""
        prefix = self.root.rstrip("/") + "/"
        if not path.startswith(prefix):
            return False
        relative = path[len(prefix) :]
        for depth, left_out in self._left_out.items():
            if "/".join(relative.split("/", depth)[:depth]) in left_out:
                return False
        return True


@dataclass(frozen=True)
class _Folder:
    path: str
    components: tuple[str, ...]


def _name(info: dict[str, Any]) -> str:
    return str(info.get("name", "")).rstrip("/")


def _ls(fs: AbstractFileSystem, path: str) -> list[dict[str, Any]]:
    """The entries directly inside ``path`` (one delimited listing), the folder itself left
    out (object stores answer a folder marker ``path/`` as one of its own entries)."""
    # Object-store filesystems keep listings in a cache that lives as long as the instance
    # (which fsspec shares across calls in a process): a folder made since must not be missed.
    fs.invalidate_cache(path)
    try:
        with naming(path):
            entries = fs.ls(path, detail=True)
    except FileNotFoundError:
        raise TableLocationError(f"folder {path!r} does not exist or is not a folder") from None
    own = path.rstrip("/")
    return [e for e in entries if _name(e) != own]


def _skipped(name: str) -> bool:
    """Hidden and no side file (``_tmp...``, ``.hive-staging``): resolution skips all of it."""
    return is_hidden(name) and not is_side_file(name)


def _split(
    entries: list[dict[str, Any]], parent: _Folder
) -> tuple[dict[str, dict[str, Any]], list[str], list[_Folder]]:
    """A folder's entries as (files, folders that are no partition folders, partition
    folders), hidden ones left out as resolution leaves them out."""
    files: dict[str, dict[str, Any]] = {}
    others: list[str] = []
    partitions: list[_Folder] = []
    for entry in entries:
        path = _name(entry)
        name = posixpath.basename(path)
        if entry.get("type") == "directory":
            if parse_partition_component(name) is not None:
                partitions.append(_Folder(path, (*parent.components, name)))
            elif not _skipped(name):
                others.append(path)
        elif not _skipped(name):
            files[str(entry.get("name", path))] = entry
    return files, others, sorted(partitions, key=lambda f: f.path)


def _has_partition_folders(entries: list[dict[str, Any]]) -> bool:
    return any(
        e.get("type") == "directory" and parse_partition_component(posixpath.basename(_name(e)))
        for e in entries
    )


def _find(fs: AbstractFileSystem, path: str) -> dict[str, dict[str, Any]]:
    try:
        with naming(path):
            return fs.find(path, detail=True)
    except FileNotFoundError:  # gone since it was listed: nothing below it any more
        return {}


#: Keys an object store returns in one listing page, by protocol: listing ``n`` objects
#: recursively costs ``ceil(n / page)`` requests there, however many folders they are in. A
#: filesystem not named here reads one folder a call, so listing some partitions never costs
#: more than listing the table whole.
_PAGE_KEYS = {"s3": 1000, "s3a": 1000, "gs": 1000, "gcs": 1000, "abfs": 5000, "az": 5000}


def _page_keys(fs: AbstractFileSystem) -> int | None:
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return next((_PAGE_KEYS[p] for p in protocols if p in _PAGE_KEYS), None)


def _below(found: dict[str, dict[str, Any]], path: str) -> dict[str, dict[str, Any]]:
    prefix = path.rstrip("/") + "/"
    return {k: v for k, v in found.items() if str(v.get("name", k)).startswith(prefix)}


def _holds_partition_folders(found: dict[str, dict[str, Any]], path: str) -> bool:
    """Whether a recursive listing of ``path`` shows a ``k=v`` folder directly inside it."""
    prefix = len(path.rstrip("/")) + 1
    for key, info in found.items():
        first, slash, _ = str(info.get("name", key))[prefix:].partition("/")
        if slash and parse_partition_component(first) is not None:
            return True
    return False


class _Subtrees:
    """Recursive listings made so far, by folder (thread-safe): a folder below one of them is
    answered from it, without another request."""

    def __init__(self, fs: AbstractFileSystem) -> None:
        self.fs = fs
        self.found: dict[str, dict[str, dict[str, Any]]] = {}
        self.lock = threading.Lock()

    def find(self, path: str) -> dict[str, dict[str, Any]]:
        with self.lock:
            if path in self.found:
                return self.found[path]
            folder = next((f for f in _ancestors(path) if f in self.found), None)
        if folder is not None:
            return _below(self.found[folder], path)
        found = _find(self.fs, path)
        with self.lock:
            self.found[path] = found
        return found


def _flags(keep: PartitionFilter | None, level: Sequence[_Folder]) -> list[bool]:
    partitions = [Partition.from_components(f.components) for f in level]
    flags = [True] * len(level) if keep is None else list(keep(partitions))
    if len(flags) != len(level):
        raise ValueError(f"the partition filter gave {len(flags)} flags for {len(level)}")
    return flags


def list_partitions(
    fs: AbstractFileSystem,
    root: str,
    keep: PartitionFilter | None = None,
    *,
    max_workers: int = DEFAULT_WORKERS,
) -> ScopedListing:
    """List the partitions of the table at ``root`` that ``keep`` keeps (all when None).

    Whether a level of partition folders is the last is learnt from the first folder the
    filter keeps there (as though it were the last level: a filter judges the values it is
    given and keeps what the missing ones could match), listed recursively, which it has to
    be anyway when it is a partition; when the filter keeps none, from the level's first
    folder, listed delimited. On an object store, when listing the kept partitions one by one
    would take more requests than one recursive listing of the table (estimated from the
    first kept partition's size), the table is listed whole and what lies in the partitions
    left out is dropped: the files found are the same either way."""
    root = root.rstrip("/") or "/"
    top = _Folder(root, ())
    try:
        entries = _ls(fs, root)
    except TableLocationError:
        raise TableLocationError(
            f"table location {root!r} does not exist or is not a folder"
        ) from None
    files, others, level = _split(entries, top)
    if not level:  # unpartitioned: one recursive listing, as before
        return ScopedListing(root, tuple(list_table_files(fs, root)), (), (), whole=True)
    subtrees = _Subtrees(fs)
    workers = max(1, max_workers)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while True:
            flags = _flags(keep, level)  # final once this level proves to be the last
            first = next((f for f, flag in zip(level, flags, strict=True) if flag), None)
            probe: list[dict[str, Any]] | None = None
            if first is not None:
                if not _holds_partition_folders(subtrees.find(first.path), first.path):
                    break  # the leaf level: these folders are the partitions
            else:
                probe = _ls(fs, level[0].path)
                if not _has_partition_folders(probe):
                    break
            rest = level if probe is None else level[1:]
            listed = [
                *([probe] if probe is not None else []),
                *pool.map(lambda f: _ls(fs, f.path), rest),
            ]
            deeper: list[_Folder] = []
            for folder, children in zip(level, listed, strict=True):
                more_files, more_others, sub = _split(children, folder)
                if not sub:  # a partition at this level after all (a ragged layout)
                    others.append(folder.path)
                    continue
                files.update(more_files)
                others += more_others
                deeper += sub
            level = deeper
        partitions = tuple(Partition.from_components(f.components) for f in level)
        kept = [f for f, flag in zip(level, flags, strict=True) if flag]
        if not kept:
            whole = list_table_files(fs, root)
            return ScopedListing(root, tuple(whole), partitions, (), whole=True)
        if _whole_is_cheaper(fs, len(kept), len(level), len(subtrees.find(kept[0].path))):
            files.update(_kept_part(_find(fs, root), level, flags, others))
        else:
            for found in pool.map(subtrees.find, [f.path for f in kept] + others):
                files.update(found)
    kept_partitions = tuple(p for p, flag in zip(partitions, flags, strict=True) if flag)
    return ScopedListing(root, tuple(stored_files(files)), partitions, kept_partitions)


def _whole_is_cheaper(fs: AbstractFileSystem, kept: int, partitions: int, first: int) -> bool:
    """Whether one recursive listing of the table takes fewer requests than listing the
    ``kept`` of ``partitions`` partitions one by one (one has been, holding ``first`` files):
    on an object store, the table's size estimated as that many files a partition."""
    page = _page_keys(fs)
    if page is None:
        return False
    whole_pages = -(-partitions * max(1, first) // page)
    return kept - 1 > whole_pages


def _kept_part(
    found: dict[str, dict[str, Any]],
    level: Sequence[_Folder],
    flags: Sequence[bool],
    others: Sequence[str],
) -> dict[str, dict[str, Any]]:
    """Of a recursive listing of the whole table, what a scoped listing would have found: the
    files below the kept partition folders and below the other folders listed whole."""
    wanted = {f.path for f, flag in zip(level, flags, strict=True) if flag} | set(others)
    return {
        key: info
        for key, info in found.items()
        if any(folder in wanted for folder in _ancestors(str(info.get("name", key))))
    }


def _ancestors(path: str) -> Iterator[str]:
    """The folders ``path`` lies in, nearest first."""
    folder = path.rstrip("/")
    while "/" in folder.strip("/"):
        folder = posixpath.dirname(folder)
        yield folder


def partition_specs(partitions: Iterable[str | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Partition specs (``dt=2024-01-01/h=3`` or ``{"dt": "2024-01-01"}``) as column -> value
    (None for a null partition value).

    :param partitions: the specs, as text or mappings.
    """
    specs = []
    for spec in partitions:
        if isinstance(spec, Mapping):
            specs.append({str(k): (None if v is None else str(v)) for k, v in spec.items()})
            continue
        parsed = {}
        for component in str(spec).strip("/").split("/"):
            pair = parse_partition_component(component)
            if pair is None:
                raise ValueError(f"partitions: {spec!r} is not a k=v[/k=v] partition spec")
            parsed[pair[0]] = pair[1]
        specs.append(parsed)
    return specs


def spec_filter(specs: Sequence[Any]) -> PartitionFilter:
    """A filter keeping the partitions matching any of ``specs`` (``dt=2024-01-01``,
    ``{"dt": "2024-01-01"}``; a partial spec matches every partition under it).

    A spec naming a column no partition has keeps nothing, so the table is listed whole and
    the caller's own check names the column (as it did before)."""
    parsed = partition_specs(specs)

    def keep(partitions: Sequence[Partition]) -> list[bool]:
        out = []
        for partition in partitions:
            values = partition.as_dict()
            out.append(
                any(all(k in values and values[k] == v for k, v in s.items()) for s in parsed)
            )
        return out

    return keep


@dataclass(frozen=True)
class ScopedReadView:
    """A read view resolved from a partition-scoped listing; ``listing`` is None when the table
    was resolved as before (read by name: the metastore's partitions; or no filter)."""

    snapshot: Any  # TableReadView (imported lazily: resolution.py imports nothing from here)
    listing: ScopedListing | None = None

    @property
    def scoped(self) -> bool:
        """Whether some partitions were left unlisted."""
        return self.listing is not None and not self.listing.whole

    def scope(self, fs: AbstractFileSystem) -> Callable[[str], bool] | None:
        """``path -> bool``: the part of the table this snapshot was listed from, when that
        is not all of it (None): the partition folders listed, or by name the locations of
        the partitions the metastore was asked for."""
        if self.scoped:
            assert self.listing is not None
            return self.listing.covers
        definition = getattr(self.snapshot, "definition", None)
        if definition is None or definition.partitions is None:
            return None
        total = definition.partitions_total
        if total is None or total <= len(definition.partitions):
            return None
        from .listing import resolve_filesystem

        prefixes = tuple(
            resolve_filesystem(p.location, fs)[1].rstrip("/") + "/" for p in definition.partitions
        )
        return lambda path: path.startswith(prefixes)


def resolve_partitions(
    table_uri: Any,
    keep: PartitionFilter | None,
    write_ids: Any = None,
    txns: Any = None,
    *,
    insert_only: bool = False,
    filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
    max_workers: int = DEFAULT_WORKERS,
) -> ScopedReadView:
    """:func:`.snapshot.resolve_read_view`, listing only the partitions ``keep`` keeps when the
    table is read storage-only (a path or a :class:`.source.TableSource` without a
    definition). Read by name, the metastore's partitions are read as before."""
    from .listing import resolve_filesystem
    from .resolution import resolve_files, resolve_read_view
    from .source import ReadArguments, TableSource

    if keep is None or (isinstance(table_uri, TableSource) and table_uri.definition is not None):
        snapshot = resolve_read_view(
            table_uri,
            write_ids,
            txns,
            insert_only=insert_only,
            filesystem=filesystem,
            storage_options=storage_options,
        )
        return ScopedReadView(snapshot)
    read = ReadArguments.of(table_uri, write_ids, txns, insert_only)
    fs, root = resolve_filesystem(read.location, filesystem, storage_options)
    listing = list_partitions(fs, root, keep, max_workers=max_workers)
    snapshot = resolve_files(
        root, listing.files, read.write_ids, read.txns, insert_only=read.insert_only
    )
    return ScopedReadView(snapshot, listing)


def resolve_partition_specs(
    table_uri: Any,
    specs: Sequence[Any] | None,
    write_ids: Any = None,
    txns: Any = None,
    *,
    insert_only: bool = False,
    filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
    max_workers: int = DEFAULT_WORKERS,
) -> ScopedReadView:
    """The snapshot of the partitions ``specs`` name (``dt=2024-01-01``, partial specs match
    every partition under them; all when None), listing only those when storage-only.

    A spec that matches no partition folder is an error naming it and the table."""
    keep = spec_filter(specs) if specs else None
    scoped = resolve_partitions(
        table_uri,
        keep,
        write_ids,
        txns,
        insert_only=insert_only,
        filesystem=filesystem,
        storage_options=storage_options,
        max_workers=max_workers,
    )
    listing = scoped.listing
    if specs and listing is not None:
        for spec in specs:
            if not any(spec_filter([spec])(listing.partitions)):
                shown = (
                    spec if isinstance(spec, str) else "/".join(f"{k}={v}" for k, v in spec.items())
                )
                keys = sorted({k for p in listing.partitions for k in p.keys})
                raise ValueError(
                    f"partitions: {shown!r} matches no partition of {listing.root} "
                    f"(partition columns: {keys or 'none, the table is unpartitioned'})"
                )
    return scoped


def _watched_paths(root: str, partitions: Sequence[str]) -> list[str]:
    """The folders of the given partition paths (``k=v[/k2=v2]``) below ``root``."""
    paths = []
    for partition in dict.fromkeys(p.strip("/") for p in partitions):
        components = partition.split("/")
        if not partition or any(parse_partition_component(c) is None for c in components):
            raise ValueError(f"partitions: {partition!r} is not a k=v[/k=v] partition path")
        paths.append(f"{root.rstrip('/')}/{partition}")
    return paths


def list_watched_partitions(
    fs: AbstractFileSystem,
    root: str,
    partitions: Sequence[str],
    *,
    max_workers: int = DEFAULT_WORKERS,
) -> list[StoredFile]:
    """The files below the given partition folders (paths ``k=v[/k2=v2]`` below ``root``),
    sorted: one recursive listing each, ``max_workers`` at a time, nothing else of the table.

    A partition folder that is not there (yet) holds nothing; a table location that is not
    there is a :class:`.listing.TableLocationError`, as for a whole listing."""
    paths = _watched_paths(root, partitions)
    found: dict[str, dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(paths) or 1))) as pool:
        for listed in pool.map(lambda path: _find(fs, path), paths):
            found.update(listed)
    if not found and not fs.isdir(root):  # only an empty answer costs a call more
        raise TableLocationError(f"table location {root!r} does not exist or is not a folder")
    return stored_files(found)


async def alist_watched_partitions(
    fs: AbstractFileSystem,
    root: str,
    partitions: Sequence[str],
    *,
    max_workers: int = DEFAULT_WORKERS,
) -> list[StoredFile]:
    """:func:`list_watched_partitions` without blocking the event loop: on an asynchronous
    filesystem (s3fs) the listings are awaited, ``max_workers`` at a time; on the others they
    run in a worker thread."""
    import asyncio

    if not (getattr(fs, "async_impl", False) and getattr(fs, "asynchronous", False)):
        return await asyncio.to_thread(
            list_watched_partitions, fs, root, partitions, max_workers=max_workers
        )
    paths = _watched_paths(root, partitions)
    limit = asyncio.Semaphore(max(1, max_workers))

    async def one(path: str) -> dict[str, dict[str, Any]]:
        async with limit:
            try:
                return await fs._find(path, detail=True)
            except FileNotFoundError:
                return {}

    found: dict[str, dict[str, Any]] = {}
    for listed in await asyncio.gather(*(one(path) for path in paths)):
        found.update(listed)
    if not found and not await fs._isdir(root):
        raise TableLocationError(f"table location {root!r} does not exist or is not a folder")
    return stored_files(found)


__all__ = [
    "DEFAULT_WORKERS",
    "PartitionFilter",
    "ScopedListing",
    "ScopedReadView",
    "alist_watched_partitions",
    "list_partitions",
    "list_watched_partitions",
    "partition_specs",
    "resolve_partition_specs",
    "resolve_partitions",
    "spec_filter",
]
