"""A table's listing grouped for resolution: per partition, its folders and files.

A listing repeats itself: every file of a folder shares its path up to the last "/", and a table
uses a handful of file names (bucket_00000 ...) in every folder. So each folder is worked out
once (hidden or not, its partition, the base or delta it is in) and each distinct file name is
parsed once. Files outside base and delta folders are Hive's *original files*, whatever their
name (``AcidUtils.getChildState``, ``findOriginals``); their bucket comes from the name
(:func:`bucket_id_of`). What :mod:`.acid_state` chooses from is made here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .listing import StoredFile
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
    DataFile,
    FileKind,
    FileRole,
    UnrecognisedEntry,
    set_bucket_id,
    set_file,
    set_kind,
)

# -- grouping the listing --------------------------------------------------------------------
#
# A listing repeats itself: every file of a folder shares its path up to the last "/", and a
# table uses a handful of file names (bucket_00000 ...) in every folder. So each folder is
# worked out once (hidden or not, its partition, the base or delta it is in) and each distinct
# file name is parsed once; what is left per file is a cut at the last "/" and two lookups.


@dataclass(slots=True)
class Folder:
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
    kind: FileKind | None = None

    @property
    def is_compacted_base(self) -> bool:
        return isinstance(self.dir, BaseDir) and (
            self.dir.visibility_txn_id is not None or "_metadata_acid" in self.side_files
        )

    @property
    def acid_version_marked(self) -> bool:
        return "_orc_acid_version" in self.side_files


@dataclass
class PartitionListing:
    partition: Partition
    folders: dict[str, Folder] = field(default_factory=dict)
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
    #: insert-only table: its files are placed the common way (inline in group_listing).
    plain: bool = False
    #: Set by the first file placed (so that hidden files alone make no partition or folder).
    listing: PartitionListing | None = None
    folder: Folder | None = None

    def partition_listing(self, partitions: dict[str, PartitionListing]) -> PartitionListing:
        if self.listing is None:
            path = "/".join(self.partition_components)
            self.listing = partitions.get(path)
            if self.listing is None:
                partition = Partition.from_components(self.partition_components)
                self.listing = partitions[path] = PartitionListing(partition)
        return self.listing

    def acid_folder(self) -> Folder:
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
                self.folder = folders[acid_dir.name] = Folder(acid_dir, self.acid_dir_path, role)
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


def group_listing(
    root: str, files: Iterable[StoredFile], insert_only: bool
) -> tuple[list[PartitionListing], list[UnrecognisedEntry]]:
    """The listed files below ``root`` grouped per partition into folders and files, and the files
    that fit no partition (as unrecognised entries).

    :param root: the table's folder.
    :param files: the listed files below it.
    :param insert_only: the table is insert-only (its deltas have no delete events).
    """
    partitions: dict[str, PartitionListing] = {}
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
                    kind = folder.kind = FileKind(folder.role, folder.dir, (), folder.marked)
                data_file = new(DataFile)
                set_file(data_file, stored)
                set_bucket_id(data_file, file_name.bucket_id)
                set_kind(data_file, kind)
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
    # files directly inside a base or delta folder are placed in group_listing
    assert len(directory.below_partition) > 1
    return f"nested folder inside {folder.dir.name}; ACID folders hold files only"


def _place_original(
    listing: PartitionListing,
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
