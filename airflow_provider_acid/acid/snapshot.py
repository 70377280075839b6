"""Snapshot resolution: which files make up a table as one reader sees it.

The rules are Hive 3's ``AcidUtils.getAcidState``, per partition:

1. Folders whose compactor transaction (``_vT``) the transaction list does not show are skipped.
2. The base is the newest valid one. A compacted base (``_vT`` or ``_metadata_acid``) is valid
   when no write at or below it is open; an insert-overwrite base when its own write is
   committed. Older bases are obsolete. Bases present but none valid, and the oldest one
   compacted: the reader's snapshot is older than the history kept (an error, as in Hive).
3. Original (pre-ACID) files are obsolete once there is a base.
4. Deltas with no valid write are dropped (aborted or not yet committed). The rest, ordered
   by (min ascending, max descending, statement), are walked once: a delta is kept when it adds
   writes past the last kept one, when it is another statement of the last kept write, or when
   it is the delete delta twin of the last kept delta; anything else is covered and obsolete.
5. Kept files are grouped into bucket slices per (partition, bucket id).

Files outside base and delta folders are Hive's *original files*, whatever their name
(``AcidUtils.getChildState``: every non-hidden file of a partition folder; ``findOriginals``:
every non-hidden file below a folder that is neither a base nor a delta). Their bucket comes from
the name (``N_M``, ``N_M_copy_K``, ``bucket_N``), else it is 0; how their rows are read is decided
by their schema (:mod:`.rows`). What cannot be placed so is listed in ``unrecognised`` and
:func:`check_placed` refuses the snapshot unless the caller chose to leave it out.

Partitions laid out alike (the same relative paths) resolve alike: each after the first of its
layout is made from that one's template (:mod:`.alike_partitions`). What resolution makes, the
read view (snapshots, bucket slices, data files, and the errors), is :mod:`.read_view`'s; it
is importable from here too.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import repeat
from typing import Any

from fsspec import AbstractFileSystem

from .listing import StoredFile, TableLocationError, list_table_files, resolve_filesystem
from .names import (
    AcidDir,
    BaseDir,
    BucketFileName,
    DeltaDir,
    OriginalFileName,
    is_hidden,
    is_side_file,
    parse_acid_dir,
    parse_bucket_file,
    parse_original_file,
)
from .partitions import Partition, parse_partition_component
from .read_view import (
    AcidLayoutError,
    BucketSlice,
    ChosenDelta,
    DataFile,
    ExcludedEntry,
    ExclusionReason,
    FileRole,
    NotEnoughHistoryError,
    PartitionSnapshot,
    TableSnapshot,
    UnplacedFilesError,
    UnrecognisedEntry,
    _FileKind,
    _set_base_files,
    _set_bucket_id,
    _set_delete_delta_files,
    _set_delta_files,
    _set_file,
    _set_kind,
    _set_original_files,
    _set_partition,
    _set_slice_bucket_id,
)
from .source import PartitionLocation, ReadArguments, TableDefinition, TableSource
from .writeids import RangeValidity, ValidTxnList, ValidWriteIdList

# -- grouping the listing --------------------------------------------------------------------
#
# A listing repeats itself: every file of a folder shares its path up to the last "/", and a
# table uses a handful of file names (bucket_00000 ...) in every folder. So each folder is
# worked out once (hidden or not, its partition, the base or delta it is in) and each distinct
# file name is parsed once; what is left per file is a cut at the last "/" and two lookups.


@dataclass(slots=True)
class _Folder:
    dir: AcidDir
    path: str
    #: What the folder's data files are, should the folder be chosen.
    role: FileRole
    #: The folder's data files in listing order (a flat list: one append a file; they are
    #: put into buckets only if the folder is chosen). They are made as they are listed,
    #: without invalid write ids and marked as far as known then; the few of a partly valid
    #: delta, or listed before ``_orc_acid_version``, are corrected when the folder is chosen
    #: (see ``_collect``).
    files: list[DataFile] = field(default_factory=list)
    #: No file listed after another with a greater path (as ``list_table_files`` lists).
    in_path_order: bool = True
    #: The path of the last file appended (every path is greater than "").
    last_path: str = ""
    side_files: set[str] = field(default_factory=set)
    #: ``_orc_acid_version`` listed so far; and whether data files were made before it was.
    marked: bool = False
    made_unmarked: bool = False
    #: What the data files made from now on are (see ``DataFile``), once one is made.
    kind: _FileKind | None = None

    @property
    def is_compacted_base(self) -> bool:
        return isinstance(self.dir, BaseDir) and (
            self.dir.visibility_txn_id is not None or "_metadata_acid" in self.side_files
        )

    @property
    def acid_version_marked(self) -> bool:
        return "_orc_acid_version" in self.side_files


@dataclass
class _PartitionListing:
    partition: Partition
    folders: dict[str, _Folder] = field(default_factory=dict)
    originals: list[StoredFile] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _FileName:
    """What placing a file needs to know about its name (the part after the last ``/``)."""

    #: Hidden (``_x``, ``.x``) and no side file: a ``_SUCCESS`` or ``.crc`` file, never data.
    skipped: bool
    side_file: bool
    bucket_file: bool
    bucket_id: int

    @classmethod
    def parse(cls, name: str) -> _FileName:
        side_file = is_side_file(name)
        bucket_file = parse_bucket_file(name)
        return cls(
            skipped=is_hidden(name) and not side_file,
            side_file=side_file,
            bucket_file=bucket_file is not None,
            bucket_id=_bucket_id(bucket_file, parse_original_file(name)),
        )


class _FileNames(dict[str, _FileName]):
    """File names parsed on first sight: a table has a few distinct names, each many times."""

    def __missing__(self, name: str) -> _FileName:
        parsed = self[name] = _FileName.parse(name)
        return parsed


@dataclass(slots=True)
class _Directory:
    """A folder of the listing, as the files directly inside it are placed.

    ``below_partition`` are the folder names between the partition and those files: none at
    the partition root (original files), one in a base or delta folder, more when nested.
    """

    #: A hidden folder on the way (``_tmp...``, ``.hive-staging``): nothing below is data.
    skipped: bool = False
    partition_components: list[str] = field(default_factory=list)
    below_partition: list[str] = field(default_factory=list)
    #: The base or delta folder the files are in (the first folder below the partition).
    acid_dir: AcidDir | None = None
    acid_dir_path: str = ""
    in_delete_delta: bool = False
    #: Outside base and delta folders: the first folder on the way that is named like a
    #: partition or a base/delta folder although its parent is neither (Hive never writes that).
    misplaced: str | None = None
    #: Directly inside a base or delta folder, not hidden, and not a delete delta of an
    #: insert-only table: its files are placed the common way (inline in _group_listing).
    plain: bool = False
    #: Set by the first file placed (so that hidden files alone make no partition or folder).
    listing: _PartitionListing | None = None
    folder: _Folder | None = None

    def partition_listing(self, partitions: dict[str, _PartitionListing]) -> _PartitionListing:
        if self.listing is None:
            path = "/".join(self.partition_components)
            self.listing = partitions.get(path)
            if self.listing is None:
                partition = Partition.from_components(self.partition_components)
                self.listing = partitions[path] = _PartitionListing(partition)
        return self.listing

    def acid_folder(self) -> _Folder:
        """The base or delta folder, registered in its partition by the first file placed."""
        if self.folder is None:
            assert self.listing is not None and self.acid_dir is not None
            folders = self.listing.folders
            self.folder = folders.get(self.acid_dir.name)
            if self.folder is None:
                acid_dir = self.acid_dir
                if isinstance(acid_dir, BaseDir):
                    role = FileRole.BASE
                else:
                    role = FileRole.DELETE_DELTA if acid_dir.is_delete else FileRole.DELTA
                self.folder = folders[acid_dir.name] = _Folder(acid_dir, self.acid_dir_path, role)
        return self.folder

    def add_side_file(self, name: str) -> None:
        assert self.folder is not None
        folder = self.folder
        folder.side_files.add(name)
        if name == "_orc_acid_version" and not folder.marked:
            folder.marked = True
            folder.made_unmarked = bool(folder.files)
            folder.kind = None  # the files made from now on are marked


class _Directories(dict[str, _Directory]):
    """The listing's folders by path (up to and with the last ``/``), each worked out on first
    sight from its parent folder and its own name, so a name is parsed once per folder.

    The chain of parents stops at the table root, or for paths outside it at the empty path:
    both have no folders below them yet.
    """

    def __init__(self, prefix: str, insert_only: bool = False) -> None:
        super().__init__({"": _Directory(), prefix: _Directory()})
        self.prefix = prefix
        self.insert_only = insert_only
        #: What a folder's name alone says, by name: every partition of a table names its
        #: base and delta folders alike, so each such name is parsed once, not once a folder.
        self.name_facts: dict[str, _NameFacts] = {}

    def __missing__(self, path: str) -> _Directory:
        parent_path, slash, name = path[:-1].rpartition("/")
        directory = self[path] = self._child(self[parent_path + slash], name)
        return directory

    def _facts(self, name: str) -> _NameFacts:
        facts = self.name_facts.get(name)
        if facts is None:
            facts = self.name_facts[name] = _NameFacts.parse(name)
        return facts

    def _child(self, parent: _Directory, name: str) -> _Directory:
        facts = self._facts(name)
        skipped = parent.skipped or facts.hidden
        if not parent.below_partition:
            if facts.partition_component:
                return _Directory(skipped, [*parent.partition_components, name])
            # a folder of a partition: its base or delta folder, or an original files' folder
            acid_dir = facts.acid_dir
            in_delete_delta = facts.in_delete_delta
            return _Directory(
                skipped=skipped,
                partition_components=parent.partition_components,
                below_partition=[name],
                acid_dir=acid_dir,
                acid_dir_path=(
                    self.prefix + "/".join([*parent.partition_components, name]) if acid_dir else ""
                ),
                in_delete_delta=in_delete_delta,
                misplaced=parent.misplaced,
                plain=(
                    acid_dir is not None
                    and not skipped
                    and not (self.insert_only and in_delete_delta)
                ),
            )
        # nested in the parent's base, delta or other folder
        misplaced = parent.misplaced
        acid_dir = parent.acid_dir
        if acid_dir is None and misplaced is None:
            if facts.partition_component or facts.acid_dir is not None:
                misplaced = name
        return _Directory(
            skipped=skipped,
            partition_components=parent.partition_components,
            below_partition=[*parent.below_partition, name],
            acid_dir=acid_dir,
            acid_dir_path=parent.acid_dir_path if acid_dir else "",
            in_delete_delta=parent.in_delete_delta,
            misplaced=misplaced,
            plain=False,  # files nested below a base or delta folder are never placed inline
        )


@dataclass(frozen=True, slots=True)
class _NameFacts:
    """What placing a folder needs to know about its name."""

    #: Hidden (``_x``, ``.x``) and no side file: nothing below is table data.
    hidden: bool
    #: Named ``k=v`` like a partition folder.
    partition_component: bool
    acid_dir: AcidDir | None
    in_delete_delta: bool

    @classmethod
    def parse(cls, name: str) -> _NameFacts:
        acid_dir = parse_acid_dir(name)
        return cls(
            hidden=is_hidden(name) and not is_side_file(name),
            partition_component=parse_partition_component(name) is not None,
            acid_dir=acid_dir,
            in_delete_delta=isinstance(acid_dir, DeltaDir) and acid_dir.is_delete,
        )


def _group_listing(
    root: str, files: Iterable[StoredFile], insert_only: bool
) -> tuple[list[_PartitionListing], list[UnrecognisedEntry]]:
    partitions: dict[str, _PartitionListing] = {}
    unrecognised: list[UnrecognisedEntry] = []
    prefix = root.rstrip("/") + "/"
    directories = _Directories(prefix, insert_only)
    names = _FileNames()
    new = object.__new__
    for stored in files:
        path = stored.path
        cut = path.rfind("/") + 1
        directory = directories[path[:cut]]
        if directory.plain:  # inside a base or delta folder: nearly every file, placed inline
            name = path[cut:]
            file_name = names[name]
            if file_name.skipped:
                continue  # _SUCCESS, .crc files: never table data
            folder = directory.folder
            if folder is None:  # the folder's first file: its partition and folder appear
                if directory.listing is None:
                    directory.partition_listing(partitions)
                folder = directory.acid_folder()
            if file_name.side_file:
                directory.add_side_file(name)
            elif stored.size == 0:
                pass
            elif directory.in_delete_delta and not file_name.bucket_file:
                unrecognised.append(
                    UnrecognisedEntry(path, f"{name!r} in {folder.dir.name} is not a bucket_N file")
                )
            else:
                if path < folder.last_path:
                    folder.in_path_order = False
                folder.last_path = path
                # _new_data_file(stored, folder.role, bucket, folder.dir, (), folder.marked),
                # inline: this runs once per listed file
                kind = folder.kind
                if kind is None:
                    kind = folder.kind = _FileKind(folder.role, folder.dir, (), folder.marked)
                data_file = new(DataFile)
                _set_file(data_file, stored)
                _set_bucket_id(data_file, file_name.bucket_id)
                _set_kind(data_file, kind)
                folder.files.append(data_file)
            continue
        if directory.skipped:
            continue  # staging folders: never table data
        name = path[cut:]
        file_name = names[name]
        if file_name.skipped:
            continue  # _SUCCESS, .crc files: never table data
        listing = directory.listing or directory.partition_listing(partitions)
        if directory.acid_dir is not None:
            problem = _place_in_folder(directory, name, file_name, stored, insert_only)
        else:
            problem = _place_original(listing, directory, name, file_name, stored)
        if problem:
            unrecognised.append(UnrecognisedEntry(stored.path, problem))
    return [partitions[k] for k in sorted(partitions)], unrecognised


def _place_in_folder(
    directory: _Directory, name: str, file_name: _FileName, stored: StoredFile, insert_only: bool
) -> str | None:
    if insert_only and directory.in_delete_delta:
        return "delete delta in an insert-only table"
    folder = directory.folder or directory.acid_folder()
    # files directly inside a base or delta folder are placed in _group_listing
    assert len(directory.below_partition) > 1
    return f"nested folder inside {folder.dir.name}; ACID folders hold files only"


def _place_original(
    listing: _PartitionListing,
    directory: _Directory,
    name: str,
    file_name: _FileName,
    stored: StoredFile,
) -> str | None:
    """Any non-hidden file outside base and delta folders is an original file, whatever its
    name (Hive's ``AcidUtils.getChildState`` and, below other folders, ``findOriginals``)."""
    if file_name.side_file or stored.size == 0:
        return None
    misplaced = directory.misplaced
    if misplaced is not None:
        kind = "a partition" if parse_partition_component(misplaced) else "a base/delta"
        lost = "partition values" if kind == "a partition" else "write ids"
        return (
            f"folder {directory.below_partition[0]!r} is neither a partition (k=v) nor a "
            f"base/delta folder, yet holds {misplaced!r}, {kind} folder: Hive never writes "
            f"this layout, and reading {name!r} as an original file would lose its {lost} "
            "(is the table location right?)"
        )
    listing.originals.append(stored)
    return None


# -- the walk --------------------------------------------------------------------------------


def bucket_id_of(name: str) -> int:
    """The bucket a data file belongs to, from its name; 0 when the name carries none.

    ``bucket_N`` and ``bucket_N_A`` -> N; ``N_M`` and ``N_M_copy_K`` -> N, as Hive's
    ``AcidUtils.parseBucketId`` parses them. For other names (files LOAD DATA, insert-only
    writers or other tools left) Hive's parser answers -1, which is no bucket a row id can
    carry (``BucketCodec.V1`` refuses it); they count as bucket 0 here, as an unbucketed
    table's single bucket.
    """
    return _bucket_id(parse_bucket_file(name), parse_original_file(name))


def _bucket_id(bucket_file: BucketFileName | None, original_file: OriginalFileName | None) -> int:
    if bucket_file is not None:
        return bucket_file.bucket_id
    return original_file.bucket_id if original_file is not None else 0


@dataclass(frozen=True, slots=True)
class _Plan:
    """What resolving a partition chose, by folder name: partitions nearly always name their
    folders alike, and then choose alike (the choice depends on the names, on whether a base
    holds ``_metadata_acid``, and on the write-id and transaction lists only)."""

    base: str | None
    #: The chosen deltas in reading order: (name, validity, invalid write ids).
    deltas: tuple[tuple[str, RangeValidity, tuple[int, ...]], ...]
    #: The folders left out: (name, reason, detail).
    excluded: tuple[tuple[str, ExclusionReason, str], ...]


def _layout(listing: _PartitionListing) -> tuple[tuple[str, bool], ...]:
    """The key of a partition's plan: its folder names, in listing order, and which of them
    hold ``_metadata_acid``."""
    return tuple(
        (name, "_metadata_acid" in folder.side_files) for name, folder in listing.folders.items()
    )


def _plan(
    listing: _PartitionListing, write_ids: ValidWriteIdList, txns: ValidTxnList | None
) -> _Plan:
    """Choose a partition's base and deltas (Hive's rules 1, 2 and 4)."""
    excluded: list[ExcludedEntry] = []
    folders = [f for f in listing.folders.values() if _visible(f, txns, excluded)]
    base = _choose_base(
        [f for f in folders if isinstance(f.dir, BaseDir)], write_ids, excluded, listing
    )
    deltas = _choose_deltas(
        [f for f in folders if isinstance(f.dir, DeltaDir)],
        base.dir.name if base else None,
        base.dir.write_id if base else 0,
        write_ids,
        excluded,
    )
    name_of = {folder.path: name for name, folder in listing.folders.items()}
    return _Plan(
        base=base.dir.name if base else None,
        deltas=tuple((d.folder.name, d.validity, d.invalid_write_ids) for d in deltas),
        excluded=tuple((name_of[e.path], e.reason, e.detail) for e in excluded),
    )


def _resolve_partition(
    listing: _PartitionListing,
    write_ids: ValidWriteIdList,
    txns: ValidTxnList | None,
    plans: dict[tuple[tuple[str, bool], ...], _Plan] | None = None,
) -> PartitionSnapshot:
    """Resolve one partition; ``plans`` (by :func:`_layout`, for the same write-id and
    transaction lists) saves choosing again for partitions laid out alike."""
    folders = listing.folders
    if plans is None:
        plan = _plan(listing, write_ids, txns)
    else:
        layout = _layout(listing)
        plan = plans.get(layout)
        if plan is None:
            plan = plans[layout] = _plan(listing, write_ids, txns)
    excluded = [
        ExcludedEntry(folders[name].path, reason, detail) for name, reason, detail in plan.excluded
    ]
    base = folders[plan.base] if plan.base is not None else None

    originals = sorted(listing.originals, key=lambda f: f.path)
    if base and originals:
        excluded.extend(
            ExcludedEntry(
                f.path, ExclusionReason.OBSOLETE, f"original file covered by {base.dir.name}"
            )
            for f in originals
        )
        originals = []

    deltas = []
    for name, validity, invalid in plan.deltas:
        folder = folders[name]
        deltas.append(ChosenDelta(folder.dir, folder.path, validity, invalid))  # type: ignore[arg-type]
    slices = _bucket_slices(listing.partition, originals, base, deltas, folders)
    return PartitionSnapshot(
        partition=listing.partition,
        base=base.dir if base else None,
        base_path=base.path if base else None,
        deltas=tuple(deltas),
        slices=slices,
        excluded=tuple(sorted(excluded, key=lambda e: e.path)) if excluded else (),
    )


def _visible(folder: _Folder, txns: ValidTxnList | None, excluded: list[ExcludedEntry]) -> bool:
    txn = folder.dir.visibility_txn_id
    if txn is None or txns is None or txns.is_valid(txn):
        return True
    if txns.is_aborted(txn):
        excluded.append(
            ExcludedEntry(
                folder.path, ExclusionReason.ABORTED, f"compactor transaction {txn} aborted"
            )
        )
    else:
        excluded.append(
            ExcludedEntry(
                folder.path,
                ExclusionReason.NOT_VISIBLE,
                f"compactor transaction {txn} not yet visible",
            )
        )
    return False


def _base_is_valid(folder: _Folder, write_ids: ValidWriteIdList) -> bool:
    if folder.is_compacted_base:
        return write_ids.is_valid_base(folder.dir.write_id)
    return write_ids.is_valid(folder.dir.write_id)  # insert overwrite: a write like any other


def _choose_base(
    bases: list[_Folder],
    write_ids: ValidWriteIdList,
    excluded: list[ExcludedEntry],
    listing: _PartitionListing,
) -> _Folder | None:
    if not bases:
        return None
    bases = sorted(bases, key=lambda f: f.dir.write_id, reverse=True)
    chosen = next((f for f in bases if _base_is_valid(f, write_ids)), None)
    for folder in bases:
        if folder is chosen:
            continue
        if chosen is not None and folder.dir.write_id < chosen.dir.write_id:
            excluded.append(
                ExcludedEntry(
                    folder.path, ExclusionReason.OBSOLETE, f"older than {chosen.dir.name}"
                )
            )
        else:
            kind = "compacted base" if folder.is_compacted_base else "insert-overwrite base"
            excluded.append(
                ExcludedEntry(
                    folder.path,
                    ExclusionReason.INVALID_BASE,
                    f"{kind} not valid for write-id list {write_ids} "
                    "(a write at or below it is open, aborted or above the high watermark)",
                )
            )
    oldest = bases[-1]
    if chosen is None and oldest.is_compacted_base:
        invalid = sorted(set(write_ids.open_ids) | set(write_ids.aborted_ids))
        first_invalid = str(invalid[0]) if invalid else "x"
        raise NotEnoughHistoryError(
            f"Not enough history available for ({write_ids.high_watermark},{first_invalid}). "
            f"Oldest available base: {oldest.path}"
        )
    return chosen


def _choose_deltas(
    deltas: list[_Folder],
    base_name: str | None,
    base_write: int,
    write_ids: ValidWriteIdList,
    excluded: list[ExcludedEntry],
) -> list[ChosenDelta]:
    working: list[tuple[_Folder, RangeValidity]] = []
    for folder in deltas:
        delta: DeltaDir = folder.dir  # type: ignore[assignment]
        validity = write_ids.range_validity(delta.min_write_id, delta.max_write_id)
        if validity is not RangeValidity.NONE:
            working.append((folder, validity))
        elif write_ids.is_range_aborted(delta.min_write_id, delta.max_write_id):
            excluded.append(
                ExcludedEntry(
                    folder.path, ExclusionReason.ABORTED, "every write in its range aborted"
                )
            )
        else:
            excluded.append(
                ExcludedEntry(
                    folder.path,
                    ExclusionReason.NOT_VISIBLE,
                    f"no committed write in its range for write-id list {write_ids}",
                )
            )
    working.sort(key=lambda folder_validity: folder_validity[0].dir.sort_key)

    chosen: list[ChosenDelta] = []
    current = base_write  # the highest write the kept folders cover
    single_write_statement: int | None = None  # set while the last advance was one write
    previous: DeltaDir | None = None
    kept: dict[tuple, str] = {}
    for folder, validity in working:
        delta: DeltaDir = folder.dir  # type: ignore[no-redef]
        identity = (delta.kind, delta.min_write_id, delta.max_write_id, delta.statement_id)
        last_kept = previous.name if previous else base_name
        reason = None  # "covered by" the last kept folder, unless set
        if identity in kept:
            keep, reason = False, f"duplicate of {kept[identity]}"
        elif delta.max_write_id > current:
            if delta.min_write_id <= current:
                raise AcidLayoutError(
                    f"{folder.path} (writes {delta.min_write_id}..{delta.max_write_id}) overlaps "
                    f"{last_kept} (writes up to {current}) "
                    "without covering it: Hive never writes such ranges, and reading both "
                    "would duplicate rows"
                )
            keep = write_ids.range_validity(current + 1, delta.max_write_id) is not (
                RangeValidity.NONE
            )
            if keep:
                current = delta.max_write_id
                single_write_statement = (
                    delta.statement_id if delta.min_write_id == delta.max_write_id else None
                )
            else:
                reason = f"no valid write past {last_kept}"
        elif delta.min_write_id == delta.max_write_id == current:
            # another statement of the same multi-statement write
            keep = single_write_statement is not None and delta.statement_id is not None
        else:
            keep = False
        if (
            not keep
            and previous is not None
            and previous.kind is not delta.kind
            and identity not in kept
            and delta.same_range_and_statement(previous)
        ):
            keep = True  # the delete_delta twin of the delta just kept (or the reverse)
        if not keep:
            reason = reason or f"covered by {last_kept}"
            excluded.append(ExcludedEntry(folder.path, ExclusionReason.OBSOLETE, reason))
            continue
        kept[identity] = delta.name
        previous = delta
        invalid = (
            write_ids.invalid_ids_in(delta.min_write_id, delta.max_write_id)
            if validity is RangeValidity.SOME
            else ()
        )
        chosen.append(ChosenDelta(delta, folder.path, validity, invalid))
    return chosen


def _bucket_slices(
    partition: Partition,
    originals: list[StoredFile],
    base: _Folder | None,
    deltas: list[ChosenDelta],
    folders: dict[str, _Folder],
) -> tuple[BucketSlice, ...]:
    # the partition's chosen files by role, then by bucket, each bucket's in reading order
    original_files: dict[int, list[DataFile]] = {}
    for stored in originals:
        bucket = bucket_id_of(stored.name)
        data_file = DataFile(stored, FileRole.ORIGINAL, bucket)
        original_files.setdefault(bucket, []).append(data_file)
    base_files: dict[int, list[DataFile]] = {}
    if base is not None:
        _collect(base_files, base, ())
    delta_files: dict[int, list[DataFile]] = {}
    delete_delta_files: dict[int, list[DataFile]] = {}
    for chosen in deltas:
        folder = folders[chosen.folder.name]
        if chosen.folder.is_delete:
            _collect(delete_delta_files, folder, chosen.invalid_write_ids)
        else:
            _collect(delta_files, folder, chosen.invalid_write_ids)
    buckets = sorted({*original_files, *base_files, *delta_files, *delete_delta_files})
    slices = []
    new = object.__new__
    for bucket in buckets:
        # _new_bucket_slice(partition, bucket, ...), inline: this runs once per slice
        bucket_slice = new(BucketSlice)
        _set_partition(bucket_slice, partition)
        _set_slice_bucket_id(bucket_slice, bucket)
        files = original_files.get(bucket)
        _set_original_files(bucket_slice, tuple(files) if files else ())
        files = base_files.get(bucket)
        _set_base_files(bucket_slice, tuple(files) if files else ())
        files = delta_files.get(bucket)
        _set_delta_files(bucket_slice, tuple(files) if files else ())
        files = delete_delta_files.get(bucket)
        _set_delete_delta_files(bucket_slice, tuple(files) if files else ())
        slices.append(bucket_slice)
    return tuple(slices)


def _collect(
    files_by_bucket: dict[int, list[DataFile]],
    folder: _Folder,
    invalid_write_ids: tuple[int, ...],
) -> None:
    """Add a chosen folder's data files to ``files_by_bucket``, each bucket's in path order."""
    data_files = folder.files
    if invalid_write_ids or folder.made_unmarked:
        kind = _FileKind(folder.role, folder.dir, invalid_write_ids, folder.acid_version_marked)
        for data_file in data_files:  # still being made: their slots are set directly
            _set_kind(data_file, kind)
    if not folder.in_path_order:
        data_files.sort(key=_path_of)  # stable: ties keep the listing's order
    for data_file in data_files:
        bucket = data_file.bucket_id
        in_bucket = files_by_bucket.get(bucket)
        if in_bucket is None:
            files_by_bucket[bucket] = [data_file]
        else:
            in_bucket.append(data_file)


def _path_of(data_file: DataFile) -> str:
    return data_file.file.path


# -- the guarantee: nothing silently left out ------------------------------------------------

#: How a plan or manifest records a file the caller chose to leave out.
IGNORED_PREFIX = "left out by choice (ignore_unrecognised): "
_NAMED_AT_MOST = 10


def check_placed(snapshot: TableSnapshot, *, ignore_unrecognised: bool = False) -> tuple[str, ...]:
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


def _shown(snapshot: TableSnapshot, path: str) -> str:
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
) -> TableSnapshot:
    """Resolve a snapshot from an already listed set of files below ``root``."""
    from .alike_partitions import _resolve_listing, _Resolver  # it builds on the walk above

    write_ids = write_ids or ValidWriteIdList.all_committed()
    listed = files if isinstance(files, list) else list(files)
    with _cyclic_gc_paused():
        resolver = _Resolver(write_ids, txns, insert_only)
        partitions, unrecognised = _resolve_listing(root, listed, resolver)
        del resolver  # freed before the collector is back, which then looks at fewer objects
    return TableSnapshot(
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
) -> TableSnapshot:
    """Resolve a snapshot from the given partitions only, each listed at its own location
    (a metastore's partitions, which may lie outside ``root``), ``max_workers`` at a time."""
    from .alike_partitions import _PATH_OF, _Resolver  # it builds on the walk above

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
    partitions: list[PartitionSnapshot] = []
    unrecognised: list[UnrecognisedEntry] = []
    with _cyclic_gc_paused():
        resolver = _Resolver(write_ids, txns, insert_only)
        plans = resolver.plans
        for location, path, files in zip(locations, paths, listed, strict=True):
            prefix = path.rstrip("/") + "/"
            if all(map(str.startswith, map(_PATH_OF, files), repeat(prefix))) and resolver.add(
                location.partition, files, prefix
            ):
                continue  # resolved on its own, or to be made from a template
            listings, odd = _group_listing(path, files, insert_only)
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
                partitions.append(_resolve_partition(listing, write_ids, txns, plans))
        partitions += resolver.snapshots()
        del listed, resolver
    return TableSnapshot(
        root=root,
        write_ids=write_ids,
        txns=txns,
        insert_only=insert_only,
        partitions=tuple(sorted(partitions, key=lambda p: p.partition.path)),
        unrecognised=tuple(unrecognised),
        definition=definition,
    )


def resolve_snapshot(
    table_uri: str | TableSource,
    write_ids: ValidWriteIdList | str | None = None,
    txns: ValidTxnList | str | None = None,
    *,
    insert_only: bool = False,
    filesystem: AbstractFileSystem | None = None,
    storage_options: dict[str, Any] | None = None,
) -> TableSnapshot:
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
